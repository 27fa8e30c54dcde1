"""Benchmark: ``Ensemble.predict`` of 512 members against a jitted per-member loop and naive vmap.

ConvNet(hidden 16, depth 6, relu, dirichlet) on 48 points, 200 test inputs; members are randomly
initialised (no training) and aggregated into a temporary store (``_shared/members.py``). Prints
one table: seconds (best of ``--repeats``; predict and the loop take turns, so both see the same
machine load), speed-up of predict over each baseline, achieved GFLOP/s (XLA's count for one
member times the number of members), the share of the matmul peak (a 2048x2048 float32 matmul
measured in the same run), and peak memory. Target: predict >= 2x the jitted loop and >= 30% of
the matmul peak.

    python -m benchmarks.ensemble.predict [--members 512] [--chunk-size 64] [--repeats 5]
"""

from __future__ import annotations

import argparse
import tempfile

import equinox as eqx
import jax
import numpy as np

import sweep
from benchmarks._shared.flops import matmul_peak
from benchmarks._shared.machine import OtherLoad, peak_rss_mib
from benchmarks._shared.members import member_list, random_store
from benchmarks._shared.timing import best_of, host_peak
from benchmarks._shared.workload import POINTS
from sweep.ensemble import DEFAULT_CHUNK, load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=512)
    parser.add_argument("--chunk-size", type=int, default=DEFAULT_CHUNK)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    sweep.configure()  # one JAX CPU device per core: predict splits members over them
    with tempfile.TemporaryDirectory() as tmp, OtherLoad() as load_meanwhile:
        ens = load(random_store(tmp, args.members))
        x = np.asarray(jax.random.normal(jax.random.key(1), (200, 1, POINTS)), np.float32)
        stacked = ens.stacked()
        members = member_list(ens)
        one = eqx.filter_jit(lambda m, x: jax.vmap(m)(x))
        naive = eqx.filter_jit(eqx.filter_vmap(lambda m, x: jax.vmap(m)(x), in_axes=(eqx.if_array(0), None)))

        rss_before = peak_rss_mib()
        predict_peak, y = host_peak(lambda: ens.predict(x, chunk_size=args.chunk_size))
        rss_after = peak_rss_mib()
        np.testing.assert_allclose(y[:8], np.stack([one(m, x) for m in members[:8]]), rtol=1e-4, atol=1e-5)

        times = best_of(
            {
                "predict": lambda: ens.predict(x, chunk_size=args.chunk_size),
                "jitted loop": lambda: [one(m, x) for m in members],
            },
            args.repeats,
        )
        times |= best_of({"naive filter_vmap": lambda: naive(stacked, x)}, 1)
        peak = matmul_peak(repeats=args.repeats)
        params, static = eqx.partition(members[0], eqx.is_array)
        cost = jax.jit(lambda p: jax.vmap(eqx.combine(p, static))(x)).lower(params).compile().cost_analysis()
        total = (cost[0] if isinstance(cost, list) else cost)["flops"] * len(ens)

    print(
        f"predict benchmark: {len(ens)} members x {x.shape[0]} inputs, ConvNet hidden 16 depth 6 on 48 points, "
        f"chunk_size {args.chunk_size}, {len(jax.devices('cpu'))} host devices, backend {jax.default_backend()}"
    )
    print(f"{'method':<20}{'seconds':>10}{'predict speed-up':>18}{'GFLOP/s':>10}{'of peak':>9}")
    for name, t in times.items():
        print(f"{name:<20}{t:>10.3f}{t / times['predict']:>17.2f}x{total / t / 1e9:>10.1f}{total / t / peak:>9.0%}")
    print(f"matmul peak (2048x2048 float32, all cores): {peak / 1e9:.1f} GFLOP/s")
    print(
        f"predict output {y.nbytes / 2**20:.1f} MiB; host allocations peak during predict (tracemalloc) "
        f"{predict_peak / 2**20:.1f} MiB; process peak RSS {rss_before:.0f} -> {rss_after:.0f} MiB"
    )
    print(f"while it ran, {load_meanwhile}")


if __name__ == "__main__":
    main()
