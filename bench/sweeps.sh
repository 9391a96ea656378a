#!/usr/bin/env bash
# Every interleaved sweep behind issue 10's targets, on tmpfs and on a disk file system, with one
# build: the input shapes, multi-batch (add_batch and add_batch_async), an 8 MiB budget, 10,000
# partitions, the thread counts, and the single batch beside compress-only, write-only, read and
# decode-only. Each sweep writes its JSON; the printed reports go to stdout (tee them), followed
# by the ratios the sweeps do not print (bench/sweeps_report.py, from the same JSON).
#
#   bench/sweeps.sh [--mtshuffle build/mtshuffle] [--reps 7] [--label HEAD] \
#       [--tmpfs /dev/shm] [--disk /var/tmp] [--out bench/results-engine] \
#       [--only tmpfs|disk] [--quick]
#
# --quick: small tasks (2 x 8 MiB, and 1 x 32 MiB where the sweep takes 4 x 128 MiB) and 1
# repetition unless --reps says otherwise: a smoke test that every sweep runs, not a measurement.
# --tmpfs and --disk name where each run makes (and removes) its own scratch directory.
# JSON: OUT/{shapes,batches-async,spill,partitions,threads,limit-read}-{tmpfs,disk}-LABEL.json.
# About 13 minutes on a 2-CPU machine at 7 repetitions. Nothing else should run meanwhile.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
mts=build/mtshuffle
reps=7
label=$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo local)
tmpfs_dir=/dev/shm
disk_dir=/var/tmp
out=bench/results-engine
only=
quick=0
reps_given=0

while [ $# -gt 0 ]; do
    case "$1" in
        --mtshuffle) mts=$2; shift 2 ;;
        --reps) reps=$2; reps_given=1; shift 2 ;;
        --label) label=$2; shift 2 ;;
        --tmpfs) tmpfs_dir=$2; shift 2 ;;
        --disk) disk_dir=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        --quick) quick=1; shift ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "sweeps.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done

[ -x "$mts" ] || { echo "sweeps.sh: '$mts' is not an executable mtshuffle (build first, or --mtshuffle)" >&2; exit 2; }
case "$only" in ''|tmpfs|disk) ;; *) echo "sweeps.sh: --only takes tmpfs or disk, not '$only'" >&2; exit 2 ;; esac
mkdir -p "$out"
base="--tasks 16 --task-mib 32"
big="--tasks 4 --task-mib 128"
if [ "$quick" = 1 ]; then
    base="--tasks 2 --task-mib 8"
    big="--tasks 1 --task-mib 32"
    [ "$reps_given" = 1 ] || reps=1
fi

scratch=
trap '[ -z "$scratch" ] || rm -rf "$scratch"' EXIT

# The mounted file system's type (stat -f names ext4 by its magic, "ext2/ext3").
fs_type() { { findmnt -n -o FSTYPE -T "$1" 2>/dev/null || stat -f -c %T "$1"; } | tail -n 1; }

run_fs() {
    local name=$1 parent=$2
    [ -d "$parent" ] || { echo "sweeps.sh: no directory '$parent'" >&2; exit 2; }
    local t; t=$(fs_type "$parent")
    if [ "$name" = tmpfs ] && [ "$t" != tmpfs ]; then
        echo "sweeps.sh: $parent is on $t, not tmpfs" >&2; exit 2
    fi
    if [ "$name" = disk ] && [ "$t" = tmpfs ]; then
        echo "sweeps.sh: $parent is on tmpfs; --disk needs a disk file system" >&2; exit 2
    fi
    scratch=$(mktemp -d "$parent/mtssweeps.XXXXXX")
    local j="$out/%s-$name-$label.json"
    local common=(--mtshuffle "$mts" --reps "$reps" --dir "$scratch")

    echo "=== $name ($t, $scratch) shapes $(date +%T)"
    python3 "$here/shapes.py" "${common[@]}" --args "$base" --inputs batch,records,unsorted,tagged \
        --contenders streaming,baseline --json "$(printf "$j" shapes)"
    echo "=== $name batches $(date +%T)"
    python3 "$here/sweep.py" "${common[@]}" --args "$base" --contenders streaming,baseline \
        --variant "--batches 1 --input batch" --variant "--batches 1 --input async" \
        --variant "--batches 4.8 --input batch" --variant "--batches 4.8 --input async" \
        --variant "--batches 10 --input batch" --variant "--batches 10 --input async" \
        --json "$(printf "$j" batches-async)"
    echo "=== $name spill $(date +%T)"
    python3 "$here/sweep.py" "${common[@]}" --args "$base" --contenders streaming \
        --variant "--input batch" --variant "--input unsorted --budget-mib 8" \
        --variant "--input tagged --budget-mib 8" --variant "--input batch --budget-mib 8" \
        --json "$(printf "$j" spill)"
    echo "=== $name partitions $(date +%T)"
    python3 "$here/sweep.py" "${common[@]}" --args "$big" --contenders streaming \
        --variant "--input unsorted --partitions 200" --variant "--input unsorted --partitions 10000" \
        --variant "--input tagged --partitions 200" --variant "--input tagged --partitions 10000" \
        --json "$(printf "$j" partitions)"
    echo "=== $name threads $(date +%T)"
    python3 "$here/sweep.py" "${common[@]}" --args "$base" --contenders streaming \
        --variant "--threads 2" --variant "--threads 1" --variant "--threads 4" --variant "--threads 8" \
        --json "$(printf "$j" threads)"
    echo "=== $name limit and read $(date +%T)"
    python3 "$here/sweep.py" "${common[@]}" --args "$base" \
        --contenders streaming,baseline,compress,write,read,decode --variant "--input batch" \
        --json "$(printf "$j" limit-read)"
    rm -rf "$scratch"
    scratch=
}

[ "$only" = disk ] || run_fs tmpfs "$tmpfs_dir"
[ "$only" = tmpfs ] || run_fs disk "$disk_dir"
echo "=== done $(date +%T)"
python3 "$here/sweeps_report.py" --dir "$out" --label "$label" ${only:+--only "$only"}
