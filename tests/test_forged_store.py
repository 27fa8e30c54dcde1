"""A store forged by its sender, its checksums sealed again: every field a reader takes from the
manifest and the tables is checked before it is used, so that reading never hangs, never sets
aside memory the files do not hold, and ends in a `StoreError` naming the file and the field
(not a KeyError, TypeError, MemoryError or RecursionError from inside a library)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import threading
from pathlib import Path

import jax
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _blocks import STORE_PLAN, trained_blocks, write_sweep
from helpers import invoke

from sweep import StoreError, aggregate, load
from sweep.store import Store

CID = STORE_PLAN.config_ids[0]


def _manifest(store: Path) -> dict:
    return json.loads((store / "manifest.json").read_text())


def _edit_manifest(store: Path, **changes) -> None:
    (store / "manifest.json").write_text(json.dumps(_manifest(store) | changes))


def _sealed(store: Path, name: str, data: bytes) -> None:
    """``name`` replaced by ``data``, its record in the manifest made to match (as a forger would)."""
    (store / name).write_bytes(data)
    record = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    _edit_manifest(store, files=_manifest(store)["files"] | {name: record})


def _sealed_table(store: Path, name: str, table: pa.Table) -> None:
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    _sealed(store, name, buffer.getvalue())


def test_a_leaves_header_claiming_terabytes_is_refused_before_its_memory_is_set_aside(store):
    """A record's header (shape) is compared with the leaf the config needs before its data is read."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (10**12,)})
    path = store / f"{CID}.eqx"
    data = path.read_bytes()
    _sealed(store, path.name, header.getvalue() + data)  # the real leaves after it: the file is no smaller
    with pytest.raises(StoreError, match=rf"{path.name}'?: leaf 0 is float32\[1000000000000\], config {CID}"):
        load(store).where(config_id=CID).stacked()


def test_a_spec_whose_model_needs_more_than_its_file_holds_sets_nothing_aside(store, monkeypatch):
    """Parameters are set aside only after a leaves file matched the model its spec gives: a spec
    that says hidden=10**12 (its id recomputed) ends in the file's size, not a MemoryError."""
    built = Store.template

    def huge(self, config_id):
        like, static = built(self, config_id)
        return jax.tree_util.tree_map(lambda s: jax.ShapeDtypeStruct((10**12, *s.shape), s.dtype), like), static

    monkeypatch.setattr(Store, "template", huge)
    with pytest.raises(StoreError, match=rf"{CID}.eqx'?: \d+ bytes, but config {CID} \(\d+ members of .*\) take \d+"):
        load(store).where(config_id=CID).stacked()
    with pytest.raises(StoreError, match=r"take \d+; the leaves file does not match its config"):
        Store.open(store).verify()


def test_configs_claiming_more_members_than_the_members_table_holds_are_refused(store):
    table = pq.read_table(store / "configs.parquet")
    last = int(np.argmax(table["first_member"].to_numpy()))  # the members after it are no other config's
    counts, per_shard = table["num_members"].to_pylist(), table["members_per_shard"].to_pylist()
    counts[last] = per_shard[last] = 10**12  # one leaves file still: its name is the one listed
    table = table.set_column(2, "num_members", pa.array(counts, pa.int64()))
    table = table.set_column(4, "members_per_shard", pa.array(per_shard, pa.int64()))
    _sealed_table(store, "configs.parquet", table)
    with pytest.raises(StoreError, match=r"configs.parquet'?: config \w+ \(1000000000000 members .* does not fit"):
        load(store)


def test_a_leaves_file_cut_short_inside_a_leaf_is_named(store):
    path = store / f"{CID}.eqx"
    _sealed(store, path.name, path.read_bytes()[:-7])  # every header there, the last leaf's data short
    with pytest.raises(StoreError, match=rf"{path.name}'?: leaf \d+ ends early \(\d+ of \d+ values\)"):
        load(store).where(config_id=CID).stacked()


def test_configs_with_nulls_or_fewer_members_than_the_members_table_are_refused(store):
    table = pq.read_table(store / "configs.parquet")
    shapes = table["target_shape"].to_pylist()
    _sealed_table(store, "configs.parquet", table.set_column(7, "target_shape", pa.array([None, *shapes[1:]])))
    with pytest.raises(StoreError, match=r"configs.parquet'?: config '\w+' has nulls in \['target_shape'\]"):
        load(store)
    last = int(np.argmax(table["first_member"].to_numpy()))
    counts = table["num_members"].to_pylist()
    counts[last] -= 1  # its leaves file still the one listed
    _sealed_table(store, "configs.parquet", table.set_column(2, "num_members", pa.array(counts, pa.int64())))
    with pytest.raises(
        StoreError,
        match=r"configs hold 15 members, members.parquet 16; .* Re-run `sweep aggregate` on its sweep directory \(a store received alone: ask its sender again\)",
    ):
        load(store)


