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
from typing import TYPE_CHECKING, Any

import equinox as eqx
import jax
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from .._errors import QueryError
from .._words import counted
from ..metrics import mode_of
from ..racing import race_table
from ..store import Store
from . import _scoring, _stats, _stored_scores
from ._blend import Blend
from ._calibrated import Calibrated
from ._field_totals import Extras
from ._greedy import select_greedy
from ._predictions import DEFAULT_CHUNK
from ._rows import REPR_ROWS, SummaryTable, format_table, html_table, seed_text
from ._selection import refuse_pooled_sides
from ._stats import Comparison

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_METRIC = "val_loss"  # what every choice ranks by


def load(
    path: str | os.PathLike[str], storage_filesystem: pafs.FileSystem | None = None, *, trust_code: bool = False
) -> Ensemble:
    """Open the store of a sweep for queries.

    Reads the manifest, ``configs.parquet`` and the footer of ``members.parquet``; member rows
    are read when a query needs them, and :meth:`Ensemble.where` on the whole store reads only
    the row groups that can hold its members. Every file is verified against the manifest when
    first read; nothing is unpickled and no code the store names is imported unless
    ``trust_code``.

    Args:
        path: The sweep directory or its ``ensembles/`` directory; local, NFS or ``s3://...``.
        storage_filesystem: A ``pyarrow.fs.FileSystem`` to read ``path`` with (as in ``sweep.run``).
        trust_code: Build the models the store names by import path (``model.name =
            "package.module:factory"``, your own models): the predictions of such members
            (``member``, ``mean_std``, ``rollout``, ``scores``, ``export``, serving) call that
            factory, code the store names, so they are refused unless you trust the store. The
            factory is imported from your environment only, never from the store's directory.
            Built-in architectures need no trust.

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
    store = Store.open(path, storage_filesystem, trust_code=trust_code)
    _ = store.index_schema  # opens members.parquet: its size and footer are checked now
    return Ensemble(store)


class Ensemble(Calibrated):
    """A selection of members of a store, in a fixed order; every query returns a new one.

    Rows come in store order (config_id, then vmapped hyperparameters, then seed) unless
    :meth:`best` ranked them. Leaves are read from the store only when needed, file by file.
    A selection of the store made by :meth:`where` alone (``index=None``: ``filters``, column ->
    values) reads its rows when a query needs them, from the row groups that can hold them.
    """

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

    def summary(self, metric: str = DEFAULT_METRIC, mode: str | None = None, scores: bool = False) -> SummaryTable:
        """One row per configuration (structural config x vmapped hyperparameters), best first (by
        the mean of ``metric``; highest first with ``mode="max"``, the default for a built-in score
        such as ``val_accuracy``): member counts (``count``,
        ``diverged``, ``stopped_early``, and ``n``, the members the statistics use: those that did not
        diverge) and mean / std (ddof=1) / median / min / max of ``metric``, the 95% percentile bootstrap
        interval of the mean (``mean_ci_low``, ``mean_ci_high``: within the values' range, so never
        below 0 for a loss), and the interquartile mean with its bootstrap interval. For a validation
        metric (``val_<name>``) the test column ``test_<name>`` is reported beside it
        (``test_<name>_mean``, ``test_<name>_ci_low``, ``test_<name>_ci_high``), not used to rank.

        ``scores=True``: each configuration's stored ensemble scores beside (:meth:`stored_scores`,
        one-step, per split: ``<split>_crps``, ``<split>_spread_skill``, ``<split>_coverage_50``,
        ``<split>_coverage_90``, ``<split>_loss_gain``), empty for a configuration this selection
        holds only some members of (they score all its members: :meth:`scores` computes the
        selection's own).

        Returns a :class:`~sweep.ensemble.SummaryTable`: the pyarrow table's methods
        (``to_pylist()``, ``to_pandas()``, ``column()``, ...), ``.table`` for the
        :class:`pyarrow.Table` itself, and a ``repr`` / notebook view made of the best rows."""
        mode = mode_of(metric, mode)
        self._check_metric(metric, "summary", mode)
        if self._index[metric].null_count == len(self):
            raise QueryError(self._no_values(metric, "summary"))
        keys = ["config_id", *self.grid_columns]
        table = _stats.summary(self._index, keys, metric, self._beside(metric), mode)
        if scores:
            table = _stored_scores.beside_summary(table, self, keys)
        order = "lowest" if mode == "min" else "highest"
        title = (
            f"{metric} over seeds per configuration ({counted(len(self), 'member')}), {order} mean first; 95% intervals"
        )
        units = self.units_note()
        return SummaryTable(table, title + (f"\n{units}" if units else ""))

    def scores(
        self,
        split: str = "test",
        chunk_size: int = DEFAULT_CHUNK,
        thresholds: Any = None,
        fields: bool = False,
        *,
        samples: tuple[Any, Any] | None = None,
        trajectories: Any = None,
    ) -> pa.Table:
        """Ensemble scores of every configuration of this selection on the samples and trajectories
        of ``split`` (``"test"`` or ``"val"``) the store holds (never regenerated), or on the whole
        split given as ``samples=(x, y)`` and/or ``trajectories`` (then the store's are not read,
        and the rows are those of what is given, labelled ``split``): one row per
        configuration and kind (``one_step``; ``rollout`` per step and ``rollout_gmean`` where the
        store holds trajectories; ``ensemble_size`` for subsets of 2, 4, 8, ... members), with CRPS
        (fair), MAE and RMSE of the ensemble mean, spread, spread-skill ratio, coverage of the
        central 50% and 90% intervals, the rank histogram, and the loss and each built-in metric of
        the ensemble mean beside their mean over members and the ratio (``<name>_gain``, > 1:
        the mean beats a member). Columns: :func:`sweep.store._schema.scores_schema`; formulas:
        :mod:`sweep.ensemble._scores`. Then, on one-step, rollout and rollout_gmean rows, the
        multivariate and event scores (:mod:`sweep.ensemble._field_totals`), which the stored
        table does not hold: the fair CRPS's terms ``crps_skill`` and ``crps_spread``; with
        ``fields``, the ``energy_score`` and ``variogram_score`` of each sample's field (or
        rollout state), averaged; and per number of ``thresholds``, ``twcrps_<t>`` and
        ``brier_<t>`` of exceeding it. A :class:`QueryError` says why a configuration cannot be
        scored (no samples of the split, class labels).

        The given ``samples`` (inputs ``[n, *sample_shape]``, targets ``[n, *target_shape]``) and
        ``trajectories`` (``[n, T + 1, channels, *spatial]``), in physical units, may be larger
        than memory: arrays or array-likes (``h5py.Dataset``, ``np.memmap``) read a block of
        items at a time, the block as many items as keep every member's values under
        :data:`~sweep.ensemble._scoring.BLOCK_BYTES` (64 MiB); the scores are exact (the same
        blocks and numbers as the same arrays in memory, bit for bit), not streamed
        approximations. :func:`sweep.problems.hdf5_split` gives them for an ``"hdf5"`` problem.

        ```python
        row = ens.where(depth=4).scores("test", thresholds=[0.5], fields=True).to_pylist()[0]
        row["crps"], row["spread_skill"], row["coverage_90"], row["loss_gain"]
        row["energy_score"], row["crps_spread"], row["brier_0.5"]

        with h5py.File("test.h5") as f:  # the whole test split, read a block at a time
            table = ens.where(depth=4).scores("test", samples=(f["x"], f["y"]), trajectories=f["traj"])
        ```
        """
        extras = Extras.checked(thresholds, fields, "scores")
        split = _scoring.check_split(split, "scores")
        data = _scoring.checked_data(samples, trajectories)
        return _scoring.scores_table(self, (split,), chunk_size, extras=extras, data=data)

    def stored_scores(self, split: str | None = None) -> pa.Table:
        """The ensemble scores the aggregation stored (``ensemble_scores.parquet``: of all members of
        each configuration) of the configurations this selection has members of, on ``split`` or
        both (columns as :meth:`scores`); a :class:`QueryError` for a store made without them.
        :func:`sweep.ensemble.whole_configurations` keeps those that are the selection's own."""
        return _stored_scores.stored_rows(self, split)

    def seeds_needed(self, metric: str = DEFAULT_METRIC, width: float = 0.1, mode: str | None = None) -> pa.Table:
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
        self._check_metric(metric, "seeds_needed", mode_of(metric, mode))
        return _stats.seeds_needed(self.summary(metric, mode).table, ["config_id", *self.grid_columns], float(width))

    def race(self) -> pa.Table | None:
        """The race of adaptive seeds that trained the store (:class:`sweep.Adaptive`), one row per
        configuration: grid values, status (``racing``, ``eliminated``, ``decided``, ``finished``), the round of its
        decision, seeds, the mean of the race's metric with its corrected interval (races decided by
        intervals) or the p-value of its rank test against the best (``p``), and ``best``; None
        for a sweep with fixed seeds. Its settings and outcome in a sentence:
        ``table.schema.metadata[b"title"]`` (what ``sweep show`` prints above it)."""
        race = self._store.race
        return None if race is None else race_table(race, self.grid_columns, f"{self._store.root}/manifest.json")

    def summary_frame(self, metric: str = DEFAULT_METRIC, mode: str | None = None) -> pd.DataFrame:
        """:meth:`summary` as a pandas DataFrame (for notebooks)."""
        return self.summary(metric, mode).to_pandas()

    def best_configuration(self, metric: str = DEFAULT_METRIC, mode: str | None = None) -> dict[str, Any]:
        """The grid values of the configuration with the best mean ``metric`` over its members that did
        not diverge (the first row of :meth:`summary`).

        Args:
            metric: The column to rank by (default the validation loss).
            mode: ``"min"`` if lower is better, ``"max"`` if higher; ``None``: ``"max"`` for a built-in
                score (accuracy, correlation: ``val_accuracy``, ...), else ``"min"``.

        Returns:
            The configuration's grid values by column (its ``config_id`` without grid columns),
            e.g. ``{"depth": 6, "learning_rate": 0.0003}``.

        Examples:
            ```python
            best = ens.best_configuration()
            top = ens.where(**best).best(8)
            ```
        """
        mode = mode_of(metric, mode)
        self._values(metric, "best_configuration", mode)
        rows = [r for r in self.summary(metric, mode).to_pylist() if np.isfinite(r["mean"])]
        if not rows:
            raise QueryError(f"best_configuration(metric={metric!r}): every member diverged or has no finite {metric}")
        return {k: rows[0][k] for k in self.grid_columns} or {"config_id": rows[0]["config_id"]}

    def compare(
        self,
        a: dict[str, Any],
        b: dict[str, Any],
        metric: str = DEFAULT_METRIC,
        mode: str | None = None,
        pool: bool = False,
    ) -> Comparison:
        """``where(**a)`` against ``where(**b)`` on ``metric``, over seeds.

        A grid column that ``a`` or ``b`` leaves free while it takes several values there would pool
        members trained with different settings into one side: that is refused unless ``pool=True``.

        Args:
            a: Column values of one side.
            b: Column values of the other side.
            metric: The column compared (default the validation loss).
            mode: ``"min"`` if lower is better, ``"max"`` if higher; ``None``: ``"max"`` for a built-in
                score (accuracy, correlation: ``val_accuracy``, ...), else ``"min"``.
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
        sides = {name: (side, self._side(name, side)) for name, side in (("a", a), ("b", b))}
        if not pool:
            refuse_pooled_sides(sides)
        (_, sa), (_, sb) = sides.values()
        mode = mode_of(metric, mode)
        va, vb = sa._values(metric, "compare", mode), sb._values(metric, "compare", mode)
        return _stats.compare(va, vb, sa._diverged(), sb._diverged(), metric, mode)

    def _side(self, name: str, values: dict[str, Any]) -> Ensemble:
        try:
            return self.where(**values)
        except QueryError as e:  # named as the call it is
            raise QueryError(f"compare({name}={values!r}): {str(e).removeprefix('where(): ')}") from None

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
        index, filters = self._matching(column_values)
        return self if index is None and filters is None else Ensemble(self._store, index, filters)

    def best(self, k: int, metric: str = DEFAULT_METRIC, mode: str | None = None) -> Ensemble:
        """The ``k`` members (all, if fewer) with the best ``metric``, best first.

        Diverged members rank last and ties go by ``member_id``.

        Args:
            k: How many members, ``>= 1``.
            metric: The column to rank by: the validation loss unless told otherwise; without a
                validation set ``metric=`` must be given.
            mode: ``"min"`` (lowest first) or ``"max"`` (highest first); ``None``: ``"max"`` for a
                built-in score (accuracy, correlation: ``val_accuracy``, ...), else ``"min"``.

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
        mode = mode_of(metric, mode)
        values = self._values(metric, "best", mode)
        scores = np.where(self._diverged() | ~np.isfinite(values), np.inf, values if mode == "min" else -values)
        order = np.lexsort((self._ids(), scores))[:k]
        return Ensemble(self._store, self._index.take(order))

    def select_greedy(self, k: int, metric: str = "crps", split: str = "val", chunk_size: int = DEFAULT_CHUNK) -> Blend:
        """An ensemble across configurations (architectures included): ``k`` steps of greedy
        selection with replacement (Caruana et al. 2004) over every member of this selection,
        each step adding the member that most improves ``metric`` (``"crps"`` or ``"rmse"``) on
        the ``split`` samples the store holds; a member chosen ``n`` times weighs ``n / k``
        (:mod:`sweep.ensemble._greedy`).

        Returns:
            A :class:`~sweep.ensemble.Blend`: ``predict``, ``rollout``, weighted ``mean_std`` and
            ``rollout_mean_std``, ``scores``, ``recalibrate``, ``export`` (members of each
            structural config run together), and ``sweep.serve`` serves it.

        Raises:
            QueryError: ``k < 1``, an unknown metric, no samples of ``split``, or configurations
                holding different samples (other problems).

        Examples:
            ```python
            blend = ens.select_greedy(8, metric="crps", split="val")
            mean, std = blend.mean_std(x)
            ```
        """
        configs = dict.fromkeys(self.index["config_id"].to_pylist())
        return select_greedy([self.where(config_id=c) for c in configs], k, metric, split, chunk_size)

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
        rows = self.where(**where)._seed_row(int(seed))
        params, static = Ensemble(self._store, rows).stacked_params("member")
        return eqx.combine(jax.tree_util.tree_map(lambda a: a[0], params), static)
