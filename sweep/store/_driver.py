"""Who drives a sweep directory now: ``driver.json``, written when a run starts and removed when
it ends (a finished run, an error, a Ctrl-C or a SIGTERM alike).

A run killed without a chance to remove it (SIGKILL, a lost machine) leaves the file: on the
machine that wrote it, a process id that no longer runs (or now runs another process: Linux's
start time of the process tells) says the run is gone; on another machine, or in another
process namespace of one (a container), nothing can tell, so a run there is named as one that
may still run.

```python
with Driving(sweep_dir) as driving:   # refused while another run on this machine drives it
    ...                               # check, train and aggregate
driver_of(sweep_dir)                  # Driver(host=..., pid=..., started=...) or None
live_driver(sweep_dir)                # the same where it runs now (another process), else None
```
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import shlex
import socket
import time
from dataclasses import asdict, dataclass

import pyarrow.fs as pafs

from .._errors import SpecError, StoreError
from .._fs import local_path, read_text, write_flushed, write_text_atomic
from .._layout import DRIVER
from ._sweepdir import SweepDir

_log = logging.getLogger("sweep.store")
LATEST_START = 2**33  # seconds since the epoch (the year 2242): a later `started` is not a time
MAX_PID = 2**31 - 1


@dataclass(frozen=True)
class Driver:
    """The run a ``driver.json`` names: its machine, process id, the process's start time on
    Linux (``ticks``: tells a reused process id apart), its process namespace (``namespace``:
    a container's processes are not seen from another) and when it started (seconds since the
    epoch)."""

    host: str
    pid: int
    started: float
    ticks: int | None = None
    namespace: str | None = None

    @classmethod
    def this_process(cls) -> Driver:
        pid = os.getpid()
        return cls(socket.gethostname(), pid, time.time(), _process_stat(pid)[1], _namespace())

    def running(self) -> bool | None:
        """Whether it still runs: True or False where this process sees it (the machine and
        process namespace that wrote it), None elsewhere."""
        if self.host != socket.gethostname() or self.namespace != _namespace():
            return None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # (another user's process)
        state, ticks = _process_stat(self.pid)
        return state != "Z" and (self.ticks is None or ticks == self.ticks)  # (Z: ended, not yet reaped)

    def is_this_process(self) -> bool:
        return self.host == socket.gethostname() and self.namespace == _namespace() and self.pid == os.getpid()

    def described(self) -> str:
        """``pid 1234 on this machine, since 2026-12-07 14:02:31`` (``on host h`` elsewhere)."""
        where = "this machine" if self.host == socket.gethostname() else f"host {self.host}"
        if self.host == socket.gethostname() and self.namespace != _namespace():
            where += " (in another container or process namespace)"
        return f"pid {self.pid} on {where}, since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(self.started))}"


def _process_stat(pid: int) -> tuple[str | None, int | None]:
    """Process ``pid``'s state (``"Z"``: ended, not yet reaped by its parent) and start time in
    clock ticks since boot, from Linux's ``/proc``; ``(None, None)`` where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()  # (after the name, which may hold spaces)
        return fields[0], int(fields[19])  # fields 3 and 22
    except (OSError, ValueError, IndexError):
        return None, None


