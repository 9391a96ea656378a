#!/usr/bin/env bash
# A Spark standalone master and N workers (default 2), from the pip-installed
# pyspark, each worker with its own external shuffle service: worker i runs
# on 127.0.0.i with 2/N cores (at least 1), its shuffle service on port
# 7336+i. Worker i's executors inherit that port (JAVA_TOOL_OPTIONS: Spark
# lets an executor's own -Dspark.*.port win over the driver's), so reducers
# on one worker fetch the other worker's map outputs from its service.
# Executors of worker i keep their files (shuffle outputs) under WORKDIR/local<i>.
# Usage: cluster.sh start WORKDIR [N] | stop WORKDIR
set -euo pipefail
cmd=$1
work=$(realpath -m "$2")
n=${3:-2}
spark_home=$(python3 -c "import pyspark, os; print(os.path.dirname(pyspark.__file__))")
export SPARK_HOME=$spark_home SPARK_MASTER_HOST=127.0.0.1
export SPARK_LOG_DIR=$work/logs SPARK_PID_DIR=$work/pids SPARK_NO_DAEMONIZE=
export SPARK_IDENT_STRING=mtshuffle-test
mkdir -p "$SPARK_LOG_DIR" "$SPARK_PID_DIR" "$work/worker"
case "$cmd" in
  start)
    SPARK_LOCAL_IP=127.0.0.1 nohup "$spark_home/bin/spark-class" org.apache.spark.deploy.master.Master \
      --host 127.0.0.1 --port 7077 --webui-port 18080 > "$SPARK_LOG_DIR/master.out" 2>&1 &
    echo $! > "$SPARK_PID_DIR/master.pid"
    cores=$(( 2 / n )); [ "$cores" -ge 1 ] || cores=1
    for i in $(seq "$n"); do
      mkdir -p "$work/local$i"
      SPARK_LOCAL_DIRS=$work/local$i SPARK_LOCAL_IP=127.0.0.$i JAVA_TOOL_OPTIONS="-Dspark.shuffle.service.port=$((7336 + i))" \
      SPARK_WORKER_OPTS="-Dspark.shuffle.service.enabled=true -Dspark.worker.cleanup.enabled=false" \
      nohup "$spark_home/bin/spark-class" org.apache.spark.deploy.worker.Worker spark://127.0.0.1:7077 \
        --host 127.0.0.$i --cores "$cores" --memory 6g --webui-port $((18080 + i)) --work-dir "$work/worker" \
        > "$SPARK_LOG_DIR/worker$i.out" 2>&1 &
      echo $! > "$SPARK_PID_DIR/worker$i.pid"
    done
    for t in $(seq 90); do  # wait for the workers to register
      up=$(cat "$SPARK_LOG_DIR"/worker*.out 2>/dev/null | grep -c "Successfully registered with master" || true)
      [ "$up" -ge "$n" ] && exit 0
      sleep 1
    done
    echo "the workers did not register"; tail -20 "$SPARK_LOG_DIR"/*.out; exit 1
    ;;
  stop)
    # only the processes this script started (their pid files), and their executors
    for f in "$SPARK_PID_DIR"/worker*.pid "$SPARK_PID_DIR"/master.pid; do
      [ -f "$f" ] || continue
      pid=$(cat "$f")
      for c in $(pgrep -P "$pid" 2>/dev/null); do kill "$c" 2>/dev/null || true; done
      kill "$pid" 2>/dev/null || true
    done
    ;;
esac
