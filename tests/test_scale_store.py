"""The store at scale: aggregation as Ray tasks equal to the serial one byte for
byte, row groups that follow the shards, and queries that read only the row groups and the shard
they need, every byte of them verified against the manifest."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import equinox as eqx
import jax
import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from _blocks import trained_blocks, write_sweep
from _local_fs import counting_filesystem
from helpers import file_bytes, tiny_spec

import sweep
import sweep.tune
from sweep import StoreError, load
from sweep.planning import make_plan
from sweep.store import Store, aggregate_blocks
from sweep.store import _files as files
from sweep.training import History, SavedBlock, data_shapes, init_block

EVAL = make_plan(
    tiny_spec(
        name="eval",
        grid={"model.depth": [1, 2], "problem.val_fraction": [0.0, 0.1], "optimizer.learning_rate": [1e-3, 3e-3]},
        training=sweep.Training(epochs=2, batch_size=16, report_every=1, metrics=["nrmse"]),
    )
)
BIG = make_plan(tiny_spec(name="big", grid={"model.depth": [1, 2, 3, 4]}, seeds=1000, seeds_per_trial=500))
SHARD_BYTES = 64 * 2**10  # 2 to 12 shards per config
PIECE_BYTES = 4 * 2**10  # finer than the default, so that the bounds below are tight


def test_parallel_aggregation_is_byte_identical_to_serial(ray_session, tmp_path):
    one = write_sweep(tmp_path / "serial", EVAL, trained_blocks(EVAL))
    two = Path(shutil.copytree(one, tmp_path / "tasks"))
    shard = 3 * 81 * 4  # 3 members of the depth-2 config per shard: shards cut across blocks and learning rates
    sweep.aggregate(one, progress=False, shard_bytes=shard)  # with the ensemble scores, as sweep.run
    tasks = sweep.tune.RayTasks(window=2, min_blocks=0)  # Ray tasks however small the work
    sweep.aggregate(two, progress=False, shard_bytes=shard, map_tasks=tasks)
    assert len(tasks.peak_rss_mib) == sum(f.endswith(".eqx") for f in Store.open(two).manifest["files"])  # one per file
    serial, parallel = file_bytes(one / "ensembles"), file_bytes(two / "ensembles")
    assert any("/shard-" in name for name in serial) and serial.keys() == parallel.keys()
    assert all(serial[name] == parallel[name] for name in serial), [n for n in serial if serial[n] != parallel[n]]
    # RayTasks() as sweep.run and `sweep aggregate --parallel` give it gives the same store again;
    # 4 blocks are less work than starting task workers: it runs them in this process
    small = sweep.tune.RayTasks()
    assert list(small(len, [(1,), (2, 3)])) == [1, 2] and not small.peak_rss_mib
    sweep.aggregate(two, progress=False, shard_bytes=shard, map_tasks=small)
    assert file_bytes(two / "ensembles") == serial
    # the evaluation columns came through the tasks: a metric on validation and test, null without a validation set
    table = load(two).table
    no_val = pc.equal(table["val_fraction"], 0.0)
    for column in ("val_loss", "val_nrmse", "val_nrmse_history"):
        assert table.filter(no_val)[column].null_count == table.filter(no_val).num_rows > 0
        assert table.filter(pc.invert(no_val))[column].null_count == 0
    assert table["test_nrmse"].null_count == 0


def _big_blocks() -> list[SavedBlock]:
    """BIG's blocks at their initial state with 50 made-up reports (nothing trained)."""
    data, rng, out = sweep.load_data(BIG.trials[0].spec), np.random.default_rng(0), []
    for t in BIG.trials:
        block, state = init_block(t.spec, t.seeds, t.hparams, data)
        loss = rng.lognormal(-4, 1, (block.num_members, 50)).astype(np.float32)
        history = History(
            block.seeds,
            block.hparams,
            np.arange(1, 51, dtype=np.int32),
            loss,
            {"loss": loss * 2},
            {"loss": loss * 3},
            np.zeros(block.num_members, bool),
        )
        out.append(
            SavedBlock(t.spec, block.seeds, block.hparams, data_shapes(data), state, history, t.trial_key, False)
        )
    return out


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    """4 configs x 1000 members of a tiny net, shards of 64 KiB, members.parquet in 4 KiB pieces."""
    path = tmp_path_factory.mktemp("big") / "ensembles"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(files, "PIECE_BYTES", PIECE_BYTES)
        aggregate_blocks(path, _big_blocks(), plan=BIG, shard_bytes=SHARD_BYTES)
    return path


