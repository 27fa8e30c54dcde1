"""Process settings that make seed-sweep fast, applied only when asked (:func:`configure`).

``import sweep`` changes nothing in the process. :func:`sweep.run`, every trial, the ``sweep``
command and the benchmarks call :func:`configure` first; a notebook or script that trains
blocks in-process may call it too, before its first JAX computation.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, NamedTuple

import jax

from ._errors import SpecError, warn

_DEVICE_COUNT_FLAG = "xla_force_host_platform_device_count"
# every program: a cached one loads in milliseconds, where an ensemble's small programs compile in
# 0.1-0.45 s each (aggregating a race's store in a fresh process: 4.7 s caching only programs of 0.5 s
# or more, 1.2 s caching every program; benchmarks/RESULTS.md)
_MIN_COMPILE_S = 0.0
_MIN_COMPILE_ENV = "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"  # JAX's own variable for that threshold
_said = {"configured": False, "warned": False}  # what this process did (see warn_unconfigured)


class Configuration(NamedTuple):
    """What is in effect after :func:`configure`.

    Attributes:
        cpu_devices: JAX CPU devices of this process.
        compile_cache: JAX's persistent compilation cache directory, if any.
        applied: ``False`` when JAX had started before the device count could be set.
    """

    cpu_devices: int  # JAX CPU devices of this process
    compile_cache: str | None  # JAX's persistent compilation cache directory, if any
    applied: bool  # False when JAX had started before the device count could be set


COMPILE_CACHE_ENV = "SWEEP_COMPILE_CACHE"


def default_compile_cache() -> str:
    """``$SWEEP_COMPILE_CACHE`` if set, else ``$XDG_CACHE_HOME/seed-sweep/jax`` (``~/.cache/seed-sweep/jax``)."""
    if chosen := os.environ.get(COMPILE_CACHE_ENV):
        return chosen
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(root) / "seed-sweep" / "jax")


def available_cpus() -> int:
    """CPU cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def backend_started() -> bool:
    """Whether JAX has started a backend in this process (after which device counts and XLA
    environment variables no longer take effect). JAX has no public API for this question, so
    this reads ``jax._src.xla_bridge`` here and nowhere else."""
    from jax._src import xla_bridge

    return xla_bridge.backends_are_initialized()


def configure(
    cpu_devices: int | Literal["auto"] | None = "auto",
    compile_cache: str | os.PathLike[str] | Literal["default"] | None = "default",
    gpu_preallocate: bool | None = None,
) -> Configuration:
    """Split the CPU into JAX devices and switch on JAX's persistent compilation cache.

    ``import sweep`` changes nothing in the process; this applies what makes seed-sweep fast.
    ``sweep.run``, ``sweep.plan``, every trial and the ``sweep`` command call it. Calling it again
    is harmless.

    Args:
        cpu_devices: JAX CPU devices (``jax_num_cpu_devices``). ``"auto"`` gives one per core this
            process may use; ``None`` leaves JAX's setting alone. The CPU block layout runs a
            block's members on every device at once, so a 2-core machine trains about twice as fast
            with 2 devices as with JAX's default of 1. It takes effect only before JAX's first
            computation in the process, and never overrides
            ``--xla_force_host_platform_device_count`` in ``XLA_FLAGS``.
        compile_cache: A directory for JAX's persistent compilation cache (``"default"``:
            ``$SWEEP_COMPILE_CACHE`` if set, which every process started from this one inherits, as
            Ray's trial workers do, else ``~/.cache/seed-sweep/jax``; ``None``: leave JAX's setting alone). Ray starts every
            trial in a fresh worker process; with the cache, a worker reads the compiled program of
            its structural config from disk instead of compiling it again. A cache directory the
            user already configured is kept. Every program is cached, however fast it compiles
            (``$JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS``, if set, gives a threshold in seconds).
        gpu_preallocate: ``False`` sets ``XLA_PYTHON_CLIENT_PREALLOCATE=false`` (if JAX has not
            started and the variable is unset), so that this process takes GPU memory as it needs
            it instead of 75% of the device at start. ``None`` leaves it alone.

    Returns:
        The :class:`Configuration` in effect.

    Examples:
        ```python
        sweep.configure()  # before the first JAX computation
        model, history = sweep.train_block(spec, seeds=range(8))
        ```
    """
    _said["configured"] = True
    if (
        cpu_devices is not None
        and cpu_devices != "auto"
        and (isinstance(cpu_devices, bool) or not isinstance(cpu_devices, int) or cpu_devices < 1)
    ):
        raise SpecError(f'`cpu_devices`: got {cpu_devices!r}; give an integer >= 1, "auto" or None')
    applied = True
    if gpu_preallocate is not None and not backend_started():
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "true" if gpu_preallocate else "false")
    if cpu_devices is not None and _DEVICE_COUNT_FLAG not in os.environ.get("XLA_FLAGS", ""):
        wanted = available_cpus() if cpu_devices == "auto" else cpu_devices
        if jax.config.jax_num_cpu_devices != wanted:  # pyright: ignore[reportAttributeAccessIssue]  (jax.config options are dynamic attributes its stubs omit)
            if backend_started():
                applied = False
                if not _said["warned"] and jax.default_backend() == "cpu" and wanted > 1:
                    _said["warned"] = True
                    warn(
                        f"sweep.configure(): JAX started before it could split the CPU into {wanted} devices, so "
                        f"blocks train on {len(jax.devices('cpu'))}; call it before the first JAX computation (at "
                        f"the top of the script) to train on all {wanted}"
                    )
            else:
                jax.config.update("jax_num_cpu_devices", wanted)
    if compile_cache is not None and jax.config.jax_compilation_cache_dir is None:  # pyright: ignore[reportAttributeAccessIssue]  (jax.config options are dynamic attributes its stubs omit)
        directory = default_compile_cache() if compile_cache == "default" else str(compile_cache)
        jax.config.update("jax_compilation_cache_dir", directory)
        threshold = float(os.environ.get(_MIN_COMPILE_ENV, _MIN_COMPILE_S))  # JAX refuses a bad value at import
        jax.config.update("jax_persistent_cache_min_compile_time_secs", threshold)
    return Configuration(_cpu_device_count(), jax.config.jax_compilation_cache_dir, applied)  # pyright: ignore[reportAttributeAccessIssue]  (jax.config options are dynamic attributes its stubs omit)


def warn_unconfigured() -> None:
    """Warn once per process when a block is about to train on one of several CPU cores because
    :func:`configure` was never called (JAX's default is one CPU device; the CPU layout runs a
    block's members on every device at once)."""
    if _said["configured"] or _said["warned"] or jax.default_backend() != "cpu":
        return
    cores = available_cpus()
    if len(jax.devices("cpu")) == 1 and cores > 1:
        _said["warned"] = True
        warn(
            f"JAX has 1 CPU device on this {cores}-core machine, so this block trains on one core; call "
            f"sweep.configure() before the first JAX computation (sweep.run and the CLI do) to train on all "
            f"{cores}"
        )


def _cpu_device_count() -> int:
    """CPU devices JAX has or will have (without starting a backend)."""
    if backend_started():
        return len(jax.devices("cpu"))
    flags = os.environ.get("XLA_FLAGS", "")
    if _DEVICE_COUNT_FLAG in flags:
        return int(flags.split(f"{_DEVICE_COUNT_FLAG}=")[1].split()[0])
    return max(1, jax.config.jax_num_cpu_devices)  # pyright: ignore[reportAttributeAccessIssue]  (jax.config options are dynamic attributes its stubs omit)
