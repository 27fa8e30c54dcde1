"""How busy the rest of the machine was while a benchmark ran (this is a shared 2-core VM).

```python
with OtherLoad() as load:
    run_benchmark()
print(load)      # "other processes: 0.12 of 2 cores (load average 1.3)"
```

CPU time of the whole machine (``/proc/stat``) minus that of this process's tree (itself and
every descendant, reaped ones included through ``cutime``/``cstime``), over the wall time. Linux only;
approximate (a descendant reparented to init before it is reaped counts as "other").
"""

from __future__ import annotations

import os
import time
from pathlib import Path

_HZ = os.sysconf("SC_CLK_TCK")


def _machine_busy() -> int:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return user + nice + system + irq + softirq + steal


def _tree_ticks(root: int) -> int:
    procs = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        rest = stat.rsplit(")", 1)[1].split()
        procs[int(entry.name)] = (int(rest[1]), sum(int(x) for x in rest[11:15]))
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += procs.get(pid, (0, 0))[1]
        todo += children.get(pid, [])
    return total


class OtherLoad:
    """Cores used by processes outside this process tree during the ``with`` block."""

    def __enter__(self):
        self.t0, self.busy0, self.tree0 = time.time(), _machine_busy(), _tree_ticks(os.getpid())
        return self

    def __exit__(self, *exc):
        wall = time.time() - self.t0
        other = (_machine_busy() - self.busy0) - (_tree_ticks(os.getpid()) - self.tree0)
        self.cores = max(0.0, other / _HZ / max(wall, 1e-9))
        self.loadavg = os.getloadavg()[0]
        return False

    def __str__(self) -> str:
        return f"other processes used {self.cores:.2f} of {os.cpu_count()} cores (1-min load average {self.loadavg:.1f})"
