"""seed-sweep's sources (which tests/test_structure.py reads), and what importing them does to a
fresh Python process: the checks of tests/test_structure.py and tests/test_serving.py that need
one, run in one process per test process (each fresh process costs 1.5-2.5 CPU-seconds, most of
it importing JAX and seed-sweep)."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import sweep

PACKAGE = Path(sweep.__file__).parent


def sources() -> list[Path]:
    """seed-sweep's source files."""
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def part_of(path: Path) -> str:
    """The top-level part of ``sweep`` a source file belongs to (``tune``, ``store``, ``_errors``)."""
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


# sweep's modules outside the Tune, serving and command-line layers
CORE_MODULES = sorted(
    {
        ".".join(("sweep", *p.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
        for p in sources()
        if part_of(p) not in ("tune", "serving", "cli", "__main__")
    }
)
PUBLIC_SUBPACKAGES = sorted(p.stem for p in PACKAGE.iterdir() if not p.name.startswith("_") and p.suffix in ("", ".py"))
# every benchmark but the APEBench sides (run in APEBench's own environment) and the trial replay
# (the script a fresh process runs: its work is its import)
BENCHMARKS = sorted(
    ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts)
    for p in (PACKAGE.parent / "benchmarks").rglob("*.py")
    if not p.name.endswith(("_side.py", "_replay.py")) and p.name != "__init__.py"
)

# The checks run in this order, each reading the process's state before the next one imports more,
# and each test asserts its own (:func:`fresh_import`; a check that raised fails its tests alone,
# with its traceback).
FRESH_IMPORTS = f"""
import importlib, json, os, sys, traceback
import jax

checks = {{}}


def check(name, run):
    try:
        checks[name] = run()
    except BaseException:
        checks[name] = {{"error": traceback.format_exc()[-3000:]}}


def settings():
    return (jax.config.jax_num_cpu_devices, jax.config.jax_compilation_cache_dir, dict(os.environ))


before = settings()
import sweep

check("quiet", lambda: "ray" not in sys.modules and "matplotlib" not in sys.modules)
check("serving_stack", lambda: sorted(m for m in ("ray", "fastapi", "sweep.serving") if m in sys.modules))


def changes_nothing():
    import sweep.store, sweep.ensemble, sweep.training

    return [before == settings(), len(jax.devices())]


def core_modules():
    for name in {CORE_MODULES!r}:
        importlib.import_module(name)
    return sorted(
        m for m in sys.modules if m in ("ray", "fastapi") or m.startswith(("ray.", "sweep.tune", "sweep.serving"))
    )


def public():
    found = [getattr(sweep, name).__name__ for name in {PUBLIC_SUBPACKAGES!r}]
    return [found, sweep.tune.RayTasks.__name__, sweep.search.plot_trace.__name__]


def serve_not_shadowed():
    import sweep.serving._deployment

    return [type(sweep.serve).__name__, sweep.ServeOptions.__name__]


def benchmarks():
    sys.path.insert(0, {str(PACKAGE.parent)!r})
    for name in {BENCHMARKS!r}:
        importlib.import_module(name)
    return len({BENCHMARKS!r})


check("changes_nothing", changes_nothing)
check("core_modules", core_modules)
check("public", public)
check("serve_not_shadowed", serve_not_shadowed)
check("suite_cache", lambda: [sweep.configure().compile_cache, sys.dont_write_bytecode])
check("benchmarks", benchmarks)
print(json.dumps(checks))
"""


@functools.cache
def _fresh_imports() -> dict:
    """The checks of :data:`FRESH_IMPORTS`, by name (one fresh process per test process)."""
    out = subprocess.run([sys.executable, "-c", FRESH_IMPORTS], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def fresh_import(name: str):
    """What the check ``name`` of :data:`FRESH_IMPORTS` found in a fresh process (its traceback,
    as the failure, where it raised)."""
    found = _fresh_imports()[name]
    assert not (isinstance(found, dict) and "error" in found), found["error"]
    return found
