"""``sweep.run``: one loop in which a round policy decides what to train next and an executor
trains it (``sweep.plan`` is :mod:`._plan`)::

    check (the spec, the options, the data: before anything starts)
    executor.start(outlines)                       # Ray and the cluster, or nothing
    executor.restore()                             # resume=True
    rounds = (plan_round(planned, ...) for planned, wanted in policy.rounds(spec, sweep_dir))
    executor.train(rounds)                         # each round's outcome sent back before the next
                                                   # (_policy: fixed seeds, the race, a search;
                                                   #  _tune_executor: one experiment; _local)
    aggregate(sweep_dir, map_tasks=executor.map_tasks)   # map here, Ray tasks on Ray

The sweep directory is read and written through one :class:`~sweep.store.SweepDir`, which reads
each of its files once; the loop alone writes its ``plan.json`` (and a race's policy the
evaluations it records there). Ray is started by the Tune executor only.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import shlex
import signal
import warnings
from typing import Any

import pyarrow.fs as pafs

from .._configure import configure
from .._errors import StoreError, SweepError, warn
from .._import_path import is_import_path
from .._interrupt import SigtermAsCtrlC
from ..ensemble import aggregate
from ..spec import SweepSpec
from ..store import Driving, MapTasks, Store, SweepDir, aggregated_blocks, made_of
from . import _race
from ._checks import (
    check_main_paths,
    check_not_inside_a_sweep,
    check_same_data,
    outline_datasets,
    trained_configs,
)
from ._executor import Executor, Outcome, Stopped, planned_rounds
from ._options import METRIC, RunOptions, fold_options
from ._plan import check_spec
from ._policy import RoundPolicy, check_early_stopping, policy_for
from ._resumed import asked_so_far, check_ranking, check_resumed_spec, check_same_problem

__all__ = ["METRIC", "Interrupted", "run"]


class Interrupted(KeyboardInterrupt):
    """``sweep.run`` was interrupted (Ctrl-C, or a SIGTERM taken as one); the message (already
    printed) says how to resume. ``signal``: which of the two (``signal.SIGINT`` or
    ``signal.SIGTERM``; the CLI exits with 128 plus it, 130 or 143)."""

    def __init__(self, message: str, by: signal.Signals = signal.SIGINT):
        super().__init__(message)
        self.signal = by


def _resume_command(options: RunOptions, storage: str) -> str:
    """What goes on from where a run stopped: the CLI's command, or the Python call."""
    local = "executor='local', " if options.executor == "local" else ""
    return (
        options.resume_command or f"sweep.run(spec, storage={storage!r}, options=sweep.RunOptions({local}resume=True))"
    )


def _resume_hint(done: int, total: int, command: str, planned: bool) -> str:
    if not planned:
        return f"interrupted before any trial was planned (nothing is trained); start again with: {command}"
    return f"interrupted: {done} of {total} members done (the trials' checkpoints are kept); resume with: {command}"


def _aggregate_complete(spec: SweepSpec, sweep_dir: SweepDir, map_tasks: MapTasks = map) -> int:
    """Aggregate the members whose blocks are complete (their tasks run by ``map_tasks``), if the
    store does not hold them as they are yet; returns how many there are."""
    done, blocks = sweep_dir.done(spec)
    if not blocks or not done:
        return len(done)
    try:
        store = Store.open(sweep_dir.path, filesystem=sweep_dir.filesystem)
        complete = aggregated_blocks(sweep_dir, only_complete=True)
        if _race.stored(store.manifest, sweep_dir.plan()) and made_of(store, complete):
            return len(done)
    except SweepError:
        pass  # no store yet, or not a readable one: build it
    aggregate(sweep_dir, only_complete=True, map_tasks=map_tasks, trust_code=_own_factories(spec))
    return len(done)


