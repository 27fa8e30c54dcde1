"""Ray pieces of checks 3 and 4: a local Ray with one GPU, ``sweep.run`` under a GPU memory
poller, and each trial's numbers from its Tune results.

Per trial: its reported ``device_peak_bytes`` / ``device_bytes_limit`` (JAX's memory statistics in
the trial; ``null`` where the trial reports none or -1, as on CPU), the largest GPU memory
``nvidia-smi`` showed for its process (CUDA context and JAX's pool together; ``null`` without
``nvidia-smi`` or where its process ids are not the trial's), its share of the device, when it
started and finished, and the seconds it waited for its reader thread (``reader_wait_s`` summed;
``null`` where its data fit and nothing was streamed).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Self

from benchmarks.gpu import _kit

MEMORY_KEYS = ("device_peak_bytes", "device_bytes_limit")
_SMI = "nvidia-smi"


def start_ray(dry: bool) -> dict[str, float]:
    """A local Ray instance: every core, one GPU (a fake one in the dry run: 4 CPUs at least, so
    that four trials can run at once on a small machine). Returns its resources."""
    import ray

    cpus = os.cpu_count() or 1
    ray.init(
        num_cpus=max(cpus, 4) if dry else cpus,
        num_gpus=1,
        include_dashboard=False,
        object_store_memory=(1 if dry else 4) * 2**30,
        configure_logging=False,
    )
    # The driver generates the datasets with JAX: without this its backend would take 75% of the
    # GPU before any trial starts. Set after ray.init, so that the trials' processes do not inherit it.
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    return ray.cluster_resources()


def gpu_total_bytes() -> int | None:
    if shutil.which(_SMI) is None:
        return None
    out = subprocess.run(
        [_SMI, "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return int(out.stdout.split()[0]) * 2**20 if out.returncode == 0 and out.stdout.strip() else None


def process_gpu_mib() -> dict[int, int]:
    """GPU memory (MiB) of every process ``nvidia-smi`` lists now (empty without ``nvidia-smi``)."""
    if shutil.which(_SMI) is None:
        return {}
    out = subprocess.run(
        [_SMI, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    ).stdout
    found = {}
    for line in out.splitlines():
        pid, _, mib = line.partition(",")
        if pid.strip().isdigit() and mib.strip().isdigit():
            found[int(pid)] = int(mib)
    return found


class GpuPoller(threading.Thread):
    """The largest GPU memory (MiB) ``nvidia-smi`` shows for each process, polled every 0.5 s."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peaks_mib: dict[int, int] = {}
        self.available = shutil.which(_SMI) is not None
        self._done = threading.Event()

    def run(self) -> None:
        while self.available and not self._done.wait(0.5):
            for pid, mib in process_gpu_mib().items():
                self.peaks_mib[pid] = max(self.peaks_mib.get(pid, 0), mib)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self.join()


def trial_rows(sweep_dir: str) -> dict[str, list[dict]]:
    """Every result row each trial reported (Tune's result.json), by trial key."""
    rows: dict[str, list[dict]] = {}
    for path in sorted(glob.glob(f"{sweep_dir}/tune-*/*/result.json")):
        for line in Path(path).read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                rows.setdefault(row["trial_key"], []).append(row)
    return rows


def _largest(rows: list[dict], key: str) -> Any:
    """The largest value of ``key`` over the rows; ``None`` where no row has one (a trial reports
    -1 where its backend keeps no memory statistics, as on CPU)."""
    values = [r[key] for r in rows if r.get(key) is not None and r[key] >= 0]
    return max(values) if values else None


def trial_summary(rows: list[dict], share_bytes: float | None, smi_peaks: dict[int, int]) -> dict[str, Any]:
    last = rows[-1]
    out = {
        k: last.get(k)
        for k in (
            "trial_key",
            "members",
            "members_done",
            "epoch",
            "pid",
            "env_before_jax",
            "xla_mem_fraction",
            "start_time",
        )
    }
    out["end_time"] = last.get("report_time")
    out.update({k: _largest(rows, k) for k in MEMORY_KEYS})
    out["share_bytes"] = share_bytes
    peak, limit = out["device_peak_bytes"], out["device_bytes_limit"]
    out["peak_over_share"] = peak / share_bytes if share_bytes and peak is not None else None
    out["limit_over_share"] = limit / share_bytes if share_bytes and limit is not None else None
    waits = [r["reader_wait_s"] for r in rows if r.get("reader_wait_s") is not None]  # streamed trials only
    out["reader_wait_s"] = sum(waits) if waits else None
    smi = smi_peaks.get(last.get("pid"))
    out["nvidia_smi_peak_bytes"] = smi * 2**20 if smi is not None else None
    return out


def run_sweep(spec, total_bytes: int | None) -> dict[str, Any]:
    """``sweep.run(spec)`` into a fresh folder, timed, with every trial's numbers and whether
    the trials ran at the same time (the last to start started before the first to finish)."""
    import sweep

    storage = tempfile.mkdtemp(prefix="kit-sweep-")
    gpu = float(spec.resources["gpu"])
    with GpuPoller() as poller:
        start = time.perf_counter()
        sweep_dir = sweep.run(spec, storage=storage)
        wall_s = time.perf_counter() - start
    trials = [
        trial_summary(rows, gpu * total_bytes if total_bytes else None, poller.peaks_mib)
        for rows in trial_rows(sweep_dir).values()
    ]
    starts = [t["start_time"] for t in trials if t["start_time"] is not None]
    ends = [t["end_time"] for t in trials if t["end_time"] is not None]
    plan = json.loads(Path(sweep_dir, "plan.json").read_text())
    driver_smi = poller.peaks_mib.get(os.getpid())
    return {
        "gpu_per_trial": gpu,
        "seeds": len(spec.seed_list),
        "seeds_per_trial": plan["seeds_per_trial"],
        "planned_trials": len(plan["trials"]),
        "run_s": wall_s,
        "trials": trials,
        "all_completed": len(trials) == len(plan["trials"]) and all(t["members_done"] == t["members"] for t in trials),
        "concurrent": max(starts) < min(ends) if len(starts) > 1 and ends else None,
        "overlap_s": min(ends) - max(starts) if starts and ends else None,
        "trials_span_s": max(ends) - min(starts) if starts and ends else None,
        "driver_memory": _kit.device_memory(),
        "driver_nvidia_smi_peak_bytes": driver_smi * 2**20 if driver_smi is not None else None,
        "nvidia_smi_peaks_mib": {str(k): v for k, v in poller.peaks_mib.items()},
    }
