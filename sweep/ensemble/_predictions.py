"""What the members of a selection compute: every member's outputs, their mean and std, and
autoregressive rollouts, streamed ``chunk_size`` members at a time through the compiled programs
of :mod:`._inference` and :mod:`._rollout` (memory stays bounded whatever the members);
``predict`` and ``mean_std`` also ``batch_size`` samples at a time, reading inputs larger than
memory (an ``h5py.Dataset``, a ``np.memmap``) a batch at a time and writing into ``out=``
array-likes (memory stays bounded whatever the data). Over several batches, the parameters of
the members are read from the store once and held (up to ``HELD_BYTES``; beyond, read again for
each batch).

Where the problem's fields were normalised (``Problem(..., normalize=...)``) the networks map
normalised fields to normalised fields; every query here takes inputs and returns outputs in
physical units: inputs are normalised before the members run and their outputs (and rollout
states) de-normalised after (:attr:`Predictions.normalization` gives the statistics)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import equinox as eqx
import jax
import numpy as np
from jaxtyping import Float, PyTree

from .._batches import padded, pieces
from .._errors import QueryError
from ..problems import Normalization
from ..store import ConfigInfo
from . import _inference, _rollout
from ._array_args import array_like, checked_out, checked_pair, files_hint
from ._inference import Moments
from ._selection import Selection

DEFAULT_CHUNK = 64  # members per compiled inference call
BATCH_BYTES = 64 * 2**20  # what one batch of samples of a streamed query holds (inputs, outputs, moments)
HELD_BYTES = 256 * 2**20  # a selection's parameters held in memory across batches, at most


class Predictions(Selection):
    """:class:`Selection` with the queries that run the members' models (part of
    :class:`~sweep.ensemble.Ensemble`)."""

    def predict(
        self,
        x: Float[Any, "batch ..."],
        chunk_size: int = DEFAULT_CHUNK,
        *,
        batch_size: int | None = None,
        out: Any = None,
    ) -> Float[Any, "members batch ..."]:
        """Every member's output on ``x``, computed ``chunk_size`` members at a time and
        ``batch_size`` samples at a time, so memory stays bounded whatever the members and the data.

        ``x`` may be larger than memory: anything with ``.shape``, ``.dtype`` and slicing along its
        first axis (an ``h5py.Dataset``, a ``np.memmap``, a zarr array) is read one batch of samples
        at a time, never whole. So that the result may be larger than memory too, it is written
        into ``out`` where given (an array-like that takes slice assignment: an ``h5py.Dataset``, a
        ``np.memmap``), one batch of samples and chunk of members at a time: an ``out=`` array
        rather than a generator of batches, so that the members' order, the padding of the last
        batch and the physical units stay the query's business and the numbers land where a
        whole-memory call puts them. The numbers are those of ``x`` in memory with the same
        ``batch_size``, bit for bit; with another ``batch_size`` (one batch: ``x`` whole) they
        agree to float32 rounding (XLA may order a matrix product's sums by the batch's shape).

        Args:
            x: Inputs ``[batch, *sample_shape]``: an array, or an array-like read a batch at a time.
            chunk_size: Members per compiled call.
            batch_size: Samples read and run at a time (the last batch padded to it, so that one
                program is compiled); None: ``x`` whole where it is an array in memory (NumPy or
                JAX, as before), else (an array-like read from a file) as many as keep a batch's
                inputs and one chunk's outputs under :data:`BATCH_BYTES` (64 MiB).
            out: Where to write the result, ``[members, batch, *out]`` of the members' dtype or a
                wider float; None: a new NumPy array.

        Returns:
            ``[members, batch, *out]``: ``out`` where given.

        Raises:
            QueryError: ``x`` or ``out`` of the wrong shape or dtype, a ``batch_size`` not an
                integer >= 1, or a selection spanning several structural configs; before any work.

        Examples:
            ```python
            y = ens.where(depth=4).best(8).predict(x)  # [8, batch, channels, *spatial]

            with h5py.File("test.h5") as f, h5py.File("pred.h5", "w") as g:  # larger than memory
                x = f["x"]                             # [N, channels, *spatial], never read whole
                out = g.create_dataset("y", (8, *x.shape), "f4")
                ens.where(depth=4).best(8).predict(x, batch_size=256, out=out)
            ```
        """
        config, x, size = self.checked_stream(x, chunk_size, batch_size, "predict")
        shape, dtype = self.output_of(config)
        out = checked_out(out, (len(self), x.shape[0], *shape), dtype, "predict", "out")
        result = np.empty((len(self), x.shape[0], *shape), dtype) if out is None else out
        for samples, rows, y in self.batch_outputs(config, x, chunk_size, size):
            if isinstance(result, np.ndarray):
                result[rows, samples] = y
            else:  # one member at a time: h5py takes fancy indices only in increasing order
                for row, values in zip(rows.tolist(), y):
                    result[row, samples] = values
        return result

    def mean_std(
        self,
        x: Float[Any, "batch ..."],
        chunk_size: int = DEFAULT_CHUNK,
        *,
        batch_size: int | None = None,
        out: tuple[Any, Any] | None = None,
    ) -> tuple[Any, Any]:
        """Mean and population std (ddof=0) over members of :meth:`predict`, streamed (float64 sums).

        ``x``, ``batch_size`` and the numbers as :meth:`predict`: larger-than-memory inputs are read
        a batch at a time, and ``out=(mean, std)`` receives results larger than memory.

        Args:
            x: Inputs ``[batch, *sample_shape]``: an array, or an array-like read a batch at a time.
            chunk_size: Members per compiled call.
            batch_size: Samples read and run at a time (as :meth:`predict`).
            out: ``(mean, std)`` to write into, each ``[batch, *out]``; None: new NumPy arrays.

        Returns:
            ``(mean, std)``, each ``[batch, *out]``: ``out`` where given.

        Raises:
            QueryError: As :meth:`predict`.

        Examples:
            ```python
            mean, std = ens.where(depth=4).best(8).mean_std(x)
            mean, std = ens.where(depth=4).mean_std(f["x"], out=(g["mean"], g["std"]))  # h5py datasets
            ```
        """
        config, x, size = self.checked_stream(x, chunk_size, batch_size, "mean_std")
        shape, dtype = self.output_of(config)
        dtype = np.result_type(dtype, np.float32)
        mean, std = checked_pair(out, (x.shape[0], *shape), dtype)
        mean = np.empty((x.shape[0], *shape), dtype) if mean is None else mean
        std = np.empty((x.shape[0], *shape), dtype) if std is None else std
        moments, last = Moments(), None
        for samples, _, y in self.batch_outputs(config, x, chunk_size, size):
            if last is not None and samples != last:
                mean[last], std[last] = moments.result(dtype)
                moments = Moments()
            moments.add(y)
            last = samples
        assert last is not None  # x has samples and the selection members
        mean[last], std[last] = moments.result(dtype)
        return mean, std

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
            QueryError: A selection whose configurations were normalised with other statistics
                (trained on other problems).

        Examples:
            ```python
            ens.normalization  # {"density": (1.02, 0.31), "velocity_x": (0.0, 0.8)}
            ```
        """
        configs = dict.fromkeys(self.index["config_id"].to_pylist())
        found = [None if (n := self._store.normalization(c)) is None else n.as_dict() for c in configs]
        if any(n != found[0] for n in found):  # (models of one problem share its statistics)
            raise self._spanning("normalization", "the selection's configurations were trained on other problems")
        return found[0]

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
        config, x = self.checked_lazy(x, chunk_size, what, name)
        return config, np.asarray(x).astype(self.dtype_of(config))

    def checked_lazy(self, x: Any, chunk_size: int, what: str, name: str = "x") -> tuple[ConfigInfo, Any]:
        """As :meth:`checked_inputs`, without reading ``x``: an array-like (``.shape``, ``.dtype``,
        slicing along its first axis: an ``h5py.Dataset``, a ``np.memmap``) is returned as it is,
        checked on its shape and dtype only; anything else is made a NumPy array."""
        config = self.one_config(what)
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
            raise QueryError(f"{what}(chunk_size={chunk_size!r}): must be an integer >= 1")
        x = array_like(x)
        shape = tuple(config.sample_shape)
        if (
            len(x.shape) != len(shape) + 1
            or tuple(x.shape[1:]) != shape
            or not x.shape[0]
            or not np.issubdtype(x.dtype, np.number)
            or np.issubdtype(x.dtype, np.complexfloating)
        ):
            raise QueryError(
                f"{what}: {name} has shape {tuple(x.shape)} ({x.dtype}); config {config.config_id} takes a batch of "
                f"samples of shape {shape}, i.e. a real array of shape (batch >= 1, {', '.join(map(str, shape))})"
                + files_hint(config.spec.problem)
            )
        return config, x

    def checked_stream(self, x: Any, chunk_size: int, batch_size: int | None, what: str) -> tuple[ConfigInfo, Any, int]:
        """``(config, x unread, samples per batch)`` of a query ``what`` streamed over the samples of
        ``x`` (:meth:`checked_lazy`; ``batch_size``: see :meth:`predict`)."""
        if batch_size is not None and (
            isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1
        ):
            raise QueryError(
                f"{what}(batch_size={batch_size!r}): must be an integer >= 1 (samples read and run at a time), "
                f"or None (as many as keep a batch under {BATCH_BYTES // 2**20} MiB)"
            )
        config, x = self.checked_lazy(x, chunk_size, what)
        in_memory = (isinstance(x, np.ndarray) and not isinstance(x, np.memmap)) or isinstance(x, jax.Array)
        if batch_size is None and in_memory:  # run whole, as it always has: the same program and bits
            batch_size = x.shape[0]
        if batch_size is None:
            values = max(math.prod(config.sample_shape), math.prod(self.output_of(config)[0]))
            # 4-byte inputs, one chunk's float32 outputs and their float64 moments, the float64 mean and m2
            per_sample = values * (4 + 12 * min(chunk_size, len(self)) + 16)
            batch_size = max(1, BATCH_BYTES // per_sample)
        return config, x, int(min(batch_size, x.shape[0]))

    def dtype_of(self, config: ConfigInfo) -> np.dtype:
        """The dtype of ``config``'s parameters, which its inputs are cast to."""
        return np.dtype(jax.tree_util.tree_leaves(self._store.template(config.config_id)[0])[0].dtype)

    def output_of(self, config: ConfigInfo) -> tuple[tuple[int, ...], np.dtype]:
        """``(shape, dtype)`` of one member's output on one sample of ``config`` (traced, not run)."""
        shapes, static = self._store.template(config.config_id)
        sample = jax.ShapeDtypeStruct(tuple(config.sample_shape), self.dtype_of(config))
        out = jax.eval_shape(lambda p, x: eqx.combine(p, static)(x), shapes, sample)
        return tuple(out.shape), np.dtype(out.dtype)

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

    def held_chunks(self, config: ConfigInfo, chunk_size: int) -> tuple[list[np.ndarray], list[PyTree]] | None:
        """:meth:`_chunks` read now and kept, for inputs run in several batches, where the
        selection's parameters take at most ``HELD_BYTES``; else ``None`` (read for each batch)."""
        like = self._store.template(config.config_id)[0]
        member = sum(math.prod(s.shape) * np.dtype(s.dtype).itemsize for s in jax.tree_util.tree_leaves(like))
        if member * len(self._positions(config)) > HELD_BYTES:
            return None
        slices, chunks = self._chunks(config, chunk_size)
        return slices, list(chunks)

    def outputs(
        self, config: ConfigInfo, x: np.ndarray, chunk_size: int, held: tuple[list, list] | None = None
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(rows of this selection, outputs)`` chunk by chunk, in physical units (the
        parameters ``held``, or read from the store now)."""
        slices, chunks = held or self._chunks(config, chunk_size)
        norm, spatial = self.normalization_of(config), len(config.sample_shape) - 1
        if norm is None:
            yield from zip(slices, _inference.forward(chunks, self._store.template(config.config_id)[1], x))
            return
        x = norm.apply(x, spatial).astype(x.dtype)
        for rows, y in zip(slices, _inference.forward(chunks, self._store.template(config.config_id)[1], x)):
            yield rows, norm.undo(y, spatial)

    def batch_outputs(
        self, config: ConfigInfo, x: Any, chunk_size: int, size: int
    ) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:
        """``(samples, rows of this selection, outputs [rows, samples])``: :meth:`outputs` on ``x``
        (checked by :meth:`checked_lazy`) read ``size`` samples at a time, the last batch padded to
        ``size`` (one compiled shape) and its padding dropped; batch by batch, chunk by chunk."""
        dtype = self.dtype_of(config)
        held = self.held_chunks(config, chunk_size) if x.shape[0] > size else None
        for samples in pieces(x.shape[0], size):
            xb = padded(np.asarray(x[samples]).astype(dtype), size)
            count = samples.stop - samples.start
            for rows, y in self.outputs(config, xb, chunk_size, held):
                yield samples, rows, y[:, :count]

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
