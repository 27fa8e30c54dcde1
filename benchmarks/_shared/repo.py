"""Where the benchmarks live, and fresh processes of them.

Every benchmark runs as a module from the repository root (``python -m benchmarks.<group>.<name>``);
one that measures in fresh processes starts them the same way (:func:`module_command`,
:func:`run_json`), from the root, whatever the caller's working directory.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

from benchmarks._shared.machine import OtherLoad

ROOT = Path(__file__).resolve().parents[2]  # the repository root


def module_command(module: str, *args: str) -> list[str]:
    """The command line of ``python -m module args`` with this interpreter."""
    return [sys.executable, "-m", module, *args]


def run_json(
    module: str,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    stderr: int | None = subprocess.PIPE,
) -> dict:
    """Run ``python -m module args`` in a fresh process from the repository root and return its last
    stdout line, a JSON object. Exits with the end of its stderr if it fails (``stderr=None``: its
    stderr goes to this process's)."""
    out = subprocess.run(
        module_command(module, *args),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"{module} {' '.join(args)} exited with {out.returncode}:\n{(out.stderr or '')[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_until_returned(code: str, *args: str, env: dict[str, str] | None = None) -> tuple[float, float, OtherLoad]:
    """Run ``python -c code args`` in a fresh process from the repository root (``env`` added to
    this process's environment); ``code`` prints ``RETURNED <time.time()>`` once its work returned.
    Seconds of the whole process (interpreter, imports, start-up and exit included), seconds from
    its start until the work returned, and the other processes' load meanwhile."""
    start = time.time()
    with OtherLoad() as load:
        out = subprocess.run(
            [sys.executable, "-c", code, *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, **(env or {})},
        )
    end = time.time()
    if out.returncode != 0:
        raise SystemExit(f"{args[0] if args else code[:40]} failed:\n{out.stderr[-4000:]}")
    returned = float(out.stdout.split("RETURNED")[-1].split()[0])
    return end - start, returned - start, load


def tests_module(name: str) -> ModuleType:
    """A helper module of the test suite (``tests/<name>.py``: the moto server, the counting
    filesystem), imported by path: the tests are not a package."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / f"{name}.py")
    assert spec is not None and spec.loader is not None, name
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
