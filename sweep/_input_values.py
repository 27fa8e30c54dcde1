"""The values an ensemble's inputs may hold (the one rule of ``sweep predict`` and the service):
real numbers, finite, and finite in the models' precision (``1e39`` overflows float32 to infinity)."""

from __future__ import annotations

from typing import Any

import numpy as np

REAL = "give real numbers (a float or integer array)"


def is_real(x: np.ndarray) -> bool:
    """Whether ``x`` holds real numbers (floats or integers, not booleans)."""
    return (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer)) and x.dtype != np.bool_


def bad_value(x: np.ndarray, dtype: Any = np.float32) -> tuple[str, str] | None:
    """``(what, allowed)`` of the first value of the real array ``x`` (``[rows, ...]``) that is not
    finite, or not finite in ``dtype``: ``("nan in row 2", "give finite numbers (no NaN or
    infinity)")``; None where every value is fine."""
    if np.issubdtype(x.dtype, np.floating):
        finite = np.isfinite(x)
        if not finite.all():
            return f"{x[~finite].flat[0]} in row {_row(~finite)}", "give finite numbers (no NaN or infinity)"
    largest = np.finfo(dtype).max
    if not np.issubdtype(x.dtype, np.floating) or np.finfo(x.dtype).max > largest:
        over = np.abs(x) > largest
        if over.any():
            allowed = f"give numbers within {np.dtype(dtype).name}'s range (|value| <= {float(largest):.4g})"
            return f"{x[over].flat[0]} in row {_row(over)}", allowed
    return None


def _row(mask: np.ndarray) -> int:
    return int(np.argwhere(mask)[0][0]) if mask.ndim else 0
