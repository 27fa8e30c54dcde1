"""Check 6: a training split twice a quarter-GPU trial's data budget, streamed by four ``gpu: 0.25``
trials at once on the one GPU, through real Ray Tune (``sweep.run``).

The budget is what a ``gpu: 0.25`` trial gets by default: a quarter (``DEFAULT_SHARE``) of what
its JAX may allocate (``XLA_PYTHON_CLIENT_MEM_FRACTION`` = 0.95 x 0.25 of the device), given as
``Training(data_memory=...)`` so that the driver's plan and the trials agree (``--budget`` sets
another). The data: a generated PDEBench-like HDF5 file of 2D trajectories
(``benchmarks.trainer.streaming.write_hdf5``: 21 states of 64 x 64, validation and test 2% each)
whose pairs, what the trials' programs read, are twice the budget. The trials read the file
themselves; the driver reads its metadata and statistics only.

Checked (``ok`` is all three; the check exits 1 when one fails): the plan says the problem
streams (``sweep.plan``'s data line) and every trial reported ``reader_wait_s``, which only a
streamed trial reports (``streamed``); the four trials ran at once, the last to start starting
before the first finished (``concurrent``); each trial's peak device memory stayed within its
share of the device (``within_share``; ``null`` on CPU, where JAX keeps no statistics).

``--plan``: the plan and its windows only, no training and no Ray (what a CPU machine checks of
the full sizes: ``--plan --total-gib 139`` plans the H200's sizes without writing the file).

    python -m benchmarks.gpu.check_streaming --out FILE [--dry] [--plan] [--budget 2GiB] [--total-gib N]
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

from benchmarks.gpu import _kit, _tune
from benchmarks.trainer.streaming import GRID, STEPS, write_hdf5

PAIRS_BYTES = (STEPS - 1) * 2 * GRID * GRID * 4  # the one-step pairs of one trajectory (float32, one channel)
FULL = {"trials": 4, "gpu": 0.25, "seeds_per_trial": 2, "epochs": 1, "hidden": 8, "depth": 2, "batch_size": 32}
DRY = {**FULL, "hidden": 4, "depth": 1, "budget": 25 * PAIRS_BYTES}  # 50 trajectories: 31 MiB of pairs


def quarter_budget(total_bytes: int, gpu: float) -> int:
    """The default data budget of a ``gpu`` trial on a device of ``total_bytes``."""
    from sweep.training._budget import DEFAULT_SHARE
    from sweep.tune._env import MEM_FRACTION_HEADROOM

    return int(DEFAULT_SHARE * MEM_FRACTION_HEADROOM * gpu * total_bytes)


def streamed_spec(path: str, budget: int, sizes: dict):
    """Four trials of ``seeds_per_trial`` members of a ConvNet on the file, one epoch."""
    import sweep
    from benchmarks._shared.workload import model

    return sweep.SweepSpec(
        name="check-streaming",
        problem=sweep.Problem("hdf5", path=path, test_fraction=0.02, val_fraction=0.02),
        model=model(sizes["hidden"], sizes["depth"], boundary_mode="periodic"),
        optimizer=sweep.Optimizer("adam", learning_rate=1e-3),
        training=sweep.Training(
            epochs=sizes["epochs"], batch_size=sizes["batch_size"], report_every=1, data_memory=budget
        ),
        seeds=sizes["trials"] * sizes["seeds_per_trial"],
        seeds_per_trial=sizes["seeds_per_trial"],
        resources={"cpu": 1, "gpu": sizes["gpu"]},
    )


def data_line(spec) -> str | None:
    """What ``sweep.plan`` says of the problem's data: the line ``data of ...``, or ``None`` (it fits)."""
    import sweep

    return next((line for line in str(sweep.plan(spec)).splitlines() if line.startswith("data of ")), None)


def verdict(run: dict, line: str | None, gpu_total: int | None) -> dict:
    """The three checks on ``run`` (:func:`benchmarks.gpu._tune.run_sweep`'s numbers)."""
    trials = run["trials"]
    peaks = [t["peak_over_share"] for t in trials]
    out = {
        "streamed": line is not None
        and "streamed:" in line
        and bool(trials)
        and all(t["reader_wait_s"] is not None for t in trials),
        "concurrent": bool(run["concurrent"]) and len(trials) == run["planned_trials"],
        "within_share": all(p <= 1 for p in peaks) if gpu_total and all(p is not None for p in peaks) else None,
        "completed": run["all_completed"],
    }
    out["ok"] = all(v is not False for v in out.values())
    return out


