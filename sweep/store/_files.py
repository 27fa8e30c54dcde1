"""Checksummed byte streams, Parquet tables and leaves files on any pyarrow filesystem.

Every file of a store is read through one verified path: :func:`open_checked` (size against
the manifest) and :func:`check_digest` (sha256 of every byte read, against the manifest),
either in one pass while parsing (:func:`read_leaves`) or before a random-access reader gets
the same handle (:func:`open_verified`, for Parquet).

A leaves file is exactly what ``eqx.tree_serialise_leaves`` writes: one ``.npy`` record per
array leaf, in tree order. It is read back here strictly and without pickle: every record is
checked against the expected shape and dtype, nothing may follow the last one, and the whole
file must match the sha256 the manifest recorded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import equinox as eqx
import jax
import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from jaxtyping import PyTree

from .._errors import StoreError
from ._schema import ROW_GROUP_ROWS

Record = dict[str, Any]  # {"sha256": hex digest, "bytes": size} of one file


class _HashingWriter:
    """A write-only file object that hashes and counts what passes through it."""

    def __init__(self, raw):
        self._raw, self._sha, self._size = raw, hashlib.sha256(), 0

    def write(self, data) -> int:
        view = memoryview(data)
        self._sha.update(view)
        self._size += view.nbytes
        self._raw.write(data)
        return view.nbytes

    def tell(self) -> int:
        return self._size

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    @property
    def closed(self) -> bool:
        return False

    def record(self) -> Record:
        return {"sha256": self._sha.hexdigest(), "bytes": self._size}


class _HashingReader:
    """A read-only file object that hashes everything read through it."""

    def __init__(self, raw):
        self._raw, self._sha = raw, hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read() if size is None or size < 0 else self._raw.read(size)
        self._sha.update(data)
        return data

    def hexdigest(self) -> str:
        return self._sha.hexdigest()


def write_leaves(fs: pafs.FileSystem, path: str, tree: PyTree) -> Record:
    """``eqx.tree_serialise_leaves(tree)`` into ``path``; returns its checksum record."""
    with fs.open_output_stream(path) as raw:
        sink = _HashingWriter(raw)
        eqx.tree_serialise_leaves(sink, tree)
    return sink.record()


def open_checked(fs: pafs.FileSystem, path: str, record: Record) -> pa.NativeFile:
    """``path`` opened for reading, its size checked against the manifest's ``record``."""
    try:
        raw = fs.open_input_file(path)
    except (FileNotFoundError, OSError) as e:
        raise StoreError(f"{path!r}: cannot be opened ({e}); if a newer aggregation replaced the store, load it again") from None
    if raw.size() != record["bytes"]:
        size = raw.size()
        raw.close()
        raise StoreError(
            f"{path!r}: {size} bytes, but the manifest records {record['bytes']}; the file is truncated or was "
            f"replaced. Re-run `sweep aggregate`"
        )
    return raw


def check_digest(path: str, record: Record, actual: str) -> None:
    """:class:`StoreError` naming the file and both digests unless ``actual`` is the recorded sha256."""
    if actual != record["sha256"]:
        raise StoreError(
            f"{path!r}: checksum mismatch: the manifest records sha256 {record['sha256']}, the file has {actual}; "
            f"the file is corrupt or was altered. Re-run `sweep aggregate`"
        )


def open_verified(fs: pafs.FileSystem, path: str, record: Record) -> pa.NativeFile:
    """``path`` opened for random access (Parquet) after streaming it through sha256 and checking the
    digest: the returned handle, at position 0, reads exactly the bytes that were verified."""
    raw = open_checked(fs, path, record)
    try:
        f = _HashingReader(raw)
        while f.read(1 << 22):
            pass
        check_digest(path, record, f.hexdigest())
        raw.seek(0)
    except BaseException:
        raw.close()
        raise
    return raw


def read_leaves(fs: pafs.FileSystem, path: str, like: PyTree, record: Record, what: str) -> PyTree:
    """The leaves of ``path`` as NumPy arrays shaped like ``like`` (``jax.ShapeDtypeStruct`` leaves),
    hashed as they are read (one pass).

    Raises :class:`StoreError` naming ``path`` if it is missing, truncated, does not match
    ``like`` (``what`` says whose leaves were expected) or fails its checksum.
    """
    leaves, treedef = jax.tree_util.tree_flatten(like)
    with open_checked(fs, path, record) as raw:
        f = _HashingReader(raw)
        out = [_read_array(f, path, i, leaf, what) for i, leaf in enumerate(leaves)]
        if f.read(1):
            raise StoreError(f"{path!r}: data past its {len(leaves)} leaves; the file does not match {what}")
    check_digest(path, record, f.hexdigest())
    return jax.tree_util.tree_unflatten(treedef, out)


def _read_array(f: _HashingReader, path: str, i: int, like: jax.ShapeDtypeStruct, what: str) -> np.ndarray:
    try:
        array = np.lib.format.read_array(f, allow_pickle=False)
    except (ValueError, EOFError, OSError) as e:
        raise StoreError(f"{path!r}: leaf {i} cannot be read ({e}); the file is truncated or corrupt") from None
    if array.shape != tuple(like.shape) or array.dtype != like.dtype:
        raise StoreError(
            f"{path!r}: leaf {i} is {array.dtype}{list(array.shape)}, {what} needs "
            f"{np.dtype(like.dtype)}{list(like.shape)}; the leaves file does not match its config"
        )
    return array


def write_parquet(fs: pafs.FileSystem, path: str, schema: pa.Schema, tables: Iterable[pa.Table],
                  sorting: tuple[str, ...] = ()) -> Record:
    """Stream ``tables`` into one Parquet file (row groups of <= 65536 rows, page checksums)."""
    columns = [pq.SortingColumn(schema.get_field_index(c)) for c in sorting]
    with fs.open_output_stream(path) as raw:
        sink = _HashingWriter(raw)
        with pq.ParquetWriter(sink, schema, write_page_checksum=True, sorting_columns=columns or None) as writer:
            pending: list[pa.Table] = []
            rows = 0
            for table in tables:  # small tables are merged so row groups stay large
                pending.append(table)
                rows += table.num_rows
                if rows >= ROW_GROUP_ROWS:
                    writer.write_table(pa.concat_tables(pending), row_group_size=ROW_GROUP_ROWS)
                    pending, rows = [], 0
            if pending:
                writer.write_table(pa.concat_tables(pending), row_group_size=ROW_GROUP_ROWS)
    return sink.record()


def read_parquet(fs: pafs.FileSystem, path: str, **kwargs) -> pa.Table:
    """``pq.read_table`` of a file no manifest covers (an input in the sweep directory), page
    checksums verified; unreadable files raise :class:`StoreError`."""
    try:
        return pq.read_table(path, filesystem=fs, page_checksum_verification=True, **kwargs)
    except (pa.ArrowException, OSError) as e:
        raise StoreError(f"{path!r}: cannot be read as Parquet ({e}); the file is corrupt. Re-run `sweep aggregate`") from None


