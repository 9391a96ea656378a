#!/usr/bin/env python3
"""The same rows in each input shape, interleaved: one build of mtshuffle,
`bench --input SHAPE --reps 2` per shape in turn (keeping each run's second,
warm sample), the order of the shapes rotating from one repetition to the
next. Prints each shape's median seconds per contender and its pairwise
ratios to the first shape, and the output bytes of each shape.

    bench/shapes.py --mtshuffle build/mtshuffle --reps 7 --dir /dev/shm/mtsshapes \\
        --args "--tasks 16 --task-mib 32" --inputs batch,records,unsorted,tagged \\
        --contenders streaming,baseline [--json out.json]
"""
import argparse
import json
import shlex
import statistics
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mtshuffle", default="build/mtshuffle")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--args", default="--tasks 16 --task-mib 32")
    ap.add_argument("--inputs", default="batch,records,unsorted,tagged")
    ap.add_argument("--contenders", default="streaming,baseline")
    ap.add_argument("--dir", default="/dev/shm/mtsshapes")
    ap.add_argument("--json")
    o = ap.parse_args()
    inputs = o.inputs.split(",")
    samples = {i: [] for i in inputs}
    out_bytes = {}
    for rep in range(o.reps):
        k = rep % len(inputs)
        for shape in inputs[k:] + inputs[:k]:
            cmd = [o.mtshuffle, "bench", *shlex.split(o.args), "--input", shape, "--reps", "2",
                   "--contenders", o.contenders, "--dir", o.dir]
            d = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            samples[shape].append({c: v["seconds"][1] for c, v in d["samples"].items()})
            out_bytes[shape] = d["bytes_out"]
        print(f"repetition {rep + 1}/{o.reps}", file=sys.stderr)
    ref = inputs[0]
    for shape in inputs:
        for c in samples[shape][0]:
            t = [s[c] for s in samples[shape]]
            r = [x[c] / y[c] for x, y in zip(samples[shape], samples[ref])]
            print(f"{shape:10s} {c:10s} {statistics.median(t):.3f} s  /{ref} {statistics.median(r):.2f} "
                  f"({min(r):.2f}-{max(r):.2f})")
        if out_bytes.get(shape):
            print(f"{shape:10s} output {out_bytes[shape]} bytes, {out_bytes[shape] / out_bytes[ref]:.4f} of {ref}")
    if o.json:
        with open(o.json, "w") as f:
            json.dump({"args": o.args, "reps": o.reps, "samples": samples, "bytes_out": out_bytes}, f, indent=1)


if __name__ == "__main__":
    main()