def extra_options(parser) -> None:
    parser.add_argument("--plan", action="store_true", help="the plan and its windows only: no training, no Ray")
    parser.add_argument("--budget", default=None, help="data_memory (bytes or '2GiB'); default: a quarter-GPU trial's")
    parser.add_argument("--total-gib", type=float, default=None, help="the device's memory (default: nvidia-smi's)")


def main() -> None:
    args = _kit.options(__doc__.splitlines()[0], extra_options)
    sizes = DRY if args.dry else FULL
    res = _kit.Result(args.out, check="streaming", sizes=sizes)

    def body() -> None:
        from sweep.spec import as_bytes

        total = int(args.total_gib * 2**30) if args.total_gib else _tune.gpu_total_bytes()
        budget = as_bytes(args.budget, "data_memory") if args.budget else sizes.get("budget")
        if budget is None:
            if total is None:
                raise SystemExit("check streaming: no nvidia-smi to size the budget; give --budget or --total-gib")
            budget = quarter_budget(total, sizes["gpu"])
        trajectories = max(50, math.ceil(2 * budget / PAIRS_BYTES))  # pairs of train, val and test: twice the budget
        res["device_total_bytes"], res["budget_bytes"] = total, budget
        res["trajectories"], res["pairs_bytes"] = trajectories, trajectories * PAIRS_BYTES
        with tempfile.TemporaryDirectory(prefix="kit-streaming-") as tmp:
            path = Path(tmp) / "2D_fields.hdf5"
            if args.plan:  # an HDF5 file of the same shapes, written sparse: the plan reads its outline only
                res["plan_only"] = True
                path = write_outline(path, trajectories)
            else:
                trajectories = write_hdf5(path, (trajectories + 0.5) * STEPS * GRID * GRID * 4 / 2**30)
            res["file_bytes"] = path.stat().st_size
            if not args.plan:
                res["ray_resources"] = _tune.start_ray(args.dry)
            _kit.setup_jax()
            spec = streamed_spec(str(path), budget, sizes)
            res["plan_line"] = line = data_line(spec)
            print(f"check streaming: {line}", flush=True)
            if args.plan:
                res["verdict"] = {"streamed": line is not None and "streamed:" in line}
                if not res.data["verdict"]["streamed"]:
                    raise SystemExit("check streaming: the plan does not stream the file")
                return
            run = _tune.run_sweep(spec, total if not args.dry else None)
            res["run"] = run
            res["verdict"] = found = verdict(run, line, total if not args.dry else None)
            print(
                f"check streaming: {len(run['trials'])} trials x gpu {sizes['gpu']:g}, sweep.run {run['run_s']:.1f} s, "
                f"reader waits {[t['reader_wait_s'] for t in run['trials']]}, peaks over share "
                f"{[t['peak_over_share'] for t in run['trials']]}: {found}",
                flush=True,
            )
            if not found["ok"]:
                raise SystemExit(f"check streaming: failed: {found}")

    _kit.report(res, body)


def write_outline(path: Path, trajectories: int) -> Path:
    """An HDF5 file of ``trajectories`` like :func:`write_hdf5`'s, only its first trajectories
    written (the rest unallocated: zeros, no disk), for a plan of the full sizes."""
    import h5py
    import numpy as np

    with h5py.File(path, "w") as f:
        tensor = f.create_dataset(
            "tensor", (trajectories, STEPS, GRID, GRID), np.float32, chunks=(1, STEPS, GRID, GRID)
        )
        tensor[:1] = np.random.default_rng(0).normal(size=(1, STEPS, GRID, GRID)).astype(np.float32)
        f["x-coordinate"] = np.linspace(0, 1, GRID, dtype=np.float32)
        f["t-coordinate"] = np.linspace(0, 1, STEPS, dtype=np.float32)
    return path


if __name__ == "__main__":
    main()
