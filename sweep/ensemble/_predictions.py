"""What the members of a selection compute: every member's outputs, their mean and std, and
autoregressive rollouts, streamed ``chunk_size`` members at a time through the compiled programs
of :mod:`._inference` and :mod:`._rollout` (memory stays bounded whatever the members).

Where the problem's fields were normalised (``Problem(..., normalize=...)``) the networks map
normalised fields to normalised fields; every query here takes inputs and returns outputs in
physical units: inputs are normalised before the members run and their outputs (and rollout
states) de-normalised after (:attr:`Predictions.normalization` gives the statistics)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jax
import numpy as np
from jaxtyping import Float, PyTree

from .._batches import pieces
from .._errors import QueryError
from ..problems import Normalization
from ..store import ConfigInfo
from . import _inference, _rollout
from ._inference import Moments
from ._selection import Selection

DEFAULT_CHUNK = 64  # members per compiled inference call


class Predictions(Selection):
    """:class:`Selection` with the queries that run the members' models (part of
    :class:`~sweep.ensemble.Ensemble`)."""

    def predict(
        self, x: Float[Any, "batch ..."], chunk_size: int = DEFAULT_CHUNK
    ) -> Float[np.ndarray, "members batch ..."]:
        """Every member's output on ``x``, computed ``chunk_size`` members at a time so memory stays bounded.

        Args:
            x: Inputs ``[batch, *sample_shape]``.
            chunk_size: Members per compiled call.

        Returns:
            ``[members, batch, *out]``.

        Raises:
            QueryError: ``x`` of the wrong shape, or a selection spanning several structural configs.

        Examples:
            ```python
            y = ens.where(depth=4).best(8).predict(x)  # [8, batch, channels, *spatial]
            ```
        """
        config, x = self.checked_inputs(x, chunk_size, "predict")
        out = None
        for rows, y in self.outputs(config, x, chunk_size):
            if out is None:
                out = np.empty((len(self), *y.shape[1:]), y.dtype)
            out[rows] = y
        assert out is not None  # _inputs found the selection's config, so it has members
        return out

    def mean_std(self, x: Float[Any, "batch ..."], chunk_size: int = DEFAULT_CHUNK) -> tuple[np.ndarray, np.ndarray]:
        """Mean and population std (ddof=0) over members of :meth:`predict`, streamed (float64 sums).

        Args:
            x: Inputs ``[batch, *sample_shape]``.
            chunk_size: Members per compiled call.

        Returns:
            ``(mean, std)``, each ``[batch, *out]``.

        Raises:
            QueryError: As :meth:`predict`.

        Examples:
            ```python
            mean, std = ens.where(depth=4).best(8).mean_std(x)
            ```
        """
        config, x = self.checked_inputs(x, chunk_size, "mean_std")
        moments = Moments()
        for _, y in self.outputs(config, x, chunk_size):
            moments.add(y)
        return moments.result(np.result_type(x.dtype, np.float32))

    def rollout(
        self, x0: Float[Any, "batch ..."], steps: int, chunk_size: int = DEFAULT_CHUNK
    ) -> Float[np.ndarray, "members t batch ..."]:
        """Every member's autoregressive rollout from the same initial states ``x0``.

        Axis order: time before the batch, so that ``states[:, t]`` is a batch shaped like ``x0``
        (what :meth:`predict` takes); :meth:`trajectories` keeps the data's order, trajectory
        before time: compare with ``traj.swapaxes(0, 1)``.

        A model trained with ``Problem(..., history=h)`` (``h > 1``) starts from ``h`` states per
        sample, ``x0`` ``[batch, h, channels, *spatial]`` (oldest first), and keeps a moving window
        of the ``h`` latest; index 0 of the result is then the latest of them, ``x0[:, -1]``.

        ```python
        states = sub.rollout(x0, steps=100)      # [members, 101, batch, channels, *spatial]
        ```
        """
        config, x0, steps = self.checked_rollout_inputs(x0, steps, chunk_size, "rollout")
        latest = self.latest_state(config, x0)
        out = np.empty((len(self), steps + 1, *latest.shape), x0.dtype)
        out[:, 0] = latest
        for rows, t, states in self.rollout_states(config, x0, steps, chunk_size):
            out[rows, t : t + states.shape[1]] = states
        return out

    def rollout_mean_std(
        self, x0: Float[Any, "batch ..."], steps: int, chunk_size: int = DEFAULT_CHUNK
    ) -> tuple[np.ndarray, np.ndarray]:
        """Mean and population std (ddof=0) over members of :meth:`rollout` at every step, streamed: no
        array over members is held, only one chunk's states for one run of steps.

        Args:
            x0: Initial states ``[batch, *sample_shape]`` (with ``history=h``: ``[batch, h,
                channels, *spatial]``, as :meth:`rollout`).
            steps: Autoregressive steps, ``>= 1``.
            chunk_size: Members per compiled call.

        Returns:
            ``(mean, std)``, each ``[steps + 1, batch, *sample_shape]`` (step 0 holds ``x0`` and zeros).

        Raises:
            QueryError: As :meth:`rollout`.

        Examples:
            ```python
            mean, std = sub.rollout_mean_std(traj[:, 0], 100)
            ```
        """
        config, x0, steps = self.checked_rollout_inputs(x0, steps, chunk_size, "rollout_mean_std")
        moments: dict[int, Moments] = {}
        for _, t, states in self.rollout_states(config, x0, steps, chunk_size):
            moments.setdefault(t, Moments()).add(states)
        dtype = np.result_type(x0.dtype, np.float32)
        latest = self.latest_state(config, x0)
        mean, std = np.empty((2, steps + 1, *latest.shape), dtype)
        mean[0], std[0] = latest, 0
        for t, m in moments.items():
            m_mean, m_std = m.result(dtype)
            mean[t : t + len(m_mean)], std[t : t + len(m_mean)] = m_mean, m_std
        return mean, std

    @property
    def normalization(self) -> dict[str | int, tuple[float, float]] | None:
        """The per-channel statistics the members' problem was normalised with, ``{channel: (shift,
        scale)}`` (channels by name where the data name them, else by index; ``field = normalised *
        scale + shift``), or None where the fields were not normalised. Queries take and return
        physical units; :meth:`member` and :meth:`stacked` are the networks themselves, which map
        normalised fields.

        Raises:
            QueryError: A selection spanning several structural configs.

        Examples:
            ```python
            ens.where(depth=4).normalization  # {"density": (1.02, 0.31), "velocity_x": (0.0, 0.8)}
            ```
        """
        norm = self.normalization_of(self.one_config("normalization"))
        return None if norm is None else norm.as_dict()

    def units_note(self) -> str | None:
        """A sentence saying in which units the stored numbers are where some of this selection's
        configurations trained on normalised fields (``Problem(..., normalize=...)``), else None:
        the loss in the normalised units it was minimised in, metrics and scores in physical units
        (what the summary's header and ``sweep show`` print)."""
        configs = dict.fromkeys(self.index["config_id"].to_pylist())
        methods = {c: self._store.normalization(c) for c in configs}
        normalised = sorted({n.method for n in methods.values() if n is not None})
        if not normalised:
            return None
        return (
            f"units: the loss in the normalised units it is minimised in ({', '.join(normalised)} per channel, "
            f"statistics of the training split); metrics and scores in physical units"
        )

    # -- the streaming surface the scores, the greedy selection, the calibration and the export build on
    def normalization_of(self, config: ConfigInfo) -> Normalization | None:
        """The statistics ``config``'s fields were normalised with, or None."""
        return self._store.normalization(config.config_id)

    def checked_inputs(self, x: Any, chunk_size: int, what: str, name: str = "x") -> tuple[ConfigInfo, np.ndarray]:
        """The selection's one config and ``x`` (argument ``name`` of query ``what``) as its models'
        dtype, after checking ``x`` against the config's sample shape and ``chunk_size``."""
        config = self.one_config(what)
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
            raise QueryError(f"{what}(chunk_size={chunk_size!r}): must be an integer >= 1")
        x = np.asarray(x)
        shape = tuple(config.sample_shape)
        if (
            x.ndim != len(shape) + 1
            or tuple(x.shape[1:]) != shape
            or not x.shape[0]
            or not np.issubdtype(x.dtype, np.number)
        ):
            raise QueryError(
                f"{what}: {name} has shape {tuple(x.shape)} ({x.dtype}); config {config.config_id} takes a batch of "
                f"samples of shape {shape}, i.e. a numeric array of shape (batch >= 1, {', '.join(map(str, shape))})"
            )
        dtype = jax.tree_util.tree_leaves(self._store.template(config.config_id)[0])[0].dtype
        return config, x.astype(dtype)

    def history_of(self, config: ConfigInfo) -> int:
        """The states one input of ``config`` stacks (``Problem(..., history=h)``; 1 without)."""
        return int(config.spec.problem.options.get("history", 1))

    def latest_state(self, config: ConfigInfo, window: np.ndarray) -> np.ndarray:
        """The latest state ``[batch, channels, *spatial]`` of windows ``[batch, h * channels, *spatial]``."""
        return window[:, window.shape[1] - window.shape[1] // self.history_of(config) :]

    def rollout_start(self, config: ConfigInfo, traj: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(x0, reference)`` of a rollout from trajectories ``[n, T + 1, c, *s]``: the first state
        (with ``history=h``: the first ``h``), and the states from the latest of them on, which
        ``rollout(x0, reference.shape[1] - 1)`` predicts from index 1."""
        h = self.history_of(config)
        return (traj[:, 0], traj) if h == 1 else (traj[:, :h], traj[:, h - 1 :])

    def checked_rollout_inputs(
        self, x0: Any, steps: Any, chunk_size: int, what: str
    ) -> tuple[ConfigInfo, np.ndarray, int]:
        """``(config, x0 as windows [batch, *sample_shape], steps)``, checked as :meth:`checked_inputs`
        for a rollout from ``x0`` of ``steps`` steps (the model must feed its output back)."""
        steps = _rollout.check_steps(steps, what)
        config = self.one_config(what)
        h = self.history_of(config)
        if h > 1:
            x0 = np.asarray(x0)
            sample = tuple(config.sample_shape)
            state = (sample[0] // h, *sample[1:])
            if x0.ndim != len(sample) + 2 or tuple(x0.shape[1:]) != (h, *state) or not x0.shape[0]:
                raise QueryError(
                    f"{what}: x0 has shape {tuple(x0.shape)}; config {config.config_id} was trained with history={h} "
                    f"and rolls out from {h} states per sample: an array of shape (batch >= 1, {h}, "
                    f"{', '.join(map(str, state))}), oldest state first"
                )
            x0 = x0.reshape(x0.shape[0], *sample)
        config, x0 = self.checked_inputs(x0, chunk_size, what, "x0")
        _rollout.check_fed_back(
            self._store.template(config.config_id), x0, f"{what}: the model of config {config.config_id}", h
        )
        return config, x0, steps

    def _chunks(self, config: ConfigInfo, chunk_size: int) -> tuple[list[np.ndarray], Iterator[PyTree]]:
        """Rows of this selection in chunks of ``chunk_size`` in store order, and their stacked
        parameters read chunk by chunk (leaves files in store order)."""
        positions = self._positions(config)
        order = np.argsort(positions, kind="stable")
        slices = [order[rows] for rows in pieces(len(order), chunk_size)]
        return slices, (self._store.read(config.config_id, positions[rows]) for rows in slices)

    def outputs(self, config: ConfigInfo, x: np.ndarray, chunk_size: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(rows of this selection, outputs)`` chunk by chunk, in physical units."""
        slices, chunks = self._chunks(config, chunk_size)
        norm, spatial = self.normalization_of(config), len(config.sample_shape) - 1
        if norm is None:
            yield from zip(slices, _inference.forward(chunks, self._store.template(config.config_id)[1], x))
            return
        x = norm.apply(x, spatial).astype(x.dtype)
        for rows, y in zip(slices, _inference.forward(chunks, self._store.template(config.config_id)[1], x)):
            yield rows, norm.undo(y, spatial)

    def rollout_states(
        self, config: ConfigInfo, x0: np.ndarray, steps: int, chunk_size: int
    ) -> Iterator[tuple[np.ndarray, int, np.ndarray]]:
        """``(rows of this selection, t, their states after t.. steps)`` chunk by chunk (see
        :func:`._rollout.rollout`), in physical units."""
        slices, chunks = self._chunks(config, chunk_size)
        norm, spatial = self.normalization_of(config), len(config.sample_shape) - 1
        if norm is not None:
            x0 = norm.apply(x0, spatial).astype(x0.dtype)
        template = self._store.template(config.config_id)[1]
        for i, t, states in _rollout.rollout(chunks, template, x0, steps, self.history_of(config)):
            yield slices[i], t, states if norm is None else norm.undo(states, spatial)
