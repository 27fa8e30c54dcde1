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
from typing import TYPE_CHECKING, Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
from jaxtyping import Float, PyTree

from .._errors import QueryError, did_you_mean
from ..spec import SweepSpec
from ..store import ConfigInfo, Store
from . import _inference, _rollout, _scoring, _stats
from ._inference import Moments
from ._race import race_table
from ._rows import REPR_ROWS, SummaryTable, format_table, html_table, seed_text
from ._stats import MODES, Comparison

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_CHUNK = 64  # members per compiled inference call
DEFAULT_METRIC = "val_loss"  # what every choice ranks by


def load(path: str | os.PathLike[str], storage_filesystem: pafs.FileSystem | None = None) -> Ensemble:
    """Open the store of a sweep for queries.

    Reads the manifest, ``configs.parquet`` and the footer of ``members.parquet``; member rows
    are read when a query needs them, and :meth:`Ensemble.where` on the whole store reads only
    the row groups that can hold its members. Every file is verified against the manifest when
    first read; nothing is unpickled and no code the store names is imported.

    Args:
        path: The sweep directory or its ``ensembles/`` directory; local, NFS or ``s3://...``.
        storage_filesystem: A ``pyarrow.fs.FileSystem`` to read ``path`` with (as in ``sweep.run``).

    Returns:
        An :class:`Ensemble` of every member of the store.

    Raises:
        StoreError: ``path`` is not a store, or is of another format, or a file it reads is
            missing, truncated or altered.

    Examples:
        ```python
        ens = sweep.load("runs/heat")
        ens.summary()
        ```
    """
    store = Store.open(path, storage_filesystem)
    _ = store.index_schema  # opens members.parquet: its size and footer are checked now
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
        title, rows = self._overview()
        return f"{title}\n{format_table(rows, REPR_ROWS, hint='')}"

    def _repr_html_(self) -> str:
        """The same table as ``repr()``, in HTML (what a notebook shows)."""
        title, rows = self._overview()
        return html_table(rows, REPR_ROWS, title, hint="")

    def _overview(self) -> tuple[str, pa.Table]:
        """A title naming the sweep and the counts, and one row per configuration: its grid
        values, its number of members and their seeds."""
        keys = ["config_id", *self.grid_columns]
        groups = self._index.group_by(keys, use_threads=False).aggregate([("seed", "list")])
        seeds = groups["seed_list"].to_pylist()
        rows = groups.select(keys).append_column("members", pa.array([len(s) for s in seeds], pa.int64()))
        rows = rows.append_column("seeds", pa.array([seed_text(s) for s in seeds], pa.string()))
        name = next((c.spec.name for c in self._store.configs.values()), self._store.directory.rpartition("/")[2])
        structural = len(pc.unique(self._index["config_id"]))  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
        title = (
            f"Ensemble of {len(self)} members of sweep {name!r}: {rows.num_rows} configuration(s) in "
            f"{structural} structural config(s)"
        )
        return title, rows

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

    def summary(self, metric: str = DEFAULT_METRIC, mode: str = "min", scores: bool = False) -> SummaryTable:
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
        ``<split>_coverage_90``, ``<split>_loss_gain``).

        Returns a :class:`~sweep.ensemble.SummaryTable`: the pyarrow table's methods
        (``to_pylist()``, ``to_pandas()``, ``column()``, ...), ``.table`` for the
        :class:`pyarrow.Table` itself, and a ``repr`` / notebook view made of the best rows."""
        self._check_metric(metric, "summary", mode)
        if self._index[metric].null_count == len(self):
            raise QueryError(self._no_values(metric, "summary"))
        keys = ["config_id", *self.grid_columns]
        table = _stats.summary(self._index, keys, metric, self._beside(metric), mode)
        if scores:
            table = _scoring.beside_summary(table, self.stored_scores(), keys)
        order = "lowest" if mode == "min" else "highest"
        return SummaryTable(
            table, f"{metric} over seeds per configuration ({len(self)} members), {order} mean first; 95% intervals"
        )

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
        return _stats.seeds_needed(self.summary(metric, mode).table, ["config_id", *self.grid_columns], float(width))

    def race(self) -> pa.Table | None:
        """The race of adaptive seeds that trained the store (:class:`sweep.Adaptive`), one row per
        configuration: grid values, status (``racing``, ``eliminated``, ``decided``, ``finished``), the round of its
        decision, seeds, the mean and simultaneous interval of the race's metric, and ``best``; None
        for a sweep with fixed seeds. Its settings and outcome in a sentence:
        ``table.schema.metadata[b"title"]`` (what ``sweep show`` prints above it)."""
        race = self._store.race
        return None if race is None else race_table(race, self.grid_columns)

    def summary_frame(self, metric: str = DEFAULT_METRIC, mode: str = "min") -> pd.DataFrame:
        """:meth:`summary` as a pandas DataFrame (for notebooks)."""
        return self.summary(metric, mode).to_pandas()

    def best_configuration(self, metric: str = DEFAULT_METRIC, mode: str = "min") -> dict[str, Any]:
        """The grid values of the configuration with the best mean ``metric`` over its members that did
        not diverge (the first row of :meth:`summary`).

        Args:
            metric: The column to rank by (default the validation loss).
            mode: ``"min"`` or ``"max"``.

        Returns:
            The configuration's grid values by column (its ``config_id`` without grid columns),
            e.g. ``{"depth": 6, "learning_rate": 0.0003}``.

        Examples:
            ```python
            best = ens.best_configuration()
            top = ens.where(**best).best(8)
            ```
        """
        self._values(metric, "best_configuration", mode)
        rows = [r for r in self.summary(metric, mode).to_pylist() if np.isfinite(r["mean"])]
        if not rows:
            raise QueryError(f"best_configuration(metric={metric!r}): every member diverged or has no finite {metric}")
        return {k: rows[0][k] for k in self.grid_columns} or {"config_id": rows[0]["config_id"]}

    def compare(
        self, a: dict[str, Any], b: dict[str, Any], metric: str = DEFAULT_METRIC, mode: str = "min", pool: bool = False
    ) -> Comparison:
        """``where(**a)`` against ``where(**b)`` on ``metric``, over seeds.

        A grid column that ``a`` or ``b`` leaves free while it takes several values there would pool
        members trained with different settings into one side: that is refused unless ``pool=True``.

        Args:
            a: Column values of one side.
            b: Column values of the other side.
            metric: The column compared (default the validation loss).
            mode: ``"min"`` if lower is better, ``"max"`` if higher.
            pool: Allow pooling over a free grid column.

        Returns:
            A :class:`Comparison`, with P(a member of ``a`` beats one of ``b``), its 95% bootstrap
            interval (diverged members lose), the difference of their means (a - b) with its interval,
            and the counts.

        Raises:
            QueryError: A free grid column (named, with its values) without ``pool=True``, or an
                empty side.

        Examples:
            ```python
            ens.compare({"depth": 4, "learning_rate": 1e-3}, {"depth": 6, "learning_rate": 1e-3}).probability
            ```
        """
        sides = {"a": (a, self.where(**a)), "b": (b, self.where(**b))}
        if not pool:
            free: dict[str, list[str]] = {}
            for name, (fixed, side) in sides.items():
                for c, values in side._free_columns(fixed).items():
                    free.setdefault(c, []).append(f"{values} in {name}")
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
        """Members whose columns equal the values given.

        Args:
            **column_values: Column -> value; a list, tuple or set means any of them.

        Returns:
            The selection, in store order.

        Raises:
            QueryError: An unknown column (the message lists the columns there are).

        Examples:
            ```python
            ens.where(depth=6, learning_rate=[1e-3, 3e-4], status="ok")
            ```
        """
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
                hit = pc.is_in(self._rows[column], value_set=value_set)  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
                mask = hit if mask is None else pc.and_(mask, hit)  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
            selected = self._rows.filter(mask)
            if selected.num_rows:
                return Ensemble(self._store, selected)
        present = "; ".join(f"{c} takes {self._distinct(c)}" for c in column_values)
        raise QueryError(f"where({_kwargs(column_values)}): no member matches; in this selection {present}")

    def best(self, k: int, metric: str = DEFAULT_METRIC, mode: str = "min") -> Ensemble:
        """The ``k`` members (all, if fewer) with the best ``metric``, best first.

        Diverged members rank last and ties go by ``member_id``.

        Args:
            k: How many members, ``>= 1``.
            metric: The column to rank by: the validation loss unless told otherwise; without a
                validation set ``metric=`` must be given.
            mode: ``"min"`` (lowest first) or ``"max"`` (highest first, e.g. ``val_accuracy``).

        Returns:
            The selection, best first.

        Raises:
            QueryError: ``k < 1``, an unknown column, or a column some members have no value of.

        Examples:
            ```python
            top = ens.where(depth=6).best(8)
            ```
        """
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise QueryError(f"best(k={k!r}): k must be an integer >= 1")
        values = self._values(metric, "best", mode)
        scores = np.where(self._diverged() | ~np.isfinite(values), np.inf, values if mode == "min" else -values)
        order = np.lexsort((self._ids(), scores))[:k]
        return Ensemble(self._store, self._index.take(order))

    def member(self, seed: int, **where: Any) -> eqx.Module:
        """The one member with this seed (and ``where`` values) as a plain module for one sample.

        Args:
            seed: The member's seed.
            **where: Further column values, when the seed alone does not pick one member.

        Returns:
            An ``eqx.Module``.

        Raises:
            QueryError: No member, or several, match.

        Examples:
            ```python
            net = ens.where(depth=4, learning_rate=1e-3).member(seed=4)
            y = net(x[0])
            ```
        """
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise QueryError(f"member(seed={seed!r}): the seed must be an integer")
        selection = self.where(**where)
        if selection._rows is None:  # read only the row groups that can hold the seed
            rows = selection._store.select(_both(selection._filters, {"seed": pa.array([int(seed)], pa.int64())}))
        else:
            rows = selection._rows.filter(pc.equal(selection._rows["seed"], int(seed)))  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
        if rows.num_rows == 0:
            raise QueryError(
                f"member(seed={seed!r}): no member with this seed here; seeds: {selection._distinct('seed')}"
            )
        if rows.num_rows > 1:
            keys = ["config_id", *self._store.grid_columns]
            varying = [c for c in keys if c in rows.column_names and len(pc.unique(rows[c])) > 1]  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
            raise QueryError(
                f"member(seed={seed!r}): {rows.num_rows} members have this seed (they differ in "
                f"{', '.join(varying)}); narrow it down, e.g. member(seed={seed!r}, {varying[0]}={rows[varying[0]][0].as_py()!r})"
            )
        params, static = Ensemble(self._store, rows)._params("member")
        return eqx.combine(jax.tree_util.tree_map(lambda a: a[0], params), static)

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
        params, static = self._params("stacked")
        return eqx.combine(params, static)

    @property
    def spec(self) -> SweepSpec:
        """The structural config of these members (they must share one)."""
        return self._config("spec").spec

    def samples(self) -> tuple[np.ndarray, np.ndarray]:
        """Test inputs and targets of these members' structural config, as the store keeps them
        (the first 16 test samples of its problem: inputs ``[samples, channels, *spatial]``,
        targets ``[samples, *target_shape]``, float32 or int32 class labels as the data gave them):
        read from the store, never regenerated, so no code the store names runs."""
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
        channels, *spatial]``): read from the store, never regenerated.

        Axis order: trajectory before time, as the data's ``*_traj`` arrays hold them (each
        trajectory one contiguous run of states). :meth:`rollout` puts time before the batch for
        one reason: its step ``t`` is then a batch shaped like its input ``x0``, what
        :meth:`predict` takes. Compare them after one ``swapaxes``:

        ```python
        traj = sub.trajectories()                                # [trajectories, T + 1, ...]
        states = sub.rollout(traj[:, 0], traj.shape[1] - 1)      # [members, T + 1, trajectories, ...]
        error = states - traj.swapaxes(0, 1)                     # [members, T + 1, trajectories, ...]
        ```"""
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
        """Every member's output on ``x``, computed ``chunk_size`` members at a time so memory stays bounded.

        Args:
            x: Inputs ``[batch, *sample_shape]``.
            chunk_size: Members per compiled call.

        Returns:
            ``[members, batch, *out]``.

        Raises:
            QueryError: ``x`` of the wrong shape, or a selection spanning several structural configs.

        Examples:
            ```python
            y = ens.where(depth=4).best(8).predict(x)  # [8, batch, channels, *spatial]
            ```
        """
        config, x = self._inputs(x, chunk_size, "predict")
        out = None
        for rows, y in self._outputs(config, x, chunk_size):
            if out is None:
                out = np.empty((len(self), *y.shape[1:]), y.dtype)
            out[rows] = y
        assert out is not None  # _inputs found the selection's config, so it has members
        return out

    def mean_std(self, x: Float[Any, "batch ..."], chunk_size: int = DEFAULT_CHUNK) -> tuple[np.ndarray, np.ndarray]:
        """Mean and population std (ddof=0) over members of :meth:`predict`, streamed (float64 sums).

        Args:
            x: Inputs ``[batch, *sample_shape]``.
            chunk_size: Members per compiled call.

        Returns:
            ``(mean, std)``, each ``[batch, *out]``.

        Raises:
            QueryError: As :meth:`predict`.

        Examples:
            ```python
            mean, std = ens.where(depth=4).best(8).mean_std(x)
            ```
        """
        config, x = self._inputs(x, chunk_size, "mean_std")
        moments = Moments()
        for _, y in self._outputs(config, x, chunk_size):
            moments.add(y)
        return moments.result(np.result_type(x.dtype, np.float32))

    def rollout(
        self, x0: Float[Any, "batch ..."], steps: int, chunk_size: int = DEFAULT_CHUNK
    ) -> Float[np.ndarray, "members t batch ..."]:
        """Every member's autoregressive rollout from the same initial states ``x0``.

        Axis order: time before the batch, so that ``states[:, t]`` is a batch shaped like ``x0``
        (what :meth:`predict` takes); :meth:`trajectories` keeps the data's order, trajectory
        before time: compare with ``traj.swapaxes(0, 1)``.

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
        """Mean and population std (ddof=0) over members of :meth:`rollout` at every step, streamed: no
        array over members is held, only one chunk's states for one run of steps.

        Args:
            x0: Initial states ``[batch, *sample_shape]``.
            steps: Autoregressive steps, ``>= 1``.
            chunk_size: Members per compiled call.

        Returns:
            ``(mean, std)``, each ``[steps + 1, batch, *sample_shape]`` (step 0 holds ``x0`` and zeros).

        Raises:
            QueryError: As :meth:`rollout`.

        Examples:
            ```python
            mean, std = sub.rollout_mean_std(traj[:, 0], 100)
            ```
        """
        config, x0, steps = self._rollout_inputs(x0, steps, chunk_size, "rollout_mean_std")
        moments: dict[int, Moments] = {}
        for _, t, states in self._rollouts(config, x0, steps, chunk_size):
            moments.setdefault(t, Moments()).add(states)
        dtype = np.result_type(x0.dtype, np.float32)
        mean, std = np.empty((2, steps + 1, *x0.shape), dtype)
        mean[0], std[0] = x0, 0
        for t, m in moments.items():
            m_mean, m_std = m.result(dtype)
            mean[t : t + len(m_mean)], std[t : t + len(m_mean)] = m_mean, m_std
        return mean, std

    # -- internals ------------------------------------------------------------------------------
    def _ids(self) -> np.ndarray:
        return self._index["member_id"].to_numpy()

    def _distinct(self, column: str, limit: int = 20) -> str:
        values = sorted(v for v in pc.unique(self._index[column]).to_pylist() if v is not None)  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
        return f"{values[:limit]}" + (f" and {len(values) - limit} more" if len(values) > limit else "")

    def _free_columns(self, fixed: Any) -> dict[str, str]:
        """The grid columns not named in ``fixed`` that take several values in this selection
        (column -> its values, as text): what would pool members trained with different settings."""
        return {
            c: self._distinct(c)
            for c in self.grid_columns
            if c not in fixed and len(pc.unique(self._index[c])) > 1  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
        }

    def _check_metric(self, metric: str, what: str, mode: str = "min") -> None:
        numeric = [f.name for f in self._index.schema if pa.types.is_floating(f.type) or pa.types.is_integer(f.type)]
        if metric not in self._index.schema.names:
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
        return pc.equal(self._index["status"], "diverged").to_numpy(zero_copy_only=False)  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)

    def _beside(self, metric: str) -> list[str]:
        """The test column reported beside a validation metric (``val_loss`` -> ``test_loss``)."""
        test = "test_" + metric.removeprefix("val_")
        return [test] if metric.startswith("val_") and test in self.columns else []

    def _config(self, what: str) -> ConfigInfo:
        configs = pc.unique(self._index["config_id"]).to_pylist()  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
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
        out[column] = values if column not in out else pc.filter(values, pc.is_in(values, value_set=out[column]))  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
    return out


def _kwargs(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in values.items())
