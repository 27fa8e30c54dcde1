"""``sweep.run``: check, then train every block as a Ray Tune trial (``sweep.plan`` is :mod:`._plan`).

``run`` goes through named phases: check (the spec and the options, before anything starts),
start (Ray, the datasets, the cluster's slots), restore (``resume``: the latest Tune
experiment), train the new trials, aggregate. The sweep directory is read and written through
one :class:`~sweep.store.SweepDir`, which reads each of its files once. Ray is imported here
only, when ``run`` is called.
"""

from __future__ import annotations

import dataclasses
import gc
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from .._configure import configure
from .._errors import StoreError, SweepError
from ..ensemble import aggregate
from ..planning import Plan, make_plan, merge_plans
from ..spec import SweepSpec
from ..store import SweepDir
from . import _race
from ._aggregate import aggregate as aggregate_in_tasks
from ._cadence import Cadence, cadence
from ._checks import check_resources, check_writable, load_datasets
from ._cluster import alive_nodes, ensure_ray, trial_slots
from ._experiment import fit_experiment
from ._options import METRIC, RunOptions, unknown_options
from ._plan import check_spec, measured_block_size, stored_block_size
from ._relay import Relay
from ._trainable import TrialHooks, TrialInputs
from ._waves import waves

if TYPE_CHECKING:
    from ray.tune import FailureConfig
    from ray.tune.schedulers import TrialScheduler

__all__ = ["METRIC", "Interrupted", "run"]


@dataclasses.dataclass
class _Session:
    """What the phases of one run share once Ray has started."""

    spec: SweepSpec
    sweep_dir: SweepDir
    options: RunOptions
    listeners: list  # the display first, then the trackers
    datasets: dict = dataclasses.field(default_factory=dict)
    data_refs: dict = dataclasses.field(default_factory=dict)
    nodes: list = dataclasses.field(default_factory=list)
    slots: int = 1
    pace: Cadence | None = None
    validated: bool = True  # every config has a validation set

    @property
    def ray_fs(self) -> pafs.FileSystem | None:
        """The filesystem Tune gets (None: the local disk)."""
        fs = self.sweep_dir.filesystem
        return None if isinstance(fs, pafs.LocalFileSystem) else fs


def _trainable(session: _Session, plan: Plan, resume_from: Mapping[str, str]):
    """The trial function with its inputs in the object store: each trial's plan (and partial
    checkpoint to resume from) as its own object, so that a trial fetches only its own."""
    import ray
    from ray import tune

    from ._preemption import preemptible
    from ._trainable import train_trial

    trials = ray.put(
        {t.trial_key: ray.put({"plan": t.to_dict(), "resume_from": resume_from.get(t.trial_key)}) for t in plan.trials}
    )
    assert session.pace is not None  # set when the session started
    inputs = TrialInputs(trials, session.data_refs, session.ray_fs, session.options.hooks, session.pace)
    resources = session.spec.resources
    return tune.with_resources(
        preemptible(tune.with_parameters(train_trial, inputs=inputs)),
        {"cpu": resources["cpu"], "gpu": resources["gpu"]},
    )


class Interrupted(KeyboardInterrupt):
    """``sweep.run`` was interrupted (Ctrl-C); the message (already printed) says how to resume."""


def _resume_hint(done: int, total: int, command: str | None, storage: str) -> str:
    command = command or f"sweep.run(spec, storage={storage!r}, resume=True)"
    return f"interrupted: {done} of {total} members done; resume with: {command}"


def _aggregate_complete(spec: SweepSpec, sweep_dir: SweepDir, in_tasks: bool) -> int:
    """Aggregate the members whose blocks are complete (as Ray tasks if ``in_tasks``), if the store
    does not hold them yet; returns how many there are."""
    done, blocks = sweep_dir.done(spec)
    if not blocks or not done:
        return len(done)
    try:
        from ..store import Store

        manifest = Store.open(sweep_dir.path, filesystem=sweep_dir.filesystem).manifest
        if manifest.get("num_members") == len(done) and _race.stored(manifest, sweep_dir.plan()):
            return len(done)
    except SweepError:
        pass  # no store yet, or not a readable one: build it
    (aggregate_in_tasks if in_tasks else _aggregate_here)(sweep_dir, only_complete=True)
    return len(done)


