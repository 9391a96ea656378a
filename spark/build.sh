#!/usr/bin/env bash
# Builds the Spark plugin jar against the Spark jars of the pip-installed
# pyspark (pinned in spark/requirements.txt). Usage: spark/build.sh OUT_DIR
set -euo pipefail
out=$(realpath -m "${1:-build/spark}")
here=$(cd "$(dirname "$0")" && pwd)
spark_home=$(python3 -c "import pyspark, os; print(os.path.dirname(pyspark.__file__))")
cp=$(ls "$spark_home"/jars/*.jar | tr '\n' ':')
rm -rf "$out/classes"
mkdir -p "$out/classes"
javac -Xlint:unchecked -d "$out/classes" -cp "$cp" \
  "$here/java/org/mtshuffle/NativeShuffleWriter.java" "$here"/java/org/apache/spark/shuffle/mtshuffle/*.java
(cd "$out/classes" && jar cf "$out/mtshuffle-spark.jar" org)
echo "$out/mtshuffle-spark.jar"
