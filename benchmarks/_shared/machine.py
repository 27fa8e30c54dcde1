"""How busy the rest of the machine was while a benchmark ran (this is a shared 2-core VM), and
this process's memory.

```python
with OtherLoad() as load:
    run_benchmark()
print(load)      # "other processes used 0.12 of 2 cores (1-min load average 1.3)"
```

CPU time of the whole machine (``/proc/stat``) minus that of this process's tree (itself and
every descendant: Ray's daemons and workers), over the wall time. The tree is sampled every
0.2 s (:class:`TreeSampler`), each process's last seen user + system time kept, so processes that
end (trial workers, Ray at shutdown) still count; at most 0.2 s of a process's last CPU is missed.
Linux only.
"""

from __future__ import annotations

import collections
import os
import resource
import threading
import time
from pathlib import Path

HZ = os.sysconf("SC_CLK_TCK")


def _machine_busy() -> int:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return user + nice + system + irq + softirq + steal


def _processes() -> dict[int, tuple[int, int, str]]:
    """pid -> (ppid, user + system ticks, command line)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        rest = stat.rsplit(")", 1)[1].split()
        out[int(entry.name)] = (int(rest[1]), int(rest[11]) + int(rest[12]), cmd)
    return out


def rss_mib() -> float:
    """This process's resident memory now, in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mib() -> float:
    """This process's largest resident memory so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class TreeSampler(threading.Thread):
    """Samples the process tree of ``root``: ``seen[pid] = (ticks at first sight, last ticks,
    command line)``; a process born after the first sample counts from zero ticks."""

    def __init__(self, root: int, every_s: float = 0.2):
        super().__init__(daemon=True)
        self.root, self.every_s, self.stop_event = root, every_s, threading.Event()
        self.seen: dict[int, tuple[int, int, str]] = {}
        self.sampled = False

    def run(self) -> None:
        while not self.stop_event.wait(self.every_s):
            self.sample()

    def stop(self) -> None:
        self.stop_event.set()
        self.join()
        self.sample()

    def sample(self) -> None:
        procs = _processes()
        children = collections.defaultdict(list)
        for pid, (ppid, _, _) in procs.items():
            children[ppid].append(pid)
        todo = [self.root]
        while todo:
            pid = todo.pop()
            todo += children[pid]
            if pid not in procs:
                continue
            _, ticks, cmd = procs[pid]
            first, last, old = self.seen.get(pid, (ticks if not self.sampled else 0, ticks, cmd))
            # keep Ray's process titles ("ray::ImplicitFunc...") once seen
            self.seen[pid] = (first, max(last, ticks), old if old.startswith("ray::") else cmd)
        self.sampled = True

    def cpu_seconds(self) -> float:
        """CPU seconds the tree used between the first and the last sample."""
        return sum(last - first for first, last, _ in self.seen.values()) / HZ


class OtherLoad:
    """Cores used by processes outside this process tree during the ``with`` block."""

    def __enter__(self):
        self.sampler = TreeSampler(os.getpid())
        self.sampler.sample()
        self.t0, self.busy0 = time.time(), _machine_busy()
        self.sampler.start()
        return self

    def __exit__(self, *exc):
        self.sampler.stop()
        wall = time.time() - self.t0
        other = (_machine_busy() - self.busy0) / HZ - self.sampler.cpu_seconds()
        self.cores = max(0.0, other / max(wall, 1e-9))
        self.loadavg = os.getloadavg()[0]
        return False

    def __str__(self) -> str:
        return (
            f"other processes used {self.cores:.2f} of {os.cpu_count()} cores (1-min load average {self.loadavg:.1f})"
        )
