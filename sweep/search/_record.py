"""``<sweep>/search.json``: every ask and tell of a search, round by round (JSON, never pickle).

A round is recorded when it is asked (its points, before any of them trains) and again when it
is told (each point's mean over its seeds, the standard error, how many seeds). A run killed at
any point finds here what it had asked and told; what it proposes next is a function of this
record alone (:mod:`._sampler`), so a resumed search proposes what an uninterrupted one would.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any

from .._errors import StoreError
from .._fs import exists, read_text, write_text_atomic
from .._layout import SEARCH
from ..store import SweepDir

__all__ = ["Observation", "SearchRecord", "read_record", "write_record"]

SEARCH_FORMAT = 1


@dataclasses.dataclass(frozen=True)
class Observation:
    """What one configuration's block of seeds came to: the mean of the metric over its finite
    values (NaN when none is), the standard error of that mean (NaN from fewer than two), and
    how many seeds gave a finite value."""

    mean: float
    stderr: float
    seeds: int

    def to_dict(self) -> dict[str, Any]:
        return {"mean": _number(self.mean), "stderr": _number(self.stderr), "seeds": self.seeds}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Observation:
        return cls(_float(data["mean"]), _float(data["stderr"]), int(data["seeds"]))


@dataclasses.dataclass(frozen=True)
class Round:
    """The points asked in one round, and what each came to once told (None before)."""

    asked: tuple[dict[str, Any], ...]
    told: tuple[Observation, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        told = None if self.told is None else [o.to_dict() for o in self.told]
        return {"asked": [dict(p) for p in self.asked], "told": told}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Round:
        told = data.get("told")
        return cls(
            tuple(dict(p) for p in data["asked"]),
            None if told is None else tuple(Observation.from_dict(o) for o in told),
        )


@dataclasses.dataclass(frozen=True)
class SearchRecord:
    """Every round of a search so far, oldest first."""

    rounds: tuple[Round, ...] = ()

    @property
    def points(self) -> tuple[dict[str, Any], ...]:
        """Every point asked, in order of proposal."""
        return tuple(p for r in self.rounds for p in r.asked)

    @property
    def observations(self) -> tuple[tuple[dict[str, Any], Observation], ...]:
        """Every point told, with what it came to, in order of proposal."""
        return tuple(pair for r in self.rounds if r.told is not None for pair in zip(r.asked, r.told))

    @property
    def pending(self) -> Round | None:
        """The last round, if it was asked and not told yet."""
        return self.rounds[-1] if self.rounds and self.rounds[-1].told is None else None

    def ask(self, points: tuple[dict[str, Any], ...]) -> SearchRecord:
        assert self.pending is None  # a round is told before the next is asked
        return SearchRecord((*self.rounds, Round(points)))

    def tell(self, observations: tuple[Observation, ...]) -> SearchRecord:
        pending = self.pending
        assert pending is not None and len(observations) == len(pending.asked)
        return SearchRecord((*self.rounds[:-1], Round(pending.asked, observations)))

    def to_dict(self) -> dict[str, Any]:
        return {"format": SEARCH_FORMAT, "rounds": [r.to_dict() for r in self.rounds]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SearchRecord:
        if data.get("format") != SEARCH_FORMAT:
            raise ValueError(f"format {data.get('format')!r}, expected {SEARCH_FORMAT}")
        return cls(tuple(Round.from_dict(r) for r in data["rounds"]))


def read_record(sweep_dir: SweepDir) -> SearchRecord:
    """The sweep's ``search.json`` (an empty record before the first ask)."""
    path = f"{sweep_dir.path}/{SEARCH}"
    if not exists(sweep_dir.filesystem, path):
        return SearchRecord()
    try:
        return SearchRecord.from_dict(json.loads(read_text(sweep_dir.filesystem, path)))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
        raise StoreError(
            f"{path!r}: not a readable search record ({str(e)[:300]}); it is the search's only history"
        ) from None


def write_record(sweep_dir: SweepDir, record: SearchRecord) -> None:
    """Write ``search.json`` atomically (a kill leaves the old record or the new one)."""
    write_text_atomic(sweep_dir.filesystem, f"{sweep_dir.path}/{SEARCH}", json.dumps(record.to_dict(), indent=1))


def _number(x: float) -> float | None:
    return None if math.isnan(x) else x


def _float(x: Any) -> float:
    return math.nan if x is None else float(x)
