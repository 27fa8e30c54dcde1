"""Paths on any filesystem pyarrow understands (local, NFS, ``s3://``), and block discovery.

Ray Tune persists each trial's checkpoints as ``<sweep>/<run>/<trial>/checkpoint_NNNNNN/``;
every one holds a ``block.json`` (see :mod:`sweep.checkpoint`). :func:`find_blocks` finds the
newest checkpoint of every trial of a sweep without reading any leaves.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import pyarrow.fs as pafs

from ._errors import StoreError

META_FILE = "block.json"


def resolve(path: str | os.PathLike, filesystem: pafs.FileSystem | None = None) -> tuple[pafs.FileSystem, str]:
    """``(filesystem, path inside it)``; local paths become absolute."""
    path = str(path)
    if filesystem is not None:
        return filesystem, path.removeprefix("s3://") if isinstance(filesystem, pafs.S3FileSystem) else path
    if "://" in path:
        try:
            return pafs.FileSystem.from_uri(path)
        except Exception as e:
            raise StoreError(f"storage {path!r}: cannot open ({e})") from None
    return pafs.LocalFileSystem(), str(Path(path).expanduser().resolve())


def is_local(filesystem: pafs.FileSystem) -> bool:
    return isinstance(filesystem, pafs.LocalFileSystem)


def read_text(filesystem: pafs.FileSystem, path: str) -> str:
    with filesystem.open_input_stream(path) as f:
        return f.read().decode()


def write_text_atomic(filesystem: pafs.FileSystem, path: str, text: str) -> None:
    """Write aside, then move into place (a rename on local disks)."""
    parent = path.rsplit("/", 1)[0]
    filesystem.create_dir(parent, recursive=True)
    tmp = f"{parent}/.{path.rsplit('/', 1)[1]}.tmp-{os.getpid()}"
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


class BlockRef(NamedTuple):
    """Where the newest checkpoint of one trial lies, and how far it got."""

    trial_key: str
    path: str
    epoch: int
    config_id: str
    seeds: tuple[int, ...]
    num_hparams: int
    hparams: tuple[dict[str, float], ...] = ()  # the block's hyperparameter sets, in block order
    spec: dict | None = None  # the block's structural spec (``SweepSpec.to_dict()``)


def find_blocks(sweep_dir: str, filesystem: pafs.FileSystem) -> dict[str, BlockRef]:
    """The newest block checkpoint of every trial under ``sweep_dir`` (``ensembles/`` excluded)."""
    try:
        infos = filesystem.get_file_info(pafs.FileSelector(sweep_dir, recursive=True, allow_not_found=True))
    except OSError as e:
        raise StoreError(f"{sweep_dir!r}: cannot list ({e})") from None
    found: dict[str, BlockRef] = {}
    for info in infos:
        relative = info.path[len(sweep_dir.rstrip("/")):]
        if info.base_name != META_FILE or relative.startswith("/ensembles/") or "/." in relative:
            continue
        try:
            meta = json.loads(read_text(filesystem, info.path))
        except (OSError, json.JSONDecodeError):
            continue  # a checkpoint being written or a torn upload: skip, an older one remains
        epochs = meta["history"]["epoch"]
        ref = BlockRef(
            meta["trial_id"], info.path.rsplit("/", 1)[0], epochs[-1] if epochs else 0,
            meta.get("config_id", ""), tuple(meta["seeds"]), len(meta["hparams"]),
            tuple(meta["hparams"]), meta.get("spec"),
        )
        if ref.trial_key not in found or ref.epoch > found[ref.trial_key].epoch:
            found[ref.trial_key] = ref
    return found
