"""The heat ConvNet workload shared by the Ray benchmarks: command-line options and spec."""

from __future__ import annotations

import argparse


def add_options(parser: argparse.ArgumentParser, *, epochs: int, report_every: int) -> None:
    parser.add_argument("--epochs", type=int, default=epochs)
    parser.add_argument("--report-every", type=int, default=report_every)
    parser.add_argument("--points", type=int, default=48)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--quick", action="store_true", help="tiny workload: checks the script runs")


def make_quick(args: argparse.Namespace, epochs: int) -> None:
    """Shrink the workload to seconds (``--quick``)."""
    args.epochs, args.report_every = epochs, 2
    args.points, args.samples, args.hidden, args.depth = 16, 60, 4, 2


def heat_spec(
    args: argparse.Namespace, *, name: str, seeds: int, seeds_per_trial: int | str, cpus: float, gpus: float = 0
):
    import sweep

    return sweep.SweepSpec(
        name=name,
        problem=sweep.Problem("heat1d", num_points=args.points, num_samples=args.samples, data_seed=0),
        model=sweep.Model(
            "ConvNet", hidden_channels=args.hidden, depth=args.depth, activation="relu", boundary_mode="dirichlet"
        ),
        optimizer=sweep.Optimizer("adam", learning_rate=3e-4),
        training=sweep.Training(epochs=args.epochs, batch_size=32, report_every=args.report_every),
        seeds=seeds,
        seeds_per_trial=seeds_per_trial,
        resources={"cpu": cpus, "gpu": gpus},
    )


def tune_configs(options: dict, callbacks: list) -> dict:
    """``--tune-option`` values as ``sweep.run``'s ``tune_config`` / ``run_config`` (each field goes
    to the Tune config that has it), with ``callbacks`` in the run config."""
    import dataclasses

    from ray import tune

    tune_fields = {f.name for f in dataclasses.fields(tune.TuneConfig)}
    tune_kw = {k: v for k, v in options.items() if k in tune_fields}
    run_kw = {k: v for k, v in options.items() if k not in tune_fields}
    return {
        "tune_config": tune.TuneConfig(**{"reuse_actors": True, **tune_kw}) if tune_kw else None,
        "run_config": tune.RunConfig(callbacks=callbacks, **run_kw),
    }
