"""Checksummed byte streams, Parquet tables and leaves files on any pyarrow filesystem.

Every file of a store is read through one verified path: :func:`open_checked` (size against
the manifest) and :func:`check_digest` (sha256 of every byte read, against the manifest),
either in one pass while parsing (:func:`read_leaves`), before a random-access reader gets the
same handle (:func:`open_verified`), or piece by piece (:class:`PieceReader`).

Parquet tables are also hashed in *pieces* of :data:`PIECE_BYTES` (the record's ``pieces``:
one sha256 per consecutive 128 KiB of the file), so that a query reading a few row groups of
a large ``members.parquet`` reads, and verifies against the manifest, only the pieces holding
the footer and the column chunks it needs; every byte the Parquet reader parses has been
checked against a sha256 the manifest records, as when the whole file is hashed first. (The
pages' CRC32 checksums are verified as well, but a CRC detects accidents, not alterations.)

A leaves file is exactly what ``eqx.tree_serialise_leaves`` writes: one ``.npy`` record per
array leaf, in tree order. It is read back here strictly and without pickle
(:func:`sweep._leaves.read_arrays`): every record is checked against the expected shape and
dtype, nothing may follow the last one, and the whole file must match the sha256 the manifest
recorded.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import equinox as eqx
import jax
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from jaxtyping import PyTree

from .._errors import StoreError
from .._fs import regular_size
from .._leaves import read_arrays
from ._schema import ROW_GROUP_ROWS

# what mends a store whose file is damaged or altered (one received alone has no sweep directory)
AGGREGATE_AGAIN = "Re-run `sweep aggregate` on its sweep directory (a store received alone: ask its sender again)"

PIECE_BYTES = 1 << 17  # 128 KiB: the unit a table is verified in when it is read in parts
Record = dict[str, Any]  # {"sha256": hex digest, "bytes": size[, "piece_bytes": n, "pieces": [hex, ...]]}


class _HashingWriter:
    """A write-only file object that hashes and counts what passes through it (and, given
    ``piece_bytes``, hashes every consecutive piece of that many bytes too)."""

    def __init__(self, raw, piece_bytes: int | None = None):
        self._raw, self._sha, self._size = raw, hashlib.sha256(), 0
        self._piece_bytes, self._pieces, self._piece, self._in_piece = piece_bytes, [], hashlib.sha256(), 0

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        self._sha.update(view)
        self._size += view.nbytes
        offset = 0
        while self._piece_bytes and offset < view.nbytes:
            take = min(view.nbytes - offset, self._piece_bytes - self._in_piece)
            self._piece.update(view[offset : offset + take])
            self._in_piece, offset = self._in_piece + take, offset + take
            if self._in_piece == self._piece_bytes:
                self._pieces.append(self._piece.hexdigest())
                self._piece, self._in_piece = hashlib.sha256(), 0
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
        record: Record = {"sha256": self._sha.hexdigest(), "bytes": self._size}
        if self._piece_bytes:
            last = [self._piece.hexdigest()] if self._in_piece else []
            record |= {"piece_bytes": self._piece_bytes, "pieces": self._pieces + last}
        return record


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


class PieceReader:
    """A read-only, seekable file object over a store file whose record has ``pieces``: every
    byte it returns lies in a piece whose sha256 was checked against the record first.

    A Parquet reader on it (``pq.ParquetFile(pa.PythonFile(reader))``) reads the footer and
    the column chunks it is asked for, i.e. only their pieces; the last :data:`CACHE` pieces
    read stay in memory.
    """

    CACHE = 32

    def __init__(self, fs: pafs.FileSystem, path: str, record: Record):
        self._raw, self._path = open_checked(fs, path, record), path
        self._size, self._piece_bytes, self._digests = record["bytes"], record["piece_bytes"], record["pieces"]
        self._pos = 0
        self._cache: OrderedDict[int, bytes] = OrderedDict()

    def _piece(self, i: int) -> bytes:
        if i in self._cache:
            self._cache.move_to_end(i)
            return self._cache[i]
        start = i * self._piece_bytes
        self._raw.seek(start)
        data = self._raw.read(min(self._piece_bytes, self._size - start))
        actual = hashlib.sha256(data).hexdigest()
        if actual != self._digests[i]:
            raise StoreError(
                f"{self._path!r}: checksum mismatch in bytes {start}..{start + len(data)}: the manifest records "
                f"sha256 {self._digests[i]} for them, the file has {actual}; the file is corrupt or was altered. "
                f"{AGGREGATE_AGAIN}"
            )
        self._cache[i] = data
        if len(self._cache) > self.CACHE:
            self._cache.popitem(last=False)
        return data

    def read(self, size: int = -1) -> bytes:
        end = self._size if size is None or size < 0 else min(self._size, self._pos + size)
        parts, pos = [], self._pos
        while pos < end:
            i = pos // self._piece_bytes
            data = self._piece(i)
            low = pos - i * self._piece_bytes
            part = data[low : low + end - pos]
            parts.append(part)
            pos += len(part)
        self._pos = max(self._pos, pos)
        return b"".join(parts)

    def seek(self, offset: int, whence: int = 0) -> int:
        self._pos = offset if whence == 0 else self._pos + offset if whence == 1 else self._size + offset
        return self._pos

    def tell(self) -> int:
        return self._pos

    def close(self) -> None:
        self._raw.close()
        self._cache.clear()

    @property
    def closed(self) -> bool:
        return self._raw.closed

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False


def write_leaves(fs: pafs.FileSystem, path: str, tree: PyTree) -> Record:
    """``eqx.tree_serialise_leaves(tree)`` into ``path``; returns its checksum record."""
    with fs.open_output_stream(path) as raw:
        sink = _HashingWriter(raw)
        eqx.tree_serialise_leaves(sink, tree)
    return sink.record()


def open_checked(fs: pafs.FileSystem, path: str, record: Record) -> pa.NativeFile:
    """``path`` opened for reading, its size checked against the manifest's ``record``."""
    regular_size(fs, path)  # (a FIFO would block the open itself)
    try:
        raw = fs.open_input_file(path)
    except FileNotFoundError:
        raise StoreError(
            f"{path!r}: listed in the manifest but missing: the store was altered (ask its sender for it again, or "
            f"re-run `sweep aggregate` on a sweep directory of your own), or a newer aggregation replaced it since "
            f"it was opened (load it again)"
        ) from None
    except OSError as e:
        raise StoreError(
            f"{path!r}: cannot be opened ({e}); if a newer aggregation replaced the store, load it again"
        ) from None
    if raw.size() != record["bytes"]:
        size = raw.size()
        raw.close()
        raise StoreError(
            f"{path!r}: {size} bytes, but the manifest records {record['bytes']}; the file is truncated or was "
            f"replaced. {AGGREGATE_AGAIN}"
        )
    return raw


