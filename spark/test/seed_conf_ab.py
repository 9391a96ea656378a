#!/usr/bin/env python3
"""The seed's query alone (spark_bench.py's seed-query measurement, on the
one-worker cluster of cluster.sh), the plugin with two values of one setting,
interleaved (the order alternating), so that one setting's effect on the map
stage shows without the skewed and reduce-side runs. Prints each run, then the
medians and the pair-by-pair ratio first/second of the query's wall time and
the map stage's summed task run time.

    seed_conf_ab.py --jar JAR --native LIB --work DIR --key spark.mtshuffle.maxBytesInFlight \
        --values 64m,256m [--size 128m] [--rows 24000000] [--reps 6] [--out F.json]
"""
import argparse, json, os, statistics, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e  # noqa: E402
from spark_bench import seed_run  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jar", required=True)
    ap.add_argument("--native", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--values", required=True, help="two values, comma-separated")
    ap.add_argument("--size", default="128m", help="spark.sql.files.maxPartitionBytes")
    ap.add_argument("--rows", type=int, default=24000000)
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    values = a.values.split(",")
    if len(values) != 2:
        raise SystemExit("seed_conf_ab: --values takes two values")
    base = {"jar": os.path.abspath(a.jar), "native": os.path.abspath(a.native), "table": e2e.make_table(a.work, a.rows),
            "reps": 1, "kill": False, "work": os.path.abspath(a.work)}
    res = {v: [] for v in values}
    for rep in range(a.reps):
        for v in (values if rep % 2 == 0 else values[::-1]):
            conf = {"spark.sql.files.maxPartitionBytes": a.size, a.key: v}
            r, (st,) = seed_run(base, "mts", conf)
            res[v].append({"query_s": r["seed_query_seconds"][0], "map_task_s": st["executor_run_time_ms"] / 1e3})
            print("rep %d %s=%s query %.2f s, map tasks %.2f s" % (rep, a.key, v, res[v][-1]["query_s"],
                                                                  res[v][-1]["map_task_s"]), flush=True)
    if a.out:
        json.dump({"key": a.key, "size": a.size, "runs": res}, open(a.out, "w"), indent=1)
    for m in ("query_s", "map_task_s"):
        x, y = [r[m] for r in res[values[0]]], [r[m] for r in res[values[1]]]
        ratios = [p / q for p, q in zip(x, y)]
        print("%-10s %s median %.2f, %s median %.2f, %s/%s pair by pair %.3f (%.3f-%.3f)" % (
            m, values[0], statistics.median(x), values[1], statistics.median(y), values[0], values[1],
            statistics.median(ratios), min(ratios), max(ratios)))


if __name__ == "__main__":
    main()
