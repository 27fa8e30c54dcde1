"""Process settings of a trial: confine JAX to the trial's share before JAX starts a backend.

Ray starts trials in worker processes that may already have imported ``jax`` (unpickling the
trainable imports ``sweep``), but no backend is running until the first computation. The
settings below are read when the backend starts, so :func:`apply` must run first thing in the
trial; it reports whether it did (``env_before_jax``), which the trial publishes as a metric,
then :func:`sweep.configure` splits the CPU and switches on the compilation cache.

Tune reuses a worker process for the next trial with the same resources (``reuse_actors``):
JAX is running there already, configured by the process's first trial. :func:`apply` then
does nothing again and reports ``worker_reused`` with the first trial's ``env_before_jax``
(what is in effect in the process); a trial with other resources in such a process is refused,
since its share can no longer be set (Tune starts a new process for other resources).

- fractional GPU ``g`` in (0, 1): ``XLA_PYTHON_CLIENT_MEM_FRACTION = 0.95 * g`` and
  ``XLA_PYTHON_CLIENT_PREALLOCATE=false``, so that trials sharing a device each stay inside
  their share (Ray sets ``CUDA_VISIBLE_DEVICES``);
- whole GPUs: nothing to set, the process owns the devices Ray gave it;
- CPU only: ``cpu`` host devices (the trial's CPU count rounded down, at least 1) with one
  thread each (``--xla_cpu_multi_thread_eigen=false``), so that
  concurrent trials on a node use the cores Ray gave them and no more. Members run one per
  device, so results stay bit-identical to any other layout.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

from .._configure import backend_started, configure
from .._errors import SweepError

MEM_FRACTION_HEADROOM = 0.95
_EIGEN_FLAG = "--xla_cpu_multi_thread_eigen"
_PROCESS: dict[str, Any] = {}  # the resources this process was set up for, and what apply() reported then


def cpu_devices(resources: Mapping[str, float]) -> int:
    """JAX CPU devices of a trial: its CPUs rounded down, at least 1."""
    return max(1, math.floor(float(resources.get("cpu", 1))))


def trial_env(resources: Mapping[str, float], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment variables a trial with ``resources`` sets (a pure function)."""
    environ = os.environ if environ is None else environ
    gpu = float(resources.get("gpu", 0))
    env = {}
    if 0 < gpu < 1:
        env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{MEM_FRACTION_HEADROOM * gpu:.4f}"
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    if gpu == 0:
        flags = environ.get("XLA_FLAGS", "")
        if _EIGEN_FLAG not in flags:
            env["XLA_FLAGS"] = f"{flags} {_EIGEN_FLAG}=false".strip()
    return env


def apply(resources: Mapping[str, float]) -> dict[str, Any]:
    """Set :func:`trial_env` in this trial's process if JAX has not started a backend yet, then
    :func:`sweep.configure` it; in a reused worker, check that the resources are the ones it was
    set up for. Returns what is in effect (for the trial's metrics)."""
    wanted = {"cpu": float(resources.get("cpu", 1)), "gpu": float(resources.get("gpu", 0))}
    if _PROCESS:
        if _PROCESS["resources"] != wanted:
            raise SweepError(
                f"trial resources {wanted}: this worker process was set up for {_PROCESS['resources']} and JAX is "
                f"running in it, so its device share cannot change; run trials with other resources in new "
                f"processes (Tune does so unless a trainable changes its resources in place)"
            )
        return {**_PROCESS["info"], "worker_reused": True}
    before = not backend_started()
    if before:
        os.environ.update(trial_env(resources))
    configured = configure(cpu_devices=cpu_devices(resources))
    info = {
        "env_before_jax": before,
        "cpu_devices": configured.cpu_devices,
        "xla_mem_fraction": float(os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", "nan")) if before else float("nan"),
    }
    _PROCESS.update(resources=wanted, info=info)
    return {**info, "worker_reused": False}
