#!/usr/bin/env bash
# Compatibility: C writes, Spark's Java libraries read. Exit 77 if Java or the
# Debian jars (liblz4-java, libzstd-jni-java) are missing.
set -euo pipefail
gen=$1
reader=$2
src=$(cd "$(dirname "$0")" && pwd)
jars=/usr/share/java/lz4-java.jar:/usr/share/java/zstd-jni.jar
command -v javac >/dev/null || { echo "javac not found"; exit 77; }
for j in ${jars//:/ }; do [ -f "$j" ] || { echo "$j not found"; exit 77; }; done
work=$(mktemp -d "${TMPDIR:-/tmp}/mts-compat-XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/classes" "$work/out"
javac -d "$work/classes" -cp "$jars" "$src/CompatTest.java"
"$gen" "$work/out"
run_java() { java -Djava.library.path=/usr/lib/x86_64-linux-gnu:/usr/lib/jni -cp "$work/classes:$jars" CompatTest "$@"; }
run_java "$work/out"
# The other way round: Java writes as Spark does, the C reader reads.
mkdir "$work/spark"
run_java write "$work/spark"
"$reader" "$work/spark"
