"""The store format: checksums, corrupt / truncated / mismatched files, formats,
no pickle, and Parquet that other tools (DuckDB) read directly."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import equinox as eqx
import jax
import numpy as np
import pyarrow.parquet as pq
import pytest
from _blocks import STORE_PLAN, datasets_of, trained_blocks
from helpers import tiny_spec, tree_allclose

from sweep import StoreError, load, load_data
from sweep.planning import make_plan
from sweep.store import FORMAT, Store

PLAN = STORE_PLAN  # `original` and `store` (conftest.py) are its committed store and a copy of it


def _leaves_file(store: Path) -> Path:
    return store / f"{PLAN.config_ids[0]}.eqx"


def _edit_manifest(store: Path, **changes) -> None:
    manifest = json.loads((store / "manifest.json").read_text())
    (store / "manifest.json").write_text(json.dumps(manifest | changes))


def test_a_copied_store_directory_loads_and_verifies(store):
    Store.open(store).verify()
    assert len(load(store)) == 16


def test_not_a_store(tmp_path):
    with pytest.raises(StoreError, match=r"nowhere' does not exist; give the directory of a sweep") as missing:
        load(tmp_path / "nowhere")
    assert "sweep aggregate" not in str(missing.value)  # aggregating cannot help: the path is wrong
    (tmp_path / "spec.toml").write_text("")
    with pytest.raises(StoreError, match=r"spec.toml' is a file; give the directory of a sweep"):
        load(tmp_path / "spec.toml")
    with pytest.raises(StoreError, match=r"^got 3; give the directory of a sweep \(made by `sweep run`\), as a path$"):
        load(3)  # type: ignore[arg-type]
    with pytest.raises(StoreError, match=r"is not a seed-sweep store nor a sweep directory \(it holds no 'ensembles' "):
        load(tmp_path)  # a folder of something else (data): aggregating cannot help
    for name in ("b", "a"):  # a storage folder (`--storage`): the sweeps in it are named
        (tmp_path / "runs" / name).mkdir(parents=True)
        (tmp_path / "runs" / name / "plan.json").write_text("{}")
    with pytest.raises(StoreError) as folder:
        load(tmp_path / "runs")
    runs = str(tmp_path / "runs")
    assert f"{runs!r} is a storage folder holding 2 sweeps, not a store: give one of them ({runs + '/a'!r}, " in str(
        folder.value
    )
    assert "2 sweeps, not a store" in str(folder.value)
    with pytest.raises(StoreError, match=r"is not a seed-sweep store.*run `sweep aggregate`"):
        load(tmp_path / "runs" / "a")  # a sweep directory not aggregated yet: nothing listed
    (tmp_path / "runs" / "a" / "ensembles").mkdir()  # an aggregation stopped before its first commit
    with pytest.raises(StoreError, match=r"is not a seed-sweep store.*run `sweep aggregate`"):
        load(tmp_path / "runs" / "a" / "ensembles")
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(StoreError, match=r"manifest.json'?: not valid JSON"):
        load(tmp_path)
    (tmp_path / "manifest.json").write_text('{"hello": 1}')
    with pytest.raises(StoreError, match="not a seed-sweep store manifest"):
        load(tmp_path)


def test_newer_and_older_formats_are_refused(store):
    _edit_manifest(store, format=99)
    with pytest.raises(
        StoreError, match=rf"manifest.json'?: store format 99 is newer than this seed-sweep reads \(format {FORMAT}\)"
    ):
        load(store)
    _edit_manifest(store, format=1)  # before validation splits: its members were chosen on nothing honest
    with pytest.raises(
        StoreError, match=r"store format 1 was written by an older seed-sweep \(members trained without a validation"
    ):
        load(store)


def test_truncated_leaves_file(store):
    path = _leaves_file(store)
    path.write_bytes(path.read_bytes()[:-7])
    ens = load(store)  # tables are fine; the leaves are read (and checked) when needed
    with pytest.raises(
        StoreError, match=rf"{path.name}'?: \d+ bytes, but the manifest records \d+; the file is truncated"
    ):
        ens.member(seed=0, config_id=PLAN.config_ids[0], learning_rate=1e-3)


def test_checksum_mismatch(store):
    path = _leaves_file(store)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x40  # a flipped bit in the last weight: same size, still parses
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError, match=rf"{path.name}'?: checksum mismatch"):
        load(store).where(config_id=PLAN.config_ids[0]).stacked()
    with pytest.raises(StoreError, match=rf"{path.name}'?: checksum mismatch"):
        Store.open(store).verify()


def test_leaves_file_that_does_not_match_its_config(store):
    # The other config's file (depth 2) in place of this one's, with a consistent manifest.
    path, other = _leaves_file(store), store / f"{PLAN.config_ids[1]}.eqx"
    shutil.copy(other, path)
    files = json.loads((store / "manifest.json").read_text())["files"]
    _edit_manifest(store, files=files | {path.name: files[other.name]})
    with pytest.raises(
        StoreError, match=rf"{path.name}'?: leaf \d+ is float32.*needs float32.*does not match its config"
    ):
        load(store).where(config_id=PLAN.config_ids[0]).stacked()


def test_truncated_members_table(store):
    path = store / "members.parquet"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(StoreError, match=r"members.parquet'?: \d+ bytes, but the manifest records \d+"):
        load(store)


def test_every_file_and_folder_of_a_generation_is_on_the_disk_before_it_is_committed(tmp_path, monkeypatch):
    """A power loss after the commit must not leave ``CURRENT`` naming files still in the page
    cache: the leaves files in the configs' folders, and the folders, flushed before it is written."""
    import os

    from sweep import _fs
    from sweep.store import aggregate_blocks

    flushed, written, flush = [], [], _fs._flushed
    monkeypatch.setattr(_fs, "_flushed", lambda path, *a: flushed.append(os.fspath(path)) or flush(path, *a))
    write = _fs.write_text_atomic
    monkeypatch.setattr(
        "sweep.store._generations.write_text_atomic", lambda *a: written.append(list(flushed)) or write(*a)
    )
    path = tmp_path / "ensembles"
    blocks = trained_blocks(STORE_PLAN)
    aggregate_blocks(path, blocks, plan=STORE_PLAN, datasets=datasets_of(STORE_PLAN), shard_bytes=200)  # shards
    generation = Path(os.path.realpath(path))
    below = [str(p) for p in generation.rglob("*")]
    assert any(Path(p).is_dir() for p in below) and any(p.endswith(".eqx") for p in below)  # configs' folders
    before_commit = set(written[-1])
    assert set(below) | {str(generation)} <= before_commit


