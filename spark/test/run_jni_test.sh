#!/usr/bin/env bash
# The JNI binding against lz4-java and zstd-jni, without Spark, three times:
# the library named by -Dmtshuffle.native.library, then the jar's layout (the
# native directory on the class path, extracted by NativeLibrary) with no
# library path at all, then that again with java.io.tmpdir on a noexec mount
# (in a mount namespace of its own), where NativeLibrary must fall back to the
# working directory. Exit 77 if Java or the Debian jars are missing, or (after
# the other runs) if no noexec mount could be made: that needs root or user
# namespaces.
# Usage: run_jni_test.sh LIBMTSHUFFLE_JNI JAR_NATIVE_DIR
set -euo pipefail
lib=$(realpath "$1")
bundle=$(realpath "$2")
src=$(cd "$(dirname "$0")/.." && pwd)
jars=/usr/share/java/lz4-java.jar:/usr/share/java/zstd-jni.jar
command -v javac >/dev/null || { echo "javac not found"; exit 77; }
for j in ${jars//:/ }; do [ -f "$j" ] || { echo "$j not found"; exit 77; }; done
work=$(mktemp -d "${TMPDIR:-/tmp}/mts-jni-XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/classes" "$work/out" "$work/tmp"
javac -d "$work/classes" -cp "$jars" "$src"/java/org/mtshuffle/*.java "$src/test/NativeWriterTest.java"
echo "== the library named by mtshuffle.native.library"
java -Dmtshuffle.native.library="$lib" -Djava.library.path=/usr/lib/x86_64-linux-gnu:/usr/lib/jni \
  -cp "$work/classes:$jars" NativeWriterTest "$work/out" "$lib"
echo "== the jar's native directory, extracted"
# zstd-jni still needs its own library (Debian: /usr/lib/x86_64-linux-gnu); mtshuffle's comes from the class path
java -Djava.io.tmpdir="$work/tmp" -Djava.library.path=/usr/lib/x86_64-linux-gnu \
  -cp "$work/classes:$bundle:$jars" NativeWriterTest "$work/out" "jar:"
left=$(find "$work/tmp" -mindepth 1 | wc -l)
[ "$left" -eq 0 ] || { echo "the extracted native files were left behind:"; find "$work/tmp"; exit 1; }

echo "== the jar's native directory, java.io.tmpdir mounted noexec: extracted under the working directory"
mkdir "$work/noexec" "$work/cwd"
ns=(unshare --mount --propagation private)
[ "$(id -u)" -eq 0 ] || ns+=(--map-root-user)
if ! "${ns[@]}" true 2>"$work/unshare.err"; then
  echo "SKIP: no mount namespace for the noexec run: $(cat "$work/unshare.err")"
  exit 77
fi
rc=0
"${ns[@]}" bash -c '
  set -o pipefail
  mount -t tmpfs -o noexec,size=16m mtsnoexec "$1" || exit 77
  cd "$2"
  java -Djava.io.tmpdir="$1" -Djava.library.path=/usr/lib/x86_64-linux-gnu -cp "$3" NativeWriterTest "$4" "jar:" \
    | tee "$5" || exit 1
  left=$(find "$1" -mindepth 1 | wc -l)
  [ "$left" -eq 0 ] || { echo "files were left on the noexec mount:"; find "$1"; exit 1; }
' bash "$work/noexec" "$work/cwd" "$work/classes:$bundle:$jars" "$work/out" "$work/noexec.log" || rc=$?
[ "$rc" -ne 77 ] || { echo "SKIP: could not mount a noexec tmpfs for the noexec run"; exit 77; }
[ "$rc" -eq 0 ] || exit "$rc"
grep -q "extracted to $work/cwd/mtshuffle-native-" "$work/noexec.log" ||
  { echo "the library was not extracted under the working directory $work/cwd"; exit 1; }
grep -q "before that, extracting .* under $work/noexec: " "$work/noexec.log" ||
  { echo "the failure under the noexec java.io.tmpdir is not reported"; exit 1; }
left=$(find "$work/cwd" -mindepth 1 | wc -l)
[ "$left" -eq 0 ] || { echo "the extracted native files were left in the working directory:"; find "$work/cwd"; exit 1; }