def _aggregate_here(sweep_dir: SweepDir, only_complete: bool) -> str:
    return aggregate(sweep_dir, only_complete=only_complete)


def run(
    spec: SweepSpec,
    storage: str = "./runs",
    storage_filesystem: pafs.FileSystem | None = None,
    address: str | None = None,
    resume: bool = False,
    scheduler: TrialScheduler | None = None,
    failure_config: FailureConfig | None = None,
    trial_hooks: TrialHooks | None = None,
    loggers: Sequence[str | Any] = (),
    progress: str = "auto",
    resume_command: str | None = None,
    checkpoint_every: int | str = "auto",
    tune_config=None,
    run_config=None,
    verbose: int = 0,
    **unknown: Any,
) -> str:
    """Train every member of ``spec`` with Ray Tune, then aggregate the store.

    ``<storage>/<spec.name>`` holds ``plan.json``, one Tune experiment ``tune-NNNN`` per call, or
    per wave of a plan of more than 1,000 trials, so that the driver holds Tune's records of one
    wave at a time (trial directories named by trial key, one block checkpoint per report) and the aggregated
    store. Before any trial starts: resources are checked against the cluster, the storage is
    probed for writing, every dataset is loaded once (its arrays and the batch size checked) and
    put in the object store, every config's model is built for its data's shapes
    (``eqx.filter_eval_shape``), and the plan and the first test samples of each problem
    (``samples.parquet``, what ``sweep plot`` draws from) are written. Members already trained to
    completion (or stopped by a scheduler) are not trained again, so a larger ``seeds`` trains only
    the new ones; a trial with a partial checkpoint of the same key continues from it. When every
    member is trained already, ``run`` says so and returns without starting Ray. Without a
    ``tune_config``, Tune reuses trial worker processes across trials with the same resources
    (``reuse_actors=True``), so JAX, the compiled programs and the dataset are set up once per
    worker. The run goes through named phases: check (the spec and every option, before anything
    starts), start (Ray, the datasets, the cluster), restore (``resume``), train the new trials,
    aggregate; the sweep directory is read through one :class:`sweep.store.SweepDir`, which reads
    each of its files once. The driver process is
    :func:`sweep.configure`-d (with ``gpu_preallocate=False``). After the trials, the store is
    aggregated by Ray tasks in parallel (:func:`sweep.tune.aggregate`).

    Ctrl-C (SIGINT) stops the trials, keeps every checkpoint, aggregates the complete blocks,
    prints how many members are done and how to resume, and raises :class:`sweep.tune.Interrupted`
    (a ``KeyboardInterrupt``); a second Ctrl-C stops at once.

    Args:
        spec: The sweep specification.
        storage: Where sweeps are stored: any path pyarrow understands (local, NFS, ``s3://...``).
        storage_filesystem: A ``pyarrow.fs.FileSystem`` for ``storage`` (as in Tune's ``RunConfig``).
        address: ``None`` starts (or reuses) a local Ray instance of this process, never a cluster
            found on the machine; ``"auto"``, ``"HOST:6379"`` or ``"ray://host:10001"`` joins a cluster.
        resume: First restore the latest Tune experiment (``Tuner.restore``, errored trials resumed
            from their checkpoints), then train whatever is still missing.
        scheduler: Any Tune scheduler; without its own metric it gets ``val_loss_mean`` / ``min``
            (without a validation set, a scheduler must be given its metric).
        failure_config: A ``tune.FailureConfig`` (default: retry a trial twice).
        trial_hooks: A :class:`sweep.tune.TrialHooks` run inside every trial (fault injection).
        loggers: Trackers that get one run per member (or per configuration), by name
            (``"tensorboard"``, ``"mlflow"``, ``"wandb"``) or as :mod:`sweep.tune` logger objects.
        progress: ``"auto"`` (a live display on a terminal, plain lines otherwise), ``"live"``,
            ``"plain"`` or ``"off"``.
        resume_command: What the Ctrl-C message says to run to resume (default: the Python call).
        checkpoint_every: A block checkpoint every that many reports, or ``"auto"`` (as often as
            keeps the checkpoint traffic within a tenth of what the storage takes); the last report
            always checkpoints.
        tune_config: A ``tune.TuneConfig`` passed through (``max_concurrent_trials``,
            ``time_budget_s``, ``reuse_actors``, ``metric``/``mode``, a ``scheduler``), used as it is
            (Tune's own default is ``reuse_actors=False``; without one, trial workers are reused).
            The fields a sweep sets itself (``num_samples``, ``search_alg``, trial names) are refused.
        run_config: A ``tune.RunConfig`` passed through (``stop``, ``callbacks``,
            ``checkpoint_config``, ``failure_config``, ...); its name and storage are the sweep's.
        verbose: 1 or more shows Ray's and Tune's own output, hidden by default.

    Returns:
        The sweep directory, ``<storage>/<spec.name>``.

    Raises:
        SpecError: The spec, its data, its models, its resources, the storage or an option are
            unusable (before any trial starts); a keyword argument ``run`` does not take is named
            with the Tune config that holds it.
        sweep.tune.Interrupted: Ctrl-C.

    Examples:
        ```python
        path = sweep.run(spec, storage="./runs")
        path = sweep.run(spec, storage="s3://bucket/runs", address="auto")
        path = sweep.run(spec, storage="./runs", resume=True)
        ```
    """
    from ._loggers import make_loggers
    from ._progress import ProgressState, SweepProgress

    # check: nothing starts before the spec and every option are known to be good
    check_spec(spec)
    unknown_options(unknown)
    options = RunOptions(
        address, resume, scheduler, failure_config, trial_hooks or TrialHooks(), progress, resume_command,
        checkpoint_every, tune_config, run_config, int(verbose or 0),
    )  # fmt: skip
    _race.check_options(spec, options.the_scheduler, options.run_config)
    configure(gpu_preallocate=False)  # the driver's JAX (data generation) must not take the trials' GPU memory
    sweep_dir = SweepDir.of(spec, storage, storage_filesystem)
    done, _ = sweep_dir.done(spec)
    state = ProgressState(spec, (), done)
    display = SweepProgress(state, "plain" if options.verbose and progress == "auto" else progress)
    trackers = make_loggers(loggers, spec, sweep_dir.shown)  # unknown names fail here, before Ray starts
    if not _anything_to_train(spec, sweep_dir, done, state):
        _aggregate_complete(spec, sweep_dir, in_tasks=False)
        display.message(f"nothing to train: {len(done)} members already in {sweep_dir.shown}")
        _race_result(spec, sweep_dir, display)
        return sweep_dir.shown
    session = _Session(spec, sweep_dir, options, [display, *trackers])
    try:
        _start(session)
        interrupted, failures = _restore(session) if resume else (False, [])
        if not interrupted:
            interrupted, failures = (_race_rounds if spec.adaptive else _train_new)(session, failures)
    except KeyboardInterrupt:  # a second Ctrl-C, or one before Tune took over: stop now
        display.close()
        c = state.counts()
        display.message(hint := _resume_hint(c["members_done"], c["members"], resume_command, str(storage)))
        raise Interrupted(hint) from None
    finally:
        display.close()
        for tracker in trackers:
            tracker.close()
    sweep_dir.refresh()  # the trials wrote checkpoints: list them (each block.json read once)
    if interrupted:  # what is done is what the checkpoints say (a trial may finish as Tune stops)
        with warnings.catch_warnings():  # the hint says how many members are missing
            warnings.simplefilter("ignore", UserWarning)
            done_now = _aggregate_complete(spec, sweep_dir, in_tasks=True)
        display.message(hint := _resume_hint(done_now, state.counts()["members"], resume_command, str(storage)))
        raise Interrupted(hint)
    _aggregate(session, failures)
    _race_result(spec, sweep_dir, display)
    for hint in (h for t in trackers if (h := t.hint())):
        display.message(hint)
    return sweep_dir.shown


