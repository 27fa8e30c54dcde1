"""Where a store lives, and how a new generation replaces the old one atomically.

The store at ``<dir>/ensembles`` is served from generation directories::

    <dir>/.ensembles/000007/     members.parquet, configs.parquet, <config_id>.eqx, manifest.json
    <dir>/.ensembles/CURRENT     "000007": the committed generation
    <dir>/.ensembles/.lock       held by the aggregation that is writing (local disks)
    <dir>/ensembles  ->  .ensembles/000007      (symlink, local filesystems only)

A generation is written completely (and, on local disks, flushed to the disk) before ``CURRENT``
is replaced in one atomic step (a rename on local disks, flushed too; a single PUT on object
storage), so a crash at any moment, a power loss included, leaves the previous store (or none)
readable and never a mix. A ``CURRENT`` that cannot be read anyway (a disk that lost a write) is
replaced by the next aggregation. On local disks the ``ensembles`` symlink is then
swapped the same way, so ``ensembles/members.parquet`` is a plain path for DuckDB or Polars.
The generation before the current one is kept for readers that still have it open; older
ones (and generations a crash left unfinished) are deleted on the next commit.

Concurrent aggregations: one writes at a time. On local disks (NFS included) an aggregation holds
``.lock`` (``flock``) from creating its generation until it has committed and collected; on
object storage, which has no locks, ``.lock`` is a lease object its holder keeps renewing,
taken and taken over by S3's conditional writes (:mod:`._lease`). A second aggregation waits,
saying so, and then commits after the first: both succeed, with distinct generations. The
holder of a lease checks it is still its own just before it writes ``CURRENT``. A generation's
directory is also created exclusively on local disks (an atomic ``mkdir`` that fails if the
number is taken, then the next number), for filesystems without working locks.

Reading follows no link it did not make: ``ensembles`` is followed only to a generation of the
same directory, and the generations directory and the generation itself must be real directories.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pyarrow.fs as pafs

from .._errors import NoStoreError, StoreError, warn
from .._fs import (
    create_dir_exclusive,
    exists,
    local_path,
    read_text,
    refuse_links,
    synced,
    write_text_atomic,
)
from .._layout import GENERATION, LOCK, MANIFEST, PLAN, POINTER, STORE_NAME
from .._words import counted
from ._files import AGGREGATE_AGAIN
from ._lease import writer_lease


def _split(path: str) -> tuple[str, str]:
    parent, _, name = path.rstrip("/").rpartition("/")
    return parent, name


def generations_dir(store_path: str) -> str:
    """``<dir>/.<name>`` for the store path ``<dir>/<name>``."""
    parent, name = _split(store_path)
    return f"{parent}/.{name}"


def current(fs: pafs.FileSystem, store_path: str) -> str | None:
    pointer = f"{generations_dir(store_path)}/{POINTER}"
    refuse_links(fs, generations_dir(store_path), POINTER)
    try:
        name = read_text(fs, pointer).strip()
    except (FileNotFoundError, OSError, UnicodeDecodeError):
        return None
    if not GENERATION.fullmatch(name):
        raise StoreError(f"{pointer!r}: got {name[:40]!r}; expected a generation number. {AGGREGATE_AGAIN}")
    return name


def _generation(fs: pafs.FileSystem, store_path: str, name: str) -> str:
    """The directory of generation ``name``, refused if it or the generations directory is a link."""
    root = generations_dir(store_path)
    refuse_links(fs, root, name)
    return f"{root}/{name}"


def _linked_generation(fs: pafs.FileSystem, store_path: str) -> str | None:
    """The generation a local ``store_path`` symlink names, or None if it is no link.

    A store link is followed only to ``.<name>/<generation>`` next to it, as :func:`commit`
    makes it; any other link (to another sweep, outside the directory) is refused.
    """
    local = local_path(fs, store_path)
    if local is None or not os.path.islink(local):
        return None
    target = os.readlink(local)
    prefix = f".{_split(store_path)[1]}/"
    name = target.removeprefix(prefix)
    if not target.startswith(prefix) or not GENERATION.fullmatch(name):
        raise StoreError(
            f"{store_path!r} is a symbolic link to {target!r}; a store link may only name a generation of its own "
            f"directory ({prefix}NNNNNN), so seed-sweep does not follow it. Open the store it points to directly, "
            f"or: {AGGREGATE_AGAIN}"
        )
    return _generation(fs, store_path, name)


def committed_root(fs: pafs.FileSystem, path: str) -> str:
    """The generation directory holding the committed store of ``path`` (a sweep or a store directory).

    ``CURRENT`` decides; without one, a store link is followed only as :func:`_linked_generation`
    allows, and a plain directory holding a manifest is a store itself (a copied store).
    """
    path = path.rstrip("/")
    a_sweep = exists(fs, f"{path}/{PLAN}")  # its store is inside it: no folder beside it is read
    for i, candidate in enumerate((path, f"{path}/{STORE_NAME}")):
        if a_sweep and i == 0:
            continue
        name = current(fs, candidate)
        if name is not None:
            return _generation(fs, candidate, name)
        is_store_path = i == 1 or _split(candidate)[1] == STORE_NAME or exists(fs, generations_dir(candidate))
        linked = _linked_generation(fs, candidate) if is_store_path else None
        if linked is not None:
            return linked
        if exists(fs, f"{candidate}/{MANIFEST}"):
            return candidate
    local = local_path(fs, path)
    if not exists(fs, path) and not (local is not None and os.path.islink(local)):  # a dangling link exists
        raise StoreError(
            f"{path!r} does not exist; give the directory of a sweep (made by `sweep run`) or of its "
            f"{STORE_NAME!r} store"
        )
    if fs.get_file_info(path).type == pafs.FileType.File:
        raise StoreError(
            f"{path!r} is a file; give the directory of a sweep (made by `sweep run`) or of its {STORE_NAME!r} store"
        )
    parent, name = _split(path)
    a_sweep = a_sweep or (name == STORE_NAME and exists(fs, f"{parent}/{PLAN}"))
    inside = [] if a_sweep else sweeps_inside(fs, path)  # (a sweep not aggregated yet)
    if inside:
        raise storage_folder(fs, path, inside, "a store")
    if not a_sweep:  # no sweep either: a data folder, a typo
        raise NoStoreError(
            f"{path!r} is not a seed-sweep store nor a sweep directory (it holds no {STORE_NAME!r} store and no "
            f"{PLAN}); give the directory of a sweep (made by `sweep run`) or of its {STORE_NAME!r} store"
        )
    raise StoreError(
        f"{path!r} is not a seed-sweep store: neither it nor {path + '/' + STORE_NAME!r} holds a "
        f"committed store ({MANIFEST}); run `sweep aggregate` on the sweep directory first"
    )


def shown(fs: pafs.FileSystem, path: str) -> str:
    """``path`` of ``fs`` as users write it: ``s3://bucket/...`` on object storage."""
    return f"s3://{path}" if isinstance(fs, pafs.S3FileSystem) else path


