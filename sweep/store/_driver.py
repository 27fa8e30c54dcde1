"""Who drives a sweep directory now: ``driver.json``, written when a run starts and removed when
it ends (a finished run, an error, a Ctrl-C or a SIGTERM alike).

A run killed without a chance to remove it (SIGKILL, a lost machine) leaves the file: on the
machine that wrote it, a process id that no longer runs (or now runs another process: Linux's
start time of the process tells) says the run is gone; on another machine nothing can tell,
so a run there is named as one that may still run.

```python
with Driving(sweep_dir) as driving:   # refused while another run on this machine drives it
    driving.mark()                    # driver.json: this process
    ...                               # train and aggregate
driver_of(sweep_dir)                  # Driver(host=..., pid=..., started=...) or None
```
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from dataclasses import dataclass

from .._errors import SpecError, StoreError
from .._fs import read_text, write_text_atomic
from .._layout import DRIVER
from ._sweepdir import SweepDir

_log = logging.getLogger("sweep.store")


@dataclass(frozen=True)
class Driver:
    """The run a ``driver.json`` names: its machine, process id, the process's start time on
    Linux (``ticks``: tells a reused process id apart) and when it started (seconds since the
    epoch)."""

    host: str
    pid: int
    started: float
    ticks: int | None = None

    @classmethod
    def this_process(cls) -> Driver:
        return cls(socket.gethostname(), os.getpid(), time.time(), _start_ticks(os.getpid()))

    def running(self) -> bool | None:
        """Whether it still runs: True or False on the machine that wrote it, None elsewhere."""
        if self.host != socket.gethostname():
            return None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # (another user's process)
        return self.ticks is None or _start_ticks(self.pid) == self.ticks

    def is_this_process(self) -> bool:
        return self.host == socket.gethostname() and self.pid == os.getpid()

    def described(self) -> str:
        """``pid 1234 on this machine, since 2026-12-07 14:02:31`` (``on host h`` elsewhere)."""
        where = "this machine" if self.host == socket.gethostname() else f"host {self.host}"
        return f"pid {self.pid} on {where}, since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(self.started))}"


def _start_ticks(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks since boot (Linux's ``/proc``), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rpartition(")")[2].split()[19])  # (field 22; the name may hold spaces)
    except (OSError, ValueError, IndexError):
        return None


def driver_of(sweep_dir: SweepDir) -> Driver | None:
    """The run ``driver.json`` names, or None (no file, or not one of these fields)."""
    try:
        kept = json.loads(read_text(sweep_dir.filesystem, f"{sweep_dir.path}/{DRIVER}"))
        driver = Driver(kept["host"], kept["pid"], kept["started"], kept.get("ticks"))
    except (OSError, StoreError, ValueError, KeyError, TypeError, RecursionError):
        return None
    fields = (driver.host, driver.pid, driver.started, driver.ticks)
    kinds = (str, int, (int, float), (int, type(None)))
    return driver if all(isinstance(v, k) and not isinstance(v, bool) for v, k in zip(fields, kinds)) else None


class Driving:
    """``with Driving(sweep_dir) as driving: ... driving.mark() ...``: refuse (on entering) while
    another run on this machine drives ``sweep_dir``, and warn where a run on another machine has
    not said it ended; :meth:`mark` writes ``driver.json`` (once the run is about to write to the
    directory: a run refused before leaves no file), and leaving the block removes it. A storage
    that refuses the file is logged, not raised: the file only tells ``sweep status`` and later
    runs."""

    def __init__(self, sweep_dir: SweepDir):
        self._sweep_dir, self._path = sweep_dir, f"{sweep_dir.path}/{DRIVER}"
        self._me: Driver | None = None

    def __enter__(self) -> Driving:
        other, shown = driver_of(self._sweep_dir), self._sweep_dir.shown
        if other is None or other.is_this_process():
            return self
        running = other.running()
        if running:
            raise SpecError(
                f"{shown} is being trained now by another run ({other.described()}): a second run would train "
                f"the same trials beside it. Wait for it to end (`sweep status {shown}` shows how far it is), or "
                f"stop it (Ctrl-C where it runs) and resume"
            )
        if running is None:
            _log.warning(
                "%s: a run (%s) has not said it ended: if it still runs there, this run trains the same trials "
                "beside it; if it was killed, nothing is wrong",
                shown,
                other.described(),
            )
        return self

    def mark(self) -> None:
        """Write ``driver.json`` naming this process."""
        me = Driver.this_process()
        try:
            write_text_atomic(self._sweep_dir.filesystem, self._path, json.dumps(me.__dict__))
        except OSError as e:
            _log.warning("%s/%s: not written (%s)", self._sweep_dir.shown, DRIVER, e)
            return
        self._me = me

    def __exit__(self, *exc: object) -> None:
        try:
            if self._me is not None and driver_of(self._sweep_dir) == self._me:  # (not a later run's)
                self._sweep_dir.filesystem.delete_file(self._path)
        except OSError as e:
            _log.warning("%s/%s: not removed (%s)", self._sweep_dir.shown, DRIVER, e)