def _anything_to_train(spec: SweepSpec, sweep_dir: SweepDir, done: set, state) -> bool:
    """Whether members are left to train (a race first evaluates the rounds it has, and shows them)."""
    if spec.adaptive is None:
        return bool(make_plan(spec, stored_block_size(spec, sweep_dir.plan()) or 10**9, done=done).trials)
    step = _race.advance(spec, sweep_dir)
    _race.show(state, spec, step)
    return bool(step.wanted)


def _race_rounds(session: _Session, failures: list[str]) -> tuple[bool, list[str]]:
    """Adaptive seeds: evaluate the rounds trained, then train the next (one Tune experiment per
    round), until the race is over: (interrupted, failure messages)."""
    spec, sweep_dir, state = session.spec, session.sweep_dir, session.listeners[0].state
    before = None
    while not failures:
        step = _race.advance(spec, sweep_dir)
        _race.show(state, spec, step)
        if not step.wanted:
            break
        if step.wanted == before:
            raise SweepError(f"sweep {spec.name!r}: the race's round {step.wanted} was trained but is not complete")
        interrupted, failures = _train_new(session, failures, step.wanted)
        if interrupted:
            return True, failures
        sweep_dir.refresh()
        before = step.wanted
    return False, failures


def _race_result(spec: SweepSpec, sweep_dir: SweepDir, display) -> None:
    """Print what a race decided (nothing for fixed seeds)."""
    if spec.adaptive is not None:
        step = _race.advance(spec, sweep_dir, record=False)
        display.message(_race.result(spec, step, lambda key: display.state.label(*key)))


