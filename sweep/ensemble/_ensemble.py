"""Query a store of global ensembles: select members, summarise them, and run inference.

```python
ens = sweep.load("runs/heat")                           # every member of every config
ens.summary()                                           # val_loss over seeds per configuration, best first
sub = ens.where(depth=6, learning_rate=3e-4).best(8)    # the 8 lowest validation losses
y = sub.predict(x)                                      # [8, batch, channels, *spatial]
```

Every choice ranks by a validation column (default ``val_loss``); the test columns are
reported beside it and never used to choose, so that they stay honest estimates.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
from jaxtyping import Float, PyTree

from .._errors import QueryError
from ..spec import SweepSpec
from ..store import ConfigInfo, Store
from . import _inference, _rollout, _scoring, _stats
from ._inference import Moments
from ._stats import MODES, Comparison

DEFAULT_CHUNK = 64  # members per compiled inference call
DEFAULT_METRIC = "val_loss"  # what every choice ranks by


def load(path: str | os.PathLike, storage_filesystem: pafs.FileSystem | None = None) -> Ensemble:
    """Open the store of a sweep (its directory or its ``ensembles/`` directory; local or ``s3://``).

    Reads the manifest, ``configs.parquet`` and the footer of ``members.parquet``; member rows
    are read when a query needs them, and :meth:`Ensemble.where` on the whole store reads only
    the row groups that can hold its members."""
    store = Store.open(path, storage_filesystem)
    store.index_schema  # opens members.parquet: its size and footer are checked now
    return Ensemble(store)


class Ensemble:
    """A selection of members of a store, in a fixed order; every query returns a new one.

    Rows come in store order (config_id, then vmapped hyperparameters, then seed) unless
    :meth:`best` ranked them. Leaves are read from the store only when needed, file by file.
    A selection of the store made by :meth:`where` alone (``index=None``: ``filters``, column ->
    values) reads its rows when a query needs them, from the row groups that can hold them.
    """

    def __init__(self, store: Store, index: pa.Table | None = None, filters: dict[str, pa.Array] | None = None):
        self._store, self._rows, self._filters = store, index, dict(filters or {})
        self._table: pa.Table | None = None

    @property
    def _index(self) -> pa.Table:
        if self._rows is None:  # read on first need
            self._rows = self._store.select(self._filters) if self._filters else self._store.index()
        return self._rows

    def __len__(self) -> int:
        if self._rows is None and not self._filters:
            return sum(c.num_members for c in self._store.configs.values())
        return self._index.num_rows

    def __repr__(self) -> str:
        configs = len(pc.unique(self._index["config_id"]))
        return f"Ensemble({len(self)} members of {configs} config(s) from {self._store.root!r})"

    # -- tables ---------------------------------------------------------------------------------
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

    def summary(self, metric: str = DEFAULT_METRIC, mode: str = "min", scores: bool = False) -> pa.Table:
        """One row per configuration (structural config x vmapped hyperparameters), best first (by
        the mean of ``metric``; ``mode="max"`` when higher is better): member counts (``count``,
        ``diverged``, ``stopped_early``, and ``n``, the members the statistics use: those that did not
        diverge) and mean / std (ddof=1) / median / min / max of ``metric``, the 95% percentile bootstrap
        interval of the mean (``mean_ci_low``, ``mean_ci_high``: within the values' range, so never
        below 0 for a loss), and the interquartile mean with its bootstrap interval. For a validation
        metric (``val_<name>``) the test column ``test_<name>`` is reported beside it
        (``test_<name>_mean``, ``test_<name>_ci_low``, ``test_<name>_ci_high``), not used to rank.
        ``scores=True``: each configuration's stored ensemble scores beside (:meth:`stored_scores`,
        one-step, per split: ``<split>_crps``, ``<split>_spread_skill``, ``<split>_coverage_50``,
        ``<split>_coverage_90``, ``<split>_loss_gain``)."""
        self._check_metric(metric, "summary", mode)
        if self._index[metric].null_count == len(self):
            raise QueryError(self._no_values(metric, "summary"))
        keys = ["config_id", *self.grid_columns]
        table = _stats.summary(self._index, keys, metric, self._beside(metric), mode)
        return _scoring.beside_summary(table, self.stored_scores(), keys) if scores else table

    def scores(self, split: str = "test", chunk_size: int = DEFAULT_CHUNK) -> pa.Table:
        """Ensemble scores of every configuration of this selection on the samples and trajectories
        of ``split`` (``"test"`` or ``"val"``) the store holds (never regenerated): one row per
        configuration and kind (``one_step``; ``rollout`` per step and ``rollout_gmean`` where the
        store holds trajectories; ``ensemble_size`` for subsets of 2, 4, 8, ... members), with CRPS
        (fair), MAE and RMSE of the ensemble mean, spread, spread-skill ratio, coverage of the
        central 50% and 90% intervals, the rank histogram, and the loss and each built-in metric of
        the ensemble mean beside their mean over members and the ratio (``<name>_gain``, > 1:
        the mean beats a member). Columns: :func:`sweep.store._schema.scores_schema`; formulas:
        :mod:`sweep.ensemble._scores`. A :class:`QueryError` says why a configuration cannot be
        scored (no samples of the split, class labels).

        ```python
        row = ens.where(depth=4).scores("test").to_pylist()[0]
        row["crps"], row["spread_skill"], row["coverage_90"], row["loss_gain"]
        ```
        """
        return _scoring.scores_table(self, (_scoring.check_split(split, "scores"),), chunk_size)

    def stored_scores(self, split: str | None = None) -> pa.Table:
        """The ensemble scores the aggregation stored (``ensemble_scores.parquet``: of all members of
        each configuration) of the configurations this selection has members of, on ``split`` or
        both (columns as :meth:`scores`); a :class:`QueryError` for a store made without them."""
        return _scoring.stored_rows(self, split)

    def seeds_needed(self, metric: str = DEFAULT_METRIC, width: float = 0.1, mode: str = "min") -> pa.Table:
        """How many seeds bring the 95% bootstrap interval of the mean of ``metric`` to ``width``
        times the mean, per configuration (best first, as :meth:`summary`): the interval of the
        seeds trained (``n``, ``mean``, ``relative_width`` = (high - low) / |mean|), narrowing as
        1 / sqrt(seeds): ``seeds_needed = ceil(n * (relative_width / width)^2)`` (at least 2).

        ```python
        ens.seeds_needed("val_loss", width=0.1).to_pylist()[0]["seeds_needed"]
        ```
        """
        if isinstance(width, bool) or not isinstance(width, (int, float)) or not 0 < width < math.inf:
            raise QueryError(f"seeds_needed(width={width!r}): give the interval's width relative to the mean, > 0")
        return _stats.seeds_needed(self.summary(metric, mode), ["config_id", *self.grid_columns], float(width))

    def summary_frame(self, metric: str = DEFAULT_METRIC, mode: str = "min"):
        """:meth:`summary` as a pandas DataFrame (for notebooks)."""
        return self.summary(metric, mode).to_pandas()

    def best_configuration(self, metric: str = DEFAULT_METRIC, mode: str = "min") -> dict[str, Any]:
        """The grid values of the configuration with the best mean ``metric`` (lowest; highest with
        ``mode="max"``) over its members that did not diverge (the first row of :meth:`summary`),
        e.g. ``{"depth": 6, "learning_rate": 0.0003}``; ``{"config_id": ...}`` without grid columns."""
        self._values(metric, "best_configuration", mode)
        rows = [r for r in self.summary(metric, mode).to_pylist() if np.isfinite(r["mean"])]
        if not rows:
            raise QueryError(f"best_configuration(metric={metric!r}): every member diverged or has no finite {metric}")
        return {k: rows[0][k] for k in self.grid_columns} or {"config_id": rows[0]["config_id"]}

    def compare(
        self, a: dict[str, Any], b: dict[str, Any], metric: str = DEFAULT_METRIC, mode: str = "min", pool: bool = False
    ) -> Comparison:
        """``where(**a)`` against ``where(**b)`` on ``metric``: P(a member of a beats one of b) with its
        95% bootstrap interval (diverged members lose), the difference of their means (a - b) with its
        interval, and the counts (see :class:`Comparison`).

        A grid column that ``a`` or ``b`` leaves free while it takes several values there would pool
        members trained with different settings into one side: that is refused (a
        :class:`QueryError` names the columns) unless ``pool=True``.

        ```python
        ens.compare({"depth": 4, "learning_rate": 1e-3}, {"depth": 6, "learning_rate": 1e-3}).probability
        ```
        """
        sides = {"a": (a, self.where(**a)), "b": (b, self.where(**b))}
        if not pool:
            free: dict[str, list[str]] = {}
            for name, (fixed, side) in sides.items():
                for c in self.grid_columns:
                    if c not in fixed and len(pc.unique(side._index[c])) > 1:
                        free.setdefault(c, []).append(f"{side._distinct(c)} in {name}")
            if free:
                listed = "; ".join(f"{c} takes {' and '.join(where)}" for c, where in free.items())
                raise QueryError(
                    f"compare(): {listed}: members trained with different settings would be pooled. Fix "
                    f"{', '.join(free)} in both a and b (e.g. {{..., {next(iter(free))!r}: value}}), or pass "
                    f"pool=True to pool over them"
                )
        (_, sa), (_, sb) = sides.values()
        va, vb = sa._values(metric, "compare", mode), sb._values(metric, "compare", mode)
        return _stats.compare(va, vb, sa._diverged(), sb._diverged(), metric, mode)

    # -- selection ------------------------------------------------------------------------------
    def where(self, **column_values: Any) -> Ensemble:
        """Members whose columns equal the values given (a list / tuple / set means any of them).

        ```python
        ens.where(depth=6, learning_rate=[1e-3, 3e-4], status="ok")
        ```
        """
        schema = self._store.index_schema if self._rows is None else self._rows.schema
        filters = {}
        for column, value in column_values.items():
            if column not in schema.names:
                raise QueryError(f"where(): unknown column {column!r}; columns: {', '.join(schema.names)}")
            values = list(value) if isinstance(value, (list, tuple, set, frozenset)) else [value]
            kind = schema.field(column).type
            try:
                filters[column] = pa.array(values, type=kind)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
                raise QueryError(f"where({column}={value!r}): column {column!r} holds {kind} values") from None
        if not filters:
            return self
        if self._rows is None:  # a selection by values: read only their columns, of the row groups that can match
            both = _both(self._filters, filters)
            if self._store.count(both):
                return Ensemble(self._store, None, both)
        else:
            mask = None
            for column, value_set in filters.items():
                hit = pc.is_in(self._rows[column], value_set=value_set)
                mask = hit if mask is None else pc.and_(mask, hit)
            selected = self._rows.filter(mask)
            if selected.num_rows:
                return Ensemble(self._store, selected)
        present = "; ".join(f"{c} takes {self._distinct(c)}" for c in column_values)
        raise QueryError(f"where({_kwargs(column_values)}): no member matches; in this selection {present}")

    def best(self, k: int, metric: str = DEFAULT_METRIC, mode: str = "min") -> Ensemble:
        """The ``k`` members (all, if fewer) with the lowest ``metric`` (highest with ``mode="max"``),
        best first; diverged members rank last and ties go by member_id. Ranks by the validation loss
        unless told otherwise; without a validation set ``metric=`` must be given."""
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise QueryError(f"best(k={k!r}): k must be an integer >= 1")
        values = self._values(metric, "best", mode)
        scores = np.where(self._diverged() | ~np.isfinite(values), np.inf, values if mode == "min" else -values)
        order = np.lexsort((self._ids(), scores))[:k]
        return Ensemble(self._store, self._index.take(order))

    def member(self, seed: int, **where: Any) -> eqx.Module:
        """The one member with this seed (and ``where`` values) as a plain module for one sample."""
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise QueryError(f"member(seed={seed!r}): the seed must be an integer")
        selection = self.where(**where)
        if selection._rows is None:  # read only the row groups that can hold the seed
            rows = selection._store.select(_both(selection._filters, {"seed": pa.array([int(seed)], pa.int64())}))
        else:
            rows = selection._rows.filter(pc.equal(selection._rows["seed"], int(seed)))
        if rows.num_rows == 0:
            raise QueryError(
                f"member(seed={seed!r}): no member with this seed here; seeds: {selection._distinct('seed')}"
            )
        if rows.num_rows > 1:
            keys = ["config_id", *self._store.grid_columns]
            varying = [c for c in keys if c in rows.column_names and len(pc.unique(rows[c])) > 1]
            raise QueryError(
                f"member(seed={seed!r}): {rows.num_rows} members have this seed (they differ in "
                f"{', '.join(varying)}); narrow it down, e.g. member(seed={seed!r}, {varying[0]}={rows[varying[0]][0].as_py()!r})"
            )
        params, static = Ensemble(self._store, rows)._params("member")
        return eqx.combine(jax.tree_util.tree_map(lambda a: a[0], params), static)

    def stacked(self) -> eqx.Module:
        """All members as one module whose array leaves have a leading member axis (this order).

        Works with ``pdequinox.extract_from_ensemble`` / ``combine_to_ensemble`` and ``eqx.filter_vmap``.
        """
        params, static = self._params("stacked")
        return eqx.combine(params, static)

    @property
    def spec(self) -> SweepSpec:
        """The structural config of these members (they must share one)."""
        return self._config("spec").spec

    def samples(self) -> tuple[np.ndarray, np.ndarray]:
        """Test inputs and targets of these members' structural config, as the store keeps them
        (the first 16 test samples of its problem, ``[samples, channels, *spatial]`` each): read
        from the store, never regenerated, so no code the store names runs."""
        config = self._config("samples")
        found = self._store.samples(config.config_id)
        if found is None:
            raise QueryError(
                f"samples(): the store holds no test samples for config {config.config_id} (its sweep "
                f"directory had no samples.parquet when it was aggregated; sweep.run writes it)"
            )
        return found

    def trajectories(self) -> np.ndarray:
        """Reference test trajectories of these members' structural config, as the store keeps them
        (the first 4 test trajectories of its problem, every step: ``[trajectories, steps + 1,
        channels, *spatial]``): read from the store, never regenerated. Roll the ensemble out from
        their first states to compare: ``self.rollout(traj[:, 0], traj.shape[1] - 1)``."""
        config = self._config("trajectories")
        found = self._store.trajectories(config.config_id)
        if found is None:
            raise QueryError(
                f"trajectories(): the store holds no test trajectories for config {config.config_id} "
                f"(its problem has none, e.g. heat1d without trajectory_steps, or its sweep was run "
                f"by a seed-sweep that did not keep them)"
            )
        return found

    # -- inference ------------------------------------------------------------------------------
    def predict(
        self, x: Float[Any, "batch ..."], chunk_size: int = DEFAULT_CHUNK
    ) -> Float[np.ndarray, "members batch ..."]:
        """Every member's output on ``x`` (``[batch, *sample_shape]``), as ``[members, batch, *out]``,
        computed ``chunk_size`` members at a time so memory stays bounded."""
        config, x = self._inputs(x, chunk_size, "predict")
        out = None
        for rows, y in self._outputs(config, x, chunk_size):
            if out is None:
                out = np.empty((len(self), *y.shape[1:]), y.dtype)
            out[rows] = y
        return out

    def mean_std(self, x: Float[Any, "batch ..."], chunk_size: int = DEFAULT_CHUNK) -> tuple[np.ndarray, np.ndarray]:
        """Mean and population std (ddof=0) over members of :meth:`predict`, streamed (float64 sums)."""
        config, x = self._inputs(x, chunk_size, "mean_std")
        moments = Moments()
        for _, y in self._outputs(config, x, chunk_size):
            moments.add(y)
        return moments.result(np.result_type(x.dtype, np.float32))

    def rollout(
        self, x0: Float[Any, "batch ..."], steps: int, chunk_size: int = DEFAULT_CHUNK
    ) -> Float[np.ndarray, "members t batch ..."]:
        """Every member's autoregressive rollout from the same initial states ``x0``
        (``[batch, *sample_shape]``): ``[members, steps + 1, batch, *sample_shape]``, index 0 = ``x0``,
        index ``t`` = the member applied ``t`` times. Streamed ``chunk_size`` members at a time; one
        compiled program per shapes, whatever ``steps`` (see :mod:`sweep.ensemble._rollout`).

        ```python
        states = sub.rollout(x0, steps=100)      # [members, 101, batch, channels, *spatial]
        ```
        """
        config, x0, steps = self._rollout_inputs(x0, steps, chunk_size, "rollout")
        out = np.empty((len(self), steps + 1, *x0.shape), x0.dtype)
        out[:, 0] = x0
        for rows, t, states in self._rollouts(config, x0, steps, chunk_size):
            out[rows, t : t + states.shape[1]] = states
        return out

    def rollout_mean_std(
        self, x0: Float[Any, "batch ..."], steps: int, chunk_size: int = DEFAULT_CHUNK
    ) -> tuple[np.ndarray, np.ndarray]:
        """Mean and population std (ddof=0) over members of :meth:`rollout` at every step,
        ``[steps + 1, batch, *sample_shape]`` each (step 0: ``x0`` and zeros), streamed: no array
        over members is held, only one chunk's states for one run of steps."""
        config, x0, steps = self._rollout_inputs(x0, steps, chunk_size, "rollout_mean_std")
        moments: dict[int, Moments] = {}
        for _, t, states in self._rollouts(config, x0, steps, chunk_size):
            moments.setdefault(t, Moments()).add(states)
        dtype = np.result_type(x0.dtype, np.float32)
        mean, std = np.empty((2, steps + 1, *x0.shape), dtype)
        mean[0], std[0] = x0, 0
        for t, m in moments.items():
            mean[t : t + len(m.mean)], std[t : t + len(m.mean)] = m.result(dtype)
        return mean, std

    # -- internals ------------------------------------------------------------------------------
    def _ids(self) -> np.ndarray:
        return self._index["member_id"].to_numpy()

    def _distinct(self, column: str, limit: int = 20) -> str:
        values = sorted(v for v in pc.unique(self._index[column]).to_pylist() if v is not None)
        return f"{values[:limit]}" + (f" and {len(values) - limit} more" if len(values) > limit else "")

    def _check_metric(self, metric: str, what: str, mode: str = "min") -> None:
        numeric = [f.name for f in self._index.schema if pa.types.is_floating(f.type) or pa.types.is_integer(f.type)]
        if metric not in numeric:
            raise QueryError(f"{what}(metric={metric!r}): not a numeric column; choose one of {', '.join(numeric)}")
        if mode not in MODES:
            raise QueryError(f'{what}(mode={mode!r}): choose "min" (lower {metric} is better) or "max"')

    def _no_values(self, metric: str, what: str) -> str:
        """Why ``metric`` cannot rank this selection: some members have no value (null)."""
        nulls = self._index[metric].is_null()
        configs = pc.unique(self._index.filter(nulls)["config_id"]).to_pylist()
        where = f"{self._index[metric].null_count} of {len(self)} members (config(s) {', '.join(configs[:5])}) have no {metric}"
        if not metric.startswith("val_"):
            return f"{what}(metric={metric!r}): {where}; select members that have one, or choose another metric="
        test = "test_" + metric.removeprefix("val_")
        return (
            f"{what}(metric={metric!r}): {where}: they were trained without a validation set "
            f"(problem.val_fraction=0), and ranking needs one. Pass an explicit metric=, e.g. metric={test!r} "
            f"(but a choice made on the test set makes its test numbers optimistic), or train with a validation set"
        )

    def _values(self, metric: str, what: str, mode: str = "min") -> np.ndarray:
        """``metric`` as float64 for ranking; every member must have a value."""
        self._check_metric(metric, what, mode)
        if self._index[metric].null_count:
            raise QueryError(self._no_values(metric, what))
        return self._index[metric].to_numpy(zero_copy_only=False).astype(np.float64)

    def _diverged(self) -> np.ndarray:
        return pc.equal(self._index["status"], "diverged").to_numpy(zero_copy_only=False)

    def _beside(self, metric: str) -> list[str]:
        """The test column reported beside a validation metric (``val_loss`` -> ``test_loss``)."""
        test = "test_" + metric.removeprefix("val_")
        return [test] if metric.startswith("val_") and test in self.columns else []

    def _config(self, what: str) -> ConfigInfo:
        configs = pc.unique(self._index["config_id"]).to_pylist()
        if len(configs) > 1:
            raise QueryError(
                f"{what}: the selection spans {len(configs)} structural configs ({', '.join(configs[:5])}); "
                f"select one first, e.g. .where(config_id={configs[0]!r}) or by a structural grid column"
            )
        return self._store.configs[configs[0]]

    def _positions(self, config: ConfigInfo) -> np.ndarray:
        return self._ids() - config.first_member

    def _params(self, what: str) -> tuple[PyTree, PyTree]:
        config = self._config(what)
        params = self._store.read(config.config_id, self._positions(config))
        return jax.tree_util.tree_map(jnp.asarray, params), self._store.template(config.config_id)[1]

    def _inputs(self, x: Any, chunk_size: int, what: str, name: str = "x") -> tuple[ConfigInfo, np.ndarray]:
        config = self._config(what)
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
            raise QueryError(f"{what}(chunk_size={chunk_size!r}): must be an integer >= 1")
        x = np.asarray(x)
        shape = tuple(config.sample_shape)
        if (
            x.ndim != len(shape) + 1
            or tuple(x.shape[1:]) != shape
            or not x.shape[0]
            or not np.issubdtype(x.dtype, np.number)
        ):
            raise QueryError(
                f"{what}: {name} has shape {tuple(x.shape)} ({x.dtype}); config {config.config_id} takes a batch of "
                f"samples of shape {shape}, i.e. a numeric array of shape (batch >= 1, {', '.join(map(str, shape))})"
            )
        dtype = jax.tree_util.tree_leaves(self._store.template(config.config_id)[0])[0].dtype
        return config, x.astype(dtype)

    def _rollout_inputs(self, x0: Any, steps: Any, chunk_size: int, what: str) -> tuple[ConfigInfo, np.ndarray, int]:
        steps = _rollout.check_steps(steps, what)
        config, x0 = self._inputs(x0, chunk_size, what, "x0")
        _rollout.check_fed_back(
            self._store.template(config.config_id), x0, f"{what}: the model of config {config.config_id}"
        )
        return config, x0, steps

    def _chunks(self, config: ConfigInfo, chunk_size: int) -> tuple[list[np.ndarray], Iterator[PyTree]]:
        """Rows of this selection in chunks of ``chunk_size`` in store order, and their stacked
        parameters read chunk by chunk (leaves files in store order)."""
        positions = self._positions(config)
        order = np.argsort(positions, kind="stable")
        slices = [order[i : i + chunk_size] for i in range(0, len(order), chunk_size)]
        return slices, (self._store.read(config.config_id, positions[rows]) for rows in slices)

    def _outputs(self, config: ConfigInfo, x: np.ndarray, chunk_size: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(rows of this selection, outputs)`` chunk by chunk."""
        slices, chunks = self._chunks(config, chunk_size)
        yield from zip(slices, _inference.forward(chunks, self._store.template(config.config_id)[1], x))

    def _rollouts(
        self, config: ConfigInfo, x0: np.ndarray, steps: int, chunk_size: int
    ) -> Iterator[tuple[np.ndarray, int, np.ndarray]]:
        """``(rows of this selection, t, their states after t.. steps)`` chunk by chunk (see
        :func:`._rollout.rollout`)."""
        slices, chunks = self._chunks(config, chunk_size)
        for i, t, states in _rollout.rollout(chunks, self._store.template(config.config_id)[1], x0, steps):
            yield slices[i], t, states


def _both(filters: dict[str, pa.Array], more: dict[str, pa.Array]) -> dict[str, pa.Array]:
    """Filters that hold where both hold (a column in both: the values in both)."""
    out = dict(filters)
    for column, values in more.items():
        out[column] = values if column not in out else pc.filter(values, pc.is_in(values, value_set=out[column]))
    return out


def _kwargs(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in values.items())
