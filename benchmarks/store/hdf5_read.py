"""The HDF5 reader of ``Problem("hdf5")`` against h5py reading the same slices directly.

Writes a PDEBench-like 2D compressible-flow file (``density``, ``pressure``, ``Vx``, ``Vy``, each
``(samples, 21, 128, 128)`` float32, contiguous, as PDEBench's 2D CFD files) of about
``--gigabytes``, then reads every trajectory of the four variables as
``(samples, time, channels, x, y)`` float32, unstrided and with ``time_stride=2, space_stride=2``:

- seed-sweep's reader (``read_states``: the checks on every dataset, chunked reads, the
  NaN/infinity check of every value, the copy into the output);
- h5py directly: ``f[name][:, ::ts, ::ss, ::ss]`` per variable, stacked on the channel axis.

Both are timed in turn, each going first every other repeat (``--repeats``, median), after one
unmeasured read of the whole file (so both read from the page cache where it holds the file). The
direct read is what a user writes by hand: each variable's slices, then ``np.stack`` (a second
copy of the output). Also the reader's peak host allocation beyond its output
(tracemalloc), which its chunked reads bound (128 MiB per read), whatever the file's size.

    python -m benchmarks.store.hdf5_read                      # ~2 GB
    python -m benchmarks.store.hdf5_read --gigabytes 0.2      # quick
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

import h5py
import numpy as np

from benchmarks._shared.machine import OtherLoad
from sweep.problems._hdf5_files import locate
from sweep.problems._hdf5_layouts import describe_file, read_states
from sweep.problems._hdf5_safety import open_hdf5

VARIABLES = ("density", "pressure", "Vx", "Vy")
TIME, GRID = 21, 128


def write(path: Path, gigabytes: float) -> int:
    per_sample = len(VARIABLES) * TIME * GRID * GRID * 4
    samples = max(2, round(gigabytes * 1e9 / per_sample))
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        for name in VARIABLES:
            dataset = f.create_dataset(name, shape=(samples, TIME, GRID, GRID), dtype=np.float32)
            for i in range(0, samples, 16):
                n = min(16, samples - i)
                dataset[i : i + n] = rng.standard_normal((n, TIME, GRID, GRID), dtype=np.float32)
    return samples


def ours(path: Path, ts: int, ss: int) -> np.ndarray:
    with open_hdf5(locate(str(path))) as f:
        layout = describe_file(f, "pdebench")
        return read_states(f, layout, layout.channels, range(layout.trajectories), ts, ss)


def direct(path: Path, ts: int, ss: int) -> np.ndarray:
    parts: list[np.ndarray] = []
    with h5py.File(path, "r") as f:
        for name in VARIABLES:
            dataset = f[name]
            assert isinstance(dataset, h5py.Dataset)
            parts.append(dataset[:, ::ts, ::ss, ::ss])
    return np.stack(parts, axis=2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gigabytes", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="where to write the file (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        path = Path(folder) / "2D_CFD_bench.hdf5"
        t0 = time.perf_counter()
        samples = write(path, args.gigabytes)
        size = path.stat().st_size
        print(
            f"file: {samples} samples x {len(VARIABLES)} variables x {TIME} x {GRID} x {GRID} float32, "
            f"{size / 1e9:.2f} GB, written in {time.perf_counter() - t0:.1f} s"
        )
        direct(path, 1, 1)  # warm the page cache
        with OtherLoad() as load:
            for ts, ss in ((1, 1), (2, 2)):
                times: dict[str, list[float]] = {"seed-sweep": [], "h5py": []}
                readers = [("seed-sweep", ours), ("h5py", direct)]
                for repeat in range(args.repeats):
                    for name, read in readers[:: 1 if repeat % 2 == 0 else -1]:  # alternate who goes first
                        t0 = time.perf_counter()
                        out = read(path, ts, ss)
                        times[name].append(time.perf_counter() - t0)
                        nbytes = out.nbytes
                        del out
                ours_s, direct_s = statistics.median(times["seed-sweep"]), statistics.median(times["h5py"])
                print(
                    f"time_stride={ts} space_stride={ss}: output {nbytes / 1e9:.2f} GB; seed-sweep {ours_s:.2f} s "
                    f"({nbytes / ours_s / 1e9:.2f} GB/s), h5py direct {direct_s:.2f} s ({nbytes / direct_s / 1e9:.2f} GB/s): "
                    f"{direct_s / ours_s:.2f}x h5py's throughput"
                )
            tracemalloc.start()
            out = ours(path, 1, 1)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            print(
                f"reader's host allocation peak {peak / 2**20:.0f} MiB for an output of {out.nbytes / 2**20:.0f} MiB: "
                f"{(peak - out.nbytes) / 2**20:.0f} MiB beyond it"
            )
        print(load)


if __name__ == "__main__":
    main()
