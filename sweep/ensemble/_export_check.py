"""What a received export is checked for (:func:`verify_export`, ``sweep verify OUT_DIR``): its
manifest is of this format, its calibration unaltered (its own sha256) and its shapes those of
the programs; every part it lists is there, of its size and sha256; no other file or link is.
What the manifest says of the members cannot be checked without their store: its sha256
(:func:`manifest_sha256`) is compared with the sender's."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pyarrow.fs as pafs

from .._errors import QueryError
from .._layout import EXPORT_FORMAT, EXPORT_KIND, EXPORT_MANIFEST, EXPORT_PARTS
from ..store import unlisted
from ._calibration import Calibration


def is_export(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a directory whose manifest says it is an export, or that holds an
    export's part (an export whose manifest is missing or broken: :func:`verify_export` says so)."""
    if any(os.path.lexists(Path(path) / part) for part in EXPORT_PARTS):
        return True
    try:
        return json.loads((Path(path) / EXPORT_MANIFEST).read_text()).get("kind") == EXPORT_KIND
    except (OSError, ValueError, AttributeError):
        return False


def verify_export(path: str | os.PathLike[str]) -> list[str]:
    """The problems of an export directory (empty: its manifest is of this format, its calibration
    unaltered, its input and output shapes those of the programs; every part listed is there, of
    its size and sha256; and no other file or link is, as :meth:`Store.verify` checks a store):
    one line each, naming the file. What the manifest says of the members cannot be checked
    without their store: compare its sha256 (:func:`manifest_sha256`) with the sender's."""
    root = Path(path)
    where = root / EXPORT_MANIFEST
    if where.is_symlink():
        return [f"{where}: a symbolic link (to {os.readlink(where)!r}); an export holds no links"]
    try:
        manifest = json.loads(where.read_text())
        parts = manifest["parts"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        return [f"{where}: not an export manifest ({e})"]
    if not isinstance(parts, dict) or not all(isinstance(r, dict) for r in parts.values()):
        return [
            f"{where}: `parts` = {json.dumps(parts)[:80]}: not an export manifest (expected "
            f'{{part name: {{"sha256": ..., "bytes": ...}}}})'
        ]
    if (manifest.get("kind"), manifest.get("format")) != (EXPORT_KIND, EXPORT_FORMAT):
        return [
            f"{where}: kind {manifest.get('kind')!r}, format {manifest.get('format')!r}; this seed-sweep reads "
            f"{EXPORT_KIND!r} format {EXPORT_FORMAT}"
        ]
    problems = _calibration_problems(manifest, where)
    for name, record in parts.items():
        file = root / name
        if name not in EXPORT_PARTS or not file.is_file():
            problems.append(f"{file}: listed in the manifest but missing")
            continue
        if file.is_symlink():
            problems.append(f"{file}: a symbolic link (to {os.readlink(file)!r}); an export holds no links")
            continue
        data = file.read_bytes()
        if len(data) != record.get("bytes") or hashlib.sha256(data).hexdigest() != record.get("sha256"):
            problems.append(
                f"{file}: altered ({len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()[:16]}..., the "
                f"manifest says {record.get('bytes')} bytes, {str(record.get('sha256'))[:16]}...)"
            )
            continue
        problems += _shape_problems(manifest, name, data, where)
    return problems + unlisted(pafs.LocalFileSystem(), str(root), [EXPORT_MANIFEST, *parts], "export")


def manifest_sha256(path: str | os.PathLike[str]) -> str:
    """The sha256 of an export's ``manifest.json``: the root of its checksums, to compare with the sender's."""
    return hashlib.sha256((Path(path) / EXPORT_MANIFEST).read_bytes()).hexdigest()


def _calibration_problems(manifest: dict[str, Any], where: Path) -> list[str]:
    """The manifest's calibration, checked against its own sha256 and the programs' flags."""
    body = manifest.get("calibration")
    problems = []
    if body is not None:
        try:
            Calibration.from_dict(body, f"{where}: `calibration`")
        except (QueryError, KeyError, TypeError, ValueError) as e:
            problems.append(str(e) if isinstance(e, QueryError) else f"{where}: `calibration`: not a calibration ({e})")
    said = _field(manifest, "mean_std", "calibrated")
    if said != (body is not None):
        problems.append(
            f"{where}: `mean_std.calibrated` is {said!r}, but the manifest holds {'a' if body else 'no'} calibration"
        )
    return problems


def _field(manifest: dict[str, Any], *keys: str) -> Any:
    """``manifest[k1][k2]...``, or None where a level is missing or no JSON object."""
    value: Any = manifest
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _shape_problems(manifest: dict[str, Any], name: str, data: bytes, where: Path) -> list[str]:
    """Whether the input (and output) the manifest gives part ``name`` are those of its program."""
    try:  # (flatbuffers, or symbolic shapes, raise anything on bytes that are no export's program)
        exported = jax.export.deserialize(bytearray(data))
        if len(exported.in_avals) != 1 or len(exported.out_avals) != 2:
            raise ValueError(
                f"{len(exported.in_avals)} inputs and {len(exported.out_avals)} outputs, not x -> (mean, std)"
            )
        takes = ["batch", *(int(d) for d in exported.in_avals[0].shape[1:])]
        returns = ["batch", *(int(d) for d in exported.out_avals[0].shape[1:])] if name == EXPORT_PARTS[0] else []
    except Exception as e:
        return [f"{where.parent / name}: not a program of an export ({type(e).__name__}: {e})"]
    if name == EXPORT_PARTS[0]:
        said = [_field(manifest, "input", "shape"), _field(manifest, "output", "shape")]
        got = [takes, returns]
    else:  # the rollout: its own input (a history model's), the output's shape by step
        said, got = [_field(manifest, "rollout", "input")], [takes]
    problems = [
        f"{where}: {what} of {name} is {shape}, but its program {verb} {real}"
        for what, verb, shape, real in zip(("the input", "the output"), ("takes", "returns"), said, got)
        if shape != real
    ]
    dtype, real_dtype = _field(manifest, "input", "dtype"), np.dtype(exported.in_avals[0].dtype).name
    if dtype != real_dtype:
        problems.append(f"{where}: the input dtype is {dtype!r}, but {name} takes {real_dtype}")
    return problems
