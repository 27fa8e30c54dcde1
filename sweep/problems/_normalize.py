"""Per-channel normalisation of a problem's fields: ``Problem(..., normalize="zscore")``.

``normalize`` is an option of every problem kind: ``"none"`` (the default, except for
``"hdf5"``, whose default is ``"zscore"``: file data come in physical units of any size),
``"zscore"`` (shift: the channel's mean, scale: its population std) or ``"rms"`` (shift 0,
scale: the channel's root mean square). The statistics come from the **training split only**:
every state of every training trajectory where the problem has trajectories, else every
training input; one pass over them, a trajectory (or :data:`CHUNK_SAMPLES` samples) at a time,
in float64 (Chan et al.'s parallel update), so the pass holds one chunk beside the data. A
channel that is constant (scale 0) keeps scale 1.

The model then trains on ``(field - shift) / scale`` (inputs and targets of every split,
trajectories included), and everything a user calls (``predict``, ``mean_std``, ``rollout``,
serving, scores, figures, exports) takes and returns physical units:
:class:`Normalization` holds the statistics and applies and undoes them.

```python
data = sweep.problems.heat1d(num_points=16, num_samples=10)
norm = statistics(data, "zscore")
scaled = normalized(data, norm)          # what the model trains on
```
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from .._errors import SpecError

METHODS = ("none", "zscore", "rms")
OPTION = "normalize"
CHUNK_SAMPLES = 256  # training samples per step of the statistics pass (without trajectories)


def check_method(value: Any) -> None:
    """``problem.normalize`` must name one of :data:`METHODS`."""
    if value not in METHODS:
        raise SpecError(
            f"`problem.normalize`: got {value!r}; choose one of {', '.join(map(repr, METHODS))} (statistics "
            f"per channel from the training split)"
        )


class Normalization(NamedTuple):
    """The per-channel statistics of a problem: ``field = normalised * scale + shift``.

    Attributes:
        method: ``"zscore"`` or ``"rms"``.
        channels: The channels' names (a file's field names) or indices.
        shift: float64 ``[channels]``.
        scale: float64 ``[channels]``, > 0.
    """

    method: str
    channels: tuple[str | int, ...]
    shift: np.ndarray
    scale: np.ndarray

    def as_dict(self) -> dict[str | int, tuple[float, float]]:
        """``{channel: (shift, scale)}``, what :attr:`sweep.Ensemble.normalization` returns."""
        return {c: (float(a), float(b)) for c, a, b in zip(self.channels, self.shift, self.scale)}

    def _per_channel(self, values: np.ndarray, a: Any, spatial: int, dtype) -> np.ndarray:
        """``values`` shaped to broadcast over ``a``'s channel axis; repeated where ``a`` stacks
        several states as channels (``history``)."""
        repeats = a.shape[a.ndim - spatial - 1] // len(values)
        return np.tile(np.asarray(values, dtype), repeats).reshape(-1, *([1] * spatial))

    def apply(self, a: np.ndarray, spatial: int) -> np.ndarray:
        """``(a - shift) / scale`` of ``a`` ``[..., channels, *spatial]`` (``spatial``: its number
        of spatial axes; inputs that stack ``h`` states: ``h * channels``), in ``a``'s float dtype."""
        dtype = np.result_type(a.dtype, np.float32)
        return (a - self._per_channel(self.shift, a, spatial, dtype)) / self._per_channel(self.scale, a, spatial, dtype)

    def undo(self, a: Any, spatial: int) -> Any:
        """``a * scale + shift`` (NumPy or JAX arrays ``[..., channels, *spatial]``), in ``a``'s dtype."""
        dtype = a.dtype
        return a * self._per_channel(self.scale, a, spatial, dtype) + self._per_channel(self.shift, a, spatial, dtype)


def normalizations_json(by_config: Mapping[str, Normalization | None]) -> Any:
    """The statistics of a selection's configurations as JSON, what an export's manifest and a
    served model's ``/info`` report: ``{channel: [shift, scale]}`` of one configuration (channels
    by name where the data name them, else by index), one such (or null) per config id for
    several, null where none was normalised."""
    records = {
        config: None if n is None else {str(c): list(v) for c, v in n.as_dict().items()}
        for config, n in by_config.items()
    }
    if all(r is None for r in records.values()):
        return None
    return next(iter(records.values())) if len(records) == 1 else records


