"""The manifest of a store read back and checked to be one: a format this seed-sweep reads, every
file name one of the layout, every record a sha256 and a size (and, for a table, one sha256 per
piece). Its own sha256 is the root of every checksum of the store."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pyarrow.fs as pafs

from .._errors import StoreError
from .._fs import confined, read_text, refuse_links
from .._layout import CONFIGS, EXPORT_KIND, MEMBERS, STORE_FILE, STORE_FILES
from ._schema import FORMAT


def read_manifest(fs: pafs.FileSystem, path: str) -> tuple[dict[str, Any], str]:
    """The manifest, checked to be one (every file name of the layout, every record a digest and a
    size), and its own sha256."""
    refuse_links(fs, path)
    try:
        text = read_text(fs, path)
        manifest = json.loads(text)
    except (FileNotFoundError, OSError) as e:
        raise StoreError(f"{path!r}: cannot be read ({e})") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise StoreError(f"{path!r}: not valid JSON ({str(e)[:200]}); the store is corrupt") from None
    version = manifest.get("format") if isinstance(manifest, dict) else None
    if isinstance(manifest, dict) and manifest.get("kind") == EXPORT_KIND:
        raise StoreError(
            f"{path!r}: the manifest of an export (`sweep export`), not of a store: give the sweep directory it "
            f"was exported from (`sweep verify` checks an export)"
        )
    if type(version) is not int or not isinstance(manifest.get("files"), dict):
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
    for name, record in manifest["files"].items():
        confined(name, f"{path!r} `files`", STORE_FILE, STORE_FILES)
        if not (
            isinstance(record, dict)
            and isinstance(record.get("sha256"), str)
            and len(record["sha256"]) == 64
            and isinstance(record.get("bytes"), int)
            and record["bytes"] >= 0
            and _pieces_ok(record)
        ):
            raise StoreError(
                f"{path!r}: the record of {name!r} is {str(record)[:200]}; expected a sha256 and a size in "
                f"bytes (and, for a table, one sha256 per piece)"
            )
    for name in (MEMBERS, CONFIGS):
        if name not in manifest["files"]:
            raise StoreError(f"{path!r}: lists no {name}; the store is incomplete")
    columns = manifest.get("columns")
    if not isinstance(columns, list) or not all(_column_ok(c) for c in columns):
        raise StoreError(
            f"{path!r}: `columns` is {str(columns)[:200]!r}; expected the list of grid columns, each "
            f"{{name, key: printable text, vmapped: true or false}}"
        )
    for field in ("num_members", "num_configs", "num_missing"):
        if field in manifest and not (type(manifest[field]) is int and manifest[field] >= 0):
            raise StoreError(f"{path!r}: `{field}` is {str(manifest[field])[:40]!r}; expected a count, an integer >= 0")
    if not isinstance(manifest.get("race", {}), dict):
        raise StoreError(f"{path!r}: `race` is {str(manifest['race'])[:40]!r}; expected the record of a race")
    metrics = manifest.get("metrics")
    if not isinstance(metrics, list) or not all(isinstance(m, str) and m.isidentifier() for m in metrics):
        raise StoreError(f"{path!r}: `metrics` is {str(metrics)[:200]!r}; expected the list of stored metric names")
    return manifest, hashlib.sha256(text.encode()).hexdigest()


def _column_ok(column: Any) -> bool:
    """A grid column as the aggregator writes it (:class:`~._schema.Column`): its name and key
    printable (a table's header and a ``where`` error show them: no terminal control codes)."""
    return (
        isinstance(column, dict)
        and all(
            isinstance(column.get(k), str) and 0 < len(column[k]) <= 200 and column[k].isprintable()
            for k in ("name", "key")
        )
        and isinstance(column.get("vmapped"), bool)
    )


def _pieces_ok(record: dict[str, Any]) -> bool:
    """No pieces, or a positive piece size and one 64-hex-digit digest per piece of the file."""
    if "pieces" not in record:
        return True
    size, pieces = record.get("piece_bytes"), record["pieces"]
    return (
        isinstance(size, int)
        and size > 0
        and isinstance(pieces, list)
        and len(pieces) == -(-record["bytes"] // size)
        and all(isinstance(d, str) and len(d) == 64 for d in pieces)
    )
