"""Adaptive seeds in ``sweep.run``: the race's steps between rounds (no Ray here).

After each round, :func:`advance` reads every configuration's ``metric`` from the complete block
checkpoints (the value the store's column holds), evaluates every round whose seeds are all
trained (:func:`sweep.racing.evaluate`), records each evaluation in ``plan.json`` before anything
else happens, and returns the seeds of the next round per configuration still racing. Everything
it decides is a function of the recorded evaluations and the trained members, so a run killed at
any point (mid-round, between rounds, after a decision was written) and resumed takes the same
steps, with the same intervals, as one that was never stopped.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .._errors import SpecError
from ..planning import hparams_key, make_plan
from ..racing import Key, Race, RaceStep, evaluate, next_step, rows, standing_line
from ..spec import Adaptive, SweepSpec
from ..store import SweepDir, curves_by_column


def configurations(spec: SweepSpec) -> tuple[list[Key], dict[Key, int]]:
    """Every configuration of ``spec`` (grid point: config x vmapped hyperparameter set) in grid
    order, and the ``sweep_seed`` of each."""
    keys, seeds = [], {}
    for config, hsets in spec.expand():
        for h in hsets:
            key = (config.config_id, hparams_key(h))
            keys.append(key)
            seeds[key] = config.sweep_seed
    return keys, seeds


def _trained_values(
    spec: SweepSpec, adaptive: Adaptive, sweep_dir: SweepDir
) -> tuple[dict[Key, int], dict[Key, dict[int, float]]]:
    """Rounds of seeds each configuration has complete, and the ``metric`` of each member trained
    to its last epoch (NaN for a diverged one), by configuration and seed."""
    done, blocks = sweep_dir.done(spec)
    planned = {config.config_id: config.training.epochs for config, _ in spec.expand()}
    values: dict[Key, dict[int, float]] = {}
    for ref in blocks.values():
        if ref.config_id not in planned or ref.epoch < planned[ref.config_id]:
            continue
        history = ref.history
        curves = curves_by_column(history)
        if adaptive.metric not in curves:
            raise SpecError(
                f"`seeds.adaptive.metric`: {adaptive.metric!r} is not among the values trial {ref.trial_key!r} "
                f"reports ({', '.join(sorted(curves))})"
            )
        final = np.asarray(curves[adaptive.metric][:, -1], np.float64)
        final = np.where(np.asarray(history.diverged, bool), np.nan, final)
        i = 0
        for h in ref.hparams:
            mine = values.setdefault((ref.config_id, hparams_key(h)), {})
            for seed in ref.seeds:
                mine[seed] = float(final[i])
                i += 1
    trained = {}
    for key in configurations(spec)[0]:
        n = 0
        while n < adaptive.max and (key[0], n, key[1]) in done:
            n += 1
        trained[key] = max((r for r in range(adaptive.rounds + 1) if adaptive.seeds_through(r) <= n), default=0)
    return trained, values


def advance(spec: SweepSpec, sweep_dir: SweepDir, record: bool = True) -> RaceStep:
    """Evaluate every round of the race whose seeds are trained (each evaluation written to
    ``plan.json`` as it is made, unless ``record`` is false), then say what comes next."""
    adaptive = spec.adaptive
    assert adaptive is not None  # only races advance
    keys, seeds = configurations(spec)
    stored = sweep_dir.plan()
    race = stored.race if stored is not None and stored.race is not None else Race()
    trained, values = _trained_values(spec, adaptive, sweep_dir)

    def metric(key: Key, n: int) -> np.ndarray:
        mine = values.get(key, {})
        return np.asarray([mine.get(s, math.nan) for s in range(n)], np.float64)

    while not (step := next_step(adaptive, race, keys, trained)).train and step.over is None:
        race = race.add(evaluate(adaptive, race, keys, step.evaluate, metric, seeds))
        if record:
            base = sweep_dir.plan() or make_plan(spec, wanted={})
            sweep_dir.write_plan(dataclasses.replace(base, spec=spec, race=race))
    return RaceStep({k: adaptive.seeds_in(r) for k, r in step.train.items()}, race, step.over)


def show(state: Any, spec: SweepSpec, step: RaceStep) -> None:
    """Put the race on the live display (a :class:`~._progress.ProgressState`)."""
    adaptive = spec.adaptive
    assert adaptive is not None
    keys, _ = configurations(spec)
    state.show_race(rows(adaptive, step, keys), standing_line(adaptive, step, keys))


def stored(manifest: Mapping[str, Any], plan: Any) -> bool:
    """Whether a store's manifest holds every evaluation of the sweep's race (True without a race)."""
    race = None if plan is None else plan.race
    return race is None or (manifest.get("race") or {}).get("evaluations") == len(race.evaluations)


def result(spec: SweepSpec, step: RaceStep, label: Callable[[Key], str]) -> str:
    """What the race decided, in one line (printed when it is over)."""
    adaptive = spec.adaptive
    assert adaptive is not None
    keys, _ = configurations(spec)
    best = step.race.best
    chosen = f"; best: {label(best)}" if best is not None else ""
    return standing_line(adaptive, step, keys) + chosen
