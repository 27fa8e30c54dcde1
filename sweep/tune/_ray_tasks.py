"""The tasks of an aggregation as Ray tasks: one task per leaves file of the store, in parallel.

:func:`sweep.aggregate` plans a store from the checkpoints' ``block.json`` files alone and
describes every leaves file (one per structural config, or one per shard past the shard size)
as a task; given ``map_tasks=RayTasks()``, the tasks run as Ray tasks (one CPU each, at most
``window`` submitted at once), each reading only the blocks its members are in and writing its
file straight into the store's uncommitted generation. The driver gets back only each file's
checksum record and its members' rows (a small Arrow table), writes ``members.parquet``,
``configs.parquet`` and the manifest, and commits: the store is byte-identical to a serial
aggregation's.

Small aggregations stay in the driver, which then starts no Ray: one task, or tasks that read
fewer than :data:`MIN_BLOCKS` blocks in all (~2.5 s of serial work at the measured ~10 ms per
block, about what starting Ray's task workers, each importing JAX and seed-sweep, costs on a laptop).

```python
sweep.aggregate("runs/heat", map_tasks=sweep.tune.RayTasks())   # this process's Ray, else a new local one
sweep.aggregate("s3://bucket/heat", map_tasks=sweep.tune.RayTasks(address="auto"))
```
"""

from __future__ import annotations

import functools
import itertools
import resource
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .._errors import SweepError
from ._cluster import ensure_ray

MIN_BLOCKS = 256  # blocks read by all tasks together below which the driver runs them itself


class RayTasks:
    """``map`` over Ray tasks: results in order, at most ``window`` tasks submitted at a time
    (default: twice the cluster's CPUs), so the driver holds at most that many results. The tasks
    run on the Ray this process has initialised, else on a new local one, or on the cluster at
    ``address`` (``"auto"``, ``"HOST:6379"``, ``"ray://HOST:10001"``), started or joined when the
    first task is submitted.

    When there is one task, or the tasks read fewer than ``min_blocks`` blocks in all (their
    ``sources``), they run in this process instead. ``peak_rss_mib`` collects the peak resident
    memory of the worker process of each task run by Ray."""

    window: int | None
    min_blocks: int
    address: str | None

    def __init__(self, window: int | None = None, min_blocks: int = MIN_BLOCKS, address: str | None = None):
        self.window, self.min_blocks, self.address = window, min_blocks, address
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

        ensure_ray(self.address)
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