def run(
    spec: SweepSpec,
    storage: str = "./runs",
    storage_filesystem: pafs.FileSystem | None = None,
    options: RunOptions | None = None,
    **keywords: Any,
) -> str:
    """Train every member of ``spec``, round by round, then aggregate the store.

    A round policy decides what to train next: every member not trained yet (``seeds=N``, one
    round), or the adaptive race's next round (``seeds=sweep.Adaptive(...)``, until the race is
    over); an executor trains each round (:attr:`sweep.RunOptions.executor`): as Ray Tune trials
    (``"tune"``, the default) or one block after another in this process (``"local"``, no Ray).

    ``<storage>/<spec.name>`` holds ``plan.json``, the block checkpoints (one Tune experiment
    ``tune-NNNN`` per run for all its rounds, whose trials the rounds add as they come, or one per
    wave of more than 1,000 trials, so that the driver holds Tune's records of one wave at a time;
    ``local/`` for the local executor) and the
    aggregated store. Before any trial starts: the spec and every option are checked, every
    dataset is outlined once (:func:`sweep.problems.outline_problem`: a generated problem is
    generated, its arrays and the batch size checked; a problem that reads files (``"hdf5"``)
    only has its metadata read, its driver's pass made (the normalisation statistics, every
    split checked finite; kept in ``data_scans.json`` for later runs on unchanged files) and the
    rows the sweep keeps read, and its trials read the files) and every config's model is built for its data's shapes
    (``eqx.filter_eval_shape``); the Tune executor then checks the resources against the cluster,
    probes the storage for writing and puts the datasets (or, for files, the problem's options) in
    the object store. The plan and the first test samples of each problem (``samples.parquet``, what
    ``sweep plot`` draws from) are written before each round. Members already trained to
    completion (or stopped by a scheduler) are not trained again, so a larger ``seeds`` trains
    only the new ones; a trial with a partial checkpoint of the same key continues from it. When
    every member is trained already, ``run`` says so and returns without starting Ray. Without
    a ``tune_config``, Tune reuses trial worker processes across trials with the same resources
    (``reuse_actors=True``), so JAX, the compiled programs and the dataset are set up once per
    worker. The driver process is :func:`sweep.configure`-d (with ``gpu_preallocate=False``).
    After the rounds, the store is aggregated (:func:`sweep.aggregate`; by Ray tasks in parallel
    with the Tune executor: :class:`sweep.tune.RayTasks`).

    Ctrl-C (SIGINT) stops the trials, keeps every checkpoint, aggregates the complete blocks,
    prints how many members are done and how to resume, and raises :class:`sweep.tune.Interrupted`
    (a ``KeyboardInterrupt``); a second Ctrl-C stops at once. A SIGTERM to this process (Slurm,
    Kubernetes) does the same while ``run`` runs (called from the main thread); where it stopped
    the Ray this process started too, the process prints how to resume and ends at once (143).

    Args:
        spec: The sweep specification.
        storage: Where sweeps are stored: any path pyarrow understands (local, NFS, ``s3://...``).
        storage_filesystem: A ``pyarrow.fs.FileSystem`` for ``storage`` (as in Tune's ``RunConfig``);
            an ``"hdf5"`` problem's ``s3://`` files are read through it too (or through the one
            ``storage`` resolves to) where it is an ``S3FileSystem``, on the driver and in the trials.
        options: A :class:`sweep.RunOptions`: the executor, Ray's address, ``resume``, Tune's
            settings, trackers, the display (default: ``sweep.RunOptions()``).
        **keywords: The fields of :class:`sweep.RunOptions` may also be given one by one, as
            ``sweep.run``'s older signature took them (``resume=True``, ``address="auto"``, ...).

    Returns:
        The sweep directory, ``<storage>/<spec.name>``.

    Raises:
        SpecError: The spec, its data, its models, its resources, the storage or an option are
            unusable (before any trial starts); a keyword argument that is no field of
            :class:`sweep.RunOptions` is named, with the Tune config that holds it if one does.
        SweepError: Trials failed (the first failure's message is in it; finished blocks are kept).
        sweep.tune.Interrupted: Ctrl-C.

    Examples:
        ```python
        path = sweep.run(spec, storage="./runs")
        path = sweep.run(spec, storage="s3://bucket/runs", options=sweep.RunOptions(address="auto"))
        path = sweep.run(spec, storage="./runs", options=sweep.RunOptions(resume=True))
        path = sweep.run(spec, storage="./runs", options=sweep.RunOptions(executor="local"))
        ```
    """
    options = fold_options(options, keywords)
    lost = (
        "stopped: the Ray this run started lost its raylet or GCS (a SIGTERM to every process reached them too, "
        "or they were killed), so the trials ended where they were (their checkpoints are kept); resume with: "
        f"{_resume_command(options, str(storage))}"
    )
    with SigtermAsCtrlC(lost) as sigterm, contextlib.ExitStack() as ends:
        return _run(spec, storage, storage_filesystem, options, sigterm, ends)


