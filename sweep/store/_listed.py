"""Open a file the manifest lists, verified: the one way the reader (:mod:`._reader`) and the
verifier (:mod:`._verify`) reach a store's files.

A file's name must be one of the store's layout (:data:`~._schema.STORE_FILES`), reached with no
link on the way, and listed in the manifest, whose record (size, sha256) every byte read is
checked against (:mod:`._files`).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import numpy as np
import pyarrow.fs as pafs
from jaxtyping import PyTree

from .._errors import StoreError
from .._fs import confined, refuse_links
from .._import_path import is_import_path
from .._layout import MANIFEST, STORE_FILE, STORE_FILES
from ._configs import ConfigInfo
from ._files import read_leaves

__all__ = ["locate", "read_shard"]


def locate(fs: pafs.FileSystem, root: str, manifest: dict[str, Any], relpath: str) -> tuple[str, dict[str, Any]]:
    """``(path, manifest record)`` of a store file: a layout name, no link on the way, listed."""
    confined(relpath, f"{root + '/' + MANIFEST!r}", STORE_FILE, STORE_FILES)
    refuse_links(fs, root, relpath)
    try:
        record = manifest["files"][relpath]
    except KeyError:
        raise StoreError(f"{root + '/' + MANIFEST!r}: lists no file {relpath!r}; the store is incomplete") from None
    return f"{root}/{relpath}", record


def read_shard(
    fs: pafs.FileSystem, root: str, manifest: dict[str, Any], info: ConfigInfo, index: int, template: PyTree
) -> PyTree:
    """Leaves file ``index`` of a configuration, in one streamed pass that checks its checksum and
    every leaf's shape against ``template`` (one member's parameters)."""
    count = min(info.members_per_shard, info.num_members - index * info.members_per_shard)
    like = jax.tree_util.tree_map(lambda s: jax.ShapeDtypeStruct((count, *s.shape), s.dtype), template)
    name = info.spec.model.name
    what = f"config {info.config_id} ({count} members of {name})"
    path, record = locate(fs, root, manifest, info.files[index])
    # a factory's code may have changed since: the store may be as written, and its code not
    changed = (
        f"; or {name} builds other parameters than when these members were trained (its code changed since?): "
        f"load them where it builds what it built then"
        if is_import_path(name)
        else ""
    )
    needed = sum(math.prod(s.shape) * np.dtype(s.dtype).itemsize for s in jax.tree_util.tree_leaves(like))
    if needed > record["bytes"]:  # refused before any memory is set aside for it
        raise StoreError(
            f"{path!r}: {record['bytes']} bytes, but {what} take {needed}; the leaves file does not match its "
            f"config{changed}"
        )
    try:
        return read_leaves(fs, path, like, record, what)
    except StoreError as e:
        if changed and "does not match" in str(e):
            raise StoreError(f"{e}{changed}") from None
        raise
