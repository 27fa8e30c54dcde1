"""The distributions of a search space (:class:`sweep.Search`): ``sweep.loguniform``,
``sweep.uniform``, ``sweep.randint`` and ``sweep.choice``; Ray Tune's own (``tune.loguniform``
...) are accepted and turned into these, and so are their TOML tables
(``{loguniform = [1e-4, 1e-2]}``).

Examples:
    >>> import sweep
    >>> sweep.loguniform(1e-4, 1e-2)
    Distribution(kind='loguniform', args=(0.0001, 0.01))
    >>> sweep.randint(2, 5).values()  # Tune's rule: the upper bound is excluded
    (2, 4)
    >>> sweep.Distribution.of({"choice": ["relu", "tanh"]}, "model.activation").to_dict()
    {'choice': ['relu', 'tanh']}
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import SpecError
from ._values import is_int, is_number, known_fields, plain

__all__ = ["KINDS", "Distribution", "choice", "loguniform", "randint", "uniform"]

KINDS = ("loguniform", "uniform", "randint", "choice")


@known_fields
@dataclasses.dataclass(frozen=True)
class Distribution:
    """One searched field's distribution: ``kind`` (one of :data:`KINDS`) and its arguments,
    ``(low, high)`` or, for ``choice``, the values.

    ``randint(low, high)`` draws integers ``low <= x < high`` (as ``tune.randint``); ``loguniform``
    needs ``0 < low < high``; ``uniform`` ``low < high``; ``choice`` at least one plain value.
    """

    kind: str
    args: tuple[Any, ...]

    def check(self, field: str) -> None:
        """Refuse arguments this kind cannot take (``field`` names it in the message)."""
        where = f"`search.space.{field}`"
        if self.kind not in KINDS:
            raise SpecError(f"{where}: unknown distribution {self.kind!r}; choose one of {', '.join(KINDS)}")
        args = self.args
        if self.kind == "choice":
            if not args:
                raise SpecError(f"{where}: choice of no values; give at least one")
            return
        if len(args) != 2 or not all(is_number(a) and math.isfinite(a) for a in args):
            raise SpecError(f"{where}: {self.kind} got {list(args)!r}; give two finite numbers [low, high]")
        low, high = args
        if self.kind == "randint" and not (is_int(low) and is_int(high) and low < high):
            raise SpecError(f"{where}: randint got [{low!r}, {high!r}]; give integers low < high (high excluded)")
        if self.kind == "loguniform" and not 0 < low < high:
            raise SpecError(f"{where}: loguniform got [{low!r}, {high!r}]; needs 0 < low < high")
        if self.kind == "uniform" and not low < high:
            raise SpecError(f"{where}: uniform got [{low!r}, {high!r}]; needs low < high")

    def values(self) -> tuple[Any, ...]:
        """The values that bound what it draws: both ends (``randint``: ``high - 1``), or every choice."""
        if self.kind == "choice":
            return self.args
        low, high = self.args
        return (low, high - 1) if self.kind == "randint" else (low, high)

    @property
    def count(self) -> int | None:
        """How many values it can draw (None: real numbers)."""
        if self.kind == "choice":
            return len(self.args)
        return self.args[1] - self.args[0] if self.kind == "randint" else None

    def points(self) -> tuple[Any, ...] | None:
        """Every value it can draw, or None where it draws real numbers."""
        if self.kind == "choice":
            return self.args
        return tuple(range(*self.args)) if self.kind == "randint" else None

    def holds(self, value: Any) -> bool:
        """Could it draw ``value``? (Optuna refuses to be told a point outside its distribution.)"""
        if self.kind == "choice":
            return any(type(v) is type(value) and v == value for v in self.args)
        low, high = self.args
        if not is_number(value):
            return False
        return is_int(value) and low <= value < high if self.kind == "randint" else low <= value <= high

    @property
    def numeric(self) -> bool:
        """Does it draw numbers only (so that an optimizer field can be trained side by side)?"""
        return self.kind != "choice" or all(is_number(v) for v in self.args)

    @property
    def real(self) -> bool:
        """Does it draw real numbers (not integers or choices)?"""
        return self.kind in ("loguniform", "uniform")

    def to_dict(self) -> dict[str, list[Any]]:
        return {self.kind: list(self.args)}

    @classmethod
    def of(cls, value: Any, field: str) -> Distribution:
        """A distribution from itself, its TOML table (``{"loguniform": [a, b]}``) or a Ray Tune
        domain (``tune.loguniform(a, b)``, ``tune.uniform``, ``tune.randint``, ``tune.choice``)."""
        if isinstance(value, Distribution):
            dist = value
        elif isinstance(value, Mapping) and len(value) == 1:
            ((kind, args),) = value.items()
            if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
                raise SpecError(f"`search.space.{field}`: got {value!r}; give {{{kind} = [...]}}")
            dist = cls(str(kind), tuple(plain(a, f"search.space.{field}") for a in args))
        elif type(value).__module__.startswith("ray.tune"):
            dist = _from_tune(value, field)
        else:
            raise SpecError(
                f"`search.space.{field}`: got {value!r}; give a distribution: sweep.loguniform(a, b), "
                f"sweep.uniform(a, b), sweep.randint(a, b), sweep.choice([...]) (in TOML {{loguniform = [a, b]}})"
            )
        dist.check(field)
        return dist


def _from_tune(domain: Any, field: str) -> Distribution:
    """A Ray Tune domain (``tune.loguniform`` ...) as a :class:`Distribution`."""
    sampler = type(getattr(domain, "sampler", None)).__name__.lstrip("_")
    name = type(domain).__name__
    if name == "Categorical":
        return Distribution("choice", tuple(plain(v, f"search.space.{field}") for v in domain.categories))
    if name == "Float" and sampler in ("LogUniform", "Uniform") and getattr(domain.sampler, "base", 10) == 10:
        return Distribution("loguniform" if sampler == "LogUniform" else "uniform", (domain.lower, domain.upper))
    if name == "Integer" and sampler == "Uniform":
        return Distribution("randint", (int(domain.lower), int(domain.upper)))
    raise SpecError(
        f"`search.space.{field}`: Ray Tune's {name} with a {sampler} sampler has no counterpart here; use "
        f"tune.loguniform, tune.uniform, tune.randint or tune.choice (or sweep's own)"
    )


def loguniform(low: float, high: float) -> Distribution:
    """Real numbers between ``low`` and ``high`` (``0 < low < high``), uniform in their logarithm."""
    return Distribution("loguniform", (float(low), float(high)))


def uniform(low: float, high: float) -> Distribution:
    """Real numbers between ``low`` and ``high``, uniform."""
    return Distribution("uniform", (float(low), float(high)))


def randint(low: int, high: int) -> Distribution:
    """Integers ``low <= x < high`` (``high`` excluded, as ``tune.randint``)."""
    return Distribution("randint", (low, high))


def choice(values: Sequence[Any]) -> Distribution:
    """One of ``values`` (numbers, strings, booleans)."""
    return Distribution("choice", tuple(values))