def _run(
    spec: SweepSpec,
    storage: str,
    storage_filesystem: pafs.FileSystem | None,
    options: RunOptions,
    sigterm: SigtermAsCtrlC,
    ends: contextlib.ExitStack,
) -> str:
    """:func:`run`, a SIGTERM taken as a Ctrl-C; ``ends`` closes what the run holds when it
    ends (``driver.json``)."""
    from ._loggers import make_loggers
    from ._progress import ProgressState
    from ._sweep_progress import SweepProgress

    # check: nothing starts before the spec and every option are known to be good
    check_spec(spec)
    configure(gpu_preallocate=False)  # the driver's JAX (data generation) must not take the trials' GPU memory
    sweep_dir = SweepDir.of(spec, storage, storage_filesystem)
    check_not_inside_a_sweep(sweep_dir)
    driving = ends.enter_context(Driving(sweep_dir))  # (refused while another run on this machine drives it)
    sigterm.closes(driving.release)  # (a SIGTERM's exit at once skips the ends)
    so_far = spec if spec.search is None else asked_so_far(spec, sweep_dir)  # a search's asked by earlier calls
    done, blocks = sweep_dir.done(so_far)
    if options.resume:  # first: its message names the --set that resumes as it ran
        check_resumed_spec(spec, sweep_dir)
    check_same_problem(spec, sweep_dir)
    if spec.search is not None or spec.adaptive is not None:  # it goes on from its record, resumed or not
        check_ranking(spec, sweep_dir)
    state = ProgressState(so_far, (), done)
    mode = "plain" if options.verbose and options.progress == "auto" else options.progress
    display = SweepProgress(state, mode)
    sigterm.closes(functools.partial(display.close, stopped=True))
    check_early_stopping(spec, options.the_scheduler, options.run_config)
    policy = policy_for(
        spec, show=lambda step: _race.show(state, spec, step), say=lambda line: state.show_race({}, line)
    )
    rounds = iter(policy.rounds(spec, sweep_dir))
    first = list(itertools.islice(rounds, 1))  # what the policy wants first, if anything
    if not first:
        _aggregate_complete(so_far, sweep_dir)
        display.message(f"nothing to train: {len(done)} members already in {sweep_dir.shown}")
        _say_result(policy, spec, sweep_dir, display)
        return sweep_dir.shown
    trackers = make_loggers(options.loggers, spec, sweep_dir.shown)  # unknown names fail here, before Ray starts
    executor: Executor | None = None
    stop: KeyboardInterrupt | None = None
    trained = False  # the rounds ended: anything else (a stop, an error) leaves the trials stopped
    try:
        scans = sweep_dir.data_scans()
        check_main_paths(spec, in_process=options.executor == "local")  # (before Ray starts)
        outlines = outline_datasets(spec, sweep_dir.filesystem, scans)  # bad data fails here
        check_same_data(so_far, scans, outlines, trained_configs(done, blocks))
        validated = all(outline.shapes.val.size for outline in outlines.values())
        state.rank_on_validation(validated)
        state.restore(blocks.values(), done)  # the losses of the members trained before, beside this call's
        options.check_scheduler_metric(validated)
        executor = _executor(spec, sweep_dir, options, display, trackers, validated)
        executor.start(outlines)  # (the storage probed for writing)
        sweep_dir.write_data_scans({key: o.scan for key, o in outlines.items() if o.scan is not None})
        sweep_dir.write_resume_command(options.resume_command)  # what `sweep status` says to run
        restored = executor.restore() if options.resume else Outcome()
        sweep_dir.record_stopped(restored.stopped)
        failures = restored.failures
        sweep_dir.refresh()  # the restored trials wrote checkpoints
        if not failures:
            samples = {key: o.kept for key, o in outlines.items()}
            block_size = functools.partial(executor.block_size, spec)
            planned = planned_rounds(
                itertools.chain(first, rounds), spec, sweep_dir, block_size, samples, state.add_configurations
            )
            failures = executor.train(planned).failures
        trained = True
    except KeyboardInterrupt as e:
        stop = e
    finally:
        display.close(stopped=not trained)
        for tracker in trackers:
            tracker.close()
    if stop is not None:
        c = state.counts()
        done_now = c["members_done"]
        if isinstance(stop, Stopped):  # the executor stopped the trials and kept their checkpoints
            sweep_dir.record_stopped(stop.early)
            sweep_dir.refresh()  # what is done is what the checkpoints say (a trial may finish as it stops)
            with warnings.catch_warnings():  # the hint says how many members are missing
                warnings.simplefilter("ignore", UserWarning)
                asked = spec if spec.search is None else asked_so_far(spec, sweep_dir)  # with this call's points
                done_now = _aggregate_complete(asked, sweep_dir, executor.map_tasks if executor else map)
        planned = sweep_dir.plan() is not None
        display.message(hint := _resume_hint(done_now, c["members"], _resume_command(options, str(storage)), planned))
        raise Interrupted(
            hint, sigterm.stopped_by()
        ) from None  # (a second Ctrl-C, or one before the trials, stops at once)
    assert executor is not None  # made in the try above, which ended normally
    try:
        _aggregate(spec, sweep_dir, executor, failures)
    except KeyboardInterrupt:  # the members are trained: the store is the one step left
        trust = " --trust-code" if _own_factories(spec) else ""
        hint = (
            f"interrupted while aggregating the trained members; aggregate them with: sweep aggregate "
            f"{shlex.quote(sweep_dir.shown)}{trust}"
        )
        display.message(hint)
        raise Interrupted(hint, sigterm.stopped_by()) from None
    _say_result(policy, spec, sweep_dir, display)
    for text in (h for t in trackers if not getattr(t, "off", False) and (h := t.hint())):
        display.message(text)
    return sweep_dir.shown


