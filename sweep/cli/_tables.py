"""What ``sweep show`` prints: fixed-width text tables, CSV or JSON."""

from __future__ import annotations

import io
import json
import math

import pyarrow as pa

from ..ensemble import format_table as format_table


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
