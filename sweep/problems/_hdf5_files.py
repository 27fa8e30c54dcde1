"""Where an hdf5 problem's files are: :func:`dataset_files` of a local path or of a URI that
pyarrow opens (``s3://bucket/datasets/the_well/...``).

An ``s3://`` path is read through the sweep's filesystem when that is an ``S3FileSystem``
(``sweep.run(storage_filesystem=...)``, or the one ``storage="s3://..."`` gives): its
endpoint, credentials and region, wherever the files are read (the driver and every trial).
Otherwise pyarrow resolves the URI itself, with the usual ``AWS_*`` variables. A relative local
path is taken from the folder the sweep was started in (``origin``, which a sweep's trials get
with the problem: Tune runs each trial in a working directory of its own), else from the current
directory.

``path`` is one file, a folder of files, or a The Well dataset directory holding ``train/``,
``valid/`` (optional) and ``test/``, directly or under ``data/``. Files are those ending in
:data:`SUFFIXES`, in name order. A file on object storage is read through pyarrow's
random-access file, in blocks around the byte ranges HDF5 asks for (:data:`BLOCK_BYTES`).
"""

from __future__ import annotations

import collections
import dataclasses
import io
from typing import Any

import pyarrow.fs as pafs

from .._errors import SpecError
from .._fs import from_origin, looked_for

SUFFIXES = (".hdf5", ".h5", ".hdf", ".he5")
WELL_SPLITS = {"train": "train", "val": "valid", "test": "test"}  # split -> The Well's folder


@dataclasses.dataclass(frozen=True)
class Location:
    """A file or folder: ``path`` inside ``filesystem``, shown in messages as ``name`` (a local
    ``name`` relative to ``origin``, where that is given: :func:`locate`)."""

    filesystem: pafs.FileSystem
    path: str
    name: str
    origin: str | None = None

    def child(self, part: str) -> Location:
        path, name = f"{self.path.rstrip('/')}/{part}", f"{self.name.rstrip('/')}/{part}"
        return Location(self.filesystem, path, name, self.origin)

    @property
    def kind(self) -> pafs.FileType:
        return self.filesystem.get_file_info(self.path).type

    @property
    def local(self) -> bool:
        return isinstance(self.filesystem, pafs.LocalFileSystem)

    def opened(self) -> Any:
        """What ``h5py.File`` opens: the local path, or a random-access file of the remote object."""
        if self.local:
            return self.path
        return _Remote(self.filesystem.open_input_file(self.path), self.name)


# An object on object storage is read in aligned blocks of BLOCK_BYTES, the last BLOCKS_KEPT of them
# kept: HDF5 asks for many small pieces (superblock, object headers, B-tree nodes: 1560 reads, most
# of 4-544 bytes, in the 14 openings of the two small datasets of tests/test_hdf5.py's S3 test), each
# of which would be a round trip to the store. A read of a block or more (a slab of samples) goes to
# the store as it is.
BLOCK_BYTES = 1 << 20
BLOCKS_KEPT = 4


class _Remote(io.RawIOBase):
    """A pyarrow random-access file as the file object h5py reads, in blocks (above); its repr is
    the file's name, which h5py reports as ``File.filename``."""

    def __init__(self, native: Any, name: str):
        self._native, self._name = native, name
        self._size, self._position = native.size(), 0
        self._blocks: collections.OrderedDict[int, bytes] = collections.OrderedDict()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        out = memoryview(buffer).cast("B")
        wanted = min(len(out), max(0, self._size - self._position))
        if wanted >= BLOCK_BYTES:
            data = self._native.read_at(wanted, self._position)
            out[: len(data)] = data
            done = len(data)
        else:
            done = 0
            while done < wanted:
                index, offset = divmod(self._position + done, BLOCK_BYTES)
                block = self._block(index)
                n = min(wanted - done, len(block) - offset)
                out[done : done + n] = block[offset : offset + n]
                done += n
        self._position += done
        return done

    def _block(self, index: int) -> bytes:
        block = self._blocks.pop(index, None)
        if block is None:
            start = index * BLOCK_BYTES
            block = self._native.read_at(min(BLOCK_BYTES, self._size - start), start)
        self._blocks[index] = block  # the most recently used last
        if len(self._blocks) > BLOCKS_KEPT:
            self._blocks.popitem(last=False)
        return block

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        self._position = base + offset
        return self._position

    def tell(self) -> int:
        return self._position

    def close(self) -> None:
        self._native.close()
        self._blocks.clear()
        super().close()

    def __repr__(self) -> str:
        return self._name


def through(path: str, filesystem: pafs.FileSystem | None) -> bool:
    """Whether ``path`` is read through ``filesystem`` (the sweep's): an ``s3://`` URI where that is
    an ``S3FileSystem``."""
    return path.startswith("s3://") and isinstance(filesystem, pafs.S3FileSystem)


def locate(path: str, filesystem: pafs.FileSystem | None = None, origin: str | None = None) -> Location:
    """The :class:`Location` of a local path (made absolute: a relative one taken from ``origin``,
    the folder the sweep was started in, else from the current directory; :func:`sweep._fs.from_origin`)
    or a URI; an ``s3://`` URI inside ``filesystem`` when :func:`through` it (module docstring)."""
    if through(path, filesystem):
        assert filesystem is not None
        return Location(filesystem, path.removeprefix("s3://"), path)
    if "://" in path:
        try:
            filesystem, inner = pafs.FileSystem.from_uri(path)
        except Exception as e:  # pyarrow raises ArrowInvalid, OSError, ... for unknown or unreachable URIs
            raise SpecError(f"`problem.path`: {path!r} cannot be opened ({type(e).__name__}: {e})") from None
        return Location(filesystem, inner, path)
    return Location(pafs.LocalFileSystem(), from_origin(path, origin), path, origin)


def _folder(folder: Location, optional: bool = False) -> tuple[Location, ...]:
    infos = folder.filesystem.get_file_info(pafs.FileSelector(folder.path))
    names = sorted(i.base_name for i in infos if i.type == pafs.FileType.File and i.base_name.endswith(SUFFIXES))
    if not names:
        raise SpecError(
            f"`problem.path`: the folder {folder.name!r} holds no HDF5 file ({', '.join(SUFFIXES)}); "
            + (
                "remove it (it is optional) or put the validation files in it"
                if optional
                else "give a folder of data files"
            )
        )
    return tuple(folder.child(n) for n in names)


def dataset_files(
    path: str, filesystem: pafs.FileSystem | None = None, origin: str | None = None
) -> dict[str, tuple[Location, ...]]:
    """``{split: files}`` of a The Well dataset directory, or ``{"all": files}`` of a file or
    folder; ``filesystem``: the sweep's, ``origin``: where a relative local path is taken from (:func:`locate`)."""
    where = locate(path, filesystem, origin)
    kind = where.kind
    if kind == pafs.FileType.File:
        return {"all": (where,)}
    if kind != pafs.FileType.Directory:
        raise SpecError(f"`problem.path`: {path!r} does not exist{looked_for(path, origin)}")
    data = where.child("data")
    root = data if data.child("train").kind == pafs.FileType.Directory else where
    present = {s: root.child(f) for s, f in WELL_SPLITS.items() if root.child(f).kind == pafs.FileType.Directory}
    if "train" not in present:
        return {"all": _folder(where)}
    if "test" not in present:
        raise SpecError(
            f"`problem.path`: {root.name!r} has train/ but no test/; a The Well dataset directory holds "
            f"train/, valid/ (optional) and test/"
        )
    return {s: _folder(folder, optional=s == "val") for s, folder in present.items()}
