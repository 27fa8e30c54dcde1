"""``sweep.plan``: the trials a sweep would run, and the block size of an ``"auto"`` sweep.

What :func:`plan` shows is what :func:`sweep.run` trains: both check the spec with
:func:`check_spec`, keep the block size an earlier run chose (:func:`stored_block_size`), plan a
race's next round only (:func:`next_round`) and choose a new ``"auto"`` block size from one
measurement of the largest config (:func:`choose_block_size`): ``plan`` measures in this process,
on the outline's shapes (a problem that reads files is not loaded), ``run`` in a Ray task with a
trial's resources (:func:`measured_block_size`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

import pyarrow.fs as pafs

from .._configure import available_cpus, configure
from .._errors import SpecError
from ..planning import Plan, make_plan
from ..problems import Dataset, ProblemData
from ..spec import SweepSpec
from ..store import SweepDir
from ..training import data_line
from . import _env, _race
from ._auto import Probe, choose_seeds_per_trial, largest_config, measure
from ._checks import check_same_data, outline_datasets, trained_configs
from ._cluster import trial_slots
from ._resumed import asked_so_far, check_ranking, check_same_problem

__all__ = [
    "block_size_here",
    "check_spec",
    "choose_block_size",
    "measured_block_size",
    "next_round",
    "plan",
    "stored_block_size",
]


def plan(
    spec: SweepSpec, storage: str | os.PathLike[str] | None = None, storage_filesystem: pafs.FileSystem | None = None
) -> Plan:
    """The trials a sweep would run (structural configs x blocks of seeds), before anything runs.

    Checks what :func:`run` checks without Ray: the data is outlined as ``run`` outlines it
    (:func:`sweep.problems.outline_problem`: generated, its arrays checked, or for a problem that
    reads files its metadata read and its driver's pass made, or taken from ``storage``'s sweep
    directory, which a plan does not write) and every config's model is built for the data's
    shapes (``eqx.filter_eval_shape``, nothing computed),
    so a bad problem or model fails here with the field named. Only the checks against the
    cluster (resources) and the storage (a write probe) are ``run``'s alone. The process is
    :func:`sweep.configure`-d as by ``run``.

    Args:
        spec: The sweep specification.
        storage: Where the sweep is stored; members already trained there are left out (and a
            search's configurations asked so far counted), as ``run`` would.
        storage_filesystem: A ``pyarrow.fs.FileSystem`` for ``storage`` (an ``s3://`` data file is
            read through it where it is an ``S3FileSystem``, as by ``run``).

    Returns:
        The :class:`Plan`; printing it shows one row per trial. ``seeds_per_trial="auto"`` reuses
        the size stored in the sweep's ``plan.json``, or measures it in this process on the
        outline's shapes (no data file is loaded), taking this machine as the cluster.

    Raises:
        SpecError: The data or a model do not fit the spec; or, with ``storage``, the sweep there
            holds members trained on a problem written otherwise or on files that changed since,
            or is a search or a race that this spec would not go on with (what ``run`` refuses).

    Examples:
        ```python
        print(sweep.plan(spec))  # trials by grid values, blocks of seeds, resources
        ```
    """
    check_spec(spec)
    if spec.search is not None:
        from ..search import check_engine  # (sweep.search imports matplotlib: not in trial processes)

        check_engine(spec.search)  # as run: Optuna and the sampler's package importable here
    configure(gpu_preallocate=False)  # as run: loading the data must not take the trials' GPU memory
    sweep_dir = None if storage is None else SweepDir.of(spec, storage, storage_filesystem)
    if sweep_dir is None:
        outlines = outline_datasets(spec, storage_filesystem)
    else:  # the driver's pass of an earlier run is taken, not made again (and a plan writes nothing)
        check_same_problem(spec, sweep_dir)  # and what else run refuses of a sweep that goes on
        if spec.search is not None or spec.adaptive is not None:
            check_ranking(spec, sweep_dir)
        if spec.search is not None:
            spec = asked_so_far(spec, sweep_dir)
        scans = sweep_dir.data_scans()
        outlines = outline_datasets(spec, sweep_dir.filesystem, scans)
    datasets = {key: outline.shapes for key, outline in outlines.items()}
    done, stored = set(), None
    if sweep_dir is not None:
        stored = sweep_dir.plan()
        done, blocks = sweep_dir.done(spec)
        check_same_data(spec, scans, outlines, trained_configs(done, blocks))  # as run refuses it
    seeds_per_trial = stored_block_size(spec, stored)
    if spec.seeds_per_trial == "auto" and seeds_per_trial is None:  # measured on the shapes: no file is loaded
        seeds_per_trial = block_size_here(spec, datasets, max(1, int(available_cpus() // spec.resources["cpu"])))
    wanted = next_round(spec, storage, storage_filesystem)
    unfinished = [] if sweep_dir is None else sweep_dir.unfinished(spec)
    planned = make_plan(spec, seeds_per_trial, done=done, wanted=wanted, unfinished=unfinished)
    race = None if stored is None else stored.race  # its evaluations so far: the rule it goes on under
    configs = {c.problem_id: c for c, _ in spec.expand()}  # a config per problem (the budget is the training's)
    data = tuple(line for key, c in configs.items() if (line := data_line(c, datasets[key])) is not None)
    return dataclasses.replace(planned, race=race if race is not None else planned.race, data=data)


def check_spec(spec: Any) -> None:
    """A :class:`sweep.SweepSpec` fit to run (:meth:`~sweep.SweepSpec.check_new`), or a
    :class:`sweep.SpecError` saying what was given."""
    if not isinstance(spec, SweepSpec):
        raise SpecError(f"`spec`: got {type(spec).__name__}; expected a sweep.SweepSpec")
    spec.check_new()


def stored_block_size(spec: SweepSpec, stored: Plan | None) -> int | None:
    """The block size an earlier run of this ``"auto"`` sweep chose (kept so blocks stay the same)."""
    if spec.seeds_per_trial == "auto" and stored is not None and stored.spec.seeds_per_trial == "auto":
        return stored.seeds_per_trial
    return None


def next_round(spec: SweepSpec, storage, storage_filesystem) -> dict | None:
    """Adaptive seeds: the seeds of the race's next round; a search: none (its rounds are
    planned as it proposes them); None: fixed seeds, plan them all."""
    if spec.search is not None:
        return {}
    if spec.adaptive is None:
        return None
    if storage is None:
        return {key: spec.adaptive.seeds_in(1) for key in _race.configurations(spec)[0]}
    return _race.advance(spec, SweepDir.of(spec, storage, storage_filesystem), record=False).wanted


def choose_block_size(spec: SweepSpec, measured: SweepSpec, probe: Probe, slots: int) -> int:
    """The block size for ``spec`` from the ``probe`` of its config ``measured``."""
    configs = spec.expand()
    return choose_seeds_per_trial(
        probe,
        num_seeds=len(spec.seed_list),
        num_configs=len(configs),
        num_hparam_sets=len(configs[0][1]),
        epochs=measured.training.epochs,
        slots=slots,
    )


def block_size_here(spec: SweepSpec, datasets: Mapping[str, Dataset], slots: int) -> int:
    """Measure the largest config in this process and choose the block size for ``slots``."""
    config, hparams = largest_config(spec, datasets)
    probe = measure(config, hparams, datasets[config.problem_id], spec.resources)
    return choose_block_size(spec, config, probe, slots)


def _probe_task(config: dict, hparams: tuple, data: ProblemData, resources: dict) -> tuple:
    _env.apply(resources)
    return tuple(measure(SweepSpec.from_dict(config), tuple(hparams), data.load(), resources))


def measured_block_size(spec: SweepSpec, shapes: Mapping[str, Dataset], data_refs: dict, nodes: list) -> int:
    """Measure the largest config (by ``shapes``) where trials run (a one-shot Ray task with a
    trial's resources, on the data in the object store: :class:`~sweep.problems.ProblemData`) and
    choose the block size for ``nodes``."""
    import ray

    config, hparams = largest_config(spec, shapes)
    res = spec.resources
    task = ray.remote(num_cpus=res["cpu"], num_gpus=res["gpu"], max_calls=1)(_probe_task)
    data = data_refs[config.problem_id]
    probe = Probe(*ray.get(task.remote(config.to_dict(), hparams, data, dict(res))))
    return choose_block_size(spec, config, probe, trial_slots(res, nodes))
