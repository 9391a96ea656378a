#!/usr/bin/env python3
"""End-to-end on a real Spark standalone cluster (cluster.sh): the seed's query
(a store_sales-like Parquet table, repartitioned on two key columns into 200
partitions, every column counted), a group-by and a join, each run with
Spark's own shuffle and with mtshuffle's ShuffleManager: results must be
identical. With --kill, an executor is killed during the mtshuffle map stage
and the results must still be identical. Prints the stages' shuffle write
times from Spark's REST API.

    e2e.py --jar JAR --native LIB --work DIR [--rows N] [--kill] [--reps N]
"""
import argparse, json, os, subprocess, sys, threading, time, urllib.request

CHILD = r'''
import json, os, subprocess, sys, threading, time, urllib.request
from pyspark.sql import SparkSession, functions as F
cfg = json.loads(sys.argv[1])
b = (SparkSession.builder.master("spark://127.0.0.1:7077").appName("mtshuffle-e2e-" + cfg["mode"])
     .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
     .config("spark.ui.port", "4050").config("spark.shuffle.service.enabled", "true")
     .config("spark.executor.memory", "3g").config("spark.sql.shuffle.partitions", "200")
     .config("spark.sql.adaptive.enabled", "false").config("spark.sql.autoBroadcastJoinThreshold", "-1")
     .config("spark.task.maxFailures", "8"))
if cfg["mode"] == "mts":  # as a Spark 4 user deploys it: the one jar (native library inside) and one conf
    b = b.config("spark.jars", cfg["jar"]).config("spark.shuffle.manager", "org.apache.spark.shuffle.mtshuffle.MtsShuffleManager")
elif cfg["mode"] == "mts-classpath":  # the older route: the jar on the class path, the library named
    lib = "-Dmtshuffle.native.library=" + cfg["native"]
    b = (b.config("spark.shuffle.manager", "org.apache.spark.shuffle.mtshuffle.MtsShuffleManager")
          .config("spark.driver.extraClassPath", cfg["jar"]).config("spark.executor.extraClassPath", cfg["jar"])
          .config("spark.driver.extraJavaOptions", lib).config("spark.executor.extraJavaOptions", lib))
for k, v in cfg.get("conf", {}).items():
    b = b.config(k, v)
s = b.getOrCreate()
sc = s.sparkContext
t = s.read.parquet(cfg["table"])
cols = ["ss_sold_date_sk", "ss_sold_time_sk", "ss_item_sk", "ss_customer_sk", "ss_cdemo_sk", "ss_hdemo_sk", "ss_addr_sk"]

def killer():
    # wait for the map stage to run tasks, then kill the executor JVM
    while True:
        st = [sc.statusTracker().getStageInfo(i) for i in sc.statusTracker().getActiveStageIds()]
        if any(x and x.numCompletedTasks >= 1 for x in st):
            break
        time.sleep(0.05)
    # this application's executors only: their command line names its app id
    app = sc.applicationId
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            args = open("/proc/%s/cmdline" % pid, "rb").read().split(b"\0")
        except OSError:
            continue
        if any(a.endswith(b"CoarseGrainedExecutorBackend") for a in args) and \
                b"--app-id" in args and args[args.index(b"--app-id") + 1] == app.encode():
            pids.append(int(pid))
    victim = min(pids) if pids else None
    if victim:
        os.kill(victim, 9)
    print("KILLED", victim is not None, victim, "of", pids, file=sys.stderr, flush=True)

res = {}
times = []
for rep in range(cfg["reps"]):
    if cfg["kill"] and rep == 0:
        threading.Thread(target=killer, daemon=True).start()
    t0 = time.time()
    q1 = t.select(*cols).repartition(200, F.col("ss_sold_date_sk"), F.col("ss_sold_time_sk")) \
          .select(*[F.count(c).alias(c) for c in cols]).collect()[0].asDict()
    times.append(time.time() - t0)
    res["seed_query"] = q1
if not cfg["kill"] and not cfg.get("seed_only"):
    g = t.groupBy("ss_item_sk").agg(F.count("*").alias("n"), F.sum("ss_customer_sk").alias("s")).orderBy("ss_item_sk").collect()
    res["group_by"] = [list(r) for r in g]
    per_cust = t.groupBy("ss_customer_sk").agg(F.count("*").alias("visits"))
    j = t.join(per_cust, "ss_customer_sk").groupBy("ss_hdemo_sk").agg(F.sum("visits").alias("v"), F.count("*").alias("n")) \
         .orderBy("ss_hdemo_sk").collect()
    res["join"] = [list(r) for r in j]
# shuffle write time and bytes of every stage, from Spark's REST API
def ms(ts):  # "2026-12-02T15:31:14.123GMT"
    import datetime
    if not ts: return 0
    d = datetime.datetime.strptime(ts.replace("GMT", ""), "%Y-%m-%dT%H:%M:%S.%f")
    return int(d.timestamp() * 1000)
app = sc.applicationId
stages = json.load(urllib.request.urlopen("http://127.0.0.1:4050/api/v1/applications/%s/stages?status=complete" % app))
res["stages"] = [{"id": x["stageId"], "name": x["name"][:60], "shuffle_write_bytes": x["shuffleWriteBytes"],
                  "shuffle_write_time_ns": x["shuffleWriteTime"], "executor_run_time_ms": x["executorRunTime"],
                  "remote_bytes_read": x.get("shuffleRemoteBytesRead", 0), "shuffle_read_bytes": x.get("shuffleReadBytes", 0),
                  "duration_ms": ms(x.get("completionTime")) - ms(x.get("submissionTime"))}
                 for x in stages]
res["seed_query_seconds"] = times
res["manager"] = sc._jsc.sc().env().shuffleManager().getClass().getName()
res["app"] = app
print("RESULT " + json.dumps(res))
s.stop()
'''

