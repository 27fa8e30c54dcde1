"""The workload every benchmark measures, in one place: the reference ConvNet on heat1d.

The reference is the pdequinox seed-parallel example: heat1d with 48 points and 1000 samples
(with ``val_fraction=0``: its 800 training and 200 test samples), ConvNet(hidden 16, depth 6,
relu, dirichlet), adam 3e-4, batch 32. Benchmarks shrink it with options (``--hidden``,
``--depth``, ...; ``--quick`` for a run of seconds); the Ray benchmarks' tiny trials are
:data:`TINY_TRIAL`.

```python
spec = heat_spec(name="bench", epochs=10, seeds=10, val_fraction=0)   # the reference workload
spec = heat_spec(name="tiny", epochs=1, seeds=100, seeds_per_trial=1, **TINY_TRIAL)
```
"""

from __future__ import annotations

import argparse
from typing import Any

POINTS, SAMPLES, HIDDEN, DEPTH = 48, 1000, 16, 6  # the reference workload
BATCH, LEARNING_RATE = 32, 3e-4
TRAIN = 800  # its training samples with val_fraction=0 (the last 200 are the test set)
TINY_TRIAL = {"points": 48, "samples": 250, "hidden": 8, "depth": 2}  # a trial of milliseconds of work


def model(hidden: int = HIDDEN, depth: int = DEPTH, boundary_mode: str | None = "dirichlet"):
    """The reference ConvNet (relu), at another width or depth or boundary mode (``None``: the
    model's default)."""
    import sweep

    boundary = {"boundary_mode": boundary_mode} if boundary_mode else {}
    return sweep.Model("ConvNet", hidden_channels=hidden, depth=depth, activation="relu", **boundary)


def heat_spec(
    *,
    name: str = "bench",
    epochs: int = 1,
    report_every: int | None = None,
    points: int = POINTS,
    samples: int = SAMPLES,
    hidden: int = HIDDEN,
    depth: int = DEPTH,
    boundary_mode: str = "dirichlet",
    learning_rate: float = LEARNING_RATE,
    batch_size: int = BATCH,
    seeds: int = 1,
    seeds_per_trial: int | str | None = None,
    resources: dict[str, float] | None = None,
    **problem_options: Any,
):
    """A ``SweepSpec`` of the reference workload; ``problem_options`` go to ``Problem("heat1d")``
    (``val_fraction=0`` for the reference's 800 training samples, ``trajectory_steps``)."""
    import sweep

    extra: dict[str, Any] = {}
    if seeds_per_trial is not None:
        extra["seeds_per_trial"] = seeds_per_trial
    if resources is not None:
        extra["resources"] = resources
    return sweep.SweepSpec(
        name=name,
        problem=sweep.Problem("heat1d", num_points=points, num_samples=samples, **problem_options),
        model=model(hidden, depth, boundary_mode),
        optimizer=sweep.Optimizer("adam", learning_rate=learning_rate),
        training=sweep.Training(epochs=epochs, batch_size=batch_size, report_every=report_every or epochs),
        seeds=seeds,
        **extra,
    )


def add_options(parser: argparse.ArgumentParser, *, epochs: int, report_every: int) -> None:
    """The workload's size as command-line options (``--epochs``, ``--points``, ..., ``--quick``)."""
    parser.add_argument("--epochs", type=int, default=epochs)
    parser.add_argument("--report-every", type=int, default=report_every)
    parser.add_argument("--points", type=int, default=POINTS)
    parser.add_argument("--samples", type=int, default=SAMPLES)
    parser.add_argument("--hidden", type=int, default=HIDDEN)
    parser.add_argument("--depth", type=int, default=DEPTH)
    parser.add_argument("--quick", action="store_true", help="tiny workload: checks the script runs")


def make_quick(args: argparse.Namespace, epochs: int) -> None:
    """Shrink the workload to seconds (``--quick``)."""
    args.epochs, args.report_every = epochs, 2
    args.points, args.samples, args.hidden, args.depth = 16, 60, 4, 2


def spec_from_options(
    args: argparse.Namespace, *, name: str, seeds: int, seeds_per_trial: int | str, cpus: float, gpus: float = 0
):
    """:func:`heat_spec` at the size of :func:`add_options`' options, ``cpus`` and ``gpus`` per trial."""
    return heat_spec(
        name=name,
        epochs=args.epochs,
        report_every=args.report_every,
        points=args.points,
        samples=args.samples,
        hidden=args.hidden,
        depth=args.depth,
        seeds=seeds,
        seeds_per_trial=seeds_per_trial,
        resources={"cpu": cpus, "gpu": gpus},
        data_seed=0,
    )
