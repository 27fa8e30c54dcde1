"""Executors: how a round is trained, apart from what it holds (:mod:`._policy`).

An executor takes a :class:`Round` (the trials to train, and the partial checkpoint each may
continue from) and trains every trial of it, each trial writing its block checkpoints into the
sweep directory, where the next round's policy and the aggregator find them
(:meth:`sweep.store.SweepDir.done`). Two exist, chosen by :attr:`sweep.RunOptions.executor`:

- ``"tune"`` (:class:`~._tune_executor.TuneExecutor`): every trial a Ray Tune trial, waves of
  Tune experiments ``tune-NNNN``, restore, preemption, placement on a cluster, trackers;
- ``"local"`` (:class:`~._local.LocalExecutor`): the trials one after another in this process,
  checkpoints under ``<sweep>/local/``; no Ray is started.

Both train with the same program, so the store they lead to is the same, bit for bit on CPU.
An executor's methods, in the order the loop calls them: ``start(outlines)`` (every problem's
:class:`~sweep.problems.Outline`: how its trials get its data), ``block_size(spec)`` (for
``seeds_per_trial="auto"``), ``restore()`` (``resume=True``),
``train(round)`` per round. ``map_tasks`` is how the aggregation after the rounds runs its
tasks (:func:`sweep.aggregate`): ``map`` here, Ray tasks on Ray. ``train`` and ``restore``
return an :class:`Outcome` and raise :class:`Stopped` when a Ctrl-C stopped the trials.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Protocol

from ..planning import Plan, TrialPlan, make_plan, merge_plans
from ..problems import Outline
from ..spec import SweepSpec
from ..store import MapTasks, SweepDir
from ._plan import stored_block_size
from ._policy import Wanted

__all__ = ["Executor", "Outcome", "Round", "Stopped", "plan_round"]


class Stopped(KeyboardInterrupt):
    """A Ctrl-C stopped the trials of a round; every checkpoint they wrote is kept."""


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


class Executor(Protocol):
    """How rounds are trained (see the module's docstring)."""

    @property
    def map_tasks(self) -> MapTasks: ...

    def start(self, outlines: Mapping[str, Outline]) -> None: ...

    def block_size(self, spec: SweepSpec) -> int: ...

    def restore(self) -> Outcome: ...

    def train(self, round: Round) -> Outcome: ...


def plan_round(spec: SweepSpec, sweep_dir: SweepDir, wanted: Wanted, block_size) -> tuple[Plan, Round]:
    """The plan of the sweep with the round ``wanted`` added (what ``plan.json`` is to hold), and
    the round: its trials without a complete checkpoint. ``block_size()`` is called for a new
    ``seeds_per_trial="auto"`` sweep only (an earlier run's size is kept)."""
    stored = sweep_dir.plan()
    done, blocks = sweep_dir.done(spec)
    seeds_per_trial = stored_block_size(spec, stored)
    if spec.seeds_per_trial == "auto" and seeds_per_trial is None:
        seeds_per_trial = block_size()
    new = make_plan(spec, seeds_per_trial, done=done, wanted=wanted)
    resume_from = {t.trial_key: blocks[t.trial_key].path for t in new.trials if t.trial_key in blocks}
    return merge_plans(stored, new), Round(tuple(new.trials), resume_from)
