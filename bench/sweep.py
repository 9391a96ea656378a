#!/usr/bin/env python3
"""One build of mtshuffle over variants of one configuration, interleaved:
`bench ARGS VARIANT --reps 2` per variant in turn (keeping each run's second,
warm sample), the order of the variants rotating from one repetition to the
next. Prints each variant's median seconds per contender, the median and
range of its pairwise ratios to the first variant, and its median CPU seconds
(every thread) and cores (CPU over wall time) per run.

    bench/sweep.py --mtshuffle build/mtshuffle --reps 7 --dir /dev/shm/mtssweep \\
        --args "--tasks 16 --task-mib 32" --contenders streaming \\
        --variant "--threads 2" --variant "--threads 1" --variant "--threads 4" --variant "--threads 8" \\
        [--json out.json]
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from suite import machine  # noqa: E402


def interleave(mtshuffle, args, variants, reps, contenders, directory):
    """Runs `bench ARGS VARIANT --reps 2` for every variant, rep times, the
    order rotating. Returns ({variant: [{contender: warm seconds}, ...]},
    the same with CPU seconds, {variant: output bytes})."""
    samples = {v: [] for v in variants}
    cpu = {v: [] for v in variants}
    out_bytes = {}
    for rep in range(reps):
        k = rep % len(variants)
        for v in variants[k:] + variants[:k]:
            cmd = [mtshuffle, "bench", *shlex.split(args), *shlex.split(v), "--reps", "2",
                   "--contenders", contenders, "--dir", directory]
            d = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            samples[v].append({c: s["seconds"][1] for c, s in d["samples"].items()})
            cpu[v].append({c: s["cpu"][1] for c, s in d["samples"].items()})
            out_bytes[v] = d["bytes_out"]
        print(f"repetition {rep + 1}/{reps}", file=sys.stderr)
    return samples, cpu, out_bytes


def report(samples, cpu, variants, width=24):
    """Each variant's median seconds per contender, its pairwise ratios to the
    first variant, its CPU seconds and cores."""
    ref = variants[0]
    for v in variants:
        for c in samples[v][0]:
            t = [s[c] for s in samples[v]]
            r = [x[c] / y[c] for x, y in zip(samples[v], samples[ref])]
            u = [x[c] for x in cpu[v]]
            cores = [x[c] / y[c] for x, y in zip(cpu[v], samples[v])]
            print(f"{v:{width}s} {c:10s} {statistics.median(t):.3f} s  /[{ref}] {statistics.median(r):.2f} "
                  f"({min(r):.2f}-{max(r):.2f})  cpu {statistics.median(u):.3f} s, {statistics.median(cores):.2f} cores")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mtshuffle", default="build/mtshuffle")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--args", default="--tasks 16 --task-mib 32")
    ap.add_argument("--variant", action="append", required=True, help="extra bench options (repeat)")
    ap.add_argument("--contenders", default="streaming")
    ap.add_argument("--dir", default="/dev/shm/mtssweep")
    ap.add_argument("--json")
    o = ap.parse_args()
    samples, cpu, _ = interleave(o.mtshuffle, o.args, o.variant, o.reps, o.contenders, o.dir)
    report(samples, cpu, o.variant)
    if o.json:
        with open(o.json, "w") as f:
            json.dump({"args": o.args, "reps": o.reps, "variants": o.variant, "machine": machine(), "samples": samples,
                       "cpu": cpu}, f, indent=1)


if __name__ == "__main__":
    main()
