"""``configs.parquet`` read back: one :class:`ConfigInfo` per structural config, checked against the
store's layout before any member is read."""

from __future__ import annotations

import json
from typing import NamedTuple

import pyarrow as pa

from .._errors import StoreError
from .._fs import confined
from .._layout import CONFIG_ID, STORE_FILE, STORE_FILES
from ..spec import SweepSpec
from ._files import AGGREGATE_AGAIN
from ._schema import CONFIGS_SCHEMA, CONFIGS_SCHEMA_SAME_GRID, leaves_files


class ConfigInfo(NamedTuple):
    """One row of ``configs.parquet``: a structural config and where its members' leaves lie."""

    config_id: str
    spec: SweepSpec
    num_members: int
    first_member: int  # member_id of its first member; its members are contiguous
    members_per_shard: int
    files: tuple[str, ...]
    sample_shape: tuple[int, ...]  # one input: (channels, *spatial)
    target_shape: tuple[int, ...]  # one target: any shape, () for one number or class label


def read_configs(table: pa.Table, where: str, members: int) -> dict[str, ConfigInfo]:
    """The rows of ``configs.parquet`` (``table``, read from ``where``) by config id, checked: the
    table's columns, every config id against its spec, the files and member ranges against the
    store's layout (members contiguous from 0, ``members`` in all: the rows of
    ``members.parquet``), the shapes of a sample and a target."""
    same_grid = table.schema.equals(CONFIGS_SCHEMA_SAME_GRID)  # written while targets had the inputs' grid
    if not table.schema.equals(CONFIGS_SCHEMA) and not same_grid:
        raise StoreError(f"{where}: columns {table.column_names} are not those of a seed-sweep configs table")
    configs, first = {}, 0
    rows = table.to_pylist()
    for row in rows:  # (the aggregator writes no null)
        if nulls := [k for k, v in row.items() if v is None or (isinstance(v, list) and None in v)]:
            raise StoreError(
                f"{where}: config {str(row['config_id'])[:20]!r} has nulls in {nulls}; the table was altered"
            )
    for row in sorted(rows, key=lambda r: r["first_member"]):
        cid = confined(row["config_id"], f"{where} `config_id`", CONFIG_ID, "12 hex digits")
        try:
            spec = SweepSpec.from_dict(json.loads(row["spec"]))
        except (ValueError, TypeError, RecursionError) as e:  # SpecError and JSONDecodeError are ValueErrors
            raise StoreError(f"{where}: the spec of config {cid} is not valid ({str(e)[:300]})") from None
        if spec.config_id != cid:
            raise StoreError(f"{where}: config {cid} holds a spec whose id is {spec.config_id}; the table was altered")
        files = [confined(f, f"{where} `files` of config {cid}", STORE_FILE, STORE_FILES) for f in row["files"]]
        n, per_shard = row["num_members"], row["members_per_shard"]
        fits = row["first_member"] == first and 1 <= n <= members - first and per_shard >= 1  # (before listing files)
        if not fits or files != leaves_files(cid, n, per_shard):
            raise StoreError(
                f"{where}: config {cid} ({n} members from member {row['first_member']}, "
                f"{per_shard} per file, files {files}) does not fit the store's layout; the table was altered"
            )
        first += n
        sample, target = (
            row["sample_shape"],
            ([row["out_channels"], *row["sample_shape"][1:]] if same_grid else row["target_shape"]),
        )
        if not (sample and all(d >= 1 for d in sample) and all(d >= 1 for d in target)):
            raise StoreError(
                f"{where}: config {cid} has sample_shape {sample} and target_shape {target}; expected a sample of "
                f"sizes >= 1 (channels first) and a target of sizes >= 1 ([] for one number); the table was altered"
            )
        configs[cid] = ConfigInfo(
            cid,
            spec,
            n,
            row["first_member"],
            per_shard,
            tuple(files),
            tuple(sample),
            tuple(target),
        )
    if first != members:
        raise StoreError(
            f"{where}: its configs hold {first} members, members.parquet {members}; the tables were altered. "
            f"{AGGREGATE_AGAIN}"
        )
    return configs
