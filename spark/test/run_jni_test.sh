#!/usr/bin/env bash
# The JNI binding against lz4-java and zstd-jni, without Spark. Exit 77 if
# Java or the Debian jars are missing.
set -euo pipefail
lib=$(realpath "$1")
src=$(cd "$(dirname "$0")/.." && pwd)
jars=/usr/share/java/lz4-java.jar:/usr/share/java/zstd-jni.jar
command -v javac >/dev/null || { echo "javac not found"; exit 77; }
for j in ${jars//:/ }; do [ -f "$j" ] || { echo "$j not found"; exit 77; }; done
work=$(mktemp -d "${TMPDIR:-/tmp}/mts-jni-XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/classes" "$work/out"
javac -d "$work/classes" -cp "$jars" "$src/java/org/mtshuffle/NativeShuffleWriter.java" "$src/test/NativeWriterTest.java"
java -Dmtshuffle.native.library="$lib" -Djava.library.path=/usr/lib/x86_64-linux-gnu:/usr/lib/jni \
  -cp "$work/classes:$jars" NativeWriterTest "$work/out"
