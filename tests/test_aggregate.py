"""The aggregator: restacking, member order, missing / duplicate members, idempotence,
incremental adds, sharding, atomicity under SIGKILL, non-local filesystems."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import equinox as eqx
import jax
import numpy as np
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from _blocks import train_trial, trained_blocks, write_sweep
from helpers import file_bytes, member, tiny_spec, tree_allclose

from sweep import StoreError, aggregate, load
from sweep.planning import Plan, make_plan
from sweep.store import Store, aggregate_blocks

SPEC = tiny_spec(grid={"model.depth": [1, 2], "optimizer.learning_rate": [1e-3, 3e-3]})
PLAN = make_plan(SPEC)  # 2 configs x 2 blocks of 2 seeds, each block with both learning rates
MORE = make_plan(
    SPEC.__class__.from_dict(SPEC.to_dict() | {"seeds": 6}),
    done=[(t.config_id, s) for t in PLAN.trials for s in t.seeds],
)
PLAN_MORE = Plan(MORE.spec, PLAN.trials + MORE.trials, PLAN.seeds_per_trial)


def _leaves(tree) -> list:
    return jax.tree_util.tree_leaves(eqx.filter(tree, eqx.is_array))


@pytest.fixture
def sweep_dir(tmp_path):
    return write_sweep(tmp_path / "sweep", PLAN, trained_blocks(PLAN))


def test_round_trip_restacks_trials_bit_identically(sweep_dir):
    path = aggregate(sweep_dir, progress=False)
    assert path == f"{sweep_dir}/ensembles" and os.path.islink(path)
    ens = load(sweep_dir)
    table = ens.table
    assert len(ens) == 16 and table["member_id"].to_pylist() == list(range(16))
    for block in trained_blocks(PLAN):
        depth = block.spec.model.depth
        for i, (h, seed) in enumerate((h, s) for h in block.hparams for s in block.seeds):
            got = ens.member(seed=seed, depth=depth, learning_rate=h["learning_rate"])
            want = [a[i] for a in _leaves(block.state.params)]
            assert tree_allclose(_leaves(got), want, exact=True)
            row = ens.where(seed=seed, depth=depth, learning_rate=h["learning_rate"]).table.to_pylist()[0]
            assert row["trial_id"] == block.trial_id and row["status"] == "ok" and row["epochs"] == 4
            assert row["test_loss_history"] == block.history.test_loss[i].tolist()
            assert row["val_loss_history"] == block.history.val_loss[i].tolist()
            assert (row["val_loss"], row["test_loss"]) == (
                block.history.val_loss[i, -1],
                block.history.test_loss[i, -1],
            )
            assert row["train_loss"] == block.history.train_loss[i, -1] and row["history_epochs"] == [2, 4]


def test_metric_columns_are_those_of_the_specs_null_where_a_config_has_no_such_value(tmp_path):
    import sweep

    fast = sweep.Training(epochs=2, batch_size=16, report_every=1)
    spec = tiny_spec(training=fast.replace(metrics=["nrmse"]), seeds=2)
    no_val = tiny_spec(
        training=fast.replace(loss="mae", metrics=["mae", "nrmse"]),
        seeds=2,
        name="b",
        problem=sweep.Problem("heat1d", num_points=16, num_samples=60, val_fraction=0),
    )
    blocks = [train_trial(t) for t in [*make_plan(spec).trials, *make_plan(no_val).trials]]
    ens = load(aggregate_blocks(tmp_path / "s", blocks))
    table = ens.table
    metrics = Store.open(tmp_path / "s").metrics  # in the order the trials (by id) first name them
    assert sorted(metrics) == ["mae", "nrmse"]
    values = ["train_loss", "val_loss", "test_loss", *(f"{split}_{m}" for m in metrics for split in ("val", "test"))]
    assert [c for c in table.column_names if c in values] == values
    assert [c for c in table.column_names if c.endswith("_history")] == [f"{c}_history" for c in values]
    for block in blocks:
        rows = ens.where(config_id=block.spec.config_id).table.to_pylist()
        for i, row in enumerate(rows):
            for split in ("val", "test"):
                for name in ("loss", "nrmse", "mae"):
                    curve = getattr(block.history, split).get(name)
                    column = f"{split}_{name}"
                    if curve is None:  # no validation set, or a metric this config does not evaluate
                        assert row[column] is None and row[f"{column}_history"] is None
                    else:
                        assert row[column] == curve[i, -1] and row[f"{column}_history"] == curve[i].tolist()
    assert ens.table.filter(pc.is_null(ens.table["val_loss"]))["config_id"].unique().to_pylist() == [no_val.config_id]


def test_member_order_is_config_then_hyperparameters_then_seed(sweep_dir):
    aggregate(sweep_dir, progress=False)
    table = pq.read_table(f"{sweep_dir}/ensembles/members.parquet")
    keys = list(zip(table["config_id"].to_pylist(), table["learning_rate"].to_pylist(), table["seed"].to_pylist()))
    assert keys == sorted(keys) and len(set(keys)) == 16
    assert table.column_names[:6] == ["member_id", "config_id", "seed", "trial_id", "depth", "learning_rate"]
    configs = pq.read_table(f"{sweep_dir}/ensembles/configs.parquet").to_pylist()
    assert [c["first_member"] for c in configs] == [0, 8] and [c["num_members"] for c in configs] == [8, 8]
    store = Store.open(sweep_dir)
    stacked = load(sweep_dir).where(config_id=configs[0]["config_id"]).stacked()
    for i, key in enumerate(keys[:8]):  # stacked order = table order, across both trials of the config
        block = next(b for b in trained_blocks(PLAN) if b.trial_id == table["trial_id"][i].as_py())
        j = [(h["learning_rate"], s) for h in block.hparams for s in block.seeds].index(key[1:])
        assert tree_allclose(_leaves(member(stacked, i)), [a[j] for a in _leaves(block.state.params)], exact=True)
    assert store.manifest["num_members"] == 16 and store.manifest["missing"] == []


def test_aggregating_twice_gives_identical_files(sweep_dir):
    first = file_bytes(aggregate(sweep_dir, progress=False))
    second = file_bytes(aggregate(sweep_dir, progress=False))
    assert first == second and set(first) == {
        "members.parquet",
        "configs.parquet",
        "samples.parquet",
        "val_samples.parquet",
        "ensemble_scores.parquet",
        "manifest.json",
        *(f"{c}.eqx" for c in PLAN.config_ids),
    }
    assert sorted(os.listdir(sweep_dir / ".ensembles")) == [".lock", "000001", "000002", "CURRENT"]
    aggregate(sweep_dir, progress=False)  # older generations are collected
    assert sorted(os.listdir(sweep_dir / ".ensembles")) == [".lock", "000002", "000003", "CURRENT"]


def test_more_seeds_are_added_and_existing_members_unchanged(sweep_dir):
    before = load(aggregate(sweep_dir, progress=False))
    write_sweep(sweep_dir, PLAN_MORE, [train_trial(t) for t in MORE.trials])
    after = load(aggregate(sweep_dir, progress=False))
    assert len(after) == 24 and sorted(set(after.table["seed"].to_pylist())) == list(range(6))
    for row in before.table.to_pylist():
        query = {"seed": row["seed"], "depth": row["depth"], "learning_rate": row["learning_rate"]}
        assert tree_allclose(before.member(**query), after.member(**query), exact=True)
        assert after.where(**query).table.to_pylist()[0]["test_loss_history"] == row["test_loss_history"]


def test_missing_members_are_listed_and_reported(tmp_path):
    blocks = trained_blocks(PLAN)
    root = write_sweep(tmp_path / "sweep", PLAN, blocks[1:])
    with pytest.warns(UserWarning, match=r"4 planned member\(s\) of 1 trial\(s\) have no checkpoint"):
        aggregate(root, progress=False)
    manifest = Store.open(root).manifest
    assert manifest["num_missing"] == 4 and manifest["num_members"] == 12
    (missing,) = manifest["missing"]
    assert missing["trial_id"] == blocks[0].trial_id
    assert sorted((m["seed"], m["learning_rate"]) for m in missing["members"]) == [
        (0, 1e-3),
        (0, 3e-3),
        (1, 1e-3),
        (1, 3e-3),
    ]


def test_duplicate_member_is_an_error(tmp_path):
    block = trained_blocks(PLAN)[0]
    with pytest.raises(StoreError, match=r"duplicate member: seed 0 .* in trial '.*' and in trial 'copy'"):
        aggregate_blocks(tmp_path / "store", [block, block._replace(trial_id="copy")])
    assert not (tmp_path / "store").exists()


def test_status_of_diverged_and_stopped_members(tmp_path):
    done = trained_blocks(PLAN)[0]
    stopped = train_trial(PLAN.trials[1], num_chunks=1)
    diverged = done._replace(history=done.history._replace(diverged=np.array([True, False, False, False])))
    aggregate_blocks(tmp_path / "store", [diverged, stopped])
    rows = load(tmp_path / "store").table.to_pylist()
    status = {(r["trial_id"], r["seed"], r["learning_rate"]): (r["status"], r["epochs"]) for r in rows}
    assert status[(done.trial_id, 0, 1e-3)] == ("diverged", 4)
    assert status[(done.trial_id, 1, 1e-3)] == ("ok", 4)
    assert {v for k, v in status.items() if k[0] == stopped.trial_id} == {("stopped_early", 2)}


def test_sharded_leaves_hold_consecutive_members(tmp_path):
    blocks = trained_blocks(PLAN)
    aggregate_blocks(tmp_path / "whole", blocks, plan=PLAN)
    member_bytes = sum(a[0].nbytes for a in jax.tree_util.tree_leaves(blocks[0].state.params))
    aggregate_blocks(tmp_path / "sharded", blocks, plan=PLAN, shard_bytes=3 * member_bytes)
    store = Store.open(tmp_path / "sharded")
    config = store.configs[PLAN.config_ids[0]]
    assert config.members_per_shard == 3 and config.files == tuple(
        f"{config.config_id}/shard-{i:05d}.eqx" for i in range(3)
    )
    whole, sharded = load(tmp_path / "whole"), load(tmp_path / "sharded")
    for cid in PLAN.config_ids:
        assert tree_allclose(whole.where(config_id=cid).stacked(), sharded.where(config_id=cid).stacked(), exact=True)
    assert whole.table.equals(sharded.table)
    # checked before reading (`sweep serve`): the files holding the members asked for, those alone
    last = tmp_path / "sharded" / config.files[2]
    last.write_bytes(last.read_bytes()[:-1] + bytes([last.read_bytes()[-1] ^ 1]))
    store.check_leaves(range(config.first_member, config.first_member + 6))  # shards 0 and 1
    with pytest.raises(StoreError, match=r"shard-00002.eqx'?: checksum mismatch"):
        store.check_leaves([config.first_member + 6])


def test_non_local_filesystem(tmp_path, sweep_dir):
    # A SubTreeFileSystem is not a LocalFileSystem, but over a local disk it is one: paths inside it,
    # the lock, the flushes and the store link as on a local disk (object storage: test_storage_aggregate)
    fs = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    path = aggregate("sweep", filesystem=fs, progress=False)
    assert path == "sweep/ensembles" and (sweep_dir / "ensembles").readlink() == Path(".ensembles/000001")
    ens = load("sweep", storage_filesystem=fs)
    assert len(ens) == 16 and load(path, storage_filesystem=fs).table.equals(ens.table)


_KILLER = textwrap.dedent("""
    import os, signal, sys
    import sweep, sweep.store._generations as layout, sweep.store._writer as writer
    where = sys.argv[2]
    def kill(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)
    if where == "leaves":  # after the first leaves file of the new generation
        write = writer.write_leaves
        writer.write_leaves = lambda *a: (write(*a), kill())
    else:
        setattr(layout, where, kill)
    sweep.aggregate(sys.argv[1], progress=False)
