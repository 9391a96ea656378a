#!/usr/bin/env python3
"""The same rows in each input shape, interleaved: one build of mtshuffle,
`bench --input SHAPE --reps 2` per shape in turn (keeping each run's second,
warm sample), the order of the shapes rotating from one repetition to the
next. Prints each shape's median seconds per contender, its pairwise ratios
to the first shape, CPU seconds and cores, and the output bytes of each shape.

    bench/shapes.py --mtshuffle build/mtshuffle --reps 7 --dir /dev/shm/mtsshapes \\
        --args "--tasks 16 --task-mib 32" --inputs batch,records,unsorted,tagged \\
        --contenders streaming,baseline [--json out.json]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from suite import machine  # noqa: E402
from sweep import interleave, report  # noqa: E402


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
    variants = ["--input " + i for i in inputs]
    by_variant, cpu_by_variant, out_by_variant = interleave(o.mtshuffle, o.args, variants, o.reps, o.contenders,
                                                            o.dir)
    samples = {i: by_variant[v] for i, v in zip(inputs, variants)}
    cpu = {i: cpu_by_variant[v] for i, v in zip(inputs, variants)}
    out_bytes = {i: out_by_variant[v] for i, v in zip(inputs, variants)}
    report(samples, cpu, inputs, width=10)
    ref = inputs[0]
    for shape in inputs:
        if out_bytes.get(shape):
            print(f"{shape:10s} output {out_bytes[shape]} bytes, {out_bytes[shape] / out_bytes[ref]:.4f} of {ref}")
    if o.json:
        with open(o.json, "w") as f:
            json.dump({"args": o.args, "reps": o.reps, "machine": machine(), "samples": samples, "cpu": cpu,
                       "bytes_out": out_bytes}, f, indent=1)


if __name__ == "__main__":
    main()
