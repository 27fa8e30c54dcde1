"""Every file and column of a store, named once.

Files of a committed store (``<sweep>/ensembles/``; how generations replace each other
atomically is in :mod:`._generations`)::

    members.parquet     one row per member (columns below), sorted by config_id, then by the
                        vmapped hyperparameter values (names sorted), then by seed
    configs.parquet     one row per structural config (:data:`CONFIGS_SCHEMA`)
    <config_id>.eqx     eqx.tree_serialise_leaves of the config's stacked parameters, members in
                        members.parquet order; past the shard size, instead
    <config_id>/shard-NNNNN.eqx   consecutive runs of members_per_shard members
    manifest.json       format, counts, grid columns, sha256 and size of every file, missing members
"""

from __future__ import annotations

from typing import NamedTuple

import pyarrow as pa

FORMAT = 1
STORE_NAME = "ensembles"  # the store's name inside a sweep directory
MANIFEST = "manifest.json"
MEMBERS = "members.parquet"
CONFIGS = "configs.parquet"
POINTER = "CURRENT"  # names the committed generation
ROW_GROUP_ROWS = 65_536


def leaves_file(config_id: str, shard: int | None) -> str:
    """A config's leaves file: ``<config_id>.eqx``, or shard ``shard`` of it."""
    return f"{config_id}.eqx" if shard is None else f"{config_id}/shard-{shard:05d}.eqx"


class Column(NamedTuple):
    """A grid value column of ``members.parquet``."""

    name: str  # the last part of the dotted key when unique, else the key
    key: str  # dotted grid key, e.g. "model.depth"
    vmapped: bool


_F32, _I32 = pa.float32(), pa.int32()
IDENTITY_COLUMNS = (("member_id", pa.int64()), ("config_id", pa.string()), ("seed", pa.int64()), ("trial_id", pa.string()))
RESULT_COLUMNS = (("status", pa.string()), ("epochs", _I32), ("train_loss", _F32), ("test_loss", _F32))
HISTORY_COLUMNS = (("train_loss_history", pa.list_(_F32)), ("test_loss_history", pa.list_(_F32)),
                   ("history_epochs", pa.list_(_I32)))
FIXED_COLUMNS = tuple(name for name, _ in IDENTITY_COLUMNS + RESULT_COLUMNS + HISTORY_COLUMNS)
STATUSES = ("ok", "diverged", "stopped_early")


def members_schema(columns: list[Column], types: dict[str, pa.DataType]) -> pa.Schema:
    """``members.parquet``: identity, one column per grid key, results, histories."""
    return pa.schema([*IDENTITY_COLUMNS, *((c.name, types[c.name]) for c in columns), *RESULT_COLUMNS, *HISTORY_COLUMNS])


def index_columns(grid_columns: list[str]) -> list[str]:
    """The ``members.parquet`` columns queries filter and rank on (no histories)."""
    return [name for name, _ in IDENTITY_COLUMNS] + list(grid_columns) + [name for name, _ in RESULT_COLUMNS]


CONFIGS_SCHEMA = pa.schema([
    ("config_id", pa.string()), ("spec", pa.string()), ("num_members", pa.int64()),
    ("first_member", pa.int64()), ("members_per_shard", pa.int64()), ("files", pa.list_(pa.string())),
    ("sample_shape", pa.list_(pa.int64())), ("out_channels", pa.int64()), ("num_train", pa.int64()),
])
