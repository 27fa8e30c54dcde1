"""Code that a hostile store names (tests/test_trust_code.py): calling it leaves a marker file.

The tests check that reading a store never imports this module nor calls it.
"""

from __future__ import annotations

from pathlib import Path


def touch(marker: str, **kwargs):
    """A "model factory" or "data function" that only leaves ``marker`` behind."""
    Path(marker).touch()
    raise RuntimeError("trap sprung")