def test_a_block_checkpoint_is_on_the_disk_before_it_replaces_the_older_one(tmp_path, monkeypatch):
    import os

    from sweep import _fs
    from sweep.training import save_block

    flushed, flush = [], _fs._flushed
    monkeypatch.setattr(_fs, "_flushed", lambda path, *a: flushed.append(os.fspath(path)) or flush(path, *a))
    (block,) = trained_blocks(make_plan(tiny_spec(seeds=1)))
    fields = dict(spec=block.spec, state=block.state, history=block.history, shapes=block.shapes)
    save_block(tmp_path / "checkpoint", **fields)
    names = {Path(p).name for p in flushed}
    assert {"state.eqx", "block.json", tmp_path.name} <= names  # the files, then the rename in its folder
    assert any(Path(p).name.startswith(".checkpoint.") for p in flushed)  # the folder written aside


def test_loading_never_unpickles(original, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("pickle used while loading a store")

    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, refuse)
    ens = load(original.parent)
    sub = ens.where(depth=2)
    x = np.asarray(load_data(sub.spec).test_x[:3])
    assert sub.predict(x).shape == (8, 3, 1, 16) and ens.summary().num_rows == 4
    sub.member(seed=1, learning_rate=1e-3)
    Store.open(original).verify()


def test_leaves_files_are_plain_equinox(original):
    store = Store.open(original)
    cid = PLAN.config_ids[1]
    shapes, _ = store.template(cid)
    like = jax.tree_util.tree_map(lambda s: jax.ShapeDtypeStruct((8, *s.shape), s.dtype), shapes)
    loaded = eqx.tree_deserialise_leaves(f"{store.root}/{cid}.eqx", like)
    assert tree_allclose(loaded, store.read(cid, np.arange(8)), exact=True)


def test_members_table_is_sorted_and_row_subsets_read(original):
    store = Store.open(original)
    meta = pq.ParquetFile(f"{store.root}/members.parquet").metadata
    assert [c.column_index for c in meta.row_group(0).sorting_columns] == [1, 0]  # config_id, member_id
    table = store.members(["member_id", "seed"], member_ids=[9, 2, 5])
    assert table.column_names == ["member_id", "seed"] and table["member_id"].to_pylist() == [9, 2, 5]


def test_duckdb_reads_members_parquet(original):
    import duckdb

    rows = duckdb.sql(
        f"SELECT config_id, learning_rate, count(*) AS n, avg(test_loss) AS mean FROM '{original}/members.parquet' "
        "GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    assert [r[:3] for r in rows] == [(c, lr, 4) for c in PLAN.config_ids for lr in (1e-3, 3e-3)]
    ens = load(original)
    for cid, lr, _, mean in rows:
        losses = ens.where(config_id=cid, learning_rate=lr).table["test_loss"].to_numpy()
        assert mean == pytest.approx(losses.astype(np.float64).mean())
