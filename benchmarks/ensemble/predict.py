"""Benchmark: ``Ensemble.predict`` of 512 members against a jitted per-member loop and naive vmap.

ConvNet(hidden 16, depth 6, relu, dirichlet) on 48 points, 200 test inputs; members are randomly
initialised (no training) and aggregated into a temporary store. Prints one table: seconds (best
of ``--repeats``; predict and the loop take turns, so both see the same machine load), speed-up
of predict over each baseline, achieved GFLOP/s (XLA's count for one member times the number of
members), the share of the matmul peak (a 2048x2048 float32 matmul measured in the same run),
and peak memory. Target: predict >= 2x the jitted loop and >= 30% of the matmul peak.

    python benchmarks/ensemble_predict.py [--members 512] [--chunk-size 64] [--repeats 5]
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
import tracemalloc
from types import SimpleNamespace

import equinox as eqx
import jax
import numpy as np

import sweep
from sweep.ensemble import DEFAULT_CHUNK, load
from sweep.models import build_model
from sweep.store import aggregate_blocks
from sweep.training import History


def bench_block(members: int, trajectory_steps: int = 0) -> SimpleNamespace:
    """A block of ``members`` randomly initialised reference ConvNets (16 channels, depth 6) on
    heat1d with 48 points, as the aggregator takes blocks (with ``trajectory_steps``, its problem
    makes test trajectories of that many steps)."""
    steps = {"trajectory_steps": trajectory_steps} if trajectory_steps else {}
    spec = sweep.SweepSpec(
        name="bench",
        problem=sweep.Problem("heat1d", num_points=48, num_samples=250, **steps),
        model=sweep.Model("ConvNet", hidden_channels=16, depth=6, activation="relu", boundary_mode="dirichlet"),
        optimizer=sweep.Optimizer("adam", learning_rate=3e-4),
        seeds=members,
    )
    keys = jax.random.split(jax.random.key(0), members)
    model = eqx.filter_vmap(lambda k: build_model("ConvNet", dict(spec.model.options), (1, 48), 1, key=k))(keys)
    seeds = tuple(range(members))
    zeros = np.zeros((members, 1), np.float32)
    history = History(
        seeds, ({},), np.array([1], np.int32), zeros, {"loss": zeros}, {"loss": zeros}, np.zeros(members, bool)
    )
    return SimpleNamespace(
        spec=spec,
        seeds=seeds,
        hparams=({},),
        shapes=((1, 48), 1, 200),
        history=history,
        state=SimpleNamespace(params=eqx.filter(model, eqx.is_array)),
        trial_id="bench",
    )


def _store(directory: str, members: int) -> str:
    return aggregate_blocks(f"{directory}/ensembles", [bench_block(members)])


def _best(fns: dict, repeats: int) -> dict[str, float]:
    """Best time of each function; the functions take turns so that they see the same machine load."""
    for fn in fns.values():
        jax.block_until_ready(fn())  # compile / warm up
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            jax.block_until_ready(fn())
            times[name].append(time.perf_counter() - start)
    return {name: min(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=512)
    parser.add_argument("--chunk-size", type=int, default=DEFAULT_CHUNK)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    sweep.configure()  # one JAX CPU device per core: predict splits members over them
    with tempfile.TemporaryDirectory() as tmp:
        ens = load(_store(tmp, args.members))
        x = np.asarray(jax.random.normal(jax.random.key(1), (200, 1, 48)), np.float32)
        stacked = ens.stacked()
        members = [
            jax.tree_util.tree_map(lambda a, i=i: a[i] if eqx.is_array(a) else a, stacked) for i in range(len(ens))
        ]
        one = eqx.filter_jit(lambda m, x: jax.vmap(m)(x))
        naive = eqx.filter_jit(eqx.filter_vmap(lambda m, x: jax.vmap(m)(x), in_axes=(eqx.if_array(0), None)))

        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        tracemalloc.start()
        y = ens.predict(x, chunk_size=args.chunk_size)
        host_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        np.testing.assert_allclose(y[:8], np.stack([one(m, x) for m in members[:8]]), rtol=1e-4, atol=1e-5)

        times = _best(
            {
                "predict": lambda: ens.predict(x, chunk_size=args.chunk_size),
                "jitted loop": lambda: [one(m, x) for m in members],
            },
            args.repeats,
        )
        times |= _best({"naive filter_vmap": lambda: naive(stacked, x)}, 1)
        a = jax.random.normal(jax.random.key(2), (2048, 2048))
        matmul = jax.jit(lambda a: a @ a)
        peak = 2 * 2048**3 / _best({"matmul": lambda: matmul(a)}, args.repeats)["matmul"]
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
        f"{host_peak / 2**20:.1f} MiB; process peak RSS {rss_before / 2**10:.0f} -> {rss_after / 2**10:.0f} MiB"
    )


if __name__ == "__main__":
    main()
