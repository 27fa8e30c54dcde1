"""Ctrl-C around one Tune experiment: whether Tune caught it, and Ctrl-C working again afterwards;
and a SIGTERM to the driver taken as a Ctrl-C while a sweep runs (and while ``sweep serve`` serves).

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
tree), the Ray this process started gets it too: its GCS closes its port at once and its daemons
exit within ten seconds, and the stop would wait on them until Ray ends the process (a minute, its
reconnection timeout, or at the raylet's exit: status 1, nothing said); the driver ends as soon as
the GCS refuses connections, saying how to resume (:func:`local_ray_lost`).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
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


LOST_POLL_S = 0.2  # how often the watchdog looks at the run and its Ray
SIGNALLED_POLL_S, SIGNALLED_FOR_S = 0.01, 2.0  # how often it looks for how long after a SIGTERM (Ray may end first)
CLOSE_WAIT_S = 1.0  # the most the watchdog waits on a close (a display) before it ends the process
RAY_DAEMONS = ("raylet", "gcs_server")  # Ray's process types of the daemons a stop needs
_TAKING: list[SigtermAsCtrlC] = []  # the contexts open in this process (a running sweep.run, sweep serve)


def local_ray_lost(signalled: bool = False) -> bool:
    """Whether the raylet or the GCS of the Ray this process started has exited or, once a SIGTERM
    reached this process (``signalled``), whether that GCS refuses connections: a SIGTERM closes its
    port at once, while its process, and the raylet's, live on up to ten seconds, and the driver's Ray
    may end it first (exit 1, nothing said). False where this process joined a cluster (its node
    runs no daemon here) or Ray is not running."""
    try:
        from ray._private.worker import _global_node  # (read now: ray.init sets it)

        node: Any = _global_node
        if node is None:
            return False
        if any(kind in RAY_DAEMONS for kind, _ in node.dead_processes()):
            return True
        return signalled and RAY_DAEMONS[1] in node.all_processes and _refuses(node.gcs_address)
    except Exception:  # Ray changed its internals: not noticed (tests/test_private_apis.py)
        return False


def _refuses(address: str) -> bool:
    """Whether nothing listens at ``host:port`` (``[host]:port`` for IPv6) any more (a slow answer
    is not a refusal)."""
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=LOST_POLL_S).close()  # ("[::1]": IPv6)
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
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
    run takes SIGTERM back from Ray's handler as soon as ``ray.init`` returns. Ray is imported
    first: the watchdog reads its internals, which a thread must not import while another does."""
    import ray  # noqa: F401

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
    later with status 1), it calls what :meth:`closes` was given, prints ``last_words`` and ends the
    process with status 143 at once, as a kill would: every checkpoint and the store stay
    readable. (It hears a SIGTERM as it comes, :class:`_Signals`, since the main thread may be inside
    Ray, not running Python, unless something else, an asyncio loop, owns the file Python's C
    handler writes to; and it looks every :data:`SIGNALLED_POLL_S` seconds for a while after it,
    every :data:`LOST_POLL_S` otherwise.)

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
        self.received = False  # whether a SIGTERM reached the block (its handler ran)
        self.signals: _Signals | None = None
        self.on_ray = False
        self.hook: Callable[[Any], Any] | None = None
        self.status = 143  # the exit status of an end at once (as terminated), unless :meth:`stopping` says

    def __enter__(self) -> SigtermAsCtrlC:
        if not self.main:
            return self
        self.inside.set()
        _TAKING.append(self)  # (first: a SIGTERM from here on finds it open)
        self.hook, sys.unraisablehook = sys.unraisablehook, self._unraisable
        self.signals = _Signals()
        threading.Thread(target=self._watch, args=(self.signals,), name="sweep-sigterm", daemon=True).start()
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
            if self.signals is not None:
                self.signals.stop()
            _TAKING.remove(self)

    def take_back(self) -> None:
        """Handle SIGTERM as this context says again, if something replaced the handler."""
        current = signal.getsignal(signal.SIGTERM)
        if self.inside.is_set() and current != self._as_ctrl_c:  # (never set outside the main thread)
            self.replaced = current
            signal.signal(signal.SIGTERM, self._as_ctrl_c)

    def stopping(self, status: int) -> None:
        """The block stops on purpose now, its Ray too (a service's Ctrl-C): where that Ray is found
        lost meanwhile, the process ends with ``status`` (130 after a Ctrl-C), as the stop would."""
        self.status = status

    def closes(self, close: Callable[[], None]) -> None:
        """Call ``close`` (a live display: the terminal's cursor back) before ending at once."""
        self.closing.append(close)

    def stopped_by(self) -> signal.Signals:
        """The signal a stop of the block answers: SIGTERM where one reached it, else SIGINT."""
        return signal.SIGTERM if self.received else signal.SIGINT

    def _as_ctrl_c(self, signum: int, frame: FrameType | None) -> None:
        self.received = True
        if self.signals is not None:
            self.signals.tell(signal.SIGTERM)  # (where the C handler told nobody: another wakeup fd)
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

    def _watch(self, signals: _Signals) -> None:
        """Raises a swallowed interrupt again; ends the process once the Ray the run depends on is
        lost (a SIGTERM to every process, heard before the main thread runs its handler; or a
        kill: the run could not go on); returns when the block ends."""
        heard_at = -float("inf")  # when the last SIGTERM came (time.monotonic)
        while self.inside.is_set():
            if self.swallowed.is_set():
                self.swallowed.clear()
                os.kill(os.getpid(), signal.SIGTERM)  # (to the main thread's handler: this one again)
            if self.on_ray and local_ray_lost(signalled=heard_at > -float("inf")) and self.inside.is_set():
                self._end()  # (still inside: a ray.shutdown() after the block closes the GCS too)
            recent = time.monotonic() - heard_at < SIGNALLED_FOR_S
            if signals.wait(SIGNALLED_POLL_S if recent else LOST_POLL_S) == signal.SIGTERM:
                heard_at = time.monotonic()
        signals.close()

    def _end(self) -> None:
        closing = threading.Thread(target=self._close_all, daemon=True)
        closing.start()
        closing.join(CLOSE_WAIT_S)  # (a display that does not close in time is left as it is)
        with contextlib.suppress(Exception):  # (a closed stream: the process still ends)
            sys.stdout.flush()
        with contextlib.suppress(Exception):
            print(self.last_words, file=sys.stderr, flush=True)
        os._exit(self.status)  # (143, as terminated: most often by the SIGTERM its Ray got too)

    def _close_all(self) -> None:
        for close in self.closing:
            with contextlib.suppress(Exception):  # (racing the main thread's own close)
                close()


