"""What the GPU kit's checks share: options, sizes, the result file, JAX set-up, memory, workers.

Every check is a module ``python -m benchmarks.gpu.check_<name> --out FILE [--dry]`` that run.sh
starts from the repository root under its own ``timeout``. A check writes its numbers to FILE after every measurement (:class:`Result`),
so one that runs out of time still leaves what it measured. Measurements whose peak device
memory matters run in fresh worker processes (:func:`run_worker`): JAX's peak counter cannot be
reset inside a process.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks._shared import workload as _workload
from benchmarks._shared.repo import run_json


def options(description: str, worker: Callable[[argparse.ArgumentParser], None] | None = None) -> argparse.Namespace:
    """``--out FILE --dry`` (and a check's own worker options, added by ``worker``)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", help="JSON file for this check's results (rewritten after every measurement)")
    parser.add_argument("--dry", action="store_true", help="tiny sizes: checks that the kit runs (CPU)")
    if worker is not None:
        worker(parser)
    return parser.parse_args()


class Result:
    """A check's numbers as a JSON object, written atomically to ``path`` at every update."""

    def __init__(self, path: str | None, **fields: Any) -> None:
        self.path, self.data = path, dict(fields)
        self.flush()

    def __setitem__(self, key: str, value: Any) -> None:
        self.data[key] = value
        self.flush()

    def flush(self) -> None:
        if self.path:
            tmp = f"{self.path}.tmp"
            Path(tmp).write_text(json.dumps(plain(self.data), indent=1, allow_nan=False))
            os.replace(tmp, self.path)


def plain(value: Any) -> Any:
    """``value`` as strict JSON data: NaN and infinities become ``None``, NumPy scalars Python ones."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # NumPy scalar
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def workload(*, epochs: int, report_every: int, quick: bool) -> argparse.Namespace:
    """The heat ConvNet workload of the benchmarks (``_shared/workload.py``); ``quick``: its tiny variant."""
    parser = argparse.ArgumentParser()
    _workload.add_options(parser, epochs=epochs, report_every=report_every)
    args = parser.parse_args([])
    if quick:
        _workload.make_quick(args, epochs)
        args.report_every = report_every
    return args


def heat_spec(
    args: argparse.Namespace,
    *,
    name: str,
    seeds: int,
    seeds_per_trial: int | str = 16,
    cpus: float = 1,
    gpus: float = 0,
):
    return _workload.spec_from_options(
        args, name=name, seeds=seeds, seeds_per_trial=seeds_per_trial, cpus=cpus, gpus=gpus
    )


def setup_jax(compile_cache: str | None = None) -> None:
    """Before JAX starts a backend: ``sweep.configure`` (one CPU device per core), with JAX's
    persistent compilation cache in ``compile_cache`` (a fresh folder: the first compile of a
    program is cold, later ones load it) or, by default, none."""
    import jax

    import sweep

    sweep.configure(compile_cache=compile_cache)
    if compile_cache:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


def device_memory() -> dict[str, Any]:
    """JAX's memory statistics of the first local device (``None`` values where it has none: CPU)."""
    import jax

    device = jax.local_devices()[0]
    stats = device.memory_stats() or {}
    return {
        "platform": device.platform,
        "device": str(device),
        "peak_bytes": stats.get("peak_bytes_in_use"),
        "bytes_in_use": stats.get("bytes_in_use"),
        "bytes_limit": stats.get("bytes_limit"),
    }


def per(value: float | None, count: float) -> float | None:
    return None if value is None or not count else value / count


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Wall seconds of ``fn()`` until its device work is done, and its result."""
    import jax

    start = time.perf_counter()
    out = jax.block_until_ready(fn())
    return time.perf_counter() - start, out


def run_worker(module: str, args: Sequence[str], timeout: float) -> dict[str, Any]:
    """Run ``python -m module --worker ...`` in a fresh Python process; its last stdout line is a JSON
    object. The worker's stderr goes to this process's stderr (the kit's log)."""
    start = time.perf_counter()
    result = run_json(module, *args, timeout=timeout, stderr=None)
    result["process_s"] = time.perf_counter() - start
    return result


def remaining(deadline: float) -> float:
    """Seconds left before ``deadline`` (``time.monotonic()``), at least 1."""
    return max(1.0, deadline - time.monotonic())


def deadline_from_env() -> float:
    """The check's own end: run.sh passes the seconds it gave the check in ``KIT_CHECK_S`` (10
    minutes when run alone); a few seconds are kept to write the result."""
    return time.monotonic() + float(os.environ.get("KIT_CHECK_S", "600")) - 5


def report(result: Result, fn: Callable[[], None]) -> None:
    """Run a check's body; an error is recorded in the result (and re-raised for the exit code)."""
    try:
        fn()
    except BaseException as e:
        result["error"] = f"{type(e).__name__}: {e}"
        raise


def measured_check(
    check: str,
    description: str,
    measure: Callable[[dict, Callable[[str], None]], dict],
    sizes: tuple[dict, dict],
    verdict: Callable[[dict], None] | None = None,
) -> None:
    """The ``main`` of a check measured in this process: ``measure(sizes, say)`` at the full or
    (``--dry``) the dry ``sizes``, its numbers written to the result, then ``verdict(numbers)``
    (which raises ``SystemExit`` where the check fails)."""
    args = options(description)
    chosen = sizes[1] if args.dry else sizes[0]
    res = Result(args.out, check=check, sizes=chosen)

    def body() -> None:
        setup_jax()
        res.data.update(measure(chosen, lambda line: print(line, flush=True)))
        res.flush()
        if verdict is not None:
            verdict(res.data)

    report(res, body)
