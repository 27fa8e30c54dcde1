"""This machine's physical memory: the one place that reads it (data budgets, block sizes, the
size check of generated problems)."""

from __future__ import annotations

import os


def host_memory() -> int:
    """Bytes of physical memory of this machine (the host's, not a container's limit)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
