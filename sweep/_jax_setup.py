"""JAX process settings applied when ``sweep`` is imported, before JAX starts a backend.

- Host devices: the CPU backend is split into one device per core (``SWEEP_CPU_DEVICES``
  overrides), so the CPU block layout can spread members over cores (see ``trainer``).
- Persistent compilation cache in ``SWEEP_COMPILE_CACHE`` (default ``~/.cache/seed-sweep/jax``;
  ``0`` disables): trials in fresh worker processes reuse compiled programs.
Both are skipped when the user configured them already or JAX's backend is already running.
"""

from __future__ import annotations

import os
from pathlib import Path

import jax
from jax._src import xla_bridge


def cpu_device_count() -> int:
    env = os.environ.get("SWEEP_CPU_DEVICES")
    if env:
        return max(1, int(env))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def configure() -> None:
    if not xla_bridge.backends_are_initialized():
        if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", "") and jax.config.jax_num_cpu_devices in (-1, 1):
            jax.config.update("jax_num_cpu_devices", cpu_device_count())
    cache = os.environ.get("SWEEP_COMPILE_CACHE", str(Path.home() / ".cache" / "seed-sweep" / "jax"))
    if cache != "0" and jax.config.jax_compilation_cache_dir is None:
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
