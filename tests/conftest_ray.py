"""One Ray instance for the whole test session (2 CPUs, 1 fake GPU), and Tune test helpers.

Use with ``from conftest_ray import ray_session`` in a test module.
"""

from __future__ import annotations

import glob
import json
import os
import warnings
from pathlib import Path

import pytest

TESTS = str(Path(__file__).parent)


def trial_path_env() -> dict[str, str]:
    """The environment with ``tests/`` on PYTHONPATH, so that Ray workers import the test hooks (``_faults``)."""
    paths = [TESTS, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}


@pytest.fixture(scope="session")
def ray_session():
    """A local Ray with 2 CPUs and 1 (fake) GPU whose workers import ``tests/``; yields its GCS address."""
    import ray

    os.environ["PYTHONPATH"] = trial_path_env()["PYTHONPATH"]  # inherited by Ray's processes
    if not ray.is_initialized():
        with warnings.catch_warnings():  # Ray forks and execs its daemons at once
            warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
            # address="local": a new instance even when another Ray runs on this machine (a bare
            # ray.init() would join the latest one started there)
            ray.init(
                address="local",
                num_cpus=2,
                num_gpus=1,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def trial_results(sweep_dir: str | os.PathLike) -> dict[str, list[dict]]:
    """Every result each trial reported (Tune's result.json files), by trial key."""
    out: dict[str, list[dict]] = {}
    for path in sorted(glob.glob(f"{sweep_dir}/tune-*/*/result.json")):
        lines = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
        for r in lines:
            out.setdefault(r["trial_key"], []).append(r)
    return out


__all__ = ["ray_session", "trial_path_env", "trial_results"]
