"""A selection's recalibration: fitted on a split the store holds (validation by default), applied
to its mean/std and rollouts, turned into intervals, and scored before and after on another split
(part of :class:`~sweep.ensemble.Ensemble`; the formulas: :mod:`._calibration`).

```python
sub = sweep.load("runs/heat").best(8).recalibrate("val", levels=(0.5, 0.9))
mean, std = sub.mean_std(x, calibrated=True)         # std scaled per channel
low, high = sub.predict_interval(x, level=0.9)       # split-conformal 90% intervals
sub.calibration_scores("test")                       # CRPS, spread-skill, coverage before / after
sub.calibration.save("heat-best8.calibration.json")  # checksummed; with_calibration(load_calibration(...))
```
"""

from __future__ import annotations

import copy
import itertools
import math
import os
from pathlib import Path
from typing import Any, Self

import numpy as np
import pyarrow as pa

from .._batches import pieces
from .._errors import QueryError, warn
from .._layout import SPLIT_FILES
from ._calibration import Calibration, check_levels, conformal_quantiles, conformity, fit_scale, on_channels
from ._export import export_selection
from ._field_scores import crps_terms
from ._predictions import BATCH_BYTES, DEFAULT_CHUNK, Predictions


class Calibrated(Predictions):
    """:class:`~sweep.ensemble._predictions.Predictions` with a recalibration (part of
    :class:`~sweep.ensemble.Ensemble`): a selection made by ``where`` or ``best`` starts without
    one, since a calibration belongs to the members it was fitted on."""

    _calibration: Calibration | None = None

    @property
    def calibration(self) -> Calibration | None:
        """The :class:`~sweep.ensemble.Calibration` of this selection (None until :meth:`recalibrate`
        or :meth:`with_calibration`)."""
        return self._calibration

    def recalibrate(self, split: str = "val", levels: Any = (0.5, 0.9), chunk_size: int = DEFAULT_CHUNK) -> Self:
        """This selection with a recalibration fitted on the ``split`` samples (and trajectories)
        the store holds: a spread scale per channel (per rollout step too) minimising the fair
        CRPS, and split-conformal intervals at ``levels`` (:mod:`sweep.ensemble._calibration`).

        Args:
            split: ``"val"`` (default; fit on the test split only to study the method, since its
                scores are then no longer held out).
            levels: Interval levels in (0, 1) for :meth:`predict_interval`.
            chunk_size: Members per compiled call.

        Returns:
            A copy of this selection holding the :class:`~sweep.ensemble.Calibration`.

        Raises:
            QueryError: No samples of ``split`` in the store, fewer than 3 members (or 2 distinct),
                several structural configs, targets not of the outputs' shape, bad ``levels``, or
                a level that needs more points than the split holds.

        Examples:
            ```python
            sub = ens.where(depth=4).best(8).recalibrate()
            sub.calibration.scale  # [channels]: > 1 where the members were overconfident
            ```
        """
        levels = check_levels(levels, "recalibrate")
        _check_spread(self._member_ids())
        x, y = self.split_samples(split, "recalibrate")
        points = int(y.size // y.shape[1])  # per channel: samples x grid points
        if (few := _too_few(points, levels)) is not None:
            raise QueryError(
                f"recalibrate(levels={list(levels)}): {few} (samples x grid points), and the {split} split holds "
                f"{points}; give lower levels (e.g. levels=(0.5,)), or more {split} samples"
            )
        values = self._multiset(self.predict(x, chunk_size))
        scale, quantiles = _fit(values, y, levels)
        rollout_scale = rollout_quantiles = None
        reference = self._rollout_reference(split, "recalibrate")
        start, traj = reference if reference is not None else (None, None)  # with history: from the first h states
        per_step = 0 if traj is None else int(traj[:, 0].size // traj.shape[2])  # trajectories x grid points
        if traj is not None and (few := _too_few(per_step, levels)) is not None:
            warn(
                f"recalibrate(levels={list(levels)}): rollouts left uncalibrated: {few} at each step (trajectories x "
                f"grid points), and the store's {split} trajectories hold {per_step}; give lower levels to calibrate "
                f"them too"
            )
        elif traj is not None:
            states = self._multiset(self.rollout(start, traj.shape[1] - 1, chunk_size))
            fitted = [_fit(states[:, t], traj[:, t], levels) for t in range(1, traj.shape[1])]
            rollout_scale = np.stack([s for s, _ in fitted])
            rollout_quantiles = np.stack([q for _, q in fitted], 1)
        calibration = Calibration(
            split=split,
            config_id=self._config_key("recalibrate"),
            member_ids=self._member_ids(),
            levels=levels,
            scale=scale,
            quantiles=quantiles,
            points=points,
            rollout_scale=rollout_scale,
            rollout_quantiles=rollout_quantiles,
            store_sha256=self._store.manifest_sha256,
        )
        return self._with(calibration)

    def with_calibration(self, calibration: Calibration) -> Self:
        """This selection with a calibration fitted before (e.g. read by
        :func:`~sweep.ensemble.load_calibration`); it must be of these members, in any order.

        Raises:
            QueryError: The calibration was fitted on other members, or on another store (or
                another generation of this one: re-aggregating may renumber members).
        """
        if not isinstance(calibration, Calibration):
            raise QueryError(f"with_calibration({calibration!r}): give a Calibration (load_calibration(path))")
        store = self._store.manifest_sha256
        if calibration.store_sha256 and calibration.store_sha256 != store:
            raise QueryError(
                f"with_calibration(): it was fitted on members of the store whose manifest has sha256 "
                f"{calibration.store_sha256[:12]}..., this selection is of the store {store[:12]}... (another "
                f"store, or this one aggregated again since, which may renumber its members); recalibrate() "
                f"this selection"
            )
        ids = self._member_ids()
        if sorted(calibration.member_ids) != sorted(ids):  # the scales do not depend on the members' order
            raise QueryError(
                f"with_calibration(): it was fitted on members {sorted(calibration.member_ids)[:10]} of config "
                f"{calibration.config_id}, this selection holds {sorted(ids)[:10]}; select those members or "
                f"recalibrate() this selection"
            )
        return self._with(calibration)

    def _multiset(self, values: np.ndarray) -> np.ndarray:
        """``values`` ``[members, ...]`` (in this selection's order) as the members the statistics
        weigh equally: each member once here (a :class:`~sweep.ensemble.Blend` repeats a member
        as often as the greedy selection chose it)."""
        return values

    def _member_ids(self) -> tuple[int, ...]:
        """The member ids a calibration of this selection names (those of :meth:`_multiset`)."""
        return tuple(int(i) for i in self._multiset(self._ids()))

    def _config_key(self, what: str) -> str:
        """The structural config of these members, as a calibration and an export name it."""
        return self.one_config(what).config_id

    def _rollout_reference(self, split: str, what: str) -> tuple[np.ndarray, np.ndarray] | None:
        """``(x0, reference)`` of rollouts from the stored trajectories of ``split`` of these
        members' config (see :meth:`rollout_start`; None: none stored)."""
        config = self.one_config(what)
        traj = self._store.trajectories(config.config_id, split)
        return None if traj is None else self.rollout_start(config, traj)

    def _weighted_parts(self) -> tuple[list[Predictions], np.ndarray | None]:
        """One selection per structural config (the members in this order) and the members'
        weights (None: equal), for an export."""
        return [self], None

    def _with(self, calibration: Calibration) -> Self:
        out = copy.copy(self)  # the same rows (and, held, the same parameters): immutable, shared
        out._calibration = calibration
        return out

    def _calibrated(self, what: str) -> Calibration:
        if self._calibration is None:
            raise QueryError(
                f"{what}: this selection has no calibration; call .recalibrate() (fits on the validation "
                f"split) or .with_calibration(load_calibration(path)) first"
            )
        return self._calibration

    def mean_std(
        self,
        x: Any,
        chunk_size: int = DEFAULT_CHUNK,
        calibrated: bool = False,
        *,
        batch_size: int | None = None,
        out: tuple[Any, Any] | None = None,
    ) -> tuple[Any, Any]:
        """Mean and population std (ddof=0) over members of :meth:`predict`, streamed (float64 sums);
        ``calibrated=True``: the std times the calibration's spread scale of each channel.

        Args:
            x: Inputs ``[batch, *sample_shape]``: an array, or an array-like larger than memory
                (an ``h5py.Dataset``, a ``np.memmap``) read ``batch_size`` samples at a time.
            chunk_size: Members per compiled call.
            calibrated: Scale the std by :attr:`calibration` (see :meth:`recalibrate`).
            batch_size: Samples read and run at a time (see :meth:`predict`).
            out: ``(mean, std)`` array-likes to write into, each ``[batch, *out]`` (see :meth:`predict`).

        Returns:
            ``(mean, std)``, each ``[batch, *out]``: ``out`` where given.

        Raises:
            QueryError: As :meth:`predict`; ``calibrated=True`` without a calibration.

        Examples:
            ```python
            mean, std = ens.where(depth=4).best(8).mean_std(x)
            mean, std = ens.where(depth=4).mean_std(f["x"], out=(g["mean"], g["std"]))  # h5py datasets
            ```
        """
        calibration = self._calibrated("mean_std(calibrated=True)") if calibrated else None
        mean, std = super().mean_std(x, chunk_size, batch_size=batch_size, out=out)
        if calibration is None:
            return mean, std
        if isinstance(std, np.ndarray) and out is None:
            return mean, (std * on_channels(calibration.scale, std)).astype(std.dtype)
        rows = max(1, BATCH_BYTES // max(1, np.dtype(std.dtype).itemsize * math.prod(std.shape[1:])))
        for part in pieces(len(std), rows):  # in place, a batch at a time: ``out`` may be larger than memory
            values = np.asarray(std[part])
            std[part] = (values * on_channels(calibration.scale, values)).astype(values.dtype)
        return mean, std

    def rollout_mean_std(
        self, x0: Any, steps: int, chunk_size: int = DEFAULT_CHUNK, calibrated: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`~sweep.ensemble._predictions.Predictions.rollout_mean_std`; ``calibrated=True``:
        the std of step ``t`` times the calibration's scale of step ``t`` per channel (fitted on as
        many steps as the split's trajectories have: no more can be asked for)."""
        calibration = self._calibrated("rollout_mean_std(calibrated=True)") if calibrated else None
        scales = calibration.rollout(steps, "rollout_mean_std") if calibration is not None else None
        mean, std = super().rollout_mean_std(x0, steps, chunk_size)
        if scales is not None:
            std[1:] = std[1:] * scales.reshape(steps, 1, -1, *([1] * (std.ndim - 3)))
        return mean, std

    def predict_interval(
        self, x: Any, level: float = 0.9, chunk_size: int = DEFAULT_CHUNK
    ) -> tuple[np.ndarray, np.ndarray]:
        """The split-conformal central interval at ``level``: ``mean -+ q * std`` with ``std`` the
        calibrated std and ``q`` the calibration's multiplier of each channel.

        Args:
            x: Inputs ``[batch, *sample_shape]``.
            level: One of the calibration's levels.
            chunk_size: Members per compiled call.

        Returns:
            ``(low, high)``, each ``[batch, *out]``.

        Raises:
            QueryError: No calibration, or a level it has no multiplier of.

        Examples:
            ```python
            low, high = ens.best(8).recalibrate().predict_interval(x, level=0.9)
            ```
        """
        q = self._calibrated("predict_interval").quantile(level, "predict_interval")
        mean, std = self.mean_std(x, chunk_size, calibrated=True)
        half = (on_channels(q, std) * std).astype(std.dtype)
        return mean - half, mean + half

    def calibration_scores(self, split: str = "test", chunk_size: int = DEFAULT_CHUNK) -> pa.Table:
        """Scores on ``split`` before and after the calibration (column ``calibrated``): fair CRPS,
        spread-skill ratio and the coverage of the central interval at each calibration level
        (``coverage_50``, ``coverage_90``, ...): before, between the members' empirical quantiles
        (as :meth:`scores`); after, of :meth:`predict_interval`'s conformal intervals (counted on
        the conformity scores they were chosen on, so that a point whose score is the quantile
        counts as inside whatever the rounding of ``mean -+ q * std``), and CRPS and spread of the
        members stretched by the scale. Rows ``one_step`` (step 0) and, with rollout
        scales and trajectories of ``split``, ``rollout`` per step.

        Examples:
            ```python
            ens.best(8).recalibrate("val").calibration_scores("test").to_pylist()
            ```
        """
        calibration = self._calibrated("calibration_scores")
        if split == calibration.split:
            warn(
                f"calibration_scores(split={split!r}): the calibration was fitted on the {split} split, so the scores "
                f"after it are not held out (they flatter it); fit on one split and score on the other"
            )
        x, y = self.split_samples(split, "calibration_scores")
        values = self._multiset(self.predict(x, chunk_size))
        rows = _scored(values, y, calibration.scale, calibration.quantiles, calibration.levels, "one_step", 0)
        reference = self._rollout_reference(split, "calibration_scores")
        if (
            reference is not None
            and calibration.rollout_scale is not None
            and calibration.rollout_quantiles is not None
        ):
            start, traj = reference
            steps = min(traj.shape[1] - 1, len(calibration.rollout_scale))
            states = self._multiset(self.rollout(start, steps, chunk_size))
            for t in range(1, steps + 1):
                scale, quantiles = calibration.rollout_scale[t - 1], calibration.rollout_quantiles[:, t - 1]
                rows += _scored(states[:, t], traj[:, t], scale, quantiles, calibration.levels, "rollout", t)
        return pa.Table.from_pylist(rows)

    def export(self, path: str | os.PathLike[str], steps: int | None = None) -> Path:
        """Write this selection's batched mean/std and rollout as serialised StableHLO
        (``jax.export``), weights and calibration inside, with a ``manifest.json`` of shapes,
        members and a sha256 per part: loadable with ``jax`` alone
        (:mod:`sweep.ensemble._export`; ``sweep verify`` checks it).

        Args:
            path: The directory to write: a new one (created) or an empty one.
            steps: Rollout steps of ``rollout.jaxexport`` (default: the calibration's rollout
                steps, else 10).

        Returns:
            The directory.

        Raises:
            QueryError: ``path`` exists and is not an empty folder (an earlier export, other
                files), before any work; or ``steps`` is not an integer >= 1.

        Examples:
            ```python
            ens.best(8).recalibrate().export("heat-best8")
            mean_std = jax.export.deserialize(Path("heat-best8/mean_std.jaxexport").read_bytes())
            mean, std = mean_std.call(x)
            ```
        """
        return export_selection(self, *self._weighted_parts(), self.calibration, path, steps)

    def split_samples(self, split: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
        """The stored samples of ``split`` of this selection's config, real targets of the outputs' shape."""
        if split not in SPLIT_FILES:
            raise QueryError(f'{what}(split={split!r}): choose "val" or "test"')
        config = self.one_config(what)
        found = self._store.samples(config.config_id, split)
        if found is None:
            raise QueryError(
                f"{what}(split={split!r}): the store holds no {split} samples for config {config.config_id} "
                f"(a problem without a validation set, or a store written before they were kept)"
            )
        x, y = found
        if not np.issubdtype(y.dtype, np.floating) or y.ndim < 2:
            raise QueryError(
                f"{what}: config {config.config_id} has targets {y.dtype} {y.shape[1:]}; a calibration needs "
                f"real-valued targets with a channel axis, [samples, channels, ...]"
            )
        return x, y


def _check_spread(member_ids: tuple[int, ...]) -> None:
    """A spread to scale: at least 3 members, 2 of them distinct (with 2 the fair CRPS of the
    stretched members, ``max(0, |y - mu| - s |d|)``, only falls as ``s`` grows: no scale fits)."""
    if len(member_ids) < 3 or len(set(member_ids)) < 2:
        counted = (
            "" if len(set(member_ids)) == len(member_ids) else " (a greedy blend counts a member as often as chosen)"
        )
        raise QueryError(
            f"recalibrate: needs at least 3 members, 2 of them distinct, to fit a spread; this selection counts "
            f"members {list(member_ids)}{counted}. With 2 the fair CRPS only falls as their spread is stretched, "
            f"and one member has no spread: select more members (best(k) with k >= 3, or greedy over more)"
        )


def _too_few(points: int, levels: tuple[float, ...]) -> str | None:
    """What is missing where a level's conformal multiplier, the ``ceil((points + 1) level)``-th
    smallest of ``points`` residuals per channel, is beyond them (None: every level has one)."""
    for level in levels:
        if math.ceil((points + 1) * level) > points:
            needed = next(n for n in itertools.count(points + 1) if math.ceil((n + 1) * level) <= n)
            return f"the {level:g} interval needs at least {needed} points per channel"
    return None


def _fit(values: np.ndarray, truth: np.ndarray, levels: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray]:
    """``(scale [C], conformal multipliers [levels, C])`` of members ``[M, N, C, ...]``."""
    if values.shape[1:] != truth.shape:
        raise QueryError(
            f"recalibrate: the members' outputs {values.shape[2:]} are not of the targets' shape {truth.shape[1:]}"
        )
    scale = fit_scale(values, truth)
    mean, std = values.mean(0, dtype=np.float64), values.std(0, dtype=np.float64)
    return scale, conformal_quantiles(mean, std * on_channels(scale, std), truth, levels)


def _scored(
    values: np.ndarray,
    truth: np.ndarray,
    scale: np.ndarray,
    quantiles: np.ndarray,
    levels: tuple[float, ...],
    kind: str,
    step: int,
) -> list[dict[str, Any]]:
    """The rows before and after calibration of members ``[M, N, C, ...]`` against ``truth``."""
    x, y = values.astype(np.float64), truth.astype(np.float64)
    mean, std = x.mean(0), x.std(0)
    stretched = mean + on_channels(scale, std) * (x - mean)
    rows = []
    for calibrated, members in ((False, x), (True, stretched)):
        skill, spread = crps_terms(members, y)
        variance = members.var(0, ddof=1).mean()
        row = {"kind": kind, "step": step, "calibrated": calibrated, "crps": float((skill - spread).mean())}
        rmse = float(np.sqrt(np.square(mean - y).mean()))
        row["spread_skill"] = float(np.sqrt((len(x) + 1) / len(x) * variance)) / rmse if rmse else float("nan")
        for level, q in zip(levels, quantiles, strict=True):
            if calibrated:  # on the conformity scores the quantiles were chosen on
                covered = conformity(mean, on_channels(scale, std) * std, y) <= on_channels(q, std)
            else:
                low, high = np.quantile(x, [(1 - level) / 2, (1 + level) / 2], axis=0)
                covered = (low <= y) & (y <= high)
            row[f"coverage_{level * 100:g}"] = float(covered.mean())
        rows.append(row)
    return rows