def _namespace() -> str | None:
    """This process's pid namespace (Linux: ``pid:[4026531836]``), or None."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def driver_of(sweep_dir: SweepDir) -> Driver | None:
    """The run ``driver.json`` names, or None (no file, or not one of these fields in range)."""
    try:
        kept = json.loads(read_text(sweep_dir.filesystem, f"{sweep_dir.path}/{DRIVER}"))
        driver = Driver(kept["host"], kept["pid"], kept["started"], kept.get("ticks"), kept.get("namespace"))
    except (OSError, StoreError, ValueError, KeyError, TypeError, RecursionError):
        return None
    fields = (driver.host, driver.pid, driver.started, driver.ticks, driver.namespace)
    kinds = (str, int, (int, float), (int, type(None)), (str, type(None)))
    if not all(isinstance(v, k) and not isinstance(v, bool) for v, k in zip(fields, kinds)):
        return None
    in_range = 0 < driver.pid <= MAX_PID and math.isfinite(driver.started) and 0 <= driver.started < LATEST_START
    return driver if in_range else None


def live_driver(sweep_dir: SweepDir) -> Driver | None:
    """The run that drives ``sweep_dir`` now, seen running from here (another process than this
    one), or None."""
    driver = driver_of(sweep_dir)
    return driver if driver is not None and not driver.is_this_process() and driver.running() else None


class Driving:
    """``with Driving(sweep_dir): ...``: refuse while another run on this machine drives
    ``sweep_dir`` (warn where a run elsewhere has not said it ended), then mark it as driven by
    this process (``driver.json``, created exclusively on a local disk: of two runs starting
    at once one is refused) until the block ends, or :meth:`release` (a SIGTERM's exit). The
    folders the mark made (the sweep directory, the storage folder) are removed with it where
    nothing else was written there (a run refused by its checks leaves nothing). A storage that
    refuses the file is logged, not raised: the file only tells ``sweep status`` and later runs."""

    def __init__(self, sweep_dir: SweepDir):
        self._sweep_dir, self._path = sweep_dir, f"{sweep_dir.path}/{DRIVER}"
        self._me: Driver | None = None
        self._created: list[str] = []  # the folders the mark makes, deepest first

    def __enter__(self) -> Driving:
        fs, path = self._sweep_dir.filesystem, self._sweep_dir.path
        while path and fs.get_file_info(path).type == pafs.FileType.NotFound:  # the folders the mark makes
            self._created.append(path)
            path = path.rpartition("/")[0]
        seen = driver_of(self._sweep_dir)
        self._check(seen)
        me = Driver.this_process()
        try:
            self._write(me, seen)
        except OSError as e:
            _log.warning("%s/%s: not written (%s)", self._sweep_dir.shown, DRIVER, e)
            return self
        self._me = me
        return self

    def _write(self, me: Driver, seen: Driver | None) -> None:
        """Write the mark: on a local disk created exclusively (a hard link of a file written
        aside, which fails where the name exists), so that of two runs starting at once the one
        that comes second finds the first's mark and is refused; a mark ``seen`` and checked
        (one taken for gone) is replaced. Object storage and disks without hard links have no
        exclusive creation: there the mark is written over, as :meth:`_check` allowed."""
        text = json.dumps(asdict(me))
        local = local_path(self._sweep_dir.filesystem, self._path)
        if local is None:
            write_text_atomic(self._sweep_dir.filesystem, self._path, text)
            return
        os.makedirs(os.path.dirname(local), exist_ok=True)
        aside = f"{os.path.dirname(local)}/.{DRIVER}.tmp-{os.getpid()}"
        write_flushed(aside, text.encode())
        try:
            for _ in range(8):  # (each turn another mark appeared and was taken for gone)
                try:
                    os.link(aside, local)
                    return
                except FileExistsError:
                    now = driver_of(self._sweep_dir)
                    if now != seen:  # another run marked it since this run looked: looked at again
                        self._check(now)
                        seen = now
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(local)  # (a mark taken for gone)
                except OSError:  # (no hard links on this disk: vfat, some FUSE mounts)
                    break
            os.replace(aside, local)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(aside)

    def _check(self, other: Driver | None) -> None:
        if other is None or other.is_this_process():
            return
        shown = self._sweep_dir.shown
        running = other.running()
        if running:
            raise SpecError(
                f"{shown} is being trained now by another run ({other.described()}): a second run would train "
                f"the same trials beside it. Wait for it to end (`sweep status {shlex.quote(shown)}` shows how far "
                f"it is), or stop it (Ctrl-C where it runs) and resume (if that process is no run of this sweep, "
                f"remove {shlex.quote(f'{shown}/{DRIVER}')})"
            )
        if running is None:
            _log.warning(
                "%s: a run (%s) has not said it ended: if it still runs there, two runs drive this sweep; if it "
                "was killed, nothing is wrong",
                shown,
                other.described(),
            )

    def release(self) -> None:
        """Remove the mark (if it is still this run's), and the folders it made that hold nothing
        else."""
        me, self._me = self._me, None
        if me is None:
            return
        fs = self._sweep_dir.filesystem
        try:
            if driver_of(self._sweep_dir) == me:  # (not a later run's, written after this one was taken for gone)
                fs.delete_file(self._path)
            for folder in self._created:  # (those nothing else was written to)
                if fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True)):
                    break
                with contextlib.suppress(OSError):
                    fs.delete_dir(folder)
        except OSError as e:
            _log.warning("%s/%s: not removed (%s)", self._sweep_dir.shown, DRIVER, e)

    def __exit__(self, *exc: object) -> None:
        self.release()
