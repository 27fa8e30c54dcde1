"""2D emulators on XLA:CPU: the block trainer's two member layouts, per architecture and size.

``"map"`` (the CPU default): members split over the host devices with ``shard_map``, one after
another on each (``lax.map``), every convolution a per-member ``vmap`` of ``lax.conv`` over the
minibatch. ``"vmap"``: members vectorised, so every convolution becomes a grouped ``lax.conv``
over members. The workload: ``apebench:phy_adv_diff_2d`` at ``N x N`` points (20 training
trajectories of 10 steps: 200 pairs), batch 20, 4 members, one chunk of ``--epochs`` epochs
after a warm-up chunk (compile), fastest of ``--repeats``; seed-epochs/s and the ratio.

    python -m benchmarks.trainer.layouts_2d [--sizes 32 64] [--epochs 2] [--repeats 2]

Not measured here: an im2col/matmul form of 2D convolutions (the 1D trainer's fast path,
``sweep/models/_fast.py``, is 1D only).
"""

from __future__ import annotations

import argparse
import time

ARCHITECTURES = {
    "ConvNet": {"hidden_channels": 16, "depth": 4},
    "ClassicResNet": {"hidden_channels": 16, "num_blocks": 2},
    "ClassicUNet": {"hidden_channels": 8, "num_levels": 2},
    "ClassicFNO": {"hidden_channels": 16, "num_modes": 8, "num_blocks": 2},
}
MEMBERS = 4


def _spec(arch: str, size: int):
    import sweep

    return sweep.SweepSpec(
        name="layouts-2d",
        problem=sweep.Problem(
            "apebench:phy_adv_diff_2d", num_points=size, num_train=20, train_steps=10, num_test=2, test_steps=2
        ),
        model=sweep.Model(arch, **ARCHITECTURES[arch]),
        optimizer=sweep.Optimizer("adam", learning_rate=1e-3),
        training=sweep.Training(epochs=100, batch_size=20, report_every=1),
        seeds=MEMBERS,
    )


def _chunk_seconds(spec, data, layout: str, epochs: int, repeats: int) -> float:
    import jax

    import sweep

    block, state = sweep.init_block(spec, list(range(MEMBERS)), data=data, layout=layout)
    jax.block_until_ready(sweep.run_chunk(block, state, epochs))  # compile
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(sweep.run_chunk(block, state, epochs))
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[32, 64])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--arch", nargs="+", default=list(ARCHITECTURES))
    args = parser.parse_args(argv)

    import sweep

    sweep.configure()
    print(f"{'architecture':<14} {'grid':>7} {'map s':>8} {'vmap s':>8} {'map/vmap':>9}  seed-epochs/s (map, vmap)")
    for size in args.sizes:
        data = None
        for arch in args.arch:
            spec = _spec(arch, size)
            data = data if data is not None else sweep.load_data(spec)
            t_map = _chunk_seconds(spec, data, "map", args.epochs, args.repeats)
            t_vmap = _chunk_seconds(spec, data, "vmap", args.epochs, args.repeats)
            rate = MEMBERS * args.epochs
            print(
                f"{arch:<14} {f'{size}x{size}':>7} {t_map:8.3f} {t_vmap:8.3f} {t_map / t_vmap:9.2f}  "
                f"{rate / t_map:.2f}, {rate / t_vmap:.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
