#!/usr/bin/env bash
# Smoke test of the benchmark suite: `bench/suite.py --quick` runs to the end
# and its JSON, CSV, tables and plots have every field; `bench/sweeps.sh --quick`
# runs every sweep on tmpfs and on disk and writes each JSON. Speed is not checked here.
set -euo pipefail
mts=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d "${TMPDIR:-/tmp}/mts-bench-XXXXXX")
trap 'rm -rf "$out"' EXIT
python3 -c "import matplotlib" 2>/dev/null || { echo "matplotlib is not installed"; exit 77; }
start=$(date +%s)
python3 "$root/bench/suite.py" --quick --out "$out" --mtshuffle "$mts" > "$out/stdout.txt"
echo "suite --quick took $(( $(date +%s) - start )) s"
python3 - "$out" <<'PY'
import csv, json, os, sys
out = sys.argv[1]
d = json.load(open(os.path.join(out, "suite.json")))
for k in ("command", "quick", "reps", "warmup", "machine", "started", "seconds", "rows", "plots"):
    assert k in d, k
assert d["quick"] and d["reps"] >= 3 and len(d["rows"]) == 5
assert d["rows"][4]["config"]["input"] == "unsorted", d["rows"][4]["config"]
for r in d["rows"]:
    for k in ("group", "label", "config", "bytes_in", "bytes_out", "contenders", "baseline_over_streaming",
              "streaming_over_limit", "rss_within_budget", "peak_held_within_budget"):
        assert k in r, (r["label"], k)
    for name in ("streaming", "baseline", "compress", "write"):
        c = r["contenders"][name]
        for k in ("median", "min", "max", "n", "seconds", "cpu", "cores_median", "rss_max", "peak_held_max"):
            assert k in c, (r["label"], name, k)
        assert c["n"] == d["reps"] and len(c["seconds"]) == d["reps"] and c["min"] <= c["median"] <= c["max"]
        assert len(c["cpu"]) == d["reps"] and 0 < c["cores_median"] <= os.cpu_count() + 0.5, (r["label"], name, c["cpu"])
    q = r["baseline_over_streaming"]
    assert all(k in q for k in ("median", "min", "max", "t", "p", "df")), q
    assert 0 <= q["p"] <= 1, q
    assert r["peak_held_within_budget"], r["label"]
first = d["rows"][0]
for name in ("lz4", "zstd", "read", "decode"):
    assert name in first["contenders"], name
assert "read_over_decode" in first
for p in ("time_vs_batches.png", "time_vs_partitions.png", "limit_fraction.png"):
    assert p in d["plots"] and os.path.getsize(os.path.join(out, p)) > 1000, p
rows = list(csv.DictReader(open(os.path.join(out, "suite.csv"))))
assert len(rows) >= 5 * 4 and {"contender", "median_s", "cores_median", "rss_max", "input", "parallel", "budget"} <= set(rows[0])
print("bench smoke test: %d configurations, %d CSV rows, plots %s" % (len(d["rows"]), len(rows), d["plots"]))
PY
grep -q "baseline/streaming" "$out/table.md"
grep -q "compress-only" "$out/table.md"
grep -q "baseline/streaming" "$out/stdout.txt"

# The sweeps: tmpfs at /dev/shm, disk where this test's directory is (the checkout if that is tmpfs).
[ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] || { echo "/dev/shm is not a tmpfs: bench/sweeps.sh needs one"; exit 77; }
disk=$out
[ "$(stat -f -c %T "$disk")" != tmpfs ] || disk=$root
start=$(date +%s)
bash "$root/bench/sweeps.sh" --quick --mtshuffle "$mts" --label smoke --out "$out/sweeps" --disk "$disk" > "$out/sweeps.txt"
echo "sweeps.sh --quick took $(( $(date +%s) - start )) s"
if ls -d /dev/shm/mtssweeps.* "$disk"/mtssweeps.* 2>/dev/null; then echo "sweeps.sh left its scratch directories"; exit 1; fi
python3 - "$out/sweeps" <<'PY'
import json, os, sys
d = sys.argv[1]
want = {"shapes": (4, {"streaming", "baseline"}), "batches-async": (6, {"streaming", "baseline"}),
        "spill": (4, {"streaming"}), "partitions": (4, {"streaming"}), "threads": (4, {"streaming"}),
        "limit-read": (1, {"streaming", "baseline", "compress", "write", "read", "decode"})}
n = 0
for fs in ("tmpfs", "disk"):
    for name, (variants, contenders) in want.items():
        j = json.load(open(os.path.join(d, "%s-%s-smoke.json" % (name, fs))))
        assert j["reps"] == 1 and len(j["samples"]) == variants, (name, fs, list(j["samples"]))
        assert j["machine"]["cpus"] >= 1 and j["machine"]["platform"], (name, fs, j.get("machine"))
        for v, runs in j["samples"].items():
            assert len(runs) == 1 and set(runs[0]) == contenders, (name, fs, v, runs)
            assert all(t > 0 for t in runs[0].values()), (name, fs, v, runs)
        if name == "shapes":
            assert set(j["bytes_out"]) == {"batch", "records", "unsorted", "tagged"}, j["bytes_out"]
        n += 1
print("sweeps smoke test: %d JSON files, every variant and contender" % n)
PY
grep -q "=== done" "$out/sweeps.txt"
[ "$(grep -c "over its limit .*read over decode-only" "$out/sweeps.txt")" -eq 2 ] \
  || { echo "sweeps.sh printed no ratios report for tmpfs and disk"; exit 1; }
