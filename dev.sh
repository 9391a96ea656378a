#!/usr/bin/env bash
# Set-up, build and run on a fresh Debian machine.
#   ./dev.sh demo   install what is needed, build, run the mtshuffle write demo
#   ./dev.sh test   install what is needed, build, run every test with ctest
#   ./dev.sh bench  install what is needed, build, run the whole benchmark suite
#   ./dev.sh spark-jar  the Spark plugin's one jar (Maven), native library inside
#   ./dev.sh spark  the Spark plugin on a real standalone cluster of two workers
#                   (127.0.0.1 and 127.0.0.2, a shuffle service each): results
#                   against Spark's own shuffle, an executor killed; on Spark
#                   4.0.1, then on the newest Spark 4 (requirements-latest.txt)
#   ./dev.sh spark-bench  the seed's experiment, Spark's writers against mtshuffle
#   ./dev.sh reliability  the whole suite under ASan+UBSan, the threaded tests
#                   under TSan, valgrind memcheck on the round trips, and a
#                   short run of every fuzz target from its seed corpus
set -euo pipefail
cd "$(dirname "$0")"
BUILD=${BUILD:-build}

packages="cmake ninja-build gcc pkg-config liblz4-dev libzstd-dev libxxhash-dev zlib1g-dev libisal-dev
          openjdk-17-jdk-headless maven liblz4-java libzstd-jni-java libzstd-jni1 python3"
reliability_packages="clang-14 libclang-rt-14-dev valgrind"