def storage_folder(fs: pafs.FileSystem, path: str, inside: list[str], instead: str) -> StoreError:
    """The error for a storage folder (``--storage``) given where ``instead`` was wanted: its sweeps named."""
    where = shown(fs, path)
    listed = ", ".join(repr(f"{where}/{name}") for name in inside[:5]) + (", ..." if len(inside) > 5 else "")
    return StoreError(
        f"{where!r} is a storage folder holding {counted(len(inside), 'sweep')}, not {instead}: give one of them "
        f"({listed})"
    )


def sweeps_inside(fs: pafs.FileSystem, path: str) -> list[str]:
    """The names of the sweep directories (those holding ``plan.json``) directly inside ``path`` (a
    storage folder, ``--storage``), by name."""
    infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    dirs = sorted(i.base_name for i in infos if i.type == pafs.FileType.Directory and not i.base_name.startswith("."))
    return [name for name in dirs if exists(fs, f"{path}/{name}/{PLAN}")]


def check_target(fs: pafs.FileSystem, store_path: str) -> None:
    """Fail early when a commit could not replace ``store_path`` (a real directory in the way)."""
    local = local_path(fs, store_path)
    if local is not None and os.path.isdir(local) and not os.path.islink(local):
        raise StoreError(
            f"{store_path!r} is a directory, not a store link; move it away so that the aggregator "
            f"can link it to {generations_dir(store_path)!r}"
        )


