"""Optuna as the engine of a search, through ask and tell (Optuna is imported here only).

Each round's proposals are a function of the search, ``sweep_seed``, the round's index and the
record of the rounds told before (:mod:`._record`): a study is built afresh in memory, every
told point added to it as a finished trial, and ``batch`` trials asked of a sampler seeded from
``(sweep_seed, round)``. The points of a batch are asked one after another, each seeing the
ones asked before it as running trials (TPE's constant liar), and a point asked before is never
proposed again (:func:`_fresh`). Nothing of Optuna's is stored, so
a resumed search, or one given more ``configurations``, proposes what an uninterrupted one would.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import json
import math
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

from .._errors import SpecError
from ..spec import Distribution, Search
from ._record import SearchRecord

__all__ = ["check_engine", "propose"]

_NEEDS = {"cmaes": "cmaes", "gp": "torch"}  # samplers that import another package
ASKS = 50  # times a sampler is asked for a point not asked before, before one is drawn from those left
ENUMERATED = 100_000  # the most points of a space of choices and integers listed to draw one left


def check_engine(search: Search) -> None:
    """Refuse, before work, a search whose engine cannot be imported here."""
    needed = ["optuna", *([_NEEDS[search.algorithm]] if search.algorithm in _NEEDS else [])]
    for module in needed:
        if importlib.util.find_spec(module) is None:
            raise SpecError(
                f"`search.algorithm`: {search.algorithm!r} needs the package {module!r}, which is not installed; "
                f"pip install 'seed-sweep[search]'{'' if module == 'optuna' else f' {module}'}"
            )


def round_seed(sweep_seed: int, round_index: int) -> int:
    """The seed of the sampler that proposes round ``round_index`` (0-based)."""
    return int(np.random.SeedSequence([sweep_seed, round_index]).generate_state(1)[0])


def propose(search: Search, sweep_seed: int, record: SearchRecord, n: int) -> tuple[dict[str, Any], ...]:
    """The ``n`` points of the next round, given every round told so far."""
    import optuna

    with _quiet():
        sampler = _sampler(search, round_seed(sweep_seed, len(record.rounds)))
        direction = "minimize" if search.direction == "min" else "maximize"
        study = optuna.create_study(direction=direction, sampler=sampler)
        distributions = {k: _distribution(d) for k, d in search.space.items()}
        for point, seen in record.observations:
            finite = math.isfinite(seen.mean)
            study.add_trial(
                optuna.trial.create_trial(
                    params=point,
                    distributions=distributions,
                    value=seen.mean if finite else None,
                    state=optuna.trial.TrialState.COMPLETE if finite else optuna.trial.TrialState.FAIL,
                )
            )
        rng = np.random.default_rng(round_seed(sweep_seed, len(record.rounds)))
        asked = [*record.points]
        for _ in range(n):
            asked.append(_fresh(search, study, distributions, asked, rng))
        return tuple(asked[len(record.points) :])


def _fresh(search: Search, study: Any, distributions: dict[str, Any], asked: list[dict[str, Any]], rng: Any) -> dict:
    """A point not ``asked`` before: the sampler's, asked again (the repeats left running, so that
    TPE's constant liar steers away from them) up to :data:`ASKS` times; then, in a space of few
    enough points, one of those left, drawn with ``rng``."""
    seen = {_key(p) for p in asked}
    for _ in range(ASKS):
        point = {k: _plain(v) for k, v in study.ask(distributions).params.items()}
        if _key(point) not in seen:
            return point
    size = search.size
    if size is None or size > ENUMERATED:  # real numbers: a repeat is next to impossible; keep it
        return point
    every = itertools.product(*(d.points() or () for d in search.space.values()))
    left = [p for p in (dict(zip(search.space, v)) for v in every) if _key(p) not in seen]
    return left[int(rng.integers(len(left)))] if left else point


def _key(point: dict[str, Any]) -> str:
    return json.dumps(point, sort_keys=True)


def random_start(search: Search) -> int:
    """The configurations TPE draws at random before it models the space: ``max(batch, 4)`` (the
    first round, or the first rounds of a batch under 4), at most Optuna's default of 10. Optuna's
    10 are most of the 16 to 64 configurations a search of blocks of seeds affords; modelling from
    the second round chose configurations with a better mean over 32 fresh seeds in 28 of 40
    searches of ``benchmarks/tune/search.py``'s space (docs/guides/search.md)."""
    return min(10, max(search.batch, 4))


def _sampler(search: Search, seed: int) -> Any:
    import optuna

    algorithm = search.algorithm
    if algorithm == "tpe":
        return optuna.samplers.TPESampler(seed=seed, constant_liar=True, n_startup_trials=random_start(search))
    if algorithm == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if algorithm == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed)
    return optuna.samplers.GPSampler(seed=seed)


def _distribution(dist: Distribution) -> Any:
    import optuna.distributions as od

    if dist.kind == "choice":
        return od.CategoricalDistribution(dist.args)
    low, high = dist.args
    if dist.kind == "randint":
        return od.IntDistribution(low, high - 1)
    return od.FloatDistribution(low, high, log=dist.kind == "loguniform")


def _plain(value: Any) -> Any:
    """A proposed value as plain JSON data (NumPy scalars to Python numbers)."""
    return value.item() if isinstance(value, np.generic) else value


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Optuna's info logs and experimental warnings off while it proposes; its level restored after."""
    import optuna

    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            yield
    finally:
        optuna.logging.set_verbosity(level)
