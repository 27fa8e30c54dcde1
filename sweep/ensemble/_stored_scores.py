"""The ensemble scores a store holds: computed once at aggregation (:func:`store_scores`, every
configuration the aggregator can score), read back for a selection (:func:`stored_rows`:
``Ensemble.stored_scores``), kept where a selection holds every member of a configuration
(:func:`whole_configurations`: those scores are its own), and joined beside a summary
(:func:`beside_summary`: ``Ensemble.summary(scores=True)``, ``sweep show --scores``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._errors import QueryError, warn
from .._import_path import trusted
from .._layout import SPLIT_FILES
from .._words import counted
from ..metrics import LOSS, takes_class_indices
from ..store import Store, gain_column
from ._predictions import DEFAULT_CHUNK, Predictions
from ._scoring import check_split, schema_of, scores_table


def store_scores(store: Store, trust: bool | Collection[str] = False) -> pa.Table | None:
    """The scores table of every configuration of a store on each split whose samples it holds (None
    if it holds none), as the aggregation writes it. Configurations that cannot be scored are left
    out with a warning: class labels, or a model built by a factory the aggregation was not told to
    trust (``trust``: True, or the import paths trusted; code the store names, whose predictions
    are then left to a reader who trusts it)."""
    splits = tuple(s for s, (samples, _) in SPLIT_FILES.items() if samples in store.manifest["files"])
    if not splits:
        return None
    wanted = [c.config_id for c in store.configs.values() if trusted(c.spec.model.name, trust)]
    untrusted = [
        c
        for c in store.configs.values()
        if not trusted(c.spec.model.name, trust)
        and not takes_class_indices(c.spec.training.loss, c.spec.training.metrics)
    ]  # (class labels are never scored: no hint to compute them)
    if untrusted:
        warn(
            f"ensemble scores of {counted(len(untrusted), 'config')} left out: their models are built by factories, "
            f"code the store names, whose predictions this aggregation was not told to run (trust_code); compute "
            f"them with Ensemble.scores() on the store loaded with trust_code=True"
        )
    if not wanted:
        return pa.Table.from_pylist([], schema_of(store))
    ids = {"config_id": pa.array(wanted, store.index_schema.field("config_id").type)}
    return scores_table(Predictions(store, None, ids), splits, DEFAULT_CHUNK, skip=True)


BESIDE_SCORES = ("crps", "spread_skill", "coverage_50", "coverage_90", gain_column(LOSS, "gain"))


def beside_summary(summary: pa.Table, selection, keys: list[str]) -> pa.Table:
    """``summary`` (of ``selection``) with each configuration's stored one-step scores per split
    (``<split>_<score>``): nulls for a configuration ``selection`` holds in part (:func:`whole_configurations`)."""
    stored = selection.stored_scores()
    whole = whole_configurations(selection, stored)
    for split in SPLIT_FILES:
        if split not in stored["split"].to_pylist():
            continue  # none of the split stored: no columns (nulls where the selection holds a configuration in part)
        rows = whole.filter(pc.and_(pc.equal(whole["kind"], "one_step"), pc.equal(whole["split"], split)))  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
        scores = rows.select([*keys, *BESIDE_SCORES]).rename_columns([*keys, *(f"{split}_{c}" for c in BESIDE_SCORES)])
        summary = _joined(summary, scores, keys)
    return summary


def _joined(left: pa.Table, right: pa.Table, keys: list[str]) -> pa.Table:
    """``left`` with the columns of ``right`` matched on ``keys`` (nulls where none), in ``left``'s order."""
    order = "__row"
    joined = left.append_column(order, pa.array(np.arange(left.num_rows))).join(
        right, keys, join_type="left outer", use_threads=False
    )
    return joined.sort_by(order).drop_columns([order])


def stored_rows(ens: Predictions, split: str | None) -> pa.Table:
    """The stored scores table's rows of the configurations ``ens`` has members of, on ``split`` or both."""
    table = ens.store.ensemble_scores()
    if table is None:
        raise QueryError(
            "stored_scores(): the store holds no ensemble scores (ensemble_scores.parquet): it was made by a "
            "seed-sweep that did not compute them; run `sweep aggregate` again, or compute them with scores()"
        )
    if split is not None:
        table = table.filter(pc.equal(table["split"], check_split(split, "stored_scores")))  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
    keys = ["config_id", *ens.grid_columns]
    wanted = set(_keys_of(ens.index, keys))
    return table.filter(pa.array([key in wanted for key in _keys_of(table, keys)], pa.bool_()))


def whole_configurations(selection, table: pa.Table) -> pa.Table:
    """The rows of ``table`` (stored scores, :meth:`Ensemble.stored_scores`) of the configurations
    ``selection`` (an :class:`Ensemble`) holds every scored member of: a stored row scores all the
    members of its configuration, so it is the selection's own only then (``where(seed=1)`` holds
    one of each configuration's members: none of its rows; :meth:`Ensemble.scores` computes its own).

    ```python
    ens = sweep.load("runs/heat-depth-lr")
    whole_configurations(ens.where(depth=4), ens.stored_scores()).num_rows   # depth 4's rows
    ```
    """
    if isinstance(getattr(selection, "counts", None), np.ndarray):
        raise QueryError(
            "whole_configurations(): a Blend weights its members, so no stored score (of equal weights) is its own; "
            "Blend.scores() computes them"
        )
    keys = ["config_id", *selection.grid_columns]
    selected = Counter(_keys_of(selection.index, keys))
    rows = table.select([*keys, "kind", "members"]).to_pylist()
    # every row but an ensemble-size one (of subsets) counts its configuration's scored members
    whole = {
        key for r in rows if r["kind"] != "ensemble_size" and selected[key := tuple(r[k] for k in keys)] >= r["members"]
    }
    return table.filter(pa.array([key in whole for key in _keys_of(table, keys)], pa.bool_()))


def _keys_of(table: pa.Table, keys: list[str]) -> list[tuple]:
    """The configuration of each row of ``table``: its values of ``keys`` (config_id, grid columns)."""
    return list(zip(*(table[k].to_pylist() for k in keys), strict=True))
