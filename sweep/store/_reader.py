"""Read a committed store: manifest, tables, samples and members' leaves (no pickle, no stored code).

Every file is opened through :meth:`Store._located`: its name must be one of the store's
layout (:data:`~._schema.STORE_FILE`), no link may lie on its path, and its bytes must match
the size and sha256 the manifest records, checked when they are read: a leaves file whole, in
one pass; a table piece by piece (:class:`~._files.PieceReader`), so that a query reads only
the footer and the row groups it needs. Opening a store reads the manifest (checked by
:mod:`._manifest`) and ``configs.parquet`` (config ids checked against their specs by
:mod:`._configs`); :meth:`Store.verify` checks everything (:mod:`._verify`). Member rows are read when asked
for, only the row groups whose statistics can match (:meth:`Store.select`), and checked against
the configs (every member id inside its config's range), so a query never indexes the wrong member.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Mapping
from typing import Any

import equinox as eqx
import jax
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from jaxtyping import PyTree

from .._errors import SpecError, StoreError
from .._fs import filesystem_path, local_path
from .._import_path import is_import_path, refuse_inside, with_import_hint
from .._layout import CONFIGS, ENSEMBLE_SCORES, MANIFEST, MEMBERS, NORMALIZATION, SPLIT_FILES
from ..models import model_template
from ..problems import Normalization
from ._configs import ConfigInfo, read_configs
from ._files import AGGREGATE_AGAIN, open_table
from ._generations import committed_root
from ._listed import locate, read_shard
from ._manifest import read_manifest
from ._samples import normalization_of, samples_of, trajectories_of
from ._schema import SAMPLE_FILES, index_columns, index_problems, scores_schema
from ._verify import check_listed, verify


def untrusted_model(config_id: str, name: str) -> str:
    """Why the model of ``config_id``, built by the import path ``name``, is not built."""
    return (
        f"config {config_id}: its model is built by {name!r}, code the store names, which seed-sweep runs only "
        f"for a store you trust (your own sweep, or one from a sender you trust): load it with trust_code=True "
        f"(sweep.load, sweep.plot, sweep.ServeOptions), with that factory installed"
    )


class Store:
    """A committed store (see :mod:`sweep.store`); open it with :meth:`Store.open`."""

    fs: pafs.FileSystem
    root: str
    manifest: dict[str, Any]

    def __init__(
        self,
        fs: pafs.FileSystem,
        root: str,
        manifest: dict[str, Any],
        manifest_sha256: str = "",
        trust_code: bool = False,
    ):
        self.fs, self.root, self.manifest = fs, root, manifest
        self.manifest_sha256 = manifest_sha256  # the root of every checksum: compare it with the sender's
        self.trust_code = trust_code  # whether a model the store names by import path may be built
        self.configs: dict[str, ConfigInfo] = {}
        self._tables: dict[str, pq.ParquetFile] = {}  # verified, open
        self._templates: dict[str, tuple[PyTree, PyTree]] = {}
        self._normalizations: dict[str, Normalization | None] = {}
        self._cached: tuple[str, PyTree] | None = None  # the last leaves file read

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], filesystem: pafs.FileSystem | None = None, trust_code: bool = False
    ) -> Store:
        """Open the store of a sweep directory (or a store directory) on any pyarrow filesystem;
        ``trust_code``: see :meth:`template`."""
        if not isinstance(path, (str, os.PathLike)):
            raise StoreError(f"got {path!r}; give the directory of a sweep (made by `sweep run`), as a path")
        fs, path = filesystem_path(path, filesystem)
        root = committed_root(fs, path)
        return cls.at(fs, root, *read_manifest(fs, f"{root}/{MANIFEST}"), trust_code=trust_code)

    @classmethod
    def at(
        cls,
        fs: pafs.FileSystem,
        root: str,
        manifest: dict[str, Any],
        manifest_sha256: str = "",
        trust_code: bool = False,
    ) -> Store:
        """The store in directory ``root`` whose manifest is ``manifest`` (read and checked by
        :meth:`open`; the aggregator's own for a generation written but not committed yet), its
        ``configs.parquet`` read and checked."""
        store = cls(fs, root, manifest, manifest_sha256, trust_code)
        store.configs = store._read_configs()
        return store

    def trusting(self) -> Store:
        """This store (sharing what it has read), able to build the models it names by import path."""
        trusted = copy.copy(self)
        trusted.trust_code = True
        trusted._templates = dict(self._templates)  # its models are its own: none reaches this store
        return trusted

    @property
    def directory(self) -> str:
        """The directory the store came with: the sweep directory of a generation, else the store's own."""
        parent, _, _ = self.root.rpartition("/")
        return parent.rpartition("/")[0] if parent.rpartition("/")[2].startswith(".") else self.root

    @property
    def grid_columns(self) -> list[str]:
        """Names of the grid value columns of ``members.parquet``, in grid order."""
        return [c["name"] for c in self.manifest["columns"]]

    @property
    def metrics(self) -> list[str]:
        """Stored names of the metrics (columns ``val_<name>``, ``test_<name>``), in column order."""
        return list(self.manifest["metrics"])

    @property
    def index_names(self) -> list[str]:
        """The columns of :meth:`index`: every column but the histories (``round`` in a race's store)."""
        return index_columns(self.grid_columns, self.metrics, race="race" in self.manifest)

    @property
    def race(self) -> dict[str, Any] | None:
        """The race of adaptive seeds (the manifest's ``race``: settings, decisions), or None."""
        return self.manifest.get("race")

    @property
    def vmapped_columns(self) -> list[str]:
        return [c["name"] for c in self.manifest["columns"] if c["vmapped"]]

    def index(self) -> pa.Table:
        """Every member's row without the history columns (what queries need), checked against the
        configs: member ids 0..N-1 in order, each in its config's range."""
        table = self.members(self.index_names)
        ids = table["member_id"].to_numpy()
        total = sum(c.num_members for c in self.configs.values())
        configs = sorted(self.configs.values(), key=lambda c: c.first_member)
        owner = np.repeat(np.asarray([c.config_id for c in configs], object), [c.num_members for c in configs])
        if (
            len(ids) != total
            or not np.array_equal(ids, np.arange(total))
            or not np.array_equal(table["config_id"].to_numpy(zero_copy_only=False), owner)
        ):
            raise StoreError(
                f"{self.root + '/' + MEMBERS!r}: its member ids and config ids do not match "
                f"{CONFIGS} ({total} members in {len(configs)} configs); the tables were altered"
            )
        return table

    @property
    def index_schema(self) -> pa.Schema:
        """The schema of :meth:`index` (from the footer of ``members.parquet``; no rows read)."""
        schema = self._table(MEMBERS).schema_arrow
        return pa.schema([schema.field(name) for name in self.index_names])

    def select(self, filters: Mapping[str, pa.Array]) -> pa.Table:
        """The :meth:`index` rows of the members whose columns take one of the given values
        (``{column: values}``, each an Arrow array of the column's type), reading only the row
        groups whose min/max statistics allow a match; checked against the configs."""
        rows = self._matching(filters, self.index_names)
        self._check_rows(rows)
        return rows

    def count(self, filters: Mapping[str, pa.Array]) -> int:
        """How many members :meth:`select` would return, reading only the filtered columns."""
        return self._matching(filters, list(filters)).num_rows

    def _matching(self, filters: Mapping[str, pa.Array], columns: list[str]) -> pa.Table:
        table = self._table(MEMBERS)
        meta = table.metadata
        chunk_of = {meta.schema.column(j).path: j for j in range(meta.num_columns)}
        wanted = {c: values.to_pylist() for c, values in filters.items()}
        groups = [
            i
            for i in range(table.num_row_groups)
            if all(_may_hold(meta.row_group(i), chunk_of.get(c), v) for c, v in wanted.items())
        ]
        rows = self._read(MEMBERS, table.read_row_groups, groups, columns=columns)
        mask = None
        for column, values in filters.items():
            hit = pc.is_in(rows[column], value_set=values)  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
            mask = hit if mask is None else pc.and_(mask, hit)  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
        return rows if mask is None else rows.filter(mask)

    def _check_rows(self, rows: pa.Table) -> None:
        """Member ids ascending, each inside the range of its config (configs.parquet)."""
        ids = rows["member_id"].to_numpy()
        owners = rows["config_id"].to_numpy(zero_copy_only=False)
        ok = bool(np.all(np.diff(ids) > 0))
        for cid in np.unique(owners) if ok else ():
            info, mine = self.configs.get(cid), ids[owners == cid]
            ok = (
                ok
                and info is not None
                and info.first_member <= mine[0]
                and mine[-1] < info.first_member + info.num_members
            )
        if not ok:
            raise StoreError(
                f"{self.root + '/' + MEMBERS!r}: its member ids and config ids do not match "
                f"{CONFIGS} ({len(self.configs)} configs); the tables were altered"
            )

    def members(self, columns: list[str] | None = None, member_ids: np.ndarray | None = None) -> pa.Table:
        """Rows of ``members.parquet`` (all, or those of ``member_ids`` in that order).

        Only the row groups that can hold the ids and only ``columns`` are read.
        """
        table = self._table(MEMBERS)
        if member_ids is None:
            return self._read(MEMBERS, table.read, columns=columns)
        ids = np.asarray(member_ids, np.int64)
        if ids.size == 0:
            return self._read(MEMBERS, table.read, columns=columns).slice(0, 0)
        wanted = np.unique(ids)
        field = table.schema_arrow.get_field_index("member_id")
        groups = []
        for i in range(table.num_row_groups):  # member ids ascend through the row groups
            stats = table.metadata.row_group(i).column(field).statistics
            low, high = (stats.min, stats.max) if stats is not None and stats.has_min_max else (-np.inf, np.inf)
            if np.searchsorted(wanted, low) < np.searchsorted(wanted, high, side="right"):
                groups.append(i)
        read = None if columns is None else list(dict.fromkeys(["member_id", *columns]))
        rows = self._read(MEMBERS, table.read_row_groups, groups, columns=read)
        rows = rows.take(pc.index_in(pa.array(ids), value_set=rows["member_id"].combine_chunks()))  # pyright: ignore[reportAttributeAccessIssue]  (pyarrow.compute makes its functions at import)
        return rows if columns is None else rows.select(columns)

    def samples(self, config_id: str, split: str = "test") -> tuple[np.ndarray, np.ndarray] | None:
        """The stored inputs and targets of a split (``"test"``, or ``"val"``) of a config's problem
        (``[samples, channels, *spatial]``), or None if the store holds none for it."""
        relpath = SPLIT_FILES[split][0]
        table = self._sample_file(relpath)
        return (
            None
            if table is None
            else samples_of(table, self.configs[config_id].spec.problem_id, f"{self.root}/{relpath}")
        )

    def trajectories(self, config_id: str, split: str = "test") -> np.ndarray | None:
        """The stored trajectories of a split of a config's problem (``[trajectories, steps + 1,
        channels, *spatial]``), or None if the store holds none for it (its problem has none, or an
        older seed-sweep made the store)."""
        relpath = SPLIT_FILES[split][1]
        table = self._sample_file(relpath)
        return (
            None
            if table is None
            else trajectories_of(table, self.configs[config_id].spec.problem_id, f"{self.root}/{relpath}")
        )

    def normalization(self, config_id: str) -> Normalization | None:
        """The per-channel statistics a config's problem was normalised with, or None (its fields
        were not normalised, or an older seed-sweep made the store)."""
        if config_id not in self._normalizations:
            table = self._sample_file(NORMALIZATION)
            problem_id = self.configs[config_id].spec.problem_id
            self._normalizations[config_id] = None if table is None else normalization_of(table, problem_id)
        return self._normalizations[config_id]

    def ensemble_scores(self) -> pa.Table | None:
        """``ensemble_scores.parquet`` (every configuration's scores, written by the aggregation), checked
        against its schema; None for a store made without it."""
        if ENSEMBLE_SCORES not in self.manifest["files"]:
            return None
        table = self._read(ENSEMBLE_SCORES, self._table(ENSEMBLE_SCORES).read)
        schema = self.index_schema
        keys = [schema.field(c) for c in ("config_id", *self.grid_columns)]
        if not table.schema.equals(scores_schema(keys, self.metrics)):
            raise StoreError(
                f"{self.root + '/' + ENSEMBLE_SCORES!r}: columns {table.column_names} are not those of a "
                f"seed-sweep ensemble scores table of this store"
            )
        return table

    def _sample_file(self, relpath: str) -> pa.Table | None:
        """A stored sample file (:data:`~._schema.SAMPLE_FILES`), checked against its schema; None if
        the store has none."""
        if relpath not in self.manifest["files"]:
            return None
        table = self._read(relpath, self._table(relpath).read)
        if not table.schema.equals(SAMPLE_FILES[relpath]):
            raise StoreError(
                f"{self.root + '/' + relpath!r}: columns {table.column_names} are not those of a "
                f"seed-sweep {relpath.removesuffix('.parquet')} table"
            )
        return table

    def template(self, config_id: str) -> tuple[PyTree, PyTree]:
        """``(leaf shapes of one member, static part)`` of a config, rebuilt from its spec.

        A model given by import path (``"package.module:factory"``) is code the store names: it is
        built only by a store opened with ``trust_code=True``, and imported from the user's
        environment only, never from files inside the store's directory
        (:func:`sweep._import_path.refuse_inside`).
        """
        if config_id not in self._templates:
            info = self.configs[config_id]
            name = info.spec.model.name
            if is_import_path(name) and not self.trust_code:
                raise StoreError(untrusted_model(config_id, name))
            if info.spec.training.correct is not None:
                raise StoreError(
                    f"config {config_id}: trained with training.correct={info.spec.training.correct!r} (a "
                    f"network correcting a coarse exponax stepper); predictions of such members outside the "
                    f"trainer are not supported yet: use its stored val/test metrics and rollout columns"
                )
            directory = local_path(self.fs, self.directory)
            if is_import_path(name) and directory is not None:
                refuse_inside(name, directory, f"`model.name` of config {config_id}")
            try:
                model = model_template(name, dict(info.spec.model.options), info.sample_shape, info.target_shape)
            except SpecError as e:
                raise StoreError(f"config {config_id}: its model cannot be rebuilt ({with_import_hint(e)})") from None
            self._templates[config_id] = eqx.partition(model, lambda x: isinstance(x, jax.ShapeDtypeStruct))
        return self._templates[config_id]

    def read(self, config_id: str, positions: np.ndarray) -> PyTree:
        """Stacked parameters (NumPy) of the config's members at ``positions`` (0-based within the
        config, any order; the output follows it). Each leaves file needed is read once, and the
        last one read stays cached for the next call.
        """
        info = self.configs[config_id]
        positions = np.asarray(positions, np.int64)
        if positions.size and (positions.min() < 0 or positions.max() >= info.num_members):
            raise StoreError(
                f"config {config_id}: member positions {positions.min()}..{positions.max()} lie outside "
                f"its {info.num_members} members"
            )
        leaves, treedef = jax.tree_util.tree_flatten(self.template(config_id)[0])
        out = [np.empty((0, *s.shape), s.dtype) for s in leaves]
        shard = positions // info.members_per_shard
        for n, index in enumerate(dict.fromkeys(shard.tolist())):
            rows = shard == index
            data = jax.tree_util.tree_leaves(self._file(info, index))
            if n == 0:  # set aside once a file matched the leaves its spec gives: no more than the files hold
                out = [np.empty((len(positions), *s.shape), s.dtype) for s in leaves]
            for o, d in zip(out, data):
                o[rows] = d[positions[rows] - index * info.members_per_shard]
        return jax.tree_util.tree_unflatten(treedef, out)

    def _file(self, info: ConfigInfo, index: int) -> PyTree:
        relpath = info.files[index]
        if self._cached is None or self._cached[0] != relpath:
            self._cached = None  # never hold two files at once
            shard = read_shard(self.fs, self.root, self.manifest, info, index, self.template(info.config_id)[0])
            self._cached = (relpath, shard)
        return self._cached[1]

    # -- the one way files are opened -------------------------------------------------------------
    def _located(self, relpath: str) -> tuple[str, dict[str, Any]]:
        """``(path, manifest record)`` of a store file (:func:`._listed.locate`)."""
        return locate(self.fs, self.root, self.manifest, relpath)

    def check_leaves(self, member_ids: Iterable[int]) -> None:
        """Every leaves file holding a member of ``member_ids`` checked against the manifest (size,
        sha256; no model built): what reading those members would find wrong, found now."""
        ids = np.fromiter(member_ids, np.int64)
        files = {}
        for info in self.configs.values():
            mine = ids[(ids >= info.first_member) & (ids < info.first_member + info.num_members)]
            files |= dict.fromkeys(
                info.files[i] for i in np.unique((mine - info.first_member) // info.members_per_shard)
            )
        check_listed(self, files)

    def verify(self) -> None:
        """Check everything: every file's size and sha256 against the manifest, every leaves file
        against its config's model (built-in architectures; a model factory is code the store names,
        so its leaves are checked by checksum alone), no file or link the manifest does not list,
        and the tables against each other. Raises one :class:`StoreError` whose ``problems`` lists
        every problem found (its message is the first)."""
        verify(self)

    def _read_configs(self) -> dict[str, ConfigInfo]:
        """``configs.parquet``, checked (:func:`._configs.read_configs`)."""
        table, members = self._read(CONFIGS, self._table(CONFIGS).read), self._table(MEMBERS).metadata.num_rows
        return read_configs(table, f"{self.root + '/' + CONFIGS!r}", members)

    def _table(self, relpath: str) -> pq.ParquetFile:
        """A table of the store, kept open; every byte read from it is verified first (:func:`open_table`)."""
        if relpath not in self._tables:
            path, record = self._located(relpath)
            table = self._read(relpath, open_table, self.fs, path, record)
            if relpath == MEMBERS and (wrong := index_problems(table.schema_arrow, self.index_names, self.metrics)):
                raise StoreError(f"{path!r}: {'; '.join(wrong)[:300]}; the table was altered. {AGGREGATE_AGAIN}")
            self._tables[relpath] = table
        return self._tables[relpath]

    def _read(self, relpath: str, read, *args, **kwargs) -> Any:
        try:
            return read(*args, **kwargs)
        except (pa.ArrowException, OSError, KeyError) as e:
            raise StoreError(
                f"{self.root + '/' + relpath!r}: cannot be read as Parquet ({e}); it is corrupt. {AGGREGATE_AGAIN}"
            ) from None


def _may_hold(row_group, chunk: int | None, values: list) -> bool:
    """Whether a row group's min/max statistics of one column allow any of ``values`` (no
    statistics, or a null among the values: it may)."""
    stats = None if chunk is None else row_group.column(chunk).statistics
    if stats is None or not stats.has_min_max:
        return True
    low, high = stats.min, stats.max
    return any(v is None or v != v or low <= v <= high for v in values)
