"""Round policies: what a run trains next, apart from how it is trained (:mod:`._executor`).

``sweep.run`` is one loop::

    rounds = (plan_round(planned, ...) for planned, wanted in policy.rounds(spec, sweep_dir))
    executor.train(rounds)  # each round's outcome sent back before the next is planned

A policy is an object with two methods:

- ``rounds(spec, sweep_dir)``: an iterator of :class:`NextRound`: the spec to plan from
  (``spec`` itself, or a search's with the points it has proposed) and the *wanted* set, the
  seeds to train next per configuration (``{(config_id, hparams_key): (seed, ...)}``), or
  ``None`` for every member of the spec. The loop trains each round to completion (or stops) and refreshes ``sweep_dir``
  before it asks for the next one, so a policy reads what the round trained from the sweep
  directory (:meth:`sweep.store.SweepDir.done`, its checkpoints), never from the executor. The
  iterator ends when nothing is left to train; it must decide from what the sweep directory
  holds (and record what it decides there), so that a run killed at any point and resumed takes
  the same rounds.
- ``result(spec, sweep_dir, label)``: one line that says what the rounds decided, printed at the
  end (``None``: nothing to say); ``label`` turns a configuration key into its grid values.

:class:`FixedSeeds` is a policy of one round (``seeds=N``); :class:`RaceRounds` is the adaptive
race (``seeds=sweep.Adaptive(...)``: :mod:`sweep.racing`'s rules, :mod:`._race`'s steps);
:class:`sweep.search.SearchRounds` is a search (``search=sweep.Search(...)``): it yields the
configurations it proposes and the seeds to train them with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

from .._errors import SpecError, SweepError
from ..planning import NextRound, Wanted, make_plan
from ..racing import Key
from ..spec import SweepSpec
from ..store import SweepDir
from . import _race
from ._plan import stored_block_size

__all__ = ["FixedSeeds", "NextRound", "RaceRounds", "RoundPolicy", "Wanted", "check_early_stopping", "policy_for"]


class RoundPolicy(Protocol):
    """What to train next (see the module's docstring)."""

    def rounds(self, spec: SweepSpec, sweep_dir: SweepDir) -> Iterator[NextRound]: ...

    def result(self, spec: SweepSpec, sweep_dir: SweepDir, label: Callable[[Key], str]) -> str | None: ...


class FixedSeeds:
    """``seeds=N`` (or a list): one round of every member not trained yet, if there is one."""

    def rounds(self, spec: SweepSpec, sweep_dir: SweepDir) -> Iterator[NextRound]:
        done, _ = sweep_dir.done(spec)
        if make_plan(spec, stored_block_size(spec, sweep_dir.plan()) or 10**9, done=done).trials:
            yield NextRound(spec, None)

    def result(self, spec: SweepSpec, sweep_dir: SweepDir, label: Callable[[Key], str]) -> str | None:
        return None


class RaceRounds:
    """The adaptive race: after each round, evaluate every round trained (each evaluation
    recorded in ``plan.json``), then train the next round of the configurations still racing,
    until the race is over. ``show`` gets every step (the live display's race table)."""

    def __init__(self, show: Callable[[_race.RaceStep], Any] = lambda step: None):
        self.show = show

    def rounds(self, spec: SweepSpec, sweep_dir: SweepDir) -> Iterator[NextRound]:
        before = None
        while True:
            step = _race.advance(spec, sweep_dir)
            self.show(step)
            if not step.wanted:
                return
            if step.wanted == before:
                raise SweepError(f"sweep {spec.name!r}: the race's round {step.wanted} was trained but is not complete")
            yield NextRound(spec, step.wanted)
            before = step.wanted

    def result(self, spec: SweepSpec, sweep_dir: SweepDir, label: Callable[[Key], str]) -> str | None:
        return _race.result(spec, _race.advance(spec, sweep_dir, record=False), label)


def check_early_stopping(spec: SweepSpec, scheduler: Any, run_config: Any) -> None:
    """A race or a search compares members trained to their last epoch: refuse, before any work,
    what stops trials early (a Tune scheduler, ``run_config.stop``)."""
    if spec.adaptive is not None:
        why = (
            "with adaptive seeds the race decides which configurations train on, and it compares members "
            "trained for every epoch; a trial stopped early would enter the comparison half-trained"
        )
        instead, leave = "Race without a scheduler, or use the scheduler with fixed seeds (seeds=N)", "a race"
    elif spec.search is not None:
        why = (
            "a search observes each configuration as its block of seeds trained for every epoch; a trial "
            "stopped early would leave its configuration unobserved"
        )
        instead, leave = "Search without a scheduler, or use the scheduler on a grid", "a search"
    else:
        return
    if scheduler is not None:
        raise SpecError(f"`scheduler`: got {type(scheduler).__name__}; {why}. {instead}")
    stop = getattr(run_config, "stop", None)
    if stop:
        raise SpecError(f"`run_config.stop`: got {stop!r}; {why}. Leave `stop` out of {leave}")


def policy_for(
    spec: SweepSpec,
    show: Callable[[_race.RaceStep], Any] = lambda step: None,
    say: Callable[[str], Any] = lambda line: None,
) -> RoundPolicy:
    """The policy of ``spec``: :class:`sweep.search.SearchRounds` with a :class:`sweep.Search`
    (``say`` gets its headline after each round), :class:`RaceRounds` with adaptive seeds (``show``
    gets each step), else :class:`FixedSeeds`."""
    if spec.search is not None:
        from ..search import SearchRounds

        return SearchRounds(spec.search, say)
    return FixedSeeds() if spec.adaptive is None else RaceRounds(show)
