"""One canonical JSON text for every identity: config ids, trial keys, program cache keys.

Two values that are equal as JSON data always give the same text (keys sorted, Python's
default separators), so an id computed anywhere agrees with the same id computed elsewhere.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """``value`` as JSON text with sorted keys (raises ``TypeError`` for non-JSON values).

    ```python
    canonical_json({"b": 1, "a": [1.0, "x"]})  # '{"a": [1.0, "x"], "b": 1}'
    ```
    """
    return json.dumps(value, sort_keys=True)


def digest(value: Any, length: int = 12) -> str:
    """The first ``length`` hex digits of the sha256 of :func:`canonical_json` of ``value``."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:length]
