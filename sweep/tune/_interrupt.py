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
``timeout`` and ``systemctl stop`` end a process. Without :class:`SigtermAsCtrlC` a SIGTERM
to the driver ends it at once (Python's default; once ``ray.init`` has run, Ray's handler raises
``SystemExit``, and Ray's C++ failure handler prints a stack dump first): nothing is aggregated and
no resume command is printed. Inside it, a SIGTERM does what a Ctrl-C does at that moment: the
SIGINT handler in place then runs (Tune's during an experiment, which stops the trials and keeps
their checkpoints; Python's elsewhere, which raises ``KeyboardInterrupt``). Where the signal
went to every process (Slurm's job step, ``timeout``'s process group, ``ray job stop``'s process
tree), the Ray this process started gets it too: its daemons exit within seconds, and the stop
would wait a minute on them (Ray's reconnection timeout) before Ray ends the process; the driver
ends as soon as they are gone, saying how to resume (:func:`local_ray_lost`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any


@contextlib.contextmanager
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


LOST_POLL_S = 0.2  # how often, after a SIGTERM, the watchdog looks at the run and its Ray
CLOSE_WAIT_S = 1.0  # the most the watchdog waits on a close (a display) before it ends the process
RAY_DAEMONS = ("raylet", "gcs_server")  # Ray's process types of the daemons a stop needs
_TAKING: list[SigtermAsCtrlC] = []  # the contexts open in this process (one per running sweep.run)


def local_ray_lost() -> bool:
    """Whether the raylet or the GCS of the Ray this process started has exited; False where this
    process joined a cluster (its node runs no daemon here) or Ray is not running."""
    try:
        from ray._private.worker import _global_node  # (read now: ray.init sets it)

        node: Any = _global_node
        return node is not None and any(kind in RAY_DAEMONS for kind, _ in node.dead_processes())
    except Exception:  # Ray changed its internals: not noticed (tests/test_private_apis.py)
        return False


class Terminated(KeyboardInterrupt):
    """The ``KeyboardInterrupt`` a SIGTERM raises inside :class:`SigtermAsCtrlC`; ``signal`` says
    so (the CLI exits with 128 plus it, 143)."""

    def __init__(self) -> None:
        super().__init__()
        self.signal = signal.SIGTERM


@contextlib.contextmanager
def starting_ray() -> Iterator[None]:
    """Around starting (or reusing) Ray for a run, the one place that does. The runs open here
    depend on this process's Ray from now on (:class:`SigtermAsCtrlC`'s watchdog looks at it).
    ``ray.init`` installs Ray's SIGTERM handler first thing, which raises ``SystemExit(15)``: a
    SIGTERM before it returns is a Ctrl-C (:class:`Terminated`) where a run is open, and an open
    run takes SIGTERM back from Ray's handler as soon as ``ray.init`` returns."""
    for taking in _TAKING:
        taking.on_ray = True
    try:
        yield
    except SystemExit as e:
        if e.code != signal.SIGTERM or not _TAKING:
            raise
        for taking in _TAKING:
            taking.received = True
        raise Terminated from None
    finally:
        for taking in _TAKING:
            taking.take_back()


class SigtermAsCtrlC:
    """A context: inside it, a SIGTERM to this process runs the SIGINT handler in place then
    (Python's ``KeyboardInterrupt``, :class:`Terminated`, where SIGINT is ignored or left to the
    system: a SIGTERM still stops), and :attr:`received` says so.

    A watchdog thread runs while the block does. It raises the interrupt of a SIGTERM again
    where Python swallowed it (raised inside a garbage-collection callback or a ``__del__``:
    "Exception ignored in", seen by ``sys.unraisablehook``); and where the run depends on this
    process's Ray (:func:`starting_ray`) and that Ray lost its raylet or GCS (:func:`local_ray_lost`:
    a SIGTERM reached them too, or a kill; the run could not go on, and Ray would end the process
    a minute later), it calls what :meth:`closes` was given, prints ``last_words`` and ends the
    process with status 143 at once, as a kill would: every checkpoint and the store stay
    readable. (It looks every :data:`LOST_POLL_S` seconds: the main thread may be inside Ray,
    not running Python, when the SIGTERM comes.)

    ``ray.init`` installs Ray's own SIGTERM handler: :func:`starting_ray` around it (or
    :meth:`take_back` after it) puts this one back. After the block the handler replaced last is
    in place again: Ray's, once Ray started inside the block (it shuts Ray down as the process
    exits), else the one of before. Nothing changes outside the main thread, where no signal
    handler can be set. (A SIGTERM in the few bytecodes of a swap of handlers is not covered.)

    ```python
    with SigtermAsCtrlC("stopped; resume with: ...") as sigterm:
        sigterm.closes(display.close)
        with starting_ray():
            ray.init()
    ```
    """

    def __init__(self, last_words: str):
        self.last_words = last_words
        self.main = threading.current_thread() is threading.main_thread()
        self.replaced: Callable | int | None = None
        self.closing: list[Callable[[], None]] = []
        self.inside, self.swallowed = threading.Event(), threading.Event()
        self.received = False  # whether a SIGTERM reached the block
        self.on_ray = False
        self.hook: Callable[[Any], Any] | None = None

    def __enter__(self) -> SigtermAsCtrlC:
        if not self.main:
            return self
        self.inside.set()
        _TAKING.append(self)  # (first: a SIGTERM from here on finds it open)
        self.hook, sys.unraisablehook = sys.unraisablehook, self._unraisable
        threading.Thread(target=self._watch, name="sweep-sigterm", daemon=True).start()
        self.take_back()
        return self

    def __exit__(self, *exc) -> None:
        if not self.main:
            return
        try:
            self.inside.clear()
        finally:
            if signal.getsignal(signal.SIGTERM) == self._as_ctrl_c:
                signal.signal(signal.SIGTERM, signal.SIG_DFL if self.replaced is None else self.replaced)
            if sys.unraisablehook == self._unraisable:
                sys.unraisablehook = self.hook
            _TAKING.remove(self)

    def take_back(self) -> None:
        """Handle SIGTERM as this context says again, if something replaced the handler."""
        current = signal.getsignal(signal.SIGTERM)
        if self.inside.is_set() and current != self._as_ctrl_c:  # (never set outside the main thread)
            self.replaced = current
            signal.signal(signal.SIGTERM, self._as_ctrl_c)

    def closes(self, close: Callable[[], None]) -> None:
        """Call ``close`` (a live display: the terminal's cursor back) before ending at once."""
        self.closing.append(close)

    def stopped_by(self) -> signal.Signals:
        """The signal a stop of the block answers: SIGTERM where one reached it, else SIGINT."""
        return signal.SIGTERM if self.received else signal.SIGINT

    def _as_ctrl_c(self, signum: int, frame: FrameType | None) -> None:
        self.received = True
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler) and handler is not signal.default_int_handler:  # Tune's: a flag, stopped gracefully
            handler(signal.SIGINT, frame)
            return
        raise Terminated

    def _unraisable(self, unraisable: Any) -> None:
        """``sys.unraisablehook``: a :class:`Terminated` Python ignored is raised again (the watchdog)."""
        if isinstance(unraisable.exc_value, Terminated):
            self.swallowed.set()
        elif self.hook is not None:
            self.hook(unraisable)

    def _watch(self) -> None:
        """Raises a swallowed interrupt again; ends the process once the Ray the run depends on is
        lost (a SIGTERM to every process, seen before the main thread runs its handler; or a
        kill: the run could not go on); returns when the block ends."""
        while self.inside.is_set():
            if self.swallowed.is_set():
                self.swallowed.clear()
                os.kill(os.getpid(), signal.SIGTERM)  # (to the main thread's handler: this one again)
            if self.on_ray and local_ray_lost():
                self._end()
            time.sleep(LOST_POLL_S)

    def _end(self) -> None:
        closing = threading.Thread(target=self._close_all, daemon=True)
        closing.start()
        closing.join(CLOSE_WAIT_S)  # (a display that does not close in time is left as it is)
        with contextlib.suppress(Exception):  # (a closed stream: the process still ends)
            sys.stdout.flush()
        with contextlib.suppress(Exception):
            print(self.last_words, file=sys.stderr, flush=True)
        os._exit(143)  # (as terminated: most often by the SIGTERM its Ray got too)

    def _close_all(self) -> None:
        for close in self.closing:
            with contextlib.suppress(Exception):  # (racing the main thread's own close)
                close()
