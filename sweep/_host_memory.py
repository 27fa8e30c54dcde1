"""The memory this process may use: the one place that reads it (data budgets, block sizes, the
size check of generated problems). That is the machine's physical memory, or the limit of the
control group the process runs in (a container's, a Slurm job's), whichever is lower."""

from __future__ import annotations

import os
from pathlib import PurePosixPath

CGROUP_MOUNT = PurePosixPath("/sys/fs/cgroup")
# the limit's file in cgroup v2 (one hierarchy) and v1 (a hierarchy per controller)
LIMIT_FILES = {"": ("", "memory.max"), "memory": ("memory", "memory.limit_in_bytes")}


def host_memory() -> int:
    """Bytes of memory this process may use: the machine's physical memory, or the lowest memory
    limit of its control group and the groups above it, whichever is lower."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return min([physical, *cgroup_limits()])


def cgroup_limits() -> list[int]:
    """The memory limits set on this process's control groups (v1 or v2), each group from its own
    up to the hierarchy's root; empty where none is set or there is no cgroup file system."""
    text = _read("/proc/self/cgroup")
    if text is None:
        return []
    limits = []
    for line in text.splitlines():
        if line.count(":") < 2:  # not "id:controllers:path" (a blank line)
            continue
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            if controller not in LIMIT_FILES:
                continue
            folder, name = LIMIT_FILES[controller]
            group = PurePosixPath(path)
            # inside a container's cgroup namespace the group's path may name folders of the host
            # that are not mounted here: its own limit is then the one at the mount's root
            for parent in (group, *group.parents):
                value = _read(str(CGROUP_MOUNT / folder / parent.relative_to("/") / name))
                if value is not None and value.strip().isdigit():
                    limits.append(int(value))
    return limits


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None