def check_digest(path: str, record: Record, actual: str) -> None:
    """:class:`StoreError` naming the file and both digests unless ``actual`` is the recorded sha256."""
    if actual != record["sha256"]:
        raise StoreError(
            f"{path!r}: checksum mismatch: the manifest records sha256 {record['sha256']}, the file has {actual}; "
            f"the file is corrupt or was altered. {AGGREGATE_AGAIN}"
        )


def open_verified(fs: pafs.FileSystem, path: str, record: Record) -> pa.NativeFile:
    """``path`` opened for random access after streaming it through sha256 and checking the digest;
    the returned handle is at position 0."""
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


def open_table(fs: pafs.FileSystem, path: str, record: Record) -> pq.ParquetFile:
    """A store table for random access: read and verified piece by piece when its record has
    pieces, else hashed whole first (a store written before pieces existed)."""
    if "pieces" in record:
        return pq.ParquetFile(pa.PythonFile(PieceReader(fs, path, record), mode="r"), page_checksum_verification=True)
    return pq.ParquetFile(open_verified(fs, path, record), page_checksum_verification=True)


def read_leaves(fs: pafs.FileSystem, path: str, like: PyTree, record: Record, what: str) -> PyTree:
    """The leaves of ``path`` as NumPy arrays shaped like ``like`` (``jax.ShapeDtypeStruct`` leaves),
    hashed as they are read (one pass).

    Raises :class:`StoreError` naming ``path`` if it is missing, truncated, does not match
    ``like`` (``what`` says whose leaves were expected) or fails its checksum.
    """
    leaves, treedef = jax.tree_util.tree_flatten(like)
    with open_checked(fs, path, record) as raw:
        f = _HashingReader(raw)
        out = read_arrays(f, leaves, path, what, record["bytes"])
        if f.read(1):
            raise StoreError(f"{path!r}: data past its {len(leaves)} leaves; the file does not match {what}")
    check_digest(path, record, f.hexdigest())
    return jax.tree_util.tree_unflatten(treedef, out)


def write_parquet(
    fs: pafs.FileSystem,
    path: str,
    schema: pa.Schema,
    tables: Iterable[pa.Table],
    sorting: tuple[str, ...] = (),
    statistics: Sequence[str] | None = None,
) -> Record:
    """Stream ``tables`` into one Parquet file: each table its own row group(s) of <= 65536 rows
    (a query's unit: the aggregator gives one table per leaves shard), page checksums, min/max
    statistics on the ``statistics`` columns (default all), hashed whole and in pieces."""
    columns = [pq.SortingColumn(schema.get_field_index(c)) for c in sorting]
    with fs.open_output_stream(path) as raw:
        sink = _HashingWriter(raw, PIECE_BYTES)
        with pq.ParquetWriter(
            sink,
            schema,
            write_page_checksum=True,
            sorting_columns=columns or None,
            write_statistics=True if statistics is None else list(statistics),  # pyright: ignore[reportArgumentType]  (pyarrow also takes columns)
        ) as writer:
            for table in tables:
                if table.num_rows:
                    writer.write_table(table.combine_chunks(), row_group_size=ROW_GROUP_ROWS)
    return sink.record()


def read_parquet(fs: pafs.FileSystem, path: str, **kwargs) -> pa.Table:
    """``pq.read_table`` of a file no manifest covers (an input in the sweep directory), page
    checksums verified; unreadable files raise :class:`StoreError`."""
    return _parquet(path, lambda: pq.read_table(path, filesystem=fs, page_checksum_verification=True, **kwargs), fs)


def parquet_schema(fs: pafs.FileSystem, path: str) -> pa.Schema:
    """The schema in the footer of such a file (no row decoded), as :func:`read_parquet` reads it."""
    return _parquet(path, lambda: pq.read_schema(path, filesystem=fs), fs)


def _parquet(path: str, read: Callable[[], Any], fs: pafs.FileSystem) -> Any:
    regular_size(fs, path)  # (a FIFO would block the open itself)
    try:
        return read()
    except (pa.ArrowException, OSError) as e:
        raise StoreError(f"{path!r}: cannot be read as Parquet ({e}); the file is corrupt. {AGGREGATE_AGAIN}") from None
