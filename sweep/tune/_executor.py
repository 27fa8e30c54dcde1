"""Executors: how rounds are trained, apart from what they hold (:mod:`._policy`).

An executor takes the loop's rounds as a :data:`RoundStream`: a generator that yields each
:class:`Round` (the trials to train, and the partial checkpoint each may continue from) and is
sent the round's :class:`Outcome` when every trial of it is over, before it plans the next
(:func:`next_round`). Each trial writes its block checkpoints into the sweep directory, where
the next round's policy and the aggregator find them (:meth:`sweep.store.SweepDir.done`). Two
exist, chosen by :attr:`sweep.RunOptions.executor`:

- ``"tune"`` (:class:`~._tune_executor.TuneExecutor`): every trial a Ray Tune trial, the rounds
  in one Tune experiment (:mod:`._round_searcher`; waves of experiments ``tune-NNNN`` for many
  trials), restore, preemption, placement on a cluster, trackers;
- ``"local"`` (:class:`~._local.LocalExecutor`): the trials one after another in this process,
  checkpoints under ``<sweep>/local/``; no Ray is started.

Both train with the same program, so the store they lead to is the same, bit for bit on CPU.
An executor's methods, in the order the loop calls them: ``start(outlines)`` (every problem's
:class:`~sweep.problems.Outline`: how its trials get its data), ``block_size(spec)`` (for
``seeds_per_trial="auto"``), ``restore()`` (``resume=True``),
``train(rounds)``. ``map_tasks`` is how the aggregation after the rounds runs its
tasks (:func:`sweep.aggregate`): ``map`` here, Ray tasks on Ray. ``train`` and ``restore``
return an :class:`Outcome` and raise :class:`Stopped` when a Ctrl-C stopped the trials.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator, Iterable, Mapping
from typing import Any, Protocol, TypeAlias

from ..planning import Plan, TrialPlan, make_plan, merge_plans
from ..problems import Outline
from ..spec import SweepSpec
from ..store import MapTasks, SweepDir
from ._plan import stored_block_size
from ._policy import NextRound, Wanted

__all__ = ["Executor", "Outcome", "Round", "RoundStream", "Stopped", "next_round", "plan_round", "planned_rounds"]


class Stopped(KeyboardInterrupt):
    """A Ctrl-C stopped the trials of a round; every checkpoint they wrote is kept. ``early``: the
    trials a scheduler had stopped early before (over, as far as the sweep goes)."""

    def __init__(self, early: frozenset[str] = frozenset()):
        super().__init__()
        self.early = early


@dataclasses.dataclass(frozen=True)
class Round:
    """The trials of a round not trained yet, and the partial checkpoint (a path in the sweep
    directory) each continues from, by trial key."""

    trials: tuple[TrialPlan, ...]
    resume_from: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What came of a round: the trials a scheduler stopped early, and a message per failed trial."""

    stopped: frozenset[str] = frozenset()
    failures: tuple[str, ...] = ()


RoundStream: TypeAlias = Generator[Round, Outcome, None]
"""The loop's rounds: each yielded, each one's outcome sent back before the next is planned."""


def next_round(rounds: RoundStream, outcome: Outcome | None) -> Round | None:
    """The round after the one that came to ``outcome`` (``None``: the first), or ``None`` when
    the loop has nothing more to train."""
    try:
        return next(rounds) if outcome is None else rounds.send(outcome)
    except StopIteration:
        return None


class Executor(Protocol):
    """How rounds are trained (see the module's docstring)."""

    @property
    def map_tasks(self) -> MapTasks: ...

    def start(self, outlines: Mapping[str, Outline]) -> None: ...

    def block_size(self, spec: SweepSpec) -> int: ...

    def restore(self) -> Outcome: ...

    def train(self, rounds: RoundStream) -> Outcome: ...


def plan_round(spec: SweepSpec, sweep_dir: SweepDir, wanted: Wanted, block_size) -> tuple[Plan, Round]:
    """The plan of the sweep with the round ``wanted`` added (what ``plan.json`` is to hold), and
    the round: its trials without a complete checkpoint. ``block_size()`` is called for a new
    ``seeds_per_trial="auto"`` sweep only (an earlier run's size is kept)."""
    stored = sweep_dir.plan()
    done, blocks = sweep_dir.done(spec)
    unfinished = sweep_dir.unfinished(spec)
    seeds_per_trial = stored_block_size(spec, stored)
    if spec.seeds_per_trial == "auto" and seeds_per_trial is None:
        seeds_per_trial = block_size()
    new = make_plan(spec, seeds_per_trial, done=done, wanted=wanted, unfinished=unfinished)
    resume_from = {t.trial_key: blocks[t.trial_key].path for t in new.trials if t.trial_key in blocks}
    return merge_plans(stored, new), Round(tuple(new.trials), resume_from)


def planned_rounds(
    rounds: Iterable[NextRound],
    spec: SweepSpec,
    sweep_dir: SweepDir,
    block_size: Callable[[], int],
    samples: Mapping[str, Any],
    learn: Callable[[SweepSpec, set], Any],
) -> RoundStream:
    """The policy's ``rounds``, planned (:func:`plan_round`): each round's plan written (and the
    test ``samples`` the aggregator keeps), its trials yielded to the executor, its outcome
    recorded; the rounds end with one in which a trial failed. ``learn(planned, done)`` is told
    the spec of a round planned from another spec than ``spec`` (a search's, with the points it
    proposed)."""
    for planned, wanted in rounds:
        if planned is not spec:
            learn(planned, sweep_dir.done(planned)[0])
        plan, round = plan_round(planned, sweep_dir, wanted, block_size)
        sweep_dir.write_plan(plan)
        sweep_dir.write_samples(samples)  # the aggregator never loads data
        outcome = (yield round) if round.trials else Outcome()  # a restore may have trained it
        sweep_dir.record_stopped(outcome.stopped)  # by a scheduler: done, as far as this sweep goes
        sweep_dir.refresh()  # the trials wrote checkpoints: list them (each block.json read once)
        if outcome.failures:
            return
