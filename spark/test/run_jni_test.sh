#!/usr/bin/env bash
# The JNI binding against lz4-java and zstd-jni, without Spark, twice: the
# library named by -Dmtshuffle.native.library, then the jar's layout (the
# native directory on the class path, extracted by NativeLibrary) with no
# library path at all. Exit 77 if Java or the Debian jars are missing.
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
