"""The Ray Tune executor (``RunOptions(executor="tune")``, the default): every trial of a round
is a Tune trial; the rounds run in one experiment, its trials asked of the loop round by round
(:mod:`._round_searcher`), so that the trial worker processes serve every round; a run of more
than a wave's trials runs as several experiments (:mod:`._waves`); ``restore`` fits the latest
experiment again (``resume=True``)."""

from __future__ import annotations

import gc
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow.fs as pafs

from ..planning import TrialPlan
from ..problems import Outline
from ..spec import SweepSpec
from ..store import SweepDir
from ._cadence import Cadence, cadence
from ._checks import check_resources, check_worker_imports, check_writable
from ._cluster import alive_nodes, ensure_ray, trial_slots
from ._executor import Outcome, Round, RoundStream, Stopped
from ._experiment import fit_experiment
from ._options import RunOptions
from ._plan import measured_block_size
from ._ray_tasks import RayTasks
from ._relay import Relay
from ._round_searcher import LiveRounds, feeding
from ._trainable import TrialInputs
from ._tuner import tuner
from ._waves import room_for, waves

__all__ = ["TuneExecutor", "plan_board"]


_BOARDS: dict[tuple[str, str], Any] = {}  # the plan board's handle, by this process's node and Ray job (job_key)


def job_key() -> tuple[str, str]:
    """This driver's node and Ray job (a job id alone repeats: each new cluster counts from 1)."""
    import ray

    context = ray.get_runtime_context()
    return context.get_node_id(), context.get_job_id()


def plan_board():
    """The actor that holds, for each run of this process, its trials' plans (``{trial_key:
    {"plan": ..., "resume_from": ...}}``, filled round by round as the rounds come: the trainable
    cannot carry them, Tune fixes its parameters when the experiment starts) and the refs of its
    datasets in the object store (``{problem_id: ref}``: Tune's ``with_parameters`` keeps what it
    is given for as long as the process runs, which would pin every run's data). One per driver process and
    Ray job (an actor costs a worker process): the first run makes it and this module keeps its
    handle (an actor goes when no handle to it is left), so that every later run of the job finds
    it; each run has its own entry, dropped when its executor goes. Its class is made here, so that
    Ray sends it by value and its process imports neither JAX nor seed-sweep; it lives on this
    process's node (a lost worker node must not take it along) and ends with the job."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    class PlanBoard:
        def __init__(self):
            self.runs: dict[str, dict[str, dict]] = {}
            self.data: dict[str, dict[str, Any]] = {}

        def update(self, run: str, tasks: dict[str, dict]) -> None:
            self.runs.setdefault(run, {}).update(tasks)

        def put_data(self, run: str, refs: dict[str, Any]) -> None:
            self.data[run] = refs  # refs inside a dict stay refs: the board holds them, not the data

        def get(self, run: str, key: str) -> tuple[dict | None, dict[str, Any]]:
            """A trial's task and the refs of its run's datasets, in one call."""
            return self.runs.get(run, {}).get(key), self.data[run]

        def drop(self, run: str) -> None:
            self.runs.pop(run, None)
            self.data.pop(run, None)

        def held(self) -> list[str]:
            """The runs whose plans or data it holds."""
            return sorted({*self.runs, *self.data})

    key = job_key()
    if key not in _BOARDS:
        _BOARDS.clear()  # a board of an earlier job (before ``ray.shutdown``) ended with it
        node, job = key
        here = NodeAffinitySchedulingStrategy(node, soft=False)
        options = {"name": f"seed-sweep-plan-board-{job}", "get_if_exists": True, "scheduling_strategy": here}
        _BOARDS[key] = ray.remote(num_cpus=0)(PlanBoard).options(**options).remote()
    return _BOARDS[key]


def _drop_run(board, run: str, job: tuple[str, str]) -> None:
    """Drop the entry of the run ``run`` from the plan board of ``job`` (:func:`job_key`), if that
    job still runs in this process (not after ``ray.shutdown``, nor at exit)."""
    import ray

    if ray.is_initialized() and job_key() == job:
        board.drop.remote(run)


def trial_function():
    """The function each trial runs (given its inputs by ``tune.with_parameters``), made here so that
    Ray sends it by value: it imports seed-sweep, and JAX, when its trial starts, not when Tune
    constructs the trial's process (see :func:`~._preemption.preemptible`)."""

    def trial(config, inputs):
        from sweep.tune._trainable import train_trial

        return train_trial(config, inputs=inputs)

    return trial


