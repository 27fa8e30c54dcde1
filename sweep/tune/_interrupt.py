"""Ctrl-C around one Tune experiment: whether Tune caught it, and Ctrl-C working again afterwards;
and a SIGTERM to the driver taken as a Ctrl-C while a sweep runs.

``Tuner.fit`` installs its own SIGINT handler (on the main thread, unless
``TUNE_DISABLE_SIGINT_HANDLER=1``): the first Ctrl-C stops the experiment and puts the previous
handler back, a second one reaches that handler. Without a Ctrl-C, Tune's handler stays
installed after ``fit`` returns (Ray 2.60), so a Ctrl-C after it (between the waves of a large
plan, during the aggregation) would only set a flag of the finished experiment and be lost; and
a Ctrl-C that arrives as the last trials of an experiment finish leaves no unfinished trial to
tell it happened. :func:`tune_sigint` answers both: the handler in place before the experiment
is put back, and ``caught()`` says whether Tune's handler ran.

```python
with tune_sigint() as caught:
    results = tuner.fit()
interrupted = caught() or ...
```

A SIGTERM is how Slurm (``scancel``, the time limit), Kubernetes (a deleted pod), ``ray job stop``,
``timeout`` and ``systemctl stop`` end a process. Without :func:`sigterm_as_ctrl_c` a SIGTERM
to the driver ends it at once (Python's default; once ``ray.init`` has run, Ray's handler raises
``SystemExit``, and Ray's C++ failure handler prints a stack dump first): nothing is aggregated and
no resume command is printed. Inside it, a SIGTERM does what a Ctrl-C does at that moment: the
SIGINT handler in place then runs (Tune's during an experiment, which stops the trials and keeps
their checkpoints; Python's elsewhere, which raises ``KeyboardInterrupt``). Where the signal
went to every process (Slurm's job step, ``timeout``'s process group), the Ray this process
started gets it too: its daemons exit within a second, and the stop would wait a minute on
them (Ray's reconnection timeout) before Ray ends the process; the driver ends at once then,
saying how to resume (:func:`local_ray_lost`).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType


@contextmanager
def tune_sigint() -> Iterator[Callable[[], bool]]:
    """Yields ``caught()``: whether Tune's SIGINT handler ran inside the block; the SIGINT handler
    of before the block is in place after it."""
    outcome = {"caught": False}
    if threading.current_thread() is not threading.main_thread():  # Tune installs no handler there
        yield lambda: False
        return
    before = signal.getsignal(signal.SIGINT)
    tune_handles = os.environ.get("TUNE_DISABLE_SIGINT_HANDLER", "0") in ("", "0")
    try:
        yield lambda: outcome["caught"]
    finally:
        after = signal.getsignal(signal.SIGINT)
        # Tune's handler, once it has run, has put ``before`` back; one still installed has not run
        outcome["caught"] = tune_handles and after is before
        if after is not before:
            signal.signal(signal.SIGINT, before)


LOST_POLL_S = 0.2  # how often, after a SIGTERM, the Ray this process started is looked at


def local_ray_lost() -> bool:
    """Whether a daemon of the Ray this process started (its raylet, its GCS) has exited; False
    where this process joined a cluster (it started no daemon) or Ray is not running."""
    try:
        from ray._private.worker import _global_node as node  # (read now: ray.init sets it)

        return node is not None and bool(node.dead_processes())
    except Exception:  # Ray changed its internals: not noticed (tests/test_private_apis.py)
        return False


class SigtermAsCtrlC:
    """A context: inside it, a SIGTERM to this process runs the SIGINT handler in place then
    (Python's ``KeyboardInterrupt`` where SIGINT is ignored or left to the system: a SIGTERM
    still stops). From then on, if the Ray this process started loses a daemon
    (:func:`local_ray_lost`), the process closes what :meth:`closes` was given, prints
    ``last_words`` and ends with status 143 (128 + SIGTERM) at once, as a kill would: every
    checkpoint and the store stay readable.

    After ``ray.init`` (which installs Ray's own SIGTERM handler) call :meth:`take_back`. After
    the block the handler replaced last is in place again: Ray's, once Ray started inside the
    block (it shuts Ray down as the process exits), else the one of before. Nothing changes
    outside the main thread, where no signal handler can be set.

    ```python
    with SigtermAsCtrlC("stopped; resume with: ...") as sigterm:
        sigterm.closes(display.close)
        ray.init()
        sigterm.take_back()
    ```
    """

    def __init__(self, last_words: str):
        self.last_words = last_words
        self.main = threading.current_thread() is threading.main_thread()
        self.replaced: Callable | int | None = None
        self.closing: list[Callable[[], None]] = []
        self.inside = threading.Event()

    def __enter__(self) -> SigtermAsCtrlC:
        self.inside.set()
        self.take_back()
        return self

    def __exit__(self, *exc) -> None:
        self.inside.clear()
        if self.main and signal.getsignal(signal.SIGTERM) == self._as_ctrl_c:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if self.replaced is None else self.replaced)

    def take_back(self) -> None:
        """Handle SIGTERM as this context says again, if something replaced the handler."""
        current = signal.getsignal(signal.SIGTERM)
        if self.main and current != self._as_ctrl_c:
            self.replaced = current
            signal.signal(signal.SIGTERM, self._as_ctrl_c)

    def closes(self, close: Callable[[], None]) -> None:
        """Call ``close`` (a live display: the terminal's cursor back) before ending at once."""
        self.closing.append(close)

    def _as_ctrl_c(self, signum: int, frame: FrameType | None) -> None:
        if not any(t.name == "sweep-sigterm" for t in threading.enumerate()):
            threading.Thread(target=self._end_if_ray_is_lost, name="sweep-sigterm", daemon=True).start()
        handler = signal.getsignal(signal.SIGINT)
        (handler if callable(handler) else signal.default_int_handler)(signal.SIGINT, frame)

    def _end_if_ray_is_lost(self) -> None:
        while self.inside.is_set():
            if local_ray_lost():
                for close in self.closing:
                    close()
                print(self.last_words, file=sys.stderr, flush=True)
                os._exit(143)
            time.sleep(LOST_POLL_S)