GEN = r'''
import sys
from pyspark.sql import SparkSession, functions as F
s = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
n = int(sys.argv[2])
ticket = (F.col("id") / 11).cast("long")
def key(seed, lo, hi, nulls=True):
    v = (F.abs(F.hash(ticket, F.lit(seed))) % (hi - lo + 1) + lo).cast("int")
    return F.when(F.abs(F.hash(F.col("id"), F.lit(seed + 100))) % 1000 < 45, None).otherwise(v) if nulls else v
df = s.range(0, n, numPartitions=4).select(
    key(1, 2450816, 2452642).alias("ss_sold_date_sk"), key(2, 28800, 75599).alias("ss_sold_time_sk"),
    (F.abs(F.hash(F.col("id"), F.lit(3))) % 204000 + 1).cast("int").alias("ss_item_sk"),
    key(4, 1, 2000000).alias("ss_customer_sk"), key(5, 1, 1920800).alias("ss_cdemo_sk"),
    key(6, 1, 7200).alias("ss_hdemo_sk"), key(7, 1, 1000000).alias("ss_addr_sk"))
df.write.mode("overwrite").parquet(sys.argv[1])
s.stop()
'''


def run(cfg):
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cfg)], capture_output=True, text=True, env=env)
    lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    if p.returncode or not lines:
        sys.stderr.write(p.stderr[-6000:])
        raise SystemExit("e2e: the %s run failed" % cfg["mode"])
    if cfg["kill"] and "KILLED True" not in p.stderr:
        raise SystemExit("e2e: the executor was not killed")
    return json.loads(lines[0][7:])


