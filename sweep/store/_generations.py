"""Where a store lives, and how a new generation replaces the old one atomically.

The store at ``<dir>/ensembles`` is served from generation directories::

    <dir>/.ensembles/000007/     members.parquet, configs.parquet, <config_id>.eqx, manifest.json
    <dir>/.ensembles/CURRENT     "000007": the committed generation
    <dir>/ensembles  ->  .ensembles/000007      (symlink, local filesystems only)

A generation is written completely before ``CURRENT`` is replaced in one atomic step (a rename
on local disks, a single PUT on object storage), so a crash at any moment leaves the previous
store (or none) readable and never a mix. On local disks the ``ensembles`` symlink is then
swapped the same way, so ``ensembles/members.parquet`` is a plain path for DuckDB or Polars.
The generation before the current one is kept for readers that still have it open; older
ones (and generations a crash left unfinished) are deleted on the next commit. Run one
aggregator per store at a time (a newer generation being written is never deleted, but two
commits race for ``CURRENT``).
"""

from __future__ import annotations

import os

import pyarrow.fs as pafs

from .._errors import StoreError
from .._fs import exists, is_local, read_text, write_text_atomic
from ._schema import MANIFEST, POINTER, STORE_NAME


def _split(path: str) -> tuple[str, str]:
    parent, _, name = path.rstrip("/").rpartition("/")
    return parent, name


def generations_dir(store_path: str) -> str:
    """``<dir>/.<name>`` for the store path ``<dir>/<name>``."""
    parent, name = _split(store_path)
    return f"{parent}/.{name}"


def _current(fs: pafs.FileSystem, store_path: str) -> str | None:
    pointer = f"{generations_dir(store_path)}/{POINTER}"
    try:
        name = read_text(fs, pointer).strip()
    except (FileNotFoundError, OSError):
        return None
    if not name.isdigit():
        raise StoreError(f"{pointer!r}: got {name[:40]!r}; expected a generation number. Re-run `sweep aggregate`")
    return name


def committed_root(fs: pafs.FileSystem, path: str) -> str:
    """The generation directory holding the committed store of ``path`` (a sweep or a store directory)."""
    path = path.rstrip("/")
    for candidate in (path, f"{path}/{STORE_NAME}"):
        name = _current(fs, candidate)
        if name is not None:
            return f"{generations_dir(candidate)}/{name}"
        if exists(fs, f"{candidate}/{MANIFEST}"):
            return candidate
    raise StoreError(
        f"{path!r} is not a seed-sweep store: neither it nor {path + '/' + STORE_NAME!r} holds a "
        f"committed store ({MANIFEST}); run `sweep aggregate` on the sweep directory first"
    )


def check_target(fs: pafs.FileSystem, store_path: str) -> None:
    """Fail early when a commit could not replace ``store_path`` (a real directory in the way)."""
    if is_local(fs) and os.path.isdir(store_path) and not os.path.islink(store_path):
        raise StoreError(
            f"{store_path!r} is a directory, not a store link; move it away so that the aggregator "
            f"can link it to {generations_dir(store_path)!r}"
        )


def new_generation(fs: pafs.FileSystem, store_path: str) -> tuple[str, str]:
    """``(name, path)`` of a fresh, empty, uncommitted generation directory."""
    root = generations_dir(store_path)
    fs.create_dir(root, recursive=True)
    infos = fs.get_file_info(pafs.FileSelector(root))
    taken = [int(i.base_name) for i in infos if i.type == pafs.FileType.Directory and i.base_name.isdigit()]
    name = f"{max(taken, default=0) + 1:06d}"
    fs.create_dir(f"{root}/{name}")
    return name, f"{root}/{name}"


def commit(fs: pafs.FileSystem, store_path: str, name: str) -> None:
    """Make generation ``name`` the store at ``store_path``, then drop all but the previous one."""
    root = generations_dir(store_path)
    previous = _current(fs, store_path)
    write_text_atomic(fs, f"{root}/{POINTER}", name + "\n")
    if is_local(fs):
        _swap_link(store_path, f".{_split(store_path)[1]}/{name}")
    _collect(fs, root, below=name, keep={name, previous})


def _swap_link(link: str, target: str) -> None:
    tmp = f"{_split(link)[0]}/.{_split(link)[1]}.link-{os.getpid()}"
    if os.path.lexists(tmp):
        os.remove(tmp)
    os.symlink(target, tmp)
    os.replace(tmp, link)


def _collect(fs: pafs.FileSystem, root: str, below: str, keep: set) -> None:
    """Delete generations older than ``below`` except ``keep``, and temporary files."""
    for info in fs.get_file_info(pafs.FileSelector(root)):
        name = info.base_name
        if info.type == pafs.FileType.Directory and name.isdigit() and int(name) < int(below) and name not in keep:
            fs.delete_dir(info.path)
        elif info.type == pafs.FileType.File and name.startswith("."):
            fs.delete_file(info.path)
