"""HDF5 files opened as input, not as programs: :func:`open_hdf5` and :func:`checked_dataset`.

A data file may name other files (external links, virtual datasets whose sources are other
files, external raw storage) and filters that HDF5 loads as shared libraries from
``HDF5_PLUGIN_PATH``. None of these is followed here: every dataset seed-sweep reads goes
through :func:`open_hdf5` and :func:`checked_dataset`, which refuse, naming the file and the dataset path,

- a file with a link to another file (``h5py.ExternalLink``) anywhere in it, wherever it points
  (:func:`open_hdf5` lists the links without following any);
- a virtual dataset with a source in another file (sources in the same file are read);
- a dataset whose raw data lie in external files (``Dataset.external``);
- a filter other than HDF5's built-in ones (deflate, shuffle, Fletcher-32, SZIP, N-bit,
  scale-offset) and h5py's own LZF, so that no filter plugin is ever loaded.

Soft links inside the file are followed.
"""

from __future__ import annotations

from typing import Any

import pyarrow.fs as pafs

from .._errors import SpecError
from .._fs import looked_for
from ._hdf5_files import Location

# HDF5's built-in filters (H5Zpublic.h) and LZF, which h5py itself registers: none is a plugin
BUILT_IN_FILTERS = {1: "deflate", 2: "shuffle", 3: "fletcher32", 4: "szip", 5: "nbit", 6: "scaleoffset", 32000: "lzf"}


def h5py_module():
    """The ``h5py`` module, or a :class:`SpecError` saying how to install it."""
    try:
        import h5py
    except ImportError:
        raise SpecError(
            '`problem.name`: "hdf5" needs the optional package h5py; install it with `pip install seed-sweep[hdf5]`'
        ) from None
    return h5py


def open_hdf5(location: Location) -> Any:
    """``h5py.File`` of ``location`` (read-only) after the link check of the module docstring, or a
    :class:`SpecError` naming ``problem.path`` for a missing or non-HDF5 file or an external link."""
    h5py = h5py_module()
    if location.kind != pafs.FileType.File:
        missing = location.local and location.kind == pafs.FileType.NotFound
        shown = looked_for(location.name, location.origin) if missing else ""
        raise SpecError(f"`problem.path`: {location.name!r} does not exist or is not a file{shown}")
    source = location.opened()
    if location.local and not h5py.is_hdf5(source):
        raise SpecError(f"`problem.path`: {location.name!r} is not an HDF5 file (no HDF5 signature)")
    try:
        file = h5py.File(source, "r")
    except OSError as e:
        locked = "unable to lock file" in str(e)
        raise SpecError(
            f"`problem.path`: {location.name!r} cannot be opened as HDF5 ({e})"
            + (
                "; another process holds it open for writing: close it there, or read it anyway with the "
                "environment variable HDF5_USE_FILE_LOCKING=FALSE"
                if locked
                else ""
            )
        ) from None
    names: list[str] = []
    try:
        file.visit_links(names.append)  # lists every link, follows none of them
        for name in names:
            _no_external_link(file, name)
    except (RuntimeError, OSError, KeyError) as e:  # HDF5 cannot read the file's structure
        file.close()
        raise SpecError(
            f"`problem.path`: {location.name!r} is damaged ({type(e).__name__}: {e}): HDF5 cannot read its "
            f"structure; copy the file again"
        ) from None
    except SpecError:
        file.close()
        raise
    return file


def _no_external_link(file: Any, name: str) -> None:
    link = file.get(name, getlink=True)
    if isinstance(link, h5py_module().ExternalLink):
        raise SpecError(
            f"`problem.path`: {file.filename!r}:/{name} is an external link to {link.filename!r}:{link.path!r}; "
            f"seed-sweep reads only data inside the dataset's own files (copy the data into the file)"
        )


def checked_dataset(file: Any, path: str) -> Any:
    """The dataset at ``path`` of the open ``file``, after every check of the module docstring.

    Raises:
        SpecError: ``path`` is missing or not a dataset, the dataset holds no real numbers
            (complex numbers, text, compound records), or it reads other files or needs a filter
            plugin. The message names the file and the path.
    """
    h5py = h5py_module()
    where = f"{file.filename!r}:/{path.lstrip('/')}"
    dataset = file.get(path)  # safe: open_hdf5 refused files with external links
    if not isinstance(dataset, h5py.Dataset):
        kind = "does not exist" if dataset is None else f"is a {type(dataset).__name__}, not a dataset"
        raise SpecError(f"`problem.path`: {where} {kind}")
    if dataset.is_virtual:
        outside = sorted({s.file_name for s in dataset.virtual_sources() if s.file_name != "."})
        if outside:
            raise SpecError(
                f"`problem.path`: {where} is a virtual dataset reading other file(s) {outside}; seed-sweep reads "
                f"only data inside the dataset's own files"
            )
    if dataset.external:
        names = sorted({str(e[0]) for e in dataset.external})
        raise SpecError(
            f"`problem.path`: {where} keeps its data in external file(s) {names}; seed-sweep reads only data "
            f"inside the dataset's own files"
        )
    if dataset.dtype.kind not in "biuf":  # (bool, integers, floats: read as float32)
        raise SpecError(
            f"`problem.path`: {where} holds {dataset.dtype} values; seed-sweep reads real numbers (floats, integers "
            f"or booleans, as float32){'; keep the real and imaginary parts as two fields' * (dataset.dtype.kind == 'c')}"
        )
    plist = dataset.id.get_create_plist()
    for i in range(plist.get_nfilters()):
        code = plist.get_filter(i)[0]
        if code not in BUILT_IN_FILTERS:
            raise SpecError(
                f"`problem.path`: {where} is compressed with HDF5 filter {code}, a plugin; seed-sweep loads no "
                f"filter plugins (allowed: {', '.join(BUILT_IN_FILTERS.values())}); rewrite it with one of those"
            )
    return dataset
