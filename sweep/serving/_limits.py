"""What a request may hold, checked before any work: each refusal names the field, the value and
what is allowed (an HTTP 4xx with that as its JSON body)."""

from __future__ import annotations

import collections
from typing import Any

import numpy as np

from .._input_values import REAL, bad_value, is_real


class BadRequest(Exception):
    """A request the service refuses: ``status`` (4xx), the ``field`` at fault, its ``value`` (as
    text, shortened) and what is ``allowed``."""

    def __init__(self, status: int, field: str, value: Any, allowed: str):
        self.status, self.field, self.value, self.allowed = status, field, _short(value), allowed
        super().__init__(f"{field}: got {self.value}; {allowed}")

    def body(self) -> dict[str, Any]:
        """The JSON body of the response."""
        return {"error": {"field": self.field, "value": self.value, "allowed": self.allowed, "message": str(self)}}


def _short(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_inputs(
    x: np.ndarray, field: str, sample_shape: tuple[int, ...], max_rows: int, dtype: Any = np.float32
) -> np.ndarray:
    """``x`` if it is a finite real array ``(rows, *sample_shape)`` with 1 <= rows <= ``max_rows``
    whose values stay finite in the model's ``dtype`` (``1e39`` overflows float32 to infinity).

    Raises:
        BadRequest: 422 for a wrong shape, dtype, a non-finite value or one out of ``dtype``'s
            range, 413 for too many rows.
    """
    expected = f"(batch, {', '.join(map(str, sample_shape))})"
    if not is_real(x):
        raise BadRequest(422, field, f"dtype {x.dtype}", REAL)
    if x.ndim != len(sample_shape) + 1 or tuple(x.shape[1:]) != tuple(sample_shape) or x.shape[0] < 1:
        raise BadRequest(422, field, f"shape {tuple(x.shape)}", f"give an array of shape {expected}, batch >= 1")
    if x.shape[0] > max_rows:
        raise BadRequest(413, field, f"{x.shape[0]} rows", f"send at most {max_rows} rows per request (split it)")
    bad = bad_value(x, dtype)
    if bad is not None:
        raise BadRequest(422, field, *bad)
    return x


def check_steps(steps: Any, max_steps: int) -> int:
    """``steps`` as an int in 1..``max_steps``.

    Raises:
        BadRequest: 422 unless it is such an integer.
    """
    if isinstance(steps, str) and steps.strip().isdigit():
        steps = int(steps)
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= max_steps:
        raise BadRequest(422, "steps", steps, f"give an integer in 1..{max_steps}")
    return steps


def check_calibrated(calibrated: Any, interval: Any, levels: tuple[float, ...] | None) -> tuple[bool, float | None]:
    """``(calibrated std?, interval level or None)`` of a request, for a service whose calibration
    has ``levels`` (None: a service started without ``--recalibrate``).

    Raises:
        BadRequest: 422 for anything but a boolean ``calibrated`` and a level of the calibration,
            or for either asked of a service without a calibration.
    """
    if isinstance(calibrated, str):
        calibrated = {"true": True, "1": True, "false": False, "0": False, "": False}.get(
            calibrated.strip().lower(), calibrated
        )
    if calibrated is None:
        calibrated = False
    if not isinstance(calibrated, bool):
        raise BadRequest(422, "calibrated", calibrated, "give true or false")
    if isinstance(interval, str):
        try:
            interval = float(interval)
        except ValueError:
            pass
    wanted = calibrated or interval is not None
    if wanted and levels is None:
        field = "calibrated" if calibrated else "interval"
        raise BadRequest(422, field, calibrated if calibrated else interval, "start the service with --recalibrate")
    if interval is not None and (
        isinstance(interval, bool) or not isinstance(interval, (int, float)) or float(interval) not in (levels or ())
    ):
        raise BadRequest(422, "interval", interval, f"give one of the calibrated levels {list(levels or ())}")
    return calibrated, None if interval is None else float(interval)


def check_members(members: Any, member_ids: list[int]) -> list[int] | None:
    """Which members' own predictions to return: None (none), every one (``true``), or the listed
    member ids (a list, or ``"3,5"`` in a query string).

    Raises:
        BadRequest: 422 for anything else, or an id not in the selection.
    """
    if members is None or members is False:
        return None
    if isinstance(members, str):
        text = members.strip().lower()
        if text in ("", "false", "0", "no"):
            return None
        if text in ("true", "1", "yes", "all"):
            return list(member_ids)
        try:
            members = [int(m) for m in text.split(",")]
        except ValueError:
            members = text
    if members is True:
        return list(member_ids)
    allowed = f"give true, false or a list of member ids of this selection ({_ids(member_ids)})"
    if (
        not isinstance(members, list)
        or not members
        or any(isinstance(m, bool) or not isinstance(m, int) for m in members)
    ):
        raise BadRequest(422, "members", members, allowed)
    unknown = sorted(set(members) - set(member_ids))
    if unknown:
        raise BadRequest(422, "members", f"member ids {unknown}", allowed)
    if len(set(members)) < len(members):
        twice = sorted(m for m, n in collections.Counter(members).items() if n > 1)
        raise BadRequest(422, "members", f"member ids {twice} twice", "name each member id once")
    return members


def _ids(member_ids: list[int], limit: int = 10) -> str:
    shown = ", ".join(map(str, sorted(member_ids)[:limit]))
    return shown + (f" and {len(member_ids) - limit} more" if len(member_ids) > limit else "")