""")


@pytest.mark.parametrize("where", ["leaves", "write_text_atomic", "_swap_link", "_collect"])
def test_sigkill_leaves_the_previous_or_the_new_store(tmp_path, sweep_dir, where):
    old = load(aggregate(sweep_dir, progress=False)).table
    write_sweep(sweep_dir, PLAN_MORE, [train_trial(t) for t in MORE.trials])
    done = subprocess.run([sys.executable, "-c", _KILLER, str(sweep_dir), where], capture_output=True)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()[-2000:]
    # The CURRENT pointer commits (readers follow it, through the ensembles link too); the link
    # itself, for other tools, follows right after.
    new = where in ("_swap_link", "_collect")
    assert os.readlink(sweep_dir / "ensembles") == (".ensembles/000002" if where == "_collect" else ".ensembles/000001")
    for path in (sweep_dir, sweep_dir / "ensembles"):
        store = Store.open(path)
        store.verify()
        ens = load(path)
        assert len(ens) == (24 if new else 16)
        if len(ens) == 16:
            assert ens.table.equals(old)
        for cid in PLAN.config_ids:
            ens.where(config_id=cid).stacked()  # every leaves file is readable and matches
    aggregate(sweep_dir, progress=False)
    assert (
        len(load(sweep_dir)) == 24 and len(os.listdir(sweep_dir / ".ensembles")) == 4
    )  # 2 generations, CURRENT, .lock


def test_sigkill_during_the_first_aggregation_leaves_no_store(sweep_dir):
    done = subprocess.run([sys.executable, "-c", _KILLER, str(sweep_dir), "leaves"], capture_output=True)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()[-2000:]
    with pytest.raises(StoreError, match="not a seed-sweep store"):
        load(sweep_dir)
    aggregate(sweep_dir, progress=False)
    assert len(load(sweep_dir)) == 16 and sorted(os.listdir(sweep_dir / ".ensembles")) == [".lock", "000002", "CURRENT"]


def test_no_checkpoints_is_an_error(tmp_path):
    (tmp_path / "plan.json").write_text(json.dumps(PLAN.to_dict()))
    with pytest.raises(StoreError, match="no block checkpoints"):
        aggregate(tmp_path, progress=False)


def test_a_generation_is_on_the_disk_before_current_names_it(sweep_dir, monkeypatch):
    """A power loss must not leave CURRENT naming files the disk never got: every file of the new
    generation, its directory, and then CURRENT's rename are flushed, in that order."""
    events = []
    fsync, replace = os.fsync, os.replace

    def flushed(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        fsync(fd)

    def renamed(src, dst, **kw):
        events.append(("replace", os.fspath(dst)))
        replace(src, dst, **kw)

    monkeypatch.setattr(os, "fsync", flushed)
    monkeypatch.setattr(os, "replace", renamed)
    aggregate(sweep_dir, progress=False)
    generation = str(sweep_dir / ".ensembles" / "000001")
    pointer = [i for i, e in enumerate(events) if e == ("replace", str(sweep_dir / ".ensembles" / "CURRENT"))]
    assert len(pointer) == 1
    before = {path for kind, path in events[: pointer[0]] if kind == "fsync"}
    assert {f"{generation}/{name}" for name in os.listdir(generation)} | {generation} <= before
    assert events[pointer[0] + 1] == ("fsync", str(sweep_dir / ".ensembles"))  # the rename itself


def test_an_unreadable_current_is_replaced_by_the_next_aggregation(sweep_dir):
    aggregate(sweep_dir, progress=False)
    (sweep_dir / ".ensembles" / "CURRENT").write_text("")  # a write the disk lost
    with pytest.raises(StoreError, match=r"CURRENT': got ''; expected a generation number. Re-run `sweep aggregate`"):
        load(sweep_dir)
    aggregate(sweep_dir, progress=False)  # what the error says to do works
    assert len(load(sweep_dir)) == 16
    # the generation the link named is kept beside the new one, for readers that have it open
    assert sorted(os.listdir(sweep_dir / ".ensembles")) == [".lock", "000001", "000002", "CURRENT"]
