"""The one rule every value of a spec passes: plain, finite data that TOML and Parquet can hold."""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeGuard, TypeVar

from .._errors import SpecError, did_you_mean

INT64_LIMIT = 2**63  # integers stored in Parquet columns


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def plain(value: Any, field: str) -> Any:
    """``value`` as plain JSON/TOML data: tuples become lists, NumPy scalars Python numbers.

    The one place every option and grid value of a spec passes: numbers must be finite and
    integers fit in 64 bits, so that no NaN, infinity or overflow reaches a trial or a table.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        if not -INT64_LIMIT <= int(value) < INT64_LIMIT:
            raise SpecError(f"`{field}`: got {int(value)}; integers must lie in -2**63..2**63-1")
        return int(value)
    if isinstance(value, numbers.Real):
        if not math.isfinite(value):
            raise SpecError(f"`{field}`: got {float(value)!r}; numbers must be finite (no NaN or infinity)")
        return float(value)
    if isinstance(value, (list, tuple)):
        return [plain(v, f"{field}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise SpecError(f"`{field}`: got keys {list(value)!r}; keys must be strings")
        return {k: plain(v, f"{field}.{k}") for k, v in value.items()}
    raise SpecError(
        f"`{field}`: got {value!r} ({type(value).__name__}); give plain data (numbers, strings, booleans, "
        f"lists or tables of them) so that the spec can be written to TOML and identified"
    )


def listed_twice(values: Sequence[Any]) -> Any | None:
    """The first value ``values`` list twice (equal numbers, ``1`` and ``1.0`` too, or equal values
    of one type: ``True`` is not ``1``), or None."""
    for i, value in enumerate(values):
        for other in values[:i]:
            same_kind = type(value) is type(other) or (is_number(value) and is_number(other))
            if same_kind and value == other:
                return value
    return None


def is_int(value: Any) -> TypeGuard[int]:
    """Python or NumPy integers (not booleans)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _unknown(data: Iterable[str], allowed: Iterable[str], where: str) -> str | None:
    """``"<where>: unknown field(s) [...] (did you mean ...?); allowed: ..."``, or None."""
    names = list(allowed)
    unknown = sorted(set(data) - set(names))
    if unknown:
        hint = "".join(did_you_mean(u, names) for u in unknown)
        return f"{where}: unknown field(s) {unknown}{hint}; allowed: {', '.join(names)}"
    return None


def refuse_unknown(data: Mapping[str, Any], allowed: Iterable[str], where: str) -> None:
    """A :class:`SpecError` naming every key of ``data`` outside ``allowed``, with the closest
    allowed name of each and the list of them (``where``: the table, as an error names it)."""
    if message := _unknown(data, allowed, where):
        raise SpecError(message)


Part = TypeVar("Part")


def known_fields(cls: type[Part]) -> type[Part]:
    """A dataclass whose constructor refuses an unknown keyword as :func:`refuse_unknown` does: a
    :class:`SpecError` naming the closest field and every field, as every other mistake in a spec
    (Python's own ``TypeError`` names neither: ``SweepSpec(trainig=...)``)."""
    fields = dataclasses.fields(cls)  # pyright: ignore[reportArgumentType]  (a dataclass, as decorated)
    init, names = cls.__init__, [f.name for f in fields if f.init]

    @functools.wraps(init)
    def checked(self, *args: Any, **kwargs: Any) -> None:
        if message := _unknown(kwargs, names, f"{cls.__name__}()"):
            raise SpecError(message)
        init(self, *args, **kwargs)

    cls.__init__ = checked
    return cls
