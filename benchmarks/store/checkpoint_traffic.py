"""Checkpoint traffic: writing and reading a 16k-member block checkpoint, locally and to S3 (moto).

What a trial does per report today: ``save_block`` into a local temporary directory, then Ray Tune
persists it to the storage with ``pyarrow.fs.copy_files`` (Ray's own helper, 64 MiB chunks, one
thread for S3 uploads); what a restarted trial or the aggregator does: copy it back to a local
directory and ``load_block`` it. Measured for a block of ``--members`` members (default 16,384)
of each net in ``--nets``:

- ``reference``: the reference ConvNet (hidden 16, depth 6, relu, dirichlet, 48 points; 4,817
  parameters, adam state included in the checkpoint);
- ``tiny``: ConvNet hidden 4, depth 2 on 16 points (81 parameters).

Storage ``local``: a directory on this machine's disk (page cache; ``sync`` timed separately);
``s3``: a moto S3 server (``ThreadedMotoServer``) in its own process on 127.0.0.1, through
``pyarrow.fs.S3FileSystem`` as ``sweep.run(storage="s3://...")`` uses it. The fastest of
``--repeats`` is kept. These numbers set the default "checkpoint every k reports": checkpoint bytes
per second written by all trials must stay well below the storage's MB/s.

    python -m benchmarks.store.checkpoint_traffic [--nets tiny reference] [--members 16384] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import jax
import numpy as np
import pyarrow.fs as pafs

import sweep
from benchmarks._shared.moto import moto_process
from benchmarks._shared.workload import DEPTH, HIDDEN, POINTS, heat_spec
from sweep.training import History, data_shapes, load_block, save_block

NETS = {
    "reference": {"points": POINTS, "hidden": HIDDEN, "depth": DEPTH, "boundary_mode": "dirichlet"},
    "tiny": {"points": 16, "hidden": 4, "depth": 2, "boundary_mode": "periodic"},
}


def _copy_files(source, destination, source_filesystem=None, destination_filesystem=None):
    """What Ray Tune uses to persist a checkpoint (its chunk size and S3 threading), after
    creating the destination directory as Tune does."""
    (destination_filesystem or pafs.LocalFileSystem()).create_dir(destination, recursive=True)
    try:
        from ray.train._internal.storage import _pyarrow_fs_copy_files
    except ImportError:  # a Ray without it: the same call with Ray's settings
        return pafs.copy_files(
            source,
            destination,
            source_filesystem=source_filesystem,
            destination_filesystem=destination_filesystem,
            chunk_size=64 * 2**20,
            use_threads=not isinstance(destination_filesystem, pafs.S3FileSystem),
        )
    _pyarrow_fs_copy_files(
        source, destination, source_filesystem=source_filesystem, destination_filesystem=destination_filesystem
    )


def make_block(net: str, members: int):
    o = NETS[net]
    spec = heat_spec(
        name="traffic",
        epochs=10,
        report_every=1,
        points=o["points"],
        samples=40,
        hidden=o["hidden"],
        depth=o["depth"],
        boundary_mode=o["boundary_mode"],
        batch_size=8,
        seeds=members,
        seeds_per_trial=members,
    )
    config = spec.expand()[0][0]
    data = sweep.load_data(config)
    block, state = sweep.init_block(config, range(members), data=data)
    state = jax.tree_util.tree_map(np.asarray, state)
    params = sum(x[0].size for x in jax.tree_util.tree_leaves(state.params))
    curve = np.full((members, 10), 0.02, np.float32)
    history = History(
        block.seeds,
        block.hparams,
        np.arange(1, 11, dtype=np.int32),
        np.full((members, 10), 0.01, np.float32),
        {"loss": curve},
        {"loss": curve},
        np.zeros(members, bool),
    )
    return config, state, history, data_shapes(data), params


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nets", nargs="+", choices=sorted(NETS), default=["tiny", "reference"])
    parser.add_argument("--members", type=int, default=16_384)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sweep.configure()
    with moto_process() as (port, s3):
        _measure(args, port, s3)


def _measure(args, port: int, s3: pafs.FileSystem) -> None:
    s3.create_dir("traffic")
    local = pafs.LocalFileSystem()
    print(
        f"checkpoint traffic: blocks of {args.members} members; fastest of {args.repeats}; moto S3 on 127.0.0.1:{port} "
        f"in its own process"
    )
    print(f"{'net':>9} {'params':>7} {'MiB':>8} {'step':<44}{'seconds':>8}{'MB/s':>9}")
    for net in args.nets:
        config, state, history, shapes, params = make_block(net, args.members)
        best: dict[str, float] = {}
        size = 0
        for r in range(args.repeats):
            with tempfile.TemporaryDirectory(prefix="sweep-traffic-", dir=os.environ.get("TMPDIR")) as tmp:
                tmp = Path(tmp)
                t = {}
                start = time.perf_counter()
                path = save_block(
                    tmp / "ckpt" / "block", spec=config, state=state, history=history, shapes=shapes, trial_id="t"
                )
                t["save_block to a local temp dir"] = time.perf_counter() - start
                start = time.perf_counter()
                os.sync()
                t["  + sync to disk"] = time.perf_counter() - start
                size = _dir_bytes(path)
                start = time.perf_counter()
                _copy_files(str(path), str(tmp / "storage" / "checkpoint_000001"), destination_filesystem=local)
                t["Tune persist: copy to local storage"] = time.perf_counter() - start
                start = time.perf_counter()
                _copy_files(str(path), f"traffic/r{r}/{net}/checkpoint_000001", destination_filesystem=s3)
                t["Tune persist: upload to S3 (moto)"] = time.perf_counter() - start
                start = time.perf_counter()
                load_block(tmp / "storage" / "checkpoint_000001")
                t["load_block from local storage"] = time.perf_counter() - start
                start = time.perf_counter()
                _copy_files(f"traffic/r{r}/{net}/checkpoint_000001", str(tmp / "down"), source_filesystem=s3)
                t["download from S3 (moto)"] = time.perf_counter() - start
                start = time.perf_counter()
                load_block(tmp / "down")
                t["  + load_block of the download"] = time.perf_counter() - start
            for k, v in t.items():
                best[k] = min(best.get(k, float("inf")), v)
        for k, v in best.items():
            print(f"{net:>9} {params:>7} {size / 2**20:>8.1f} {k:<44}{v:>8.3f}{size / 1e6 / max(v, 1e-9):>9.0f}")


if __name__ == "__main__":
    main()