def _start(session: _Session) -> None:
    """Start Ray, check the storage and the cluster, load the datasets into the object store."""
    import ray  # here: not in both threads at once

    sweep_dir, options = session.sweep_dir, session.options
    # The datasets are loaded and checked first (a missing file, shapes, batch size against the
    # samples, every model built for them), so that bad data fails before Ray starts, and on this
    # thread alone: ``ray.init`` forks its daemons, and a fork during a multithreaded OpenBLAS
    # call (heat1d's solve, through JAX's LAPACK) on another thread leaves that call waiting
    # forever for BLAS threads the fork handler stopped. Ray must start on this thread (its
    # daemons die with the thread that started them); while ``ray.init`` waits for them (~2.5 s
    # on a laptop), a helper thread imports Tune and checks the storage.
    session.datasets = load_datasets(session.spec)
    session.validated = all(d.val.size for d in session.datasets.values())
    _race.check_validated(session.spec, session.validated)
    session.listeners[0].state.rank_on_validation(session.validated)
    options.check_scheduler_metric(session.validated)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sweep-prepare") as pool:
        prepared = pool.submit(check_writable, sweep_dir.filesystem, sweep_dir.path, sweep_dir.shown)
        ensure_ray(options.address, quiet=options.quiet)
        prepared.result()
    session.nodes = alive_nodes()
    check_resources(session.spec.resources, session.nodes)
    session.slots = trial_slots(session.spec.resources, session.nodes)
    if options.max_concurrent_trials:
        session.slots = min(session.slots, int(options.max_concurrent_trials))
    session.pace = cadence(options.checkpoint_every, session.slots, sweep_dir.filesystem)
    session.data_refs = {key: ray.put(d) for key, d in session.datasets.items()}
    session.listeners[0].start()


