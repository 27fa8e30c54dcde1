"""Memory sizing of a block, computed without training: the bytes of one member's state
(:func:`state_bytes`) and of one compiled chunk call (:func:`compiled_bytes`), what the
``"auto"`` block size is chosen from."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..optim import hyperparameter_names
from ..problems import Dataset
from ..spec import SweepSpec
from ._block import state_skeleton
from ._program import Shapes, chunk_program, data_shapes, program_data, program_key


def state_bytes(spec: SweepSpec, shapes: Shapes, hparams: Sequence[Mapping[str, float]] = ()) -> int:
    """Bytes of one member's :class:`TrainState` (parameters, optimizer state, counters)."""
    names = hyperparameter_names(spec.optimizer.options, hparams)
    skeleton = state_skeleton(spec, 1, names, shapes)
    return sum(int(np.prod(a.shape)) * a.dtype.itemsize for a in jax.tree_util.tree_leaves(skeleton))


def compiled_bytes(
    spec: SweepSpec, data: Dataset, hparams: Sequence[Mapping[str, float]], num_members: int, layout: str = "vmap"
) -> int:
    """Device bytes one chunk call of a block of ``num_members`` on one device needs (compiled, not
    run): arguments + outputs + temporaries - aliased buffers, from XLA's memory analysis.
    ``layout``: ``"vmap"`` (every member at once, the accelerator layout) or ``"map"`` (one member
    after another, the CPU layout: the temporaries of one member's step)."""
    if layout not in ("vmap", "map"):
        raise ValueError(f'`layout`: got {layout!r}; expected "vmap" or "map"')
    names = hyperparameter_names(spec.optimizer.options, hparams)
    shapes = data_shapes(data)
    program = chunk_program(program_key(spec, names), shapes, layout, 1)
    state = state_skeleton(spec, num_members, names, shapes)
    arrays = jax.tree_util.tree_map(
        lambda a: jax.ShapeDtypeStruct(np.shape(a), jnp.result_type(a)),  # Dataset.history: a Python int
        program_data(data, spec.training.unroll > 1, spec.training.rollout_steps),
    )
    stats = program.lower(state, arrays, 1).compile().memory_analysis()
    if stats is None:
        raise RuntimeError(f"XLA's memory analysis is unavailable on the {jax.default_backend()!r} backend")
    return int(
        stats.argument_size_in_bytes + stats.output_size_in_bytes + stats.temp_size_in_bytes - stats.alias_size_in_bytes
    )
