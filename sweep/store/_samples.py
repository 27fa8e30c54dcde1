"""Test data kept with a sweep, so that figures draw from what a store holds and never
regenerate data (which would run the code a problem names).

``sweep.run`` has every dataset on the driver and writes the first :data:`SAMPLE_COUNT` test
samples of each problem to ``<sweep>/samples.parquet``, and the first :data:`TRAJECTORY_COUNT`
test trajectories (every step) of each problem that has some (``Dataset.test_traj``) to
``<sweep>/trajectories.parquet``, all in physical units (a normalised problem's fields
de-normalised), and the statistics of each normalised problem to ``<sweep>/normalization.parquet``
(:func:`normalization_table`); the aggregator copies those of the store's configs into the
generation, where the manifest checksums them like every other file. A store without
trajectories (none of its problems has any, or it was made before they were kept) reads as
having none.

```python
write_samples(fs, "/runs/heat", {spec.problem_id: data})
x, y = sweep.load("/runs/heat").where(depth=4).samples()
states = sweep.load("/runs/heat").where(depth=4).trajectories()    # [4, steps + 1, channels, *spatial]
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

from .._errors import StoreError, warn
from .._fs import exists, write_atomic
from .._layout import NORMALIZATION, SAMPLES, SPLIT_FILES
from ..problems import Dataset, Normalization
from ._files import AGGREGATE_AGAIN, parquet_schema, read_parquet
from ._schema import (
    NORMALIZATION_SCHEMA,
    SAMPLE_COUNT,
    SAMPLE_FILES,
    SAMPLES_SCHEMA,
    SAMPLES_SCHEMA_FLOAT32,
    TRAJECTORIES_SCHEMA,
    TRAJECTORY_COUNT,
)

TARGET_DTYPES = ("float32", "int32")


def physical(data: Dataset, a: np.ndarray) -> np.ndarray:
    """States ``[..., channels, *spatial]`` of ``data`` in physical units (de-normalised where ``data``
    was normalised), float32."""
    norm = data.normalization
    a = np.asarray(a, np.float32)
    return a if norm is None else norm.undo(a, len(data.sample_shape) - 1)


def sample_table(datasets: Mapping[str, Dataset], count: int = SAMPLE_COUNT, split: str = "test") -> pa.Table:
    """The first ``count`` samples of a split (``"test"`` or ``"val"``) of each dataset (by problem
    id), one row per sample; targets of any shape, float32 or int32 (class labels), kept exactly
    (as float64) with their dtype."""
    rows = []
    for problem_id, data in sorted(datasets.items()):
        x = physical(data, getattr(data, f"{split}_x")[:count])
        y = getattr(data, f"{split}_y")[:count]
        y = np.asarray(y) if data.normalization is None else physical(data, y)
        dtype = "int32" if y.dtype.kind == "i" else "float32"
        rows += [
            {
                "problem_id": problem_id,
                "sample": i,
                "x": xi.ravel(),
                "y": yi.astype(np.float64).ravel(),
                "x_shape": list(xi.shape),
                "y_shape": list(yi.shape),
                "y_dtype": dtype,
            }
            for i, (xi, yi) in enumerate(zip(x, y.astype(dtype)))
        ]
    return pa.Table.from_pylist(rows, SAMPLES_SCHEMA)


def trajectory_table(datasets: Mapping[str, Dataset], count: int = TRAJECTORY_COUNT, split: str = "test") -> pa.Table:
    """The first ``count`` trajectories of a split of each dataset that has some, one row per trajectory."""
    rows = []
    for problem_id, data in sorted(datasets.items()):
        traj = getattr(data, f"{split}_traj", None)
        if traj is not None:
            rows += [
                {"problem_id": problem_id, "trajectory": i, "states": t.ravel(), "states_shape": list(t.shape)}
                for i, t in enumerate(physical(data, traj[:count]))
            ]
    return pa.Table.from_pylist(rows, TRAJECTORIES_SCHEMA)


def normalization_table(datasets: Mapping[str, Dataset]) -> pa.Table:
    """The statistics of each normalised dataset (by problem id), one row per channel."""
    rows = []
    for problem_id, data in sorted(datasets.items()):
        norm = data.normalization
        if norm is not None:
            rows += [
                {
                    "problem_id": problem_id,
                    "channel": i,
                    "name": name if isinstance(name, str) else None,
                    "method": norm.method,
                    "shift": float(shift),
                    "scale": float(scale),
                }
                for i, (name, shift, scale) in enumerate(zip(norm.channels, norm.shift, norm.scale))
            ]
    return pa.Table.from_pylist(rows, NORMALIZATION_SCHEMA)


def normalization_of(table: pa.Table, problem_id: str) -> Normalization | None:
    """One problem's :class:`~sweep.problems.Normalization` from a normalization table; None if it has none."""
    rows = table.filter(pc.equal(table["problem_id"], problem_id)).sort_by("channel").to_pylist()  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
    if not rows:
        return None
    channels = tuple(r["channel"] if r["name"] is None else r["name"] for r in rows)
    shift, scale = (np.asarray([r[k] for r in rows], np.float64) for k in ("shift", "scale"))
    return Normalization(rows[0]["method"], channels, shift, scale)