class _Signals:
    """The signals this process receives, told to the watchdog as they come: Python's C handler
    writes each one's number to the file ``signal.set_wakeup_fd`` names, even while the main thread
    is inside Ray and runs no Python handler yet (after a SIGTERM to every process the driver's Ray
    may end it first). Where something else (an asyncio loop) named that file first, it is left as
    it is and only :meth:`tell` tells (the handler, once the main thread runs it). Made and stopped
    on the main thread; closed by the watchdog, after the stop, so that a signal handled on another
    thread as the stop comes writes to a file still open, not to one that took its number."""

    def __init__(self) -> None:
        self.wakes = False
        try:
            self.inbox, self.outbox = socket.socketpair()
            self.inbox.setblocking(False)
            self.outbox.setblocking(False)
            self.waiting = select.poll()  # (not select.select: no limit on the file's number)
            self.waiting.register(self.inbox, select.POLLIN)
        except OSError:  # (out of files: the watchdog looks every poll interval, hearing nothing)
            self.inbox = self.outbox = None
            return
        with contextlib.suppress(OSError, ValueError):  # (a subinterpreter: nothing heard at C level)
            before = signal.set_wakeup_fd(self.outbox.fileno(), warn_on_full_buffer=False)
            self.wakes = True  # (ours until stop(), also where theirs cannot be named again)
            if before != -1:
                signal.set_wakeup_fd(before)
                self.wakes = False

    def tell(self, signum: int) -> None:
        if self.outbox is not None:
            with contextlib.suppress(OSError):  # (full or closed: the watchdog has enough to read, or is gone)
                self.outbox.send(bytes([signum]))

    def wait(self, timeout: float) -> int | None:
        """As soon as a signal is told: SIGTERM if one was, else the last told; None if none was
        within ``timeout`` seconds."""
        if self.inbox is None:
            time.sleep(timeout)
            return None
        try:
            if not self.waiting.poll(timeout * 1000):
                return None
            told = self.inbox.recv(4096)
        except (OSError, ValueError):  # (closed meanwhile: the block is over)
            time.sleep(timeout)
            return None
        return signal.SIGTERM if signal.SIGTERM in told else (told[-1] if told else None)

    def stop(self) -> None:
        """No more wakeups (main thread): the file named before is named again, and the watchdog
        told to look (and close these)."""
        if self.wakes and self.outbox is not None:
            with contextlib.suppress(OSError, ValueError):
                if (named := signal.set_wakeup_fd(-1)) != self.outbox.fileno():
                    signal.set_wakeup_fd(named)  # (someone else named theirs since: it stays)
        self.tell(0)

    def close(self) -> None:
        """The watchdog's, once out of its loop."""
        for end in (self.inbox, self.outbox):
            if end is not None:
                end.close()
