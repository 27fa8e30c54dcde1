"""The normalisation's statistics pass over HDF5 files: peak host memory against the file's size.

Writes PDEBench-like 2D compressible-flow files (``density``, ``pressure``, ``Vx``, ``Vy``, each
``(samples, 21, 128, 128)`` float32: :func:`benchmarks.store.hdf5_read.write`) of each size in
``--gigabytes``, and for each measures with tracemalloc the peak host allocation of

- ``sweep.problems.hdf5_statistics`` (``normalize="zscore"``): the streamed pass, one training
  trajectory in memory at a time;
- the same statistics the way a loaded problem computes them: every trajectory read into memory
  (the reader of ``Problem("hdf5")``), then the pass over them;

and prints each against the file's size: the streamed pass's peak should stay flat.

    python -m benchmarks.store.hdf5_statistics                          # 0.25 and 1 GB files
    python -m benchmarks.store.hdf5_statistics --gigabytes 0.05 0.2     # quick
"""

from __future__ import annotations

import argparse
import tempfile
import time
import tracemalloc
from pathlib import Path

from benchmarks._shared.machine import OtherLoad
from benchmarks.store.hdf5_read import ours, write
from sweep.problems import hdf5_statistics
from sweep.problems._normalize import channel_statistics


def peak(fn, path: Path) -> tuple[float, float]:
    """``(peak MiB allocated while fn(path) runs, seconds)``."""
    tracemalloc.start()
    t0 = time.perf_counter()
    fn(path)
    seconds = time.perf_counter() - t0
    top = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return top / 2**20, seconds


def streamed_pass(path: Path) -> None:
    hdf5_statistics(str(path), val_fraction=0)


def loaded(path: Path) -> None:
    """Every trajectory in memory, then the statistics of all of them (the loaded problem's way,
    without its split: an upper bound of what it holds)."""
    states = ours(path, 1, 1)
    chunks = ((f"trajectory {i}", s) for i, s in enumerate(states))
    channel_statistics(chunks, "zscore", ["density", "pressure", "Vx", "Vy"], str(path))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gigabytes", type=float, nargs="+", default=[0.25, 1.0])
    parser.add_argument("--dir", type=Path, default=None, help="where to write the files (default: a temporary folder)")
    args = parser.parse_args()
    with OtherLoad() as load:
        for gigabytes in args.gigabytes:
            with tempfile.TemporaryDirectory(dir=args.dir) as folder:
                path = Path(folder) / "2D_CFD_bench.hdf5"
                samples = write(path, gigabytes)
                size = path.stat().st_size / 2**20
                streamed, streamed_s = peak(streamed_pass, path)
                whole, whole_s = peak(loaded, path)
                print(
                    f"file {size:.0f} MiB ({samples} trajectories): streamed pass peak {streamed:.0f} MiB "
                    f"({streamed / size:.3f}x the file, {streamed_s:.1f} s); everything loaded first: peak "
                    f"{whole:.0f} MiB ({whole / size:.2f}x, {whole_s:.1f} s); {whole / streamed:.1f}x less memory"
                )
    print(load)


if __name__ == "__main__":
    main()
