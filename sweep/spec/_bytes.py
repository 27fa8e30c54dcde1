"""Sizes in bytes as a spec gives them: an integer, or text with a binary or decimal unit
(``"512MiB"``, ``"4GiB"``, ``"1.5GB"``); one rule for every size field."""

from __future__ import annotations

import re
from typing import Any

from .._errors import SpecError

UNITS = {
    "": 1,
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
    "TIB": 2**40,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def as_bytes(value: Any, field: str) -> int:
    """``value`` in bytes: an integer ``>= 1`` or text such as ``"4GiB"`` (units B, KB, MB, GB,
    TB, KiB, MiB, GiB, TiB, case-insensitive).

    Raises:
        SpecError: Not a positive size; the message names ``field``, the value and the units.

    Examples:
        >>> as_bytes("1.5KiB", "training.data_memory")
        1536
        >>> as_bytes(4096, "training.data_memory")
        4096
    """
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    match = _SIZE.match(value) if isinstance(value, str) else None
    unit = match and UNITS.get(match.group(2).upper())
    if not match or unit is None or int(float(match.group(1)) * unit) < 1:
        raise SpecError(
            f"`{field}`: got {value!r}; give a size in bytes, an integer >= 1 or text with a unit "
            f'such as "512MiB" or "4GiB" (units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)'
        )
    return int(float(match.group(1)) * unit)


def size_text(num_bytes: int) -> str:
    """``num_bytes`` for people: ``"1.5 GiB"``, ``"312 KiB"``, ``"17 B"``.

    Examples:
        >>> size_text(1536)
        '1.5 KiB'
    """
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if num_bytes >= size:
            return f"{num_bytes / size:.3g} {unit}"
    return f"{num_bytes} B"
