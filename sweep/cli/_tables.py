"""What ``sweep show`` prints: fixed-width text tables, CSV or JSON."""

from __future__ import annotations

import io
import json
import math
from typing import Any

import pyarrow as pa


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple, dict)):
        return "[...]" if value else "[]"
    return str(value)


def format_table(table: pa.Table, limit: int = 50) -> str:
    """A fixed-width text table of the first ``limit`` rows (list columns abbreviated)."""
    names = table.column_names
    rows = [[_cell(v) for v in row.values()] for row in table.slice(0, limit).to_pylist()]
    widths = [max([len(n)] + [len(r[i]) for r in rows]) for i, n in enumerate(names)]
    out = ["  ".join(n.rjust(w) for n, w in zip(names, widths))]
    out += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows]
    if table.num_rows > limit:
        out.append(f"... {table.num_rows - limit} more rows (--limit)")
    return "\n".join(out)


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
