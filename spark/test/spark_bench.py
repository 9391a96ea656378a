#!/usr/bin/env python3
"""The seed's experiment on the standalone cluster (cluster.sh, one worker of 2
cores): the seed's query (7 key columns of a store_sales-like table,
repartition(200, date, time), every column counted) written by four writers:

  spark-default  Spark's default for 200 partitions: BypassMergeSortShuffleWriter
  spark-sort     Spark's serialized sort writer (UnsafeShuffleWriter): bypassMergeThreshold 100 < 200
  mts            mtshuffle (streaming strategy)
  mts-baseline   mtshuffle's baseline strategy (a file per partition, then one copy)
  mts-sparkreader  mtshuffle's writer, Spark's reader (spark.mtshuffle.reader.enabled=false): what the
                 reduce side gains from reading through the engine

at each task size (spark.sql.files.maxPartitionBytes), interleaved: every
repetition runs every writer at every size, the writers' order rotating from
one repetition to the next, after one application of every writer that is not
measured (--warmup). Each run is its own application; measured from
Spark's REST API: query wall time, the map stage's summed task run time
(executorRunTime), wall time and slowest task, the reduce stage's wall time and summed task
run time (its 200 tasks read the shuffle and write one row each: the "tiny"
stage), the executor's peak process-tree RSS (MiB) and, in a second query whose first exchange puts 80% of the rows into
one partition, the skewed map stage's wall time; and in a third, whose exchange puts half the rows
into one of 8 partitions, the skewed reduce stage's wall time and summed task run time (its big
task reads alone at the end). "floor" (not a writer) runs
the map side without its exchange: the scan, every row's partition id and a
count, so that map task time minus the floor is what writing costs. With --warm
the seed query (and the floor) runs a second time in the same application,
its code compiled by then, as in an executor that has run queries before
(warm_query_s, warm_map_task_s, warm_reduce_stage_s). For mtshuffle, the seed
query's map tasks' budget waits and bytes spilled, summed from the line each task's writer logs
(tasks of 64 MiB or more). Medians, ratios against
mtshuffle, and Welch's t-test (two-sided) per metric.

    spark_bench.py --jar JAR --native LIB --work DIR --rows N --reps R [--sizes 128m,32m] [--warmup 1]
    spark_bench.py --report RESULT.json    (the summary as a markdown table)
"""
import argparse, itertools, json, math, os, re, statistics, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import e2e  # noqa: E402
from suite import machine, welch  # noqa: E402  (what ran it; the suite's two-sided Welch t-test: t, p, df)

WRITERS = {
    "spark-default": {"mode": "spark", "conf": {}},
    "spark-sort": {"mode": "spark", "conf": {"spark.shuffle.sort.bypassMergeThreshold": "100"}},
    "mts": {"mode": "mts", "conf": {}},
    "mts-baseline": {"mode": "mts", "conf": {"spark.mtshuffle.strategy": "baseline"}},
    # mtshuffle's writer with Spark's reader: the reduce side's reference
    "mts-sparkreader": {"mode": "mts", "conf": {"spark.mtshuffle.reader.enabled": "false"}},
    # not a writer: the map stage's work without the exchange (scan, partition ids, a count), its floor
    "floor": {"mode": "spark", "conf": {}},
}
METRICS = ("query_s", "map_task_s", "map_stage_s", "map_task_max_s", "reduce_stage_s", "tiny_task_s", "skew_stage_s",
           "skew_query_s", "executor_rss_mib", "skew_read_stage_s", "skew_read_task_s", "map_budget_wait_s",
           "map_spilled_mb", "warm_query_s", "warm_map_task_s", "warm_reduce_stage_s")
# a map task's write, from the line the plugin's writer logs for a task of 64 MiB or more
WROTE = re.compile(r"mtshuffle: shuffle (\d+) map \d+ wrote .*\((\d+) ms of them waiting for budget\).*; "
                   r"(\d+) bytes spilled")


