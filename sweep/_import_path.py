"""``"package.module:attribute"`` import paths named in a spec, imported only when used, and the
import path this process hands the Ray workers it starts (:func:`driver_paths`)."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import re
import sys
import sysconfig
from collections.abc import Collection, Iterator
from typing import Any

from ._errors import SpecError, StoreError, did_you_mean

_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def is_import_path(name: str) -> bool:
    return isinstance(name, str) and bool(_PATH.match(name))


def trusted(name: str, trust: bool | Collection[str]) -> bool:
    """Whether the code ``name`` names may run under ``trust`` (True: any import path; a
    collection: those import paths; False: none). A name that is no import path is seed-sweep's own."""
    return not is_import_path(name) or trust is True or (trust is not False and name in trust)


def with_import_hint(error: SpecError) -> str:
    """``error``'s text (of building a model factory), and where it could not import its module,
    where that module is looked for (a store or a sweep directory has no spec file beside it)."""
    hint = "; the factory is imported from your environment: install its package, or run with PYTHONPATH=<the folder of its module>"
    return f"{error}{hint if 'cannot import module' in str(error) else ''}"


def import_object(path: str, field: str) -> Any:
    """Import ``module:attr`` (attr may be dotted) and return it; errors name the spec field."""
    module_name, _, attr = path.partition(":")
    try:
        obj = importlib.import_module(module_name)
    except ImportError as e:
        raise SpecError(f"`{field}`: cannot import module {module_name!r} of {path!r}: {e}") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            names = [n for n in dir(obj) if not n.startswith("_")]
            raise SpecError(
                f"`{field}`: module {module_name!r} has no attribute {attr!r}{did_you_mean(part, names)}"
            ) from None
    if not callable(obj):
        raise SpecError(f"`{field}`: {path!r} is not callable")
    return obj


def refuse_inside(path: str, directory: str, field: str) -> None:
    """:class:`StoreError` (naming ``field``, where the path was read) if the module of ``path``
    would be imported from a file inside ``directory`` (a store's own directory: code that came
    with a store is never imported).

    Looks the top-level package up without running it (``importlib.util.find_spec``); its
    submodules lie below it.
    """
    top = path.partition(":")[0].split(".")[0]
    module = sys.modules.get(top)
    if module is not None:
        places = [getattr(module, "__file__", None), *getattr(module, "__path__", ())]
    else:
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            return  # not importable at all: importing it later says so
        places = [] if spec is None else [spec.origin, *(spec.submodule_search_locations or ())]
    inside = os.path.realpath(directory)
    for place in (p for p in places if isinstance(p, str) and os.path.isabs(p)):  # not 'built-in', 'frozen'
        real = os.path.realpath(place)
        if os.path.commonpath([real, inside]) == inside:
            raise StoreError(
                f"{field}: {path!r} would be imported from {real!r}, inside the store's directory "
                f"{directory!r}; seed-sweep imports a stored model factory only from your own environment "
                f"(installed packages, your PYTHONPATH), never from files that came with a store"
            )


def driver_paths() -> list[str]:
    """The entries of this process's ``sys.path`` that are its own: existing folders outside the
    interpreter's standard library and installed packages (``""`` is the working directory)."""
    installed = {
        os.path.realpath(p) for k in ("stdlib", "platstdlib", "purelib", "platlib") if (p := sysconfig.get_path(k))
    }
    out: list[str] = []
    for entry in sys.path:
        path = os.path.realpath(entry or os.getcwd())
        below = any(path == root or path.startswith(root + os.sep) for root in installed)
        if os.path.isdir(path) and not below and "site-packages" not in path and path not in out:
            out.append(path)
    return out


@contextlib.contextmanager
def workers_import_path() -> Iterator[None]:
    """While a local Ray starts: ``PYTHONPATH`` set to the driver's own import path
    (:func:`driver_paths`), which Ray's processes inherit, so that its workers import what this
    process imports (a model module a script put on ``sys.path``); this process's environment as it
    was after. Through the environment, not a ``runtime_env``: Ray starts the workers of a job with
    a ``runtime_env`` through a process of its own that imports Ray once more (about a CPU-second
    each), and cannot give such a job the workers it started ahead."""
    paths = os.pathsep.join(driver_paths())
    before = os.environ.get("PYTHONPATH")
    if paths:
        os.environ["PYTHONPATH"] = paths
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before
