"""What a search's configurations came to: the ``metric`` of every member trained to its last
epoch, read from the block checkpoints in the sweep directory (the value the store's column
holds), and each configuration's :class:`~._record.Observation` over its seeds."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._errors import SpecError
from ..planning import hparams_key
from ..spec import SweepSpec
from ..store import SweepDir, curves_by_column
from ._record import Observation

__all__ = ["Key", "key_of", "member_values", "observation"]

Key = tuple[str, str]  # a configuration: (config_id, hparams_key)


def key_of(spec: SweepSpec, point: Mapping[str, Any]) -> Key:
    """The configuration ``(config_id, hparams_key)`` of a point of ``spec``'s search."""
    config, hparams = spec.point_config(point)
    return config.config_id, hparams_key(hparams)


def member_values(spec: SweepSpec, sweep_dir: SweepDir, metric: str) -> dict[Key, dict[int, float]]:
    """The final ``metric`` of every member of ``spec`` trained to its last epoch (NaN for a
    diverged one), by configuration and seed."""
    planned = {config.config_id: config.training.epochs for config, _ in spec.expand()}
    values: dict[Key, dict[int, float]] = {}
    for ref in sweep_dir.blocks().values():
        if ref.epoch < planned.get(ref.config_id, math.inf):
            continue
        curves = curves_by_column(ref.history)
        if metric not in curves:
            raise SpecError(
                f"`search.metric`: {metric!r} is not among the values trial {ref.trial_key!r} reports "
                f"({', '.join(sorted(curves))})"
            )
        final = np.where(np.asarray(ref.history.diverged, bool), np.nan, np.asarray(curves[metric][:, -1], np.float64))
        members = ((h, s) for h in ref.hparams for s in ref.seeds)
        for (h, seed), value in zip(members, final.tolist()):
            values.setdefault((ref.config_id, hparams_key(h)), {})[seed] = value
    return values


def observation(values: Mapping[int, float], seeds: tuple[int, ...]) -> Observation | None:
    """The mean over ``seeds`` of a configuration's ``values`` and its standard error; None while
    a seed is not trained."""
    if any(s not in values for s in seeds):
        return None
    v = np.asarray([values[s] for s in seeds], np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return Observation(math.nan, math.nan, 0)
    stderr = float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else math.nan
    return Observation(float(v.mean()), stderr, int(v.size))
