"""Paths on any filesystem pyarrow understands: local disks, NFS, ``s3://`` and friends."""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pyarrow.fs as pafs

from ._errors import StoreError


def filesystem_path(path: str | os.PathLike, filesystem: pafs.FileSystem | None = None) -> tuple[pafs.FileSystem, str]:
    """``(filesystem, path inside it)`` of a user's path or URI; local paths become absolute."""
    path = str(path)
    if filesystem is not None:
        return filesystem, path.removeprefix("s3://") if isinstance(filesystem, pafs.S3FileSystem) else path
    if "://" in path:
        try:
            return pafs.FileSystem.from_uri(path)
        except Exception as e:  # pyarrow raises ArrowInvalid, OSError, ... for unknown or unreachable URIs
            raise StoreError(f"storage {path!r}: cannot open ({e})") from None
    return pafs.LocalFileSystem(), str(Path(path).expanduser().resolve())


def is_local(filesystem: pafs.FileSystem) -> bool:
    return isinstance(filesystem, pafs.LocalFileSystem)


def exists(filesystem: pafs.FileSystem, path: str) -> bool:
    return filesystem.get_file_info(path).type != pafs.FileType.NotFound


def read_text(filesystem: pafs.FileSystem, path: str) -> str:
    with filesystem.open_input_stream(path) as f:
        return f.read().decode()


def write_text_atomic(filesystem: pafs.FileSystem, path: str, text: str) -> None:
    """Write aside, then move into place (a rename on local disks)."""
    parent, _, name = path.rpartition("/")
    filesystem.create_dir(parent, recursive=True)
    tmp = f"{parent}/.{name}.tmp-{os.getpid()}"
    with filesystem.open_output_stream(tmp) as f:
        f.write(text.encode())
    filesystem.move(tmp, path)


@contextmanager
def local_copy(filesystem: pafs.FileSystem, path: str):
    """A local directory with the contents of ``path`` (the path itself when it is local)."""
    if is_local(filesystem):
        yield Path(path)
        return
    tmp = tempfile.mkdtemp(prefix="sweep-")
    try:
        pafs.copy_files(path, tmp, source_filesystem=filesystem, destination_filesystem=pafs.LocalFileSystem())
        yield Path(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
