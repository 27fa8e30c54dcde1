"""The bit-for-bit properties at XLA's default flags.

The suite compiles with cheap flags (tests/conftest.py: LLVM's cheapest optimisation level, XLA:CPU's
older fusion emitters), whose code generation differs from the programs users run. The properties
promised for those programs run here, in a pytest of their own with XLA's flags left as they are:
2D block invariance (``helpers.AT_XLA_DEFAULTS``, left out of the cheaply compiled run, where it
does not hold on every CPU) in the default run; in the slow run, another 2D method, a 2D
ClassicResNet with GroupNorm, and block invariance in 1D, over streamed windows and from an HDF5
file, and resume equals uninterrupted
(``AT_XLA_DEFAULTS_SLOW``, ``ALSO_AT_XLA_DEFAULTS``: the latter also run at the cheap flags).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from helpers import (
    ALSO_AT_XLA_DEFAULTS,
    AT_XLA_DEFAULTS,
    AT_XLA_DEFAULTS_SLOW,
    CHEAP_COMPILE_FLAGS,
    TESTS,
    XLA_DEFAULTS,
)


def test_the_suite_compiles_cheaply_unless_told_to_leave_xla_as_users_have_it():
    """In the suite, the cheap flags; in the run below (which includes this test), XLA's defaults."""
    flags = os.environ.get("XLA_FLAGS", "").split()
    assert [f in flags for f in CHEAP_COMPILE_FLAGS] == [not os.environ.get(XLA_DEFAULTS)] * len(CHEAP_COMPILE_FLAGS)


@pytest.mark.parametrize(
    "properties",
    [AT_XLA_DEFAULTS, pytest.param(AT_XLA_DEFAULTS_SLOW + ALSO_AT_XLA_DEFAULTS, marks=pytest.mark.slow)],
    ids=["default", "slow"],
)
def test_block_invariance_resume_and_streaming_are_bitwise_at_xla_defaults(properties):
    # not an xdist worker's variables; XLA_FLAGS without the cheap flags (and unset if nothing is
    # left: XLA exits on a value of spaces alone)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_") and k != "XLA_FLAGS"}
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if f not in CHEAP_COMPILE_FLAGS]
    env |= {XLA_DEFAULTS: "1", **({"XLA_FLAGS": " ".join(flags)} if flags else {})}
    flags_check = "test_xla_defaults.py::test_the_suite_compiles_cheaply_unless_told_to_leave_xla_as_users_have_it"
    tests = [f"{TESTS}/{t}" for t in (flags_check, *properties)]
    run = subprocess.run(  # every test named, slow or not
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-m", "slow or not slow", *tests],
        env=env,
        capture_output=True,
        text=True,
        cwd=TESTS,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert re.search(rf"\b{len(tests)} passed", run.stdout) and "deselected" not in run.stdout, run.stdout[-2000:]
