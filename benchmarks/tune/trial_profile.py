"""Where a tiny trial's time goes: CPU seconds per process kind, and py-spy stacks.

Runs the sweep of :mod:`trial_overhead` (``--trials`` tiny trials, 1 CPU each, a local Ray of
2 CPUs) as a fresh child process and samples ``/proc`` every 0.2 s for every process of its tree
(the driver, Ray's daemons, each trial worker), then prints CPU seconds per kind of process, per
trial, next to the wall time. With ``--py-spy`` the child runs under
``py-spy record --subprocesses --format raw`` and the stacks are summarised per kind of process:
where the driver and the workers spend their samples (self time, and time inside chosen frames
such as imports, JAX compilation, checkpoint writing).

    python -m benchmarks.tune.trial_profile --trials 16
    python -m benchmarks.tune.trial_profile --trials 16 --py-spy /tmp/trials.raw [--idle]
    python -m benchmarks.tune.trial_profile --summarise /tmp/trials.raw      # summarise a recording again
    python -m benchmarks.tune.trial_profile --trials 16 --tune-option reuse_actors=false
    python -m benchmarks.tune.trial_profile --replay 5      # a trial worker's steps in fresh processes, timed

``--replay`` runs :mod:`_trial_replay` (what a trial's fresh Ray worker does: import ray, Tune and
seed-sweep, set the trial's JAX environment, ``init_block``, then per report ``run_chunk`` and
``save_block``) in fresh processes with a trial's environment (1 host device, single-threaded
Eigen) and prints the median seconds of each step: the part of a trial's cost that a reused,
warm worker would not pay again.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._shared.machine import HZ, TreeSampler
from benchmarks._shared.ray_local import add_tune_option, tune_options
from benchmarks._shared.repo import ROOT, module_command
from benchmarks._shared.workload import TINY_TRIAL, add_options
from benchmarks.tune.trial_overhead import CHILD, TRIAL_ENV, make_spec, timeline

DAEMONS = {  # command-line pattern -> kind of Ray process (first match wins; workers are the rest of "ray::")
    "ray::DashboardAgent": "ray dashboard agent",
    "dashboard/agent.py": "ray dashboard agent",
    "ray::RuntimeEnvAgent": "ray runtime-env agent",
    "runtime_env/agent/main.py": "ray runtime-env agent",
    "dashboard/dashboard.py": "ray dashboard",
    "log_monitor.py": "ray log monitor",
    "autoscaler/_private/monitor.py": "ray autoscaler monitor",
    "gcs_server": "ray gcs_server",
    "raylet/raylet": "ray raylet",
}
# frames whose inclusive time is reported (substring of a py-spy frame "function (file:line)")
MARKERS = {
    "import (any module)": "_find_and_load (<frozen importlib._bootstrap>",
    "import sweep": "<module> (sweep/__init__.py",
    "import jax": "<module> (jax/__init__.py",
    "import ray.tune": "<module> (ray/tune/__init__.py",
    "JAX compile (jit lowering + XLA)": "_cached_compilation",
    "JAX persistent cache read": "get_executable_and_time",
    "sweep init_block": "init_block (",
    "sweep run_chunk": "run_chunk (",
    "sweep save_block": "save_block (",
    "tune.report (incl. checkpoint persist)": "report (ray/tune/",
    "checkpoint persist (copy_files)": "persist_current_checkpoint",
    "ray.get": "get (ray/_private/worker.py",
    "Tune experiment state save": "save_to_dir (ray/tune/execution/experiment_state.py",
    "Tune controller step": "step (ray/tune/execution/tune_controller.py",
    "Tune loggers (json/csv/tbx)": "log_trial_result (ray/tune/logger/",
    "aggregate": "aggregate (",
}


def kind(pid: int, cmdline: str, driver: int) -> str:
    if pid == driver:
        return "driver (sweep.run)"
    for pattern, name in DAEMONS.items():
        if pattern in cmdline:
            return name
    if "default_worker.py" in cmdline or cmdline.startswith("ray::"):
        return "ray worker (trials)"
    if cmdline.startswith("py-spy"):
        return "py-spy"
    return "other"


def _records(text: str):
    """``((root pid, sampled pid), sampled process's command line, frames, count)`` of py-spy's raw output. With
    ``--subprocesses`` a record starts with the chain of processes from the root to the sampled
    one, each as a ``process PID:"command line"`` frame (a command line may span lines)."""
    for record in re.split(r"\n(?=process \d+:)", text.strip()):
        stack, _, count = record.replace("\n", " ").rpartition(" ")
        if not count.isdigit():
            continue
        chain = list(re.finditer(r'(?:^|;)process (\d+):"', stack))
        if not chain:
            continue
        end = stack.find('";', chain[-1].end())
        cmd, frames = (stack[chain[-1].end() :], "") if end < 0 else (stack[chain[-1].end() : end], stack[end + 2 :])
        pids = (int(chain[0].group(1)), int(chain[-1].group(1)))
        yield pids, cmd, [f for f in frames.split(";") if f and not f.startswith("thread ")], int(count)


def summarise_pyspy(path: str) -> list[str]:
    """Samples per kind of process; per kind, the MARKERS' inclusive share and the top self-time frames."""
    per_kind: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    markers: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    totals: collections.Counter = collections.Counter()
    for (root, pid), cmd, frames, n in _records(Path(path).read_text(errors="replace")):
        k = kind(pid, cmd, driver=root)
        totals[k] += n
        if frames:
            per_kind[k][frames[-1]] += n
        for name, needle in MARKERS.items():
            if any(needle in f for f in frames):
                markers[k][name] += n
    lines = []
    for k, total in totals.most_common():
        lines.append(f"{k}: {total} samples")
        for name, n in sorted(markers[k].items(), key=lambda x: -x[1]):
            lines.append(f"    inside {name:<40} {n:>7} ({100 * n / total:5.1f}%)")
        for frame, n in per_kind[k].most_common(8):
            lines.append(f"    self  {frame[:100]:<100} {n:>7} ({100 * n / total:5.1f}%)")
    return lines


def replay(args) -> None:
    spec = make_spec(args, 1)
    runs = []
    for _ in range(args.replay):
        start = time.perf_counter()
        out = subprocess.run(
            module_command("benchmarks.tune._trial_replay", json.dumps(spec)),
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={**os.environ, **TRIAL_ENV},
            check=False,
        )
        wall = time.perf_counter() - start
        if out.returncode:
            sys.exit(f"replay failed:\n{out.stderr[-3000:]}")
        steps = json.loads(out.stdout.strip().splitlines()[-1])
        steps["interpreter start and exit"] = wall - steps["total in process"]
        steps["whole process"] = wall
        runs.append(steps)
    print(
        f"a trial's worker steps replayed in {args.replay} fresh processes (1 seed, {args.epochs} epochs, report every "
        f"{args.report_every}; trial environment {TRIAL_ENV}); median seconds:"
    )
    for name in runs[0]:
        values = [r[name] for r in runs]
        print(f"  {name:<68} {statistics.median(values):7.3f}  (min {min(values):.3f}, max {max(values):.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--py-spy", default=None, metavar="RAW", help="record py-spy raw stacks of the whole tree here")
    parser.add_argument("--idle", action="store_true", help="py-spy: include idle (waiting) samples")
    parser.add_argument("--rate", type=int, default=50, help="py-spy samples per second")
    parser.add_argument("--summarise", default=None, metavar="RAW", help="only summarise a py-spy raw file")
    add_tune_option(parser)
    parser.add_argument(
        "--replay", type=int, default=0, metavar="N", help="replay a trial's steps in N fresh processes"
    )
    add_options(parser, epochs=4, report_every=2)
    parser.set_defaults(**TINY_TRIAL)
    args = parser.parse_args()
    if args.summarise:
        print("\n".join(summarise_pyspy(args.summarise)))
        return
    if args.replay:
        return replay(args)
    options = tune_options(args)
    spec = make_spec(args, args.trials)
    storage = tempfile.mkdtemp(prefix="sweep-profile-")
    events = str(Path(storage) / "events.json")
    cmd = [sys.executable, "-c", CHILD, "sweep", json.dumps(spec), storage, json.dumps(options), events]
    if args.py_spy:
        cmd = [
            "py-spy",
            "record",
            "--subprocesses",
            "--format",
            "raw",
            "--rate",
            str(args.rate),
            "--nonblocking",
            "-o",
            args.py_spy,
            *(["--idle"] if args.idle else []),
            "--",
            *cmd,
        ]
    start = time.time()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = TreeSampler(proc.pid)
    sampler.start()
    _, err = proc.communicate()
    wall = time.time() - start
    sampler.stop()
    if proc.returncode:
        sys.exit(f"sweep failed:\n{err[-4000:]}")
    driver = proc.pid
    if args.py_spy:  # the driver is py-spy's child
        driver = next((p for p, (_, _, c) in sampler.seen.items() if c.startswith(sys.executable + " -c")), proc.pid)
    cpu = collections.Counter()
    workers = set()
    for pid, (first, last, cmdline) in sampler.seen.items():
        k = kind(pid, cmdline, driver)
        cpu[k] += (last - first) / HZ
        if k == "ray worker (trials)":
            workers.add(pid)
    n = args.trials
    print(
        f"trial_profile: {n} trials, tune options {options or 'none'}; whole process {wall:.1f} s "
        f"({wall / n:.2f} s per trial); {len(workers)} Ray worker processes seen"
    )
    print(f"CPU seconds by process kind (2 cores x {wall:.1f} s = {2 * wall:.0f} CPU-s available):")
    for k, s in cpu.most_common():
        print(f"  {k:<28} {s:7.1f} CPU-s  {s / n:6.2f} per trial")
    print(f"  {'total':<28} {sum(cpu.values()):7.1f} CPU-s  {sum(cpu.values()) / n:6.2f} per trial")
    for line in timeline(json.loads(Path(events).read_text())):
        print(line)
    shutil.rmtree(storage, ignore_errors=True)
    if args.py_spy:
        print(f"py-spy ({'with' if args.idle else 'without'} idle samples, {args.rate} Hz) -> {args.py_spy}")
        print("\n".join(summarise_pyspy(args.py_spy)))


if __name__ == "__main__":
    main()