class _Moments:
    """Count, mean and sum of squared deviations per channel, from chunks ``[n, c, *s]``."""

    def __init__(self, channels: int):
        self.count, self.mean, self.m2, self.squares = 0, np.zeros(channels), np.zeros(channels), np.zeros(channels)

    def add(self, chunk: np.ndarray) -> None:
        values = np.moveaxis(chunk, 1, 0).reshape(chunk.shape[1], -1).astype(np.float64)
        n = values.shape[1]
        if not n:
            return
        mean = values.mean(1)
        delta = mean - self.mean
        total = self.count + n
        self.m2 += ((values - mean[:, None]) ** 2).sum(1) + delta**2 * self.count * n / total
        self.mean += delta * n / total
        self.squares += (values**2).sum(1)
        self.count = total


def _chunks(data: Any) -> Iterator[tuple[str, np.ndarray]]:
    """``(where, states [n, c, *s])`` of the training split: trajectory by trajectory, else
    :data:`CHUNK_SAMPLES` inputs at a time."""
    traj = data.train_traj
    if traj is not None:
        for i in range(len(traj)):
            yield f"training trajectory {i}", traj[i]
        return
    x = data.train.x
    for start in range(0, len(x), CHUNK_SAMPLES):
        yield f"training samples {start}..{min(len(x), start + CHUNK_SAMPLES) - 1}", x[start : start + CHUNK_SAMPLES]


def channel_statistics(
    chunks: Iterator[tuple[str, np.ndarray]], method: str, channels: Sequence[str | int], source: str
) -> Normalization:
    """The :class:`Normalization` of ``method`` (``"zscore"``, ``"rms"``) from one pass over
    ``chunks`` (``(where, states [n, c, *s])``, e.g. one trajectory's states, so that data larger
    than memory is read once, a chunk at a time); ``channels``: the channels' names; ``source``:
    what the error names. A chunk holding NaN or infinity is a :class:`SpecError` naming
    ``source``, ``where``, the time (or sample) index and the channel.

    ```python
    import numpy as np
    from sweep.problems import channel_statistics

    trajectories = np.random.default_rng(0).normal(3.0, 2.0, size=(4, 10, 2, 16))  # [n, t, c, x]
    chunks = ((f"trajectory {i}", t) for i, t in enumerate(trajectories))
    norm = channel_statistics(chunks, "zscore", ("u", "v"), "my data")
    norm.shift, norm.scale  # about (3, 3) and (2, 2): per channel, over every time and point
    ```
    """
    moments = _Moments(len(channels))
    for where, chunk in chunks:
        finite = np.isfinite(chunk)
        if not finite.all():
            at = tuple(int(i) for i in np.argwhere(~finite)[0])
            raise SpecError(
                f"{source}: {where} holds {int((~finite).sum())} NaN or infinite value(s) (first at time/sample "
                f"index {at[0]}, channel {channels[at[1]]!r}, point {at[2:]}); every state must be a finite number"
            )
        moments.add(chunk)
    if method == "zscore":
        shift, scale = moments.mean, np.sqrt(moments.m2 / max(1, moments.count))
    else:
        shift, scale = np.zeros_like(moments.mean), np.sqrt(moments.squares / max(1, moments.count))
    return Normalization(method, tuple(channels), shift, np.where(scale > 0, scale, 1.0))


def statistics(
    data: Any, method: str, channels: Sequence[str | int] | None = None, source: str = "problem"
) -> Normalization:
    """The :class:`Normalization` of a :class:`~sweep.problems.Dataset`'s training split
    (module docstring); ``channels``: their names (default: their indices)."""
    count = data.sample_shape[0]
    names = tuple(range(count)) if channels is None else tuple(channels)
    return channel_statistics(_chunks(data), method, names, source)


def normalized(data: Any, norm: Normalization, source: str = "problem") -> Any:
    """``data`` (a :class:`~sweep.problems.Dataset`) with inputs, targets and trajectories of every
    split normalised by ``norm``, and ``norm`` kept as ``data.normalization``. Targets must be
    fields of the inputs' channels (an emulator, or a grid change): other targets are refused."""
    sample, target = data.sample_shape, data.target_shape
    if data.train.y.dtype.kind == "i" or len(target) != len(sample) or target[:1] != sample[:1]:
        raise SpecError(
            f"`problem.normalize`: got {norm.method!r}, but the targets of {source} have shape {target} "
            f"({data.train.y.dtype}) and the inputs {sample}; normalisation needs targets of the inputs' "
            f'{sample[0]} channel(s) on a grid. Use normalize="none"'
        )
    spatial = len(sample) - 1

    def split(s):
        return type(s)(norm.apply(s.x, spatial).astype(np.float32), norm.apply(s.y, spatial).astype(np.float32))

    def traj(a):
        return None if a is None else norm.apply(a, spatial).astype(np.float32)

    return data._replace(
        train=split(data.train),
        val=split(data.val),
        test=split(data.test),
        train_traj=traj(data.train_traj),
        val_traj=traj(data.val_traj),
        test_traj=traj(data.test_traj),
        normalization=norm,
    )
