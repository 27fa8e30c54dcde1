"""The race of adaptive seeds as the store's manifest records it (``manifest.json`` ``race``).

``plan.json`` holds the race's every evaluation (:class:`sweep.racing.Race`); the store keeps
what a reader needs without it: the settings, the rule that decided (``rank`` or ``interval``),
the seeds of its first possible decision, the level of its latest tests or intervals, whether and why the
race ended, and one entry per configuration with its grid values, its status (``racing``,
``eliminated``, ``decided``, or ``finished``: still in the race when it ended), the round of its
decision (or its latest round), that round's interval, and whether it is the best.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..planning import Plan, hparams_key
from ..racing import ENDS, first_decision, over
from ._members import Column, value

RACE = "race"  # the manifest's key


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def race_manifest(plan: Plan | None, columns: list[Column], names: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    """``{"race": {...}}`` for the manifest of a race's store, ``{}`` for any other store."""
    adaptive = None if plan is None else plan.spec.adaptive
    if plan is None or adaptive is None or plan.race is None or not plan.race.evaluations:
        return {}
    race = plan.race
    keys, specs = [], {}
    for config, hsets in plan.spec.expand():
        specs[config.config_id] = config.to_dict()
        keys += [(config.config_id, hparams_key(h)) for h in hsets]
    latest, decisions, ended = race.latest(), race.decisions(), over(adaptive, race, keys)

    def values(key: tuple[str, str]) -> dict[str, Any]:
        hparams = json.loads(key[1])
        spec = specs.get(key[0], {})
        full = {n: hparams.get(n, spec.get("optimizer", {}).get(n)) for n in names.get(key[0], ())}
        return {c.name: value(c, spec, full) for c in columns}

    entries = []
    for key in [k for k in keys if k in latest] + [k for k in latest if k not in keys]:
        s = decisions.get(key, latest[key])
        entries.append(
            {
                "config_id": key[0],
                "values": values(key),
                "status": "finished" if ended is not None and s.status == "racing" else s.status,
                "round": s.round,
                "seeds": s.seeds,
                "used": s.interval.used,
                "mean": _finite(s.interval.mean),
                "low": _finite(s.interval.low),
                "high": _finite(s.interval.high),
                "p": s.p,
                "best": key == race.best,
            }
        )
    return {
        RACE: {
            "settings": adaptive.to_dict(),
            "rule": race.evaluations[-1].rule,
            "first_decision": first_decision(adaptive, len(keys), race.evaluations[-1].rule),
            "level": race.evaluations[-1].level,
            "evaluations": len(race.evaluations),
            "ended": None if ended is None else ENDS[ended],
            "configurations": entries,
        }
    }
