"""An ensemble whose parameters stay in memory: what a long-lived service answers from.

:class:`HeldEnsemble` reads a selection's parameters from the store once, chunk by chunk as
:class:`~sweep.ensemble.Ensemble` streams them, and keeps those chunks; every query
(:meth:`~sweep.ensemble.Ensemble.predict`, :meth:`~sweep.ensemble.Ensemble.mean_std`,
:meth:`~sweep.ensemble.Ensemble.rollout_mean_std`, ...) then runs the same compiled programs on
the same chunks in the same order, so its answers equal the streamed ensemble's bit for bit,
without reading the store again.

```python
held = HeldEnsemble(sweep.load("runs/heat").best(64))
mean, std, members = held.predict_mean_std(x, members=True)
```
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jax
import numpy as np
from jaxtyping import PyTree

from ..store import ConfigInfo
from ._ensemble import Ensemble
from ._inference import Moments
from ._predictions import DEFAULT_CHUNK


class HeldEnsemble(Ensemble):
    """The members of ``ensemble`` (one structural config), their parameters read once and held.

    Args:
        ensemble: the selection to hold (it must lie in one structural config).
        chunk_size: members per compiled inference call (the queries' default).

    Raises:
        QueryError: if the selection spans several structural configs.
    """

    def __init__(self, ensemble: Ensemble, chunk_size: int = DEFAULT_CHUNK):
        super().__init__(ensemble.store, ensemble._index)
        self.chunk_size = chunk_size
        self.config = self.one_config("HeldEnsemble")
        slices, chunks = super()._chunks(self.config, chunk_size)
        self._held: dict[int, tuple[list[np.ndarray], list[PyTree]]] = {chunk_size: (slices, list(chunks))}

    @property
    def sample_shape(self) -> tuple[int, ...]:
        """The shape of one input sample (``channels, *spatial``)."""
        return tuple(self.config.sample_shape)

    @property
    def rollout_shape(self) -> tuple[int, ...]:
        """The shape of one sample of a rollout's initial states: :attr:`sample_shape`, or with
        ``Problem(..., history=h)`` ``(h, channels, *spatial)`` (:meth:`~sweep.ensemble.Ensemble.rollout`)."""
        sample, h = self.sample_shape, self.history_of(self.config)
        return sample if h == 1 else (h, sample[0] // h, *sample[1:])

    @property
    def dtype(self) -> np.dtype:
        """The dtype inputs are cast to (the members' parameter dtype)."""
        return np.dtype(jax.tree_util.tree_leaves(self._store.template(self.config.config_id)[0])[0].dtype)

    def _chunks(self, config: ConfigInfo, chunk_size: int) -> tuple[list[np.ndarray], Iterator[PyTree]]:
        if chunk_size not in self._held:  # another chunking: read once more, and hold it too
            slices, chunks = super()._chunks(config, chunk_size)
            self._held[chunk_size] = (slices, list(chunks))
        slices, chunks = self._held[chunk_size]
        return slices, iter(chunks)

    def predict_mean_std(
        self, x: Any, members: bool = False, chunk_size: int | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """``(mean, std, every member's output or None)`` on ``x`` in one pass over the members:
        the mean and std equal :meth:`~sweep.ensemble.Ensemble.mean_std` and the members
        :meth:`~sweep.ensemble.Ensemble.predict`, bit for bit.

        Args:
            x: inputs ``[batch, *sample_shape]``.
            members: also return ``[members, batch, *out]`` (in this selection's order).
            chunk_size: members per compiled call (default: the one given at construction).

        Returns:
            ``(mean, std, members)``; ``members`` is None unless asked for.

        Raises:
            QueryError: if ``x`` has the wrong shape or is not numeric.
        """
        chunk_size = self.chunk_size if chunk_size is None else chunk_size
        config, x = self.checked_inputs(x, chunk_size, "predict_mean_std")
        moments, out = Moments(), None
        for rows, y in self.outputs(config, x, chunk_size):
            moments.add(y)
            if members:
                if out is None:
                    out = np.empty((len(self), *y.shape[1:]), y.dtype)
                out[rows] = y
        mean, std = moments.result(np.result_type(x.dtype, np.float32))
        return mean, std, out
