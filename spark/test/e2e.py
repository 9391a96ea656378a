#!/usr/bin/env python3
"""End-to-end on a real Spark standalone cluster (cluster.sh, two workers):
the seed's query (a store_sales-like Parquet table, repartitioned on two key
columns into 200 partitions, every column counted), a group-by and a join,
each run with Spark's own shuffle and with mtshuffle's ShuffleManager:
results must be identical (reduce tasks read through the plugin's reader,
MtsShuffleReader). Then the record paths (RecordPathBench), a shuffle I/O
plugin without a single-file writer (read by Spark's reader, the plugin's
reader off), each way the plugin's reader takes a fetched block (mapped,
copied, streamed), a byte flipped in a committed data file (found by the
plugin's reader in a copied and in a mapped block, Spark's fetch-failure
path), executors that cannot load the native library (Spark's writer and
reader, same result), reducers stopped early by a limit or
killed while reading (every engine gives everything back), speculative
attempts, an executor decommissioned after the map stage, its map outputs
migrated, and adaptive execution (coalesced and skewed reads) (README.md,
"Spark plugin"). With --kill, an executor is killed
during the map stage and another while committing, and the results must
still be identical. Prints each stage's task run time.
spark_bench.py runs the benchmark on the same child program.

    e2e.py --jar JAR --native LIB --work DIR [--rows N] [--kill] [--only CHECK]
"""
import argparse, json, os, subprocess, sys, threading, time, urllib.request

