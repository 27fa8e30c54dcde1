"""The race's records: each configuration's :class:`Standing` at an evaluation, each round's
:class:`Evaluation`, the whole :class:`Race` (what ``plan.json`` keeps), and their JSON form."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from ._mean_interval import Interval

Key = tuple[str, str]  # (config_id, hparams_key text): one configuration
STATUSES = ("racing", "eliminated", "decided")
RULES = ("rank", "interval")  # how a race decides: rank tests against the best, or intervals of the means
ENDS = {  # why a race ended
    "one_left": "one configuration left",
    "none_racing": "every configuration decided or eliminated",
    "max_reached": "every configuration still racing has max seeds",
}


def _json_number(x: float) -> float | str | None:
    """A float as strict JSON holds it: NaN as null, infinities as ``"inf"`` / ``"-inf"``."""
    return x if math.isfinite(x) else None if math.isnan(x) else str(x)


@dataclasses.dataclass(frozen=True)
class Standing:
    """One configuration at one evaluation: the round of seeds behind its interval and its status
    after the evaluation (``racing``, ``eliminated`` or ``decided``)."""

    config_id: str
    hparams: str  # sweep.planning.hparams_key text
    round: int
    seeds: int  # seeds of rounds 1..round
    interval: Interval
    status: str
    p: float | None = None  # rule "rank": the p-value of its test against the best (None: not tested)

    @property
    def key(self) -> Key:
        return (self.config_id, self.hparams)

    def to_dict(self) -> dict[str, Any]:
        return {
            "config_id": self.config_id,
            "hparams": self.hparams,
            "round": self.round,
            "seeds": self.seeds,
            **{f: _json_number(getattr(self.interval, f)) for f in ("mean", "low", "high")},
            "used": self.interval.used,
            "status": self.status,
            "p": self.p,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Standing:
        mean, low, high = (math.nan if data[f] is None else float(data[f]) for f in ("mean", "low", "high"))
        interval = Interval(mean, low, high, int(data["used"]))
        if data["status"] not in STATUSES:
            raise ValueError(f"status {data['status']!r} is not one of {', '.join(STATUSES)}")
        return cls(
            str(data["config_id"]),
            str(data["hparams"]),
            int(data["round"]),
            int(data["seeds"]),
            interval,
            data["status"],
            None if data.get("p") is None else float(data["p"]),
        )


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """One round of the race: the standing of every configuration not eliminated before it, the
    best one (by mean), the rule that decided (a key of :data:`RULES`) and its level: of the
    intervals (rule ``"interval"``), of the tests of the latest round (rule ``"rank"``)."""

    number: int  # 1-based
    level: float
    standings: tuple[Standing, ...]
    best: Key | None
    rule: str = "interval"  # what races recorded before the rank rule decided by

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "rule": self.rule,
            "level": self.level,
            "best": None if self.best is None else list(self.best),
            "standings": [s.to_dict() for s in self.standings],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Evaluation:
        best = data.get("best")
        rule = data.get("rule", "interval")
        if rule not in RULES:
            raise ValueError(f"rule {rule!r} is not one of {', '.join(RULES)}")
        return cls(
            int(data["number"]),
            float(data["level"]),
            tuple(Standing.from_dict(s) for s in data["standings"]),
            None if best is None else (str(best[0]), str(best[1])),
            rule,
        )


@dataclasses.dataclass(frozen=True)
class Race:
    """Every evaluation of a race so far (``plan.json`` keeps it: ``Plan.race``)."""

    evaluations: tuple[Evaluation, ...] = ()

    def add(self, evaluation: Evaluation) -> Race:
        return Race((*self.evaluations, evaluation))

    def latest(self) -> dict[Key, Standing]:
        """The last standing of every configuration evaluated so far."""
        return {s.key: s for e in self.evaluations for s in e.standings}

    def decisions(self) -> dict[Key, Standing]:
        """The standing at which each eliminated or decided configuration left the race."""
        out: dict[Key, Standing] = {}
        for e in self.evaluations:
            for s in e.standings:
                if s.status != "racing" and s.key not in out:
                    out[s.key] = s
        return out

    @property
    def best(self) -> Key | None:
        """The best configuration of the latest evaluation."""
        return self.evaluations[-1].best if self.evaluations else None

    def to_dict(self) -> dict[str, Any]:
        return {"evaluations": [e.to_dict() for e in self.evaluations]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Race:
        return cls(tuple(Evaluation.from_dict(e) for e in data["evaluations"]))
