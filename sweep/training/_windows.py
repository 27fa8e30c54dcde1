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
        eval_bytes: Bytes of the validation and test data, held throughout.
    """

    items: int
    shard_items: int
    shards_per_window: int
    item_bytes: int
    budget: int
    eval_bytes: int

    @property
    def num_shards(self) -> int:
        return math.ceil(self.items / self.shard_items)

    @property
    def num_windows(self) -> int:
        return math.ceil(self.num_shards / self.shards_per_window)

    @property
    def window_bytes(self) -> int:
        """Bytes of the largest window."""
        return min(self.items, self.shards_per_window * self.shard_items) * self.item_bytes

    def shard(self, index: int) -> tuple[int, int]:
        """``(start, stop)``: the items of shard ``index``."""
        start = index * self.shard_items
        return start, min(self.items, start + self.shard_items)

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
        )


def plan_windows(
    items: int, item_bytes: int, eval_bytes: int, budget: int, batch_size: int, per_item: int = 1
) -> WindowPlan:
    """The :class:`WindowPlan` of ``items`` training items of ``item_bytes`` each under ``budget``
    bytes, beside ``eval_bytes`` of validation and test data; ``per_item``: training samples
    (windows of states) per item.

    Raises:
        SpecError: The budget holds less than two shards beside the validation and test data, or
            a window fewer samples than a batch; the message names the sizes.
    """
    shard_items = math.ceil(items / MAX_SHARDS)
    shard_bytes = shard_items * item_bytes
    spw = max(0, budget - eval_bytes) // (2 * shard_bytes)
    total = items * item_bytes
    if spw < 1:
        raise SpecError(
            f"`training.data_memory`: got {budget} bytes ({size_text(budget)}); the training split "
            f"({size_text(total)}) does not fit, so it is streamed in shards of {shard_bytes} bytes "
            f"({size_text(shard_bytes)}), two windows at a time (one training, the next arriving) beside "
            f"the validation and test data ({eval_bytes} bytes); give at least "
            f"{eval_bytes + 2 * shard_bytes} bytes"
        )
    plan = WindowPlan(items, shard_items, min(spw, math.ceil(items / shard_items)), item_bytes, budget, eval_bytes)
    if plan.fewest_samples(per_item) < batch_size:
        enough = next(  # check_data: one window of everything holds a batch
            (
                k
                for k in range(spw, plan.num_shards + 1)
                if plan._replace(shards_per_window=k).fewest_samples(per_item) >= batch_size
            ),
            plan.num_shards,
        )
        raise SpecError(
            f"`training.batch_size`: got {batch_size}; with data_memory={budget} bytes ({size_text(budget)}) the "
            f"training split ({size_text(total)}) is streamed in windows as small as "
            f"{plan.fewest_samples(per_item)} samples; raise data_memory to at least "
            f"{eval_bytes + 2 * enough * shard_bytes} bytes or lower batch_size"
        )
    return plan