def engine_starts(work, app):
    """Per executor of the application: how many times its log says the engine started (and from the jar)."""
    out = {}
    base = os.path.join(work, "worker", app)
    for ex in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        log = os.path.join(base, ex, "stderr")
        text = open(log, errors="replace").read() if os.path.exists(log) else ""
        starts = [l for l in text.splitlines() if "mtshuffle: executor engine started" in l]
        if starts and not all("native library from jar:" in l for l in starts):
            raise SystemExit("e2e: executor %s did not load the native library from the jar: %s" % (ex, starts))
        if starts:
            out[ex] = len(starts)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jar", required=True)
    ap.add_argument("--native", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--rows", type=int, default=3000000)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--kill", action="store_true")
    ap.add_argument("--bench", type=int, default=0, help="N: only the seed query, Spark and mtshuffle alternated N times")
    a = ap.parse_args()
    table = os.path.join(a.work, "store_sales_%d" % a.rows)
    if not os.path.exists(os.path.join(table, "_SUCCESS")):
        subprocess.run([sys.executable, "-c", GEN, table, str(a.rows)], check=True, capture_output=True)
    base = {"jar": os.path.abspath(a.jar), "native": os.path.abspath(a.native), "table": table, "reps": a.reps, "kill": False}
    if a.bench:
        bench(a, base)
        return
    out = {}
    for rep in range(1):
        for mode in ("spark", "mts"):  # alternated: A B
            out[mode] = run(dict(base, mode=mode))
    assert out["mts"]["manager"].endswith("MtsShuffleManager"), out["mts"]["manager"]
    for q in ("seed_query", "group_by", "join"):
        if out["spark"][q] != out["mts"][q]:
            raise SystemExit("e2e: %s differs between Spark's shuffle and mtshuffle" % q)
        print("e2e: %s identical with Spark's shuffle and mtshuffle" % q)
    print("e2e: seed query %s" % out["mts"]["seed_query"])
    remote = sum(st["remote_bytes_read"] for st in out["mts"]["stages"])
    if remote <= 0:
        raise SystemExit("e2e: no reducer fetched from the other worker's shuffle service")
    print("e2e: reducers fetched %d bytes from the other worker's shuffle service" % remote)
    engines = engine_starts(a.work, out["mts"]["app"])
    if not engines or any(n != 1 for n in engines.values()):
        raise SystemExit("e2e: expected one engine started per executor, found %s" % engines)
    print("e2e: one engine per executor JVM (%s), native library from the jar" % engines)
    if a.kill:
        killed = run(dict(base, mode="mts-classpath", kill=True, reps=1))
        if killed["seed_query"] != out["spark"]["seed_query"]:
            raise SystemExit("e2e: after an executor was killed, the seed query differs")
        print("e2e: executor killed during the map stage: Spark recovered, seed query identical")
    json.dump(out, open(os.path.join(a.work, "e2e.json"), "w"), indent=1)
    for mode in ("spark", "mts"):
        for st in out[mode]["stages"]:
            if st["shuffle_write_bytes"]:
                print("%-5s stage %2d %-40s shuffle write %8.3f s, %d bytes" % (
                    mode, st["id"], st["name"][:40], st["shuffle_write_time_ns"] / 1e9, st["shuffle_write_bytes"]))


def bench(a, base):
    import statistics
    runs = {"spark": [], "mts": []}
    for rep in range(a.bench):
        for mode in ("spark", "mts"):  # interleaved: A B A B ...
            r = run(dict(base, mode=mode, seed_only=True))
            st = max(r["stages"], key=lambda x: x["shuffle_write_bytes"])  # the map stage
            runs[mode].append({"shuffle_write_s": st["shuffle_write_time_ns"] / 1e9, "stage_s": st["duration_ms"] / 1e3,
                               "query_s": r["seed_query_seconds"][0], "bytes": st["shuffle_write_bytes"]})
            print("rep %d %-5s map stage %.2f s, shuffle write %.3f s, %d bytes, query %.2f s" % (
                rep, mode, runs[mode][-1]["stage_s"], runs[mode][-1]["shuffle_write_s"], st["shuffle_write_bytes"],
                runs[mode][-1]["query_s"]), flush=True)
    out = {"rows": a.rows, "reps": a.bench, "runs": runs}
    for k in ("shuffle_write_s", "stage_s", "query_s"):
        ratios = [x[k] / y[k] for x, y in zip(runs["spark"], runs["mts"]) if y[k] > 0]
        out[k] = {"spark_median": statistics.median(x[k] for x in runs["spark"]),
                  "mts_median": statistics.median(x[k] for x in runs["mts"]),
                  "spark_over_mts": {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}}
        print("%-16s Spark %.3f s, mtshuffle %.3f s: Spark/mtshuffle %.2fx (min %.2f, max %.2f)" % (
            k, out[k]["spark_median"], out[k]["mts_median"], out[k]["spark_over_mts"]["median"],
            out[k]["spark_over_mts"]["min"], out[k]["spark_over_mts"]["max"]))
    json.dump(out, open(os.path.join(a.work, "spark-bench.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
