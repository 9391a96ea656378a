#!/usr/bin/env bash
# CLI tests: exit codes, messages, exact inspect output, JSON fields, the RSS
# bound, corruption found by inspect, a rerun adopting the first commit.
set -uo pipefail
mts=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/mts-cli-XXXXXX")
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
expect_rc() { # expect_rc RC DESCRIPTION -- command...
  local want=$1 what=$2; shift 3
  "$@" >"$work/out" 2>"$work/err"; local rc=$?
  if [ "$rc" -eq "$want" ]; then ok; else bad "$what: exit $rc, expected $want"; cat "$work/err"; fi
}

expect_rc 2 "no command" -- "$mts"
grep -q "usage: mtshuffle COMMAND" "$work/err" && ok || bad "usage on stderr"
expect_rc 2 "unknown command" -- "$mts" frobnicate
expect_rc 2 "bad codec" -- "$mts" write --codec snappy --dir "$work/x"
grep -q "unknown --codec 'snappy'" "$work/err" && ok || bad "bad codec message"
# Every numeric option is parsed strictly and checked against the library's
# limits before any work: one message naming the option, exit 2, no output.
bad_values() { # bad_values COMMAND OPTION VALUE... (each value alone)
  local cmd=$1 opt=$2; shift 2
  for v in "$@"; do
    case $cmd in
      read) "$mts" read "$work/none" --partition 0 "--$opt" "$v" >"$work/out" 2>"$work/err" ;;
      verify) "$mts" verify "$work/none" "--$opt" "$v" >"$work/out" 2>"$work/err" ;;
      *) "$mts" "$cmd" --dir "$work/bad" --tasks 1 --task-mib 0.01 "--$opt" "$v" >"$work/out" 2>"$work/err" ;;
    esac
    local rc=$?
    if [ "$rc" -eq 2 ] && [ "$(wc -l < "$work/err")" -eq 1 ] && grep -q -- "--$opt" "$work/err" && [ ! -s "$work/out" ] \
       && [ ! -e "$work/bad" ]; then ok; else bad "$cmd --$opt '$v': exit $rc, $(cat "$work/err")"; fi
  done
}
for cmd in write bench; do
  bad_values $cmd tasks 0 -1 1x "" 99999999999999999999
  bad_values $cmd task-mib 0 -3 abc 1e99
  bad_values $cmd batches 0 0.5 x
  bad_values $cmd partitions 0 -5 16777217 5x 4294967297
  bad_values $cmd skew -0.1 1.5 nan
  bad_values $cmd level 0 20 -1 x
  bad_values $cmd threads 0 257 -1 2.5
  bad_values $cmd budget-mib 0 0.01 -64 64MiB
done
bad_values write parallel 0 -1 1025
bad_values write block-kib 0 0.01 40000
for cmd in write bench; do bad_values $cmd job-kib 0 0.5 x; done
bad_values write shuffle-id -1 2147483648
bad_values write seed -1 1.5
bad_values bench reps 0 65 x
bad_values bench parallel 0 -1 65 x
bad_values bench engine x ""
bad_values bench input x ""
bad_values write input x ""
for cmd in read verify; do
  bad_values $cmd threads 0 257
  bad_values $cmd budget-mib 0.01 x
done
bad_values read partition -1 x 16777216
bad_values read end 0 -2
bad_values read shuffle -1 x
expect_rc 0 "version" -- "$mts" version
# bench takes the writers' job size (and says so in its JSON), as write does.
expect_rc 0 "bench --job-kib" -- "$mts" bench --dir "$work/jb" --tasks 1 --task-mib 0.5 --job-kib 64 \
  --contenders streaming --reps 1
grep -q '"job_size":65536}' "$work/out" && ok || bad "bench --job-kib 64: job_size in its JSON: $(head -c 400 "$work/out")"
expect_rc 0 "--dir with missing parents" -- "$mts" write --dir "$work/new/nested/dir" --tasks 1 --task-mib 0.01 --no-progress
[ -f "$work/new/nested/dir/shuffle_0_0_0.index" ] && ok || bad "nested --dir created"

# Exact inspect output of a deterministic output (codec none: sizes and
# checksums depend only on the workload generator).
expect_rc 0 "small write" -- "$mts" write --dir "$work/a" --tasks 1 --task-mib 0.05 --partitions 4 --codec none --seed 7 --no-progress
expect_rc 0 "inspect" -- "$mts" inspect "$work/a/shuffle_0_0_0.data"
sed "s|$work/a/||" "$work/out" > "$work/inspect.txt"
if diff -u "$here/inspect_none.expected" "$work/inspect.txt"; then ok; else bad "inspect output differs"; fi

# JSON: every field present; a single batch writes nothing but its outputs.
expect_rc 0 "json write" -- "$mts" write --dir "$work/b" --tasks 2 --task-mib 16 --partitions 200 --json --no-progress
python3 - "$work/out" <<'PY' && ok || bad "json fields"
import json, sys
d = json.load(open(sys.argv[1]))
need = "tasks parallel partitions batches_per_task input codec level checksum threads budget engine strategy fsync skew bytes_in bytes_out rows records runs jobs bytes_spilled bytes_merged wall_s task_s generate_s compress_s write_s budget_wait_s peak_bytes_held peak_rss input_rss writer_rss rss_peak_reset adopted failed".split()
missing = [k for k in need if k not in d]
assert not missing, missing
assert d["failed"] == 0 and d["bytes_out"] > 0 and d["bytes_spilled"] == 0 and d["bytes_merged"] == 0, d
PY
[ "$(ls "$work/b" | wc -l)" -eq 6 ] && ok || bad "two tasks leave exactly six files: $(ls "$work/b")"

