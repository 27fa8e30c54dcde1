"""What ``sweep show`` prints: fixed-width text tables, CSV or JSON."""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import sys
from collections.abc import Collection

import pyarrow as pa

from .._text_table import wrapped
from ..ensemble import format_table as _format_table


def terminal_width() -> int | None:
    """The columns a line may take: ``COLUMNS`` where it is set (as for the help screens), else
    those of the terminal that standard output is; None for a pipe or a file (whole lines)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


def prose(text: str) -> str:
    """``text`` for the terminal: each of its lines wrapped at word boundaries to the width of
    :func:`terminal_width`; as it is for a pipe or a file."""
    return wrapped(text, terminal_width())


def format_table(table: pa.Table, limit: int, keys: Collection[str] = ()) -> str:
    """``table`` as text for the terminal: a table wider than it in blocks of columns one below
    the other, each led by the leading columns named in ``keys`` (what names a row)."""
    leading = 0
    while leading < len(table.column_names) and table.column_names[leading] in keys:
        leading += 1
    return _format_table(table, limit, width=terminal_width(), keys=leading)


def write_table(table: pa.Table, fmt: str) -> str:
    """``table`` as CSV (a header, then one line per row) or JSON (a list of row objects; NaN and
    infinities as null, list columns as lists)."""
    if fmt == "csv":
        import pyarrow.csv

        table = table.select([c for c in table.column_names if not pa.types.is_list(table.schema.field(c).type)])
        sink = io.BytesIO()
        pyarrow.csv.write_csv(table, sink)
        return sink.getvalue().decode()
    rows = [
        {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
        for row in table.to_pylist()
    ]
    return json.dumps(rows, indent=1, default=str) + "\n"
