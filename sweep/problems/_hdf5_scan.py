"""The driver's pass over an ``"hdf5"`` problem's files: :func:`scan_files` and :func:`hdf5_statistics`.

One streamed pass, one trajectory in memory at a time whatever the files' size: the
normalisation statistics of the training split (:mod:`sweep.problems._normalize`), and every
selected state of every split (training, validation, test) checked to be finite, so that NaN
or infinity anywhere is named before any trial starts, with the file, the dataset, the
trajectory and the time index. What the pass found is a :class:`Scan`, which a sweep keeps in
its directory (``data_scans.json``) with the files' sizes and modification times: a later run of
the sweep (a resume, more seeds) on unchanged files takes the statistics from it, reading no
array again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow.fs as pafs

from ._dataset import SPLITS, Dataset
from ._hdf5 import DEFAULTS, read_picks, resolved, split_trajectories
from ._hdf5_files import Location
from ._hdf5_layouts import Channel, FileLayout
from ._normalize import Normalization, channel_statistics

Stamp = tuple[str, int, "int | None"]  # a file's name, size in bytes and modification time (ns)


@dataclasses.dataclass(frozen=True)
class Scan:
    """What the driver's pass over an ``"hdf5"`` problem's files found (module docstring).

    Attributes:
        files: Every file read, as ``(name, size in bytes, modification time in ns or None)``
            when it was read: the pass holds for these files only.
        normalization: The training split's statistics (None for ``normalize="none"``).
        digest: The sha256 of every selected state read, in order (None in a scan of an older
            seed-sweep): what tells a file rewritten in place apart from a copy.
    """

    files: tuple[Stamp, ...]
    normalization: Normalization | None
    digest: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (the float64 statistics exactly, as JSON numbers round-trip them)."""
        norm = self.normalization
        return {
            "files": [list(stamp) for stamp in self.files],
            "digest": self.digest,
            "normalization": None
            if norm is None
            else {
                "method": norm.method,
                "channels": list(norm.channels),
                "shift": [float(v) for v in norm.shift],
                "scale": [float(v) for v in norm.scale],
            },
        }

    def change_from(self, before: Scan) -> str | None:
        """What differs between the data ``before`` was made of and this scan's: other files,
        other sizes, other statistics or other states, in words; None where only modification
        times differ (a copy of the same files)."""
        names = [(name, size) for name, size, _ in self.files]
        was = [(name, size) for name, size, _ in before.files]
        if [n for n, _ in names] != [n for n, _ in was]:
            return f"files {[n for n, _ in was]} then, {[n for n, _ in names]} now"
        for (name, size), (_, size_then) in zip(names, was, strict=True):
            if size != size_then:
                return f"{name!r}: {size_then} bytes then, {size} now"
        old, new = before.normalization, self.normalization
        if (old is None) != (new is None):
            return "statistics then and none now" if new is None else "no statistics then, statistics now"
        if old is not None and new is not None:
            if (old.method, old.channels) != (new.method, new.channels):
                return f"{old.method} of {list(old.channels)} then, {new.method} of {list(new.channels)} now"
            for channel, *pair in zip(new.channels, old.shift, old.scale, new.shift, new.scale, strict=True):
                if pair[:2] != pair[2:]:
                    return (
                        f"the training split's statistics of {channel!r}: shift {pair[0]:.6g}, scale {pair[1]:.6g} "
                        f"then; shift {pair[2]:.6g}, scale {pair[3]:.6g} now"
                    )
        if self.digest and before.digest and self.digest != before.digest:
            return "other data in files of the same sizes"
        return None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scan:
        """The :class:`Scan` of :meth:`to_dict`'s output (``KeyError``, ``TypeError`` or
        ``ValueError`` for anything else)."""
        norm = data["normalization"]
        files = tuple(
            (str(name), int(size), None if mtime is None else int(mtime)) for name, size, mtime in data["files"]
        )
        digest = data.get("digest")
        if digest is not None and not isinstance(digest, str):
            raise TypeError(f"digest {digest!r}")
        if norm is None:
            return cls(files, None, digest)
        shift, scale = (np.asarray(norm[k], np.float64) for k in ("shift", "scale"))
        if shift.shape != scale.shape or shift.shape != (len(norm["channels"]),):
            raise ValueError(f"{len(norm['channels'])} channels, {shift.shape} shifts and {scale.shape} scales")
        return cls(files, Normalization(str(norm["method"]), tuple(norm["channels"]), shift, scale), digest)


