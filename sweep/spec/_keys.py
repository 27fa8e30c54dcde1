"""The dotted keys of a spec's grid, search space and points: which field each names
(:func:`check_key`), which take their values inside one program (:func:`vmappable`: an
optimizer's numbers) and the optimizer argument of such a key (:func:`hparam_name`)."""

from __future__ import annotations

import math
from typing import Any

from .._errors import SpecError, did_you_mean
from ._parts import Model, Optimizer, Problem
from ._training import Training
from ._values import is_number


def hparam_name(key: str) -> str:
    """The optimizer argument of a vmapped grid key: ``"optimizer.learning_rate"`` -> ``"learning_rate"``."""
    return key.removeprefix("optimizer.")


PARTS = {"problem": Problem, "model": Model, "optimizer": Optimizer, "training": Training}
TOP_GRID_KEYS = ("sweep_seed",)


def check_key(key: str, where: str, searched: bool = False) -> None:
    """Refuse a dotted key that names no spec field (``where``: the spec's field that holds it);
    ``searched``: a search's key, where only the fields a search can take are offered (the others
    are refused by :meth:`~sweep.Search.check_fields`)."""
    part, _, leaf = key.partition(".")
    if key not in TOP_GRID_KEYS and (part not in PARTS or not leaf):
        parts, top = (("model", "optimizer", "training"), ()) if searched else (tuple(PARTS), TOP_GRID_KEYS)
        named = [f"{p}.<{'field' if p == 'training' else 'option'}>" for p in parts] + list(top)
        if part in PARTS:  # `[grid.model]` in TOML: a table where dotted keys belong
            raise SpecError(
                f"`{where}`: key {key!r} names a part of the spec, not a field (as [{where}.{part}] in TOML does); give "
                f'each field as one dotted key, in TOML quoted under [{where}]: "{part}.<option>" = [...]'
            )
        raise SpecError(
            f"`{where}`: key {key!r} is not a spec field{did_you_mean(key, [f'{p}.{leaf}' for p in parts])}; "
            f"use {', '.join(named[:-1])} or {named[-1]}"
        )


def vmappable(key: str, values: tuple[Any, ...]) -> bool:
    part, _, leaf = key.partition(".")
    return (
        part == "optimizer"
        and leaf not in ("name", "schedule")
        and all(is_number(v) and math.isfinite(v) for v in values)
    )
