"""A selection of members of a store: which rows, their tables and their parameters.

:class:`Selection` holds what every query of :class:`~sweep.ensemble.Ensemble` starts from: the
store, the selected rows (read when first needed), the rows matching column values (what
``where`` and ``member`` select) and the checks of a ranking column; the
queries themselves are in :mod:`._predictions` (what the members compute) and
:mod:`._ensemble` (choosing members, statistics over seeds).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from jaxtyping import PyTree

from .._errors import QueryError, did_you_mean
from ..metrics import summarised_metric
from ..spec import SweepSpec
from ..store import SETTING_COLUMNS, ConfigInfo, Store
from ._stats import MODES


class Selection:
    """Members of a store, in a fixed order (rows in store order, config_id, then vmapped
    hyperparameters, then seed, unless ranked). Leaves are read from the store only when needed,
    file by file. A selection of the store made by values alone (``index=None``: ``filters``,
    column -> values) reads its rows when a query needs them, from the row groups that can hold
    them."""

    def __init__(self, store: Store, index: pa.Table | None = None, filters: dict[str, pa.Array] | None = None):
        self._store, self._rows, self._filters = store, index, dict(filters or {})
        self._table: pa.Table | None = None

    @property
    def store(self) -> Store:
        """The store the members are in."""
        return self._store

    @property
    def _index(self) -> pa.Table:
        if self._rows is None:  # read on first need
            self._rows = self._store.select(self._filters) if self._filters else self._store.index()
        return self._rows

    def __len__(self) -> int:
        if self._rows is None and not self._filters:
            return sum(c.num_members for c in self._store.configs.values())
        return self._index.num_rows

    @property
    def table(self) -> pa.Table:
        """One row per member (histories included), read from the store for this selection."""
        if self._table is None:
            self._table = self._store.members(member_ids=self._ids())
        return self._table

    @property
    def index(self) -> pa.Table:
        """One row per member without the history columns (what :meth:`where` filters on)."""
        return self._index

    @property
    def columns(self) -> list[str]:
        """Columns that :meth:`where` can filter on."""
        return (self._store.index_schema if self._rows is None else self._rows.schema).names

    @property
    def grid_columns(self) -> list[str]:
        """The columns holding grid values (``depth``, ``learning_rate``, ...), in grid order."""
        return [c for c in self._store.grid_columns if c in self.columns]

    def stacked(self) -> eqx.Module:
        """All members as one module whose array leaves have a leading member axis (this order).

        Works with ``pdequinox.extract_from_ensemble`` / ``combine_to_ensemble`` and ``eqx.filter_vmap``.

        Returns:
            An ``eqx.Module``.

        Raises:
            QueryError: The selection spans several structural configs.

        Examples:
            ```python
            stacked = ens.where(depth=4).best(8).stacked()
            ```
        """
        params, static = self.stacked_params("stacked")
        return eqx.combine(params, static)

    @property
    def spec(self) -> SweepSpec:
        """The structural config of these members (they must share one)."""
        return self.one_config("spec").spec

    def samples(self) -> tuple[np.ndarray, np.ndarray]:
        """Test inputs and targets of these members' problem (one, whatever their structural
        configs), as the store keeps them (the first 16 test samples of its problem: inputs
        ``[samples, channels, *spatial]``, targets ``[samples, *target_shape]``, float32 or int32
        class labels as the data gave them): read from the store, never regenerated, so no code
        the store names runs."""
        why = "its sweep directory had no samples.parquet when it was aggregated; sweep.run writes it"
        return self._stored("samples", why)

    def trajectories(self) -> np.ndarray:
        """Reference test trajectories of these members' problem (one, whatever their structural
        configs), as the store keeps them (the first 4 test trajectories of its problem, every
        step: ``[trajectories, steps + 1, channels, *spatial]``): read from the store, never
        regenerated.

        Axis order: trajectory before time, as the data's ``*_traj`` arrays hold them (each
        trajectory one contiguous run of states). :meth:`rollout` puts time before the batch for
        one reason: its step ``t`` is then a batch shaped like its input ``x0``, what
        :meth:`predict` takes. Compare them after one ``swapaxes``:

        ```python
        traj = sub.trajectories()                                # [trajectories, T + 1, ...]
        states = sub.rollout(traj[:, 0], traj.shape[1] - 1)      # [members, T + 1, trajectories, ...]
        error = states - traj.swapaxes(0, 1)                     # [members, T + 1, trajectories, ...]
        ```"""
        why = (
            "its problem has none, e.g. heat1d without trajectory_steps, or its sweep was run by a "
            "seed-sweep that did not keep them"
        )
        return self._stored("trajectories", why)

    def _stored(self, what: str, why: str) -> Any:
        """The test ``samples`` or ``trajectories`` the store holds for these members' problem (one,
        whatever their structural configs: the store keeps them per problem), or a
        :class:`QueryError` saying ``why`` there are none."""
        configs = [self._store.configs[c] for c in pc.unique(self._index["config_id"]).to_pylist()]  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
        problems = {c.spec.problem_id for c in configs}
        config = configs[0] if len(problems) == 1 else self.one_config(what)  # several problems: select one
        found = getattr(self._store, what)(config.config_id)
        if found is None:
            raise QueryError(f"{what}(): the store holds no test {what} for config {config.config_id} ({why})")
        return found

    def _matching(self, column_values: dict[str, Any]) -> tuple[pa.Table | None, dict[str, pa.Array] | None]:
        """``(index, filters)`` of the members of this selection whose columns equal ``column_values``
        (what :meth:`~sweep.ensemble.Ensemble.where` selects; a list, tuple or set means any of
        them): rows read, or (``None``, filters) where this selection is one by values alone, whose
        rows stay unread; ``(None, None)`` where nothing is given (this selection itself)."""
        schema = self._store.index_schema if self._rows is None else self._rows.schema
        filters = {}
        for column, value in column_values.items():
            if column not in schema.names:
                raise QueryError(
                    f"where(): unknown column {column!r}{did_you_mean(column, schema.names)}; "
                    f"columns: {', '.join(schema.names)}"
                )
            values = list(value) if isinstance(value, (list, tuple, set, frozenset)) else [value]
            kind = schema.field(column).type
            try:
                filters[column] = pa.array([v for text in values for v in _from_text(text, kind)], type=kind)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
                raise QueryError(
                    f"where({column}={value!r}): column {column!r} holds {kind} values; in this selection it takes "
                    f"{self._distinct(column)}"
                ) from None
        if not filters:
            return None, None
        if self._rows is None:  # a selection by values: read only their columns, of the row groups that can match
            both = _both(self._filters, filters)
            if self._store.count(both):
                return None, both
        else:
            mask = None
            for column, value_set in filters.items():
                hit = pc.is_in(self._rows[column], value_set=value_set)  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
                mask = hit if mask is None else pc.and_(mask, hit)  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
            selected = self._rows.filter(mask)
            if selected.num_rows:
                return selected, None
        present = "; ".join(f"{c} takes {self._distinct(c)}" for c in column_values)
        given = ", ".join(f"{k}={v!r}" for k, v in column_values.items())
        raise QueryError(f"where({given}): no member matches; in this selection {present}")

    def _seed_row(self, seed: int) -> pa.Table:
        """The one row of this selection with ``seed`` (what
        :meth:`~sweep.ensemble.Ensemble.member` returns), or a :class:`QueryError` saying how to
        narrow it down."""
        if self._rows is None:  # read only the row groups that can hold the seed
            rows = self._store.select(_both(self._filters, {"seed": pa.array([seed], pa.int64())}))
        else:
            rows = self._rows.filter(pc.equal(self._rows["seed"], seed))  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
        if rows.num_rows == 0:
            raise QueryError(f"member(seed={seed!r}): no member with this seed here; seeds: {self._distinct('seed')}")
        if rows.num_rows > 1:
            keys = ["config_id", *self._store.grid_columns]
            varying = [c for c in keys if c in rows.column_names and len(pc.unique(rows[c])) > 1]  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
            raise QueryError(
                f"member(seed={seed!r}): {rows.num_rows} members have this seed (they differ in "
                f"{', '.join(varying)}); narrow it down, e.g. member(seed={seed!r}, {varying[0]}={rows[varying[0]][0].as_py()!r})"
            )
        return rows

    def _ids(self) -> np.ndarray:
        return self._index["member_id"].to_numpy()

    def _distinct(self, column: str, limit: int = 20) -> str:
        found = pc.unique(self._index[column]).to_pylist()  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
        values = sorted(v for v in found if v is not None)
        more = f" and {len(values) - limit} more" if len(values) > limit else ""
        return f"{values[:limit]}{more}" + (" and no value (None; on the command line: none)" if None in found else "")

    def free_columns(self, fixed: Any) -> dict[str, str]:
        """The grid columns not named in ``fixed`` that take several values in this selection
        (column -> its values, as text): what would pool members trained with different settings."""
        return {
            c: self._distinct(c)
            for c in self.grid_columns
            if c not in fixed and len(pc.unique(self._index[c])) > 1  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
        }

    def _check_metric(self, metric: str, what: str, mode: str = "min") -> None:
        settings = SETTING_COLUMNS | set(self.grid_columns)
        numeric = [
            f.name
            for f in self._index.schema
            if (pa.types.is_floating(f.type) or pa.types.is_integer(f.type)) and f.name not in settings
        ]
        if metric in settings:
            raise QueryError(
                f"{what}(metric={metric!r}): a setting of the members, not a value they reached; choose one of "
                f"{', '.join(numeric)}"
            )
        if metric not in self._index.schema.names:
            split, _, curve = metric.partition("_rollout_") if isinstance(metric, str) else ("", "", "")
            summaries = [
                c
                for c in numeric
                if curve and c.startswith(f"{split}_") and summarised_metric(c[len(split) + 1 :]) == curve
            ]
            if summaries:  # a rollout's curve over steps
                raise QueryError(
                    f"{what}(metric={metric!r}): each member's curve over the rollout's steps, not one value; rank "
                    f"by a number that sums it up: {', '.join(summaries)}"
                )
            raise QueryError(
                f"{what}(metric={metric!r}): no column named {metric!r}{did_you_mean(metric, numeric)}; "
                f"choose one of {', '.join(numeric)}"
            )
        if metric not in numeric:
            raise QueryError(f"{what}(metric={metric!r}): not a numeric column; choose one of {', '.join(numeric)}")
        if mode not in MODES:
            raise QueryError(f'{what}(mode={mode!r}): choose "min" (lower {metric} is better) or "max"')

    def _no_values(self, metric: str, what: str) -> str:
        """Why ``metric`` cannot rank this selection: some members have no value (null)."""
        nulls = self._index[metric].is_null()
        configs = pc.unique(self._index.filter(nulls)["config_id"]).to_pylist()  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
        where = f"{self._index[metric].null_count} of {len(self)} members (config(s) {', '.join(configs[:5])}) have no {metric}"
        if not metric.startswith("val_"):
            return f"{what}(metric={metric!r}): {where}; select members that have one, or rank by another metric"
        test = "test_" + metric.removeprefix("val_")
        return (
            f"{what}(metric={metric!r}): {where}: they were trained without a validation set "
            f"(problem.val_fraction=0), and ranking needs one. Rank by another metric, e.g. metric={test!r} "
            f"(but a choice made on the test set makes its test numbers optimistic), or train with a validation set"
        )

    def _values(self, metric: str, what: str, mode: str = "min") -> np.ndarray:
        """``metric`` as float64 for ranking; every member must have a value."""
        self._check_metric(metric, what, mode)
        if self._index[metric].null_count:
            raise QueryError(self._no_values(metric, what))
        return self._index[metric].to_numpy(zero_copy_only=False).astype(np.float64)

    def _diverged(self) -> np.ndarray:
        return pc.equal(self._index["status"], "diverged").to_numpy(zero_copy_only=False)  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)

    def _beside(self, metric: str) -> list[str]:
        """The test column reported beside a validation metric (``val_loss`` -> ``test_loss``)."""
        test = "test_" + metric.removeprefix("val_")
        return [test] if metric.startswith("val_") and test in self.columns else []

    def structural_columns(self) -> list[str]:
        """The grid columns that set these members' structural configs apart (not vmapped, one
        value in each config, several in all): what no pooling can span."""
        ids = self._index["config_id"].to_pylist()
        configs = len(set(ids))
        columns = {c: self._index[c].to_pylist() for c in self.grid_columns if c not in self._store.vmapped_columns}
        return [
            c
            for c, values in columns.items()
            if None not in values and len(set(values)) > 1 and len(set(zip(ids, values))) == configs
        ]

    def one_config(self, what: str) -> ConfigInfo:
        """The one structural config of these members; a :class:`QueryError` naming the query ``what``
        when they span several."""
        configs = pc.unique(self._index["config_id"]).to_pylist()  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
        if len(configs) > 1:
            raise self._spanning(
                what, f"the selection spans {len(configs)} structural configs ({', '.join(configs[:5])})"
            )
        return self._store.configs[configs[0]]

    def _spanning(self, what: str, why: str) -> QueryError:
        """The error of a query ``what`` that needs one config (or one problem) of several: ``why``,
        and the ``.where`` that selects one."""
        split_by = self.structural_columns()
        rows = sorted(zip(*(self._index[c].to_pylist() for c in split_by))) if split_by else []
        shown = ", ".join(f"{c}={v!r}" for c, v in zip(split_by, rows[0] if rows else ()))
        example = f".where({shown})" if split_by else f".where(config_id={self._index['config_id'][0].as_py()!r})"
        return QueryError(
            f"{what}: {why}; select one first, e.g. {example}"
            + (f" (they differ in {', '.join(split_by)})" if split_by else "")
        )

    def _positions(self, config: ConfigInfo) -> np.ndarray:
        return self._ids() - config.first_member

    def stacked_params(self, what: str) -> tuple[PyTree, PyTree]:
        """The members' parameters stacked on a leading axis (as JAX arrays) and the model's static
        part, as ``eqx.partition`` gives them (one config: see :meth:`one_config`)."""
        config = self.one_config(what)
        params = self._store.read(config.config_id, self._positions(config))
        return jax.tree_util.tree_map(jnp.asarray, params), self._store.template(config.config_id)[1]


def _both(filters: dict[str, pa.Array], more: dict[str, pa.Array]) -> dict[str, pa.Array]:
    """Filters that hold where both hold (a column in both: the values in both)."""
    out = dict(filters)
    for column, values in more.items():
        out[column] = values if column not in out else pc.filter(values, pc.is_in(values, value_set=out[column]))  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
    return out


def refuse_pooled_sides(sides: Mapping[str, tuple[Mapping[str, Any], Selection]]) -> None:
    """``compare()``'s refusal of sides (name -> (its ``where`` values, its selection)) that would
    pool members trained with different settings (a free grid column taking several values)."""
    free: dict[str, list[str]] = {}
    for name, (fixed, side) in sides.items():
        for c, values in side.free_columns(fixed).items():
            free.setdefault(c, []).append(f"{values} in {name}")
    if free:
        listed = "; ".join(f"{c} takes {' and '.join(where)}" for c, where in free.items())
        raise QueryError(
            f"compare(): {listed}: members trained with different settings would be pooled. Fix "
            f"{', '.join(free)} in both a and b (e.g. {{..., {next(iter(free))!r}: value}}), or pass "
            f"pool=True to pool over them"
        )


def _from_text(value: Any, kind: pa.DataType) -> list[Any]:
    """The values ``value`` names in a column of ``kind``, where it is text (as the command line
    gives every value): ``"true"``/``"false"`` the booleans of a boolean column, ``"none"``/``"null"``
    a member without a value (in a text column, also the text itself); anything else itself."""
    if not isinstance(value, str):
        return [value]
    if pa.types.is_boolean(kind) and value.lower() in ("true", "false"):
        return [value.lower() == "true"]
    if value.lower() in ("none", "null"):
        return [value, None] if pa.types.is_string(kind) or pa.types.is_large_string(kind) else [None]
    return [value]
