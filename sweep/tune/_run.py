"""``sweep.plan`` and ``sweep.run``: plan, check, then train every block as a Ray Tune trial.

Ray is imported here only, when ``run`` is called.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow.fs as pafs

from .._configure import available_cpus, configure
from .._errors import SpecError, StoreError, SweepError
from ..ensemble import aggregate
from ..planning import Plan, TrialPlan, hparams_key, make_plan, merge_plans, read_plan, write_plan
from ..spec import SweepSpec
from ..store import write_samples
from . import _env
from ._aggregate import aggregate as aggregate_in_tasks
from ._auto import Probe, choose_seeds_per_trial, largest_config, measure
from ._cadence import Cadence, cadence, check_checkpoint_every
from ._checks import check_resources, check_writable, load_datasets
from ._cluster import alive_nodes, ensure_ray, trial_slots
from ._quiet import quiet_tune, scoped_environ
from ._relay import Relay, relaying
from ._sweepdir import done_members, experiments, next_experiment, sweep_location
from ._trainable import TrialHooks, TrialInputs

METRIC, MODE = "val_loss_mean", "min"  # Tune's default: the block's mean validation loss
PENDING_ENV = "TUNE_MAX_PENDING_TRIALS_PG"
_OURS = {
    "name",
    "storage_path",
    "storage_filesystem",
    "failure_config",
    "local_dir",
    "scheduler",
    "num_samples",
    "trial_dirname_creator",
    "trial_name_creator",
}


def _stored_block_size(spec: SweepSpec, stored: Plan | None) -> int | None:
    """The block size an earlier run of this ``"auto"`` sweep chose (kept so blocks stay the same)."""
    if spec.seeds_per_trial == "auto" and stored is not None and stored.spec.seeds_per_trial == "auto":
        return stored.seeds_per_trial
    return None


def plan(
    spec: SweepSpec, storage: str | os.PathLike | None = None, storage_filesystem: pafs.FileSystem | None = None
) -> Plan:
    """The trials a sweep would run (structural configs x blocks of seeds), before anything runs.

    Checks what ``run`` checks without Ray: the data is loaded (its arrays checked) and every
    config's model is built for the data's shapes (``eqx.filter_eval_shape``, nothing computed),
    so a bad problem or model fails here with the field named. Only the checks against the
    cluster (resources) and the storage (a write probe) are ``run``'s alone. The process is
    :func:`sweep.configure`-d as by ``run``.
    With ``storage``, members already trained there are left out, as ``run`` would.
    ``seeds_per_trial="auto"`` reuses the size stored in the sweep's plan.json, or measures it
    in this process (see :mod:`sweep.tune._auto`), taking this machine as the cluster.
    """
    _check_spec(spec)
    configure(gpu_preallocate=False)  # as run: loading the data must not take the trials' GPU memory
    datasets = load_datasets(spec)
    done, stored = set(), None
    if storage is not None:
        fs, path, _ = sweep_location(spec, storage, storage_filesystem)
        stored = read_plan(fs, path)
        done, _ = done_members(spec, fs, path, stored)
    seeds_per_trial = _stored_block_size(spec, stored)
    if spec.seeds_per_trial == "auto" and seeds_per_trial is None:
        config, hparams = largest_config(spec, datasets)
        probe = measure(config, hparams, datasets[config.problem_id], spec.resources)
        seeds_per_trial = _choose(spec, config, probe, max(1, int(available_cpus() // spec.resources["cpu"])))
    return make_plan(spec, seeds_per_trial, done=done)


def _choose(spec: SweepSpec, measured: SweepSpec, probe: Probe, slots: int) -> int:
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


def _check_spec(spec: Any) -> None:
    if not isinstance(spec, SweepSpec):
        raise SpecError(f"`spec`: got {type(spec).__name__}; expected a sweep.SweepSpec")


def _split_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Extra keyword arguments of ``run`` -> (TuneConfig kwargs, RunConfig kwargs)."""
    from ray import tune

    tune_fields = {f.name for f in dataclasses.fields(tune.TuneConfig)} - _OURS - {"chdir_to_trial_dir"}
    run_fields = {f.name for f in dataclasses.fields(tune.RunConfig)} - _OURS
    tune_kw, run_kw = {}, {}
    for key, value in options.items():
        if key in tune_fields:
            tune_kw[key] = value
        elif key in run_fields:
            run_kw[key] = value
        else:
            raise SpecError(
                f"`{key}`: not an option of sweep.run; pass run(spec, storage, storage_filesystem, address, "
                f"resume, scheduler, failure_config, trial_hooks) or a Tune option: "
                f"{', '.join(sorted(tune_fields | run_fields))}"
            )
    return tune_kw, run_kw


