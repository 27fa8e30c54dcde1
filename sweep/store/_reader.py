"""Read a committed store: manifest, tables, and members' leaves (streamed file by file, no pickle)."""

from __future__ import annotations

import json
import os
from typing import Any, NamedTuple

import equinox as eqx
import jax
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
from jaxtyping import PyTree

from .._errors import StoreError
from .._fs import filesystem_path, read_text
from ..models import build_model
from ..spec import SweepSpec
from ._files import checksum, read_leaves, read_parquet
from ._generations import committed_root
from ._schema import CONFIGS, FORMAT, MANIFEST, MEMBERS, index_columns


class ConfigInfo(NamedTuple):
    """One row of ``configs.parquet``: a structural config and where its members' leaves lie."""

    config_id: str
    spec: SweepSpec
    num_members: int
    first_member: int  # member_id of its first member; its members are contiguous
    members_per_shard: int
    files: tuple[str, ...]
    sample_shape: tuple[int, ...]
    out_channels: int


class Store:
    """A committed store (see :mod:`sweep.store`); open it with :meth:`Store.open`."""

    def __init__(self, fs: pafs.FileSystem, root: str, manifest: dict[str, Any], configs: dict[str, ConfigInfo]):
        self.fs, self.root, self.manifest, self.configs = fs, root, manifest, configs
        self._templates: dict[str, tuple[PyTree, PyTree]] = {}
        self._cached: tuple[str, PyTree] | None = None  # the last leaves file read

    @classmethod
    def open(cls, path: str | os.PathLike, filesystem: pafs.FileSystem | None = None) -> Store:
        """Open the store of a sweep directory (or a store directory) on any pyarrow filesystem."""
        fs, path = filesystem_path(path, filesystem)
        root = committed_root(fs, path)
        manifest = _read_manifest(fs, f"{root}/{MANIFEST}")
        store = cls(fs, root, manifest, {})
        for name in (MEMBERS, CONFIGS):
            store._check_size(name)
        store._check_sum(CONFIGS)
        for row in read_parquet(fs, f"{root}/{CONFIGS}").to_pylist():
            spec = SweepSpec.from_dict(json.loads(row["spec"]))
            store.configs[row["config_id"]] = ConfigInfo(
                row["config_id"], spec, row["num_members"], row["first_member"], row["members_per_shard"],
                tuple(row["files"]), tuple(row["sample_shape"]), row["out_channels"],
            )
        return store

    @property
    def grid_columns(self) -> list[str]:
        """Names of the grid value columns of ``members.parquet``, in grid order."""
        return [c["name"] for c in self.manifest["columns"]]

    @property
    def metrics(self) -> list[str]:
        """Stored names of the metrics (columns ``val_<name>``, ``test_<name>``), in column order."""
        return list(self.manifest.get("metrics", []))

    @property
    def vmapped_columns(self) -> list[str]:
        return [c["name"] for c in self.manifest["columns"] if c["vmapped"]]

    def index(self) -> pa.Table:
        """Every member's row without the history columns (what queries need)."""
        return self.members(index_columns(self.grid_columns, self.metrics))

    def members(self, columns: list[str] | None = None, member_ids: np.ndarray | None = None) -> pa.Table:
        """Rows of ``members.parquet`` (all, or those of ``member_ids`` in that order).

        Only the row groups that can hold the ids and only ``columns`` are read.
        """
        path = f"{self.root}/{MEMBERS}"
        if member_ids is None:
            return read_parquet(self.fs, path, columns=columns)
        import pyarrow.dataset as ds  # imported here: it pulls in pandas (~0.2 s at import)

        ids = np.asarray(member_ids, np.int64)
        field = pc.field("member_id")
        where = (field >= int(ids.min())) & (field <= int(ids.max())) & field.isin(pa.array(ids))
        fmt = ds.ParquetFileFormat(default_fragment_scan_options=ds.ParquetFragmentScanOptions(page_checksum_verification=True))
        read = None if columns is None else list(dict.fromkeys(["member_id", *columns]))
        try:
            table = ds.dataset(path, format=fmt, filesystem=self.fs).to_table(columns=read, filter=where)
        except (pa.ArrowException, OSError) as e:
            raise StoreError(f"{path!r}: cannot be read as Parquet ({e}); the file is corrupt") from None
        table = table.take(pc.index_in(pa.array(ids), value_set=table["member_id"].combine_chunks()))
        return table if columns is None else table.select(columns)

    def template(self, config_id: str) -> tuple[PyTree, PyTree]:
        """``(leaf shapes of one member, static part)`` of a config, rebuilt from its spec."""
        if config_id not in self._templates:
            info = self.configs[config_id]
            model = eqx.filter_eval_shape(
                build_model, info.spec.model.name, dict(info.spec.model.options), info.sample_shape,
                info.out_channels, key=jax.random.key(0),
            )
            self._templates[config_id] = eqx.partition(model, lambda x: isinstance(x, jax.ShapeDtypeStruct))
        return self._templates[config_id]

    def read(self, config_id: str, positions: np.ndarray) -> PyTree:
        """Stacked parameters (NumPy) of the config's members at ``positions`` (0-based within the
        config, any order; the output follows it). Each leaves file needed is read once, and the
        last one read stays cached for the next call.
        """
        info = self.configs[config_id]
        positions = np.asarray(positions, np.int64)
        like = self.template(config_id)[0]
        leaves, treedef = jax.tree_util.tree_flatten(like)
        out = [np.empty((len(positions), *s.shape), s.dtype) for s in leaves]
        shard = positions // info.members_per_shard
        for index in dict.fromkeys(shard.tolist()):
            rows = shard == index
            data = jax.tree_util.tree_leaves(self._file(info, index))
            for o, d in zip(out, data):
                o[rows] = d[positions[rows] - index * info.members_per_shard]
        return jax.tree_util.tree_unflatten(treedef, out)

    def _file(self, info: ConfigInfo, index: int) -> PyTree:
        relpath = info.files[index]
        if self._cached is None or self._cached[0] != relpath:
            count = min(info.members_per_shard, info.num_members - index * info.members_per_shard)
            like = jax.tree_util.tree_map(
                lambda s: jax.ShapeDtypeStruct((count, *s.shape), s.dtype), self.template(info.config_id)[0]
            )
            what = f"config {info.config_id} ({count} members of {info.spec.model.name})"
            self._cached = None  # never hold two files at once
            self._cached = (relpath, read_leaves(self.fs, f"{self.root}/{relpath}", like, self._record(relpath), what))
        return self._cached[1]

    def verify(self) -> None:
        """Check the sha256 of every file of the store against the manifest."""
        for relpath in self.manifest["files"]:
            self._check_sum(relpath)

    def _record(self, relpath: str) -> dict[str, Any]:
        try:
            return self.manifest["files"][relpath]
        except KeyError:
            raise StoreError(f"{self.root + '/' + MANIFEST!r}: lists no file {relpath!r}; the store is incomplete") from None

    def _check_size(self, relpath: str) -> None:
        info = self.fs.get_file_info(f"{self.root}/{relpath}")
        expected = self._record(relpath)["bytes"]
        if info.type == pafs.FileType.NotFound:
            raise StoreError(f"{info.path!r}: missing from the store; re-run `sweep aggregate`")
        if info.size != expected:
            raise StoreError(f"{info.path!r}: {info.size} bytes, the manifest records {expected}; the file is truncated or was replaced")

    def _check_sum(self, relpath: str) -> None:
        path = f"{self.root}/{relpath}"
        try:
            got = checksum(self.fs, path)
        except (FileNotFoundError, OSError) as e:
            raise StoreError(f"{path!r}: cannot be read ({e})") from None
        if got != self._record(relpath):
            raise StoreError(f"{path!r}: checksum mismatch with the manifest ({got['bytes']} bytes, sha256 {got['sha256'][:16]}...); the file is corrupt")


def _read_manifest(fs: pafs.FileSystem, path: str) -> dict[str, Any]:
    try:
        manifest = json.loads(read_text(fs, path))
    except (FileNotFoundError, OSError) as e:
        raise StoreError(f"{path!r}: cannot be read ({e})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise StoreError(f"{path!r}: not valid JSON ({e}); the store is corrupt") from None
    version = manifest.get("format") if isinstance(manifest, dict) else None
    if not isinstance(version, int) or "files" not in manifest:
        raise StoreError(f"{path!r}: not a seed-sweep store manifest (no integer `format` and `files`)")
    if version > FORMAT:
        raise StoreError(
            f"{path!r}: store format {version} is newer than this seed-sweep reads (format {FORMAT}); "
            f"upgrade seed-sweep"
        )
    if version < FORMAT:
        raise StoreError(
            f"{path!r}: store format {version} was written by an older seed-sweep (members trained without a "
            f"validation split; this one reads format {FORMAT}); run the sweep again"
        )
    return manifest
