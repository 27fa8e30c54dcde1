"""Verification of a whole store (:meth:`Store.verify`, ``sweep verify``): every file against the
manifest, every leaves file against its config's model, no file or link the manifest does not
list, and the tables against each other; every problem found is listed."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from typing import Any, Protocol

import pyarrow.fs as pafs
from jaxtyping import PyTree

from .._errors import StoreError
from .._fs import local_path
from .._import_path import is_import_path
from .._layout import MANIFEST
from ._configs import ConfigInfo
from ._files import check_digest, open_checked
from ._listed import locate, read_shard


class Verifiable(Protocol):
    """What :func:`verify` reads of a store (a :class:`~._reader.Store`): its files and their
    manifest, its configurations, a configuration's parameter template, its index."""

    fs: pafs.FileSystem
    root: str
    manifest: dict[str, Any]
    configs: dict[str, ConfigInfo]

    def template(self, config_id: str) -> tuple[PyTree, PyTree]: ...

    def index(self) -> Any: ...


def verify(store: Verifiable) -> None:
    """Check everything: every file's size and sha256 against the manifest, every leaves file
    against its config's model (built-in architectures; a model factory is code the store names,
    so its leaves are checked by checksum alone), no file or link the manifest does not list,
    and the tables against each other. Raises one :class:`StoreError` whose ``problems`` lists
    every problem found (its message is the first)."""
    leaves = {
        f: (info, i)
        for info in store.configs.values()
        if not is_import_path(info.spec.model.name)
        for i, f in enumerate(info.files)
    }
    problems = []
    for relpath in store.manifest["files"]:
        try:
            if relpath in leaves:
                info, index = leaves[relpath]  # one streamed pass: checksum and every leaf's shape
                read_shard(store.fs, store.root, store.manifest, info, index, store.template(info.config_id)[0])
            else:
                path, record = locate(store.fs, store.root, store.manifest, relpath)
                _check_whole(store.fs, path, record)
        except StoreError as e:
            problems.append(str(e))
    problems += unlisted(store.fs, store.root, [MANIFEST, *store.manifest["files"]])
    if not problems:
        try:
            rows = store.index()
        except StoreError as e:
            problems.append(str(e))
        else:
            counts = {
                "num_members": (rows.num_rows, "members.parquet holds"),
                "num_configs": (len(store.configs), "configs.parquet holds"),
            }
            problems += [
                f"{store.root}/{MANIFEST}: `{field}` is {store.manifest.get(field)!r}, but {holds} {real}; the store was altered"
                for field, (real, holds) in counts.items()
                if store.manifest.get(field) != real
            ]
    if problems:
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        raise StoreError(problems[0] + more, problems)


def unlisted(fs: pafs.FileSystem, root: str, listed: Iterable[str], what: str = "store") -> list[str]:
    """Files under ``root`` that are not ``listed`` (paths relative to ``root``, the manifest
    among them), and, on local disks, links not on the way to a listed file (those the file's
    own check reports): one line each, naming the file and the ``what`` (a store, an export).
    :meth:`Store.verify` and :func:`sweep.ensemble.verify_export` both call it."""
    local = local_path(fs, root)
    listed = set(listed)
    article = "an" if what[:1] in "aeiou" else "a"
    found = []
    if local is not None:
        for directory, dirs, files in os.walk(local):
            for name in dirs + files:
                path = os.path.join(directory, name)
                rel = os.path.relpath(path, local).replace(os.sep, "/")
                if os.path.islink(path) and not any(f == rel or f.startswith(f"{rel}/") for f in listed):
                    found.append(
                        f"{path!r} is a symbolic link (to {os.readlink(path)!r}); {article} {what} holds no links"
                    )
                elif name in files and not os.path.islink(path) and rel not in listed:
                    found.append(
                        f"{path!r} is not listed in the manifest; the {what} was altered (a file added: move it out)"
                    )
        return found
    for info in fs.get_file_info(pafs.FileSelector(root, recursive=True)):
        if info.type == pafs.FileType.File and info.path[len(root) + 1 :] not in listed:
            found.append(
                f"{info.path!r} is not listed in the manifest; the {what} was altered (a file added: move it out)"
            )
    return found


def check_listed(store: Verifiable, relpaths: Iterable[str]) -> None:
    """Stream each listed file of ``store`` through sha256 against its record (sizes and digests
    only: no model is built), or the :class:`StoreError` of the first that differs."""
    for relpath in relpaths:
        _check_whole(store.fs, *locate(store.fs, store.root, store.manifest, relpath))


def _check_whole(fs: pafs.FileSystem, path: str, record: dict[str, Any]) -> None:
    """Stream a file through sha256 against its record (:meth:`Store.verify`)."""
    with open_checked(fs, path, record) as raw:
        sha = hashlib.sha256()
        while data := raw.read(1 << 22):
            sha.update(data)
    check_digest(path, record, sha.hexdigest())
