"""Batching of concurrent requests into forward passes, cut when the model is free.

Ray Serve's ``@serve.batch`` cuts a batch ``batch_wait_timeout_s`` after its first request and
queues it behind the pass in progress: while one pass runs, the requests arriving meanwhile are
cut into several small batches by the timer, each waiting its turn (measured at 8 clients: 4.7
rows per pass), and a lone request always waits the timeout. :class:`Batcher` instead runs one
pass at a time and takes, when the model is free, every request queued (up to ``max_items``):
what arrived during the previous pass forms the next one, a request reaching an idle model
starts at once (``wait_s`` = 0, the default), and under load the passes fill by themselves.

```python
batcher = Batcher(lambda items: [run(x) for x in items], max_items=64)
answer = await batcher.submit(x)          # from any coroutine of the replica's event loop
```
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any


class Batcher:
    """Runs ``run(items) -> answers`` (one answer per item, in order) in a worker thread, one
    call at a time, on the requests queued when it is free.

    Args:
        run: the batched computation (blocking; it runs in a thread so the event loop keeps
            reading requests meanwhile).
        max_items: the most requests one call takes.
        wait_s: how long a call waits for more requests when fewer than ``max_items`` are queued
            (0: it starts with what is queued).
    """

    def __init__(self, run: Callable[[list[Any]], Sequence[Any]], max_items: int, wait_s: float = 0.0):
        self.run, self.max_items, self.wait_s = run, max_items, wait_s
        self._queue: asyncio.Queue[tuple[Any, asyncio.Future]] | None = None
        self._worker: asyncio.Task | None = None

    async def submit(self, item: Any) -> Any:
        """``item``'s answer, computed in a batch with the requests queued beside it (an
        exception of the call is raised to every request of its batch)."""
        if self._queue is None or self._worker is None or self._worker.done():
            self._queue = self._queue or asyncio.Queue()
            self._worker = asyncio.get_running_loop().create_task(self._work(self._queue))
        future = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((item, future))
        return await future

    async def _work(self, queue: asyncio.Queue[tuple[Any, asyncio.Future]]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = [await queue.get()]
            deadline = loop.time() + self.wait_s
            while len(batch) < self.max_items:
                if not queue.empty():
                    batch.append(queue.get_nowait())
                    continue
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    batch.append(await asyncio.wait_for(queue.get(), remaining))
                except TimeoutError:
                    break
            live = [(item, future) for item, future in batch if not future.done()]  # a client gone: cancelled
            if not live:
                continue
            try:
                answers = await asyncio.to_thread(self.run, [item for item, _ in live])
            except Exception as e:  # every request of the batch gets the error; the worker goes on
                for _, future in live:
                    if not future.done():
                        future.set_exception(e)
                continue
            for (_, future), answer in zip(live, answers, strict=True):
                if not future.done():
                    future.set_result(answer)
