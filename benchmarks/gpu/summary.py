"""The GPU kit's bookends: what the machine is (``env``), and one JSON of every check (``collect``).

    python -m benchmarks.gpu.summary env WORK/env.json        # prints jax.devices() and versions
    python -m benchmarks.gpu.summary collect WORK OUT/results.json

``collect`` reads, for each check NAME run by run.sh, ``WORK/NAME.json`` (its numbers, possibly
partial) and ``WORK/NAME.status`` (``exit-code seconds-given seconds-taken``), and writes
``{"environment": ..., "checks": {NAME: {"status", "exit_code", "seconds", "limit_s", "results"}}}``.
"""

from __future__ import annotations

import importlib.metadata
import json
import platform
import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks.gpu import _kit

CHECKS = ("trainer", "layouts", "fractional", "auto", "predict", "block2d", "layouts2d", "streaming")
PACKAGES = (
    "jax",
    "jaxlib",
    "jax-cuda13-plugin",
    "jax-cuda13-pjrt",
    "equinox",
    "optax",
    "pdequinox",
    "ray",
    "pydantic",
    "numpy",
    "pyarrow",
)
STATUS = {0: "ok", 124: "timed out", 137: "killed (timeout)"}


def environment() -> dict:
    import jax

    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    env = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": versions,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "device_kind": jax.devices()[0].device_kind,
        "memory": _kit.device_memory(),
    }
    if shutil.which("nvidia-smi"):
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        env["nvidia_smi"] = out.stdout.strip()
    print("jax.devices():", jax.devices())
    print("environment:", json.dumps(env))
    return env


def collect(work: Path) -> dict:
    checks = {}
    for name in CHECKS:
        status = work / f"{name}.status"
        if not status.exists():
            checks[name] = {"status": "not run"}
            continue
        fields = status.read_text().split()
        code, limit, seconds = int(fields[0]), int(fields[1]), int(fields[2])
        result = work / f"{name}.json"
        results = json.loads(result.read_text()) if result.exists() else None
        checks[name] = {
            "status": "skipped (time budget)" if code == -1 else STATUS.get(code, "failed"),
            "exit_code": code,
            "limit_s": limit,
            "seconds": seconds,
            "results": results,
        }
    env = work / "env.json"
    return {"environment": json.loads(env.read_text()) if env.exists() else None, "checks": checks}


def main() -> None:
    if len(sys.argv) < 3 or sys.argv[1] not in ("env", "collect"):
        raise SystemExit(__doc__)
    if sys.argv[1] == "env":
        Path(sys.argv[2]).write_text(json.dumps(_kit.plain(environment()), indent=1))
        return
    results = collect(Path(sys.argv[2]))
    Path(sys.argv[3]).write_text(json.dumps(results, indent=1, allow_nan=False))
    for name, check in results["checks"].items():
        took = f" in {check['seconds']} s of {check['limit_s']} s" if "seconds" in check else ""
        print(f"{name:>10}: {check['status']}{took}")
    print(f"results: {sys.argv[3]}")


if __name__ == "__main__":
    main()