class TuneExecutor:
    """Trains rounds as Ray Tune experiments in the sweep directory, with ``listeners`` (the
    display first, then the trackers) behind every experiment's :class:`~._relay.Relay`."""

    def __init__(
        self, spec: SweepSpec, sweep_dir: SweepDir, options: RunOptions, display, trackers: list, validated: bool
    ):
        self.spec, self.sweep_dir, self.options = spec, sweep_dir, options
        self.display, self.trackers = display, trackers
        self.listeners = [display, *trackers]  # the display first
        self.validated = validated
        self.map_tasks = RayTasks(address=options.address)  # the aggregation's tasks: Ray tasks, in parallel
        self.data_refs: dict = {}
        self.shapes: dict = {}
        self.nodes: list = []
        self.slots = 1
        self.pace: Cadence | None = None
        self.board: Any = None  # an actor that holds each trial's plan (:func:`plan_board`)
        self.run = uuid.uuid4().hex  # this run's entry on the board
        self.trainable: Any = None

    @property
    def ray_fs(self) -> pafs.FileSystem | None:
        """The filesystem Tune gets (None: the local disk)."""
        fs = self.sweep_dir.filesystem
        return None if isinstance(fs, pafs.LocalFileSystem) else fs

    def start(self, outlines: Mapping[str, Outline]) -> None:
        """Start Ray, check the storage and the cluster, put how trials get each problem's data
        into the object store: its arrays, or (a problem that reads files) its options, from which
        each trial worker reads the files (:class:`sweep.problems.ProblemData`)."""
        import ray  # here: not in both threads at once

        sweep_dir, options = self.sweep_dir, self.options
        self.display.starting("starting Ray and the first trial's worker")
        # Ray must start on this thread (its daemons die with the thread that started them); while
        # ``ray.init`` waits for them (~2.5 s on a laptop), a helper thread checks the storage. The
        # data were generated before, on this thread alone: ``ray.init`` forks its daemons, and a
        # fork during a multithreaded OpenBLAS call on another thread leaves that call waiting
        # forever for BLAS threads the fork handler stopped.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sweep-prepare") as pool:
            prepared = pool.submit(check_writable, sweep_dir.filesystem, sweep_dir.path, sweep_dir.shown)
            ensure_ray(options.address, quiet=options.quiet)
            prepared.result()
        self.nodes = alive_nodes()
        check_resources(self.spec.resources, self.nodes)
        if options.address is not None:  # a cluster: its workers may not import what this process does
            check_worker_imports(self.spec)
        self.slots = trial_slots(self.spec.resources, self.nodes)
        if options.max_concurrent_trials:
            self.slots = min(self.slots, int(options.max_concurrent_trials))
        self.pace = cadence(options.checkpoint_every, self.slots, sweep_dir.filesystem)
        self.data_refs = {key: ray.put(outline.data) for key, outline in outlines.items()}
        self.shapes = {key: outline.shapes for key, outline in outlines.items()}
        self.board = plan_board()
        ray.get(self.board.put_data.remote(self.run, self.data_refs))
        weakref.finalize(self, _drop_run, self.board, self.run, job_key()).atexit = False
        self.trainable = self._trainable()
        self.display.start()

    def block_size(self, spec: SweepSpec) -> int:
        """Measured in a Ray task with a trial's resources, for the cluster's slots."""
        return measured_block_size(spec, self.shapes, self.data_refs, self.nodes)

    def _trainable(self):
        """The trial function: its inputs in the object store, each trial's plan on :attr:`board`
        (fetched by the trial itself, a round's plans put there as the round starts)."""
        from ray import tune

        from ._preemption import preemptible

        assert self.pace is not None  # set by start()
        inputs = TrialInputs((self.board, self.run), self.ray_fs, self.options.trial_hooks, self.pace)
        resources = self.spec.resources
        return tune.with_resources(
            preemptible(tune.with_parameters(trial_function(), inputs=inputs)),
            {"cpu": resources["cpu"], "gpu": resources["gpu"]},
        )

    def _publish(self, trials: Sequence[TrialPlan], resume_from: Mapping[str, str]) -> None:
        """Put each trial's plan, and the partial checkpoint it continues from, on the board."""
        import ray

        tasks = {t.trial_key: {"plan": t.to_dict(), "resume_from": resume_from.get(t.trial_key)} for t in trials}
        ray.get(self.board.update.remote(self.run, tasks))

    def _fit(self, make_tuner, trials: Callable[[], Sequence[TrialPlan]], live: LiveRounds | None) -> Outcome:
        with feeding(live):
            stopped, failures, interrupted = fit_experiment(
                make_tuner, trials, self.listeners, quiet=self.options.quiet, slots=self.slots
            )
        if interrupted:
            raise Stopped(frozenset(stopped))
        return Outcome(frozenset(stopped), tuple(failures))

    def restore(self) -> Outcome:
        """Fit the latest Tune experiment again (errored trials resumed from their checkpoints)."""
        from ray import tune

        sweep_dir, stored = self.sweep_dir, self.sweep_dir.plan()
        names = sweep_dir.experiments() if stored is not None else []
        if stored is None or not names:
            return Outcome()
        exp_path = f"{sweep_dir.path}/{names[-1]}"
        if not tune.Tuner.can_restore(exp_path, storage_filesystem=self.ray_fs):
            return Outcome()
        done, _ = sweep_dir.done(stored.spec)  # the experiment's own trials: this run's spec may add others
        left = [
            t
            for t in stored.trials
            if t.trial_key not in stored.stopped_trials and any(m not in done for m in t.member_ids())
        ]
        for tracker in self.trackers:
            tracker.add(stored.trials)
        self.display.state.add(left)
        self._publish(stored.trials, {})  # restored trials continue from their Tune checkpoints
        # the restored experiment keeps its callbacks, among them the relay to this call's display
        return self._fit(
            lambda: tune.Tuner.restore(
                exp_path,
                trainable=self.trainable,
                resume_errored=True,
                restart_errored=False,
                storage_filesystem=self.ray_fs,
            ),
            lambda: left,
            None,  # its searcher suggests nothing new
        )

    def train(self, rounds: RoundStream) -> Outcome:
        """The rounds in one experiment (:mod:`._round_searcher`), or in waves of experiments of
        at most a wave's trials each (:mod:`._waves`)."""
        live = LiveRounds(
            rounds,
            self._start_round,
            parts=lambda trials: waves(trials, self.options, self.slots),
            room=lambda: room_for(self.options, self.slots),
        )
        failures: tuple[str, ...] = ()
        while live.left:
            live.open()
            outcome = self._fit(
                lambda: tuner(self.options, self.trainable, self.sweep_dir, self.validated, [Relay()]),
                lambda: list(live.trials.values()),
                live,
            )
            failures += outcome.failures
            gc.collect()  # the experiment's Tune records (cycles among them) go before the next one starts
        if live.error is not None:
            raise live.error
        return Outcome(frozenset(), failures)

    def _start_round(self, round: Round) -> None:
        for tracker in self.trackers:
            tracker.add(round.trials)
        self.display.state.add(round.trials)  # the display counts every trial, whichever wave it is in
        self._publish(round.trials, round.resume_from)
