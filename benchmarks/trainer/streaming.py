"""Streaming a training split larger than the data budget: member-epochs/s streamed against
in memory.

A generated 2D dataset (``--samples`` one-step pairs of ``--size`` x ``--size`` states, one
channel, written as an ``.npz`` and read as ``Problem("arrays")``), a ConvNet, batch 32,
``--seeds`` members in one block. The same spec trains twice: with a budget larger than the data
(in memory) and with ``data_memory`` a quarter of the training split (streamed: each epoch in
windows, the next read and transferred by the reader thread while the current trains). Both
blocks are compiled first, then run one epoch per chunk in turn (``--repeats`` rounds). Prints
per layout the median seconds per epoch, member-epochs/s, their ratio (target >= 0.8x), the
windows per epoch and the seconds the trainer waited for the reader.

Scaled to what a shared 2-core CPU runs in minutes (the issue's benchmark is a 4 GB file and a
1 GB budget on a GPU); what is streamed here is the host-to-device copy of each window.

With ``--file-gib``, a trial's peak host memory instead: a generated PDEBench-like HDF5 file of
that size (``tensor`` ``(trajectories, 21, 64, 64)``, float32, test and validation 2% each), its
outline made as the driver makes it (the normalisation statistics streamed from the file), then
one trial in a fresh process, as a Tune trial does it, twice (the first compiles its programs
into an empty compilation cache, the second reads them from it; ``ProblemData.load``: every split left in
the file; the training split streamed by the reader thread, validation and test read whole where
held beside the windows, else a part at a time when evaluated) training
``--seeds`` members one epoch under ``--budget``. Prints the trial's peak RSS against the target
budget + model + 0.5 GiB, and the driver's.

With ``--driver-gib``, the driver's peak host memory for files of each size: ``sweep.plan`` of
the file's spec (what ``sweep.run``'s driver does before any trial: the files' metadata, the
driver's pass over them, the kept rows, the plan) in a fresh process per file, after the file
is written (target: the same within 50 MiB whatever the file's size).

    python -m benchmarks.trainer.streaming [--samples 1024] [--size 16] [--seeds 2] [--repeats 2]
    python -m benchmarks.trainer.streaming --file-gib 1 --budget 256MiB [--hidden 4 --depth 1]
    python -m benchmarks.trainer.streaming --driver-gib 0.5 4
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks._shared.workload import model


def write_data(path: Path, samples: int, size: int) -> Path:
    """A smooth random 2D field and its shifted, damped next state, ``samples`` pairs (+ 64 to test)."""
    rng = np.random.default_rng(0)
    n = samples + 64
    x = rng.normal(size=(n, 1, size, size)).astype(np.float32)
    x = (x + np.roll(x, 1, -1) + np.roll(x, 1, -2)) / 3
    y = 0.9 * np.roll(x, 1, -1)
    np.savez(path, train_x=x[:samples], train_y=y[:samples], test_x=x[samples:], test_y=y[samples:])
    return path


GRID, STEPS = 64, 21  # the HDF5 file's states: 64 x 64, 21 per trajectory (the 2D trajectories)


def write_hdf5(path: Path, gib: float) -> int:
    """A PDEBench-like ``tensor`` file of about ``gib`` GiB (smooth random fields drifting in time),
    written a few trajectories at a time; returns its trajectories."""
    import h5py

    count = max(50, int(gib * 2**30 / (STEPS * GRID * GRID * 4)))
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        tensor = f.create_dataset("tensor", (count, STEPS, GRID, GRID), np.float32, chunks=(1, STEPS, GRID, GRID))
        for start in range(0, count, 64):
            n = min(64, count - start)
            u = rng.normal(size=(n, 1, GRID, GRID)).astype(np.float32)
            u = (u + np.roll(u, 1, -1) + np.roll(u, 1, -2)) / 3
            tensor[start : start + n] = np.concatenate([np.roll(u, t, -1) * 0.95**t for t in range(STEPS)], axis=1)
        f["x-coordinate"] = np.linspace(0, 1, GRID, dtype=np.float32)
        f["t-coordinate"] = np.linspace(0, 1, STEPS, dtype=np.float32)
    return count


def peak_rss() -> int:
    """This process's peak resident memory in bytes (Linux: ``ru_maxrss`` in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def file_spec(path: str, budget: str, hidden: int, depth: int):
    import sweep

    return sweep.SweepSpec(
        name="streaming-file",
        problem=sweep.Problem("hdf5", path=path, test_fraction=0.02, val_fraction=0.02),
        model=model(hidden, depth, boundary_mode="periodic"),
        optimizer=sweep.Optimizer("adam", learning_rate=1e-3),
        training=sweep.Training(epochs=1, batch_size=32, report_every=1, data_memory=budget),
    )


