"""Measurement: peak RSS of ``Ensemble.mean_std`` and ``Ensemble.scores`` over an HDF5 split
several times larger than a batch, streamed (the h5py datasets passed as they are, the results
written into an h5py ``out=``) against the same split read into memory first.

A temporary store of ``--members`` randomly initialised ConvNets (hidden 4, depth 1) on heat1d
with 48 points, and an HDF5 file of ``--mib`` MiB of inputs ``x`` and as much of targets ``y``
(random float32 ``[n, 1, 48]``). Each (query, mode) runs in a fresh process, which first compiles
the query on a small input (its baseline RSS), then runs it on the file; it reports its wall
time, its peak RSS and the peak above the baseline. The streamed and in-memory results are then
compared (bit for bit: the same batches and blocks). The file is deleted at the end.

    python -m benchmarks.ensemble.streamed_predict [--mib 256] [--members 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

from benchmarks._shared.members import random_store
from benchmarks._shared.workload import POINTS


def _dataset(file: Any, name: str) -> Any:
    """The h5py dataset ``name`` of ``file`` (what this script wrote there)."""
    import h5py

    dataset = file[name]
    assert isinstance(dataset, h5py.Dataset)
    return dataset


def _child(query: str, mode: str, directory: str) -> None:
    import h5py

    import sweep
    from benchmarks._shared.machine import peak_rss_mib

    ens = sweep.load(f"{directory}/ensembles")
    small = np.zeros((8, 1, POINTS), np.float32)
    ens.mean_std(small) if query == "mean_std" else ens.scores("test", samples=(small, small))  # compiled
    baseline = peak_rss_mib()
    start = time.perf_counter()
    with h5py.File(f"{directory}/split.h5") as f:
        fx, fy = _dataset(f, "x"), _dataset(f, "y")
        if query == "mean_std" and mode == "memory":
            mean, std = ens.mean_std(fx[:])
        elif query == "mean_std":
            with h5py.File(f"{directory}/out_{mode}.h5", "w") as g:
                out = (g.create_dataset("mean", fx.shape, "f4"), g.create_dataset("std", fx.shape, "f4"))
                ens.mean_std(fx, out=out)
        else:
            x, y = (fx[:], fy[:]) if mode == "memory" else (fx, fy)
            rows = ens.scores("test", samples=(x, y)).to_pylist()
    seconds, peak = time.perf_counter() - start, peak_rss_mib()
    if query == "mean_std" and mode == "memory":
        with h5py.File(f"{directory}/out_{mode}.h5", "w") as g:
            g["mean"], g["std"] = mean, std
    elif query == "scores":
        with open(f"{directory}/scores_{mode}.json", "w") as out:
            json.dump(rows, out)
    print(json.dumps({"seconds": seconds, "peak": peak, "baseline": baseline}))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--mib", type=float, default=256, help="MiB of inputs (as much again of targets)")
    parser.add_argument("--members", type=int, default=2)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(*args.child)
        return
    import h5py

    from sweep.ensemble._predictions import BATCH_BYTES
    from sweep.ensemble._scoring import BLOCK_BYTES

    with tempfile.TemporaryDirectory() as directory:
        random_store(directory, args.members, hidden=4, depth=1)
        n = int(args.mib * 2**20) // (4 * POINTS)
        rng = np.random.default_rng(0)
        with h5py.File(f"{directory}/split.h5", "w") as f:
            for name in ("x", "y"):
                d = f.create_dataset(name, (n, 1, POINTS), "f4")
                for start in range(0, n, 2**18):
                    stop = min(n, start + 2**18)
                    d[start:stop] = rng.normal(size=(stop - start, 1, POINTS)).astype(np.float32)
        size = os.path.getsize(f"{directory}/split.h5") / 2**20
        print(
            f"{args.members} members; {n} samples of {POINTS} points: file {size:.0f} MiB (x and y); "
            f"batch bound {BATCH_BYTES / 2**20:.0f} MiB (mean_std), block bound {BLOCK_BYTES / 2**20:.0f} MiB (scores)"
        )
        print(f"{'query':<10}{'mode':<10}{'seconds':>9}{'peak RSS MiB':>14}{'above baseline':>16}")
        for query in ("mean_std", "scores"):
            for mode in ("memory", "streamed"):
                command = [sys.executable, "-m", "benchmarks.ensemble.streamed_predict", "--child", query, mode]
                done = subprocess.run([*command, directory], capture_output=True, text=True)
                if done.returncode:
                    sys.exit(done.stderr)
                r = json.loads(done.stdout.strip().splitlines()[-1])
                print(f"{query:<10}{mode:<10}{r['seconds']:>9.1f}{r['peak']:>14.0f}{r['peak'] - r['baseline']:>16.0f}")
        with h5py.File(f"{directory}/out_memory.h5") as a, h5py.File(f"{directory}/out_streamed.h5") as b:
            same = all(np.array_equal(_dataset(a, k)[:], _dataset(b, k)[:]) for k in ("mean", "std"))
        with open(f"{directory}/scores_memory.json") as a, open(f"{directory}/scores_streamed.json") as b:
            same_scores = json.load(a) == json.load(b)
        print(f"streamed equals in memory, bit for bit: mean_std {same}, scores {same_scores}")


if __name__ == "__main__":
    main()
