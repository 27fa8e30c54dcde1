"""What the validation evaluation costs per report: a chunk with and without it, side by side.

Workload of ``vs_reference.py`` (heat1d 48 points, ConvNet hidden 16 depth 6, adam 3e-4,
batch 32, 10 seeds in one block), the data saved once as ``.npz`` so that both sides train on
the very same 800 samples and test on the same 200:

- ``before``: no validation set (``val_fraction=0``), loss only: each report evaluates the test
  loss, as the trainer did before validation existed;
- ``after``: a validation split of 100 more samples and three metrics (``mse``, ``mae``,
  ``nrmse``): each report evaluates the loss and the metrics on validation and test.

The two blocks run their chunks alternately (``--repeats`` pairs after a compiling chunk each);
the extra cost per report is the median of the paired differences (after - before, measured
back to back, so that a shared machine's slow drifts cancel), with their interquartile range,
and as a fraction of the median chunk without it, at each ``--report-every``; in wall-clock
seconds and in CPU seconds of this process (all its threads: the work done, which other
processes on a shared machine disturb far less than the wall clock).

    python -m benchmarks.trainer.evaluation_cost [--report-every 1 10] [--repeats 21] [--quick]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks._shared.workload import BATCH, DEPTH, HIDDEN, LEARNING_RATE, POINTS, model


def _data(path: Path, points: int, train: int, val: int, test: int) -> None:
    from sweep.problems import heat1d

    d = heat1d(
        num_points=points, num_samples=train + val + test, test_fraction=test / (train + val + test), val_fraction=0
    )
    x, y = d.train  # the first train + val samples; the test samples are the last ones, as in heat1d
    np.savez(
        path, train_x=x[:train], train_y=y[:train], val_x=x[train:], val_y=y[train:], test_x=d.test.x, test_y=d.test.y
    )
    np.savez(path.with_name("no_val.npz"), train_x=x[:train], train_y=y[:train], test_x=d.test.x, test_y=d.test.y)


def _spec(path: Path, args, report_every: int, metrics: tuple[str, ...], val: bool):
    import sweep

    options = {"path": str(path)} if val else {"path": str(path.with_name("no_val.npz")), "val_fraction": 0}
    return sweep.SweepSpec(
        name="eval-cost",
        problem=sweep.Problem("arrays", **options),
        model=model(args.hidden, args.depth),
        optimizer=sweep.Optimizer("adam", learning_rate=LEARNING_RATE),
        training=sweep.Training(epochs=10_000, batch_size=BATCH, report_every=report_every, metrics=metrics),
    )


def measure(args, report_every: int, path: Path) -> dict:
    import sweep

    sides = {
        "before": _spec(path, args, report_every, (), val=False),
        "after": _spec(path, args, report_every, ("mse", "mae", "nrmse"), val=True),
    }
    blocks = {}
    for name, spec in sides.items():
        data = sweep.load_data(spec)
        block, state = sweep.init_block(spec, range(args.seeds), data=data)
        state, _ = sweep.run_chunk(block, state, report_every)  # compile
        blocks[name] = [block, state, {"wall": [], "cpu": []}, data]
    for _ in range(args.repeats):  # alternate, so that both sides see the same machine
        for entry in blocks.values():
            block, state, times, _ = entry
            wall, cpu = time.perf_counter(), time.process_time()
            entry[1], _ = sweep.run_chunk(block, state, report_every)
            times["wall"].append(time.perf_counter() - wall)
            times["cpu"].append(time.process_time() - cpu)
    out = {}
    for clock in ("wall", "cpu"):
        before, after = blocks["before"][2][clock], blocks["after"][2][clock]
        out[clock] = (
            float(np.median(before)),
            float(np.median(after)),
            np.percentile(np.subtract(after, before), [25, 50, 75]),
        )
    out["sizes"] = {name: [s.size for s in entry[3].splits] for name, entry in blocks.items()}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--report-every", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--points", type=int, default=POINTS)
    parser.add_argument("--hidden", type=int, default=HIDDEN)
    parser.add_argument("--depth", type=int, default=DEPTH)
    parser.add_argument("--quick", action="store_true", help="tiny workload: checks the script runs")
    args = parser.parse_args()
    sizes = (800, 100, 200)
    if args.quick:
        args.repeats, args.seeds, args.points, args.hidden, args.depth = 2, 2, 16, 4, 2
        sizes = (64, 8, 16)

    import jax

    import sweep

    sweep.configure(compile_cache=None)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "data.npz"
        _data(path, args.points, *sizes)
        print(
            f"{args.seeds} seeds, ConvNet hidden {args.hidden} depth {args.depth}, {args.points} points; "
            f"{len(jax.devices())} host devices; {args.repeats} back-to-back pairs of chunks"
        )
        print(
            "before: no validation set, test loss per report; after: a validation set, loss + mse, mae, nrmse "
            "on validation and test per report"
        )
        print(
            f"{'report_every':>12} {'clock':>5} {'before s/chunk':>15} {'after s/chunk':>14} {'extra ms/report':>16} "
            f"{'(IQR of pairs)':>16} {'extra':>7}"
        )
        for every in args.report_every:
            r = measure(args, every, path)
            for clock in ("wall", "cpu"):
                before, after, diff = r[clock]
                low, mid, high = 1e3 * diff
                print(
                    f"{every:>12} {clock:>5} {before:>15.4f} {after:>14.4f} {mid:>16.1f} "
                    f"{f'{low:.1f}..{high:.1f}':>16} {100 * mid / 1e3 / before:>6.1f}%"
                )
        print(f"train / val / test samples: {r['sizes']}")


if __name__ == "__main__":
    main()
