"""Aggregation as Ray tasks: one task per leaves file of the store, run in parallel on the cluster.

:func:`sweep.aggregate` plans a store from the checkpoints' ``block.json`` files alone and
describes every leaves file (one per structural config, or one per shard past the shard size)
as a task; here the tasks run as Ray tasks (one CPU each, at most ``window`` submitted at once),
each reading only the blocks its members are in and writing its file straight into the
store's uncommitted generation. The driver gets back only each file's checksum record and its
members' rows (a small Arrow table), writes ``members.parquet``, ``configs.parquet`` and the
manifest, and commits: the store is byte-identical to a serial aggregation's.

Small aggregations stay in the driver: one task, or tasks that read fewer than
:data:`MIN_BLOCKS` blocks in all (~2.5 s of serial work at the measured ~10 ms per block, about
what starting Ray's task workers, each importing JAX and seed-sweep, costs on a laptop).

```python
sweep.tune.aggregate("runs/heat")              # on this process's Ray, else a new local one
sweep.tune.aggregate("s3://bucket/heat", address="auto")
```
"""

from __future__ import annotations

import functools
import itertools
import os
import resource
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow.fs as pafs

from .._errors import SweepError
from ..ensemble import aggregate as aggregate_serially
from ..store import DEFAULT_SHARD_BYTES, SweepDir
from ._cluster import ensure_ray

MIN_BLOCKS = 256  # blocks read by all tasks together below which the driver runs them itself


def aggregate(
    sweep_dir: str | os.PathLike[str] | SweepDir,
    filesystem: pafs.FileSystem | None = None,
    progress: bool = True,
    *,
    address: str | None = None,
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    only_complete: bool = False,
    min_blocks: int = MIN_BLOCKS,
) -> str:
    """:func:`sweep.aggregate` with one Ray task per leaves file, in parallel (unless the work is
    small: see :class:`RayTasks`).

    Runs on the Ray this process has initialised, else starts a new local one (or joins the
    cluster at ``address``). Every task must reach ``sweep_dir`` (local paths: on one machine or a
    shared filesystem; ``s3://`` from anywhere). Returns the store path.
    """
    ensure_ray(address)
    return aggregate_serially(
        sweep_dir,
        filesystem,
        progress,
        shard_bytes=shard_bytes,
        only_complete=only_complete,
        map_tasks=RayTasks(min_blocks=min_blocks),
    )


class RayTasks:
    """``map`` over Ray tasks: results in order, at most ``window`` tasks submitted at a time
    (default: twice the cluster's CPUs), so the driver holds at most that many results.

    When there is one task, or the tasks read fewer than ``min_blocks`` blocks in all (their
    ``sources``), they run in this process instead. ``peak_rss_mib`` collects the peak resident
    memory of the worker process of each task run by Ray."""

    window: int | None
    min_blocks: int

    def __init__(self, window: int | None = None, min_blocks: int = MIN_BLOCKS):
        self.window, self.min_blocks = window, min_blocks
        self.peak_rss_mib: list[float] = []

    def __call__(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Any]:
        items, first, blocks = iter(items), [], 0
        for item in items:  # look ahead until the work is known to be worth tasks
            first.append(item)
            blocks += len(getattr(item, "sources", ()))
            if len(first) > 1 and blocks >= self.min_blocks:
                break
        else:
            yield from map(fn, first)
            return
        yield from self._tasks(fn, itertools.chain(first, items))

    def _tasks(self, fn: Callable[[Any], Any], items: Iterator[Any]) -> Iterator[Any]:
        import ray

        task = _remote()
        window = self.window or max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
        pending = deque()

        def submit() -> None:
            for item in items:
                pending.append(task.remote(fn, item))
                return

        for _ in range(window):
            submit()
        try:
            while pending:
                result, peak = _get(pending.popleft())
                self.peak_rss_mib.append(peak)
                submit()
                yield result
        finally:
            for ref in pending:  # an error, or the consumer stopped: the rest is not needed
                ray.cancel(ref)


@functools.cache
def _remote():
    import ray

    return ray.remote(num_cpus=1)(_run_task)


def _run_task(fn: Callable[[Any], Any], item: Any) -> tuple[Any, float]:
    """``fn(item)`` and the peak resident memory of this worker process (MiB)."""
    result = fn(item)
    return result, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10


def _get(ref) -> Any:
    """``ray.get``, re-raising a task's seed-sweep error as itself (it names the file and what to do)."""
    import ray
    from ray.exceptions import RayTaskError

    try:
        return ray.get(ref)
    except RayTaskError as e:
        if isinstance(e.cause, SweepError):
            raise e.cause from None
        raise
