"""Write one new store generation; nothing is visible to readers until :meth:`StoreWriter.commit`."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
from jaxtyping import PyTree

from ._files import Record, write_leaves, write_parquet
from ._generations import check_target, commit, new_generation
from ._schema import FORMAT, MANIFEST


class StoreWriter:
    """Files of a generation of the store at ``store_path``, written aside then committed.

    ```python
    writer = StoreWriter(fs, "/runs/heat/ensembles")
    writer.write_leaves("0123456789ab.eqx", stacked_params)
    writer.write_table("members.parquet", schema, tables)
    writer.commit({"num_members": 16, ...})   # atomically replaces the previous store
    ```
    """

    def __init__(self, fs: pafs.FileSystem, store_path: str):
        check_target(fs, store_path)
        self.fs, self.store_path = fs, store_path
        self.name, self.root = new_generation(fs, store_path)
        self.files: dict[str, Record] = {}

    def write_leaves(self, relpath: str, tree: PyTree) -> None:
        if "/" in relpath:
            self.fs.create_dir(f"{self.root}/{relpath.rsplit('/', 1)[0]}", recursive=True)
        self.files[relpath] = write_leaves(self.fs, f"{self.root}/{relpath}", tree)

    def write_table(self, relpath: str, schema: pa.Schema, tables: Iterable[pa.Table], sorting: tuple[str, ...] = ()) -> None:
        self.files[relpath] = write_parquet(self.fs, f"{self.root}/{relpath}", schema, tables, sorting)

    def commit(self, manifest: dict[str, Any]) -> str:
        """Write ``manifest.json`` (format, checksums of every file, plus ``manifest``) and commit."""
        manifest = {**manifest, "format": FORMAT, "files": dict(sorted(self.files.items()))}
        with self.fs.open_output_stream(f"{self.root}/{MANIFEST}") as f:
            f.write(json.dumps(manifest, sort_keys=True, indent=1).encode())
        commit(self.fs, self.store_path, self.name)
        return self.root
