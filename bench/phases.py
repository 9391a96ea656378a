#!/usr/bin/env python3
"""Where a writer's wall time goes: idle CPU by phase of each map task.

Runs one `mtshuffle bench` command under `perf record -a` with user probes on
the library (writer create, commit and its return, and every compression
job's start and end) and the scheduler's context switches, then splits each
task's wall time into phases and sums, per phase, the time the machine's
CPUs ran nothing (the idle task):

    head     create -> a worker starts the first job (only the producer runs)
    intake   -> commit is called (the producer feeds, workers compress)
    commit   -> commit returns (the last jobs, the ordered writer, the files)
    between  -> the next task's create (the bench itself)

Tasks must run one after another (the bench's default `--parallel 1`): the
phases are told apart by the order of one producer's calls. Prints medians
over the tasks (the first --skip of them left out: the first repetitions'
cold start) and, if asked, writes every task's figures as JSON.
Needs root and perf (Debian: linux-perf); the probes are removed afterwards.

    bench/phases.py --lib build/libmtshuffle.so.0.1.0 -- \\
        build/mtshuffle bench --tasks 16 --task-mib 32 --input tagged \\
        --contenders streaming --reps 6 --dir /dev/shm/mtsphases
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

PROBES = ["mts_writer_create", "mts_writer_commit", "mts_writer_commit%return", "job_run", "job_run%return"]
GROUP = "mtsphases"


def perf(*args, check=True):
    return subprocess.run(["perf", *args], check=check, capture_output=True, text=True)


def add_probes(lib):
    for p in PROBES:
        name = p.split("%")[0]  # perf names a return probe NAME__return itself
        r = perf("probe", "-q", "-x", lib, "-a", f"{GROUP}:{name}={p}", check=False)
        if r.returncode != 0:
            raise SystemExit(f"perf probe {p} in {lib} failed: {r.stderr.strip()}")


def del_probes():
    perf("probe", "-q", "-d", f"{GROUP}:*", check=False)


LINE = re.compile(r"\s*\S+\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s*(.*)")


def parse(text):
    """Probe events (time, name, tid) and each CPU's idle intervals."""
    marks, idle, since = [], [], {}
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        tid, cpu, t, event, rest = int(m[1]), int(m[2]), float(m[3]), m[4], m[5]
        if event == "sched:sched_switch":
            nxt = re.search(r"next_pid=(\d+)", rest)
            prv = re.search(r"prev_pid=(\d+)", rest)
            if nxt and nxt[1] == "0":
                since[cpu] = t
            elif prv and prv[1] == "0" and cpu in since:
                idle.append((since.pop(cpu), t))
        elif event.startswith(GROUP + ":"):
            marks.append((t, event.split(":", 1)[1], tid))
    marks.sort()
    return marks, idle


def tasks_of(marks):
    """Per task: create, the first job a worker starts (the producer runs
    some itself: a stage's, its last), commit, commit return."""
    tasks, cur = [], None
    for t, name, tid in marks:
        if name == "mts_writer_create":
            cur = {"create": t, "first_job": None, "producer": tid}
        elif cur is None:
            continue
        elif name == "job_run" and cur["first_job"] is None and tid != cur["producer"]:
            cur["first_job"] = t
        elif name == "mts_writer_commit":
            cur["commit"] = t
        elif name == "mts_writer_commit__return" and "commit" in cur:
            cur["done"] = t
            tasks.append(cur)
            cur = None
    return tasks


def idle_between(idle, a, b):
    return sum(max(0.0, min(b, y) - max(a, x)) for x, y in idle)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, help="the libmtshuffle the command loads")
    ap.add_argument("--skip", type=float, default=0.25, help="fraction of the first tasks left out")
    ap.add_argument("--json", help="write every task's phases here")
    ap.add_argument("cmd", nargs=argparse.REMAINDER, help="-- then the mtshuffle bench command")
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        ap.error("no command given")
    parallel = [x.split("=", 1)[1] for x in cmd if x.startswith("--parallel=")]
    parallel += [cmd[i + 1] if i + 1 < len(cmd) else "" for i, x in enumerate(cmd) if x == "--parallel"]
    if any(v != "1" for v in parallel):
        ap.error("tasks must run one after another (--parallel 1)")
    if not shutil.which("perf"):
        raise SystemExit("perf is not installed (Debian: apt-get install linux-perf)")
    if os.geteuid() != 0:
        raise SystemExit("user probes and system-wide recording need root")
    if not os.path.isfile(a.lib):
        raise SystemExit(f"no library at {a.lib}")
    del_probes()
    add_probes(os.path.abspath(a.lib))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            data = os.path.join(tmp, "perf.data")
            r = subprocess.run(["perf", "record", "-q", "-a", "-o", data, "-e", f"{GROUP}:*",
                                "-e", "sched:sched_switch", "--", *cmd], stdout=subprocess.DEVNULL)
            if r.returncode != 0:
                raise SystemExit(f"the command under perf record failed (exit {r.returncode})")
            text = perf("script", "-i", data, "-F", "comm,tid,cpu,time,event,trace").stdout
    finally:
        del_probes()
    marks, idle = parse(text)
    tasks = tasks_of(marks)
    if not tasks:
        raise SystemExit("no complete task was traced (did the command use this library?)")
    tasks = tasks[int(len(tasks) * a.skip):]
    rows = []
    for i, k in enumerate(tasks):
        first = k["first_job"] if k["first_job"] is not None and k["first_job"] < k["commit"] else k["commit"]
        nxt = tasks[i + 1]["create"] if i + 1 < len(tasks) else None
        rows.append({
            "wall_ms": (k["done"] - k["create"]) * 1e3,
            "head_ms": (first - k["create"]) * 1e3,
            "commit_ms": (k["done"] - k["commit"]) * 1e3,
            "idle_head_ms": idle_between(idle, k["create"], first) * 1e3,
            "idle_intake_ms": idle_between(idle, first, k["commit"]) * 1e3,
            "idle_commit_ms": idle_between(idle, k["commit"], k["done"]) * 1e3,
            "idle_between_ms": idle_between(idle, k["done"], nxt) * 1e3 if nxt else None,
        })
    ncpu = os.cpu_count()
    print(f"{len(rows)} tasks (medians, ms; idle = CPU-ms with nothing to run, {ncpu} CPUs)")
    for key in rows[0]:
        vals = [r[key] for r in rows if r[key] is not None]
        print(f"  {key:<18} {statistics.median(vals):8.2f}  (mean {statistics.mean(vals):.2f})")
    idle_total = statistics.mean(r["idle_head_ms"] + r["idle_intake_ms"] + r["idle_commit_ms"] for r in rows)
    wall = statistics.mean(r["wall_ms"] for r in rows)
    print(f"  idle within a task: {idle_total:.2f} CPU-ms of {wall * ncpu:.2f} ({100 * idle_total / (wall * ncpu):.1f}%)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"command": cmd, "tasks": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
