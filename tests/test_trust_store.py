"""A store handed over by someone else: every file verified, every name inside the
store, no link followed out of it, and `Store.verify` / `sweep verify` reporting every problem."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from _blocks import STORE_PLAN, trained_blocks, write_sweep
from helpers import invoke

from sweep import StoreError, aggregate, load
from sweep.planning import read_plan
from sweep.store import FORMAT, Store, aggregate_blocks
from sweep.training import find_blocks

PLAN = STORE_PLAN  # `store` (conftest.py) is a private copy of its committed store, free to damage
CID = PLAN.config_ids[0]


@pytest.fixture
def sweeps(tmp_path) -> tuple[Path, Path]:
    """Two aggregated sweep directories (generations, CURRENT, the ensembles link)."""
    out = []
    for name in ("a", "b"):
        root = write_sweep(tmp_path / name, PLAN, trained_blocks(PLAN))
        aggregate(root, progress=False)
        out.append(root)
    return out[0], out[1]


def _record(path: Path) -> dict:
    data = path.read_bytes()
    return {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def _manifest(store: Path) -> dict:
    return json.loads((store / "manifest.json").read_text())


def _edit_manifest(store: Path, **changes) -> None:
    (store / "manifest.json").write_text(json.dumps(_manifest(store) | changes))


def _rewrite(store: Path, name: str, table: pa.Table, fix_manifest: bool) -> None:
    """Replace a table of the store, as the aggregator writes it (its row groups, sorting and
    statistics); ``fix_manifest``: as a forger who also updates its checksum."""
    sorting, statistics = (), None
    if name == "members.parquet":
        grid = [c["name"] for c in _manifest(store)["columns"]]
        sorting, statistics = ("config_id", "member_id"), ["member_id", "config_id", "seed", *grid]
    meta, start = pq.ParquetFile(store / name).metadata, 0
    with pq.ParquetWriter(
        store / name,
        table.schema,
        write_page_checksum=True,
        sorting_columns=[pq.SortingColumn(table.schema.get_field_index(c)) for c in sorting] or None,
        write_statistics=True if statistics is None else statistics,  # pyright: ignore[reportArgumentType]  (pyarrow also takes columns)
    ) as writer:
        for i in range(meta.num_row_groups):
            writer.write_table(table.slice(start, meta.row_group(i).num_rows).combine_chunks())
            start += meta.row_group(i).num_rows
    if fix_manifest:
        _edit_manifest(store, files=_manifest(store)["files"] | {name: _record(store / name)})


# -- every file verified -------------------------------------------------------------------------
def test_a_same_size_members_table_with_two_seeds_swapped_is_refused(store):
    path = store / "members.parquet"
    table, size, expected = pq.read_table(path), path.stat().st_size, _record(path)["sha256"]
    seeds = table["seed"].to_pylist()
    assert seeds[4:6] == [0, 1]  # one config, one learning rate: seeds 0 and 1
    seeds[4], seeds[5] = seeds[5], seeds[4]
    _rewrite(store, "members.parquet", table.set_column(2, "seed", pa.array(seeds, pa.int64())), fix_manifest=False)
    assert path.stat().st_size == size  # the size check alone cannot see it
    actual = _record(path)["sha256"]
    # the file is one piece (its footer included), so loading it, which reads the footer, checks it whole
    assert len(_manifest(store)["files"]["members.parquet"]["pieces"]) == 1
    message = rf"members.parquet'?: checksum mismatch.* sha256 {expected}.* the file has {actual}"
    with pytest.raises(StoreError, match=message):
        load(store)
    with pytest.raises(StoreError, match=message):
        Store.open(store).verify()


def test_a_forged_spec_is_refused_even_with_its_checksum_fixed(store):
    table = pq.read_table(store / "configs.parquet")
    specs = table["spec"].to_pylist()
    spec = json.loads(specs[0])
    spec["problem"] = {"name": "os:system", "command": "touch /tmp/forged"}
    specs[0] = json.dumps(spec)
    _rewrite(store, "configs.parquet", table.set_column(1, "spec", pa.array(specs)), fix_manifest=True)
    with pytest.raises(StoreError, match=rf"configs.parquet'?: config {CID} holds a spec whose id is [0-9a-f]{{12}}"):
        load(store)


def test_member_ids_that_do_not_match_their_configs_are_refused(store):
    table = pq.read_table(store / "members.parquet")
    config_ids = table["config_id"].to_pylist()
    config_ids[3], config_ids[12] = config_ids[12], config_ids[3]  # a row of each config in the other's range
    _rewrite(store, "members.parquet", table.set_column(1, "config_id", pa.array(config_ids)), fix_manifest=True)
    ens = load(store)  # reads no member rows yet; every read of them is checked
    for query in (lambda: ens.index, lambda: ens.where(config_id=CID).table, lambda: ens.member(seed=0, config_id=CID)):
        with pytest.raises(StoreError, match=r"member ids and config ids do not match configs.parquet"):
            query()


def test_a_missing_file_and_a_newer_format_are_named(store):
    (store / f"{CID}.eqx").unlink()
    ens = load(store)
    with pytest.raises(
        StoreError, match=rf"{CID}.eqx'?: listed in the manifest but missing: .*re-run `sweep aggregate`"
    ):
        ens.where(config_id=CID).stacked()
    _edit_manifest(store, format=FORMAT + 1)
    with pytest.raises(StoreError, match=rf"store format {FORMAT + 1} is newer"):
        load(store)


# -- confined to the store -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "name",
    [
        "../outside.eqx",
        "/etc/passwd",
        f"{CID}/../../outside.eqx",
        "a/./b.eqx",
        "members.parquet\x00",
        "sub/members.parquet",
        "..",
        "notes.txt",
    ],
)
def test_a_manifest_naming_a_file_outside_the_store_is_refused(store, name):
    files = _manifest(store)["files"]
    _edit_manifest(store, files=files | {name: files["members.parquet"]})
    with pytest.raises(
        StoreError, match=r"manifest.json'? `files`: names .*, which is not a plain name inside the store"
    ):
        load(store)


def test_configs_naming_leaves_outside_the_store_are_refused(store, tmp_path):
    shutil.copy(store / f"{CID}.eqx", tmp_path / "outside.eqx")
    table = pq.read_table(store / "configs.parquet")
    files = table["files"].to_pylist()
    files[0] = ["../outside.eqx"]
    _rewrite(store, "configs.parquet", table.set_column(5, "files", pa.array(files)), fix_manifest=True)
    with pytest.raises(StoreError, match=r"configs.parquet'? `files` of config .*'../outside.eqx'.*not a plain name"):
        load(store)


@pytest.mark.parametrize("name", ["members.parquet", "configs.parquet", "leaves"])
def test_a_link_inside_the_store_is_refused(store, tmp_path, name):
    # The link's target has the very bytes the manifest records: only the link gives it away.
    name = f"{CID}.eqx" if name == "leaves" else name
    shutil.move(store / name, tmp_path / name)
    (store / name).symlink_to(tmp_path / name)
    with pytest.raises(StoreError, match=rf"{name}'? is a symbolic link"):
        load(store).where(config_id=CID).stacked()


def test_a_linked_shard_directory_is_refused(tmp_path):
    blocks = trained_blocks(PLAN)
    aggregate_blocks(tmp_path / "sharded", blocks, plan=PLAN, shard_bytes=1)
    root = (tmp_path / "sharded").resolve()
    shutil.move(root / CID, tmp_path / "elsewhere")
    (root / CID).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(StoreError, match=rf"{CID}'? is a symbolic link"):
        load(tmp_path / "sharded").where(config_id=CID).stacked()


def test_the_ensembles_link_is_followed_only_inside_its_sweep(sweeps):
    a, b = sweeps
    (a / ".ensembles" / "CURRENT").unlink()  # left with the link alone, as after a torn copy
    (a / "ensembles").unlink()
    (a / "ensembles").symlink_to(b / ".ensembles" / "000001")
    for path in (a, a / "ensembles"):
        with pytest.raises(
            StoreError, match=r"ensembles'? is a symbolic link to .*b/.ensembles/000001.*does not follow"
        ):
            load(path)
    status = invoke("status", a)  # progress is still shown, and the store line says what is wrong
    assert status.exit_code == 0 and "ensembles: cannot be read (" in status.stdout and "symbolic link" in status.stdout
    (a / "ensembles").unlink()
    (a / "ensembles").symlink_to(".ensembles/000001")  # its own generation: fine
    assert len(load(a)) == 16


def test_a_sweeps_store_is_read_from_inside_it_alone(sweeps):
    """A store path's generations lie beside it (``<parent>/.<name>``); a sweep directory's store
    is its ``ensembles``: a folder named so beside the sweep is not read."""
    a, b = sweeps
    shutil.copytree(b / ".ensembles", a.parent / f".{a.name}")  # another sweep's generations, as a's store path's
    assert Path(load(a).store.root).parent == a / ".ensembles"


def test_a_store_aggregated_through_a_sub_tree_file_system_moves_its_link(sweeps):
    """A ``SubTreeFileSystem`` over a local disk is a local disk: the ``ensembles`` link (what
    DuckDB or Polars read) names the committed generation, not one collected since."""
    a, _ = sweeps
    sub = pafs.SubTreeFileSystem(str(a.parent), pafs.LocalFileSystem())
    for _ in range(2):
        aggregate(a.name, filesystem=sub, progress=False)
    assert (a / ".ensembles" / "CURRENT").read_text().strip() == "000003"
    assert (a / "ensembles").readlink() == Path(".ensembles/000003")


@pytest.mark.parametrize("linked", [".ensembles", ".ensembles/000001"])
def test_a_linked_generation_or_generations_directory_is_refused(sweeps, linked):
    a, b = sweeps
    shutil.rmtree(a / linked)
    (a / linked).symlink_to(b / linked)
    with pytest.raises(StoreError, match=r"is a symbolic link"):
        load(a)


def test_names_in_block_checkpoints_and_plans_stay_single_components(tmp_path):
    root = write_sweep(tmp_path / "sweep", PLAN, trained_blocks(PLAN)[:1])
    meta = next(root.rglob("block.json"))
    data = json.loads(meta.read_text())
    meta.write_text(json.dumps(data | {"trial_id": "../../evil"}))
    assert find_blocks(str(root), pafs.LocalFileSystem()) == {}  # not a checkpoint of this sweep
    plan = json.loads((root / "plan.json").read_text())
    plan["trials"][0]["trial_key"] = "../escape"
    (root / "plan.json").write_text(json.dumps(plan))
    with pytest.raises(StoreError, match=r"plan.json `trial_key`: names '../escape', which is not a plain name"):
        read_plan(pafs.LocalFileSystem(), str(root))


# -- verify ----------------------------------------------------------------------------------------
def test_verify_names_manifest_counts_that_disagree_with_the_tables(store):
    _edit_manifest(store, num_members=15, num_configs=3)
    with pytest.raises(StoreError) as info:
        Store.open(store).verify()
    assert list(info.value.problems) == [
        f"{store}/manifest.json: `num_members` is 15, but members.parquet holds 16; the store was altered",
        f"{store}/manifest.json: `num_configs` is 3, but configs.parquet holds 2; the store was altered",
    ]


def test_verify_reports_every_problem_and_the_cli_prints_one_line_each(store, tmp_path):
    result = invoke("verify", store)
    assert result.exit_code == 0, result.stderr
    digest = hashlib.sha256((store / "manifest.json").read_bytes()).hexdigest()
    assert result.stdout.splitlines()[-1] == f"manifest sha256: {digest}"
    assert "ok: 7 files verified (16 members, 2 structural configs)" in result.stdout  # with ensemble_scores

    leaves = store / f"{CID}.eqx"
    data = bytearray(leaves.read_bytes())
    data[-1] ^= 0x40
    leaves.write_bytes(bytes(data))
    (store / "README.txt").write_text("not part of the store")
    shutil.move(store / "samples.parquet", tmp_path / "samples.parquet")
    (store / "samples.parquet").symlink_to(tmp_path / "samples.parquet")
    with pytest.raises(StoreError) as info:
        Store.open(store).verify()
    problems = info.value.problems
    assert len(problems) == 3, problems
    assert any(f"{CID}.eqx" in p and "checksum mismatch" in p for p in problems)
    assert any("README.txt" in p and "not listed in the manifest" in p for p in problems)
    assert any("samples.parquet" in p and "symbolic link" in p for p in problems)

    result = invoke("verify", store)
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 3 and all(line.startswith("error: ") for line in lines)
    assert "Traceback" not in result.stdout + result.stderr


def test_verify_of_a_sweep_directory_and_of_its_link(sweeps):
    a, _ = sweeps
    for path in (a, a / "ensembles"):
        Store.open(path).verify()
        assert invoke("verify", path).exit_code == 0