@pytest.mark.parametrize(
    ("column", "change", "said"),
    [
        ("val_loss", lambda t, i: t.remove_column(i), r"no column 'val_loss'"),
        (
            "val_loss",
            lambda t, i: t.set_column(i, "val_loss", t["val_loss"].cast(pa.string())),
            r"column 'val_loss' is string, not float",
        ),
        (
            "seed",
            lambda t, i: t.set_column(i, "seed", t["seed"].cast(pa.string())),
            r"column 'seed' is string, not integer",
        ),
    ],
)
def test_a_members_table_of_other_columns_is_named_by_load_and_verify(store, column, change, said):
    table = pq.read_table(store / "members.parquet")
    _sealed_table(store, "members.parquet", change(table, table.schema.get_field_index(column)))
    for read in (lambda: load(store).index, lambda: Store.open(store).verify()):
        with pytest.raises(StoreError, match=rf"members.parquet'?: {said}.*the table was altered"):
            read()


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"columns": [1]}, r"`columns` is '\[1\]'; expected the list of grid columns"),
        (
            {"columns": [{"key": "model.depth", "vmapped": False}]},
            r"`columns` is .*; expected the list of grid columns",
        ),
        ({"columns": [{"name": "d\x1b]0;PWNED\x07", "key": "model.depth", "vmapped": False}]}, r"`columns` is .*\\x1b"),
        ({"race": "x"}, r"`race` is 'x'; expected the record of a race"),
        ({"num_members": "lots"}, r"`num_members` is 'lots'; expected a count"),
        ({"format": True}, r"not a seed-sweep store manifest \(no integer `format`"),
    ],
)
def test_manifest_fields_of_another_kind_are_named(store, changes, said):
    _edit_manifest(store, **changes)
    with pytest.raises(StoreError, match=rf"manifest.json'?: {said}"):
        load(store)


def test_a_race_record_of_another_shape_is_named_when_read(store):
    _edit_manifest(store, race={})  # a dict, as a race's record is, without its fields
    with pytest.raises(StoreError, match=r"manifest.json: `race` is not the record of a race .*KeyError"):
        load(store).race()


def test_json_nested_too_deep_is_a_store_error(store):
    (store / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(StoreError, match=r"manifest.json'?: not valid JSON"):
        load(store)


def test_shapes_of_no_sample_are_refused(store):
    table = pq.read_table(store / "configs.parquet")
    shapes = table["sample_shape"].to_pylist()
    table = table.set_column(6, "sample_shape", pa.array([[-1, 16], *shapes[1:]], pa.list_(pa.int64())))
    _sealed_table(store, "configs.parquet", table)
    with pytest.raises(StoreError, match=r"configs.parquet'?: config \w+ has sample_shape \[-1, 16\]"):
        load(store)


@pytest.fixture
def sweep_dir(tmp_path) -> Path:
    root = write_sweep(tmp_path / "sweep", STORE_PLAN, trained_blocks(STORE_PLAN))
    aggregate(root, progress=False)
    return root


def _refused_in_time(read) -> str:
    """The message of the StoreError ``read`` raises, within 60 s (a reader blocked on a FIFO fails the test)."""
    outcome: list[BaseException] = []
    thread = threading.Thread(target=lambda: outcome.append(_raised(read)), daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the reader blocked"
    assert isinstance(outcome[0], StoreError), outcome
    return str(outcome[0])


def _raised(read) -> BaseException:
    try:
        read()
    except BaseException as e:  # noqa: BLE001  (the test inspects it)
        return e
    return AssertionError("read without an error")


def test_a_fifo_or_a_device_in_place_of_a_file_of_the_store_is_refused(sweep_dir):
    pointer = sweep_dir / ".ensembles" / "CURRENT"
    manifest = sweep_dir / ".ensembles" / pointer.read_text().strip() / "manifest.json"
    written = manifest.read_text()
    pointer.unlink()
    os.mkfifo(pointer)  # opening it to read would wait for a writer forever
    assert "CURRENT' is not a regular file" in _refused_in_time(lambda: load(sweep_dir))
    pointer.unlink()
    pointer.symlink_to("/dev/zero")  # reading it would never end
    assert "CURRENT' is a symbolic link (to '/dev/zero')" in _refused_in_time(lambda: load(sweep_dir))
    pointer.unlink()
    pointer.write_text(manifest.parent.name + "\n")
    manifest.unlink()
    os.mkfifo(manifest)
    assert "manifest.json' is not a regular file" in _refused_in_time(lambda: load(sweep_dir))
    result = invoke("status", sweep_dir)
    assert "ensembles: cannot be read" in result.output and "manifest.json' is not a regular file" in result.output
    manifest.unlink()
    manifest.write_text(written)
    members = manifest.parent / "members.parquet"  # a table too: opening a FIFO would wait for a writer
    members.unlink()
    os.mkfifo(members)
    assert "members.parquet' is not a regular file" in _refused_in_time(lambda: Store.open(sweep_dir).index())


def test_status_reads_the_manifest_as_load_does(sweep_dir):
    """`sweep status` says a store cannot be read where `sweep.load` refuses it (not "6 members stored")."""
    generation = sweep_dir / ".ensembles" / (sweep_dir / ".ensembles" / "CURRENT").read_text().strip()
    _edit_manifest(generation, num_members="lots")
    result = invoke("status", sweep_dir)
    assert "ensembles: cannot be read" in result.output and "`num_members` is 'lots'" in result.output
