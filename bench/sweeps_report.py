#!/usr/bin/env python3
"""The ratios of BENCHMARKS.md's targets table that the sweeps do not print, from the JSON that
bench/sweeps.sh writes: each a median of the pair-by-pair ratios of one run's interleaved
repetitions (min-max). Within one variant: baseline over streaming, streaming over its limit
(the slower of compress-only and write-only of the same repetition) and read over decode-only;
across variants: 10,000 partitions over 200 of the same input, each shape over the sorted batch.

    bench/sweeps_report.py [--dir bench/results-engine] --label LABEL [--only tmpfs|disk]
"""
import argparse, json, os, statistics


def fmt(ratios):
    # Three decimals: the targets are bounds like 1.3x, and a median of 1.304 is over it.
    return "%.3fx (%.3f-%.3f)" % (statistics.median(ratios), min(ratios), max(ratios))


def pairs(a, b, key_a="streaming", key_b="streaming"):
    return [x[key_a] / y[key_b] for x, y in zip(a, b)]


def report(d, fs, label):
    load = lambda name: json.load(open(os.path.join(d, "%s-%s-%s.json" % (name, fs, label))))["samples"]
    print("=== %s" % fs)
    s = load("shapes")
    for shape in ("records", "unsorted", "tagged"):
        print("%-40s over the sorted batch %s; baseline over streaming %s" % (
            shape, fmt(pairs(s[shape], s["batch"])), fmt(pairs(s[shape], s[shape], "baseline"))))
    print("%-40s baseline over streaming %s" % ("batch", fmt(pairs(s["batch"], s["batch"], "baseline"))))
    for variant, runs in load("batches-async").items():
        print("%-40s baseline over streaming %s" % (variant, fmt(pairs(runs, runs, "baseline"))))
    p = load("partitions")
    for shape in ("unsorted", "tagged"):
        big, small = p["--input %s --partitions 10000" % shape], p["--input %s --partitions 200" % shape]
        print("%-40s 10,000 partitions over 200 %s" % (shape, fmt(pairs(big, small))))
    (runs,) = load("limit-read").values()
    over_limit = [r["streaming"] / max(r["compress"], r["write"]) for r in runs]
    print("%-40s over its limit %s; read over decode-only %s; baseline over streaming %s" % (
        "single batch", fmt(over_limit), fmt(pairs(runs, runs, "read", "decode")),
        fmt(pairs(runs, runs, "baseline"))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="bench/results-engine")
    ap.add_argument("--label", required=True)
    ap.add_argument("--only", choices=("tmpfs", "disk"))
    a = ap.parse_args()
    for fs in ("tmpfs", "disk"):
        if a.only in (None, fs):
            report(a.dir, fs, a.label)


if __name__ == "__main__":
    main()
