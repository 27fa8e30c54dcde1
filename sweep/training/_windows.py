"""The shuffle of a streamed training split: shards, windows and their order per epoch.

The training items (one-step pairs, or with ``unroll > 1`` trajectories) are cut into
``num_shards`` contiguous shards of ``shard_items`` items (at most :data:`MAX_SHARDS` shards;
the last one may be shorter). Each epoch draws an order of the shards from the problem's
``data_seed`` and the epoch, the same for every member, and cuts it into ``num_windows``
windows of nearly equal numbers of shards (at most ``shards_per_window``): one window on the
device serves the whole block, and every member draws its own minibatches inside it. Two
windows are held at a time (the one training, the next arriving), beside the validation and
test sets, within the budget.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .._errors import SpecError
from .._words import counted
from ..spec import size_text

MAX_SHARDS = 256  # shards of a training split: enough for a shuffle of windows, each a contiguous read


class WindowPlan(NamedTuple):
    """How a training split is streamed.

    Attributes:
        items: Training items (pairs, or trajectories with ``unroll > 1``).
        shard_items: Items per shard (the last shard may hold fewer).
        shards_per_window: The most shards one window holds.
        item_bytes: Bytes of one item.
        budget: The trial's data budget (``Training(data_memory=...)``) in bytes.
        eval_bytes: Bytes of the validation and test data (pairs, and the trajectories of
            rollout metrics): held throughout, unless evaluated in parts.
        eval_part_bytes: The most bytes of one evaluation part where the validation and test
            data are evaluated in parts (they do not fit beside two shards), else 0.
    """

    items: int
    shard_items: int
    shards_per_window: int
    item_bytes: int
    budget: int
    eval_bytes: int
    eval_part_bytes: int = 0

    @property
    def num_shards(self) -> int:
        return math.ceil(self.items / self.shard_items)

    @property
    def num_windows(self) -> int:
        return math.ceil(self.num_shards / self.shards_per_window)

    @property
    def window_items(self) -> int:
        """Items of the largest window."""
        return min(self.items, self.shards_per_window * self.shard_items)

    @property
    def window_bytes(self) -> int:
        """Bytes of the largest window."""
        return self.window_items * self.item_bytes

    @property
    def device_bytes(self) -> int:
        """The most bytes of data a block holds at a time: two windows beside the validation and
        test data, or (evaluated in parts) two windows, then one evaluation part at a time."""
        if self.eval_part_bytes:
            return max(2 * self.window_bytes, self.eval_part_bytes)
        return self.eval_bytes + 2 * self.window_bytes

    def shard(self, index: int) -> tuple[int, int]:
        """``(start, stop)``: the items of shard ``index``."""
        start = index * self.shard_items
        return start, min(self.items, start + self.shard_items)

    def items_of(self, shards: np.ndarray) -> int:
        """Items of the window of ``shards``."""
        return sum(b - a for a, b in (self.shard(int(s)) for s in shards))

    def order(self, data_seed: int, epoch: int) -> list[np.ndarray]:
        """The shards of each window of epoch ``epoch``, in training order: a permutation of the
        shards drawn from ``(data_seed, epoch)``, cut into :attr:`num_windows` nearly equal parts."""
        shards = np.random.default_rng([data_seed, epoch]).permutation(self.num_shards)
        return np.array_split(shards, self.num_windows)

    def fewest_samples(self, per_item: int) -> int:
        """Training samples of the smallest window (``per_item`` per item)."""
        start, stop = self.shard(self.num_shards - 1)  # the last shard, which may be short
        shards = self.num_shards // self.num_windows
        return ((shards - 1) * self.shard_items + stop - start) * per_item

    def __str__(self) -> str:
        return (
            f"streamed: {self.num_windows} windows of <= {size_text(self.window_bytes)} per epoch "
            f"({self.num_shards} shards of {self.shard_items} items, {size_text(self.shard_items * self.item_bytes)})"
            + (
                f"; validation and test ({size_text(self.eval_bytes)}) evaluated in parts of "
                f"<= {size_text(self.eval_part_bytes)}"
                if self.eval_part_bytes
                else ""
            )
        )


def plan_windows(
    items: int,
    item_bytes: int,
    eval_bytes: int,
    budget: int,
    batch_size: int,
    per_item: int = 1,
    eval_item_bytes: int = 0,
) -> WindowPlan:
    """The :class:`WindowPlan` of ``items`` training items of ``item_bytes`` each under ``budget``
    bytes, beside ``eval_bytes`` of validation and test data; ``per_item``: training samples
    (windows of states) per item.

    The validation and test data are held beside the windows where windows of at least a batch
    fit beside them; else they are evaluated in parts of at most half the budget
    (``eval_item_bytes``: the largest of their items, a pair or a trajectory, which one part must
    hold) and the windows take the whole budget.

    Raises:
        SpecError: The budget holds less than two shards, a window fewer samples than a batch,
            or half the budget less than one validation or test item; the message names the sizes.
    """
    try:  # held beside the windows, as long as windows of a batch fit beside them
        return _plan(items, item_bytes, eval_bytes, budget, batch_size, per_item, 0)
    except SpecError:
        if not eval_bytes:
            raise
    part_bytes = budget // 2
    if part_bytes < eval_item_bytes:
        least = max(2 * eval_item_bytes, _two_windows(items, item_bytes, batch_size, per_item))
        raise SpecError(
            f"`training.data_memory`: got {budget} bytes ({size_text(budget)}); the validation and test data "
            f"({eval_bytes} bytes) do not fit beside two training windows of a batch, so they are "
            f"evaluated in parts of at most half the budget ({part_bytes} bytes), but one of their items takes "
            f"{eval_item_bytes} bytes; give at least {least} bytes ({size_text(least)})"
        )
    return _plan(items, item_bytes, eval_bytes, budget, batch_size, per_item, part_bytes)


def _two_windows(items: int, item_bytes: int, batch_size: int, per_item: int) -> int:
    """Bytes of two windows of the fewest shards whose smallest window holds a batch (what
    :func:`~sweep.training.check_data` asks)."""
    plan = WindowPlan(items, math.ceil(items / MAX_SHARDS), 1, item_bytes, 0, 0)
    enough = next(
        (
            k
            for k in range(1, plan.num_shards + 1)
            if plan._replace(shards_per_window=k).fewest_samples(per_item) >= batch_size
        ),
        plan.num_shards,
    )
    return 2 * enough * plan.shard_items * item_bytes


def _plan(
    items: int, item_bytes: int, eval_bytes: int, budget: int, batch_size: int, per_item: int, part_bytes: int
) -> WindowPlan:
    """:func:`plan_windows` with the validation and test data held (``part_bytes=0``) or
    evaluated in parts of ``part_bytes``."""
    shard_items = math.ceil(items / MAX_SHARDS)
    shard_bytes = shard_items * item_bytes
    held = 0 if part_bytes else eval_bytes
    spw = max(0, budget - held) // (2 * shard_bytes)
    total = items * item_bytes
    beside = f" beside the validation and test data ({eval_bytes} bytes)" if held else ""
    shards = math.ceil(items / shard_items)
    plan = WindowPlan(items, shard_items, min(max(spw, 1), shards), item_bytes, budget, eval_bytes, part_bytes)
    least = held + _two_windows(items, item_bytes, batch_size, per_item)  # what a budget needs for both
    if spw < 1:
        raise SpecError(
            f"`training.data_memory`: got {budget} bytes ({size_text(budget)}); the training split "
            f"({size_text(total)}) does not fit, so it is streamed in shards of {shard_bytes} bytes "
            f"({size_text(shard_bytes)}), two windows at a time (one training, the next arriving){beside}; "
            f"give at least {least} bytes ({size_text(least)}) for windows of a batch of {batch_size}"
        )
    if plan.fewest_samples(per_item) < batch_size:
        raise SpecError(
            f"`training.batch_size`: got {batch_size}; with data_memory={budget} bytes ({size_text(budget)}) the "
            f"training split ({size_text(total)}) is streamed in windows as small as "
            f"{counted(plan.fewest_samples(per_item), 'sample')}; raise data_memory to at least {least} bytes "
            f"({size_text(least)}) or lower batch_size"
        )
    return plan