def _probe_task(config: dict, hparams: tuple, dataset, resources: dict) -> tuple:
    _env.apply(resources)
    return tuple(measure(SweepSpec.from_dict(config), tuple(hparams), dataset, resources))


def _measured_block_size(spec: SweepSpec, datasets: Mapping, data_refs: Mapping, nodes) -> int:
    """Measure the largest config where trials run (a one-shot Ray task with a trial's resources)."""
    import ray

    config, hparams = largest_config(spec, datasets)
    res = spec.resources
    task = ray.remote(num_cpus=res["cpu"], num_gpus=res["gpu"], max_calls=1)(_probe_task)
    probe = Probe(*ray.get(task.remote(config.to_dict(), hparams, data_refs[config.problem_id], dict(res))))
    return _choose(spec, config, probe, trial_slots(res, nodes))


def _trial_dirname(trial) -> str:
    return trial.config["trial_key"]


def _trainable(
    spec: SweepSpec, plan: Plan, data_refs, resume_from: Mapping[str, str], fs, hooks: TrialHooks, pace: Cadence
):
    """The trial function with its inputs in the object store: each trial's plan (and partial
    checkpoint to resume from) as its own object, so that a trial fetches only its own."""
    import ray
    from ray import tune

    from ._trainable import train_trial

    trials = ray.put(
        {t.trial_key: ray.put({"plan": t.to_dict(), "resume_from": resume_from.get(t.trial_key)}) for t in plan.trials}
    )
    fn = tune.with_parameters(train_trial, inputs=TrialInputs(trials, data_refs, fs, hooks, pace))
    return tune.with_resources(fn, {"cpu": spec.resources["cpu"], "gpu": spec.resources["gpu"]})


def _outcome(results, trials: Sequence[TrialPlan]) -> tuple[set[str], list[str]]:
    """(trial keys stopped early by a scheduler, failure messages) of a finished experiment."""
    epochs = {t.trial_key: t.spec.training.epochs for t in trials}
    stopped, failed = set(), []
    for result in results:
        key = (result.config or {}).get("trial_key")
        if result.error is not None:
            text = str(result.error).strip()
            failed.append(f"{key}: {text.splitlines()[-1] if text else type(result.error).__name__}")
        elif key in epochs and 0 < (result.metrics or {}).get("epoch", 0) < epochs[key]:
            stopped.add(key)
    return stopped, failed


def _fit(make_tuner, plan_trials, listeners: list, quiet: bool, slots: int) -> tuple[set[str], list[str], bool]:
    """Build a tuner and fit it with ``listeners`` (the display first, then the trackers) behind
    its :class:`Relay`: (scheduler-stopped trial keys, failures, interrupted).

    Tune's own SIGINT handling is kept (the first Ctrl-C stops the trials and saves the
    experiment, a second one raises ``KeyboardInterrupt``); an experiment that returns with
    trials neither done nor failed was interrupted. Tune keeps placement groups pending for
    ``2 * slots`` trials (``TUNE_MAX_PENDING_TRIALS_PG``, unless set): enough to start the next
    trials as soon as slots free up, instead of its default of 200 pending.
    """
    display = listeners[0]
    display.state.add(plan_trials)
    with quiet_tune(quiet), relaying(listeners), scoped_environ({PENDING_ENV: str(2 * slots)}):
        results = make_tuner().fit()
    keys = {t.trial_key for t in plan_trials}
    interrupted = bool(keys & set(display.state.unfinished()))
    stopped, failures = _outcome(results, plan_trials)
    return (set() if interrupted else stopped), failures, interrupted