def sample_tables(datasets: Mapping[str, Dataset]) -> dict[str, pa.Table]:
    """What a sweep keeps of its datasets for figures and scores, by file: the test samples and the
    test trajectories, and the same of the validation split (each but the test samples only where
    some dataset has rows for it)."""
    tables = {}
    for split, (samples, trajectories) in SPLIT_FILES.items():
        tables |= {samples: sample_table(datasets, split=split), trajectories: trajectory_table(datasets, split=split)}
    tables[NORMALIZATION] = normalization_table(datasets)
    return {name: table for name, table in tables.items() if name == SAMPLES or table.num_rows}


def write_samples(fs: pafs.FileSystem, sweep_path: str, datasets: Mapping[str, Dataset]) -> None:
    """``<sweep_path>/samples.parquet`` (and ``trajectories.parquet``): the test data of ``datasets``
    (:func:`sample_tables`), added to those of problems an earlier run of the sweep stored, which
    ``datasets`` replace (each file written aside, then moved into place)."""
    given = pa.array(sorted(datasets), pa.string())
    tables = sample_tables(datasets)
    for name in SAMPLE_FILES:
        path = f"{sweep_path}/{name}"
        table, old = tables.get(name), read_sample_file(fs, path, name)
        if old is not None:  # other problems' rows stay; those of ``datasets`` are replaced
            kept = old.filter(pc.invert(pc.is_in(old["problem_id"], value_set=given)))  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
            table = kept if table is None else pa.concat_tables([kept, table])
        if table is not None:
            sink = pa.BufferOutputStream()
            pq.write_table(_sorted(table), sink, write_page_checksum=True)
            write_atomic(fs, path, sink.getvalue().to_pybytes())


def read_samples(fs: pafs.FileSystem, sweep_path: str) -> dict[str, pa.Table]:
    """The sample files of a sweep directory (no manifest covers them yet), by file name, each
    checked against its schema; files that are not there are left out."""
    tables = {name: read_sample_file(fs, f"{sweep_path}/{name}", name) for name in SAMPLE_FILES}
    return {name: table for name, table in tables.items() if table is not None}


def read_sample_file(fs: pafs.FileSystem, path: str, name: str) -> pa.Table | None:
    """One sample file (``name``: its file name, which gives its schema); None if it is not there."""
    if not exists(fs, path):
        return None
    schema = parquet_schema(fs, path)  # checked before any row is decoded
    legacy = name == SAMPLES and schema.equals(SAMPLES_SCHEMA_FLOAT32)  # kept before targets of any dtype
    if not legacy and not schema.equals(SAMPLE_FILES[name]):
        raise StoreError(
            f"{path!r}: not a seed-sweep {name.removesuffix('.parquet')} table (columns "
            f"{schema.names}, expected {SAMPLE_FILES[name].names} with their types); delete it "
            f"and run the sweep again"
        )
    table = read_parquet(fs, path)
    if legacy:
        y = table["y"].cast(SAMPLES_SCHEMA.field("y").type)
        table = table.set_column(table.schema.get_field_index("y"), "y", y)
        table = table.append_column("y_dtype", pa.array(["float32"] * table.num_rows, pa.string()))
    return table