def write_logs(base, app, shuffle):
    """Budget waits (s) and bytes spilled (MB) summed over the map tasks of one shuffle, from the executors'
    logs; NaN where no task logged (Spark's writers, or tasks under 64 MiB)."""
    waits, spilled = [], []
    for line in e2e.log_lines(base["work"], app, " wrote "):
        m = WROTE.search(line)
        if m and int(m.group(1)) == shuffle:
            waits.append(int(m.group(2)) / 1e3)
            spilled.append(int(m.group(3)) / 1e6)
    nan = float("nan")
    return (sum(waits), sum(spilled)) if waits else (nan, nan)


def spark_version():
    """The Spark that ran (the pyspark this Python imports: cluster.sh starts the cluster from it)."""
    import pyspark
    return pyspark.__version__


def by_id(stages):
    return sorted(stages, key=lambda x: x["id"])


def seed_run(base, mode, conf, reps=1):
    """The seed's query alone, reps times in one application: e2e's result and its map stages (the stages
    that write the shuffle), in the order the query's runs made them."""
    r = e2e.run(dict(base, mode=mode, seed_only=True, conf=conf, reps=reps))
    return r, by_id(x for x in r["stages"] if x["shuffle_write_bytes"] >= 1 << 20)


def slowest_task_s(stage):
    return max(stage.get("task_run_ms") or [float("nan")]) / 1e3


def warm_metrics(r, maps, tiny):
    """The seed query's second run in the same application (--warm): its query time, map stage task time
    and reduce stage wall time; NaN without --warm."""
    nan = float("nan")
    if len(r["seed_query_seconds"]) < 2 or len(maps) < 2:
        return {"warm_query_s": nan, "warm_map_task_s": nan, "warm_reduce_stage_s": nan}
    return {"warm_query_s": r["seed_query_seconds"][1], "warm_map_task_s": maps[1]["executor_run_time_ms"] / 1e3,
            "warm_reduce_stage_s": tiny[1]["duration_ms"] / 1e3 if len(tiny) > 1 else nan}


def measure(base, writer, size, warm=False):
    w = WRITERS[writer]
    conf = dict(w["conf"], **{"spark.sql.files.maxPartitionBytes": size,
                              "spark.executor.processTreeMetrics.enabled": "true",
                              "spark.executor.metrics.pollingInterval": "100ms"})
    reps = 2 if warm else 1  # with --warm the query runs again in the same application, its code compiled
    if writer == "floor":
        r = e2e.run(dict(base, mode="spark", scenario="floor", conf=conf, reps=reps))
        most = max(x["num_tasks"] for x in r["stages"])  # the scan: its tasks outnumber the other stages'
        scans = by_id(x for x in r["stages"] if x["num_tasks"] == most)
        scan = scans[0]
        nan = float("nan")
        return dict({"query_s": r["seed_query_seconds"][0], "map_task_s": scan["executor_run_time_ms"] / 1e3,
                     "map_stage_s": scan["duration_ms"] / 1e3, "map_tasks": scan["num_tasks"], "shuffle_bytes": 0,
                     "map_task_max_s": slowest_task_s(scan),
                     "map_budget_wait_s": nan, "map_spilled_mb": nan,
                     "reduce_stage_s": nan, "tiny_task_s": nan, "skew_stage_s": nan, "skew_query_s": nan,
                     "executor_rss_mib": nan,
                     "skew_read_stage_s": nan, "skew_read_task_s": nan, "result": None, "skew_result": None},
                    **warm_metrics(r, scans, []))
    r, maps = seed_run(base, w["mode"], conf, reps)
    mapst = maps[0]  # the first run's
    wait_s, spilled_mb = write_logs(base, r["app"], 0)
    if not r["manager"].endswith("MtsShuffleManager" if w["mode"] == "mts" else "SortShuffleManager"):
        raise SystemExit("spark_bench: %s ran with %s" % (writer, r["manager"]))
    # the seed query's reduce stage: 200 tasks that read its shuffle and each write one row
    tiny = by_id(x for x in r["stages"] if x["num_tasks"] == 200 and 0 < x["shuffle_write_bytes"] < 1 << 20)
    s = e2e.run(dict(base, mode=w["mode"], scenario="skew", conf=conf))
    # the skewed stage: the second exchange's map stage, the stage that reads 4 partitions and writes most
    skewed = max((x for x in s["stages"] if x["num_tasks"] == 4), key=lambda x: x["shuffle_write_bytes"])
    # the skewed reduce stage: 8 tasks reading the shuffle, one of them half of it
    sr = e2e.run(dict(base, mode=w["mode"], scenario="skew_read", conf=conf))
    rd = max((x for x in sr["stages"] if x["num_tasks"] == 8), key=lambda x: x["shuffle_read_bytes"])
    return {"query_s": r["seed_query_seconds"][0], "map_task_s": mapst["executor_run_time_ms"] / 1e3,
            "map_stage_s": mapst["duration_ms"] / 1e3, "map_tasks": mapst["num_tasks"],
            "map_task_max_s": slowest_task_s(mapst),
            "map_budget_wait_s": wait_s, "map_spilled_mb": spilled_mb,
            "shuffle_bytes": mapst["shuffle_write_bytes"],
            "reduce_stage_s": tiny[0]["duration_ms"] / 1e3 if tiny else float("nan"),
            "tiny_task_s": tiny[0]["executor_run_time_ms"] / 1e3 if tiny else float("nan"),
            "skew_stage_s": skewed["duration_ms"] / 1e3, "skew_query_s": s["seed_query_seconds"][0],
            "executor_rss_mib": max(e["ProcessTreeJVMRSSMemory"] for e in r["executor_peaks"]) / 2 ** 20,
            "skew_read_stage_s": rd["duration_ms"] / 1e3, "skew_read_task_s": rd["executor_run_time_ms"] / 1e3,
            "result": r["seed_query"], "skew_result": [s["skew_query"], sr["skew_read_query"]],
            **warm_metrics(r, maps, tiny)}