def _prepare(
    tune_options: Mapping[str, Any], fs: pafs.FileSystem, path: str, shown: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The driver's checks that do not need Ray: (TuneConfig kwargs, RunConfig kwargs)."""
    tune_kw, run_kw = _split_options(tune_options)
    check_writable(fs, path, shown)
    return tune_kw, run_kw


class Interrupted(KeyboardInterrupt):
    """``sweep.run`` was interrupted (Ctrl-C); the message (already printed) says how to resume."""


def _resume_hint(done: int, total: int, command: str | None, storage: str) -> str:
    command = command or f"sweep.run(spec, storage={storage!r}, resume=True)"
    return f"interrupted: {done} of {total} members done; resume with: {command}"


def _aggregate_complete(
    spec: SweepSpec, fs, path: str, shown: str, storage_filesystem, stored: Plan | None, in_tasks: bool
) -> int:
    """Aggregate the members whose blocks are complete (as Ray tasks if ``in_tasks``), if the store
    does not hold them yet; returns how many there are."""
    done, blocks = done_members(spec, fs, path, stored)
    if not blocks or not done:
        return len(done)
    try:
        from ..store import Store

        if Store.open(shown, filesystem=storage_filesystem).manifest.get("num_members") == len(done):
            return len(done)
    except SweepError:
        pass  # no store yet, or not a readable one: build it
    (aggregate_in_tasks if in_tasks else aggregate)(shown, filesystem=storage_filesystem, only_complete=True)
    return len(done)


def run(
    spec: SweepSpec,
    storage: str = "./runs",
    storage_filesystem: pafs.FileSystem | None = None,
    address: str | None = None,
    resume: bool = False,
    scheduler=None,
    failure_config=None,
    trial_hooks: TrialHooks | None = None,
    loggers: Sequence[str | Any] = (),
    progress: str = "auto",
    resume_command: str | None = None,
    checkpoint_every: int | str = "auto",
    **tune_options: Any,
) -> str:
    """Train every member of ``spec`` with Ray Tune; returns the sweep directory.

    ``<storage>/<spec.name>`` holds ``plan.json``, one Tune experiment ``tune-NNNN`` per call
    (trial directories named by trial key, one block checkpoint per report) and the
    aggregated store. Before any trial starts: resources are checked against the cluster, the
    storage is probed for writing, every dataset is loaded once (its arrays and the batch size
    checked) and put in the object store, every config's model is built for its data's shapes
    (``eqx.filter_eval_shape``), and the plan and the first test samples of each problem
    (``samples.parquet``, what ``sweep plot`` draws from) are written. Members already trained to completion (or
    stopped by a scheduler) are not trained again, so a larger ``seeds`` trains only the new
    ones; a trial with a partial checkpoint of the same key continues from it. When every
    member is trained already, ``run`` says so and returns without starting Ray.

    ``resume=True`` first restores the latest Tune experiment (``Tuner.restore``, errored trials
    resumed from their checkpoints), then trains whatever is still missing. ``scheduler``: any
    Tune scheduler; without its own metric it gets ``val_loss_mean`` / ``min`` (the block's mean
    validation loss; without a validation set, a scheduler must be given its metric).
    ``failure_config``: ``tune.FailureConfig`` (default: retry a trial twice). ``trial_hooks``:
    a :class:`sweep.tune.TrialHooks` run inside every trial (fault injection in tests).
    ``loggers``: trackers that get one run per member (or per configuration), by name
    (``"tensorboard"``, ``"mlflow"``, ``"wandb"``) or as :mod:`sweep.tune` logger objects.
    ``progress``: ``"auto"`` (a live display on a terminal, plain lines otherwise), ``"live"``,
    ``"plain"`` or ``"off"``. Other keyword arguments go to ``tune.TuneConfig`` or
    ``tune.RunConfig`` (e.g. ``max_concurrent_trials``, ``stop``, ``callbacks``,
    ``checkpoint_config``); ``verbose=1`` or more shows Ray's and Tune's own output, which is
    hidden by default. Tune reuses trial worker processes across trials with the same resources
    (``reuse_actors=True`` unless given), so JAX, the compiled programs and the dataset are set
    up once per worker. ``checkpoint_every``: a block checkpoint every that many reports, or
    ``"auto"`` (default) as often as keeps the checkpoint traffic within a tenth of what the
    storage takes; the last report always checkpoints (:mod:`sweep.tune._cadence`). No address
    starts (or reuses) a local Ray instance of this process, never a cluster found on the
    machine; ``address="auto"`` or ``"ray://host:10001"`` joins a cluster. The driver process is
    :func:`sweep.configure`-d (with ``gpu_preallocate=False``). After the trials, the store is
    aggregated by Ray tasks in parallel (:func:`sweep.tune.aggregate`).

    Ctrl-C (SIGINT) stops the trials, keeps every checkpoint, aggregates the complete blocks,
    prints how many members are done and how to resume (``resume_command``, default the
    Python call), and raises :class:`sweep.tune.Interrupted` (a ``KeyboardInterrupt``); a second
    Ctrl-C stops at once.
    """
    from ._loggers import make_loggers
    from ._progress import ProgressState, SweepProgress

    _check_spec(spec)
    check_checkpoint_every(checkpoint_every)
    configure(gpu_preallocate=False)  # the driver's JAX (data generation) must not take the trials' GPU memory
    fs, path, shown = sweep_location(spec, storage, storage_filesystem)
    verbose = int(tune_options.get("verbose", 0) or 0)
    stored = read_plan(fs, path)
    done, blocks = done_members(spec, fs, path, stored)
    state = ProgressState(spec, (), done)
    display = SweepProgress(state, "plain" if verbose and progress == "auto" else progress)
    trackers = make_loggers(loggers, spec, shown)  # unknown names fail here, before Ray starts
    if not make_plan(spec, _stored_block_size(spec, stored) or 10**9, done=done).trials:
        _aggregate_complete(spec, fs, path, shown, storage_filesystem, stored, in_tasks=False)
        display.message(f"nothing to train: {len(done)} members already in {shown}")
        return shown
    try:
        interrupted, failures = _run(
            spec,
            fs,
            path,
            shown,
            storage_filesystem,
            address,
            resume,
            scheduler,
            failure_config,
            trial_hooks or TrialHooks(),
            trackers,
            display,
            verbose,
            checkpoint_every,
            tune_options,
        )
    except KeyboardInterrupt:  # a second Ctrl-C, or one before Tune took over: stop now
        display.close()
        c = state.counts()
        display.message(hint := _resume_hint(c["members_done"], c["members"], resume_command, str(storage)))
        raise Interrupted(hint) from None
    finally:
        display.close()
        for tracker in trackers:
            tracker.close()
    if interrupted:  # what is done is what the checkpoints say (a trial may finish as Tune stops)
        with warnings.catch_warnings():  # the hint says how many members are missing
            warnings.simplefilter("ignore", UserWarning)
            done_now = _aggregate_complete(
                spec, fs, path, shown, storage_filesystem, read_plan(fs, path), in_tasks=True
            )
        display.message(hint := _resume_hint(done_now, state.counts()["members"], resume_command, str(storage)))
        raise Interrupted(hint)
    try:
        aggregate_in_tasks(shown, filesystem=storage_filesystem)
    except StoreError:
        if not failures:  # every trial failed before its first checkpoint: say that, below
            raise
    if failures:
        raise SweepError(
            f"{len(failures)} trial(s) of sweep {spec.name!r} failed (first: {failures[0]}); finished blocks "
            f"are in {shown!r}; run `sweep run SPEC --resume` (Python: sweep.run(..., resume=True)) to retry them"
        )
    for hint in (h for t in trackers if (h := t.hint())):
        display.message(hint)
    return shown


def _run(
    spec: SweepSpec,
    fs,
    path: str,
    shown: str,
    storage_filesystem,
    address,
    resume: bool,
    scheduler,
    failure_config,
    hooks: TrialHooks,
    trackers: list,
    display,
    verbose: int,
    checkpoint_every,
    tune_options: Mapping[str, Any],
) -> tuple[bool, list[str]]:
    """Start Ray, then fit the restored experiment (``resume``) and a new one for what is left:
    (interrupted, failure messages)."""
    import ray  # here: not in both threads at once

    # Ray must start on this thread (its daemons die with the thread that started them); while
    # ``ray.init`` waits for them (~2.5 s on a laptop), a helper thread imports Tune and checks the
    # options and the storage. The datasets are loaded after: ``ray.init`` forks its daemons, and a
    # fork during a multithreaded OpenBLAS call (heat1d's solve, through JAX's LAPACK) on another
    # thread leaves that call waiting forever for BLAS threads the fork handler stopped.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sweep-prepare") as pool:
        prepared = pool.submit(_prepare, tune_options, fs, path, shown)
        ensure_ray(address, quiet=not verbose)
        tune_kw, run_kw = prepared.result()
    datasets = load_datasets(spec)
    from ray import tune

    validated = all(d.val.size for d in datasets.values())  # every config has a validation set
    _check_scheduler_metric(scheduler, tune_kw, validated)
    nodes = alive_nodes()
    check_resources(spec.resources, nodes)
    slots = trial_slots(spec.resources, nodes)
    if tune_kw.get("max_concurrent_trials"):
        slots = min(slots, int(tune_kw["max_concurrent_trials"]))
    pace = cadence(checkpoint_every, slots, fs)
    data_refs = {key: ray.put(d) for key, d in datasets.items()}
    ray_fs = None if isinstance(fs, pafs.LocalFileSystem) else fs
    stored = read_plan(fs, path)
    failures: list[str] = []
    display.start()

    if resume and stored is not None and (names := experiments(fs, path)):
        exp_path = f"{path}/{names[-1]}"
        if tune.Tuner.can_restore(exp_path, storage_filesystem=ray_fs):
            done, _ = done_members(spec, fs, path, stored)
            left = [
                t
                for t in stored.trials
                if t.trial_key not in stored.stopped_trials
                and any((t.config_id, s, hparams_key(h)) not in done for h, s in t.members())
            ]
            for tracker in trackers:
                tracker.add(stored.trials)

            # the restored experiment keeps its callbacks, among them the relay to this call's display
            stopped, failures, interrupted = _fit(
                lambda: tune.Tuner.restore(
                    exp_path,
                    trainable=_trainable(spec, stored, data_refs, {}, ray_fs, hooks, pace),
                    resume_errored=True,
                    restart_errored=False,
                    storage_filesystem=ray_fs,
                ),
                left,
                [display, *trackers],
                quiet=not verbose,
                slots=slots,
            )
            if interrupted:
                return True, failures
            stored = stored.with_stopped(stopped)

    done, blocks = done_members(spec, fs, path, stored)
    seeds_per_trial = _stored_block_size(spec, stored)
    if spec.seeds_per_trial == "auto" and seeds_per_trial is None:
        seeds_per_trial = _measured_block_size(spec, datasets, data_refs, nodes)
    new = make_plan(spec, seeds_per_trial, done=done)
    merged = merge_plans(stored, new)
    write_plan(fs, path, merged)
    write_samples(fs, path, datasets)  # what figures draw from: the aggregator never loads data

    if new.trials and not failures:
        resume_from = {t.trial_key: blocks[t.trial_key].path for t in new.trials if t.trial_key in blocks}
        for tracker in trackers:
            tracker.add(new.trials)
        run_kw = {**run_kw, "callbacks": [*run_kw.get("callbacks", []), Relay()]}
        stopped, failures, interrupted = _fit(
            lambda: _tuner(
                spec,
                new,
                _trainable(spec, new, data_refs, resume_from, ray_fs, hooks, pace),
                fs,
                path,
                ray_fs,
                scheduler,
                failure_config,
                tune_kw,
                run_kw,
                validated,
            ),
            new.trials,
            [display, *trackers],
            quiet=not verbose,
            slots=slots,
        )
        if interrupted:
            return True, failures
        if stopped:
            write_plan(fs, path, merged.with_stopped(stopped))
    return False, failures


def _default_metric(scheduler, tune_kw: Mapping[str, Any]) -> bool:
    """Whether Tune gets :data:`METRIC` (nobody named a metric)."""
    return "metric" not in tune_kw and (scheduler is None or getattr(scheduler, "_metric", None) is None)


def _check_scheduler_metric(scheduler, tune_kw: Mapping[str, Any], validated: bool) -> None:
    """Without a validation set there is no default to rank trials by: a scheduler needs its own metric."""
    if scheduler is not None and _default_metric(scheduler, tune_kw) and not validated:
        raise SpecError(
            f"`scheduler`: {type(scheduler).__name__} has no metric, and the sweep has no validation set "
            f"(problem.val_fraction=0) for the default {METRIC!r}; give it one explicitly, e.g. "
            f"{type(scheduler).__name__}(metric='test_loss_mean', mode='min') (a choice made on the test set makes "
            f"its test numbers optimistic), or train with a validation set"
        )


def _tuner(
    spec: SweepSpec,
    plan: Plan,
    trainable,
    fs,
    path: str,
    ray_fs,
    scheduler,
    failure_config,
    tune_kw: dict[str, Any],
    run_kw: dict[str, Any],
    validated: bool,
):
    """A new Tune experiment ``<sweep>/tune-NNNN`` with one trial per planned block."""
    from ray import tune

    tune_config = {"reuse_actors": True, **tune_kw}
    if _default_metric(scheduler, tune_kw) and validated:
        tune_config.update(metric=METRIC, mode=MODE)
    run_config = {
        "verbose": 0,
        "failure_config": failure_config or tune.FailureConfig(max_failures=2),
        "checkpoint_config": tune.CheckpointConfig(num_to_keep=2),
        **run_kw,
    }
    return tune.Tuner(
        trainable,
        param_space={"trial_key": tune.grid_search([t.trial_key for t in plan.trials])},
        tune_config=tune.TuneConfig(
            scheduler=scheduler, trial_dirname_creator=_trial_dirname, trial_name_creator=_trial_dirname, **tune_config
        ),
        run_config=tune.RunConfig(
            name=next_experiment(fs, path), storage_path=path, storage_filesystem=ray_fs, **run_config
        ),
    )