def write_store_samples(writer, tables: Mapping[str, pa.Table], problems: dict[str, str]) -> None:
    """Write into a store (``writer``: a :class:`~._writer.StoreWriter`) the rows of ``tables`` (by
    file name) of the store's problems (``problems``: config id -> problem id); warns about configs
    left without test samples when some were given."""
    wanted = pa.array(sorted(set(problems.values())), pa.string())
    for name, table in tables.items():
        rows = table.filter(pc.is_in(table["problem_id"], value_set=wanted))  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
        if name == SAMPLES:
            lacking = sorted(cid for cid, pid in problems.items() if pid not in set(rows["problem_id"].to_pylist()))
            if lacking:
                warn(
                    f"{len(lacking)} structural config(s) have no test samples (first: {lacking[0]}); "
                    f"`sweep plot` draws no predictions for them"
                )
        if rows.num_rows:
            writer.write_table(name, SAMPLE_FILES[name], [_sorted(rows)])


def _sorted(table: pa.Table) -> pa.Table:
    return table.sort_by([("problem_id", "ascending"), (table.schema.names[1], "ascending")])


def _arrays(rows: pa.Table, column: str, where: str, what: str, dtype: str = "float32") -> np.ndarray:
    """``[rows, *shape]`` (of ``dtype``) from a flattened list column and its ``<column>_shape``;
    rows that do not fit one shape raise :class:`StoreError` naming ``where``."""
    shapes = {json.dumps(s) for s in rows[f"{column}_shape"].to_pylist()}
    values = rows[column].to_pylist()
    shape = json.loads(shapes.pop()) if len(shapes) == 1 else None
    if shape is None or any(len(v) != int(np.prod(shape)) for v in values):
        raise StoreError(f"{where}: the {what} do not fit one shape; the file was altered. {AGGREGATE_AGAIN}")
    return np.asarray(values, np.float64).astype(dtype).reshape(len(values), *shape)


def samples_of(table: pa.Table, problem_id: str, where: str) -> tuple[np.ndarray, np.ndarray] | None:
    """``(x, y)`` of one problem's rows of a samples table: inputs ``[samples, channels, *spatial]``
    (float32) and targets ``[samples, *target_shape]`` (float32, or int32 for class labels); None
    if it has none. Rows that do not fit their shapes or dtype raise :class:`StoreError` naming ``where``."""
    rows = table.filter(pc.equal(table["problem_id"], problem_id)).sort_by("sample")  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
    if rows.num_rows == 0:
        return None
    dtypes = set(rows["y_dtype"].to_pylist())
    if len(dtypes) != 1 or not dtypes <= set(TARGET_DTYPES):
        raise StoreError(
            f"{where}: the targets of problem {problem_id} have dtype(s) {sorted(map(str, dtypes))}, not one of "
            f"{', '.join(TARGET_DTYPES)}; the file was altered. {AGGREGATE_AGAIN}"
        )
    x = _arrays(rows, "x", where, f"x samples of problem {problem_id}")
    y = _arrays(rows, "y", where, f"y samples of problem {problem_id}", dtypes.pop())
    return x, y


def trajectories_of(table: pa.Table, problem_id: str, where: str) -> np.ndarray | None:
    """One problem's trajectories of a trajectories table, ``[trajectories, steps + 1, channels,
    *spatial]``; None if it has none."""
    rows = table.filter(pc.equal(table["problem_id"], problem_id)).sort_by("trajectory")  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
    if rows.num_rows == 0:
        return None
    return _arrays(rows, "states", where, f"trajectories of problem {problem_id}")
