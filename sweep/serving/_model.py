"""What a replica serves: one generation of the store, its selection held in memory.

:class:`ServedModel` opens a generation once (verified as every reader does; no code the store
names is imported), applies the selection, holds the members' parameters
(:class:`sweep.ensemble.HeldEnsemble`) and compiles the forward pass for every batch size it
pads batches to. It knows nothing of HTTP or Ray: :mod:`._deployment` wraps it.
"""

from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from .. import _batches
from .._errors import QueryError
from ..ensemble import Blend, Calibration, Ensemble, HeldEnsemble, load
from ..problems import normalizations_json
from ._limits import BadRequest, check_members
from ._options import LEVELS


@dataclass(frozen=True)
class Selection:
    """Which members to serve, applied to every generation opened: ``where``, then ``best``, then
    ``greedy`` steps of :meth:`~sweep.Ensemble.select_greedy` (a :class:`~sweep.ensemble.Blend`,
    of several structural configs maybe), or fixed ``member_ids`` with their ``counts`` (a
    selection given as an :class:`~sweep.Ensemble` or a ``Blend``: it cannot follow a newer
    generation, whose member ids may differ)."""

    where: dict[str, Any] = field(default_factory=dict)
    best: int | None = None
    metric: str = "val_loss"
    mode: str | None = None
    pool: bool = True  # False: a selection pooling several values of a grid column `where` leaves free is refused
    member_ids: tuple[int, ...] | None = None
    recalibrate: bool = False
    greedy: int | None = None
    counts: tuple[int, ...] | None = None
    calibration: Calibration | None = None  # of the fixed members (an Ensemble served with its calibration)
    trust_code: bool = False  # build a model the store names by import path (sweep.load's trust_code)

    def apply(self, ens: Ensemble) -> Ensemble | Blend:
        if self.member_ids is not None:
            ens = _ordered(ens.where(member_id=list(self.member_ids)), self.member_ids)
            chosen = ens if self.counts is None else Blend.of(ens, self.counts)
            return chosen if self.calibration is None else chosen.with_calibration(self.calibration)
        if self.where:
            ens = ens.where(**self.where)
        if self.best is not None:
            ens = ens.best(self.best, metric=self.metric, mode=self.mode)
        if self.greedy is not None:  # blends configurations by design
            return ens.select_greedy(self.greedy, metric="crps", split="val")
        if not self.pool and (free := ens.free_columns(self.where)):
            named = "; ".join(f"{c} takes {values}" for c, values in free.items())
            raise QueryError(
                f"ServeOptions(where={self.where!r}): {named}: members trained with different settings would be "
                f"pooled. Fix {', '.join(free)} in where (--where), or pass pool=True (--pool) to pool over them"
            )
        return ens


def hold(selected: Ensemble | Blend) -> HeldEnsemble | Blend:
    """The selection with its parameters held in memory (a blend: each structural config's part)."""
    if isinstance(selected, Blend):
        held = Blend([HeldEnsemble(Ensemble(p.store, p.index)) for p in selected.parts], selected.counts)
    else:
        held = HeldEnsemble(selected)
    return held if selected.calibration is None else held.with_calibration(selected.calibration)


def generation_of(root: str) -> str:
    """The generation of a store root (``.../.ensembles/000007`` -> ``"000007"``); ``""`` for a
    store directory that is no generation (a copied store)."""
    parent, _, name = root.rstrip("/").rpartition("/")
    return name if parent.rpartition("/")[2].startswith(".") else ""