install_packages() {
  local missing=()
  for p in $packages ${1:-}; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  echo "installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

install_python() {
  python3 -c "import matplotlib" 2>/dev/null || python3 -m pip install -q matplotlib
}

# Warnings are errors and a skipped test fails: everything the tests need
# is installed by this script, so nothing may be missing. ISA-L's checksums
# are required here; the ASan build of `reliability` runs the whole suite
# without them (the fallback a machine without libisal gets).
# zstd's source goes into the plugin jar's JNI library (so that the jar loads
# on glibc 2.17 and later): fetched once into $BUILD/_deps from Debian's
# archive, or given as MTS_ZSTD_SOURCE_DIR.
build() {
  local zstd=${MTS_ZSTD_SOURCE_DIR:-}
  if [ -z "$zstd" ]; then
    zstd=$(python3 spark/native/fetch_zstd.py "$BUILD/_deps") || {
      echo "dev.sh: cannot fetch zstd's source for the plugin jar (set MTS_ZSTD_SOURCE_DIR to one)" >&2; exit 1; }
  fi
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMTS_WERROR=ON -DMTS_STRICT_TESTS=ON \
    -DMTS_WITH_ISAL=ON -DMTS_ZSTD_SOURCE_DIR="$zstd" >/dev/null
  cmake --build "$BUILD"
}

# pyspark, the plugin jar (Maven) and a running cluster of $1 workers; sets jar and work.
spark_cluster() {
  install_packages
  python3 -c "import pyspark" 2>/dev/null || python3 -m pip install -q -r spark/requirements.txt
  build
  jar=$(spark/build.sh "$BUILD")
  work=$(mktemp -d "${TMPDIR:-/tmp}/mts-spark-XXXXXX")
  trap 'spark/test/cluster.sh stop "$work"; rm -rf "$work"' EXIT
  spark/test/cluster.sh start "$work" "$1"
}

case "${1:-}" in
  demo)
    install_packages
    build
    "$BUILD/mtshuffle" write --dir out/demo --tasks 16 --parallel 1 --task-mib 64 --partitions 200 --threads 2
    "$BUILD/mtshuffle" inspect out/demo/shuffle_0_0_0.data --summary
    ;;
  test)
    install_packages
    install_python
    build
    ctest --test-dir "$BUILD" --output-on-failure
    ;;
  reliability)
    install_packages "$reliability_packages"
    install_python
    FUZZ_SECONDS=${FUZZ_SECONDS:-20}
    echo "== ASan + UBSan: the whole suite"
    cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DMTS_SANITIZE=address -DMTS_STRICT_TESTS=ON \
      -DMTS_WITH_ISAL=OFF >/dev/null
    cmake --build build-asan
    ctest --test-dir build-asan --output-on-failure
    echo "== TSan: the threaded tests"
    cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DMTS_SANITIZE=thread -DMTS_STRICT_TESTS=ON >/dev/null
    cmake --build build-tsan
    MTS_TEST_TRIALS=12 ctest --test-dir build-tsan --output-on-failure -R 'engine|shared|api|files|corrupt|faults|roundtrip'
    echo "== valgrind memcheck: the round trips"
    build
    MTS_TEST_TRIALS=15 valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
      "$BUILD/tests/test_roundtrip" > "$BUILD/valgrind-roundtrip.log" 2>&1 || { tail -40 "$BUILD/valgrind-roundtrip.log"; exit 1; }
    tail -1 "$BUILD/valgrind-roundtrip.log"
    echo "== libFuzzer: $FUZZ_SECONDS s per target from tests/fuzz/corpus"
    CC=clang-14 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug -DMTS_FUZZ=ON -DMTS_SANITIZE=fuzzer \
      -DMTS_BUILD_TESTS=OFF >/dev/null
    cmake --build build-fuzz
    scratch_dirs() { { ls -d /dev/shm/mts-fuzz-* /tmp/mts-fuzz-* 2>/dev/null || true; } | wc -l; }
    scratch_before=$(scratch_dirs)
    for t in reader inspect writer; do
      work=$(mktemp -d)
      (cd "$work" && "$OLDPWD/build-fuzz/fuzz_$t" -max_total_time="$FUZZ_SECONDS" -timeout=10 -print_final_stats=1 \
        "$work" "$OLDPWD/tests/fuzz/corpus/$t" > "$work/log" 2>&1) || { tail -60 "$work/log"; exit 1; }
      echo "fuzz_$t: $(grep -E '^stat::number_of_executed_units' "$work/log" | awk '{print $2}') runs, no failure"
      rm -rf "$work"
    done
    if [ "$(scratch_dirs)" != "$scratch_before" ]; then
      echo "the fuzz targets left scratch directories behind:"; ls -d /dev/shm/mts-fuzz-* /tmp/mts-fuzz-* 2>/dev/null || true
      exit 1
    fi
    ;;
  spark-jar)
    install_packages
    build
    spark/build.sh "$BUILD"
    ;;
  spark)
    spark_cluster 2
    python3 spark/test/e2e.py --jar "$jar" --native "$BUILD/libmtshuffle_jni.so" --work "$work" --rows 2000000 --kill
    # Again on the newest Spark 4 (spark/requirements-latest.txt): the jar is built against 4.0, and
    # 4.1 changed internals it uses. Its pyspark goes to $BUILD/_deps, ahead on PYTHONPATH.
    spark/test/cluster.sh stop "$work"
    latest="$BUILD/_deps/pyspark-latest"
    want=$(sed -n 's/^pyspark==//p' spark/requirements-latest.txt)
    have=$(PYTHONPATH="$latest" python3 -c "import pyspark; print(pyspark.__version__)" 2>/dev/null || true)
    [ "$have" = "$want" ] || { rm -rf "$latest"; python3 -m pip install -q --root-user-action=ignore --target "$latest" -r spark/requirements-latest.txt; }
    echo "== e2e on pyspark $want"
    PYTHONPATH="$latest" spark/test/cluster.sh start "$work" 2
    PYTHONPATH="$latest" python3 spark/test/e2e.py --jar "$jar" --native "$BUILD/libmtshuffle_jni.so" --work "$work" \
      --rows 2000000
    ;;
  spark-bench)  # one worker of 2 cores, as the seed's local[2]; ROWS, REPS, SIZES to change the run
    spark_cluster 1
    python3 spark/test/spark_bench.py --jar "$jar" --native "$BUILD/libmtshuffle_jni.so" --work "$work" \
      --rows "${ROWS:-24000000}" --reps "${REPS:-5}" --sizes "${SIZES:-128m,32m}" --out bench/results/spark-bench.json
    ;;
  bench)
    install_packages
    install_python
    build
    python3 bench/suite.py
    ;;
  *)
    echo "usage: ./dev.sh demo | test | bench | spark-jar | spark | spark-bench | reliability" >&2
    exit 2
    ;;
esac
