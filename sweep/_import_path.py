"""``"package.module:attribute"`` import paths named in a spec, imported only when used."""

from __future__ import annotations

import importlib
import re
from typing import Any

from ._errors import SpecError

_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def is_import_path(name: str) -> bool:
    return isinstance(name, str) and bool(_PATH.match(name))


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
            raise SpecError(f"`{field}`: module {module_name!r} has no attribute {attr!r}") from None
    if not callable(obj):
        raise SpecError(f"`{field}`: {path!r} is not callable")
    return obj
