"""The race on the live display and at the end of a run: a row per configuration and the line
of where the race stands."""

from __future__ import annotations

import math
from typing import NamedTuple

from ..spec import Adaptive
from ._headline import headline
from ._records import ENDS, Key, Race, Standing
from ._rules import first_decision, rule_of


class RaceStep(NamedTuple):
    """Where a race stands: the seeds of its next round per configuration (empty when it is
    over), its evaluations so far, and why it ended (a key of :data:`sweep.racing.ENDS`)."""

    wanted: dict[Key, tuple[int, ...]]
    race: Race
    ended: str | None


def _interval(s: Standing, first: int | None, rule: str) -> str:
    """The mean and, by the rule: the p-value of the test against the best (``"rank"``), or the
    interval (``"interval"``); before the race can decide, from how many seeds it can."""
    iv = s.interval
    if not math.isfinite(iv.mean):
        return "diverged"
    if first is not None and s.seeds < first:
        return f"{iv.mean:.4g} [decides from {first} seeds]"
    if rule == "rank":
        return f"{iv.mean:.4g} [p {s.p:.2g}]" if s.p is not None else f"{iv.mean:.4g}"
    if not (math.isfinite(iv.low) and math.isfinite(iv.high)):
        return f"{iv.mean:.4g} [decides from {first} seeds]" if first else f"{iv.mean:.4g} [unbounded]"
    return f"{iv.mean:.4g} [{iv.low:.4g}, {iv.high:.4g}]"


def _status(s: Standing, best: bool, ended: str | None) -> str:
    if s.status != "racing":
        return f"{s.status} at round {s.round}" + (", best" if best else "")
    if ended is None:
        return f"racing (tested at round {s.round})" + (", best so far" if best else "")  # the mean's round
    return "best" if best else f"not separated from the best ({s.seeds} seeds)"


def rows(adaptive: Adaptive, step: RaceStep, keys: list[Key]) -> dict[Key, tuple[int, str, str]]:
    """Per configuration: seeds trained or planned so far, interval text, status text."""
    latest, decisions, best = step.race.latest(), step.race.decisions(), step.race.best
    rule = rule_of(adaptive, step.race)
    first = first_decision(adaptive, len(keys), rule)
    out = {}
    for key in keys:
        planned = step.wanted[key][-1] + 1 if key in step.wanted else 0
        s = decisions.get(key, latest.get(key))
        if s is None:
            out[key] = (planned, "-", "racing")
        else:
            out[key] = (max(planned, s.seeds), _interval(s, first, rule), _status(s, key == best, step.ended))
    return out


def standing_line(adaptive: Adaptive, step: RaceStep, keys: list[Key]) -> str:
    """The race's line (:func:`~._headline.headline`) where it stands: the round, how many
    configurations race, finished, were eliminated or decided."""
    latest, ended = step.race.latest(), step.ended
    status = [latest[k].status if k in latest else "racing" for k in keys]
    if ended is not None:  # still in when the race ended
        status = ["finished" if s == "racing" else s for s in status]
    kinds = ("racing", "finished", "eliminated", "decided")
    counts = ", ".join(f"{status.count(s)} {s}" for s in kinds if status.count(s))
    rounds = len(step.race.evaluations)
    where = f"over after {rounds} round{'s' * (rounds != 1)} ({ENDS[ended]})" if ended else f"round {rounds + 1}"
    return headline(adaptive, len(keys), rule_of(adaptive, step.race), where, counts)
