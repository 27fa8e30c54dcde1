"""Test samples kept with a sweep, so that figures draw from what a store holds and never
regenerate data (which would run the code a problem names).

``sweep.run`` has every dataset on the driver and writes the first :data:`SAMPLE_COUNT` test
samples of each problem to ``<sweep>/samples.parquet``; the aggregator copies those of the
store's configs into the generation, where the manifest checksums them like every other file.

```python
write_samples(fs, "/runs/heat", {spec.problem_id: data})
x, y = sweep.load("/runs/heat").where(depth=4).samples()
```
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from .._errors import StoreError
from .._fs import exists, write_atomic
from ..problems import Dataset
from ._files import read_parquet
from ._schema import SAMPLE_COUNT, SAMPLES, SAMPLES_SCHEMA


def sample_table(datasets: Mapping[str, Dataset], count: int = SAMPLE_COUNT) -> pa.Table:
    """The first ``count`` test samples of each dataset (by problem id), one row per sample."""
    rows = []
    for problem_id, data in sorted(datasets.items()):
        x, y = np.asarray(data.test_x[:count], np.float32), np.asarray(data.test_y[:count], np.float32)
        rows += [{"problem_id": problem_id, "sample": i, "x": xi.ravel(), "y": yi.ravel(),
                  "x_shape": list(xi.shape), "y_shape": list(yi.shape)} for i, (xi, yi) in enumerate(zip(x, y))]
    return pa.Table.from_pylist(rows, SAMPLES_SCHEMA)


def write_samples(fs: pafs.FileSystem, sweep_path: str, datasets: Mapping[str, Dataset]) -> None:
    """``<sweep_path>/samples.parquet``: the test samples of ``datasets``, added to those of problems
    an earlier run of the sweep stored (written aside, then moved into place)."""
    table = sample_table(datasets)
    path = f"{sweep_path}/{SAMPLES}"
    old = read_samples(fs, path)
    if old is not None:
        kept = old.filter(pc.invert(pc.is_in(old["problem_id"], value_set=pa.array(sorted(datasets), pa.string()))))
        table = pa.concat_tables([kept, table]).sort_by([("problem_id", "ascending"), ("sample", "ascending")])
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, write_page_checksum=True)
    write_atomic(fs, path, sink.getvalue().to_pybytes())


def read_samples(fs: pafs.FileSystem, path: str) -> pa.Table | None:
    """A samples file no manifest covers yet (the sweep directory's), checked against its schema;
    None if there is none."""
    if not exists(fs, path):
        return None
    table = read_parquet(fs, path)
    if not table.schema.equals(SAMPLES_SCHEMA):
        raise StoreError(f"{path!r}: not a seed-sweep samples table (columns {table.column_names}, expected "
                         f"{SAMPLES_SCHEMA.names} with their types); delete it and run the sweep again")
    return table


def samples_of(table: pa.Table, problem_id: str, where: str) -> tuple[np.ndarray, np.ndarray] | None:
    """``(x, y)`` of one problem's rows of a samples table, ``[samples, channels, *spatial]``; None if
    it has none. Rows that do not fit their shapes raise :class:`StoreError` naming ``where``."""
    rows = table.filter(pc.equal(table["problem_id"], problem_id)).sort_by("sample")
    if rows.num_rows == 0:
        return None
    out = []
    for column in ("x", "y"):
        shapes = {json.dumps(s) for s in rows[f"{column}_shape"].to_pylist()}
        values = rows[column].to_pylist()
        shape = json.loads(shapes.pop()) if len(shapes) == 1 else None
        if shape is None or any(len(v) != int(np.prod(shape)) for v in values):
            raise StoreError(f"{where}: the {column} samples of problem {problem_id} do not fit one shape; the file "
                             f"was altered. Re-run `sweep aggregate`")
        out.append(np.asarray(values, np.float32).reshape(len(values), *shape))
    return out[0], out[1]
