#!/usr/bin/env python3
"""The benchmark suite: every sweep of issue #4, each configuration measured by
`mtshuffle bench` with its contenders interleaved in one process, then
medians, min/max, pair-by-pair ratios and Welch t-test p-values, written as
tables on stdout and in table.md, suite.json, suite.csv and PNG plots. Each configuration's
process first runs every contender once more, not kept (`bench --warmup 1`):
its first buffers, files and allocator state.

    bench/suite.py [--quick] [--out DIR] [--mtshuffle PATH] [--reps N] [--warmup W] [--dir DIR]
"""
import argparse
import csv
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# ---- statistics ---------------------------------------------------------------


def _betacf(a, b, x):
    """Continued fraction of the regularised incomplete beta (modified Lentz)."""
    tiny, eps = 1e-300, 3e-16
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        de = d * c
        h *= de
        if abs(de - 1.0) < eps:
            break
    return h


def betainc(a, b, x):
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(lbeta + a * math.log(x) + b * math.log(1 - x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1 - x) / b


def welch(xs, ys):
    """Two-sided Welch t-test: (t, p, df)."""
    n1, n2 = len(xs), len(ys)
    if n1 < 2 or n2 < 2:
        return float("nan"), float("nan"), float("nan")
    m1, m2 = statistics.fmean(xs), statistics.fmean(ys)
    v1, v2 = statistics.variance(xs), statistics.variance(ys)
    se2 = v1 / n1 + v2 / n2
    if se2 == 0:
        return float("inf") if m1 != m2 else 0.0, 0.0 if m1 != m2 else 1.0, float(n1 + n2 - 2)
    t = (m1 - m2) / math.sqrt(se2)
    df = se2 * se2 / ((v1 / n1) ** 2 / (n1 - 1) + (v2 / n2) ** 2 / (n2 - 1))
    p = betainc(df / 2.0, 0.5, df / (df + t * t))
    return t, p, df


def summary(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def pair_ratios(slow, fast):
    """Ratios run by run (rep i of A against rep i of B): interleaving makes them pairs."""
    return [s / f for s, f in zip(slow, fast) if f > 0]


# ---- the suite ------------------------------------------------------------------

ALL = "streaming,baseline,compress,write,lz4,zstd,read,decode"
SWEEP = "streaming,baseline,compress,write"


def configs(quick):
    """(group, label, bench options) for every measured configuration."""
    if quick:
        base = {"tasks": 4, "task-mib": 8, "partitions": 200, "codec": "lz4", "threads": 2, "batches": 1}
        return [
            ("single", "single batch, lz4, 2 threads", dict(base), ALL),
            ("batches", "batches 4.8", dict(base, batches=4.8), SWEEP),
            ("partitions", "10000 partitions", dict(base, partitions=10000), SWEEP),
            ("durable", "single batch, fsync", dict(base, fsync=True), SWEEP),
            ("input", "unsorted records", dict(base, input="unsorted"), SWEEP),
        ]
    base = {"tasks": 16, "task-mib": 32, "partitions": 200, "codec": "lz4", "threads": 2, "batches": 1}
    out = [("single", "single batch, lz4, 2 threads", dict(base), ALL)]
    for b in (2.8, 4.8, 10):
        out.append(("batches", "batches %g" % b, dict(base, batches=b), SWEEP))
    # The same batches through mts_writer_add_batch_async (borrowed until
    # given back, no copy into the arena's pages).
    for b in (4.8, 10):
        out.append(("async", "batches %g, add_batch_async" % b, dict(base, batches=b, input="async"), SWEEP))
    # The partition sweep: the same 512 MiB as 4 tasks of 128 MiB, which keeps
    # the baseline's file count (tasks x partitions) and its run time bounded.
    wide = dict(base, tasks=4, **{"task-mib": 128})
    for p in (200, 2000, 10000):
        out.append(("partitions", "%d partitions (4 x 128 MiB)" % p, dict(wide, partitions=p), SWEEP))
    for p in (200, 2000, 10000):
        out.append(("skew", "%d partitions, skewed (4 x 128 MiB)" % p, dict(wide, partitions=p, skew=0.5), SWEEP))
    for codec in ("zstd", "none"):
        out.append(("codec", "codec %s" % codec, dict(base, codec=codec), ALL))
    out.append(("threads", "lz4, 1 thread", dict(base, threads=1), ALL))
    out.append(("threads", "zstd, 1 thread", dict(base, codec="zstd", threads=1), ALL))
    out.append(("durable", "single batch, fsync", dict(base, fsync=True), SWEEP))
    out.append(("durable", "batches 4.8, fsync", dict(base, batches=4.8, fsync=True), SWEEP))
    # Input shapes: the same rows as sorted records, records in random
    # partition order one call each, and tagged buffers (the JNI binding's).
    for shape, lab in (("records", "records in partition order"), ("unsorted", "unsorted records"),
                       ("tagged", "unsorted, tagged buffers")):
        out.append(("input", lab, dict(base, input=shape), SWEEP))
    for shape in ("batch", "unsorted"):
        out.append(("input", "%s, 2 tasks at a time" % shape, dict(base, input=shape, parallel=2), SWEEP))
    out.append(("input", "unsorted, 10000 partitions (4 x 128 MiB)", dict(wide, partitions=10000, input="unsorted"), SWEEP))
    out.append(("input", "unsorted, 200 partitions (4 x 128 MiB)", dict(wide, input="unsorted"), SWEEP))
    for shape in ("batch", "unsorted"):
        out.append(("spill", "%s, 8 MiB budget" % shape, dict(base, input=shape, **{"budget-mib": 8}), SWEEP))
    for t in (4, 8):
        out.append(("threads", "lz4, %d threads" % t, dict(base, threads=t), SWEEP))
    return out


def run_config(mts, opts, contenders, reps, warmup, workdir):
    cmd = [mts, "bench", "--reps", str(reps), "--warmup", str(warmup), "--dir", workdir, "--contenders", contenders]
    for k, v in opts.items():
        if v is True:
            cmd.append("--" + k)
        else:
            cmd += ["--" + k, str(v)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def analyse(group, label, raw):
    s = raw["samples"]
    row = {"group": group, "label": label, "config": raw["config"], "bytes_in": raw["bytes_in"],
           "bytes_out": raw["bytes_out"], "contenders": {}}
    for name, v in s.items():
        # cores: the process's CPU time over the wall time of each run (all
        # threads, user and system), how busy the machine's CPUs were kept.
        row["contenders"][name] = dict(summary(v["seconds"]), seconds=v["seconds"], cpu=v["cpu"], faults=v["faults"],
                                       cores_median=statistics.median(c / w for c, w in zip(v["cpu"], v["seconds"])),
                                       rss_max=max(max(v["rss"]), v["rss_first"]), peak_held_max=max(v["peak_held"]))
    st, bl = s["streaming"]["seconds"], s["baseline"]["seconds"]
    t, p, df = welch(bl, st)
    ratios = pair_ratios(bl, st)
    row["baseline_over_streaming"] = dict(summary(ratios), t=t, p=p, df=df)
    if "compress" in s and "write" in s:
        # The limit of each run: the slower of compress-only and write-only of the same rep.
        lim = [max(c, w) for c, w in zip(s["compress"]["seconds"], s["write"]["seconds"])]
        row["streaming_over_limit"] = summary(pair_ratios(st, lim))
    if "read" in s and "decode" in s and raw["config"]["codec"] != "none":
        # (Stored blocks have nothing to decode: decode-only is no limit for their read.)
        t2, p2, _ = welch(s["read"]["seconds"], s["decode"]["seconds"])
        row["read_over_decode"] = dict(summary(pair_ratios(s["read"]["seconds"], s["decode"]["seconds"])), p=p2)
    budget = raw["config"]["budget"]
    # The documented overhead (README, Memory): 16 MiB per process, 48 bytes per
    # partition, and 4 MiB per thread that writes (its own job buffers and
    # allocator arena).
    parallel = raw["config"].get("parallel", 1)
    row["rss_within_budget"] = all(c["rss_max"] <= budget + 16 * 2**20 + 48 * raw["config"]["partitions"]
                                   + 4 * 2**20 * parallel
                                   for n, c in row["contenders"].items() if n in ("streaming", "baseline"))
    row["peak_held_within_budget"] = all(c["peak_held_max"] <= budget
                                         for n, c in row["contenders"].items() if n in ("streaming", "baseline"))
    return row


def fmt_table(rows):
    lines = ["| configuration | streaming s (min-max) | baseline s (min-max) | baseline/streaming (min-max) | p | "
             "streaming/limit | read/decode | peak held MiB | writer RSS MiB |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c = r["contenders"]
        st, bl, q = c["streaming"], c["baseline"], r["baseline_over_streaming"]
        lim = r.get("streaming_over_limit")
        rd = r.get("read_over_decode")
        lines.append("| %s | %.3f (%.3f-%.3f) | %.3f (%.3f-%.3f) | %.2fx (%.2f-%.2f) | %.1e | %s | %s | %.1f | %.1f |" % (
            r["label"], st["median"], st["min"], st["max"], bl["median"], bl["min"], bl["max"],
            q["median"], q["min"], q["max"], q["p"],
            "%.2fx" % lim["median"] if lim else "-", "%.2fx" % rd["median"] if rd else "-",
            max(st["peak_held_max"], bl["peak_held_max"]) / 2**20, max(st["rss_max"], bl["rss_max"]) / 2**20))
    return "\n".join(lines)


def fmt_limits(rows):
    lines = ["| configuration | streaming | compress-only | write-only | lz4 CLI | zstd CLI | read | decode-only |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c = r["contenders"]
        if "lz4" not in c:
            continue
        cell = lambda n: "%.3f" % c[n]["median"] if n in c else "-"
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["label"], cell("streaming"), cell("compress"), cell("write"), cell("lz4"), cell("zstd"),
            cell("read"), cell("decode")))
    return "\n".join(lines)


def plots(rows, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def med(r, n):
        return r["contenders"][n]["median"]

    made = []

    def finish(fig, ax, xlabel, title, name):
        ax.set_xlabel(xlabel)
        ax.set_ylabel("seconds (median)")
        ax.set_title(title)
        ax.legend()
        ax.set_ylim(bottom=0)
        fig.tight_layout()
        fig.savefig(os.path.join(out, name), dpi=110)
        made.append(name)

    bat = sorted([r for r in rows if r["group"] in ("single", "batches") and not r["config"]["fsync"]],
                 key=lambda r: r["config"]["batches"])
    if bat:
        fig, ax = plt.subplots(figsize=(6, 4))
        xs = [r["config"]["batches"] for r in bat]
        for n, style in (("streaming", "o-"), ("baseline", "s--"), ("compress", ":"), ("write", "-.")):
            ax.plot(xs, [med(r, n) for r in bat], style, label=n + ("-only" if n in ("compress", "write") else ""))
        finish(fig, ax, "batches per task", "Time vs batches per task", "time_vs_batches.png")
    par = [r for r in rows if r["group"] in ("partitions", "skew") and not r["config"]["fsync"]
           and r["config"]["codec"] == "lz4" and r["config"]["threads"] == 2 and r["config"]["batches"] == 1]
    if par:
        fig, ax = plt.subplots(figsize=(6, 4))
        for skew, lab in ((0.0, "uniform"), (0.5, "skewed")):
            sel = sorted([r for r in par if abs(r["config"]["skew"] - skew) < 1e-9], key=lambda r: r["config"]["partitions"])
            if not sel:
                continue
            xs = [r["config"]["partitions"] for r in sel]
            ax.plot(xs, [med(r, "streaming") for r in sel], "o-", label="streaming, " + lab)
            ax.plot(xs, [med(r, "baseline") for r in sel], "s--", label="baseline, " + lab)
        ax.set_xscale("log")
        finish(fig, ax, "partitions", "Time vs partitions", "time_vs_partitions.png")
    lim = [r for r in rows if "streaming_over_limit" in r]
    if lim:
        fig, ax = plt.subplots(figsize=(7, 4))
        labels = [r["label"] for r in lim]
        ax.barh(labels, [1.0 / r["streaming_over_limit"]["median"] for r in lim])
        ax.axvline(1.0, color="k", lw=0.8)
        ax.set_xlabel("max(compress-only, write-only) / streaming  (1.0 = at the limit)")
        ax.set_title("Fraction of the limit reached")
        fig.tight_layout()
        fig.savefig(os.path.join(out, "limit_fraction.png"), dpi=110)
        made.append("limit_fraction.png")
    return made


def _read_line(path):
    with open(path) as f:
        return f.read().strip()


def machine():
    """What the figures were measured on: platform, CPUs, the CPU's name,
    family and model, its caches (one CPU's view: L1d, L2, L3) and memory.
    Kept in every benchmark's JSON, since runs of this project come from
    more than one kind of machine."""
    info = {"platform": platform.platform(), "cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key == "model name":
                    info["cpu"] = value
                elif key == "cpu family":
                    info["cpu_family"] = int(value)
                elif key == "model":
                    info["cpu_model"] = int(value)
                elif not line.strip():
                    break  # the first CPU's entry ends here
        with open("/proc/meminfo") as f:
            info["mem_kib"] = int(f.readline().split()[1])
    except (OSError, ValueError):
        pass
    caches = {}
    base = "/sys/devices/system/cpu/cpu0/cache"
    for index in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        try:
            level, kind, size = (_read_line(os.path.join(base, index, f)) for f in ("level", "type", "size"))
        except OSError:
            continue
        if kind != "Instruction":
            caches["L" + level + ("d" if kind == "Data" else "")] = size
    if caches:
        info["caches"] = caches
    return info


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small inputs, 3 reps: a smoke test (< 2 minutes)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--mtshuffle", default=os.path.join(ROOT, "build", "mtshuffle"))
    ap.add_argument("--reps", type=int, default=None, help="repetitions per configuration (7; quick: 3)")
    ap.add_argument("--warmup", type=int, default=1, help="repetitions run first and not kept (1)")
    ap.add_argument("--dir", default=None, help="where outputs are written (default: OUT/work)")
    args = ap.parse_args()
    reps = args.reps or (3 if args.quick else 7)
    os.makedirs(args.out, exist_ok=True)
    work = args.dir or os.path.join(args.out, "work")
    os.makedirs(work, exist_ok=True)
    started = time.time()
    rows = []
    for group, label, opts, contenders in configs(args.quick):
        t0 = time.time()
        raw = run_config(args.mtshuffle, opts, contenders, reps, args.warmup, work)
        rows.append(analyse(group, label, raw))
        r = rows[-1]
        print("%-32s streaming %.3f s, baseline %.3f s (%.2fx, p=%.1e)  [%.0f s]" % (
            label, r["contenders"]["streaming"]["median"], r["contenders"]["baseline"]["median"],
            r["baseline_over_streaming"]["median"], r["baseline_over_streaming"]["p"], time.time() - t0),
            file=sys.stderr, flush=True)
    result = {"command": " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]), "quick": args.quick,
              "reps": reps, "warmup": args.warmup, "machine": machine(), "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(started)),
              "seconds": time.time() - started, "rows": rows}
    result["plots"] = plots(rows, args.out)
    with open(os.path.join(args.out, "suite.json"), "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(args.out, "suite.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["group", "label", "tasks", "task_mib", "batches", "partitions", "skew", "codec", "threads", "fsync",
                    "input", "parallel", "budget", "contender", "median_s", "min_s", "max_s", "reps", "cores_median", "rss_max", "peak_held_max", "bytes_in", "bytes_out"])
        for r in rows:
            c = r["config"]
            for n, v in r["contenders"].items():
                w.writerow([r["group"], r["label"], c["tasks"], c["task_mib"], c["batches"], c["partitions"], c["skew"],
                            c["codec"], c["threads"], c["fsync"], c.get("input", "batch"), c.get("parallel", 1),
                            c["budget"], n, v["median"], v["min"], v["max"], v["n"], "%.3f" % v["cores_median"],
                            v["rss_max"], v["peak_held_max"], r["bytes_in"], r["bytes_out"]])
    tables = fmt_table(rows) + "\n\n" + fmt_limits(rows)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(tables + "\n")
    print(tables)
    print("\nsuite: %d configurations in %.0f s; outputs in %s" % (len(rows), time.time() - started, args.out))


if __name__ == "__main__":
    main()