class ServedModel:
    """One generation's selection, held and compiled for ``buckets`` batch sizes.

    Args:
        root: the store (a generation directory, or any path :func:`sweep.load` opens).
        selection: the members to serve.
        buckets: batch sizes (rows) to compile; a batch is padded to the smallest that holds it.

    Raises:
        QueryError: if the selection matches nothing, spans several structural configs or (``pool``
            False) pools members trained with different settings.
        StoreError: if the store cannot be read.
    """

    def __init__(self, root: str | os.PathLike, selection: Selection, buckets: tuple[int, ...]):
        self.held = hold(selection.apply(load(root, trust_code=selection.trust_code)))
        if selection.recalibrate:  # fitted on this generation's validation split, with its parameters held
            self.held = self.held.recalibrate("val", LEVELS)
        first = self.held.parts[0] if isinstance(self.held, Blend) else self.held
        assert isinstance(first, HeldEnsemble)
        self.first, self.sample_shape, self.dtype = first, first.sample_shape, first.dtype
        self.rollout_shape = first.rollout_shape
        self.root, self.buckets = self.held.store.root, tuple(sorted(buckets))
        self.generation = generation_of(self.root)
        self.member_ids = self.held.index["member_id"].to_pylist()
        self.forward_passes, self.forward_seconds, self.rows_run = 0, 0.0, 0
        self._lock = threading.Lock()
        out: Any = None
        for size in self.buckets:  # compile every batch size now, so that no request waits for it
            out = self.held.predict_mean_std(np.zeros((size, *self.sample_shape), self.dtype))
        self.output_shape = tuple(np.shape(out[0])[1:])  # one sample's output (targets of any shape)

    @property
    def max_batch(self) -> int:
        return self.buckets[-1]

    def bucket(self, rows: int) -> int:
        """The compiled batch size a batch of ``rows`` (<= :attr:`max_batch`) is padded to."""
        return next(b for b in self.buckets if b >= rows)

    def predict(self, inputs: list[np.ndarray], members: list[Any]) -> list[dict[str, np.ndarray] | BadRequest]:
        """Answers to a batch of requests (``inputs[i]``: rows ``[n_i, *sample_shape]``, already
        checked; ``members[i]``: what each asked for), in as few forward passes as
        :attr:`max_batch` allows: the rows stacked, padded to a compiled batch size and split back.
        Each answer is ``{"mean", "std"[, "members", "member_ids"]}`` or the :class:`BadRequest` it earned."""
        wanted: list[list[int] | BadRequest | None] = []
        for m in members:
            try:
                wanted.append(check_members(m, self.member_ids))
            except BadRequest as e:
                wanted.append(e)
        ok = [i for i, w in enumerate(wanted) if not isinstance(w, BadRequest)]
        answers: list[Any] = list(wanted)
        if not ok:
            return answers
        x = np.concatenate([inputs[i].astype(self.dtype, copy=False) for i in ok])
        keep_members = any(wanted[i] is not None for i in ok)
        means, stds, outs = [], [], []
        for start in range(0, len(x), self.max_batch):
            piece = x[start : start + self.max_batch]
            size = self.bucket(len(piece))
            padded = _batches.padded(piece, size)
            with self._lock:
                start_s = time.perf_counter()
                mean, std, out = self.held.predict_mean_std(padded, members=keep_members)
                self.forward_passes += 1
                self.forward_seconds += time.perf_counter() - start_s
                self.rows_run += len(piece)
            means.append(mean[: len(piece)])
            stds.append(std[: len(piece)])
            if out is not None:
                outs.append(out[:, : len(piece)])
        mean, std = np.concatenate(means), np.concatenate(stds)
        out = np.concatenate(outs, axis=1) if outs else None
        position = {m: i for i, m in enumerate(self.member_ids)}
        start = 0
        for i in ok:
            rows = slice(start, start + len(inputs[i]))
            start = rows.stop
            answer = {"mean": mean[rows], "std": std[rows]}
            chosen = wanted[i]
            if isinstance(chosen, list) and out is not None:
                answer["members"] = out[[position[m] for m in chosen], rows]
                answer["member_ids"] = np.asarray(chosen)
            answers[i] = answer
        return answers

    def calibrated(self, answer: dict[str, np.ndarray], std: bool, level: float | None) -> dict[str, np.ndarray]:
        """``answer`` with the calibrated std (``std``) and the conformal interval at ``level``
        (``low``, ``high``) of this generation's calibration, as ``predict_interval`` computes them."""
        calibration = self.held.calibration
        if calibration is None:
            return answer
        mean, raw = answer["mean"], answer["std"]
        shape = (-1, *([1] * (raw.ndim - 2)))  # per channel, against [batch, channels, ...]
        scaled = (raw * calibration.scale.reshape(shape)).astype(raw.dtype)
        out = {**answer, "std": scaled} if std else dict(answer)
        if level is not None:
            half = (calibration.quantile(level, "interval").reshape(shape) * scaled).astype(raw.dtype)
            out |= {"low": mean - half, "high": mean + half}
        return out

    def rollout(
        self, x0: np.ndarray, steps: int, calibrated: bool = False, level: float | None = None
    ) -> dict[str, np.ndarray]:
        """Mean and std over members at every step, ``[steps + 1, batch, *sample_shape]`` each;
        ``calibrated``: the std of step ``t`` scaled by the calibration's scale of step ``t``
        (:meth:`~sweep.Ensemble.rollout_mean_std`); ``level``: also ``low`` and ``high``, the
        split-conformal interval of each step (step 0: ``x0`` itself).

        Raises:
            BadRequest: 422 for a calibrated rollout of more steps than the calibration has
                scales of, or of a calibration without rollout scales.
        """
        calibration = self.held.calibration if calibrated or level is not None else None
        if calibration is not None:
            fitted = 0 if calibration.rollout_scale is None else len(calibration.rollout_scale)
            if steps > fitted:
                field, value = ("steps", steps) if fitted else ("calibrated", True)
                raise BadRequest(
                    422,
                    field,
                    value,
                    f"calibrated rollouts of at most {fitted} steps (the {calibration.split} trajectories' steps)"
                    if fitted
                    else f"no calibrated rollouts: the store holds no {calibration.split} trajectories; ask without "
                    "calibrated and interval",
                )
        with self._lock:
            mean, std = self.held.rollout_mean_std(x0, steps)
        answer = {"mean": mean, "std": std}
        if calibration is None:
            return answer
        per_step = (steps, 1, -1, *([1] * (std.ndim - 3)))  # [steps, C] against [steps, batch, C, ...]
        scaled = std.copy()  # as rollout_mean_std(calibrated=True) scales it
        scaled[1:] = std[1:] * calibration.rollout(steps, "calibrated").reshape(per_step)
        if calibrated:
            answer["std"] = scaled
        if level is not None:
            half = np.zeros_like(std)
            half[1:] = calibration.rollout_quantile(level, steps, "interval").reshape(per_step) * scaled[1:]
            answer |= {"low": mean - half, "high": mean + half}
        return answer

    def info(self) -> dict[str, Any]:
        """What ``GET /info`` reports of this generation."""
        store, configs = self.held.store, dict.fromkeys(self.held.index["config_id"].to_pylist())
        return {
            "directory": self.held.store.directory,
            "root": self.root,
            "generation": self.generation,
            "config_id": "+".join(configs),
            "members": len(self.member_ids),
            "weights": self.held.weights.tolist() if isinstance(self.held, Blend) else None,
            "input_shape": ["batch", *self.sample_shape],
            "input_dtype": str(self.dtype),
            "output_shape": ["batch", *self.output_shape],
            "normalization": normalizations_json({c: store.normalization(c) for c in configs}),
            "compiled_batch_sizes": list(self.buckets),
            "chunk_size": self.first.chunk_size,
            "forward_passes": self.forward_passes,
            "forward_seconds": round(self.forward_seconds, 6),
            "rows_run": self.rows_run,
            "calibration": None if (c := self.held.calibration) is None else _described(c),
        }

    def members_rows(self) -> list[dict[str, Any]]:
        """The selection's rows (config, grid values, seed, status, validation and test metrics), in
        serving order; non-finite numbers as None."""
        return [{k: _finite(v) for k, v in row.items()} for row in self.held.index.to_pylist()]


def _described(calibration: Any) -> dict[str, Any]:
    """What ``/info`` says of a calibration."""
    return {
        "split": calibration.split,
        "method": calibration.method,
        "levels": list(calibration.levels),
        "scale": calibration.scale.tolist(),
        "sha256": calibration.to_dict()["sha256"],
    }


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _ordered(ens: Ensemble, member_ids: tuple[int, ...]) -> Ensemble:
    """``ens`` with its rows in the order of ``member_ids``."""
    index = ens.index
    position = {m: i for i, m in enumerate(index["member_id"].to_pylist())}
    return Ensemble(ens.store, index.take(pa.array([position[m] for m in member_ids])))
