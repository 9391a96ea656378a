#!/usr/bin/env bash
# A Spark standalone master and one worker with the external shuffle service,
# on 127.0.0.1 only, from the pip-installed pyspark. Usage: cluster.sh start|stop WORKDIR
set -euo pipefail
cmd=$1
work=$(realpath -m "$2")
spark_home=$(python3 -c "import pyspark, os; print(os.path.dirname(pyspark.__file__))")
export SPARK_HOME=$spark_home SPARK_LOCAL_IP=127.0.0.1 SPARK_MASTER_HOST=127.0.0.1
export SPARK_LOG_DIR=$work/logs SPARK_PID_DIR=$work/pids SPARK_WORKER_DIR=$work/worker SPARK_NO_DAEMONIZE=
export SPARK_IDENT_STRING=mtshuffle-test
export SPARK_WORKER_OPTS="-Dspark.shuffle.service.enabled=true -Dspark.shuffle.service.port=7337 -Dspark.worker.cleanup.enabled=false"
mkdir -p "$SPARK_LOG_DIR" "$SPARK_PID_DIR" "$SPARK_WORKER_DIR"
case "$cmd" in
  start)
    nohup "$spark_home/bin/spark-class" org.apache.spark.deploy.master.Master --host 127.0.0.1 --port 7077 \
      --webui-port 18080 > "$SPARK_LOG_DIR/master.out" 2>&1 &
    echo $! > "$SPARK_PID_DIR/master.pid"
    nohup "$spark_home/bin/spark-class" org.apache.spark.deploy.worker.Worker spark://127.0.0.1:7077 \
      --host 127.0.0.1 --cores 2 --memory 6g --webui-port 18081 --work-dir "$SPARK_WORKER_DIR" \
      > "$SPARK_LOG_DIR/worker.out" 2>&1 &
    echo $! > "$SPARK_PID_DIR/worker.pid"
    for i in $(seq 90); do  # wait for the worker to register
      if grep -q "Successfully registered with master" "$SPARK_LOG_DIR/worker.out" 2>/dev/null; then exit 0; fi
      sleep 1
    done
    echo "the worker did not register"; tail -20 "$SPARK_LOG_DIR"/*.out; exit 1
    ;;
  stop)
    for d in worker master; do
      [ -f "$SPARK_PID_DIR/$d.pid" ] && kill "$(cat "$SPARK_PID_DIR/$d.pid")" 2>/dev/null || true
    done
    pkill -f "deploy.worker.Worker spark://127.0.0.1:7077" 2>/dev/null || true
    pkill -f "deploy.master.Master --host 127.0.0.1" 2>/dev/null || true
    pkill -f CoarseGrainedExecutorBackend 2>/dev/null || true
    ;;
esac