CHILD = r'''
import json, os, re, signal, subprocess, sys, threading, time, urllib.request
from pyspark.sql import SparkSession, functions as F
cfg = json.loads(sys.argv[1])
b = (SparkSession.builder.master("spark://127.0.0.1:7077").appName("mtshuffle-e2e-" + cfg["mode"])
     .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
     .config("spark.ui.port", "4050").config("spark.shuffle.service.enabled", "true")
     .config("spark.executor.memory", "3g").config("spark.sql.shuffle.partitions", "200")
     .config("spark.sql.adaptive.enabled", "false").config("spark.sql.autoBroadcastJoinThreshold", "-1")
     .config("spark.task.maxFailures", "8"))
if cfg["mode"] == "mts":  # as a Spark 4 user deploys it: the one jar (native library inside) and one conf
    b = b.config("spark.jars", ",".join([cfg["jar"]] + cfg.get("extra_jars", []))) \
         .config("spark.shuffle.manager", "org.apache.spark.shuffle.mtshuffle.MtsShuffleManager")
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

def executor_pids():
    """{executor id: pid} of this application's executors only: their command line names its app id."""
    app = sc.applicationId
    pids = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            args = open("/proc/%s/cmdline" % pid, "rb").read().split(b"\0")
        except OSError:
            continue
        if any(a.endswith(b"CoarseGrainedExecutorBackend") for a in args) and \
                b"--app-id" in args and args[args.index(b"--app-id") + 1] == app.encode():
            pids[args[args.index(b"--executor-id") + 1].decode()] = int(pid)
    return pids

def killer():
    if cfg["kill"] == "commit":
        # wait for an executor's log to say a commit is paused (PartitionWritersDataIO), kill that one
        logs = os.path.join(cfg["work"], "worker", sc.applicationId)
        victim = None
        while victim is None:
            for ex in (os.listdir(logs) if os.path.isdir(logs) else []):
                f = os.path.join(logs, ex, "stderr")
                if os.path.exists(f) and "commit paused" in open(f, errors="replace").read():
                    victim = ex
            time.sleep(0.05)
    else:
        # wait for the map stage to run tasks, then kill one executor JVM
        while True:
            st = [sc.statusTracker().getStageInfo(i) for i in sc.statusTracker().getActiveStageIds()]
            if any(x and x.numCompletedTasks >= 1 for x in st):
                break
            time.sleep(0.05)
        victim = min(executor_pids(), default=None)
    pid = executor_pids().get(victim)
    if pid:
        os.kill(pid, 9)
    print("KILLED", pid is not None, "executor", victim, "pid", pid, file=sys.stderr, flush=True)

def rest(path):
    return json.load(urllib.request.urlopen("http://127.0.0.1:4050/api/v1/applications/%s/%s" % (sc.applicationId, path)))

def tasks(status):
    """Every task of the application with that status, with its stage."""
    out = []
    for st in rest("stages?details=true"):
        for tk in (st.get("tasks") or {}).values():
            if tk.get("status") == status:
                out.append(dict(tk, stageId=st["stageId"]))
    return out

def shuffle_files(since):
    """This run's files in the executors' directories (WORK/local*), as names."""
    import glob
    found = glob.glob(os.path.join(cfg["work"], "local*", "**", "shuffle_*"), recursive=True)
    return [f for f in found if os.path.getmtime(f) >= since]

res = {}
times = []
scenario = cfg.get("scenario")
if scenario == "corrupt":
    # a byte flipped in a committed data file between two jobs that read the same shuffle
    since = time.time() - 1
    x = t.select(*cols).where("ss_item_sk % 10 = 0").repartition(40, F.col("ss_item_sk")).rdd
    first = x.count()
    data = sorted((f for f in shuffle_files(since) if f.endswith(".data")), key=os.path.getsize)
    victim = data[-1]
    with open(victim, "r+b") as f:
        f.seek(os.path.getsize(victim) // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x5A]))
    second = x.count()
    res["corrupt"] = {"first": first, "second": second, "file": os.path.basename(victim),
                      "failures": [tk.get("errorMessage", "")[:3000] for tk in tasks("FAILED")]}
elif scenario == "speculate":
    # one map task slowed in its first attempt only: a speculative copy runs on the other executor
    def slow(v):
        from pyspark import TaskContext
        tc = TaskContext.get()
        if tc.partitionId() == 0 and tc.attemptNumber() == 0 and not globals().get("_slept"):
            globals()["_slept"] = True
            time.sleep(20)
        return v
    since = time.time() - 1
    want = t.groupBy((F.col("ss_item_sk") % 97).alias("k")).count().orderBy("k").collect()
    slowed = F.udf(slow, "int")
    got = t.select(slowed(F.col("ss_item_sk")).alias("i")).groupBy((F.col("i") % 97).alias("k")).count() \
           .orderBy("k").collect()
    res["speculate"] = {"identical": [list(r) for r in want] == [list(r) for r in got],
                        "speculative_successes": sum(1 for tk in tasks("SUCCESS") if tk.get("speculative")),
                        "files": sorted(os.path.basename(f) for f in shuffle_files(since))}
elif scenario == "skew":
    # a skewed map stage: a first exchange puts 80% of the rows into partition 0 of 4, so that the
    # second exchange's map stage has one task with most rows while the other cores idle
    hot = F.when(F.col("ss_item_sk") % 10 < 8, F.lit(0)).otherwise(F.col("ss_item_sk") % 3 + 1)
    t0 = time.time()
    # (the filter keeps Catalyst from collapsing the two adjacent repartitions into one)
    q = t.select(*cols).repartition(4, hot).where(F.spark_partition_id() >= 0) \
         .repartition(200, F.col("ss_sold_date_sk"), F.col("ss_sold_time_sk")) \
         .select(*[F.count(c).alias(c) for c in cols]).collect()[0].asDict()
    times.append(time.time() - t0)
    res["skew_query"] = q
elif scenario == "skew_read":
    # a skewed reduce stage: half the rows in partition 0 of 8, so that its reduce task runs alone at the end
    hot = F.when(F.col("ss_item_sk") % 2 == 0, F.lit(0)).otherwise(F.col("ss_item_sk") % 7 + 1)
    t0 = time.time()
    q = t.select(*cols).repartition(8, hot).select(*[F.count(c).alias(c) for c in cols]).collect()[0].asDict()
    times.append(time.time() - t0)
    res["skew_read_query"] = q
elif scenario == "early_stop":
    # reducers that stop early: a limit takes a few rows from reduce tasks that have blocks decoding ahead
    x = t.select(*cols).repartition(200, F.col("ss_sold_date_sk"), F.col("ss_sold_time_sk"))
    rows = x.limit(10).collect()
    rows2 = x.where("ss_item_sk % 3 = 0").limit(1000).collect()
    # and a reduce stage cancelled, its tasks interrupted, while they read
    killed = sc._jvm.org.mtshuffle.test.EngineProbe.killedReduce(sc._jsc.sc())
    time.sleep(3)
    res["early_stop"] = {"rows": [len(rows), len(rows2)], "killed": killed,
                         "probe": list(sc._jvm.org.mtshuffle.test.EngineProbe.stats(sc._jsc.sc(), 40))}
elif scenario == "floor":
    # the seed query's map side without its exchange: the scan, the partition id of every row, a count
    for rep in range(cfg["reps"]):
        t0 = time.time()
        q = t.select(*cols).select(F.pmod(F.hash(F.col("ss_sold_date_sk"), F.col("ss_sold_time_sk")), F.lit(200)).alias("p"),
                                   *cols).select(F.count("p").alias("p"), *[F.count(c).alias(c) for c in cols]) \
             .collect()[0].asDict()
        times.append(time.time() - t0)
    res["floor_query"] = q
elif scenario == "decommission":
    # an executor decommissioned (SIGPWR, as Kubernetes and standalone workers send it) after the map
    # stage, with no shuffle service to serve its files: its map outputs must migrate to the other
    # executor, and the same query run again reads them there without running its map stage again
    x = t.select(*cols).repartition(200, F.col("ss_sold_date_sk"), F.col("ss_sold_time_sk")) \
         .select(*[F.count(c).alias(c) for c in cols])
    first = x.collect()[0].asDict()
    pids = executor_pids()
    victim = min(pids, default=None)
    if victim is not None:
        os.kill(pids[victim], signal.SIGPWR)
    gone = False
    for _ in range(1200):  # up to 120 s for its blocks to migrate and the executor to exit
        if victim is None or any(e["id"] == victim and not e["isActive"] for e in rest("allexecutors")):
            gone = victim is not None
            break
        time.sleep(0.1)
    second = x.collect()[0].asDict()
    jobs = sorted(rest("jobs"), key=lambda j: j["jobId"])
    res["decommission"] = {"first": first, "second": second, "victim": victim, "gone": gone,
                           "last_job": {k: jobs[-1].get(k) for k in ("jobId", "status", "numSkippedStages",
                                                                       "numCompletedStages", "numSkippedTasks",
                                                                       "numCompletedTasks", "numFailedTasks")},
                           "stage_attempts": [(st["stageId"], st["attemptId"], st["status"], st["numTasks"])
                                              for st in rest("stages")]}
elif scenario == "malformed":
    # a partitioner out of range, from the JVM side (spark/test/java/org/mtshuffle/test/BadJobs.java)
    live = lambda: sum(1 for e in rest("executors") if e["id"] != "driver")
    before = live()
    msg = sc._jvm.org.mtshuffle.test.BadJobs.partitionOutOfRange(sc._jsc.sc())
    time.sleep(2)
    res["malformed"] = {"message": msg[:4000], "executors_before": before,
                        "executors_after": live(),
                        "removed": [e["id"] for e in rest("allexecutors") if not e["isActive"]]}
for rep in range(cfg["reps"] if not scenario else 0):
    if cfg["kill"] and rep == 0:
        threading.Thread(target=killer, daemon=True).start()
    t0 = time.time()
    q1 = t.select(*cols).repartition(200, F.col("ss_sold_date_sk"), F.col("ss_sold_time_sk")) \
          .select(*[F.count(c).alias(c) for c in cols]).collect()[0].asDict()
    times.append(time.time() - t0)
    res["seed_query"] = q1
if not cfg["kill"] and not cfg.get("seed_only") and not scenario:
    g = t.groupBy("ss_item_sk").agg(F.count("*").alias("n"), F.sum("ss_customer_sk").alias("s")).orderBy("ss_item_sk").collect()
    res["group_by"] = [list(r) for r in g]
    per_cust = t.groupBy("ss_customer_sk").agg(F.count("*").alias("visits"))
    j = t.join(per_cust, "ss_customer_sk").groupBy("ss_hdemo_sk").agg(F.sum("visits").alias("v"), F.count("*").alias("n")) \
         .orderBy("ss_hdemo_sk").collect()
    res["join"] = [list(r) for r in j]
if cfg.get("skew_join"):
    # a sort-merge join of two plain exchanges, half of one side's rows on one key that the other side
    # lacks: adaptive execution splits that partition by map outputs and reads the other side's whole
    # partition for each split
    a = t.select(F.when(F.col("ss_item_sk") % 10 < 5, F.lit(0)).otherwise(F.col("ss_customer_sk")).alias("k"),
                 "ss_item_sk")
    def joined(other):  # a joined with other on k: rows and two sums
        return a.join(other, "k").agg(F.count("*").alias("n"), F.sum("ss_item_sk").alias("i"),
                                      F.sum("ss_hdemo_sk").alias("h")).collect()[0].asDict()
    res["skew_join"] = joined(t.where("ss_item_sk % 10 = 7").select(F.col("ss_customer_sk").alias("k"),
                                                                   "ss_hdemo_sk"))
    # and one whose small side adaptive execution finds small enough to broadcast once its exchange has
    # run: the big side's map outputs are then read where they lie, map by map (the local shuffle read)
    s.conf.set("spark.sql.adaptive.autoBroadcastJoinThreshold", "10MB")
    res["local_read_join"] = joined(t.where("ss_item_sk % 100 = 7").select(F.col("ss_customer_sk").alias("k"),
                                                                         "ss_hdemo_sk"))
    s.conf.unset("spark.sql.adaptive.autoBroadcastJoinThreshold")
if cfg.get("probe_block_access"):
    res["block_access"] = list(sc._jvm.org.mtshuffle.test.EngineProbe.blockAccess(sc._jsc.sc(), 40))
if cfg.get("sql_metrics"):
    # adaptive execution's shuffle reads, summed over the application's queries (Spark's SQL REST API)
    res["sql_metrics"] = {}
    executions = rest("sql?details=true&planDescription=true")
    # in the final plan's formatted description: "(7) AQEShuffleRead", its input, "Arguments: local"
    local = re.compile(r"\) AQEShuffleRead\n(?:[^(\n][^\n]*\n){0,4}?Arguments: local")
    res["local_shuffle_reads"] = sum(len(local.findall(ex.get("planDescription", ""))) for ex in executions)
    for ex in executions:
        for node in ex.get("nodes", []):
            for m in node.get("metrics", []):
                v = str(m.get("value", "")).replace(",", "")
                if node.get("nodeName") == "AQEShuffleRead" and m["name"].startswith("number of ") and v.isdigit():
                    res["sql_metrics"][m["name"]] = res["sql_metrics"].get(m["name"], 0) + int(v)
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
                  "num_tasks": x.get("numTasks", 0), "remote_bytes_read": x.get("shuffleRemoteBytesRead", 0), "shuffle_read_bytes": x.get("shuffleReadBytes", 0),
                  "duration_ms": ms(x.get("completionTime")) - ms(x.get("submissionTime"))}
                 for x in stages]
# each task's run time, in the stages with few tasks (the map stages at the bench's sizes)
for st, x in zip(res["stages"], stages):
    if 0 < x.get("numTasks", 0) <= 16:
        tl = json.load(urllib.request.urlopen("http://127.0.0.1:4050/api/v1/applications/%s/stages/%d/%d/taskList?length=16"
                                              % (app, x["stageId"], x["attemptId"])))
        st["task_run_ms"] = [t["taskMetrics"]["executorRunTime"] for t in tl if "taskMetrics" in t]
res["seed_query_seconds"] = times
# through a method handle: py4j's lookup and java.lang.reflect resolve every method of SparkEnv,
# and one of pyspark 4.3's names a protobuf class that its jars do not carry
jvm = sc._jvm
getter = jvm.java.lang.invoke.MethodHandles.publicLookup().findVirtual(
    jvm.java.lang.Class.forName("org.apache.spark.SparkEnv"), "shuffleManager",
    jvm.java.lang.invoke.MethodType.methodType(jvm.java.lang.Class.forName("org.apache.spark.shuffle.ShuffleManager")))
env_arg = sc._gateway.new_array(jvm.java.lang.Object, 1)
env_arg[0] = sc._jsc.sc().env()
res["manager"] = getter.invokeWithArguments(env_arg).getClass().getName()
# peak process-tree RSS and direct/off-heap pools of each executor (with spark.executor.processTreeMetrics.enabled)
res["executor_peaks"] = [{k: e.get("peakMemoryMetrics", {}).get(k, 0) for k in
                          ("ProcessTreeJVMRSSMemory", "JVMHeapMemory", "DirectPoolMemory", "JVMOffHeapMemory")}
                         for e in rest("executors") if e["id"] != "driver"]
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


def make_table(work, rows):
    """The store_sales-like Parquet table of that many rows, generated once per work directory."""
    table = os.path.join(work, "store_sales_%d" % rows)
    if not os.path.exists(os.path.join(table, "_SUCCESS")):
        subprocess.run([sys.executable, "-c", GEN, table, str(rows)], check=True, capture_output=True)
    return table


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


def check_corruption(base, conf=None, how="copied from Spark's buffer"):
    r = run(dict(base, mode="mts", scenario="corrupt", conf=conf or {}))["corrupt"]
    if r["first"] != r["second"]:
        raise SystemExit("e2e: after a byte was flipped in %s the count changed: %d -> %d" % (r["file"], r["first"], r["second"]))
    # Spark's diagnosis recomputes the block's checksum and compares it with the checksum file's value:
    # DISK_ISSUE means they differ, i.e. the file's checksum was right for the bytes as committed
    if not any("FetchFailed" in m and "is corrupted due to DISK_ISSUE" in m for m in r["failures"]):
        raise SystemExit("e2e: the flipped byte in %s did not end in a fetch failure diagnosed as DISK_ISSUE: %s"
                         % (r["file"], r["failures"]))
    # found by the plugin's reader: the engine's decoder named the corrupt block
    if not any("corrupt lz4 stream" in m and "mtshuffle read block" in m for m in r["failures"]):
        raise SystemExit("e2e: the corrupt block was not found by the plugin's reader: %s" % r["failures"])
    # the stored bytes taken as this run means to
    if not any("its stored bytes %s" % how in m for m in r["failures"]):
        raise SystemExit("e2e: the corrupt block's stored bytes were not %s: %s" % (how, r["failures"]))
    print("e2e: a byte flipped in %s (its stored bytes %s): the reader's decoder found it, fetch failed, diagnosed by Spark's "
          "checksum as DISK_ISSUE, stage retried, count unchanged" % (r["file"], how))


# a map threshold below every block of the e2e table: local blocks are mapped
MAPPED = {"spark.mtshuffle.reader.blockAccess": "map", "spark.storage.memoryMapThreshold": "4k"}
# and remote blocks fetched to disk, so that every block is mapped
MAPPED_ALL = dict(MAPPED, **{"spark.network.maxRemoteBlockSizeFetchToMem": "1k"})


def check_block_access(base, want):
    """Each way the reader takes a fetched block (spark.mtshuffle.reader.blockAccess) reads the seed query's
    shuffle to the same result, and is the way taken: map (local blocks mapped, remote ones copied from
    Spark's buffer), copy (every block copied), stream (every block read through Spark's stream)."""
    probe = test_jar(base["work"], base["jar"])
    for access, conf in (("map", MAPPED), ("copy", {"spark.mtshuffle.reader.blockAccess": "copy"}),
                         ("stream", {"spark.mtshuffle.reader.blockAccess": "stream"})):
        r = run(dict(base, mode="mts", seed_only=True, probe_block_access=True, extra_jars=[probe], conf=conf))
        if r["seed_query"] != want:
            raise SystemExit("e2e: with spark.mtshuffle.reader.blockAccess=%s the seed query differs" % access)
        mapped, copied, streamed = (sum(int(l.split()[i]) for l in r["block_access"]) for i in (1, 2, 3))
        ok = {"map": mapped > 0 and copied > 0 and streamed == 0, "copy": mapped == 0 and copied > 0 and streamed == 0,
              "stream": mapped == 0 and copied == 0 and streamed > 0}[access]
        if not ok:
            raise SystemExit("e2e: blockAccess=%s: blocks mapped %d, copied %d, streamed %d (per executor: %s)"
                             % (access, mapped, copied, streamed, r["block_access"]))
        print("e2e: reader blockAccess=%s: seed query identical; blocks mapped %d, copied from Spark's buffer %d, "
              "read through its stream %d" % (access, mapped, copied, streamed))


def spark_classpath():
    import glob, pyspark
    return glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "*.jar"))


def test_jar(work, plugin):
    """spark/test/java (a shuffle I/O plugin without a single-file writer, RecordPathBench) compiled against
    pyspark's jars and the plugin."""
    import glob
    src = glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "java", "**", "*.java"), recursive=True)
    classes, jar = os.path.join(work, "testclasses"), os.path.join(work, "mtshuffle-test.jar")
    for cmd in (["javac", "-d", classes, "-cp", ":".join(spark_classpath() + [plugin])] + src,
                ["jar", "cf", jar, "-C", classes, "."]):
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode:
            raise SystemExit("e2e: %s failed:\n%s" % (cmd[0], (p.stdout + p.stderr)[-4000:]))
    return jar


def record_paths(base, rows, reps):
    """RecordPathBench: the UnsafeRow path and the serializer path give the same bytes; their JVM cost per record."""
    cp = ":".join(spark_classpath() + [base["jar"], test_jar(base["work"], base["jar"])])
    p = subprocess.run(["java", "-cp", cp, "org.apache.spark.shuffle.mtshuffle.RecordPathBench", str(rows), str(reps)],
                       capture_output=True, text=True)
    if p.returncode:
        raise SystemExit("e2e: RecordPathBench failed:\n" + p.stdout[-3000:] + p.stderr[-3000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def check_plugin(base, want):
    """Committed through a shuffle I/O plugin that offers no single-file writer: partition by partition;
    read back by Spark's own reader (the plugin's reader turned off: its fallback)."""
    r = run(dict(base, mode="mts", seed_only=True, extra_jars=[test_jar(base["work"], base["jar"])],
                 conf={"spark.shuffle.sort.io.plugin.class": "org.mtshuffle.test.PartitionWritersDataIO",
                       "spark.mtshuffle.reader.enabled": "false"}))
    if r["seed_query"] != want:
        raise SystemExit("e2e: through a plugin's partition writers the seed query differs")
    base_dir = os.path.join(base["work"], "worker", r["app"])
    took = sum(open(os.path.join(base_dir, ex, "stderr"), errors="replace").read().count("through partition writers")
               for ex in os.listdir(base_dir))
    if took == 0:
        raise SystemExit("e2e: the plugin's partition writers were not used")
    if not log_lines(base["work"], r["app"], "is read by Spark's reader: spark.mtshuffle.reader.enabled is false"):
        raise SystemExit("e2e: with the plugin's reader off, no executor logged Spark's reader")
    print("e2e: a shuffle I/O plugin without a single-file writer took %d map outputs partition by partition; "
          "read by Spark's reader (the plugin's reader off); seed query identical" % took)


def check_no_native(base, want):
    """Executors that cannot load the native library (here: -Dmtshuffle.native.library names no file) run
    the plugin's shuffles with Spark's writer and reader, say why, and give the same result."""
    missing = os.path.join(base["work"], "no-such-dir", "libmtshuffle_jni.so")
    r = run(dict(base, mode="mts", seed_only=True,
                 conf={"spark.executor.extraJavaOptions": "-Dmtshuffle.native.library=" + missing}))
    if r["seed_query"] != want:
        raise SystemExit("e2e: with no native library the seed query differs")
    wrote = log_lines(base["work"], r["app"], "uses Spark's sort shuffle: its native library cannot be loaded")
    read = log_lines(base["work"], r["app"], "is read by Spark's reader: its native library cannot be loaded")
    if not wrote or not read or not any(missing in l for l in wrote):
        raise SystemExit("e2e: with no native library, no executor logged Spark's writer and reader with the reason: "
                         "%s %s" % (wrote[:1], read[:1]))
    if engine_starts(base["work"], r["app"]):
        raise SystemExit("e2e: an engine started although the native library cannot be loaded")
    print("e2e: executors without the native library used Spark's writer and reader (logged: \"%s\"); seed query "
          "identical" % wrote[0].split("mtshuffle: ", 1)[-1][:160])


def check_malformed(base):
    """Malformed input from the JVM side: the task fails with the writer's message, no executor dies."""
    r = run(dict(base, mode="mts", scenario="malformed", extra_jars=[test_jar(base["work"], base["jar"])],
                 conf={"spark.task.maxFailures": "2"}))["malformed"]
    if "out of range" not in r["message"] or "mtshuffle: shuffle" not in r["message"]:
        raise SystemExit("e2e: a partition out of range did not fail with the writer's message: %s" % r["message"])
    if r["removed"] or r["executors_after"] != r["executors_before"]:
        raise SystemExit("e2e: malformed input cost executors: %s" % r)
    line = next(l for l in r["message"].splitlines() if "out of range" in l)
    print("e2e: a partition out of range from the JVM side: the task failed with \"%s\"; no executor lost"
          % line.strip()[:300])


def check_decommission(base, want):
    """An executor decommissioned after the map stage, without a shuffle service: the map outputs the
    plugin wrote move to the other executor through Spark's block migration (IndexShuffleBlockResolver
    sends the data and index files), and the query run again reads them there, its map stage skipped,
    to the same result."""
    r = run(dict(base, mode="mts", scenario="decommission", conf={
        "spark.shuffle.service.enabled": "false", "spark.decommission.enabled": "true",
        "spark.storage.decommission.enabled": "true", "spark.storage.decommission.shuffleBlocks.enabled": "true",
        "spark.storage.decommission.rddBlocks.enabled": "false"}))
    d = r["decommission"]
    if d["first"] != want or d["second"] != want:
        raise SystemExit("e2e: decommission: the seed query differs (before %s, after %s)" % (d["first"], d["second"]))
    if not d["gone"]:
        raise SystemExit("e2e: decommission: executor %s did not leave after SIGPWR: %s" % (d["victim"], d))
    job = d["last_job"]
    if job["status"] != "SUCCEEDED" or job["numSkippedStages"] < 1 or job["numFailedTasks"]:
        raise SystemExit("e2e: decommission: the query after it ran its map stage again or failed tasks "
                         "(map outputs not migrated?): %s; stages %s" % (job, d["stage_attempts"]))
    # "Migrated migrate_shuffle_<shuffle>_<map> (size: ...) to BlockManagerId(...)": the seed query's
    # exchange is the application's first shuffle
    moved = log_lines(base["work"], r["app"], "Migrated migrate_shuffle_0_")
    if not moved:
        raise SystemExit("e2e: decommission: executor %s logged no migrated map output of the seed query's shuffle"
                         % d["victim"])
    if not log_lines(base["work"], r["app"], "is written by libmtshuffle"):
        raise SystemExit("e2e: decommission: the shuffle was not written by libmtshuffle")
    print("e2e: executor %s decommissioned after the map stage, no shuffle service: %d of the seed query's map "
          "outputs, written by libmtshuffle, migrated to the other executor; the query again: map stage skipped, "
          "result identical" % (d["victim"], len(moved)))


# Spark's adaptive execution, as Spark 4 runs by default (the other runs here turn it off, so that their
# stages stay as the seed's): reduce partitions coalesced (read as batches of contiguous partitions),
# a skewed join partition split (a sub-range of the map outputs each), and a join broadcast at run
# time (its big side's map outputs read map by map where they lie)
ADAPTIVE = {"spark.sql.adaptive.enabled": "true", "spark.sql.adaptive.advisoryPartitionSizeInBytes": "16k",
            "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes": "1k"}


def check_adaptive(base):
    """With adaptive execution the seed query, the group-by and three joins give Spark's results, and the
    plugin's reader read coalesced partitions as batch blocks, a skewed partition split and a join's
    map outputs map by map (the local shuffle read)."""
    want = run(dict(base, mode="spark", conf=ADAPTIVE, skew_join=True))
    got = run(dict(base, mode="mts", conf=ADAPTIVE, skew_join=True, probe_block_access=True, sql_metrics=True,
                   extra_jars=[test_jar(base["work"], base["jar"])]))
    for q in ("seed_query", "group_by", "join", "skew_join", "local_read_join"):
        if got[q] != want[q]:
            raise SystemExit("e2e: with adaptive execution %s differs between Spark's shuffle and mtshuffle" % q)
    batches = sum(int(l.split()[4]) for l in got["block_access"])
    m = got["sql_metrics"]
    coalesced, skewed = m.get("number of coalesced partitions", 0), m.get("number of skewed partitions", 0)
    local = got["local_shuffle_reads"]
    if batches == 0 or coalesced == 0 or skewed == 0 or local == 0:
        raise SystemExit("e2e: with adaptive execution the plugin's reader read %d batch blocks; %d partitions "
                         "coalesced, %d skewed ones split, %d local shuffle reads (all must be above 0): %s"
                         % (batches, coalesced, skewed, local, m))
    if not engine_reads(base["work"], got["app"]):
        raise SystemExit("e2e: with adaptive execution not every shuffle was read through the executor engine")
    print("e2e: adaptive execution: seed query, group-by and joins identical with Spark's shuffle; the plugin's "
          "reader took %d batch blocks of coalesced partitions (%d coalesced, %d skewed partitions split, %d local "
          "shuffle reads of a join broadcast at run time)" % (batches, coalesced, skewed, local))


def check_early_stop(base):
    """Reducers stopped by a limit, and a reduce stage cancelled while its tasks read, give everything
    back: no client left on any engine, nothing held but the engine's kept buffers, the peak within
    the budget."""
    r = run(dict(base, mode="mts", scenario="early_stop", extra_jars=[test_jar(base["work"], base["jar"])]))
    r = r["early_stop"]
    engines = [l.split() for l in r["probe"] if not l.endswith(" none")]
    if r["rows"] != [10, 1000] or not engines or "cancel" not in r["killed"] or "never ran" in r["killed"]:
        raise SystemExit("e2e: early stop: %s" % r)
    for ex, clients, held, cached, peak, budget, threads, cpus in engines:
        if int(clients) != 0 or int(held) != int(cached) or int(peak) > int(budget):
            raise SystemExit("e2e: after reducers stopped early, executor %s's engine: %s clients, %s bytes held "
                             "(%s cached), peak %s of %s" % (ex, clients, held, cached, peak, budget))
        if not 1 <= int(cpus) <= min(int(threads), os.cpu_count() or int(threads)):
            raise SystemExit("e2e: executor %s's engine runs %s jobs at once at most on %s threads and %s CPUs"
                             % (ex, cpus, threads, os.cpu_count()))
    print("e2e: reducers stopped early by a limit, and reduce tasks killed while reading: every engine back to "
          "no client and nothing held (%s)" % "; ".join("executor %s peak %s of %s, %s of %s threads compressing at once "
                                                        "at most" % (e[0], e[4], e[5], e[7], e[6]) for e in engines))


def check_speculation(base):
    r = run(dict(base, mode="mts", scenario="speculate", conf={
        "spark.speculation": "true", "spark.speculation.interval": "100ms", "spark.speculation.multiplier": "1.5",
        "spark.speculation.quantile": "0.5", "spark.speculation.minTaskRuntime": "1s"}))["speculate"]
    per_shuffle = {}
    for f in r["files"]:
        if f.endswith(".data"):
            sid = int(f.split("_")[1])
            per_shuffle[sid] = per_shuffle.get(sid, 0) + 1
    print("e2e: speculation: %d speculative attempt(s) succeeded; committed map outputs per shuffle: %s"
          % (r["speculative_successes"], per_shuffle))
    if not r["identical"]:
        raise SystemExit("e2e: with a speculative map attempt the result differs")
    if r["speculative_successes"] < 1:
        raise SystemExit("e2e: no speculative attempt succeeded")
    temps = [f for f in r["files"] if not f.endswith((".data", ".index")) and ".checksum." not in f]
    if temps:
        raise SystemExit("e2e: temp files left behind: %s" % temps)
    print("e2e: a slowed map task's speculative copy succeeded, the result is identical, no temp file left")


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


def engine_reads(work, app):
    """The executors' lines saying a shuffle is read through the executor engine, or [] if any shuffle of
    the application was read by Spark's reader."""
    if log_lines(work, app, "is read by Spark's reader"):
        return []
    return log_lines(work, app, "is read through the executor engine")


def log_lines(work, app, text):
    """Lines of the application's executor logs that contain text."""
    base = os.path.join(work, "worker", app)
    out = []
    for ex in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        log = os.path.join(base, ex, "stderr")
        if os.path.exists(log):
            out += [l for l in open(log, errors="replace").read().splitlines() if text in l]
    return out


def extracted_dirs():
    """The native library's extraction directories in the JVMs' temporary directory (java.io.tmpdir
    is /tmp on Linux unless set) and Python's."""
    import glob, tempfile
    return set(glob.glob("/tmp/mtshuffle-native-*")) | set(glob.glob(os.path.join(tempfile.gettempdir(), "mtshuffle-native-*")))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jar", required=True)
    ap.add_argument("--native", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--rows", type=int, default=3000000)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--kill", action="store_true")
    ap.add_argument("--only", choices=("corrupt", "speculate", "plugin", "malformed", "early_stop", "block_access",
                                       "no_native", "decommission", "adaptive"),
                    help="run only that check")
    a = ap.parse_args()
    extracted_before = extracted_dirs()
    table = make_table(a.work, a.rows)
    base = {"jar": os.path.abspath(a.jar), "native": os.path.abspath(a.native), "table": table, "reps": a.reps, "kill": False,
            "work": os.path.abspath(a.work)}
    if a.only:
        if a.only in ("plugin", "block_access", "no_native", "decommission"):
            want = run(dict(base, mode="spark", seed_only=True))["seed_query"]
            {"plugin": check_plugin, "block_access": check_block_access, "no_native": check_no_native,
             "decommission": check_decommission}[a.only](base, want)
        elif a.only == "corrupt":
            check_corruption(base)
            check_corruption(base, MAPPED_ALL, "mapped")
        else:
            {"corrupt": check_corruption, "speculate": check_speculation, "malformed": check_malformed,
             "early_stop": check_early_stop, "adaptive": check_adaptive}[a.only](base)
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
    wrote = log_lines(a.work, out["mts"]["app"], "is written by libmtshuffle")
    fell = log_lines(a.work, out["mts"]["app"], "uses Spark's sort shuffle")
    if not wrote or fell:
        raise SystemExit("e2e: not every shuffle was written by libmtshuffle: %s" % (fell[:2] or "none was"))
    print("e2e: every shuffle written by libmtshuffle (%d shuffles, counted per executor)" % len(wrote))
    read = engine_reads(a.work, out["mts"]["app"])
    if not read:
        raise SystemExit("e2e: the reduce side did not read every shuffle through the engine: %s"
                         % log_lines(a.work, out["mts"]["app"], "is read by Spark's reader")[:2])
    print("e2e: every shuffle's reducers read through the executor engine (%d shuffles)" % len(read))
    if a.kill:
        killed = run(dict(base, mode="mts-classpath", kill="map", reps=1))
        if killed["seed_query"] != out["spark"]["seed_query"]:
            raise SystemExit("e2e: after an executor was killed, the seed query differs")
        print("e2e: executor killed during the map stage: Spark recovered, seed query identical")
        killed = run(dict(base, mode="mts", kill="commit", reps=1, extra_jars=[test_jar(base["work"], base["jar"])],
                          conf={"spark.shuffle.sort.io.plugin.class": "org.mtshuffle.test.PartitionWritersDataIO",
                                "spark.shuffle.plugin.__config__.commitPauseMs": "3000"}))
        if killed["seed_query"] != out["spark"]["seed_query"]:
            raise SystemExit("e2e: after an executor was killed while committing, the seed query differs")
        print("e2e: executor killed while committing a map output: Spark recovered, seed query identical")
    rp = record_paths(base, 200000, 3)
    print("e2e: UnsafeRow path and serializer path give identical bytes (%d records); JVM cost per record %.1f ns "
          "and %.1f ns" % (rp["rows"], rp["unsafe_row_ns_per_record"], rp["serializer_ns_per_record"]))
    check_plugin(base, out["spark"]["seed_query"])
    check_no_native(base, out["spark"]["seed_query"])
    check_malformed(base)
    check_block_access(base, out["spark"]["seed_query"])
    check_corruption(base)
    check_corruption(base, MAPPED_ALL, "mapped")
    check_early_stop(base)
    check_speculation(base)
    check_decommission(base, out["spark"]["seed_query"])
    check_adaptive(base)
    left = extracted_dirs() - extracted_before
    if left:
        raise SystemExit("e2e: executors left the native library's extraction directories behind: %s" % sorted(left))
    print("e2e: no extraction directory of the native library left behind%s" % (
        ", executors killed by SIGKILL included" if a.kill else ""))
    json.dump(out, open(os.path.join(a.work, "e2e.json"), "w"), indent=1)
    for mode in ("spark", "mts"):
        for st in out[mode]["stages"]:
            if st["shuffle_write_bytes"]:
                print("%-5s stage %2d %-40s %3d tasks, task run time %7.2f s, wrote %d bytes" % (
                    mode, st["id"], st["name"][:40], st["num_tasks"], st["executor_run_time_ms"] / 1e3,
                    st["shuffle_write_bytes"]))


if __name__ == "__main__":
    main()
