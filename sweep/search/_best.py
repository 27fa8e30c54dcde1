"""The end of a search: the best configurations compared by their intervals over seeds.

The ``search.compare`` best configurations told (by mean, distinct configurations) each get an
interval over their seeds: the 95% percentile bootstrap interval of the mean that the store's
summary shows beside it (:func:`sweep.ensemble.describe`: one interval per configuration on one
screen); the best is *separated* from the runner-up when their intervals do not overlap. Fewer
than :func:`~sweep.racing.min_seeds` seeds give no bounded interval (the race's rule,
:func:`sweep.racing.mean_interval`), and the summary says so rather than name a winner on a
lucky mean.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._over_seeds import CONFIDENCE, describe
from .._words import counted
from ..planning import config_label, grid_names
from ..racing import Interval, mean_interval, min_seeds
from ..spec import SweepSpec
from ..store import SweepDir
from ._observe import key_of, member_values
from ._record import Observation, read_record

__all__ = ["LEVEL", "Standing", "headline", "ranked", "separated", "standings", "summary"]

LEVEL = CONFIDENCE  # the store summary's


@dataclasses.dataclass(frozen=True)
class Standing:
    """One told configuration: its place in the order of proposal (1-based), its point, what the
    sampler was told, and its interval over seeds."""

    number: int
    point: Mapping[str, Any]
    observation: Observation
    interval: Interval

    def label(self, spec: SweepSpec) -> str:
        return config_label(self.point, grid_names(spec.varied))


def standings(spec: SweepSpec, sweep_dir: SweepDir) -> list[Standing]:
    """Every configuration told so far, once (its first proposal), in order of proposal."""
    assert spec.search is not None  # only searches stand
    record = read_record(sweep_dir)
    planned = spec.with_points(record.points)
    values = member_values(planned, sweep_dir, spec.search.metric)
    out, seen = [], set()
    for number, (point, observation) in enumerate(record.observations, 1):
        key = key_of(planned, point)
        if key in seen:
            continue
        seen.add(key)
        mine = values.get(key, {})
        v = [mine.get(s, math.nan) for s in spec.seed_list]
        out.append(Standing(number, point, observation, _interval(np.asarray(v, np.float64))))
    return out


def _interval(values: np.ndarray) -> Interval:
    """The interval of the finite ``values``: the summary's (its level is :data:`LEVEL`) where
    bounded, else the race's (none of them, too few, all equal: no bootstrap)."""
    finite = values[np.isfinite(values)]
    if finite.size < min_seeds(LEVEL) or np.ptp(finite) == 0:
        return mean_interval(values, LEVEL, seed=0)
    stats = describe(finite)
    return Interval(float(finite.mean()), stats["mean_ci_low"], stats["mean_ci_high"], int(finite.size))


def ranked(spec: SweepSpec, every: list[Standing]) -> list[Standing]:
    """``every`` best first by mean (NaN last)."""
    assert spec.search is not None
    sign = 1.0 if spec.search.direction == "min" else -1.0
    return sorted(every, key=lambda s: (math.isnan(s.observation.mean), sign * s.observation.mean, s.number))


def separated(spec: SweepSpec, best: Standing, runner_up: Standing) -> bool:
    """Do the intervals of ``best`` and ``runner_up`` not overlap (the best on the better side)?"""
    assert spec.search is not None
    if spec.search.direction == "min":
        return best.interval.high < runner_up.interval.low
    return best.interval.low > runner_up.interval.high


def _mean_and_interval(i: Interval) -> str:
    """``0.0123 [0.0119, 0.0128]``, or the mean alone where too few seeds give no interval."""
    if not (math.isfinite(i.low) and math.isfinite(i.high)):
        return f"{i.mean:.4g} [-]"
    return f"{i.mean:.4g} [{i.low:.4g}, {i.high:.4g}]"


def headline(spec: SweepSpec, sweep_dir: SweepDir, top: list[Standing] | None = None) -> str:
    """``search: 6 of 16 configurations told, 8 seeds each; best #4 val_loss 0.0123 [0.0119, 0.0128]``
    (what the live display shows after each round)."""
    search = spec.search
    assert search is not None
    top = ranked(spec, standings(spec, sweep_dir)) if top is None else top
    told = len(read_record(sweep_dir).observations)
    line = f"search: {told} of {counted(search.configurations, 'configuration')} told, {len(spec.seed_list)} seeds each"
    if top:
        i = top[0].interval
        line += f"; best #{top[0].number} {search.metric} {_mean_and_interval(i)}"
    return line


def summary(spec: SweepSpec, sweep_dir: SweepDir) -> str | None:
    """What the search found: a headline that says whether the best is separated from the
    runner-up, then its ``search.compare`` best configurations with their intervals."""
    search = spec.search
    assert search is not None
    top = ranked(spec, standings(spec, sweep_dir))[: search.compare]
    if not top:
        return None
    lines = [headline(spec, sweep_dir, top)]
    if len(top) > 1:
        best, runner = top[0], top[1]
        if math.isnan(runner.observation.mean):
            verdict = (
                f"the only one with a finite {search.metric}: the runner-up (#{runner.number}) diverged on every seed"
            )
        elif len(spec.seed_list) < min_seeds(LEVEL):
            verdict = (
                f"not compared: {len(spec.seed_list)} seeds give no {LEVEL:.0%} interval (at least "
                f"{min_seeds(LEVEL)} needed)"
            )
        elif separated(spec, best, runner):
            verdict = f"separated from the runner-up (#{runner.number}) by {LEVEL:.0%} intervals over seeds"
        else:
            verdict = f"NOT separated from the runner-up (#{runner.number}): their {LEVEL:.0%} intervals overlap"
        lines[0] += f"; the best is {verdict}"
    lines.append(f"  {'#':>3}  {search.metric} mean [{LEVEL:.0%} interval]  configuration")
    lines += [f"  {s.number:>3}  {_mean_and_interval(s.interval)}  {s.label(spec)}" for s in top]
    return "\n".join(lines)
