"""The race of adaptive seeds a store records (``manifest.json`` ``race``), as a table and a sentence."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from .._errors import StoreError
from ..spec import Adaptive
from ._headline import headline

RACE_STATS = ("status", "round", "seeds", "used", "mean", "ci_low", "ci_high", "p", "best")


def race_table(race: Mapping[str, Any], grid_columns: list[str], where: str = "the manifest") -> pa.Table:
    """One row per configuration of the race, in grid order: its grid values and ``config_id``,
    its status (``racing``, ``eliminated``, ``decided``, or ``finished``: in the race when it
    ended), the round of its decision (else its
    latest round), its seeds and how many of them were used (not diverged), the mean of the race's
    metric and its corrected interval (rule ``interval``), the p-value of its rank test against the
    best (rule ``rank``; null for the best and for stores made before the rank rule), and whether
    it is the best. The schema's metadata holds
    :func:`race_title` under ``b"title"``. A record this seed-sweep cannot read is a
    :class:`StoreError` naming ``where`` it came from."""
    try:
        return _race_table(race, grid_columns)
    except (KeyError, TypeError, ValueError, AttributeError) as e:  # (SpecError is a ValueError)
        raise StoreError(
            f"{where}: `race` is not the record of a race this seed-sweep reads ({type(e).__name__}: "
            f"{str(e)[:200]}); the store was altered"
        ) from None


def _race_table(race: Mapping[str, Any], grid_columns: list[str]) -> pa.Table:
    rows = []
    for c in race["configurations"]:
        values = c.get("values", {})
        rows.append(
            {
                **{name: values.get(name) for name in grid_columns},
                "config_id": c["config_id"],
                **{k: c[k] for k in ("status", "round", "seeds", "used", "mean")},
                "ci_low": c["low"],
                "ci_high": c["high"],
                "p": c.get("p"),
                "best": c["best"],
            }
        )
    table = pa.Table.from_pylist(rows)
    return table.replace_schema_metadata({"title": race_title(race)})


def race_title(race: Mapping[str, Any]) -> str:
    """``race of 8 configurations on val_loss (lower is better; start 4, step 4, max 64): over
    after 9 rounds (one configuration left); a best configuration kept at 0.95 (rank tests against
    the best, first decision after 8 seeds)``: :func:`~._headline.headline` of the stored settings
    and rule (a store made before the rank rule names none: intervals)."""
    rounds = race["evaluations"]
    plural = "s" * (rounds != 1)
    where = (
        f"over after {rounds} round{plural} ({race['ended']})"
        if race.get("ended")
        else f"{rounds} round{plural} so far"
    )
    adaptive = Adaptive.from_dict(race["settings"])
    return headline(adaptive, len(race["configurations"]), race.get("rule", "interval"), where)
