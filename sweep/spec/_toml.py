"""A spec's TOML file: read as a table (validated by ``SweepSpec.from_dict``) and written from one."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from .._errors import SpecError


def read_toml(path: str | Path) -> dict[str, Any]:
    """The table of the spec file at ``path``, not validated yet (:meth:`SweepSpec.from_dict` does)."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise SpecError(f"spec file {str(path)!r} does not exist") from None
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"spec file {str(path)!r} is not valid TOML: {e}") from None


def toml_text(table: dict[str, Any]) -> str:
    """``table`` (a spec's :meth:`~sweep.SweepSpec.to_dict`) as TOML, its None values left out."""
    import tomli_w

    return tomli_w.dumps(_drop_none(table))


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    return value