@contextmanager
def writer_lock(fs: pafs.FileSystem, store_path: str) -> Iterator[Callable[[], None]]:
    """Hold the store's writer lock (``.lock`` in its generations directory): a second aggregation
    waits here, saying so, until the first has committed. Yields ``check()``, to call just before
    the commit: it raises :class:`StoreError` if the lock is no longer held (a lease on object
    storage taken over after its holder stalled for longer than it lasts)."""
    root = generations_dir(store_path)
    fs.create_dir(root, recursive=True)
    refuse_links(fs, root)
    local = local_path(fs, f"{root}/{LOCK}")
    if local is None:
        with writer_lease(fs, f"{root}/{LOCK}", shown(fs, store_path)) as lease:
            yield lease.check
        return
    fd = os.open(local, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            warn(f"another aggregation is writing {store_path!r}; waiting for it to finish")
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as e:  # a filesystem without locks (some NFS mounts): creation stays exclusive
            warn(f"cannot lock {local!r} ({e}); run one aggregation of this store at a time")
        yield lambda: None
    finally:
        os.close(fd)  # releases the lock


def new_generation(fs: pafs.FileSystem, store_path: str) -> tuple[str, str]:
    """``(name, path)`` of a fresh, empty, uncommitted generation directory, created exclusively."""
    root = generations_dir(store_path)
    infos = fs.get_file_info(pafs.FileSelector(root, allow_not_found=True))
    number = max((int(i.base_name) for i in infos if GENERATION.fullmatch(i.base_name)), default=0) + 1
    while not create_dir_exclusive(fs, f"{root}/{number:06d}"):  # taken meanwhile by another writer
        number += 1
    return f"{number:06d}", f"{root}/{number:06d}"


def commit(fs: pafs.FileSystem, store_path: str, name: str) -> None:
    """Make generation ``name`` the store at ``store_path``, then drop all but the previous one."""
    root = generations_dir(store_path)
    try:
        previous = current(fs, store_path)
    except StoreError:  # an unreadable pointer: this commit replaces it; keep what the link names
        linked = _linked_generation(fs, store_path)
        previous = None if linked is None else _split(linked)[1]
    local = local_path(fs, f"{root}/{name}")
    if local is not None:
        synced(local)  # the generation's files are on the disk before the pointer names them
    write_text_atomic(fs, f"{root}/{POINTER}", name + "\n")
    link = local_path(fs, store_path)
    if link is not None:  # (a local disk, also under a SubTreeFileSystem)
        _swap_link(link, f".{_split(store_path)[1]}/{name}")
    _collect(fs, root, below=name, keep={name, previous})


def _swap_link(link: str, target: str) -> None:
    tmp = f"{_split(link)[0]}/.{_split(link)[1]}.link-{os.getpid()}"
    if os.path.lexists(tmp):
        os.remove(tmp)
    os.symlink(target, tmp)
    os.replace(tmp, link)


def _collect(fs: pafs.FileSystem, root: str, below: str, keep: set) -> None:
    """Delete generations older than ``below`` except ``keep``, and temporary files (never the lock)."""
    for info in fs.get_file_info(pafs.FileSelector(root)):
        name = info.base_name
        if (
            info.type == pafs.FileType.Directory
            and GENERATION.fullmatch(name)
            and int(name) < int(below)
            and name not in keep
        ):
            fs.delete_dir(info.path)
        elif info.type == pafs.FileType.File and name.startswith(".") and name != LOCK:
            fs.delete_file(info.path)
