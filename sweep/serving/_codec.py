"""Request and response bodies: JSON (nested lists) or ``.npy`` (``application/x-npy``).

A JSON request is an object (``{"x": [[...]], "members": false}`` for ``/predict``,
``{"x0": [[...]], "steps": 10}`` for ``/rollout``); a ``.npy`` request is the array itself, its
other fields in the query string. A ``.npy`` response stacks the answer along a first axis
(``mean, std, *members``), as its ``X-Sweep-Layout`` header says. Non-finite outputs become
``null`` in JSON (which has no NaN).
"""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np

from .._errors import did_you_mean
from ._limits import BadRequest

NPY = "application/x-npy"
# what a JSON body gives each field as (a query string writes them as words: "true", "3,5")
JSON_FORMS = {
    "members": "true, false or a list of member ids",
    "calibrated": "true or false",
    "interval": "a number (a calibrated level)",
    "steps": "an integer",
}


def is_npy(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` / ``Accept`` value names ``.npy``."""
    return NPY in (content_type or "").lower()


def decode(
    body: bytes, content_type: str | None, field: str, query: dict[str, str], others: tuple[str, ...]
) -> tuple[np.ndarray, dict]:
    """``(the input array, the other fields)`` of a request body, whose other fields (in the JSON
    object or the query string) are among ``others``.

    Raises:
        BadRequest: 400 for a body that is neither a JSON object holding ``field`` nor a ``.npy``
            array (or JSON nested too deep to parse), 422 for nested lists that are not one numeric
            array or for a field not among ``others`` (a misspelt one is not ignored).
    """
    x, fields = _decoded(body, content_type, field, query)
    for name in fields:
        if name not in others:
            where = "in the query string" if name in query else "in the body"
            allowed = f"{', '.join(others)}{did_you_mean(name, others)}"
            raise BadRequest(422, name, f"an unknown field {where}", f"give {field} and any of {allowed}")
        if name not in query and isinstance(fields[name], str):  # a JSON field: JSON's types, not a query's words
            shown = f"the string {fields[name]!r} in the body"
            raise BadRequest(422, name, shown, f"give {JSON_FORMS.get(name, 'a JSON value')}, not a string")
    return x, fields


def _decoded(body: bytes, content_type: str | None, field: str, query: dict[str, str]) -> tuple[np.ndarray, dict]:
    if is_npy(content_type):
        if not body.startswith((np.lib.format.MAGIC_PREFIX, b"PK")):  # else numpy reads it as a pickle (refused)
            shown = f"{len(body)} bytes without the .npy header"
            raise BadRequest(400, "body", shown, "send an array saved with numpy.save (.npy)")
        try:
            x = np.load(io.BytesIO(body), allow_pickle=False)
        except Exception as e:  # malformed: any error numpy raises reading it
            raise BadRequest(400, "body", f"{len(body)} bytes ({type(e).__name__}: {e})", "send a .npy array") from None
        if not isinstance(x, np.ndarray):
            raise BadRequest(400, "body", "an .npz archive", "send one .npy array")
        return x, dict(query)
    try:
        payload = json.loads(body)
    except RecursionError:  # nested deeper than the parser's recursion allows: no array has so many axes
        raise BadRequest(
            400,
            "body",
            f"JSON nested deeper than Python's recursion limit ({len(body)} bytes)",
            "send nested lists no deeper than the array's axes (a .npy body for large arrays)",
        ) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BadRequest(
            400,
            "body",
            f"malformed JSON ({e})",
            f'send a JSON object {{"{field}": [[...]], ...}} or a .npy body with Content-Type: {NPY}',
        ) from None
    if not isinstance(payload, dict) or field not in payload:
        shown = sorted(payload) if isinstance(payload, dict) else type(payload).__name__
        raise BadRequest(400, "body", f"JSON {shown}", f'send a JSON object holding "{field}"')
    values = payload.pop(field)
    try:
        x = np.asarray(values)
    except (ValueError, TypeError):
        x = None
    if x is None or x.dtype == object:
        raise BadRequest(422, field, "ragged or mixed nested lists", "give nested lists of numbers forming one array")
    return x, {**query, **payload}


def encode(arrays: dict[str, np.ndarray], extra: dict[str, Any], npy: bool) -> tuple[bytes, str, dict[str, str]]:
    """``(body, media type, headers)`` of an answer: JSON with every array as nested lists and
    ``extra`` beside them, or one ``.npy`` array stacking ``arrays`` in order."""
    if npy:
        stacked = np.concatenate([a[None] if a.ndim == arrays["mean"].ndim else a for a in arrays.values()])
        buffer = io.BytesIO()
        np.save(buffer, np.ascontiguousarray(stacked), allow_pickle=False)
        layout = ",".join(k if arrays[k].ndim == arrays["mean"].ndim else f"{k}[{len(arrays[k])}]" for k in arrays)
        headers = {"X-Sweep-Layout": layout, "X-Sweep-Generation": str(extra.get("generation", ""))}
        return buffer.getvalue(), NPY, headers
    body = {**extra, **{k: _lists(a) for k, a in arrays.items()}}
    return json.dumps(body, separators=(",", ":")).encode(), "application/json", {}


def _lists(a: np.ndarray) -> Any:
    if np.isfinite(a).all():
        return a.tolist()
    out = a.astype(object)
    out[~np.isfinite(a)] = None  # JSON has no NaN or infinity: null
    return out.tolist()
