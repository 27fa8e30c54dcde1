"""Paths on any filesystem pyarrow understands (local disks, NFS, ``s3://`` and friends), and the
one rule for names read from files: a plain relative name that stays inside its directory."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import tempfile
import unicodedata
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from ._errors import QueryError, StoreError
from ._layout import EXPORT_KIND, EXPORT_MANIFEST

if TYPE_CHECKING:
    from matplotlib.figure import Figure

ONE_COMPONENT = re.compile(r"[^/]+")  # a ``layout`` for :func:`confined`: a name, not a path
COMPONENT_RULE = (
    "one path component: not empty, '.' or '..', without '/', '\\\\', NUL or other control "
    "characters, at most 255 bytes"
)


def filesystem_path(
    path: str | os.PathLike[str], filesystem: pafs.FileSystem | None = None
) -> tuple[pafs.FileSystem, str]:
    """``(filesystem, path inside it)`` of a user's path or URI; local paths become absolute.

    Symbolic links in a local path are not resolved here: the store decides which links it follows.
    """
    path = str(path)
    if filesystem is not None:
        return filesystem, path.removeprefix("s3://") if isinstance(filesystem, pafs.S3FileSystem) else path
    if "://" in path:
        try:
            return pafs.FileSystem.from_uri(path)
        except Exception as e:  # pyarrow raises ArrowInvalid, OSError, ... for unknown or unreachable URIs
            raise StoreError(f"storage {path!r}: cannot open ({e})") from None
    return pafs.LocalFileSystem(), os.path.abspath(os.path.expanduser(path))


def from_origin(path: str | os.PathLike[str], origin: str | None = None) -> str:
    """The absolute local path of ``path`` (``~`` expanded): a relative one taken from ``origin``
    (a sweep's trials: the folder its driver was started in, wherever a trial runs), else from the
    current directory.

    Example:
        ``from_origin("cfd.hdf5", "/data")`` -> ``"/data/cfd.hdf5"``; ``from_origin("/x/cfd.hdf5", "/data")``
        -> ``"/x/cfd.hdf5"``
    """
    return os.path.normpath(os.path.join(origin or os.getcwd(), os.path.expanduser(os.fspath(path))))


def looked_for(path: str | os.PathLike[str], origin: str | None = None) -> str:
    """Where a relative local ``path`` that was not found was looked for (:func:`from_origin`), for
    its message; ``""`` for an absolute path or a URI.

    Example (in ``/tmp``):
        ``looked_for("cfd.hdf5")`` -> ``" (looked for '/tmp/cfd.hdf5': a relative path is taken from the
        current directory, '/tmp'; give an absolute path, or start from the directory it is relative
        to)"``; ``looked_for("cfd.hdf5", "/data")`` -> ``" (looked for '/data/cfd.hdf5': a relative path
        is taken from the folder the sweep was started in, '/data', in its trials too; ...)"``
    """
    text = os.fspath(path)
    if "://" in text or os.path.isabs(os.path.expanduser(text)):
        return ""
    where = from_origin(text, origin)
    if origin is None:
        return (
            f" (looked for {where!r}: a relative path is taken from the current directory, {os.getcwd()!r}; "
            f"give an absolute path, or start from the directory it is relative to)"
        )
    return (
        f" (looked for {where!r}: a relative path is taken from the folder the sweep was started in, {origin!r}, "
        f"in its trials too; give an absolute path (a new config id: run without resume), or make the file "
        f"readable at that path wherever trials run "
        f"(every node: a shared file system))"
    )


def is_local(filesystem: pafs.FileSystem) -> bool:
    return isinstance(filesystem, pafs.LocalFileSystem)


def local_path(filesystem: pafs.FileSystem, path: str) -> str | None:
    """The operating-system path of ``path`` when it lies on a local disk (directly or under a
    ``SubTreeFileSystem``), else None (object storage has no symbolic links and no locks)."""
    if isinstance(filesystem, pafs.LocalFileSystem):
        return path
    if isinstance(filesystem, pafs.SubTreeFileSystem):
        return local_path(filesystem.base_fs, f"{filesystem.base_path.rstrip('/')}/{path.lstrip('/')}")
    return None


def local_out(path: str | os.PathLike[str]) -> Path:
    """``path``, where a figure is to be written, as a local :class:`Path`; a URI is refused
    (``Path`` would make ``s3://b/x.png`` a local ``s3:/b/x.png``), and so is a path inside a
    store or an export (:func:`checked_folder_around`: its checks would find an unlisted file)."""
    if "://" in os.fspath(path):
        raise QueryError(f"`out`: got {os.fspath(path)!r}; figures are written to local files: give a local path")
    folder = checked_folder_around(Path(path))
    if folder is not None:
        raise QueryError(
            f"`out`: got {os.fspath(path)!r}, inside {str(folder)!r}, a seed-sweep store or export, whose checks "
            f"would find the figure an unlisted file; write it elsewhere (e.g. in the sweep directory)"
        )
    return Path(path)


def checked_folder_around(path: Path) -> Path | None:
    """The seed-sweep store or export that ``path`` (a file to be written) lies inside, links
    resolved, or None: a folder whose ``manifest.json`` (a small regular file) is an export's
    (its ``kind``) or a store's (a ``format`` and ``files`` of sizes and sha256s)."""
    try:
        parents = path.absolute().resolve().parents
    except (OSError, RuntimeError):  # (a link loop: the write says so)
        return None
    for folder in parents:
        manifest = _small_json(folder / EXPORT_MANIFEST)
        if not isinstance(manifest, dict):
            continue
        files = manifest.get("files")
        if manifest.get("kind") == EXPORT_KIND or (
            "format" in manifest
            and isinstance(files, dict)
            and all(isinstance(f, dict) and "sha256" in f for f in files.values())
        ):
            return folder
    return None


def _small_json(path: Path) -> Any:
    """The JSON of ``path`` if it is a regular file of at most :data:`TEXT_BYTES`, else None (a
    FIFO in its place would block the reader)."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_size > TEXT_BYTES:
            return None
        return json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        return None


def save_figure(fig: Figure, path: str | os.PathLike[str], dpi: int) -> Path:
    """Write ``fig`` to the local file ``path`` (its format from the suffix), creating its folder:
    every figure seed-sweep writes goes through here. A URI is refused (it would make a local
    folder named ``s3:``)."""
    path = local_out(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    return path


def exists(filesystem: pafs.FileSystem, path: str) -> bool:
    return filesystem.get_file_info(path).type != pafs.FileType.NotFound


TEXT_BYTES = 256 * 2**20  # the most :func:`read_text` reads: seed-sweep's JSON and pointer files are far smaller


def regular_size(filesystem: pafs.FileSystem, path: str) -> int | None:
    """The size of the local file ``path``, refused (:class:`StoreError`) unless it is a regular
    file: a FIFO or a device in its place could block a reader or never end (a link is followed:
    to ``/dev/zero``, refused). None on object storage, which holds neither, and where ``path``
    is missing (its reader says so)."""
    local = local_path(filesystem, path)
    if local is None:
        return None
    try:
        info = os.stat(local)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        raise StoreError(f"{path!r} is not a regular file; seed-sweep reads its files from regular files only")
    return info.st_size


def files_under(filesystem: pafs.FileSystem, root: str) -> dict[str, int]:
    """The paths of the regular files below ``root`` with their sizes in bytes (none if it is
    missing; a folder that cannot be read: OSError). On a local disk no link is followed, to a
    file or a folder: a sweep directory holds none, and one could lead in a circle or over the
    whole disk."""
    local = local_path(filesystem, root)
    if local is None:
        infos = filesystem.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
        return {i.path: int(i.size or 0) for i in infos if i.type == pafs.FileType.File}
    if not os.path.isdir(local):
        return {}
    found, folders = {}, [(local, root.rstrip("/"))]
    while folders:
        folder, shown = folders.pop()
        with os.scandir(folder) as entries:  # (a DirEntry knows a link without another system call)
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    folders.append((entry.path, f"{shown}/{entry.name}"))
                elif entry.is_file(follow_symlinks=False):
                    try:
                        found[f"{shown}/{entry.name}"] = entry.stat(follow_symlinks=False).st_size
                    except FileNotFoundError:
                        pass  # deleted since the folder was read (Tune drops old checkpoints as it goes)
    return found


def read_text(filesystem: pafs.FileSystem, path: str) -> str:
    """The text of ``path``, a regular file (:func:`regular_size`) of at most :data:`TEXT_BYTES`."""
    size = regular_size(filesystem, path)
    if size is not None and size > TEXT_BYTES:
        raise StoreError(f"{path!r} holds {size} bytes; no file seed-sweep reads as text is larger than {TEXT_BYTES}")
    with filesystem.open_input_stream(path) as f:
        return f.read().decode()


def write_atomic(filesystem: pafs.FileSystem, path: str, data: bytes) -> None:
    """Write aside, then move into place (a rename on local disks, after the data and then the
    rename are flushed to the disk: a power loss leaves the old file or the new one, never an
    empty one)."""
    parent, _, name = path.rpartition("/")
    filesystem.create_dir(parent, recursive=True)
    tmp = f"{parent}/.{name}.tmp-{os.getpid()}"
    local = local_path(filesystem, tmp)
    if local is None:
        with filesystem.open_output_stream(tmp) as f:
            f.write(data)
        filesystem.move(tmp, path)
        return
    write_flushed(local, data)
    os.replace(local, os.path.join(os.path.dirname(local), name))
    flush_dir(os.path.dirname(local))


def write_flushed(local: str | os.PathLike[str], data: bytes) -> None:
    """``data`` written to the local file ``local`` and flushed to the disk."""
    with open(local, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def synced(local_dir: str) -> None:
    """Flush every file below ``local_dir`` and every folder (its entries), itself last, to the disk."""
    for entry in os.scandir(local_dir):
        if entry.is_dir(follow_symlinks=False):
            synced(entry.path)
        elif entry.is_file(follow_symlinks=False):
            _flushed(entry.path)
    flush_dir(local_dir)


def flush_dir(local_dir: str | os.PathLike[str]) -> None:
    """Flush a local directory's entries (files created, renamed or removed in it) to the disk."""
    _flushed(local_dir, os.O_DIRECTORY)


def _flushed(local: str | os.PathLike[str], flags: int = 0) -> None:
    fd = os.open(local, os.O_RDONLY | flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_text_atomic(filesystem: pafs.FileSystem, path: str, text: str) -> None:
    write_atomic(filesystem, path, text.encode())


def create_dir_exclusive(filesystem: pafs.FileSystem, path: str) -> bool:
    """Create the directory ``path``; False if it exists already. On local disks this is one atomic
    ``mkdir``, so of two processes creating the same name exactly one succeeds; object storage has
    no atomic create, there it is a check, then a create."""
    local = local_path(filesystem, path)
    if local is not None:
        try:
            os.mkdir(local)
        except FileExistsError:
            return False
        return True
    if exists(filesystem, path):
        return False
    filesystem.create_dir(path, recursive=False)
    return True


def os_error(error: BaseException | None) -> OSError | None:
    """The ``OSError`` (a full disk, a permission) behind ``error``, following causes and contexts
    (Equinox and pyarrow wrap the errors of the files they write)."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, OSError):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


# -- names read from files --------------------------------------------------------------------------
def name_problem(name: Any) -> str | None:
    """Why ``name`` is not a safe single path component (see :data:`COMPONENT_RULE`), or None."""
    if not isinstance(name, str):
        return f"not a string but {type(name).__name__}"
    if name in ("", ".", ".."):
        return "empty" if not name else f"{name!r} is not a name"
    if "/" in name or "\\" in name:
        return "it contains a path separator"
    if any(unicodedata.category(c) == "Cc" for c in name):
        return "it contains a control character"
    try:
        size = len(name.encode())
    except UnicodeEncodeError:
        return "it is not valid Unicode text"
    return "it is longer than 255 bytes" if size > 255 else None


def confined(relpath: Any, where: str, layout: re.Pattern | None = None, allowed: str = "") -> str:
    """``relpath`` if it is a plain relative name inside its directory (components as in
    :data:`COMPONENT_RULE`, no absolute path) that fits ``layout``; else :class:`StoreError`
    naming ``where`` (the file and field it was read from) and the name."""
    if isinstance(relpath, str) and relpath.startswith("/"):
        problem = "it is an absolute path"
    elif isinstance(relpath, str):
        problem = next(filter(None, map(name_problem, relpath.split("/"))), None)
        if problem is None and layout is not None and not layout.fullmatch(relpath):
            problem = f"it is not a name of the store's layout ({allowed})" if allowed else "it does not fit the layout"
    else:
        problem = name_problem(relpath)
    if problem is not None:
        raise StoreError(
            f"{where}: names {relpath!r}, which is not a plain name inside the store ({problem}); "
            f"the file was altered or is not seed-sweep's"
        )
    return relpath


def refuse_links(filesystem: pafs.FileSystem, root: str, relpath: str = "") -> None:
    """:class:`StoreError` if ``root`` or a component of ``relpath`` below it is a symbolic link
    (local disks; a store never contains links, and one inside could point anywhere)."""
    path = local_path(filesystem, root)
    if path is None:
        return
    for part in ["", *filter(None, relpath.split("/"))]:
        path = os.path.join(path, part) if part else path
        if os.path.islink(path):
            raise StoreError(
                f"{path!r} is a symbolic link (to {os.readlink(path)!r}); a store holds no links "
                f"and seed-sweep does not follow them. Re-run `sweep aggregate`"
            )


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
