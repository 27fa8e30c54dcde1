"""``Adaptive``: seeds trained in rounds, only where the comparison of configurations is undecided
(docs: How-to guides > Adaptive seeds).

Seeds are ``0, 1, 2, ...`` in order: round 1 holds the first ``start``, every later round the
next ``step``, up to ``max``. Which rounds a configuration gets is decided by the race
(:mod:`sweep.racing`); the seeds of a round never depend on the other configurations, so a
member is the same whichever race trained it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from .._errors import SpecError, did_you_mean
from ..metrics import mode_of
from ._seeds import MAX_SEEDS
from ._values import is_int, is_number, known_fields, refuse_unknown

MODES = ("min", "max")  # lower or higher values of the metric are better
KEY = "adaptive"  # the spec's `seeds` as a table: {"adaptive": {...}} (TOML: [seeds.adaptive])


@known_fields
@dataclasses.dataclass(frozen=True)
class Adaptive:
    """Seeds in rounds: more seeds only for the configurations whose comparison is undecided.

    Round 1 trains seeds ``0..start-1`` of every configuration (every grid point, vmapped
    hyperparameters included); each later round trains the next ``step`` seeds of every
    configuration still racing. After each round the configuration with the best mean of
    ``metric`` is the best; every other one is tested against it with an exact one-sided rank
    test (Wilcoxon-Mann-Whitney) and *eliminated* when its values are worse than the best's
    beyond the round's level. The levels split ``1 - confidence`` over the ordered pairs of
    configurations and spend it over the rounds that can decide, most on the first: if each
    configuration's seeds are independent draws, every configuration whose values are
    stochastically no worse than any other's (every one, when all are equal) is kept with
    probability at least ``confidence``, whatever their distribution. The first decision comes as
    soon as seeds all worse than the best's could be eliminated: at 0.95, after 6 seeds for 3
    configurations with ``start=3, step=3``, after 8 for up to 16 configurations with the defaults
    (``sweep plan`` and the live display say when).
    With ``precision``, the race decides by percentile bootstrap intervals of the means instead
    (corrected by the union bound over configurations and the rounds with seeds enough for a
    bounded interval): one whose interval lies wholly on the worse side of the best's is
    eliminated, one whose interval is narrower than ``precision`` of its mean is *decided*, and
    every interval covers its configuration's mean together with probability ``confidence`` (as
    far as the bootstrap's levels hold). Neither trains again. The race ends when one
    configuration is left (without ``precision``), none is racing, or every racing one has
    ``max`` seeds (docs: How-to guides > Adaptive seeds).

    Attributes:
        start: Seeds of round 1 per configuration, an integer ``>= 2`` (an interval needs two).
        step: Seeds each later round adds to every configuration still racing, an integer ``>= 1``.
        max: The most seeds a configuration gets, an integer from ``start`` to ``2**24``; seeds
            are ``0..max-1``.
        metric: The member column the race compares: ``"val_loss"`` or ``"val_<m>"`` for a metric
            ``<m>`` of ``training.metrics`` (``"val_rollout_gmean_<r>"`` with rollouts,
            ``"val_rollout_valid_steps_correlation"``, ranked highest first). A race
            is a choice, and choices rank on the validation set; test columns are refused.
        mode: ``"min"`` if lower values of ``metric`` are better, ``"max"`` if higher;
            ``None`` (default): ``"max"`` for a built-in score (``val_accuracy``, ``val_correlation``), else ``"min"``.
        confidence: The whole race's confidence, in ``(0, 1)``: the probability that every
            configuration stochastically no worse than the others is kept (each rank test at
            ``(1 - confidence) / (K (K - 1))`` times the round's share), with ``precision`` that
            every interval covers its mean (each at ``1 - (1 - confidence) / (configurations *
            rounds)``, rounds counted from the first with seeds enough for a bounded interval).
        precision: ``None``, or a number ``> 0``: a configuration whose interval is narrower than
            ``precision * |mean|`` is decided (it stops training; its mean is known well enough).

    Raises:
        SpecError: A field is invalid; the message names it (``seeds.adaptive.<field>``), the value
            and what is allowed.

    Examples:
        >>> import sweep
        >>> seeds = sweep.Adaptive(start=4, step=4, max=16)
        >>> seeds.rounds, seeds.seeds_in(2), seeds.round_of(9)
        (4, (4, 5, 6, 7), 3)
        >>> sweep.Adaptive.from_dict(seeds.to_dict()) == seeds
        True
    """

    start: int = 4
    step: int = 4
    max: int = 64
    metric: str = "val_loss"
    mode: str | None = None
    confidence: float = 0.95
    precision: float | None = None

    def __post_init__(self) -> None:
        for field, low in (("start", 2), ("step", 1)):
            value = getattr(self, field)
            if not is_int(value) or not low <= value <= MAX_SEEDS:
                why = " (an interval needs two seeds)" if field == "start" else ""
                raise SpecError(
                    f"`seeds.adaptive.{field}`: got {value!r}; must be an integer from {low} to {MAX_SEEDS} (2**24){why}"
                )
            object.__setattr__(self, field, int(value))
        if not is_int(self.max) or not self.start <= self.max <= MAX_SEEDS:
            raise SpecError(
                f"`seeds.adaptive.max`: got {self.max!r}; must be an integer from start ({self.start}) to "
                f"{MAX_SEEDS} (2**24)"
            )
        object.__setattr__(self, "max", int(self.max))
        if not isinstance(self.metric, str) or not self.metric.startswith("val_"):
            named = isinstance(self.metric, str)
            guess = (
                f" (did you mean {'val_' + self.metric.removeprefix('test_').removeprefix('train_')!r}?)"
                if named
                else ""
            )
            raise SpecError(
                f'`seeds.adaptive.metric`: got {self.metric!r}{guess}; give a validation column, "val_loss" or '
                f'"val_<metric>": a race is a choice, and choices rank on the validation set (test numbers '
                f"are reported beside them, never used to choose)"
            )
        if self.mode not in (None, *MODES):
            raise SpecError(
                f"`seeds.adaptive.mode`: got {self.mode!r}; choose one of {', '.join(MODES)} (or leave it out: by "
                f"the metric)"
            )
        c = self.confidence
        if not is_number(c) or not 0 < c < 1:
            raise SpecError(f"`seeds.adaptive.confidence`: got {c!r}; must be a number in (0, 1), e.g. 0.95")
        object.__setattr__(self, "confidence", float(c))
        p = self.precision
        if p is not None and (not is_number(p) or not math.isfinite(p) or p <= 0):
            raise SpecError(
                f"`seeds.adaptive.precision`: got {p!r}; must be a number > 0 (a relative interval width, "
                f"e.g. 0.05) or left out (no configuration is decided by precision)"
            )
        object.__setattr__(self, "precision", None if p is None else float(p))

    # -- rounds ----------------------------------------------------------------------------------
    @property
    def rounds(self) -> int:
        """The most rounds a configuration can get: ``1 + ceil((max - start) / step)``."""
        return 1 + -(-(self.max - self.start) // self.step)

    def seeds_through(self, round: int) -> int:
        """How many seeds rounds ``1..round`` hold (``0`` for round 0)."""
        return 0 if round <= 0 else min(self.max, self.start + (round - 1) * self.step)

    def seeds_in(self, round: int) -> tuple[int, ...]:
        """The seeds of round ``round`` (1-based)."""
        return tuple(range(self.seeds_through(round - 1), self.seeds_through(round)))

    def round_of(self, seed: int) -> int | None:
        """The round that trains ``seed`` (None for a seed beyond ``max``)."""
        if not 0 <= seed < self.max:
            return None
        return 1 if seed < self.start else 2 + (seed - self.start) // self.step

    @property
    def seed_list(self) -> tuple[int, ...]:
        """Every seed the race may train: ``0..max-1``."""
        return tuple(range(self.max))

    # -- the metric ------------------------------------------------------------------------------
    @property
    def direction(self) -> str:
        """``"min"`` or ``"max"``: :attr:`mode`, or where that is None the metric's
        (:func:`sweep.metrics.mode_of`), so that a race changed with ``dataclasses.replace(adaptive,
        metric=...)`` follows its new metric."""
        return mode_of(self.metric, self.mode)

    def check_metric(self, names: list[str]) -> None:
        """Refuse a ``metric`` that is not among the validation columns ``names`` a config's
        training evaluates (:meth:`sweep.Training.validation_columns`)."""
        if self.metric not in names:
            raise SpecError(
                f"`seeds.adaptive.metric`: got {self.metric!r}{did_you_mean(self.metric, names)}; the members "
                f"are evaluated on {', '.join(names)} (add the metric to training.metrics to race on it)"
            )

    # -- round trip ------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Adaptive:
        if not isinstance(data, Mapping):
            raise SpecError(f"`seeds.adaptive`: got {data!r}; give a table of {', '.join(_FIELDS)}")
        refuse_unknown(data, _FIELDS, "`seeds.adaptive`")
        return cls(**data)


_FIELDS = tuple(f.name for f in dataclasses.fields(Adaptive))


def adaptive_from(value: Any) -> Adaptive | None:
    """The :class:`Adaptive` of a spec's ``seeds`` (an instance, or ``{"adaptive": {...}}`` as in a
    dict or TOML spec), or None for fixed seeds (an int or a list)."""
    if isinstance(value, Adaptive):
        return value
    if isinstance(value, Mapping):
        if set(value) != {KEY}:
            raise SpecError(
                f"`seeds`: got a table with {sorted(value)}; a table of seeds must be "
                f'{{"{KEY}": {{start = 4, step = 4, max = 64, ...}}}} (TOML: [seeds.{KEY}])'
            )
        return Adaptive.from_dict(value[KEY])
    return None