def trial(arguments: str) -> None:
    """One trial of the file problem in this process (what ``train_trial`` does): print a JSON line."""
    import jax

    import sweep
    from sweep.problems import ProblemData, Scan

    given = json.loads(arguments)
    sweep.configure(compile_cache=given["cache"])  # as a trial: every host core a JAX device, the cache
    spec = file_spec(given["path"], given["budget"], given["hidden"], given["depth"])
    start = time.perf_counter()
    data = ProblemData("hdf5", dict(spec.problem.options), scan=Scan.from_dict(given["scan"])).load()
    block, state = sweep.init_block(spec, range(given["seeds"]), data=data)
    loaded = peak_rss()
    state, _ = sweep.run_chunk(block, state, 1)
    jax.block_until_ready(state.params)
    model_bytes = sum(int(a.nbytes) for a in jax.tree_util.tree_leaves((state.params, state.opt_state)))
    stream = block.stream
    print(
        json.dumps(
            {
                "peak": peak_rss(),
                "loaded": loaded,
                "model": model_bytes,
                "seconds": time.perf_counter() - start,
                "plan": str(stream.plan) if stream else "not streamed",
                "waited": stream.waited[0] if stream else 0.0,
            }
        )
    )


def driver(path: str) -> None:
    """What ``sweep.run``'s driver reads of the file ``path`` (``sweep.plan``) in this process: print
    a JSON line with its peak RSS."""
    import sweep

    before = peak_rss()
    plan = sweep.plan(file_spec(path, "256MiB", 4, 1))
    print(json.dumps({"peak": peak_rss(), "before": before, "trials": len(plan.trials)}))


def driver_main(sizes: list[float]) -> None:
    """``--driver-gib``: the driver's peak RSS for a file of each size (module docstring)."""
    mib = 2**20
    peaks = []
    for gib in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "2D_fields.hdf5"
            count = write_hdf5(path, gib)
            out = subprocess.run(
                [sys.executable, "-m", "benchmarks.trainer.streaming", "--driver-of", str(path)],
                check=True,
                stdout=subprocess.PIPE,
                text=True,
            ).stdout
            got = json.loads(out.strip().splitlines()[-1])
            peaks.append(got["peak"])
            print(
                f"HDF5 file {path.stat().st_size / mib:.0f} MiB ({count} trajectories): driver peak RSS "
                f"{got['peak'] / mib:.0f} MiB (after imports {got['before'] / mib:.0f} MiB)"
            )
    print(f"  largest - smallest: {(max(peaks) - min(peaks)) / mib:.0f} MiB (target: within 50 MiB)")


