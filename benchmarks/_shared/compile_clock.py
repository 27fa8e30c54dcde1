"""Wall time of a block of code, the part of it JAX spent tracing, lowering and compiling, and
the CPU time of the process meanwhile.

Shared by both sides of ``trainer/vs_apebench.py`` (it needs nothing but JAX): the compile part is the
sum of JAX's ``/jax/core/compile/*`` duration events (``jax.monitoring``), so training time
net of compilation is measured the same way in both processes. CPU time (all threads of the
process) is the work done, which other processes on a shared machine disturb far less than
the wall clock.
"""

from __future__ import annotations

import contextlib
import time

import jax

_PREFIX = "/jax/core/compile/"
_compile_seconds = [0.0]


def _listen(event: str, duration: float, **_) -> None:
    if event.startswith(_PREFIX):
        _compile_seconds[0] += duration


jax.monitoring.register_event_duration_secs_listener(_listen)


@contextlib.contextmanager
def clock():
    """``with clock() as t: ...`` fills ``t["seconds"]``, ``t["compile_seconds"]`` and
    ``t["cpu_seconds"]`` on exit.

    Block on the results inside the ``with`` (``jax.block_until_ready``) so that they count.
    """
    out: dict[str, float] = {}
    start, cpu, compiled = time.perf_counter(), time.process_time(), _compile_seconds[0]
    yield out
    out["seconds"] = time.perf_counter() - start
    out["cpu_seconds"] = time.process_time() - cpu
    out["compile_seconds"] = _compile_seconds[0] - compiled
