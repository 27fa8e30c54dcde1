"""The largest block of seeds that fits in 2D at APEBench's resolution on this machine's CPU.

APEBench's docs say that in 2D and 3D ``num_seeds`` "likely has to be set to 1". Here a block's
members train one after another on each CPU device (the ``"map"`` layout), so a member adds only
its training state (parameters and Adam's moments, in and out of the compiled call) and the step's
temporaries are paid once per device. This compiles (does not run) the training program of
``apebench:<scenario>_2d`` at its defaults (160 x 160, APEBench's trajectory counts) with
APEBench's default network (``Conv;34;10;relu``: ConvNet, 34 channels, depth 10) and batch 20 for
blocks of 2 and ``--members`` members on one device (a block of one is compiled differently), reads XLA's memory analysis, and prints the
bytes per member, the fixed bytes per device and the largest block that fits in
``--headroom`` of the host's memory with one JAX device per core (as ``sweep.configure()`` sets up)::

    python -m benchmarks.trainer.largest_block_2d
    python -m benchmarks.trainer.largest_block_2d --scenario phy_burgers --points 96

The GPU kit's check 7 (``benchmarks/gpu/check_block2d.py``) measures the same on a GPU, in the
accelerator layout (``"vmap"``: every member at once) against the device's memory.
"""

from __future__ import annotations

import argparse
import os
import time

GIB = 2**30


def apebench_2d_spec(scenario: str = "phy_adv", points: int | None = None, hidden: int = 34, depth: int = 10):
    """``apebench:<scenario>_2d`` (at ``points`` per axis, default APEBench's) with a ConvNet of
    ``hidden`` channels and ``depth`` (APEBench's ``Conv;34;10;relu`` by default), batch 20."""
    import sweep

    problem = {"name": f"apebench:{scenario}_2d"} | ({"num_points": points} if points else {})
    return sweep.SweepSpec.from_dict(
        {
            "name": "largest-block-2d",
            "seeds": 1,
            "problem": problem,
            "model": {"name": "ConvNet", "hidden_channels": hidden, "depth": depth, "boundary_mode": "periodic"},
            "optimizer": {"name": "adam", "learning_rate": 1e-3},
            "training": {"epochs": 1, "batch_size": 20},
        }
    )


def block_bytes(spec, data, small: int, large: int, layout: str, say=print) -> tuple[float, float]:
    """``(per member, fixed)``: device bytes of one chunk call of a block on one device, from XLA's
    memory analysis of blocks of ``small`` and ``large`` members compiled (not run) in ``layout``;
    ``say`` gets a line per block."""
    from sweep.training import compiled_bytes

    sizes = {}
    for members in (small, large):
        start = time.perf_counter()
        sizes[members] = compiled_bytes(spec, data, (), members, layout=layout)
        say(
            f"block of {members:>4} on one device: {sizes[members] / GIB:7.3f} GiB "
            f"(compiled in {time.perf_counter() - start:.0f} s)"
        )
    per_member = (sizes[large] - sizes[small]) / (large - small)
    return per_member, sizes[small] - small * per_member


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="phy_adv")
    parser.add_argument("--points", type=int, default=None, help="grid points per axis (default: APEBench's, 160)")
    parser.add_argument("--members", type=int, default=64, help="the larger block compiled")
    parser.add_argument("--headroom", type=float, default=0.8, help="share of the host memory a block may use")
    args = parser.parse_args(argv)

    import jax

    import sweep
    from sweep.training import data_shapes, state_bytes

    sweep.configure()
    spec = apebench_2d_spec(args.scenario, args.points)
    start = time.perf_counter()
    data = sweep.load_data(spec)
    print(
        f"{spec.problem.name}: train x {data.train.x.shape} ({data.train.x.nbytes / GIB:.2f} GiB), "
        f"generated in {time.perf_counter() - start:.1f} s",
        flush=True,
    )
    per_member, fixed = block_bytes(spec, data, 2, args.members, "map", lambda line: print(line, flush=True))
    state = state_bytes(spec, data_shapes(data))
    host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    devices = len(jax.devices("cpu"))
    largest = int((args.headroom * host - devices * fixed) // per_member)
    print(
        f"per member {per_member / 2**20:.2f} MiB (its training state: {state / 2**20:.2f} MiB); "
        f"fixed {fixed / GIB:.3f} GiB per device (the data and one member's step)"
    )
    print(
        f"host memory {host / GIB:.1f} GiB, {devices} CPU devices: the largest block in "
        f"{args.headroom:.0%} of it holds {largest} members"
    )


if __name__ == "__main__":
    main()
