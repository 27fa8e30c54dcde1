"""The bit-for-bit properties at XLA's default flags.

The suite compiles at LLVM's cheapest optimisation level (tests/conftest.py), where code generation
differs from the programs users run (vectorised loops, fused reductions): block invariance, resume
and streaming are checked again here, in a pytest of their own with XLA's flags left as they are.
"""

from __future__ import annotations

import os
import subprocess
import sys

from helpers import CHEAP_COMPILE_FLAG, TESTS, XLA_DEFAULTS

# the flags themselves; block invariance (1D, 2D through the matmul forward, streamed windows, evaluation
# in parts), resume equals uninterrupted, streamed from an HDF5 file
AT_XLA_DEFAULTS = (
    "test_xla_defaults.py::test_the_suite_compiles_cheaply_unless_told_to_leave_xla_as_users_have_it",
    "test_trainer.py::test_block_invariance_bitwise[seeds1]",
    "test_trainer.py::test_resume_from_saved_state_equals_uninterrupted",
    "test_pde_training.py::test_a_member_is_the_same_in_any_2d_block_with_each_method[sup_noise]",
    "test_streaming.py::test_streamed_members_are_bit_identical_whatever_the_block[seeds1]",
    "test_streaming.py::test_members_evaluated_in_parts_are_bit_identical_whatever_the_block",
    "test_hdf5_streaming.py::test_a_streamed_trial_reads_its_windows_from_the_file_bit_for_bit_whatever_the_block",
)


def test_the_suite_compiles_cheaply_unless_told_to_leave_xla_as_users_have_it():
    """In the suite, the cheap flag; in the run below (which includes this test), XLA's defaults."""
    assert (CHEAP_COMPILE_FLAG in os.environ.get("XLA_FLAGS", "")) is not bool(os.environ.get(XLA_DEFAULTS))


def test_block_invariance_resume_and_streaming_are_bitwise_at_xla_defaults():
    # not an xdist worker's variables; XLA_FLAGS without the cheap flag (and unset if nothing is
    # left: XLA exits on a value of spaces alone)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_") and k != "XLA_FLAGS"}
    flags = [f for f in os.environ["XLA_FLAGS"].split() if f != CHEAP_COMPILE_FLAG]
    env |= {XLA_DEFAULTS: "1", **({"XLA_FLAGS": " ".join(flags)} if flags else {})}
    tests = [f"{TESTS}/{t}" for t in AT_XLA_DEFAULTS]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", *tests],
        env=env,
        capture_output=True,
        text=True,
        cwd=TESTS,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "deselected" not in run.stdout and " passed" in run.stdout
