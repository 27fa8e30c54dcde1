"""Quickstart: a hybrid seed sweep on local Ray, then query the ensemble of the best configuration.

``heat.toml`` sweeps the heat-equation ConvNet over depth (structural: separate Ray Tune trials)
and learning rate (a scalar: vmapped inside each block of seeds), 32 seeds each. This script
plans it, runs it with Ray Tune (every trial checkpoints its block; the aggregator then builds
one global ensemble per depth), prints the summary table, queries the best configuration's
ensemble and writes a figure. Every choice (the best configuration, its best members) is made on
the validation set; the test numbers are reported beside it.

    python examples/sweep_depth_lr.py --smoke   # 4 seeds, 2 epochs: under a minute
    python examples/sweep_depth_lr.py           # the full sweep (~2 min on 2 CPUs)

Then, from the shell: ``sweep show runs/heat-depth-lr``, ``sweep plot runs/heat-depth-lr``.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np

import sweep

HERE = Path(__file__).resolve().parent


def smoke_spec(spec: sweep.SweepSpec) -> sweep.SweepSpec:
    """The same sweep, tiny: 4 seeds in blocks of 4, 64 samples, 2 epochs."""
    return dataclasses.replace(
        spec,
        name=f"{spec.name}-smoke",
        seeds=4,
        seeds_per_trial=4,
        problem=spec.problem.replace(num_samples=64),
        training=spec.training.replace(epochs=2, batch_size=16, report_every=1),
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="4 seeds, 2 epochs, tiny data")
    parser.add_argument("--spec", type=Path, default=HERE / "heat.toml", help="sweep specification (TOML)")
    parser.add_argument("--storage", default="runs", help="where sweeps are stored (path or s3://...)")
    parser.add_argument("--address", default=None, help="Ray cluster to join ('auto', 'ray://host:10001')")
    parser.add_argument("--out", type=Path, default=None, help="figure (PNG); default <sweep dir>/sweep.png")
    args = parser.parse_args(argv)
    if args.out is not None and args.out.suffix not in (".png", ".pdf", ".svg"):  # refused before training
        parser.error(f"--out: got {str(args.out)!r}; give a file name ending in .png, .pdf or .svg")

    spec = sweep.SweepSpec.from_toml(args.spec)
    if args.smoke:
        spec = smoke_spec(spec)
    print(sweep.plan(spec), end="\n\n")

    sweep_dir = sweep.run(spec, storage=args.storage, options=sweep.RunOptions(address=args.address))
    print(f"\nsweep directory: {sweep_dir}")

    ens = sweep.load(sweep_dir)
    # Every choice below is made on the validation set; the test numbers are reported beside it.
    summary = ens.summary()  # val_loss, one row per (depth, learning rate), best mean first
    print(f"\n{len(ens)} members; final validation loss over seeds per configuration, best mean first")
    print("(95% bootstrap interval of the mean; the test loss beside it is reported, not used to choose):")
    print(f"{'depth':>5} {'lr':>8} {'seeds':>5} {'val mean':>10} {'95% interval':>21} {'std':>10} {'test mean':>10}")
    for r in summary.to_pylist():
        print(
            f"{r['depth']:>5} {r['learning_rate']:>8.0e} {r['n']:>5} {r['mean']:>10.3e} "
            f"{r['mean_ci_low']:>10.3e}..{r['mean_ci_high']:<9.3e} {r['std']:>10.3e} {r['test_loss_mean']:>10.3e}"
        )

    # The best configuration (lowest mean validation loss over its seeds) and its 8 best members.
    best = ens.best_configuration()
    top = ens.where(**best).best(min(8, len(spec.seed_list)))  # ranked by validation loss
    data = sweep.load_data(top.spec)  # the test data of that config's spec
    mean, std = (np.asarray(a) for a in top.mean_std(data.test_x))
    mse = float(np.mean((mean - data.test_y) ** 2))
    name = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in best.items())
    print(f"\nbest configuration (on validation): {name}; ensemble of its {top.table.num_rows} best members:")
    print(
        f"  test MSE of the ensemble mean {mse:.4g} (reported, not used to choose), mean predictive std "
        f"{float(std.mean()):.3g}"
    )
    seed = top.table.column("seed")[0].as_py()
    member = top.member(seed=seed)  # a plain eqx.Module for one sample
    print(
        f"  its best member (seed {seed}) maps one sample {data.test_x[0].shape} -> {np.shape(member(data.test_x[0]))}"
    )

    depths = sorted(set(ens.table.column("depth").to_pylist())) if "depth" in ens.columns else []
    if len(depths) >= 2:  # is the shallow net better than the deep one over seeds, at the chosen learning rate?
        lr = best["learning_rate"]  # fixed on both sides: compare() refuses to pool over a free grid column
        c = ens.compare({"depth": depths[0], "learning_rate": lr}, {"depth": depths[-1], "learning_rate": lr})
        print(
            f"  P(depth {depths[0]} beats depth {depths[-1]} at lr={lr:g}) = {c.probability:.2f} "
            f"(95% interval {c.ci_low:.2f}..{c.ci_high:.2f}, {c.n_a} vs {c.n_b} seeds);"
        )
        print(
            f"  mean val loss difference {c.difference:.3g} (95% interval {c.difference_ci_low:.3g}.."
            f"{c.difference_ci_high:.3g})"
        )

    out = args.out or Path(sweep_dir) / "sweep.png"
    sweep.plot(ens, out=out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
