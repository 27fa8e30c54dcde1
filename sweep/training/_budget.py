"""The data budget of a trial (``Training(data_memory=...)``) and what a block's data take on
its device(s): whether the training split is streamed (:func:`streams`)."""

from __future__ import annotations

import jax
import numpy as np

from .._host_memory import host_memory
from ..problems import Dataset
from ..spec import Training

DEFAULT_SHARE = 0.25  # of the device's memory (GPU) or the host's (CPU) when data_memory is None


def data_budget(training: Training) -> int:
    """Bytes the data of one trial may take: ``training.data_memory``, else :data:`DEFAULT_SHARE`
    of the first device's memory (an accelerator) or of the memory this process may use (CPU: the
    machine's, or its control group's limit, :func:`~.._host_memory.host_memory`)."""
    if training.data_memory is not None:
        return int(training.data_memory)
    device = jax.devices()[0]
    stats = device.memory_stats() if device.platform != "cpu" else None
    if stats and "bytes_limit" in stats:
        return int(stats["bytes_limit"] * DEFAULT_SHARE)
    return int(host_memory() * DEFAULT_SHARE)


def nbytes(tree) -> int:
    """Bytes of every array of ``tree`` (its Python numbers, such as ``Dataset.history``, are
    settings, not data)."""
    return sum(int(a.nbytes) for a in jax.tree_util.tree_leaves(tree) if isinstance(a, np.ndarray | jax.Array))


def streams(program_data: Dataset, budget: int) -> bool:
    """Whether a block streams its training split: the data its program reads
    (:func:`~._program.program_data`) exceed ``budget``."""
    return nbytes(program_data) > budget
