"""Timing and host memory of a call, for benchmarks that compare methods in one process.

```python
times = best_of({"predict": lambda: ens.predict(x), "loop": lambda: [one(m, x) for m in members]}, 5)
peak, y = host_peak(lambda: ens.predict(x))     # bytes Python allocated at most during the call
```
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from typing import Any


def best_of(fns: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """The fastest of ``repeats`` calls of each function (each called once first, to compile and
    warm up), waiting for JAX's results; the functions take turns so that they see the same load."""
    import jax

    for fn in fns.values():
        jax.block_until_ready(fn())
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            jax.block_until_ready(fn())
            times[name].append(time.perf_counter() - start)
    return {name: min(t) for name, t in times.items()}


def seconds(fn: Callable[[], Any]) -> float:
    """Wall seconds of one call of ``fn``."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def host_peak(fn: Callable[[], Any]) -> tuple[int, Any]:
    """The largest number of bytes Python had allocated (``tracemalloc``) during ``fn()``, and its result."""
    tracemalloc.start()
    try:
        out = fn()
        return tracemalloc.get_traced_memory()[1], out
    finally:
        tracemalloc.stop()
