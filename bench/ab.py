#!/usr/bin/env python3
"""A/B: two builds of mtshuffle on the same configurations, interleaved.

Each repetition runs `mtshuffle bench ... --reps 2` (keeping the second,
warm sample) with both builds (same
generated input, same directory), A first in even repetitions and B first in
odd ones (on a disk, a run pays for the deletes of the one before it), so
machine drift and order hit both alike. Prints, per configuration and contender, the median seconds of each
build and the median of the pairwise ratios B/A with their range.

Each build must run its own library: `mtshuffle` loads libmtshuffle.so through
its build directory's RUNPATH, so a copied binary runs whatever library that
directory holds now, and an A/B of a copy against its source is an A/A test.
The script refuses builds whose libraries are the same file or the same bytes
(--same-library allows it, for an A/A run) and records each library's path and
SHA-256 in the JSON.

    bench/ab.py --a OLD/mtshuffle --b NEW/mtshuffle --reps 7 \\
        --config "single batch=--tasks 16 --task-mib 32" \\
        --config "batches 4.8=--tasks 16 --task-mib 32 --batches 4.8" \\
        --contenders streaming,baseline --dir /dev/shm/mtsab [--within read/decode] [--json out.json]
"""
import argparse
import hashlib
import json
import os
import shlex
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from suite import machine  # noqa: E402


def run(binary, args, contenders, directory):
    """One warm sample per contender: bench runs each twice and the first
    (cold: fresh process, first allocations, first files) is dropped."""
    cmd = [binary, "bench", *args, "--reps", "2", "--contenders", contenders, "--dir", directory]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return {k: v["seconds"][1] for k, v in json.loads(out)["samples"].items()}


def library(binary):
    """The libmtshuffle a build's mtshuffle loads (as ldd resolves it), or the
    binary itself where it links none, with the file's SHA-256."""
    out = subprocess.run(["ldd", binary], check=True, capture_output=True, text=True).stdout
    path = binary
    for line in out.splitlines():
        name, _, rest = line.strip().partition(" => ")
        if name.startswith("libmtshuffle.so"):
            path = rest.split(" (")[0].strip()
            if not os.path.exists(path):
                sys.exit(f"ab.py: {binary} does not find its library ({line.strip()})")
            break
    path = os.path.realpath(path)
    with open(path, "rb") as f:
        return path, hashlib.sha256(f.read()).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="build A's mtshuffle")
    ap.add_argument("--b", required=True, help="build B's mtshuffle")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--config", action="append", required=True, help="NAME=bench arguments")
    ap.add_argument("--contenders", default="streaming,baseline")
    ap.add_argument("--dir", default="/dev/shm/mtsab")
    ap.add_argument("--within", metavar="X/Y", help="also each build's ratio of contender X to Y, run by run "
                    "(both from the same process and repetition), e.g. read/decode")
    ap.add_argument("--json", help="write every sample here")
    ap.add_argument("--same-library", action="store_true",
                    help="allow builds that run the same library (an A/A run)")
    o = ap.parse_args()
    libs = {"a": library(o.a), "b": library(o.b)}
    for side in ("a", "b"):
        print(f"{side.upper()}: {libs[side][0]} (sha256 {libs[side][1][:12]})", file=sys.stderr)
    if not o.same_library and (libs["a"][0] == libs["b"][0] or libs["a"][1] == libs["b"][1]):
        sys.exit("ab.py: A and B run the same library (a copied mtshuffle loads its build directory's "
                 "libmtshuffle.so): build each variant in a build directory of its own, or pass "
                 "--same-library for an A/A run")
    results = {}
    for spec in o.config:
        name, _, args = spec.partition("=")
        samples = {"a": [], "b": []}
        for rep in range(o.reps):
            order = (("a", o.a), ("b", o.b)) if rep % 2 == 0 else (("b", o.b), ("a", o.a))
            for side, binary in order:
                samples[side].append(run(binary, shlex.split(args), o.contenders, o.dir))
            print(f"{name}: repetition {rep + 1}/{o.reps}", file=sys.stderr)
        results[name] = {"args": args, "samples": samples}
        for c in samples["a"][0]:
            a = [s[c] for s in samples["a"]]
            b = [s[c] for s in samples["b"]]
            ratios = [y / x for x, y in zip(a, b)]
            print(f"{name:28s} {c:12s} A {statistics.median(a):.4f} s  B {statistics.median(b):.4f} s  "
                  f"B/A {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")
        if o.within:
            x, _, y = o.within.partition("/")
            for side in ("a", "b"):
                r = [s[x] / s[y] for s in samples[side]]
                print(f"{name:28s} {o.within:12s} {side.upper()} {statistics.median(r):.3f} "
                      f"({min(r):.3f}-{max(r):.3f})")
    if o.json:
        with open(o.json, "w") as f:
            json.dump({"a": o.a, "b": o.b, "reps": o.reps, "contenders": o.contenders, "machine": machine(),
                       "libraries": {k: {"path": v[0], "sha256": v[1]} for k, v in libs.items()},
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
