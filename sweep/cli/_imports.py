"""The spec file's folder on the import path while ``sweep plan`` / ``sweep run`` run."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from .._errors import SweepError


@contextlib.contextmanager
def spec_folder_importable(path: Path):
    """Put the spec file's folder first on the import path while a command runs, as running a
    script from that folder does: on ``sys.path``, and on ``PYTHONPATH`` for the processes it
    starts (a local Ray and its workers; a cluster joined with --address has its own). An error
    about a module that still cannot be imported gets a hint naming that folder and PYTHONPATH.

    Example:
        ``with spec_folder_importable(Path("project/own.toml")): plan(SweepSpec.from_toml(...))``
    """
    folder = str(path.resolve().parent)
    before = os.environ.get("PYTHONPATH")
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    os.environ["PYTHONPATH"] = os.pathsep.join([folder, *([before] if before else [])])
    try:
        yield
    except SweepError as e:
        if "cannot import module" not in str(e):
            raise
        searched = before or "unset"
        raise type(e)(
            f"{e}; searched the spec's folder {folder!r} and PYTHONPATH ({searched}) besides the installed "
            f"packages: put the module next to the spec, or run with PYTHONPATH=<its folder>"
        ) from None
    finally:
        if added and folder in sys.path:
            sys.path.remove(folder)
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before
