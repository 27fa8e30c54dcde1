"""A sweep on a simulated multi-node Ray cluster (ray.cluster_utils.Cluster, in a subprocess
so that it does not meet the session's Ray instance)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pyarrow.fs as pafs
from helpers import tiny_spec, trial_path_env

import sweep
from sweep.training import find_blocks

SCRIPT = textwrap.dedent("""
    import json
    import ray
    from ray.cluster_utils import Cluster
    from _faults import Barrier
    from helpers import tiny_spec
    from helpers import trial_results
    import sweep
    from sweep.tune import TrialHooks

    cluster = Cluster(initialize_head=True, head_node_args={{"num_cpus": 0, "include_dashboard": False}})
    workers = [cluster.add_node(num_cpus=1) for _ in range(2)]
    cluster.wait_for_nodes()
    try:
        hooks = TrialHooks(on_start=Barrier({started!r}, 2, 120))  # both trials must be running at once
        path = sweep.run(tiny_spec(), storage={storage!r}, address=cluster.address, trial_hooks=hooks)
        results = {{k: rs[-1] for k, rs in trial_results(path).items()}}
        print("RESULT" + json.dumps({{"path": path, "results": results,
                                     "workers": [w.node_id for w in workers]}}))
    finally:
        ray.shutdown()
        cluster.shutdown()
""")


def test_trials_spread_over_nodes(tmp_path):
    script = SCRIPT.format(started=str(tmp_path / "started"), storage=str(tmp_path / "store"))
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=400, env=trial_path_env()
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT")]
    assert out.returncode == 0 and lines, out.stderr[-3000:]
    report = json.loads(lines[0][len("RESULT") :])
    results = report["results"]
    assert all(r["barrier_met"] for r in results.values())
    nodes = {r["node_id"] for r in results.values()}
    assert len(nodes) == 2 and nodes <= set(report["workers"])  # the head has no CPUs for trials

    spec = tiny_spec()
    blocks = find_blocks(report["path"], pafs.LocalFileSystem())
    assert {t.trial_key for t in sweep.plan(spec).trials} == set(blocks)
    assert sorted(s for b in blocks.values() for s in b.seeds) == list(spec.seed_list)
    assert all(b.epoch == spec.training.epochs for b in blocks.values())
