"""Host memory a streaming block no longer uses, handed back to the system.

Windows, the copies of each read on their way into one (a trajectory's states, normalised, cut
into pairs) and evaluation parts of a few MiB to 32 MiB come from the C heap once glibc's
adaptive mmap threshold has seen one such block freed, and freed heap memory stays in the
process: a trial streaming 64 windows of 29 MiB an epoch grew its peak RSS by ~300 MiB over two
epochs (`benchmarks.trainer.streaming --file-gib 1 --budget 64MiB`, before a chunk's windows were
read into two reused buffers). :func:`heap_trim` before windows
and parts keeps it flat, and sets nothing: the allocator's settings stay the process's. A trim
walks the heap (milliseconds), so it runs once per :data:`TRIM_EVERY` bytes of windows and parts
read, not before each small window (192 KiB windows trained 25% slower trimmed each time).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import threading
from collections.abc import Callable
from typing import Any

TRIM_EVERY = 64 * 2**20  # bytes of host arrays read between two trims
_read = {"bytes": 0}
_lock = threading.Lock()


@functools.cache
def _trim() -> Callable[[], Any]:
    """glibc's ``malloc_trim(0)``, or a no-op where the C library has none."""
    try:
        trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return lambda: None
    return functools.partial(trim, 0)


def heap_trim(nbytes: int) -> None:
    """Count ``nbytes`` of host arrays about to be read (a window, an evaluation part), and hand
    the free pages of the C heap (every arena) back to the system once :data:`TRIM_EVERY` bytes
    were counted since the last time (module docstring)."""
    with _lock:
        _read["bytes"] += nbytes
        due = _read["bytes"] >= TRIM_EVERY
        if due:
            _read["bytes"] = 0
    if due:
        _trim()()
