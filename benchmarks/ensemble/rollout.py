"""Benchmark: ``Ensemble.rollout`` of 256 members against a jitted per-member rollout loop.

The store and model of ``predict.py`` (ConvNet hidden 16, depth 6 on 48 points,
randomly initialised members); 16 initial states rolled out 100 steps. The baseline is what a
user would write: per member one jitted ``lax.scan`` over the steps of ``jax.vmap(member)``
(compiled once, reused for every member). Prints seconds (best of ``--repeats``, the two taking
turns), the speed-up, the seconds of the first call at another number of steps (no new program:
the trip count is an input), and the host memory of ``rollout`` against ``rollout_mean_std``
(tracemalloc peaks).

    python -m benchmarks.ensemble.rollout [--members 256] [--steps 100] [--repeats 3]
"""

from __future__ import annotations

import argparse
import tempfile

import equinox as eqx
import jax
import numpy as np

import sweep
from benchmarks._shared.machine import OtherLoad
from benchmarks._shared.members import member_list, random_store
from benchmarks._shared.timing import best_of, host_peak, seconds
from benchmarks._shared.workload import POINTS
from sweep.ensemble import load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=256)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sweep.configure()  # one JAX CPU device per core, as the CLI and every trial
    with tempfile.TemporaryDirectory() as tmp, OtherLoad() as load_meanwhile:
        ens = load(random_store(tmp, args.members))
        x0 = np.asarray(jax.random.uniform(jax.random.key(1), (args.batch, 1, POINTS)), np.float32)
        members = member_list(ens)

        @eqx.filter_jit
        def alone(m, x0):
            def step(x, _):
                y = jax.vmap(m)(x)
                return y, y

            return jax.lax.scan(step, x0, None, length=args.steps)[1]

        y = ens.rollout(x0, args.steps)
        for i in (0, len(ens) - 1):
            np.testing.assert_allclose(y[i, 1:], alone(members[i], x0), rtol=1e-4, atol=1e-5)
        times = best_of(
            {
                "ensemble rollout": lambda: ens.rollout(x0, args.steps),
                "jitted loop": lambda: [alone(m, x0) for m in members],
            },
            args.repeats,
        )
        other = seconds(lambda: ens.rollout(x0, args.steps + 7))
        host_rollout, _ = host_peak(lambda: ens.rollout(x0, args.steps))
        host_stats, _ = host_peak(lambda: ens.rollout_mean_std(x0, args.steps))

    print(
        f"rollout benchmark: {len(ens)} members x {args.batch} initial states x {args.steps} steps, ConvNet hidden "
        f"16 depth 6 on 48 points, {len(jax.devices('cpu'))} host devices, backend {jax.default_backend()}"
    )
    print(f"{'method':<20}{'seconds':>10}{'speed-up':>10}{'member-steps/s':>16}")
    for name, t in times.items():
        print(f"{name:<20}{t:>10.3f}{t / times['ensemble rollout']:>9.2f}x{len(ens) * args.steps / t:>16.0f}")
    print(
        f"first call at {args.steps + 7} steps: {other:.3f} s (steady {times['ensemble rollout']:.3f} s at "
        f"{args.steps}: no compilation)"
    )
    print(
        f"host allocations peak: rollout {host_rollout / 2**20:.1f} MiB (output {y.nbytes / 2**20:.1f} MiB), "
        f"rollout_mean_std {host_stats / 2**20:.1f} MiB"
    )
    print(f"while it ran, {load_meanwhile}")


if __name__ == "__main__":
    main()
