"""Aggregation and queries at scale: 100,000 members of a tiny net in 1,000 block checkpoints.

Builds a synthetic sweep directory, no training: a sweep of ``--configs`` structural configs
(ConvNet hidden 4, depth 1..configs on 16 points: 29, 81, 133, 185 parameters, ~107 on average)
with ``--members`` seeds in ``--blocks`` trials. Its plan.json comes from the product's planner;
every block's state is the product's own initial state (``sweep.init_block``) with a one-report
history of made-up losses, written with the product's block-checkpoint writer into a Tune-like
layout ``tune-0001/<trial_key>/checkpoint_000000/`` (``_shared/members.py``). Then, each in a
fresh process:

1. the aggregation (``sweep.aggregate``): wall time, members/s, peak RSS of the process (next to
   a process that only imports seed-sweep);
2. ``sweep.load(store)`` and ``ens.where(depth=...).member(seed=...)`` through a pyarrow
   filesystem that counts the bytes read from each file (``tests/_local_fs.py``), with the
   row-group layout of ``members.parquet``.

Step 1 runs twice: serially in one process (``sweep.aggregate``), and as Ray tasks on a new
local Ray of ``--cpus`` CPUs (``sweep.store.write_store(..., map_tasks=sweep.tune.RayTasks())``, the aggregation without the ensemble scores,
what ``sweep.run`` and ``sweep aggregate --parallel`` do), with the driver's peak RSS, every
task's worker peak RSS, and whether the two stores are byte-identical (sha256 of every file).

    python -m benchmarks.store.aggregate_scale                       # 100,000 members, 1,000 blocks
    python -m benchmarks.store.aggregate_scale --members 400 --blocks 8   # quick (too few blocks for Ray tasks)
    python -m benchmarks.store.aggregate_scale --dir /tmp/agg100k --keep    # keep the sweep dir (reuse with --reuse)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import sweep
from benchmarks._shared.machine import OtherLoad, peak_rss_mib
from benchmarks._shared.members import untrained_sweep
from benchmarks._shared.ray_local import local_ray
from benchmarks._shared.repo import run_json, tests_module
from benchmarks._shared.workload import model

NAME = "scale"


def make_spec(members: int, blocks: int, configs: int) -> sweep.SweepSpec:
    if members % blocks or blocks % configs:
        sys.exit(f"--members {members} must be a multiple of --blocks {blocks}, and --blocks of --configs {configs}")
    return sweep.SweepSpec(
        name=NAME,
        problem=sweep.Problem("heat1d", num_points=16, num_samples=40, data_seed=0),
        model=model(hidden=4, depth=1, boundary_mode=None),
        optimizer=sweep.Optimizer("adam", learning_rate=1e-3),
        training=sweep.Training(epochs=1, batch_size=8, report_every=1),
        seeds=members // configs,
        seeds_per_trial=members // blocks,
        grid={"model.depth": list(range(1, configs + 1))},
    )


def build(root: Path, members: int, blocks: int, configs: int) -> float:
    """Write plan.json and one real block checkpoint per planned trial; returns seconds."""
    start = time.perf_counter()

    def progress(done: int, trials: int) -> None:
        if done % max(1, trials // 10) == 0:
            print(f"  built {done}/{trials} blocks, {time.perf_counter() - start:.0f} s", flush=True)

    spec = make_spec(members, blocks, configs)
    untrained_sweep(root, spec, rng=np.random.default_rng(0), progress=progress)
    return time.perf_counter() - start


def child_aggregate(root: str, shard_mib: float | None, cpus: int = 0) -> dict:
    """Aggregate ``root`` in this process (``cpus=0``) or as Ray tasks on a new local Ray of ``cpus`` CPUs."""
    sweep.configure()
    kwargs = {"progress": False} | ({"shard_bytes": int(shard_mib * 2**20)} if shard_mib else {})
    out = {}
    if cpus:
        from sweep.tune import RayTasks

        start = time.perf_counter()
        local_ray(cpus, logging_level="ERROR")
        out["ray_init_s"] = time.perf_counter() - start
        kwargs["map_tasks"] = tasks = RayTasks()
    before = peak_rss_mib()
    start = time.perf_counter()
    if root:
        where = sweep.store.SweepDir.at(root)  # sweep.aggregate without the ensemble scores: the aggregation alone
        sources = sweep.store.sweep_sources(where)
        write_store_args = (where.filesystem, f"{where.path}/ensembles", sources, where.plan(), where.samples())
        sweep.store.write_store(*write_store_args, **kwargs)
    out |= {"seconds": time.perf_counter() - start, "peak_rss_mib": peak_rss_mib(), "peak_before_mib": before}
    if cpus:
        out["task_peak_rss_mib"] = tasks.peak_rss_mib
    if root:
        store = (Path(root) / "ensembles").resolve()
        out["digests"] = {
            str(f.relative_to(store)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(store.rglob("*"))
            if f.is_file()
        }
    return out


def child_query(root: str, seed: int, depth: int) -> dict:
    import pyarrow.parquet as pq

    sweep.configure()
    fs, counter = tests_module("_local_fs").counting_filesystem()
    out = {}
    start = time.perf_counter()
    ens = sweep.load(root, storage_filesystem=fs)
    out["load_s"], out["load_bytes"], out["load_files"] = (
        time.perf_counter() - start,
        counter.total(),
        counter.by_file(),
    )
    out["members"] = len(ens)
    counter.reset()
    start = time.perf_counter()
    selection = ens.where(depth=depth)
    out["where_s"], out["where_bytes"] = time.perf_counter() - start, counter.total()
    counter.reset()
    start = time.perf_counter()
    member = selection.member(seed=seed)
    out["member_s"], out["member_bytes"], out["member_files"] = (
        time.perf_counter() - start,
        counter.total(),
        counter.by_file(),
    )
    out["member_params"] = int(
        sum(np.size(x) for x in __import__("jax").tree_util.tree_leaves(member) if hasattr(x, "shape"))
    )
    counter.reset()
    start = time.perf_counter()
    ens.where(depth=depth).member(seed=seed + 1)
    out["member2_s"], out["member2_bytes"] = time.perf_counter() - start, counter.total()
    root_dir = ens._store.root
    meta = pq.ParquetFile(f"{root_dir}/members.parquet").metadata
    groups = []
    for g in range(meta.num_row_groups):
        rg = meta.row_group(g)
        cols = {rg.column(c).path_in_schema: rg.column(c) for c in range(rg.num_columns)}
        stats = {
            k: (cols[k].statistics.has_min_max if cols[k].statistics else False)
            for k in ("config_id", "seed")
            if k in cols
        }
        groups.append({"rows": rg.num_rows, "bytes": rg.total_byte_size, "stats": stats})
    out["row_groups"] = groups
    out["store_files"] = {
        k: v["bytes"] for k, v in json.loads(Path(root_dir, "manifest.json").read_text())["files"].items()
    }
    out["peak_rss_mib"] = peak_rss_mib()
    return out


def _child(kind: str, *args: str) -> dict:
    return run_json(__spec__.name, "--child", kind, *args)


def _mib(n: float) -> str:
    return f"{n / 2**20:.2f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=100_000)
    parser.add_argument("--blocks", type=int, default=1_000)
    parser.add_argument("--configs", type=int, default=4)
    parser.add_argument(
        "--shard-mib", type=float, default=None, help="aggregate with this shard size (default: the product's)"
    )
    parser.add_argument("--dir", default=None, help="where to build the sweep directory (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the sweep directory")
    parser.add_argument("--reuse", action="store_true", help="reuse an existing --dir (skip building)")
    parser.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray the tasks run on")
    parser.add_argument("--child", nargs="+", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        if kind == "aggregate":
            result = child_aggregate(rest[0], float(rest[1]) if rest[1] != "-" else None, int(rest[2]))
        else:
            result = child_query(rest[0], int(rest[1]), int(rest[2]))
        print(json.dumps(result))
        return
    sweep.configure()
    base = Path(args.dir or tempfile.mkdtemp(prefix="sweep-aggscale-"))
    root = base / NAME
    try:
        print(
            f"aggregate_scale: {args.members} members of ConvNet hidden 4, depth 1..{args.configs} (16 points) in "
            f"{args.blocks} blocks of {args.members // args.blocks} over {args.configs} configs; dir {root}"
        )
        if not (args.reuse and root.exists()):
            shutil.rmtree(root, ignore_errors=True)
            seconds = build(root, args.members, args.blocks, args.configs)
            size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
            print(f"built in {seconds:.1f} s: {args.blocks} block checkpoints, {_mib(size)} on disk")
        baseline = _child("aggregate", "", "-", "0")
        shard = str(args.shard_mib) if args.shard_mib else "-"
        label = "shard " + shard + " MiB" if args.shard_mib else "default shard size"
        with OtherLoad() as load:
            agg = _child("aggregate", str(root), shard, "0")
        print(
            f"aggregate, one process ({label}): {agg['seconds']:.1f} s, {args.members / agg['seconds']:.0f} members/s, "
            f"peak RSS {agg['peak_rss_mib']:.0f} MiB (after imports {agg['peak_before_mib']:.0f} MiB; a process that "
            f"only imports seed-sweep peaks at {baseline['peak_rss_mib']:.0f} MiB); {load}",
            flush=True,
        )
        with OtherLoad() as load:
            par = _child("aggregate", str(root), shard, str(args.cpus))
        tasks = par["task_peak_rss_mib"]
        workers = (
            f"task worker peak RSS {min(tasks):.0f}-{max(tasks):.0f} MiB"
            if tasks
            else "no task started: too few blocks for tasks, the driver aggregated them (RayTasks' min_blocks)"
        )
        print(
            f"aggregate, {len(tasks)} Ray tasks on {args.cpus} CPUs ({label}): {par['seconds']:.1f} s "
            f"(+ ray.init {par['ray_init_s']:.1f} s), {args.members / par['seconds']:.0f} members/s, driver peak RSS "
            f"{par['peak_rss_mib']:.0f} MiB (after imports and ray.init {par['peak_before_mib']:.0f} MiB); {workers}; "
            f"{load}"
        )
        same = agg["digests"] == par["digests"]
        print(f"stores byte-identical (sha256 of all {len(agg['digests'])} files): {'yes' if same else 'NO'}")
        q = _child("query", str(root), str(args.members // args.configs // 2 + 1), str(max(1, args.configs - 1)))
        leaves = {k: v for k, v in q["store_files"].items() if k.endswith(".eqx")}
        print(
            f"store: {q['members']} members; {len(leaves)} leaves file(s), {_mib(sum(leaves.values()))} in all, "
            f"largest {_mib(max(leaves.values()))}; members.parquet {_mib(q['store_files']['members.parquet'])}"
        )
        groups = q["row_groups"]
        print(
            f"members.parquet: {len(groups)} row group(s) of {[g['rows'] for g in groups]} rows; min/max statistics "
            f"on config_id/seed: {groups[0]['stats'] if groups else {}}"
        )

        def show(files):
            return "; ".join(f"{Path(k).name} x{o} {_mib(b)}" for k, (o, b) in sorted(files.items()))

        print(f"sweep.load: {q['load_s']:.3f} s, read {_mib(q['load_bytes'])} ({show(q['load_files'])})")
        print(f"where(depth={max(1, args.configs - 1)}): {q['where_s']:.3f} s, read {_mib(q['where_bytes'])}")
        print(
            f"where(depth={max(1, args.configs - 1)}).member(seed=...): {q['member_s']:.3f} s, read "
            f"{_mib(q['member_bytes'])} ({show(q['member_files'])}); member has {q['member_params']} parameters; "
            f"next seed of the same config: {q['member2_s']:.3f} s, {_mib(q['member2_bytes'])}"
        )
        print(f"query process peak RSS {q['peak_rss_mib']:.0f} MiB")
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