def report(path):
    """A markdown table of a finished run's summary: per size and metric, each writer's median and its
    ratio to mtshuffle's (pair by pair: median, min, max) with Welch's p."""
    out = json.load(open(path))
    lines = []
    for size in out["sizes"]:
        lines.append("\nTask size `spark.sql.files.maxPartitionBytes=%s` (%d repetitions):\n" % (size, out["reps"]))
        lines.append("| metric | " + " | ".join(out["writers"]) + " |")
        lines.append("|---|" + "---|" * len(out["writers"]))
        for metric in (m for m in METRICS if m in out["summary"][size]):  # older runs lack some
            cells = []
            for w in out["writers"]:
                row = out["summary"][size][metric][w]
                if math.isnan(row["median"]):
                    cells.append("")
                elif "over_mts_median" in row:
                    cells.append("%.2f (%.2fx, %.2f-%.2f, p=%.2g)" % (row["median"], row["over_mts_median"],
                                                                     row["over_mts_min"], row["over_mts_max"],
                                                                     row["welch_p"]))
                else:
                    cells.append("%.2f" % row["median"])
            lines.append("| %s | %s |" % (metric, " | ".join(cells)))
        floor = out["runs"][size].get("floor")
        if floor:
            # What each writer adds to the map stage's task time over the same stage without its exchange,
            # repetition by repetition (the floor runs in the same repetition).
            cells = []
            for w in out["writers"]:
                if w == "floor":
                    cells.append("")
                    continue
                xs = [m["map_task_s"] - f["map_task_s"] for m, f in zip(out["runs"][size][w], floor)]
                cells.append("%.2f (%.2f-%.2f)" % (statistics.median(xs), min(xs), max(xs)))
            lines.append("| map_task_s over floor | %s |" % " | ".join(cells))
    print("\n".join(lines))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--report":
        report(sys.argv[2])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--jar", required=True)
    ap.add_argument("--native", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--rows", type=int, default=24000000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--sizes", default="128m,32m", help="spark.sql.files.maxPartitionBytes values")
    ap.add_argument("--writers", default=",".join(WRITERS))
    ap.add_argument("--out", default=None)
    ap.add_argument("--warm", action="store_true",
                    help="run the seed query a second time in the same application and report it too (warm_*)")
    ap.add_argument("--warmup", type=int, default=1,
                    help="applications of every writer, at the first size, before the repetitions; not measured "
                         "(the first application on a fresh cluster ran up to 1.4x slower)")
    a = ap.parse_args()
    table = e2e.make_table(a.work, a.rows)
    base = {"jar": os.path.abspath(a.jar), "native": os.path.abspath(a.native), "table": table, "reps": 1,
            "kill": False, "work": os.path.abspath(a.work)}
    writers, sizes = a.writers.split(","), a.sizes.split(",")
    runs = {size: {w: [] for w in writers} for size in sizes}
    warmup = []
    for i in range(a.warmup):
        for w in writers:
            m = measure(base, w, sizes[0], False)
            warmup.append({"writer": w, "size": sizes[0], "query_s": m["query_s"], "map_task_s": m["map_task_s"]})
            print("warm-up %d size %s %-15s query %6.2f s, map tasks %6.2f s (not measured)" % (
                i, sizes[0], w, m["query_s"], m["map_task_s"]), flush=True)
    for rep in range(a.reps):
        order = writers[rep % len(writers):] + writers[:rep % len(writers)]
        for size, w in itertools.product(sizes, order):
            m = measure(base, w, size, a.warm)
            runs[size][w].append(m)
            print("rep %d size %s %-15s query %6.2f s, map tasks %6.2f s (%d tasks, slowest %5.2f s, %d bytes, "
                  "budget waits %5.2f s, %.0f MB spilled), reduce stage %5.2f s (tasks %5.2f s), skewed stage "
                  "%5.2f s, skewed read stage %5.2f s (tasks %5.2f s); warm: query %5.2f s, map tasks %5.2f s, "
                  "reduce stage %5.2f s" % (
                      rep, size, w, m["query_s"], m["map_task_s"], m["map_tasks"], m["map_task_max_s"],
                      m["shuffle_bytes"], m["map_budget_wait_s"], m["map_spilled_mb"], m["reduce_stage_s"],
                      m["tiny_task_s"], m["skew_stage_s"], m["skew_read_stage_s"], m["skew_read_task_s"],
                      m["warm_query_s"], m["warm_map_task_s"], m["warm_reduce_stage_s"]),
                  flush=True)
    out = {"rows": a.rows, "reps": a.reps, "sizes": sizes, "writers": writers, "machine": machine(),
           "spark": spark_version(), "warmup": warmup, "runs": runs, "summary": {}}
    for size in sizes:
        results = {json.dumps([m["result"], m["skew_result"]], sort_keys=True)
                   for w in writers for m in runs[size][w] if w != "floor"}
        if len(results) != 1:
            raise SystemExit("spark_bench: the writers' results differ at %s: %s" % (size, results))
        for metric in METRICS:
            ref = [m[metric] for m in runs[size]["mts"]] if "mts" in writers else None
            for w in writers:
                xs = [m[metric] for m in runs[size][w]]
                row = {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}
                if ref and w != "mts" and len(xs) > 1 and not any(math.isnan(x) for x in xs):
                    ratios = [x / y for x, y in zip(xs, ref)]
                    t, p, df = welch(xs, ref)
                    row.update({"over_mts_median": statistics.median(ratios), "over_mts_min": min(ratios),
                                "over_mts_max": max(ratios), "welch_t": t, "welch_df": df, "welch_p": p})
                out["summary"].setdefault(size, {}).setdefault(metric, {})[w] = row
                print("size %-5s %-16s %-13s median %8.3f%s" % (
                    size, metric, w, row["median"],
                    "" if "over_mts_median" not in row else ", %s/mts %.2fx (min %.2f, max %.2f), Welch p %.3g" % (
                        w, row["over_mts_median"], row["over_mts_min"], row["over_mts_max"], row["welch_p"])))
    json.dump(out, open(a.out or os.path.join(a.work, "spark-bench.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