def _restore(session: _Session) -> tuple[bool, list[str]]:
    """Fit the latest Tune experiment again (errored trials resumed from their checkpoints):
    (interrupted, failure messages). Trials a scheduler stopped are recorded in the plan."""
    from ray import tune

    sweep_dir, stored = session.sweep_dir, session.sweep_dir.plan()
    names = sweep_dir.experiments() if stored is not None else []
    if stored is None or not names:
        return False, []
    exp_path = f"{sweep_dir.path}/{names[-1]}"
    if not tune.Tuner.can_restore(exp_path, storage_filesystem=session.ray_fs):
        return False, []
    done, _ = sweep_dir.done(session.spec)
    left = [
        t
        for t in stored.trials
        if t.trial_key not in stored.stopped_trials and any(m not in done for m in t.member_ids())
    ]
    for tracker in session.listeners[1:]:
        tracker.add(stored.trials)
    # the restored experiment keeps its callbacks, among them the relay to this call's display
    stopped, failures, interrupted = fit_experiment(
        lambda: tune.Tuner.restore(
            exp_path,
            trainable=_trainable(session, stored, {}),
            resume_errored=True,
            restart_errored=False,
            storage_filesystem=session.ray_fs,
        ),
        left,
        session.listeners,
        quiet=session.options.quiet,
        slots=session.slots,
    )
    if not interrupted and stopped:
        sweep_dir.write_plan(stored.with_stopped(stopped))
    sweep_dir.refresh()  # the restored trials wrote checkpoints
    return interrupted, failures


def _train_new(session: _Session, failures: list[str], wanted: dict | None = None) -> tuple[bool, list[str]]:
    """Plan what is not trained yet (of ``wanted``, a race's round, if given), write the plan and
    the samples, and fit a new experiment for it (unless restored trials failed): (interrupted,
    failure messages)."""
    spec, sweep_dir = session.spec, session.sweep_dir
    stored = sweep_dir.plan()
    done, blocks = sweep_dir.done(spec)
    seeds_per_trial = stored_block_size(spec, stored)
    if spec.seeds_per_trial == "auto" and seeds_per_trial is None:
        seeds_per_trial = measured_block_size(spec, session.datasets, session.data_refs, session.nodes)
    new = make_plan(spec, seeds_per_trial, done=done, wanted=wanted)
    merged = merge_plans(stored, new)
    sweep_dir.write_plan(merged)
    sweep_dir.write_samples(session.datasets)  # what figures draw from: the aggregator never loads data
    if not new.trials or failures:
        return False, failures
    resume_from = {t.trial_key: blocks[t.trial_key].path for t in new.trials if t.trial_key in blocks}
    for tracker in session.listeners[1:]:
        tracker.add(new.trials)
    session.listeners[0].state.add(new.trials)  # the display counts every trial, whichever wave it is in
    trainable = _trainable(session, new, resume_from)  # once for every wave: Tune keeps what it is given
    stopped, interrupted = set(), False
    for wave in waves(new.trials, session.options, session.slots):  # one experiment each
        keys = [t.trial_key for t in wave]
        wave_stopped, wave_failures, interrupted = fit_experiment(
            lambda keys=keys: session.options.tuner(trainable, keys, sweep_dir, session.validated, [Relay()]),
            wave,
            session.listeners,
            quiet=session.options.quiet,
            slots=session.slots,
        )
        stopped, failures = stopped | wave_stopped, failures + wave_failures
        if interrupted:
            break
        gc.collect()  # the wave's Tune records (cycles among them) go before the next wave starts
    if not interrupted and stopped:
        sweep_dir.write_plan(merged.with_stopped(stopped))
    return interrupted, failures


def _aggregate(session: _Session, failures: list[str]) -> None:
    """Aggregate the store by Ray tasks; then say which trials failed, if any did."""
    spec, sweep_dir = session.spec, session.sweep_dir
    try:
        aggregate_in_tasks(sweep_dir)
    except StoreError:
        if not failures:  # every trial failed before its first checkpoint: say that, below
            raise
    if failures:
        raise SweepError(
            f"{len(failures)} trial(s) of sweep {spec.name!r} failed (first: {failures[0]}); finished blocks "
            f"are in {sweep_dir.shown!r}; run `sweep run SPEC --resume` (Python: sweep.run(..., resume=True)) to "
            f"retry them"
        )
