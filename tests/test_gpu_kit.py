"""The GPU kit's measuring workers (``benchmarks/gpu/``) run against today's API, here on CPU at
their smallest sizes, so that the kit does not break between the rare days a GPU is lent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def worker(check: str, *flags: str) -> dict:
    """A check's worker, run as the kit runs it: a module, from the repository root."""
    out = subprocess.run(
        [sys.executable, "-m", f"benchmarks.gpu.{check}", *flags],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("check", "flags", "keys"),
    [
        (
            "check_trainer",
            ("--worker", "sweep", "--seeds", "2", "--epochs", "1"),
            {"warm_s", "test_loss_mean", "layout"},
        ),
        ("check_predict", ("--worker", "--members", "8", "--dry"), {"members", "methods"}),
    ],
)
def test_gpu_kit_worker_runs_on_cpu(check, flags, keys):
    result = worker(check, *flags)
    assert keys <= set(result), result
    if "test_loss_mean" in result:  # a trained block's loss, not a placeholder
        assert 0 < result["test_loss_mean"] < 1, result
