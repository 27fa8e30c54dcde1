"""Ray Tune orchestration. ``ray`` is imported lazily, inside :func:`run`: importing
``sweep`` or ``sweep.tune`` does not import it."""

from __future__ import annotations

import os

import pyarrow.fs as pafs

from ..spec import SweepSpec
from ._plan import Plan as Plan
from ._plan import TrialPlan as TrialPlan
from ._plan import make_plan as make_plan
from ._run import run as run


def plan(spec: SweepSpec, storage: str | os.PathLike | None = None,
         storage_filesystem: pafs.FileSystem | None = None) -> Plan:
    """The trials a sweep would run (structural configs x blocks of seeds), before anything runs.

    With ``storage``, members already trained there are left out, as ``run`` would.
    ``seeds_per_trial="auto"`` reuses the size stored in the sweep's plan.json, or measures it
    in this process (see :mod:`sweep.tune._auto`), taking this machine as the cluster.
    """
    from ._auto import choose_seeds_per_trial, largest_config, measure, problem_key
    from ._checks import load_datasets
    from ._sweepdir import done_members, locate, read_plan

    done, seeds_per_trial = set(), None
    if storage is not None:
        fs, path, _ = locate(spec, storage, storage_filesystem)
        stored = read_plan(fs, path)
        done, _ = done_members(spec, fs, path, stored)
        if spec.seeds_per_trial == "auto" and stored and stored["spec"].get("seeds_per_trial") == "auto":
            seeds_per_trial = stored["seeds_per_trial"]
    if spec.seeds_per_trial == "auto" and seeds_per_trial is None:
        datasets = load_datasets(spec)
        config, hparams = largest_config(spec, datasets)
        probe = measure(config, hparams, datasets[problem_key(config)], spec.resources)
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        seeds_per_trial = choose_seeds_per_trial(
            probe, num_seeds=len(spec.seed_list), num_configs=len(spec.expand()),
            num_hparam_sets=len(spec.expand()[0][1]), epochs=config.training.epochs,
            slots=max(1, int(cpus // spec.resources["cpu"])))
    return make_plan(spec, seeds_per_trial, done=done)
