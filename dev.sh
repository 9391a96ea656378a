#!/usr/bin/env bash
# Set-up, build and run on a fresh Debian machine.
#   ./dev.sh demo   install what is needed, build, run the mtshuffle write demo
#   ./dev.sh test   install what is needed, build, run every test with ctest
#   ./dev.sh bench  install what is needed, build, run the whole benchmark suite
set -euo pipefail
cd "$(dirname "$0")"
BUILD=${BUILD:-build}

packages="cmake ninja-build gcc pkg-config liblz4-dev libzstd-dev libxxhash-dev zlib1g-dev
          openjdk-17-jdk-headless liblz4-java libzstd-jni-java libzstd-jni1 python3"

install_packages() {
  local missing=()
  for p in $packages; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
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

build() {
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BUILD"
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
  bench)
    install_packages
    install_python
    build
    python3 bench/suite.py
    ;;
  *)
    echo "usage: ./dev.sh demo | test | bench" >&2
    exit 2
    ;;
esac
