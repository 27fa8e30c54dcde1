"""``sweep.Search``: a model-based search over configurations, each trained as a block of seeds
(the engine is :mod:`sweep.search`; this is the spec's part, plain validated data).

Examples:
    >>> import sweep
    >>> search = sweep.Search(
    ...     space={"optimizer.learning_rate": sweep.loguniform(1e-4, 1e-2), "model.depth": sweep.randint(1, 4)},
    ...     configurations=12,
    ...     batch=4,
    ... )
    >>> search.to_dict()["space"]["model.depth"]
    {'randint': [1, 4]}
    >>> sweep.Search.from_dict(search.to_dict()) == search
    True
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping
from typing import Any

from .._errors import SpecError, did_you_mean
from ..metrics import mode_of
from ._space import Distribution
from ._training import Training
from ._values import is_int, is_number, known_fields, listed_twice, refuse_unknown

__all__ = ["ALGORITHMS", "Search"]

COMBINATIONS_CHECKED = 4096  # a space with more combinations of bounding values has them checked one field at a time

ALGORITHMS = ("tpe", "random", "cmaes", "gp")  # Optuna's samplers (cmaes and gp need extra packages)


@known_fields
@dataclasses.dataclass(frozen=True)
class Search:
    """A search over configurations: a sampler (Optuna's) proposes ``batch`` configurations at a
    time from ``space``, each is trained with every seed of the spec (a block: one trial, one
    program), and the sampler is told the mean of ``metric`` over the seeds; the standard error
    over seeds is recorded beside it. It ends after ``configurations`` configurations.

    Attributes:
        space: Dotted spec fields (``"optimizer.learning_rate"``, ``"model.depth"``,
            ``"training.batch_size"``) to :class:`sweep.Distribution` s (``sweep.loguniform`` ...,
            Tune's ``tune.loguniform`` ..., or TOML tables ``{loguniform = [1e-4, 1e-2]}``). Not
            the problem's fields nor ``sweep_seed`` (the data is loaded once, before the search).
        algorithm: ``"tpe"`` (default; constant liar within a batch), ``"random"``, ``"cmaes"``
            (needs the ``cmaes`` package) or ``"gp"`` (needs ``torch``).
        configurations: How many configurations to propose and train, ``>= 1`` (each different,
            in a space of choices and integers: at most what it holds); raising it and resuming
            continues the same search.
        batch: Configurations proposed (and trained) together, ``1 <= batch <= configurations``;
            those differing only in numeric optimizer fields share one program.
        metric: The validation column the sampler is told: ``"val_loss"`` or ``"val_<metric>"``.
        mode: ``"min"`` or ``"max"``; ``None`` (default): ``"max"`` for a built-in score (``val_accuracy``, ``val_correlation``), else ``"min"``.
        compare: How many of the best configurations the end of the search compares by their
            intervals over seeds (``>= 2``).
    """

    space: Mapping[str, Distribution]
    algorithm: str = "tpe"
    configurations: int = 16
    batch: int = 1
    metric: str = "val_loss"
    mode: str | None = None
    compare: int = 5

    def __post_init__(self) -> None:
        if not isinstance(self.space, Mapping) or not self.space:
            raise SpecError(
                f"`search.space`: got {self.space!r}; give a non-empty mapping of dotted fields to distributions"
            )
        object.__setattr__(self, "space", {str(k): Distribution.of(v, str(k)) for k, v in self.space.items()})
        if self.algorithm not in ALGORITHMS:
            raise SpecError(
                f"`search.algorithm`: got {self.algorithm!r}{did_you_mean(str(self.algorithm), ALGORITHMS)}; "
                f"choose one of {', '.join(ALGORITHMS)}"
            )
        for field, low in (("configurations", 1), ("batch", 1), ("compare", 2)):
            value = getattr(self, field)
            if not is_int(value) or value < low:
                raise SpecError(f"`search.{field}`: got {value!r}; must be an integer >= {low}")
            object.__setattr__(self, field, int(value))
        if self.batch > self.configurations:
            raise SpecError(
                f"`search.batch`: got {self.batch}, more than `search.configurations` ({self.configurations}); "
                f"a batch is proposed from the configurations still to try: lower batch or raise configurations"
            )
        if not isinstance(self.metric, str) or not self.metric.startswith("val_"):
            raise SpecError(
                f'`search.metric`: got {self.metric!r}; give a validation column, "val_loss" or "val_<metric>" '
                f"(a search is a choice, and choices rank on the validation set)"
            )
        if self.mode not in (None, "min", "max"):
            raise SpecError(f"`search.mode`: got {self.mode!r}; choose min or max (or leave it out: by the metric)")

    @property
    def size(self) -> int | None:
        """How many configurations the space holds (None: a field drawn from real numbers)."""
        counts = [d.count for d in self.space.values()]
        return None if None in counts else math.prod(c for c in counts if c is not None)

    def check_new(self, apply: Callable[[dict[str, Any]], Any]) -> None:
        """What a search about to run is held to, beyond :meth:`check_fields` (checks added after
        searches were stored that fail them, so those stay readable): a choice listing a value
        twice, more ``configurations`` than the space holds, values that make no valid spec
        together (``apply`` builds one)."""
        for key, dist in self.space.items():
            twice = listed_twice(dist.args) if dist.kind == "choice" else None
            if twice is not None:
                raise SpecError(f"`search.space.{key}`: choice lists {twice!r} twice; give each value once")
        size = self.size
        if size is not None and self.configurations > size:
            each = " x ".join(f"{k}: {d.count} values" for k, d in self.space.items())
            raise SpecError(
                f"`search.configurations`: got {self.configurations}, but the space holds {size} configuration(s) "
                f"({each}); search at most {size}, or train every one of them as a grid"
            )
        self._check_combinations(apply)

    @property
    def direction(self) -> str:
        """``"min"`` or ``"max"``: :attr:`mode`, or where that is None the metric's
        (:func:`sweep.metrics.mode_of`), so that a spec changed with ``dataclasses.replace(search,
        metric=...)`` follows its new metric."""
        return mode_of(self.metric, self.mode)

    def check_metric(self, training: Training) -> None:
        """Refuse a ``metric`` that members trained with ``training`` do not report."""
        names = training.validation_columns()
        if self.metric not in names:
            raise SpecError(
                f"`search.metric`: got {self.metric!r}{did_you_mean(self.metric, names)}; the members are "
                f"evaluated on {', '.join(names)} (add the metric to training.metrics to search on it)"
            )

    def check_fields(self, parts: Mapping[str, Mapping[str, Any]], apply: Callable[[dict[str, Any]], Any]) -> None:
        """Refuse a field the data depends on, a distribution its field cannot take (``parts``: the
        spec's parts as dicts), and a range whose ends make no valid spec (``apply`` builds one)."""
        for key, dist in self.space.items():
            part, _, leaf = key.partition(".")
            if part not in ("model", "optimizer", "training"):
                why = "the data is loaded once before the search" if part == "problem" else "seeds are what it observes"
                raise SpecError(
                    f"`search.space`: {key!r} cannot be searched; {why}: search model.<option>, "
                    f"optimizer.<option> or training.<field>"
                )
            current = parts[part].get(leaf)
            numbers_only = is_number(current) and not (is_int(current) and dist.real)
            if current is not None and dist.kind != "choice" and not numbers_only:
                allowed = "sweep.choice([...])" if not is_number(current) else "sweep.randint or sweep.choice"
                raise SpecError(
                    f"`search.space.{key}`: {dist.kind} draws {'real numbers' if dist.real else 'integers'}, and "
                    f"{key} is {current!r} ({type(current).__name__}); use {allowed}"
                )
            for value in dist.values():  # each end of the range must make a valid spec
                try:
                    apply({key: value})
                except SpecError as e:
                    if current is not None or dist.kind == "choice":
                        raise
                    # a field the spec leaves at its default: say which draw failed, and what else to use
                    raise SpecError(
                        f"`search.space.{key}`: {dist.kind} draws {'real numbers' if dist.real else 'integers'}, and "
                        f"{key} = {value!r} makes no valid spec ({e}); give a range whose ends are valid, or "
                        f"sweep.choice([...]) of the values it takes"
                    ) from None

    def _check_combinations(self, apply: Callable[[dict[str, Any]], Any]) -> None:
        """Refuse a space where values valid alone make no valid spec together (``training.cut``
        drawn beside ``training.unroll`` = 1): every combination of the fields' bounding values
        (:meth:`Distribution.values`), where there are at most :data:`COMBINATIONS_CHECKED`, else
        each field's alone."""
        keys, bounds = list(self.space), [d.values() for d in self.space.values()]
        if math.prod(map(len, bounds)) <= COMBINATIONS_CHECKED:
            points = (dict(zip(keys, values)) for values in itertools.product(*bounds))
        else:  # each field's values alone (which check_new's apply may refuse beside the spec's others)
            points = ({key: value} for key, values in zip(keys, bounds) for value in values)
        for point in points:
            try:
                apply(point)
            except SpecError as e:
                shown = ", ".join(f"{k}={v!r}" for k, v in point.items())
                raise SpecError(
                    f"`search.space`: {shown} makes no valid spec ({e}), and the search may propose it; give a "
                    f"space whose every combination of values is valid (narrow a range or a choice, or fix a field "
                    f"in the spec instead)"
                ) from None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["space"] = {k: d.to_dict() for k, d in self.space.items()}
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Search:
        refuse_unknown(data, sorted(f.name for f in dataclasses.fields(cls)), "`search`")
        if "space" not in data:
            raise SpecError("`search.space`: missing; give the distributions to search over")
        return cls(**data)
