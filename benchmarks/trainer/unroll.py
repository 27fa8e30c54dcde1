"""What an unrolled training step costs: seed-steps/s of ``Training(unroll=K)`` for K = 1, 2, 4, 8.

One problem for every K: ``exponax:Burgers`` at APEBench's scenario size (160 points, 50 training
trajectories of 50 steps; 2 test trajectories, no validation, so that the evaluation at the end
of a chunk stays small), a ConvNet, Adam, batch 20, ``--seeds`` members in one block. ``unroll=K``
trains on the ``50 * (51 - K)`` windows of K + 1 states (``unroll=1``: the 2500 one-step pairs).

The blocks of every K are built and compiled first, then run ``--epochs`` epochs per chunk in
turn (``--repeats`` rounds, so that a shared machine's slow drifts reach every K alike). Per K:
the median seconds per update step of the block, seed-steps/s (members x update steps / s), and
the ratio of an unrolled step to K one-step steps (``time(K) / (K * time(1))``; 1.0 is exactly
K one-step forward/backward passes).

    python -m benchmarks.trainer.unroll [--unrolls 1 2 4 8] [--repeats 5] [--quick]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks._shared.workload import DEPTH, HIDDEN, model


def spec_for(args, unroll: int):
    import sweep

    return sweep.SweepSpec(
        name="unroll-cost",
        problem=sweep.Problem(
            "exponax:Burgers", num_train=50, train_steps=50, num_test=2, test_steps=8, val_fraction=0
        ),
        model=model(args.hidden, args.depth, boundary_mode="periodic"),
        optimizer=sweep.Optimizer("adam", learning_rate=1e-3),
        training=sweep.Training(epochs=10_000, batch_size=20, report_every=args.epochs, unroll=unroll),
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--unrolls", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--seeds", type=int, default=8)
    p.add_argument("--hidden", type=int, default=HIDDEN)
    p.add_argument("--depth", type=int, default=DEPTH)
    p.add_argument("--epochs", type=int, default=1, help="epochs per timed chunk")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="a tiny network, 2 repeats (a smoke test)")
    args = p.parse_args()
    if args.quick:
        args.hidden, args.depth, args.repeats, args.seeds = 4, 2, 2, 2

    import jax

    import sweep

    sweep.configure(compile_cache=None)
    data = sweep.load_data(spec_for(args, 1))  # the same data for every K
    blocks = {}
    for k in args.unrolls:
        spec = spec_for(args, k)
        block, state = sweep.init_block(spec, range(args.seeds), data=data)
        compile_start = time.perf_counter()
        state, _ = sweep.run_chunk(block, state, args.epochs)  # compile, and a first chunk
        windows = data.train_traj.shape[0] * (data.train_traj.shape[1] - k)
        blocks[k] = {
            "block": block,
            "state": state,
            "times": [],
            "compile": time.perf_counter() - compile_start,
            "steps": args.epochs * (windows // spec.training.batch_size),
        }
    for _ in range(args.repeats):
        for entry in blocks.values():
            start = time.perf_counter()
            entry["state"], _ = sweep.run_chunk(entry["block"], entry["state"], args.epochs)
            jax.block_until_ready(entry["state"].params)
            entry["times"].append(time.perf_counter() - start)

    print(
        f"exponax:Burgers 160 points, 50 trajectories x 50 steps; ConvNet hidden {args.hidden} depth {args.depth}; "
        f"{args.seeds} seeds in one block, batch 20, {args.epochs} epoch(s) per chunk, median of {args.repeats} rounds"
    )
    print(
        f"{'unroll':>6} {'steps/chunk':>11} {'first chunk s':>13} {'chunk s':>8} {'ms/step':>8} {'seed-steps/s':>13} "
        f"{'vs K one-step':>13}"
    )
    one = None
    for k, entry in blocks.items():
        per_step = float(np.median(entry["times"])) / entry["steps"]
        one = per_step if k == 1 else one
        ratio = f"{per_step / (k * one):13.2f}" if one else f"{'-':>13}"
        print(
            f"{k:6d} {entry['steps']:11d} {entry['compile']:13.2f} {np.median(entry['times']):8.3f} "
            f"{per_step * 1e3:8.2f} {args.seeds / per_step:13.1f} {ratio}"
        )


if __name__ == "__main__":
    main()