# Every input shape verifies; tagged buffers (append_tagged) decode to exactly
# the records appended one by one in the same order. (Not the same stored
# bytes: a worker compresses an lz4 block under 16 KiB from its stream state,
# whose leftovers from its earlier blocks can change a few matches.)
for inp in records unsorted tagged async; do
  expect_rc 0 "write --input $inp" -- "$mts" write --dir "$work/in-$inp" --tasks 2 --task-mib 8 --batches 2.5 \
    --input $inp --no-progress
  expect_rc 0 "verify --input $inp" -- "$mts" verify "$work/in-$inp"
done
for inp in unsorted tagged; do
  "$mts" read "$work/in-$inp" --partition 0 --end 200 --raw > "$work/in-$inp.raw" || bad "read --raw $inp"
done
[ -s "$work/in-tagged.raw" ] && cmp -s "$work/in-unsorted.raw" "$work/in-tagged.raw" && ok \
  || bad "tagged and unsorted outputs decode differently"
rm -rf "$work"/in-*

# Writer RSS within the budget plus the documented fixed overhead
# (16 MiB per process + 48 bytes per partition per task + 4 MiB per writer
# merging spilled runs). The last: tasks whose output is many times the
# budget, most of it spilled and merged (the merge once mapped its run file,
# and the page cache's large folios kept much of it resident).
for args in "--budget-mib 8" "--budget-mib 8 --batches 4.8" "--budget-mib 4 --input unsorted --partitions 10000" \
            "--budget-mib 8 --strategy baseline --batches 3" "--budget-mib 8 --codec zstd --parallel 2 --tasks 4" \
            "--budget-mib 8 --parallel 2 --tasks 4 --batches 2 --engine shared" \
            "--budget-mib 8 --input tagged --parallel 2 --tasks 4 --engine shared" \
            "--budget-mib 16 --input unsorted --task-mib 384 --parallel 2 --engine shared"; do
  "$mts" write --dir "$work/c" --tasks 2 --task-mib 48 $args --json --no-progress > "$work/rss.json" || { bad "write $args"; continue; }
  if [ -n "${MTS_SKIP_RSS_CHECK:-}" ]; then # set by CMake for sanitizer builds only
    echo "not checked: the RSS bound for '$args' ($MTS_SKIP_RSS_CHECK)"; continue
  fi
  python3 - "$work/rss.json" "$args" <<'PY' && ok || bad "RSS bound: $args"
import json, sys
d = json.load(open(sys.argv[1]))
budgets = 1 if d["engine"] == "shared" else d["parallel"]  # one budget for the process, or one per task
limit = d["budget"] * budgets + 16 * 2**20 + 48 * d["partitions"] * d["tasks"] + 4 * 2**20 * d["parallel"]
print("%-55s writer RSS %.1f MiB, limit %.1f MiB, peak held %.1f MiB" % (sys.argv[2], d["writer_rss"] / 2**20, limit / 2**20, d["peak_bytes_held"] / 2**20))
assert d["rss_peak_reset"] == 1 and d["writer_rss"] <= limit and d["peak_bytes_held"] <= d["budget"], d
PY
done

# A rerun of the same map tasks adopts the committed outputs.
expect_rc 0 "rerun keeps" -- "$mts" write --dir "$work/b" --tasks 2 --task-mib 16 --keep-existing --json --no-progress
grep -q '"adopted":2' "$work/out" && ok || bad "rerun adopted both outputs"

# Corruption: one flipped byte in the data file, a truncated index.
printf '\xff' | dd of="$work/b/shuffle_0_1_0.data" bs=1 seek=1000 conv=notrunc status=none
expect_rc 1 "inspect a flipped byte" -- "$mts" inspect "$work/b/shuffle_0_1_0.index" --summary
grep -q "MISMATCH" "$work/out" && grep -q "1 of 200 wrong" "$work/out" && ok || bad "mismatch reported"
# read: the lz4 block check finds it, the checksum file says the stored bytes
# changed (default); --verify-always finds it by the checksum file first;
# --no-verify by the block check alone.
expect_rc 1 "read a flipped byte" -- "$mts" read "$work/b" --partition 0 --end 200
grep -q "shuffle_0_1_0.data: partition 0: corrupt lz4 stream at offset 0 .*ADLER32 checksum is [0-9]*, stored [0-9]*: the stored bytes changed after they were written" "$work/err" \
  && ok || bad "read's diagnosis: $(cat "$work/err")"
expect_rc 1 "read --verify-always a flipped byte" -- "$mts" read "$work/b" --partition 0 --end 200 --verify-always
grep -q "shuffle_0_1_0.data: partition 0 at offset 0 ([0-9]* bytes): ADLER32 checksum [0-9]*, stored [0-9]*" "$work/err" \
  && ok || bad "read --verify-always: $(cat "$work/err")"
expect_rc 1 "read --no-verify a flipped byte" -- "$mts" read "$work/b" --partition 0 --end 200 --no-verify
grep -q "partition 0: corrupt lz4 stream at offset 0 (partition starts at 0): corrupt data" "$work/err" \
  && ok || bad "read --no-verify: $(cat "$work/err")"
expect_rc 1 "verify a flipped byte" -- "$mts" verify "$work/b"
grep -q "FAIL .*shuffle_0_1_0.data: partition 0 at offset 0 ([0-9]* bytes): ADLER32 checksum" "$work/out" \
  && ok || bad "verify checks the checksum file first: $(cat "$work/out")"
truncate -s 100 "$work/b/shuffle_0_0_0.index"
expect_rc 1 "inspect a truncated index" -- "$mts" inspect "$work/b/shuffle_0_0_0.data"
expect_rc 2 "inspect a foreign name" -- "$mts" inspect /etc/passwd

echo "test_cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
