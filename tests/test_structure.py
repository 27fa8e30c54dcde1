"""How the package is put together: the public names, imports that point one way, and an
``import sweep`` that changes nothing in the user's process."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _fresh_imports import BENCHMARKS, PACKAGE, PUBLIC_SUBPACKAGES, fresh_import, part_of, sources

import sweep

TESTS = str(Path(__file__).parent)


# Each top-level part of the package, in the order data flows through it; a module may import
# only from its own layer or the layers before it.
LAYERS = [
    {
        "_errors",
        "_layout",
        "_canonical",
        "_caches",
        "_fs",
        "_import_path",
        "_configure",
        "_leaves",
        "_batches",
        "_field_metrics",
        "_rollout_curves",
        "_words",
        "_text_table",
        "_reachable",
        "_over_seeds",
        "_input_values",
        "_interrupt",
    },
    {"optim", "metrics", "models", "problems", "spec"},
    {"planning", "racing"},
    {"training"},
    {"store"},
    {"search"},
    {"ensemble"},
    {"figures"},
    {"tune"},
    {"serving"},
    {"cli"},
]
LAYER = {part: i for i, parts in enumerate(LAYERS) for part in parts}

DOCUMENTED = [
    "Adaptive",
    "Configuration",
    "Dataset",
    "Distribution",
    "Ensemble",
    "History",
    "Model",
    "Optimizer",
    "Plan",
    "Problem",
    "QueryError",
    "RunOptions",
    "Search",
    "SpecError",
    "StoreError",
    "ServeOptions",
    "SweepError",
    "SweepSpec",
    "TrainState",
    "Training",
    "TrialPlan",
    "aggregate",
    "choice",
    "clear_caches",
    "configure",
    "fit",
    "init_block",
    "load",
    "load_data",
    "loguniform",
    "plan",
    "plot",
    "randint",
    "run",
    "run_chunk",
    "serve",
    "train",
    "train_block",
    "uniform",
]


def _imported_parts(path: Path) -> set[str]:
    """The top-level parts of ``sweep`` a module imports (relative or absolute)."""
    tree = ast.parse(path.read_text())
    depth = len(path.relative_to(PACKAGE).parts) - (1 if path.name == "__init__.py" else 0)
    parts = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative: climb to the package root, then take the first name
                names = (node.module or "").split(".") if node.module else [a.name for a in node.names]
                climbed = depth - node.level
                if climbed <= 0:
                    parts.update(names[:1] if node.module else names)
                else:
                    parts.add(path.relative_to(PACKAGE).parts[0])
            elif node.module and node.module.split(".")[0] == "sweep":
                parts.add(node.module.split(".")[1] if "." in node.module else "__init__")
        elif isinstance(node, ast.Import):
            parts.update(a.name.split(".")[1] for a in node.names if a.name.startswith("sweep."))
    return {p for p in parts if p in LAYER}


def test_public_names_are_the_documented_ones_and_usable():
    assert sorted(sweep.__all__) == sorted(DOCUMENTED)
    for name in DOCUMENTED:
        assert callable(getattr(sweep, name)), name
    # functions, not modules: no submodule can shadow them
    for name in ("aggregate", "plot", "run", "plan", "load", "train", "configure", "serve"):
        assert type(getattr(sweep, name)).__name__ == "function", name


def test_every_import_points_to_an_earlier_stage():
    for path in sources():
        if path == PACKAGE / "__init__.py" or path == PACKAGE / "__main__.py":
            continue
        part = part_of(path)
        for other in _imported_parts(path):
            assert LAYER[other] <= LAYER[part], f"{path.relative_to(PACKAGE)} ({part}) imports {other}, a later stage"


def _imported_modules(path: Path) -> set[tuple[str, ...]]:
    """The modules of ``sweep`` a module imports, as name parts below ``sweep`` (relative or absolute;
    ``from . import x`` counts as importing ``x``)."""
    package = list(path.relative_to(PACKAGE).parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - node.level + 1]
            module = base + (node.module.split(".") if node.module else [])
            found |= {tuple(module)} if node.module else {tuple(module + [a.name]) for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sweep."):
            found.add(tuple((node.module or "").split(".")[1:]))
    return found


def test_no_module_imports_another_parts_private_modules():
    """What one part of the package needs from another, that part exports from its ``__init__``."""
    for path in sources():
        part = part_of(path)
        for module in _imported_modules(path):
            if module and module[0] != part and any(name.startswith("_") for name in module[1:]):
                raise AssertionError(f"{path.relative_to(PACKAGE)} imports sweep.{'.'.join(module)}")


def _fresh(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1]


# The tests of a fresh process's imports share one process (_fresh_imports.FRESH_IMPORTS), each its own check.
def test_core_modules_import_neither_ray_nor_the_tune_layer():
    assert fresh_import("core_modules") == []


def test_every_benchmark_imports():
    """A benchmark is run by hand, now and then: one that no longer imports (a module it names
    moved) would be found only then. The APEBench sides run in APEBench's own environment, and
    the trial replay is the script a fresh process runs (its work is its import)."""
    assert fresh_import("benchmarks") == len(BENCHMARKS) > 30


def test_import_sweep_changes_nothing_in_the_process():
    assert fresh_import("changes_nothing") == [True, 1]


def test_every_public_subpackage_is_an_attribute_of_a_plain_import_sweep():
    """``sweep.tune.RayTasks()`` and ``sweep.search.plot_trace(...)`` as the guides write them, after
    ``import sweep`` alone; Ray and matplotlib imported only then."""
    assert fresh_import("quiet") is True
    assert fresh_import("public") == [[f"sweep.{name}" for name in PUBLIC_SUBPACKAGES], "RayTasks", "plot_trace"]


def test_configure_splits_the_cpu_and_turns_on_the_cache(tmp_path):
    code = (
        "import json, jax, sweep\n"
        f"c = sweep.configure(cpu_devices=2, compile_cache={str(tmp_path)!r})\n"
        "print(json.dumps([c.cpu_devices, c.compile_cache, c.applied, len(jax.devices())]))"
    )
    assert json.loads(_fresh(code)) == [2, str(tmp_path), True, 2]
    late = (
        "import json, jax, sweep, warnings\njax.numpy.zeros(1)\nwith warnings.catch_warnings(record=True) as said:\n"
        "    warnings.simplefilter('always')\n    c = sweep.configure(cpu_devices=2, compile_cache=None)\n"
        "    sweep.configure(cpu_devices=2, compile_cache=None)\n"
        "print(json.dumps([c.cpu_devices, c.applied, jax.config.jax_compilation_cache_dir, [str(w.message) for w in said]]))"
    )
    *result, said = json.loads(_fresh(late))
    assert result == [1, False, None]  # too late for the device count: said (once), not raised
    assert len(said) == 1 and said[0].startswith("sweep.configure(): JAX started before it could split the CPU into 2")


def test_configure_caches_every_program_unless_told(tmp_path, monkeypatch):
    code = (
        "import json, jax, sweep\n"
        f"sweep.configure(compile_cache={str(tmp_path)!r})\n"
        "print(json.dumps(jax.config.jax_persistent_cache_min_compile_time_secs))"
    )
    monkeypatch.delenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", raising=False)
    assert json.loads(_fresh(code)) == 0.0
    monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.25")
    assert json.loads(_fresh(code)) == 0.25


def test_production_code_reads_no_test_hooks_from_the_environment():
    for path in sources():
        assert "SWEEP_TEST_" not in path.read_text(), path


def test_configure_can_stop_gpu_preallocation_before_jax_starts():
    code = (
        "import json, os\nos.environ.pop('XLA_PYTHON_CLIENT_PREALLOCATE', None)\nimport sweep\n"
        "sweep.configure(cpu_devices=None, compile_cache=None, gpu_preallocate=False)\n"
        "print(json.dumps(os.environ.get('XLA_PYTHON_CLIENT_PREALLOCATE')))"
    )
    assert json.loads(_fresh(code)) == "false"


ROOT = PACKAGE.parent


def test_packaging_declares_types_license_and_a_tested_ray_range():
    import tomllib

    import ray
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert (PACKAGE / "py.typed").exists() and "MIT License" in (ROOT / "LICENSE").read_text()
    assert "License :: OSI Approved :: MIT License" in project["classifiers"]
    assert "Typing :: Typed" in project["classifiers"]
    ray_req = next(Requirement(r) for r in project["dependencies"] if r.startswith("ray"))
    bounds = {s.operator for s in ray_req.specifier}
    assert {">=", "<"} <= bounds, ray_req  # resume relies on Tune's saved experiments: an upper bound
    assert ray_req.specifier.contains(ray.__version__), (ray.__version__, str(ray_req.specifier))
    extras = project["optional-dependencies"]
    assert {"mlflow", "wandb", "tensorboard"} <= set(extras)


def test_examples_use_public_api_only():
    public = set(sweep.__all__) | {"tune", "__version__"}
    for path in sorted((ROOT / "examples").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "sweep":
                assert node.attr in public, f"{path.name}: sweep.{node.attr}"
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sweep"):
                assert node.module in ("sweep", "sweep.tune"), f"{path.name}: from {node.module}"
                assert not any(a.name.startswith("_") for a in node.names), f"{path.name}: {node.module}"
            if isinstance(node, ast.Import):
                assert all(a.name in ("sweep", "sweep.tune") for a in node.names if a.name.startswith("sweep")), path


def test_training_without_configure_warns_once_naming_configure():
    """A script that never called sweep.configure() trains a block on one of several cores: it is told so once."""
    script = (
        "import warnings, jax, sweep\n"
        "from helpers import tiny_spec\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    for _ in range(2):\n"
        "        sweep.init_block(tiny_spec(), [0, 1])\n"
        "said = [str(w.message) for w in caught if 'sweep.configure()' in str(w.message)]\n"
        "print(len(said), said[0] if said else '')\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([TESTS, *sys.path])}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env, timeout=300
    ).stdout.strip()
    count, _, message = out.partition(" ")
    if len(os.sched_getaffinity(0)) == 1:  # nothing to gain from configure() on one core: nothing said
        assert count == "0", out
        return
    assert count == "1", out
    assert "1 CPU device" in message and "trains on one core" in message


def test_configured_training_does_not_warn():
    script = (
        "import warnings, sweep\n"
        "sweep.configure(cpu_devices=1)\n"
        "from helpers import tiny_spec\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    sweep.init_block(tiny_spec(), [0])\n"
        "print(sum('sweep.configure()' in str(w.message) for w in caught))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([TESTS, *sys.path])}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == "0"


def test_dir_lists_only_public_names():
    names = dir(sweep)
    assert set(sweep.__all__) <= set(names) and {"tune", "search", "figures", "serving"} <= set(names)  # lazy
    assert not {"Any", "TYPE_CHECKING", "annotations", "importlib"} & set(names)
    assert not [n for n in names if n.startswith("_") and n != "__version__"], names


def test_the_suite_compiles_into_its_own_cache_and_writes_bytecode_once():
    import jax

    cache = jax.config.jax_compilation_cache_dir  # pyright: ignore[reportAttributeAccessIssue]
    assert cache == str(Path(__file__).parent.parent / ".pytest_cache" / "jax")
    assert not sys.dont_write_bytecode
    assert fresh_import("suite_cache") == [cache, False]  # inherited by the processes the tests start


def _module_name(path: Path) -> tuple[str, ...]:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return parts[:-1] if parts[-1] == "__init__" else parts


def test_no_import_circle_inside_a_package():
    """Modules import one way inside a package too (its ``__init__`` aside, which re-exports)."""
    graph: dict[tuple[str, ...], set[tuple[str, ...]]] = {}
    for path in sources():
        if path.name in ("__init__.py", "__main__.py"):
            continue
        name = _module_name(path)
        graph[name] = {m for m in _imported_modules(path) if m[:-1] == name[:-1] and m != name}
    circles = []
    for module, imported in graph.items():
        seen, stack = set(), list(imported)
        while stack:
            other = stack.pop()
            if other == module:
                circles.append(".".join(module))
                break
            if other not in seen:
                seen.add(other)
                stack.extend(graph.get(other, ()))
    assert circles == [], f"modules on an import circle: {circles}"


MODULE_LINES = 420  # "modules under ~400 lines": one concept per file


def test_every_module_stays_near_four_hundred_lines():
    """A module that grows past ~400 lines holds more than one concept: split it by concept (as
    ``_selection.py``, ``_predictions.py`` and ``_ensemble.py`` split the queries of ``Ensemble``)."""
    long = {str(p.relative_to(PACKAGE)): n for p in sources() if (n := len(p.read_text().splitlines())) > MODULE_LINES}
    assert long == {}, f"modules over {MODULE_LINES} lines: {long}"


def _is_module(parts: tuple[str, ...]) -> bool:
    return PACKAGE.joinpath(*parts).with_suffix(".py").exists() or PACKAGE.joinpath(*parts, "__init__.py").exists()


def test_no_module_reads_another_modules_private_names():
    """``from ._x import _name``, or ``_x._name`` of a module imported as ``from . import _x``:
    what a module of ``sweep`` shares with another is public in it."""
    found = []
    for path in sources():
        tree = ast.parse(path.read_text())
        package = list(path.relative_to(PACKAGE).parts[:-1])
        modules = set()
        for node in ast.walk(tree):
            if not (isinstance(node, ast.ImportFrom) and node.level):
                continue
            base = package[: len(package) - node.level + 1] + (node.module.split(".") if node.module else [])
            for a in node.names:
                if _is_module((*base, a.name)):
                    modules.add(a.asname or a.name)
                elif a.name.startswith("_") and not a.name.startswith("__"):
                    found.append(
                        f"{path.relative_to(PACKAGE)}: from {'.' * node.level}{node.module or ''} import {a.name}"
                    )
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
                if node.attr.startswith("_") and not node.attr.startswith("__"):
                    found.append(f"{path.relative_to(PACKAGE)}: {node.value.id}.{node.attr}")
    assert found == []


def test_every_file_name_of_a_sweep_directory_and_a_store_is_named_in_one_module():
    """``sweep._layout`` names the files; no other module spells one of those names out."""
    names = set()
    for node in ast.parse((PACKAGE / "_layout.py").read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
            if name.isupper() and name != "LOCAL_DIR":
                values = value.elts if isinstance(value, ast.Tuple) else [value]
                names |= {v.value for v in values if isinstance(v, ast.Constant) and isinstance(v.value, str)}
    assert {"plan.json", "manifest.json", "members.parquet", "block.json", "CURRENT", "tune-"} <= names
    found = [
        f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.value!r}"
        for path in sources()
        if path.name != "_layout.py"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and node.value in names
    ]
    assert found == [], "file names spelled outside sweep/_layout.py: " + ", ".join(found)


# Private names that are public API of what they belong to: namedtuple methods, os._exit.
PUBLIC_UNDERSCORED = {"_replace", "_asdict", "_fields", "_make", "_field_defaults", "_exit"}


def _defined_names(path: Path, seen: dict[Path, set[str]]) -> set[str]:
    """The names ``path`` defines (functions, classes, assigned names and attributes, arguments),
    and those of the ``sweep`` modules that define its classes' bases: a subclass uses its bases'
    private members, on any instance of its class."""
    if path in seen:
        return seen[path]
    seen[path] = names = set()
    tree = ast.parse(path.read_text())
    package = list(path.relative_to(PACKAGE).parts[:-1])
    imported: dict[str, Path] = {}  # a name imported from a sibling module -> that module's file
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.ImportFrom) and node.level and node.module:
            module = package[: len(package) - node.level + 1] + node.module.split(".")
            file = PACKAGE.joinpath(*module).with_suffix(".py")
            imported |= {a.asname or a.name: file for a in node.names if file.exists()}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                if isinstance(base, ast.Name) and base.id in imported:
                    names |= _defined_names(imported[base.id], seen)
    return names


def test_no_module_reads_another_modules_private_attributes():
    """``x._name`` is read only where ``_name`` is the module's own: ``x`` is ``self`` or ``cls``,
    or the module (or a base class it imports from another module of ``sweep``) defines ``_name``.

    The check reads names, not types, so it errs both ways, knowingly: a module that defines a
    ``_name`` of its own may read another class's ``_name`` unseen, and ``getattr(x, "_name")`` is not
    seen at all; a private name that is public API where it lives is listed in
    :data:`PUBLIC_UNDERSCORED`. What modules share is public: ``Selection.store``,
    ``Predictions.checked_inputs``/``outputs``/``rollout_states``, ``Store.at``, ..."""
    seen: dict[Path, set[str]] = {}
    found = []
    for path in sources():
        own = _defined_names(path, seen) | PUBLIC_UNDERSCORED
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            if node.attr not in own:
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node.value)}.{node.attr}")
    assert found == [], "modules reading another module's private attributes: " + ", ".join(found)


def test_one_aggregate():
    """``sweep.aggregate`` is the one aggregation of a sweep directory; Ray tasks are an argument of it."""
    defined = [  # the command `sweep aggregate` (cli/_store.py) calls it
        str(path.relative_to(PACKAGE))
        for path in sources()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef) and node.name == "aggregate" and part_of(path) != "cli"
    ]
    assert defined == ["ensemble/_aggregate.py"], defined
    import sweep.store
    import sweep.tune

    assert not hasattr(sweep.tune, "aggregate") and not hasattr(sweep.store, "aggregate")
    assert sweep.aggregate.__module__ == "sweep.ensemble._aggregate"


@pytest.mark.slow  # a whole run under a profiler: ~10 s of CPU
def test_the_room_walk_of_a_fixed_seed_run_re_enters_at_most_ten_rooms(tmp_path):
    """Following ``sweep.run``'s spec through the code (``benchmarks/tune/room_walk.py`` defines the
    walk) goes back to a module it left at most 10 times (docs/design.md, "The room walk")."""
    from benchmarks.tune.room_walk import reentries, tiny_spec, walk

    rooms = walk(tiny_spec(race=False), str(tmp_path))
    assert rooms[0] == "tune._run" and {"tune._policy", "tune._local", "tune._executor"} <= set(rooms)
    assert len(reentries(rooms)) <= 10, rooms


# Test files that still import a private module of sweep, and why (each entry must still be needed).
PRIVATE_IMPORTS_LEFT = {
    # a trial's signal handler and drain polling: seen publicly only on a Ray cluster (the slow tests)
    "_faults.py": "asks the trial's preemption flag (sweep.tune._preemption); kills a local trial inside an epoch",
    "_node_loss.py": "the drain poll interval (sweep.tune._preemption)",
    "test_preemption.py": "the SIGTERM handler, drain notices and retry reasons of a trial, in-process",
    "test_interrupt.py": "the driver's SIGTERM handler against Ray's and a lost local Ray, in-process",
    # the Tune layer's parts, unit-tested without starting Tune
    "test_progress.py": "the progress display driven by a fake clock",
    "test_trial_tensorboard.py": "the per-trial TensorBoard callback driven with fake trials",
    "test_tune_plan.py": "seeds-per-trial probing, resource checks, trial environments, cadence, log relay",
    "test_tune_waves.py": "how 2500 trials are cut into waves, and rounds handed to experiments, without starting them",
    # fault injection and tuning constants: a test seam, where the public route costs minutes
    "test_scale_store.py": "pieces of a few bytes (PIECE_BYTES) to check a large file's pieces",
    "test_storage_aggregate.py": "holds one aggregation inside its leaves write while a second starts",
    "test_store_lease.py": "the writer lease and the conditional-write object stores, unit-tested",
    # what only a power loss would show
    "test_store.py": "the disk flushes before a store's commit and a checkpoint's rename (sweep._fs)",
    # numeric kernels checked in float64 against scoringrules and old file formats
    "test_scores.py": "the compiled score sums, their padding and in-program sorting, at rel 1e-10",
    "test_targets.py": "the samples file written and read back, and one of the older float32 format",
}


def _test_imports(path: Path) -> list[str]:
    """The private modules of ``sweep`` and the other test modules that a test file imports."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            modules = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        else:
            continue
        for module in modules:
            parts = module.split(".")
            private = parts[0] == "sweep" and any(p.startswith("_") and not p.startswith("__") for p in parts[1:])
            test_module = parts[-1].startswith("test_") and (len(parts) == 1 or parts[0] == "tests")
            if (private and _is_module(tuple(parts[1:]))) or test_module:
                found.append(f"{path.name}:{node.lineno}: {module}")
    return found


def test_tests_use_public_interfaces():
    """No test file imports a private module of ``sweep`` (``sweep.x._y``, ``sweep._z``) or another
    test module: shared helpers live in helpers.py, the ``_x.py`` helper modules and conftest.py."""
    found = {path.name: _test_imports(path) for path in sorted(Path(TESTS).glob("*.py"))}
    assert [line for name, lines in found.items() if name not in PRIVATE_IMPORTS_LEFT for line in lines] == []
    assert [name for name in PRIVATE_IMPORTS_LEFT if not found.get(name)] == []  # fixed: take it off the list
