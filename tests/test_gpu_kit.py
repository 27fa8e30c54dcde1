"""The GPU kit's measuring workers (``benchmarks/gpu/``) run against today's API, here on CPU at
their smallest sizes, so that the kit does not break between the rare days a GPU is lent."""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Runs a module as `python -m` does, with the modules of UNSHIPPED (argv[1]) made unimportable.
AS_ON_THE_GPU_MACHINE = """
import importlib.abc, runpy, sys
unshipped = set(sys.argv[1].split(","))
class Unshipped(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in unshipped:
            raise ModuleNotFoundError(f"No module named {name!r} on the GPU machine: add it to SHIP in "
                                      "benchmarks/gpu/fetch_wheels.sh", name=name)
sys.meta_path.insert(0, Unshipped())
sys.argv = sys.argv[2:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


def distribution(requirement: str) -> str:
    """The normalised name of the distribution a requirement (``ray[tune]>=2.60``) names."""
    return re.sub(r"[-_.]+", "-", re.split(r"[^A-Za-z0-9_.-]", requirement, maxsplit=1)[0]).lower()


@functools.cache
def unshipped_modules() -> list[str]:
    """The top-level modules of the distributions that the project's extras name and the GPU kit
    does not ship (``SHIP`` in ``fetch_wheels.sh``): all taken as absent there, though the image
    has a few (pytest, tensorboard), so that a check needs nothing but what the kit carries."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    ship = re.search(r"^SHIP=\(([^)]*)\)", (ROOT / "benchmarks/gpu/fetch_wheels.sh").read_text(), re.M)
    assert ship, "fetch_wheels.sh has no SHIP=(...) array"
    optional = {distribution(r) for extra in project["optional-dependencies"].values() for r in extra}
    absent = optional - {distribution(r) for r in project["dependencies"]} - {distribution(d) for d in ship[1].split()}
    modules = importlib.metadata.packages_distributions().items()
    return sorted(m for m, dists in modules if m.isidentifier() and any(distribution(d) in absent for d in dists))


def test_what_the_gpu_kit_ships_is_checked_against_the_extras():
    unshipped = unshipped_modules()
    assert {"optuna", "boto3", "wandb"} <= set(unshipped)  # extras the checks do without
    assert not {"exponax", "h5py", "ray", "pdequinox"} & set(unshipped)  # what the checks import


def run_check(check: str, *flags: str) -> str:
    """A check (or its worker), run as the kit runs it (a module, from the repository root) and
    without the packages the kit does not ship; its output."""
    unshipped = ",".join(unshipped_modules())
    out = subprocess.run(
        [sys.executable, "-c", AS_ON_THE_GPU_MACHINE, unshipped, f"benchmarks.gpu.{check}", *flags],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def worker(check: str, *flags: str) -> dict:
    """A check's worker: its last line of output is a JSON object."""
    return json.loads(run_check(check, *flags).strip().splitlines()[-1])


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


def test_the_streaming_check_plans_a_split_twice_its_budget_and_streams_it_on_cpu(tmp_path):
    # --plan: the plan of check 6 without training or Ray (its --dry Tune run takes minutes here)
    out = tmp_path / "streaming.json"
    run_check("check_streaming", "--plan", "--budget", "16384000", "--out", str(out))
    result = json.loads(out.read_text())
    assert result["pairs_bytes"] == 2 * result["budget_bytes"] == 2 * 16384000
    assert result["plan_line"].startswith("data of 'hdf5': 31.2 MiB, budget 15.6 MiB: streamed: 5 windows")
    assert result["verdict"] == {"streamed": True}


def test_the_2d_block_check_compiles_the_largest_block_it_estimates_on_cpu(tmp_path):
    from benchmarks.gpu import check_block2d

    out = tmp_path / "block2d.json"
    run_check("check_block2d", "--dry", "--out", str(out))  # exponax makes its data: shipped
    result = json.loads(out.read_text())
    assert result["train_x_shape"] == [2500, 1, 8, 8]  # apebench:phy_adv_2d's pairs, at 8 x 8
    assert result["per_member_bytes"] > 0 and result["largest_block"] > check_block2d.DRY["large"]
    assert result["memory"]["limit_bytes"] == 2**31  # the dry run's stand-in for a device
    assert result["fits"] and result["largest_block_bytes"] <= result["memory"]["limit_bytes"]


def test_the_2d_layouts_check_times_every_form_on_cpu():
    from benchmarks.gpu import check_layouts2d  # in this process: tiny sizes

    result = check_layouts2d.measure(check_layouts2d.DRY, say=lambda line: None)
    forms, product = result["forms"]["8"], result["product"]["8"]
    assert set(forms) == {"map/lax", "vmap/lax", "map/im2col", "vmap/im2col"} and all(s > 0 for s in forms.values())
    assert set(product) == set(check_layouts2d.PRODUCT_FORMS)
    assert all(t["gradient_s"] > 0 and t["forward_s"] > 0 for t in product.values())
