"""Write one new store generation; nothing is visible to readers until :meth:`StoreWriter.commit`.

Every write names its file when it fails: an ``OSError`` underneath (a full disk, a permission,
also when Equinox or pyarrow wrap it) becomes a :class:`StoreError` with the file and the cause,
and the previous store stays committed and readable.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from types import TracebackType
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
from jaxtyping import PyTree

from .._errors import StoreError, warn
from .._fs import os_error
from .._layout import MANIFEST, POINTER
from ._files import Record, write_leaves, write_parquet
from ._generations import check_target, commit, current, generations_dir, new_generation, writer_lock
from ._schema import FORMAT

_UNCHANGED = "the previous store is unchanged and readable; free space or fix permissions, then aggregate again"


@contextmanager
def io_errors(path: str, consequence: str = _UNCHANGED) -> Iterator[None]:
    """Turn an ``OSError`` behind anything raised inside into a :class:`StoreError` naming the file it
    names (else ``path``, the file being written) and its cause."""
    try:
        yield
    except StoreError:
        raise
    except Exception as e:
        cause = os_error(e)
        if cause is None:
            raise
        raise StoreError(
            f"{cause.filename or path!r}: cannot write ({cause.strerror or cause}); {consequence}"
        ) from None


def write_leaves_file(fs: pafs.FileSystem, root: str, relpath: str, tree: PyTree) -> Record:
    """Write a leaves file into the generation directory ``root`` (its shard directory made as
    needed); returns its record. Aggregation tasks call this in other processes."""
    path = f"{root}/{relpath}"
    with io_errors(path):
        if "/" in relpath:
            fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
        return write_leaves(fs, path, tree)


class StoreWriter:
    """Files of a generation of the store at ``store_path``, written aside then committed.

    ```python
    with StoreWriter(fs, "/runs/heat/ensembles") as writer:
        writer.write_leaves("0123456789ab.eqx", stacked_params)
        writer.write_table("members.parquet", schema, tables)
        writer.commit({"num_members": 16, ...})   # atomically replaces the previous store
    ```

    Inside the ``with`` block the store's writer lock is held (a lease on object storage);
    leaving it without a commit (an error) removes the unfinished generation.
    """

    fs: pafs.FileSystem
    store_path: str
    name: str  # the generation's, once the ``with`` block is entered
    root: str
    committed: bool

    def __init__(self, fs: pafs.FileSystem, store_path: str):
        check_target(fs, store_path)
        self.fs, self.store_path = fs, store_path
        self.files: dict[str, Record] = {}
        self._stack = ExitStack()
        self.name = self.root = ""
        self.committed = False
        self._still_locked: Callable[[], None] = lambda: None

    def __enter__(self) -> StoreWriter:
        with io_errors(self.store_path):
            self._still_locked = self._stack.enter_context(writer_lock(self.fs, self.store_path))
            self.name, self.root = new_generation(self.fs, self.store_path)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        try:
            if not self.committed and self.root:
                try:
                    self.fs.delete_dir(self.root)
                except OSError:
                    pass  # the next aggregation collects it
        finally:
            self._stack.close()

    def write_leaves(self, relpath: str, tree: PyTree) -> None:
        self.add_file(relpath, write_leaves_file(self.fs, self.root, relpath, tree))

    def add_file(self, relpath: str, record: Record) -> None:
        """Record a file that someone else wrote into :attr:`root` (an aggregation task)."""
        self.files[relpath] = record

    def write_table(
        self,
        relpath: str,
        schema: pa.Schema,
        tables: Iterable[pa.Table],
        sorting: tuple[str, ...] = (),
        statistics: list[str] | None = None,
    ) -> None:
        path = f"{self.root}/{relpath}"
        with io_errors(path):
            self.files[relpath] = write_parquet(self.fs, path, schema, tables, sorting, statistics)

    def commit(self, manifest: dict[str, Any]) -> str:
        """Write ``manifest.json`` (format, checksums of every file, plus ``manifest``) and commit."""
        manifest = {**manifest, "format": FORMAT, "files": dict(sorted(self.files.items()))}
        path = f"{self.root}/{MANIFEST}"
        with io_errors(path):
            with self.fs.open_output_stream(path) as f:
                f.write(json.dumps(manifest, sort_keys=True, indent=1).encode())
        with io_errors(path):
            self._still_locked()  # a lease taken over meanwhile: commit nothing
        try:
            commit(self.fs, self.store_path, self.name)
        except Exception as e:
            cause = os_error(e)
            if cause is None:
                raise
            self.committed = self._is_current()
            pointer = f"{generations_dir(self.store_path)}/{POINTER}"  # the one write before the commit takes effect
            where = cause.filename or (self.store_path if self.committed else pointer)
            if not self.committed:
                raise StoreError(
                    f"{where!r}: cannot write ({cause.strerror or cause}), so generation {self.name} is "
                    f"not committed; {_UNCHANGED}"
                ) from None
            warn(
                f"{where!r}: generation {self.name} is committed, but tidying up after it failed "
                f"({cause.strerror or cause}); the next aggregation retries"
            )
        self.committed = True
        return self.root

    def _is_current(self) -> bool:
        try:
            return current(self.fs, self.store_path) == self.name
        except (OSError, StoreError):
            return False
