"""Many rounds in one Tune experiment: a Tune ``Searcher`` that asks the run loop for its next round.

Every Tune experiment starts its trial worker processes anew (each imports JAX and seed-sweep,
~2 s, then compiles its programs), so a race whose every round was an experiment of its own
spent ~6 s per round before its first trial trained, more than the round's training on small
problems (``benchmarks/tune/adaptive_seeds.py``). The Tune executor therefore fits experiments
whose trials come from :class:`RoundSearcher`:

- it suggests the trials of the round in progress, one per ``suggest``;
- while some of them train, it suggests nothing (Tune asks again later);
- once the round's last trial has completed, it asks the loop for the next round
  (:class:`LiveRounds`: the policy reads the sweep directory and plans), and goes on suggesting
  that round's trials in the same experiment, on the same worker processes (``reuse_actors``);
- when the loop is over, or the experiment holds a wave's trials (:func:`~._waves.room_for`),
  it says ``FINISHED``; the executor fits the next experiment for what is left.

The searcher holds nothing: Tune pickles it into the experiment's ``tuner.pkl`` and keeps its
own copies. It reads the :class:`LiveRounds` registered while this process fits an experiment
(:func:`feeding`); a restored experiment (``resume=True``) finds none and suggests nothing new:
the loop plans what is left after the restore.
"""

from __future__ import annotations

import contextlib
import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ray.tune.search import Searcher

from ..planning import TrialPlan
from ._executor import Outcome, Round, RoundStream, next_round

__all__ = ["LiveRounds", "RoundSearcher", "feeding"]

_LIVE: list[LiveRounds] = []  # of the experiment this process fits now


class LiveRounds:
    """The rounds of one ``train`` call of the Tune executor, across its experiments.

    ``start_round(round)`` runs as each round starts (before its first trial is suggested): it
    publishes the round's plans to the trials and tells the display and the trackers.
    ``parts(trials)`` cuts a round into the waves that go to separate experiments, and
    ``room()`` is how many trials an experiment takes (``None``: any number).
    """

    def __init__(
        self,
        rounds: RoundStream,
        start_round: Callable[[Round], None],
        parts: Callable[[Sequence[TrialPlan]], list[Sequence[TrialPlan]]],
        room: Callable[[], int | None],
    ):
        self.rounds, self.start_round, self.parts, self.room_of_one = rounds, start_round, parts, room
        self.trials: dict[str, TrialPlan] = {}  # every trial handed out so far, by key
        self.todo: deque[Sequence[TrialPlan]] = deque()  # the round's parts (waves) not handed out
        self.queue: deque[str] = deque()  # the part's trial keys not suggested yet
        self.running: dict[str, str] = {}  # trial id -> key, of the round, not complete yet
        self.stopped: set[str] = set()
        self.failed = False
        self.over = False
        self.error: BaseException | None = None  # raised by the loop inside ``suggest``: raised again after fit
        self.room: int | None = None
        self._start(next_round(rounds, None))

    def _start(self, round: Round | None) -> None:
        if round is None:
            self.over = True
            return
        self.trials.update((t.trial_key, t) for t in round.trials)
        self.todo = deque(self.parts(round.trials))
        self.stopped, self.failed = set(), False
        self.start_round(round)

    @property
    def left(self) -> bool:
        """Whether anything is left for another experiment."""
        return self.error is None and (bool(self.todo) or bool(self.queue) or not self.over)

    def open(self) -> None:
        """A new experiment: its room."""
        self.room = self.room_of_one()

    def suggest(self, trial_id: str) -> str | None:
        """The trial key for ``trial_id``; ``None`` to wait; :attr:`Searcher.FINISHED` at the end."""
        if self.error is not None:
            return Searcher.FINISHED
        if not self.queue and not self.todo and not self.running and not self.over:
            # the round is complete: the loop plans the next one (told only whether a trial failed:
            # the executor reads the failures' messages from Tune's results after the experiment)
            try:
                self._start(next_round(self.rounds, Outcome(frozenset(self.stopped), ("failed",) * self.failed)))
            except Exception as e:
                self.error = e
                return Searcher.FINISHED
        if not self.queue and self.todo:
            part = self.todo[0]
            if self.room is not None and len(part) > self.room:  # a wave's trials: the next experiment's
                return Searcher.FINISHED
            self.todo.popleft()
            self.queue.extend(t.trial_key for t in part)
            if self.room is not None:
                self.room -= len(part)
        if self.queue:
            key = self.running[trial_id] = self.queue.popleft()
            return key
        return None if self.running or not self.over else Searcher.FINISHED

    def complete(self, trial_id: str, result: dict[str, Any] | None, error: bool) -> None:
        """A trial is over: completed, stopped early by a scheduler, or failed for good."""
        key = self.running.pop(trial_id, None)
        if key is None:
            return
        epoch = (result or {}).get("epoch", 0)
        if error:
            self.failed = True
        elif 0 < epoch < self.trials[key].spec.training.epochs:
            self.stopped.add(key)


@contextlib.contextmanager
def feeding(live: LiveRounds | None) -> Iterator[None]:
    """Let every :class:`RoundSearcher` of this process ask ``live`` while the block runs."""
    _LIVE[:] = [] if live is None else [live]
    try:
        yield
    finally:
        _LIVE.clear()


class RoundSearcher(Searcher):
    """Suggests ``{"trial_key": key}`` for the trials of the run loop's rounds (see the module's docstring)."""

    def suggest(self, trial_id: str) -> dict[str, str] | str | None:
        if not _LIVE:  # a restored experiment: only its own trials
            return Searcher.FINISHED
        key = _LIVE[0].suggest(trial_id)
        return key if key in (None, Searcher.FINISHED) else {"trial_key": key}

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        if _LIVE:
            _LIVE[0].complete(trial_id, result, error)

    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        return True  # the sweep's plan decides the trials; a metric ranks them in Tune's results only

    def save(self, checkpoint_path: str) -> None:
        """Nothing to save: the sweep directory's ``plan.json`` says what the rounds were."""
        with open(checkpoint_path, "w") as f:
            f.write("{}")

    def restore(self, checkpoint_path: str) -> None:
        if not os.path.exists(checkpoint_path):
            raise FileNotFoundError(checkpoint_path)