def loaded_scan(name: str, path: str, data: Dataset) -> Scan:
    """The :class:`Scan` of a problem loaded whole from the local file ``path`` (``"arrays"``;
    ``name``: as the spec gives it): the file's stamp, the dataset's statistics and a sha256 of
    every array of every split, for :meth:`Scan.change_from` to tell a later run whether the file
    changed under its members."""
    info = os.stat(path)
    digest = hashlib.sha256()
    for split in SPLITS:
        arrays = [*getattr(data, split), data.trajectories(split)]
        for a in (a for a in arrays if a is not None):
            digest.update(np.ascontiguousarray(a).tobytes())
    return Scan(((name, int(info.st_size), info.st_mtime_ns),), data.normalization, digest.hexdigest())


def stamps(files: Mapping[str, tuple[Location, ...]]) -> tuple[Stamp, ...]:
    """The :attr:`Scan.files` of ``files`` as they are now (their metadata only)."""
    out = []
    for group in files.values():
        for location in group:
            info = location.filesystem.get_file_info(location.path)
            out.append((location.name, int(info.size or 0), info.mtime_ns))
    return tuple(out)


def scan_files(
    files: dict[str, tuple[Location, ...]],
    described: dict[str, FileLayout],
    channels: list[Channel],
    options: Mapping[str, Any],
    previous: Scan | None = None,
) -> Scan:
    """The :class:`Scan` of the resolved problem (:func:`~._hdf5.resolved`): ``previous`` where
    it was made of these files as they are now, else a new pass (module docstring).

    Raises:
        SpecError: NaN or infinity in a selected state, naming the file, the dataset, the
            trajectory and the time index.
    """
    now = stamps(files)
    if previous is not None and previous.files == now:
        return previous
    picks = split_trajectories(files, described, options)
    ts, ss = options.get("time_stride", 1), options.get("space_stride", 1)
    digest = hashlib.sha256()

    def read(split: str):
        for where, states in read_picks(picks.get(split, []), described, channels, ts, ss):
            digest.update(np.ascontiguousarray(states).tobytes())
            yield where, states

    norm = _statistics(read("train"), channels, options)
    for split in ("val", "test"):
        for _ in read(split):
            pass  # read_states refuses NaN and infinity, naming where
    return Scan(now, norm, digest.hexdigest())


def _statistics(chunks, channels: list[Channel], options: Mapping[str, Any]) -> Normalization | None:
    """The statistics of ``options``' method from the training ``chunks`` (None for ``"none"``,
    the chunks still read: every state is checked)."""
    method = options.get("normalize", DEFAULTS["normalize"])
    if method == "none":
        for _ in chunks:
            pass
        return None
    named = ((f"training {where}", states) for where, states in chunks)
    return channel_statistics(named, method, [c.name for c in channels], f"`problem.path` {options['path']!r}")


def hdf5_statistics(path: str, filesystem: pafs.FileSystem | None = None, **options: Any) -> Normalization | None:
    """The normalisation statistics of ``Problem("hdf5", path=path, **options)`` (None for
    ``normalize="none"``), streamed from the files: one training trajectory in memory at a time,
    whatever the files' size (equal, bit for bit, to those :func:`~._hdf5.hdf5_problem` computes on the
    trajectories it holds). NaN or infinity is an error naming the file, dataset, trajectory and
    time index. ``filesystem``: as :func:`~._hdf5.hdf5_info`'s.

    Examples:
        ```python
        norm = sweep.problems.hdf5_statistics("2D_CFD_Rand_M0.1_Eta0.01_Zeta0.01_periodic_128_Train.hdf5")
        norm.as_dict()  # {"density": (shift, scale), "pressure": ..., "Vx": ..., "Vy": ...}
        ```
    """
    options = {"path": path, **options}
    _, files, described, channels = resolved(options, filesystem)
    if options.get("normalize", DEFAULTS["normalize"]) == "none":
        return None
    ts, ss = options.get("time_stride", 1), options.get("space_stride", 1)
    train = split_trajectories(files, described, options)["train"]
    return _statistics(read_picks(train, described, channels, ts, ss), channels, options)
