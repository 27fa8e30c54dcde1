"""The Ray benchmarks' own local Ray, and Tune options passed through ``sweep.run``.

A benchmark starts a new local Ray with ``sweep.run``'s settings (:func:`local_ray`): a bare
``ray.init()`` joins any cluster someone started with ``ray start`` on the same machine, and a
benchmark that joined another session's cluster lost its trials when that cluster stopped.
"""

from __future__ import annotations

import argparse
import json


def local_ray(cpus: int | None = 2, **options) -> None:
    """``ray.init`` of a new local Ray of ``cpus`` CPUs (``None``: every core), no dashboard, the
    workers' output not sent to the driver; ``options`` override or add ``ray.init`` arguments."""
    import ray

    settings = {"include_dashboard": False, "log_to_driver": False, "logging_level": "WARNING"} | options
    if cpus is not None:
        settings["num_cpus"] = cpus
    ray.init(address="local", **settings)


def add_tune_option(parser: argparse.ArgumentParser) -> None:
    """``--tune-option KEY=JSON`` (repeated): a ``tune.TuneConfig``/``RunConfig`` field for ``sweep.run``."""
    parser.add_argument(
        "--tune-option",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="a tune.TuneConfig/RunConfig option passed through sweep.run, e.g. reuse_actors=false",
    )


def tune_options(args: argparse.Namespace) -> dict:
    """The ``--tune-option`` values as ``{key: value}``."""
    return {k: json.loads(v) for k, v in (o.split("=", 1) for o in args.tune_option)}


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
