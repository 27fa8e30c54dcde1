"""Benchmark: the ensemble scores of 512 members against the inference they need.

A store of ``--members`` randomly initialised members of the ConvNet of ``predict.py``
(hidden 16, depth 6, 48 points; ``_shared/members.py``) with heat1d's stored test data: 16 samples and 4 trajectories
of ``--steps`` steps. ``Ensemble.scores("test")`` (one-step scores, ensemble-size curve, scores at
every rollout step) runs beside what the same inference costs with no score (``mean_std`` on the
samples plus ``rollout_mean_std`` on the trajectories' first states), the two taking turns; then
the compiled score program alone on every member's rollout, and the aggregation with and
without the scores. Prints seconds (best of ``--repeats``), ratios, and host memory peaks.

    python -m benchmarks.ensemble.scores [--members 512] [--steps 100] [--repeats 3]
"""

from __future__ import annotations

import argparse
import tempfile

import jax
import numpy as np

import sweep
from benchmarks._shared.machine import OtherLoad
from benchmarks._shared.members import random_block
from benchmarks._shared.timing import best_of, host_peak, seconds
from sweep.ensemble._scores import block_sums
from sweep.ensemble._stored_scores import store_scores
from sweep.store import aggregate_blocks


def _block(members: int, steps: int):
    block = random_block(members, steps)
    return block, {block.spec.problem_id: sweep.load_data(block.spec)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=512)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sweep.configure()  # one JAX CPU device per core, as the CLI and every trial
    block, datasets = _block(args.members, args.steps)
    with tempfile.TemporaryDirectory() as tmp, OtherLoad() as load_meanwhile:
        plain = f"{tmp}/plain/ensembles"
        scored = f"{tmp}/scored/ensembles"
        aggregate_blocks(plain, [block], datasets=datasets)
        ens = sweep.load(plain)
        x, _ = ens.samples()
        traj = ens.trajectories()

        def inference():
            ens.mean_std(x)
            ens.rollout_mean_std(traj[:, 0], traj.shape[1] - 1)

        times = best_of({"scores": lambda: ens.scores("test"), "inference alone": inference}, args.repeats)
        rolled = ens.rollout(traj[:, 0], traj.shape[1] - 1)[:, 1:]  # [M, T, B, 1, 48]
        values = rolled.reshape(len(ens), args.steps, -1)
        truth = np.swapaxes(traj[:, 1:], 0, 1).reshape(args.steps, -1)
        weights = np.ones(truth.shape[1], np.float32)
        block_sums(values, truth, weights)  # compile
        program = min(seconds(lambda: block_sums(values, truth, weights)) for _ in range(args.repeats))
        del rolled
        aggregate = {
            "with scores": min(
                seconds(lambda: aggregate_blocks(scored, [block], datasets=datasets, scores=store_scores))
                for _ in range(args.repeats)
            ),
            "without": min(seconds(lambda: aggregate_blocks(plain, [block], datasets=datasets)) for _ in range(2)),
        }
        peaks = {"scores": host_peak(lambda: ens.scores("test"))[0], "inference alone": host_peak(inference)[0]}
        one = sweep.load(scored).stored_scores("test").to_pylist()

    print(
        f"ensemble scores: {args.members} members, 16 test samples + 4 trajectories x {args.steps} steps of 48 "
        f"points, ConvNet hidden 16 depth 6, {len(jax.devices('cpu'))} host devices, backend {jax.default_backend()}"
    )
    print(
        f"  Ensemble.scores('test')          {times['scores']:7.2f} s   inference alone (mean_std + "
        f"rollout_mean_std) {times['inference alone']:6.2f} s   ratio {times['scores'] / times['inference alone']:.2f}x"
    )
    print(
        f"  score program on every step      {program:7.3f} s   ({args.members} members x {args.steps} steps x "
        f"{truth.shape[1]} points sorted per point, float64)"
    )
    print(
        f"  aggregation with scores          {aggregate['with scores']:7.2f} s   without {aggregate['without']:6.2f} s"
        f"   ratio {aggregate['with scores'] / aggregate['without']:.1f}x"
    )
    print(
        f"  host memory peak (tracemalloc)   scores {peaks['scores'] / 2**20:6.1f} MiB   inference alone "
        f"{peaks['inference alone'] / 2**20:6.1f} MiB"
    )
    first = next(r for r in one if r["kind"] == "one_step")
    print(
        f"  (random members: one-step CRPS {first['crps']:.4g}, spread-skill {first['spread_skill']:.3g}, "
        f"coverage 90% {first['coverage_90']:.3g}, {len(one)} stored rows)"
    )
    print(f"  while it ran, {load_meanwhile}")


if __name__ == "__main__":
    main()