def _pieces(ranges: list[tuple[int, int]], size: int) -> int:
    """Bytes of the pieces that cover ``ranges`` (what a reader that verifies pieces reads at most)."""
    covered = {i for start, end in ranges for i in range(start // PIECE_BYTES, (end - 1) // PIECE_BYTES + 1)}
    return sum(min(PIECE_BYTES, size - i * PIECE_BYTES) for i in covered)


def _chunk(meta, group: int, name: str) -> tuple[int, int]:
    column = next(c for c in map(meta.row_group(group).column, range(meta.num_columns)) if c.path_in_schema == name)
    start = column.dictionary_page_offset if column.has_dictionary_page else column.data_page_offset
    return start, start + column.total_compressed_size


def test_row_groups_follow_the_shards_and_never_hold_two_configs(big):
    store = Store.open(big)
    meta = pq.ParquetFile(f"{store.root}/members.parquet").metadata
    shards = [
        (c.config_id, min(c.members_per_shard, c.num_members - i * c.members_per_shard))
        for c in sorted(store.configs.values(), key=lambda c: c.first_member)
        for i in range(len(c.files))
    ]
    assert len(shards) > 4 * 2
    groups = [meta.row_group(i) for i in range(meta.num_row_groups)]
    assert [g.num_rows for g in groups] == [n for _, n in shards]
    for group, (cid, _) in zip(groups, shards):
        stats = {group.column(j).path_in_schema: group.column(j).statistics for j in range(group.num_columns)}
        assert stats["config_id"].min == stats["config_id"].max == cid
        assert stats["seed"].has_min_max and stats["depth"].has_min_max and stats["member_id"].has_min_max
        assert stats["test_loss"] is None and stats["trial_id"] is None  # none where no query selects by them


def test_a_query_reads_one_row_group_and_one_shard(big):
    fs, counter = counting_filesystem()
    size = json.loads((big / "manifest.json").read_text())["files"]["members.parquet"]["bytes"]
    ens = load(str(big), storage_filesystem=fs)
    root = ens._store.root
    members = f"{root}/members.parquet"
    meta = pq.ParquetFile(members).metadata
    loaded = counter.by_file()
    footer = _pieces([(size - 64 * 2**10, size)], size)  # pyarrow's speculative footer read: its last 64 KiB
    assert loaded[members][1] <= footer < size / 4 and len(ens) == 4000  # no member rows read
    assert not any(k.endswith(".eqx") for k in loaded)

    counter.reset()
    config = ens._store.configs[BIG.trials[4].config_id]  # depth 3
    assert BIG.trials[4].spec.model.depth == 3
    net = ens.where(depth=3).member(seed=777)
    read = counter.by_file()
    first_group = sum(len(c.files) for c in ens._store.configs.values() if c.first_member < config.first_member)
    shard = 777 // config.members_per_shard
    groups = range(first_group, first_group + len(config.files))
    index = [c for c in pq.ParquetFile(members).schema_arrow.names if "history" not in c]
    bound = _pieces(
        [_chunk(meta, g, "depth") for g in groups] + [_chunk(meta, first_group + shard, c) for c in index], size
    )
    assert read[members][1] <= bound < size / 4, (read[members][1], bound, size)
    leaves = {Path(k).relative_to(root).as_posix(): v for k, v in read.items() if k.endswith(".eqx")}
    assert list(leaves) == [config.files[shard]] and leaves[config.files[shard]][0] == 1  # one shard, opened once
    one = ens._store.read(config.config_id, [777])
    assert all(
        np.array_equal(a, b[0])
        for a, b in zip(jax.tree_util.tree_leaves(eqx.filter(net, eqx.is_array)), jax.tree_util.tree_leaves(one))
    )


def test_a_tampered_row_group_is_refused_when_read_and_by_verify(big, tmp_path):
    copy = Path(shutil.copytree(big.resolve(), tmp_path / "copy"))
    meta = pq.ParquetFile(copy / "members.parquet").metadata
    start, end = _chunk(meta, 0, "test_loss")  # a loss of the first config's first shard
    data = bytearray((copy / "members.parquet").read_bytes())
    data[end - 1] ^= 0x01  # same size; the page CRC would catch it too, but only a digest catches a forger
    (copy / "members.parquet").write_bytes(bytes(data))
    ens = load(copy)  # the footer's pieces are intact
    configs = sorted(ens._store.configs.values(), key=lambda c: c.first_member)
    depth = {t.config_id: t.spec.model.depth for t in BIG.trials}
    first, last = depth[configs[0].config_id], depth[configs[-1].config_id]
    assert len(ens.where(depth=last).table) == 1000  # the last config's row groups lie in other pieces
    with pytest.raises(StoreError, match=r"members.parquet'?: checksum mismatch in bytes \d+\.\.\d+"):
        _ = ens.where(depth=first).table
    with pytest.raises(StoreError, match=r"members.parquet'?: checksum mismatch"):
        Store.open(copy).verify()
