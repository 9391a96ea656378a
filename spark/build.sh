#!/usr/bin/env bash
# Builds the Spark plugin jar with Maven (spark/pom.xml) around the native
# directory CMake built (BUILD/jar-native) and prints its path.
# Usage: spark/build.sh BUILD_DIR  (default: build)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(realpath -m "${1:-build}")
native="$build/jar-native"
[ -f "$native/org/mtshuffle/native/linux-x86_64/files.txt" ] || {
  echo "spark/build.sh: $native has no native library: build the C project in $build first" >&2; exit 1; }
# Maven copies the native directory over what an earlier build left: a library that build carried
# and this one does not would stay in the jar.
rm -rf "$build/spark/classes/org/mtshuffle/native"
mvn -q -B -Dstyle.color=never -f "$here/pom.xml" -Dmts.native.dir="$native" -Dmts.build.dir="$build/spark" package >&2
echo "$build/spark/mtshuffle-spark.jar"
