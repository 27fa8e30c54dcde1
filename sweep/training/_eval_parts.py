"""Validation and test data too large to hold beside the training windows: evaluated in parts.

A streaming block (:mod:`~._stream`) whose validation and test data (their pairs, and the
trajectories of its rollout metrics) do not fit its data budget beside two training shards
(:func:`~._windows.plan_windows`: ``WindowPlan.eval_part_bytes``) puts none of them on its
devices: after the chunk's training it evaluates each split in
:func:`~sweep._batches.equal_parts` of at most half the budget (the last part padded and
masked), one part on the devices at a time, each part read where the split is (sliced from host
memory, or read from the files of a trial's ``"hdf5"`` problem, which then never holds the
split whole). Every member adds up each metric over the samples
of a part (:func:`~._member.part_sums`: every metric is a mean over samples of its
``per_sample`` function, so sums are additive); the parts' sums are added in float64 on the host
and divided by the split's size once, at the end.

What differs from evaluating a split whole is only the order of the float32 additions: the whole
split's mean is one float32 reduction (for ``mse`` and ``mae`` over every point at once), a part's
sum is one float32 reduction over its samples, and the parts are added in float64. The parts do
not depend on the block (their sizes come from the split and the budget), so a member's
evaluation is the same whatever the seeds beside it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np

from .._batches import equal_parts, padded
from .._caches import cached
from ..problems import EVALUATED, Dataset
from ._heap import heap_trim
from ._layout import on_devices
from ._member import part_sums
from ._program import PROGRAMS, TrainState, describe, members_program


@cached(PROGRAMS)
def parts_program(structure: str, shapes: tuple, layout: str, num_devices: int):
    """The jitted ``(state, part, rollout) -> (state, sums per member)`` of one evaluation part
    (:func:`~._member.part_sums`); one compilation per part shape."""
    program = describe(structure, shapes)
    return members_program(
        lambda c, h, d, rollout: (c, part_sums(program, c[0], d, rollout)), layout, num_devices, static=True
    )


Read = Callable[[int, int], tuple[np.ndarray, ...]]  # items [start, stop) of one split: (x, y), or (trajectories,)
FileReader = Callable[[str, bool], Callable[..., Any] | None]  # (split, trajectories) -> its reader in files


class EvalParts(NamedTuple):
    """A block's validation and test data evaluated in parts: each split's size and reader (its
    pairs under ``"val"``/``"test"``, the states of its rollouts under ``"val_traj"``/``"test_traj"``),
    the most pairs and trajectories of one part, the program and where the parts go."""

    splits: dict[str, tuple[int, Read]]
    pairs: int
    trajectories: int
    item_bytes: tuple[int, int]  # of a pair and of a trajectory (item_bytes)
    rollout: tuple[str, ...]  # the names of the rollout metrics, in the program's order
    program: Any
    place: Any


def _mean(parts: EvalParts, state: TrainState, split: str, most: int, rollout: bool):
    """The sums of every part of ``split`` (its pairs ``(x, y)``, or trajectories) added in float64
    over the split's size, as float32 per member."""
    n, read = parts.splits[split]
    count, size = equal_parts(n, most)
    item = parts.item_bytes[1 if rollout else 0]
    total: Any = None
    for k in range(count):
        start, stop = k * size, min(n, (k + 1) * size)
        heap_trim(size * item)  # the last part's host arrays gone
        keep = padded(np.ones(stop - start, bool), size)
        part = on_devices((*(padded(a, size) for a in read(start, stop)), keep), parts.place)
        _, sums = parts.program(state, part, rollout)
        sums = jax.tree_util.tree_map(lambda s: np.asarray(s, np.float64), sums)
        total = sums if total is None else jax.tree_util.tree_map(np.add, total, sums)
        del part  # one part on the devices at a time
    return jax.tree_util.tree_map(lambda t: (t / n).astype(np.float32), total)


def evaluate_in_parts(parts: EvalParts, state: TrainState) -> dict[str, Any]:
    """Every member's evaluation as :func:`~._member.member_evaluation` gives it, the splits
    evaluated in parts (module docstring): ``{"val": {...}, "test": {...}}``, with rollouts also
    ``"val_rollout"`` / ``"test_rollout"``."""
    evaluation: dict[str, Any] = {
        split: _mean(parts, state, split, parts.pairs, False) for split in EVALUATED if split in parts.splits
    }
    for split in EVALUATED:
        if parts.rollout and f"{split}_traj" in parts.splits:
            curves = _mean(parts, state, f"{split}_traj", parts.trajectories, True)["rollout"]  # [m, T, metrics]
            evaluation[f"{split}_rollout"] = {name: curves[:, :, i] for i, name in enumerate(parts.rollout)}
    return evaluation


def item_bytes(held: Dataset) -> tuple[int, int]:
    """``(pair, trajectory)``: bytes of one validation or test pair and of one trajectory of
    rollout states in the program data ``held`` (0 where there are none)."""
    pairs = [sum(a[0].nbytes for a in split) for split in (held.val, held.test) if split.size]
    trajectories = [t[0].nbytes for t in (held.val_traj, held.test_traj) if t is not None and len(t)]
    return max([0, *pairs]), max([0, *trajectories])


def _pairs(pairs: Any, read: Callable[[int, int], Any] | None) -> tuple[int, Read]:
    """A split's pairs: their number and reader (``read`` from the files, else sliced)."""
    return len(pairs.x), (lambda a, b: tuple(read(a, b))) if read else (lambda a, b: (pairs.x[a:b], pairs.y[a:b]))


def _states(traj: np.ndarray, read: Callable[..., Any] | None) -> tuple[int, Read]:
    """A split's trajectories as the rollouts read them (their first ``traj.shape[1]`` states):
    their number and reader (``read`` from the files, only those states, else sliced)."""
    steps = traj.shape[1]
    return len(traj), (lambda a, b: (read(a, b, steps),)) if read else (lambda a, b: (traj[a:b],))


def _readers(held: Dataset, in_files: FileReader) -> dict[str, tuple[int, Read]]:
    """Every split of ``held`` to evaluate: its size and its reader."""
    splits: dict[str, tuple[int, Read]] = {}
    for split in EVALUATED:
        if getattr(held, split).size:
            splits[split] = _pairs(getattr(held, split), in_files(split, False))
        traj = held.trajectories(split)
        if traj is not None and len(traj):
            splits[f"{split}_traj"] = _states(traj, in_files(split, True))
    return splits


def eval_parts(
    held: Dataset,
    part_bytes: int,
    structure: str,
    shapes: tuple,
    layout: str,
    devices: int,
    place: Any,
    in_files: FileReader = lambda split, trajectories: None,
) -> EvalParts:
    """The :class:`EvalParts` of a block's program data without the training split ``held`` (host
    arrays, or the outlines of splits left in the files: ``in_files(split, trajectories)`` gives
    their readers) in parts of at most ``part_bytes``."""
    pair, trajectory = item_bytes(held)
    pairs, trajectories = (part_bytes // max(1, b) for b in (pair, trajectory))
    names = tuple(name for name, _, _ in describe(structure, shapes).rollout_metrics)
    program = parts_program(structure, shapes, layout, devices)
    return EvalParts(_readers(held, in_files), pairs, trajectories, (pair, trajectory), names, program, place)
