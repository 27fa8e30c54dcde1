"""An ``hdf5`` problem read from object storage: requests and time with the reader's blocks
against one request per read (how files on object storage were read before 2026-12-05).

HDF5 asks its file object for many small pieces (superblock, object headers, B-tree nodes) and
for the data; each read that reaches the store is a round trip. ``Problem("hdf5")`` reads a file
on object storage in blocks (``sweep.problems._hdf5_files.BLOCK_BYTES``, the last
``BLOCKS_KEPT`` kept per open file); ``--per-read`` (here: a block size of one byte, so that
every read goes to the store as it is) is the reader before that. Both load the same files
(``load_problem``, ``normalize="none"``) from a moto S3 server in its own process on 127.0.0.1,
in turn (each first every other repeat), and must give the same arrays. Files written:

- ``2D_CFD.hdf5``: PDEBench-like, 4 variables x ``--samples`` x 21 x 64 x 64 float32, contiguous;
- ``2D_CFD_gzip.hdf5``: the same, gzip-compressed in chunks of one trajectory of a variable;
- ``toy/``: a The Well-like dataset directory (``train/``, ``valid/``, ``test/``, 6 files).

On localhost a request takes about a millisecond; a store across a network takes tens: the
requests, not the seconds, are what carries over.

    python -m benchmarks.store.hdf5_s3 [--samples 32] [--repeats 3]
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pyarrow.fs as pafs

from benchmarks._shared.machine import OtherLoad
from benchmarks._shared.moto import moto_process
from benchmarks._shared.repo import tests_module
from sweep.problems import _hdf5_files, load_problem

VARIABLES, TIME, GRID = ("density", "pressure", "Vx", "Vy"), 21, 64


def write_pdebench(folder: Path, samples: int) -> None:
    rng = np.random.default_rng(0)
    for name, options in (("2D_CFD.hdf5", {}), ("2D_CFD_gzip.hdf5", {"compression": "gzip"})):
        with h5py.File(folder / name, "w") as f:
            for v in VARIABLES:
                data = rng.standard_normal((samples, TIME, GRID, GRID), dtype=np.float32)
                chunks = {"chunks": (1, TIME, GRID, GRID)} if options else {}
                f.create_dataset(v, data=data, **options, **chunks)
            for axis in "xy":
                f[f"{axis}-coordinate"] = np.linspace(0, 1, GRID, dtype=np.float32)
            f["t-coordinate"] = np.linspace(0, 1, TIME, dtype=np.float32)


class _Counted:
    """A pyarrow random-access file that counts the reads reaching the store."""

    def __init__(self, native: Any, counts: collections.Counter):
        self._native, self._counts = native, counts

    def read_at(self, nbytes: int, offset: int) -> bytes:
        self._counts["requests"] += 1
        self._counts["bytes"] += nbytes
        return self._native.read_at(nbytes, offset)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._native, name)


def load(uri: str, per_read: bool, counts: collections.Counter) -> Any:
    block_bytes, opened = _hdf5_files.BLOCK_BYTES, _hdf5_files.Location.opened

    def counted(location: Any) -> Any:
        source = opened(location)
        if isinstance(source, _hdf5_files._Remote):
            source._native = _Counted(source._native, counts)
        return source

    _hdf5_files.BLOCK_BYTES = 1 if per_read else block_bytes
    _hdf5_files.Location.opened = counted  # type: ignore[method-assign]
    try:
        options = {"fields": ["density", "Vx"]} if "CFD" in uri else {}
        return load_problem("hdf5", {"path": uri, "normalize": "none", **options})
    finally:
        _hdf5_files.BLOCK_BYTES, _hdf5_files.Location.opened = block_bytes, opened  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    hdf5_files = tests_module("hdf5_files")
    with tempfile.TemporaryDirectory() as folder, moto_process() as (port, s3):
        root = Path(folder)
        write_pdebench(root, args.samples)
        hdf5_files.well_directory(root / "toy", {"train": 4, "valid": 1, "test": 1}, grid=(32, 32))
        s3.create_dir("datasets")
        pafs.copy_files(str(root), "datasets", pafs.LocalFileSystem(), s3)
        os.environ |= {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        print(f"moto S3 on 127.0.0.1:{port} in its own process; median of {args.repeats}, alternating")
        print(
            f"{'data':<18}{'MB':>7}  {'blocks: requests':>17}{'MB read':>9}{'s':>7}  {'per read: requests':>19}{'MB read':>9}{'s':>7}  {'time ratio':>10}"
        )
        with OtherLoad() as other:
            for name in ("2D_CFD.hdf5", "2D_CFD_gzip.hdf5", "toy"):
                path = root / name
                size = sum(p.stat().st_size for p in path.rglob("*")) if path.is_dir() else path.stat().st_size
                seconds: dict[bool, list[float]] = {False: [], True: []}
                counts = {False: collections.Counter(), True: collections.Counter()}
                arrays = {}
                for repeat in range(args.repeats):
                    for per_read in (False, True)[:: 1 if repeat % 2 == 0 else -1]:
                        counts[per_read].clear()
                        t0 = time.perf_counter()
                        data = load(f"s3://datasets/{name}", per_read, counts[per_read])
                        seconds[per_read].append(time.perf_counter() - t0)
                        arrays[per_read] = data.trajectories("train")
                np.testing.assert_array_equal(arrays[False], arrays[True])
                b, p = statistics.median(seconds[False]), statistics.median(seconds[True])
                print(
                    f"{name:<18}{size / 1e6:>7.1f}  {counts[False]['requests']:>17}{counts[False]['bytes'] / 1e6:>9.1f}{b:>7.2f}"
                    f"  {counts[True]['requests']:>19}{counts[True]['bytes'] / 1e6:>9.1f}{p:>7.2f}  {p / b:>9.2f}x"
                )
        print(other)


if __name__ == "__main__":
    main()