def _executor(spec: SweepSpec, sweep_dir: SweepDir, options: RunOptions, display, trackers, validated) -> Executor:
    """The executor :attr:`RunOptions.executor` names."""
    if options.executor == "local":
        from ._local import LocalExecutor

        return LocalExecutor(spec, sweep_dir, options, display, trackers)
    from ._tune_executor import TuneExecutor

    return TuneExecutor(spec, sweep_dir, options, display, trackers, validated)


def _say_result(policy: RoundPolicy, spec: SweepSpec, sweep_dir: SweepDir, display) -> None:
    """Print what the policy decided (nothing for fixed seeds)."""
    text = policy.result(spec, sweep_dir, lambda key: display.state.label(*key))
    if text:
        display.message(text, wrap=True)


def _say_diverged(sweep_dir: SweepDir) -> None:
    """A warning where members of the store diverged (a NaN or infinite loss)."""
    try:
        status = Store.open(sweep_dir.path, filesystem=sweep_dir.filesystem).members(columns=["status"])["status"]
    except StoreError:
        return  # (no store: every trial failed before its first checkpoint, said after this)
    diverged = status.to_pylist().count("diverged")
    if diverged:
        warn(
            f"{diverged} of {len(status)} members diverged (a NaN or infinite loss: each kept its last finite "
            f"weights and ranks last); `sweep show {sweep_dir.shown}` counts them per configuration: a lower "
            f"learning rate may keep them finite"
        )


def _own_factories(spec: SweepSpec) -> frozenset[str]:
    """The model factories the user's spec names (their code, which the run imports anyway): those
    an aggregation of the run trusts; a factory only a checkpoint in the directory names is
    refused, as by `sweep aggregate`."""
    searched = spec.search.space.get("model.name") if spec.search is not None else None
    names = [c.model.name for c, _ in spec.expand()] + list(searched.args if searched is not None else ())
    return frozenset(name for name in names if is_import_path(name))


def _aggregate(spec: SweepSpec, sweep_dir: SweepDir, executor: Executor, failures: tuple[str, ...]) -> None:
    """Aggregate the store; then say which trials failed, if any did."""
    try:
        aggregate(sweep_dir, map_tasks=executor.map_tasks, trust_code=_own_factories(spec))
    except StoreError:
        if not failures:  # every trial failed before its first checkpoint: say that, below
            raise
    _say_diverged(sweep_dir)
    if failures:
        raise SweepError(
            f"{len(failures)} trial(s) of sweep {spec.name!r} failed (first: {failures[0]}); finished blocks "
            f"are in {sweep_dir.shown!r}; run `sweep run SPEC --resume` (Python: sweep.run(..., "
            f"options=sweep.RunOptions(resume=True))) to retry them"
        )
