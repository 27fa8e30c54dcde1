"""Recalibration of an ensemble's spread, fitted on held-out data: a spread scale per channel (and
per rollout step) and split-conformal intervals, kept in a checksummed :class:`Calibration`.

For members ``x_1..x_M`` with mean ``mu`` and population std ``sigma`` (ddof=0, what
``mean_std`` returns) at a point whose truth is ``y``:

- **spread scale** ``s`` (one per channel): the members are stretched about their mean,
  ``mu + s (x_m - mu)``, with ``s`` the minimiser of the *fair CRPS* of the stretched members on
  the calibration points (``s sigma`` is then the calibrated std). The fair CRPS is convex in
  ``s`` (``mean_m |s d_m - r| - s * spread``, ``d_m = x_m - mu``, ``r = y - mu``), so a bracket
  over powers of two and a golden-section search find its minimum. CRPS, not the Gaussian NLL:
  it needs no distributional assumption and is the score ``sweep scores`` reports.
- **split-conformal intervals** (Vovk et al. 2005; Lei et al. 2018) at each level ``a``: the
  normalised residuals ``|y - mu| / (s sigma)`` of the ``n`` calibration points of a channel are
  sorted and ``q_a`` is the ``ceil((n + 1) a)``-th smallest (infinite if that exceeds ``n``);
  the interval is ``mu -+ q_a s sigma``. For a new point exchangeable with the calibration points
  it covers the truth with probability at least ``a``. The points of one field are not
  independent, so the guarantee is over samples drawn like the calibration samples, which is
  what the test split measures (see the scores guide).

Everything here takes arrays; :mod:`._calibrated` fits a selection's members on a split the store
holds and applies it in ``mean_std``, ``rollout_mean_std`` and ``predict_interval``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._errors import QueryError
from ._field_scores import pair_sum

FORMAT = 1
METHOD = "fair-CRPS spread scale per channel; split-conformal |y - mean| / (scale * std) quantiles"
GOLDEN_STEPS = 80  # shrinks the bracket by 0.618^80: far below float32's resolution of a scale


def check_levels(levels: Any, what: str) -> tuple[float, ...]:
    """``levels`` as a sorted tuple of distinct floats in (0, 1), or a :class:`QueryError`."""
    values = list(levels) if isinstance(levels, (list, tuple)) else [levels]
    if not values or any(isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1 for v in values):
        raise QueryError(f"{what}(levels={levels!r}): give interval levels in (0, 1), e.g. (0.5, 0.9)")
    return tuple(sorted({float(v) for v in values}))


def _points(a: np.ndarray) -> np.ndarray:
    """``[N, C, ...]`` as ``[C, P]`` float64 (``P`` points of a channel: samples x space)."""
    n, c = a.shape[:2]
    return np.moveaxis(a.astype(np.float64).reshape(n, c, -1), 1, 0).reshape(c, -1)


def fit_scale(values: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """The spread scale per channel minimising the fair CRPS of the stretched members.

    Args:
        values: Members' predictions ``[M, N, C, ...]``, ``M >= 3``.
        truth: ``[N, C, ...]``.

    Returns:
        ``[C]`` float64, each >= 0.

    Examples:
        ```python
        import numpy as np
        from sweep.ensemble import fit_scale

        rng = np.random.default_rng(0)
        center = rng.normal(size=(400, 1, 8))  # [N, C, P]
        truth = center + rng.normal(size=center.shape)  # the truth scatters with std 1 about the center
        members = center + 0.3 * rng.normal(size=(16, *center.shape))  # members spread with std 0.3
        fit_scale(members, truth)  # about [3.6]: > 1, the members were overconfident
        ```

        On an ensemble: ``fit_scale(ens.predict(x_val), y_val)``; :meth:`Ensemble.recalibrate`
        fits it on a split the store holds.
    """
    x, y = np.stack([_points(v) for v in values], 1), _points(truth)  # [C, M, P], [C, P]
    m = x.shape[1]
    if m < 3:
        raise QueryError(
            f"recalibrate: needs at least 3 members to scale a spread, got {m} (with 2 the fair CRPS only falls "
            f"as their spread is stretched: no scale fits)"
        )
    mean = x.mean(1, keepdims=True)
    d, r = x - mean, y - mean[:, 0]
    spread = pair_sum(np.moveaxis(d, 1, 0)) / (2 * m * (m - 1))  # [C, P]
    return np.array([_minimise(d[c], r[c], spread[c]) for c in range(len(d))])


def _minimise(d: np.ndarray, r: np.ndarray, spread: np.ndarray) -> float:
    """The ``s >= 0`` minimising ``mean(mean_m |s d_m - r| - s spread)`` (convex in ``s``)."""

    def crps(s: float) -> float:
        return float(np.mean(np.abs(s * d - r).mean(0) - s * spread))

    grid = [0.0, *(2.0**k for k in range(-12, 13))]
    costs = [crps(s) for s in grid]
    best = int(np.argmin(costs))
    low, high = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
    ratio = (math.sqrt(5) - 1) / 2
    a, b = high - ratio * (high - low), low + ratio * (high - low)
    fa, fb = crps(a), crps(b)
    for _ in range(GOLDEN_STEPS):
        if fa <= fb:
            high, b, fb = b, a, fa
            a = high - ratio * (high - low)
            fa = crps(a)
        else:
            low, a, fa = a, b, fb
            b = low + ratio * (high - low)
            fb = crps(b)
    return (low + high) / 2


def conformal_quantiles(mean: np.ndarray, std: np.ndarray, truth: np.ndarray, levels: tuple[float, ...]) -> np.ndarray:
    """Split-conformal multipliers ``q`` per level and channel: ``mean -+ q * std`` covers at least
    ``level`` of points exchangeable with these.

    Args:
        mean: ``[N, C, ...]``, the ensemble mean.
        std: ``[N, C, ...]``, the (calibrated) std.
        truth: ``[N, C, ...]``.
        levels: Coverage levels in (0, 1).

    Returns:
        ``[levels, C]`` float64 (``inf`` where a level needs more points than there are).

    Examples:
        ```python
        import numpy as np
        from sweep.ensemble import conformal_quantiles

        truth = np.arange(1.0, 10.0).reshape(9, 1)  # residuals 1..9 against a zero mean, std 1
        conformal_quantiles(np.zeros_like(truth), np.ones_like(truth), truth, (0.5, 0.9, 0.95))
        # array([[ 5.], [ 9.], [inf]]): the 5th and 9th smallest; 0.95 needs a 10th point
        ```
    """
    scores = np.sort(conformity(_points(mean), _points(std), _points(truth)), axis=1)
    n = scores.shape[1]
    out = np.empty((len(levels), len(scores)))
    for i, level in enumerate(levels):
        k = math.ceil((n + 1) * level)
        out[i] = scores[:, k - 1] if k <= n else np.inf
    return out


def conformity(mean: np.ndarray, std: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """The conformity score of each point: ``|truth - mean| / std`` (0 where the mean is exact,
    ``inf`` where the std is 0 and it is not). A point is inside ``mean -+ q * std`` when its score
    is at most ``q``: coverage counted on scores is exactly what :func:`conformal_quantiles`
    chose, where ``mean -+ q * std`` can leave out, by rounding, the points whose score is ``q``."""
    residual = np.abs(truth - mean)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(residual == 0, 0.0, residual / std)


def on_channels(per_channel: np.ndarray, like: np.ndarray) -> np.ndarray:
    """``[C]`` values shaped to broadcast against ``like`` ``[N, C, ...]`` along its channel axis."""
    return per_channel.reshape(-1, *([1] * (like.ndim - 2)))


@dataclass(frozen=True, eq=False)
class Calibration:
    """A recalibration fitted on one split of one selection of members: what ``mean_std(...,
    calibrated=True)``, ``rollout_mean_std(..., calibrated=True)`` and ``predict_interval`` apply.

    Attributes:
        split: The split it was fitted on (``"val"``; never the test split a score is reported on).
        config_id: The structural config of the members.
        member_ids: The members (in the selection's order; they apply to these members in any order).
        levels: The interval levels with conformal multipliers.
        scale: Spread scale per channel ``[C]``.
        quantiles: Conformal multipliers ``[levels, C]`` of the calibrated std.
        points: Calibration points per channel (samples x spatial points).
        rollout_scale: ``[T, C]`` per rollout step ``1..T`` (None without trajectories on the split).
        rollout_quantiles: ``[levels, T, C]`` (None likewise).
        store_sha256: The manifest digest of the store the members were read from.
        method: What was fitted, in words.
    """

    split: str
    config_id: str
    member_ids: tuple[int, ...]
    levels: tuple[float, ...]
    scale: np.ndarray
    quantiles: np.ndarray
    points: int
    rollout_scale: np.ndarray | None = None
    rollout_quantiles: np.ndarray | None = None
    store_sha256: str = ""
    method: str = field(default=METHOD)

    def quantile(self, level: Any, what: str) -> np.ndarray:
        """The one-step multipliers ``[C]`` of ``level`` (one of :attr:`levels`)."""
        return self.quantiles[self._level(level, what)]

    def _level(self, level: Any, what: str) -> int:
        if isinstance(level, bool) or not isinstance(level, (int, float)) or float(level) not in self.levels:
            raise QueryError(
                f"{what}(level={level!r}): the calibration has conformal intervals at levels {list(self.levels)}; "
                f"choose one, or recalibrate(levels=[..., {level!r}])"
            )
        return self.levels.index(float(level))

    def rollout(self, steps: int, what: str) -> np.ndarray:
        """The rollout scales ``[steps, C]`` of steps ``1..steps``."""
        if self.rollout_scale is None:
            raise QueryError(
                f"{what}(calibrated=True): this calibration has no rollout scales (the store holds no "
                f"{self.split} trajectories for config {self.config_id}, or too few points per step for its levels); "
                f"only one-step predictions are calibrated"
            )
        if steps > len(self.rollout_scale):
            raise QueryError(
                f"{what}(steps={steps}, calibrated=True): the rollout scales were fitted on "
                f"{len(self.rollout_scale)} steps of the {self.split} trajectories; ask for at most that many"
            )
        return self.rollout_scale[:steps]

    def rollout_quantile(self, level: Any, steps: int, what: str) -> np.ndarray:
        """The rollout multipliers ``[steps, C]`` of ``level`` for steps ``1..steps``."""
        scales = self.rollout(steps, what)
        assert self.rollout_quantiles is not None  # fitted with the rollout scales
        return self.rollout_quantiles[self._level(level, what), : len(scales)]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values, with ``sha256`` of the rest (canonical JSON, sorted keys; an infinite
        multiplier is written ``Infinity``, as Python's json reads and writes it)."""
        body = {
            "format": FORMAT,
            "method": self.method,
            "split": self.split,
            "config_id": self.config_id,
            "member_ids": list(self.member_ids),
            "levels": list(self.levels),
            "points": self.points,
            "store_sha256": self.store_sha256,
            "scale": self.scale.tolist(),
            "quantiles": self.quantiles.tolist(),
            "rollout_scale": None if self.rollout_scale is None else self.rollout_scale.tolist(),
            "rollout_quantiles": None if self.rollout_quantiles is None else self.rollout_quantiles.tolist(),
        }
        return body | {"sha256": _digest(body)}

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write it as JSON (:meth:`to_dict`); :func:`load_calibration` reads it back, checked."""
        out = Path(path)
        out.write_text(json.dumps(self.to_dict(), indent=1, sort_keys=True) + "\n")
        return out

    @classmethod
    def from_dict(cls, body: dict[str, Any], where: str = "calibration") -> Calibration:
        """The calibration of :meth:`to_dict`'s values, its ``sha256`` checked."""
        if not isinstance(body, dict) or body.get("format") != FORMAT or "sha256" not in body:
            raise QueryError(f"{where}: not a seed-sweep calibration (format {FORMAT} with a sha256)")
        rest = {k: v for k, v in body.items() if k != "sha256"}
        if _digest(rest) != body["sha256"]:
            raise QueryError(f"{where}: its sha256 does not match its content: the file was altered; fit it again")

        def array(v: Any) -> np.ndarray | None:
            return None if v is None else np.array(v, np.float64)

        return cls(
            split=rest["split"],
            config_id=rest["config_id"],
            member_ids=tuple(rest["member_ids"]),
            levels=tuple(rest["levels"]),
            scale=np.array(rest["scale"], np.float64),
            quantiles=np.array(rest["quantiles"], np.float64),
            points=rest["points"],
            rollout_scale=array(rest["rollout_scale"]),
            rollout_quantiles=array(rest["rollout_quantiles"]),
            store_sha256=rest["store_sha256"],
            method=rest["method"],
        )


def load_calibration(path: str | os.PathLike[str]) -> Calibration:
    """Read a calibration :meth:`Calibration.save` wrote, its sha256 checked.

    Examples:
        ```python
        sub = ens.where(depth=4).best(8).with_calibration(sweep.ensemble.load_calibration("cal.json"))
        ```
    """
    try:
        body = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise QueryError(f"load_calibration({str(path)!r}): cannot be read as JSON ({e})") from None
    return Calibration.from_dict(body, f"load_calibration({str(path)!r})")


def _digest(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, allow_nan=True).encode()).hexdigest()
