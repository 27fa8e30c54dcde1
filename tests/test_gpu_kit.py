"""The GPU kit's measuring workers (``benchmarks/gpu/``) run against today's API, here on CPU at
their smallest sizes, so that the kit does not break between the rare days a GPU is lent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

KIT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu"


def worker(script: str, *flags: str) -> dict:
    out = subprocess.run(
        [sys.executable, str(KIT / script), *flags],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("script", "flags", "keys"),
    [
        (
            "check_trainer.py",
            ("--worker", "sweep", "--seeds", "2", "--epochs", "1"),
            {"warm_s", "test_loss_mean", "layout"},
        ),
        ("check_predict.py", ("--worker", "--members", "8", "--dry"), {"members", "methods"}),
    ],
)
def test_gpu_kit_worker_runs_on_cpu(script, flags, keys):
    result = worker(script, *flags)
    assert keys <= set(result), result
    if "test_loss_mean" in result:  # a trained block's loss, not a placeholder
        assert 0 < result["test_loss_mean"] < 1, result
