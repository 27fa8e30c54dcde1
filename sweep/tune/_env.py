"""Process settings of a trial: confine JAX to the trial's share before JAX starts a backend.

Ray starts trials in worker processes that may already have imported ``jax`` (unpickling the
trainable imports ``sweep``), but no backend is running until the first computation. The
settings below are read when the backend starts, so :func:`apply` must run first thing in the
trial; it reports whether it did (``env_before_jax``), which the trial publishes as a metric.

- fractional GPU ``g`` in (0, 1): ``XLA_PYTHON_CLIENT_MEM_FRACTION = 0.95 * g`` and
  ``XLA_PYTHON_CLIENT_PREALLOCATE=false``, so that trials sharing a device each stay inside
  their share (Ray sets ``CUDA_VISIBLE_DEVICES``);
- whole GPUs: nothing to set, the process owns the devices Ray gave it;
- CPU only: ``cpu`` host devices (``SWEEP_CPU_DEVICES``, the trial's CPU count rounded down,
  at least 1) with one thread each (``--xla_cpu_multi_thread_eigen=false``), so that
  concurrent trials on a node use the cores Ray gave them and no more. Members run one per
  device, so results stay bit-identical to any other layout.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

MEM_FRACTION_HEADROOM = 0.95
_EIGEN_FLAG = "--xla_cpu_multi_thread_eigen"


def trial_env(resources: Mapping[str, float], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment variables a trial with ``resources`` sets (a pure function)."""
    environ = os.environ if environ is None else environ
    cpu, gpu = float(resources.get("cpu", 1)), float(resources.get("gpu", 0))
    env = {"SWEEP_CPU_DEVICES": str(max(1, math.floor(cpu)))}
    if 0 < gpu < 1:
        env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{MEM_FRACTION_HEADROOM * gpu:.4f}"
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    if gpu == 0:
        flags = environ.get("XLA_FLAGS", "")
        if _EIGEN_FLAG not in flags:
            env["XLA_FLAGS"] = f"{flags} {_EIGEN_FLAG}=false".strip()
    return env


def apply(resources: Mapping[str, float]) -> dict[str, Any]:
    """Set :func:`trial_env` in this process and the JAX host device count, if JAX has not
    started a backend yet. Returns what happened (for the trial's metrics)."""
    import jax
    from jax._src import xla_bridge

    before = not xla_bridge.backends_are_initialized()
    env = trial_env(resources)
    if before:
        os.environ.update(env)
        if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
            jax.config.update("jax_num_cpu_devices", int(env["SWEEP_CPU_DEVICES"]))
    return {
        "env_before_jax": before,
        "cpu_devices": int(env["SWEEP_CPU_DEVICES"]),
        "xla_mem_fraction": float(os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", "nan")) if before else float("nan"),
    }