def file_main(args) -> None:
    """``--file-gib``: a trial's and the driver's peak RSS (module docstring)."""
    from sweep.problems import outline_problem
    from sweep.spec import as_bytes

    budget = as_bytes(args.budget, "data_memory")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "2D_fields.hdf5"
        count = write_hdf5(path, args.file_gib)
        size = path.stat().st_size
        before = peak_rss()
        outline = outline_problem("hdf5", dict(file_spec(str(path), args.budget, 1, 1).problem.options), 16, 4)
        driver = peak_rss()
        assert outline.scan is not None
        given = {
            "path": str(path),
            **{k: getattr(args, k) for k in ("budget", "hidden", "depth", "seeds")},
            "scan": outline.scan.to_dict(),
            "cache": str(Path(tmp) / "compile-cache"),  # empty: the first trial compiles, the second reads it
        }
        runs = []
        for _ in range(2):
            out = subprocess.run(
                [sys.executable, "-m", "benchmarks.trainer.streaming", "--trial", json.dumps(given)],
                check=True,
                stdout=subprocess.PIPE,
                text=True,
            ).stdout
            runs.append(json.loads(out.strip().splitlines()[-1]))
    mib = 2**20
    print(
        f"HDF5 file {size / mib:.0f} MiB ({count} trajectories of {STEPS} x {GRID}x{GRID}), budget "
        f"{budget / mib:.0f} MiB, ConvNet hidden {args.hidden} depth {args.depth}, {args.seeds} members, one epoch"
    )
    for got, what in zip(runs, ("compiling its programs", "its programs in the compilation cache")):
        target = budget + got["model"] + 2**29
        print(f"  {got['plan']}; reader wait {got['waited']:.2f} s; trial {got['seconds']:.1f} s")
        print(
            f"  trial peak RSS, {what}: {got['peak'] / mib:.0f} MiB (after loading {got['loaded'] / mib:.0f} MiB) "
            f"against budget + model + 0.5 GiB = {target / mib:.0f} MiB: {got['peak'] / target:.2f}x of the target"
        )
    print(f"  driver peak RSS {driver / mib:.0f} MiB (before the outline {before / mib:.0f} MiB)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=1024)
    p.add_argument("--size", type=int, default=16)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--hidden", type=int, default=8)
    p.add_argument("--depth", type=int, default=2)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--file-gib", type=float, default=None, help="measure a trial's peak RSS on an HDF5 file")
    p.add_argument("--budget", default="256MiB", help="data_memory of --file-gib")
    p.add_argument("--driver-gib", type=float, nargs="+", default=None, help="the driver's peak RSS per file size")
    p.add_argument("--trial", default=None, help=argparse.SUPPRESS)
    p.add_argument("--driver-of", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.trial is not None:
        return trial(args.trial)
    if args.driver_of is not None:
        return driver(args.driver_of)
    if args.driver_gib is not None:
        return driver_main(args.driver_gib)
    if args.file_gib is not None:
        return file_main(args)

    import jax

    import sweep

    sweep.configure(compile_cache=None)
    with tempfile.TemporaryDirectory() as tmp:
        path = write_data(Path(tmp) / "fields.npz", args.samples, args.size)
        train_bytes = 2 * args.samples * args.size**2 * 4
        runs = {}
        for label, memory in (("in memory", 64 * train_bytes), ("streamed", train_bytes // 4)):
            spec = sweep.SweepSpec(
                name="streaming",
                problem=sweep.Problem("arrays", path=str(path), val_fraction=0),
                model=model(args.hidden, args.depth, boundary_mode="periodic"),
                optimizer=sweep.Optimizer("adam", learning_rate=1e-3),
                training=sweep.Training(epochs=10_000, batch_size=32, report_every=1, data_memory=memory),
            )
            data = sweep.load_data(spec)
            block, state = sweep.init_block(spec, range(args.seeds), data=data)
            start = time.perf_counter()
            state, _ = sweep.run_chunk(block, state, 1)  # compile, and a first epoch
            runs[label] = {"block": block, "state": state, "times": [], "first": time.perf_counter() - start}
        for _ in range(args.repeats):
            for run in runs.values():
                start = time.perf_counter()
                run["state"], _ = sweep.run_chunk(run["block"], run["state"], 1)
                jax.block_until_ready(run["state"].params)
                run["times"].append(time.perf_counter() - start)
    print(
        f"{args.samples} pairs of {args.size}x{args.size} ({train_bytes / 2**20:.1f} MiB of training pairs), "
        f"ConvNet hidden {args.hidden} depth {args.depth}, {args.seeds} members, {jax.default_backend()}"
    )
    rate = {}
    for label, run in runs.items():
        seconds = float(np.median(run["times"]))
        rate[label] = args.seeds / seconds
        stream = run["block"].stream
        how = "whole split on the device" if stream is None else f"{stream.plan}; reader wait {stream.waited[0]:.2f} s"
        print(
            f"  {label:9s}  {seconds:7.3f} s/epoch  {rate[label]:7.3f} member-epochs/s  "
            f"(first epoch with compilation {run['first']:.1f} s; {how})"
        )
    print(f"  streamed / in memory: {rate['streamed'] / rate['in memory']:.2f}x (target >= 0.8x)")


if __name__ == "__main__":
    main()
