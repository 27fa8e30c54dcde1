"""A sweep on a simulated multi-node Ray cluster (ray.cluster_utils.Cluster, in a subprocess
so that it does not meet the session's Ray instance): trials spread over the nodes, a lost
node's trial resumes from its checkpoint on the surviving node, a node added later is used; a
draining node's trial checkpoints its chunk and moves.

Both are slow (a cluster of four nodes, 30-50 s each). Their parts run in the default suite: a
trial whose worker died is retried from its checkpoint and its members are those of a run without
faults (test_tune.py, on the session's Ray), the reason a trial was retried ("node lost",
"preempted") is read from Tune's error (test_preemption.py), and a drain notice is asked of Ray
and stops a trial after its chunk (test_preemption.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import equinox as eqx
import jax
import numpy as np
import pytest
from _blocks import trained_blocks
from _node_loss import spec_of
from helpers import tree_allclose, trial_path_env

import sweep
from sweep.store import curves_by_column

# Ray takes the address of the network interface it would reach the outside through; a
# single-machine setting makes every node, and the driver, use 127.0.0.1 instead.
LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def _leaves(tree) -> list:
    return jax.tree_util.tree_leaves(eqx.filter(tree, eqx.is_array))


def _run(tmp_path, mode: str) -> tuple[dict, str]:
    """``_node_loss.main`` in a fresh process: (its report, its standard output)."""
    out = subprocess.run(
        [sys.executable, "-c", f"from _node_loss import main; main({str(tmp_path)!r}, {mode!r})"],
        capture_output=True,
        text=True,
        timeout=400,
        env={**trial_path_env(), **LOOPBACK},
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT")]
    assert out.returncode == 0 and lines, out.stdout[-3000:] + out.stderr[-3000:]
    return json.loads(lines[0][len("RESULT") :]), out.stdout


def _assert_members_as_trained_without_faults(path: str, mode: str) -> None:
    """Every planned member in the store, bit for bit as trained in-process without faults:
    leaves and every history column."""
    spec = spec_of(mode)
    ens = sweep.load(path)
    assert sorted(ens.table["seed"].to_pylist()) == list(spec.seed_list)
    for block in trained_blocks(sweep.plan(spec)):
        for i, seed in enumerate(block.seeds):
            want = [np.asarray(a)[i] for a in _leaves(block.state.params)]
            assert tree_allclose(_leaves(ens.member(seed=seed)), want, exact=True), seed
            row = ens.where(seed=seed).table.to_pylist()[0]
            assert row["trial_id"] == block.trial_id and row["epochs"] == spec.training.epochs
            for column, curves in curves_by_column(block.history).items():
                assert row[f"{column}_history"] == curves[i].tolist(), (seed, column)


@pytest.mark.slow
def test_a_lost_nodes_trial_resumes_on_the_surviving_node_and_a_new_node_is_used(tmp_path):
    report, stdout = _run(tmp_path, "remove")
    results, events, workers = report["results"], report["events"], report["workers"]
    victim, lost, added = events["victim"], events["victim_node"], events["added_node"]

    first = sorted(results, key=lambda k: results[k][0]["start_time"])[:2]
    assert {results[k][0]["node_id"] for k in first} == set(workers)  # one per node; the head has no CPUs
    assert lost in workers
    retry = [r for r in results[victim] if r["node_id"] != lost]
    assert retry and retry[0]["resumed_from_epoch"] == 2  # from its checkpoint (epoch 2 of 4)
    survivor = next(w for w in workers if w != lost)
    assert {r["node_id"] for r in retry} == {survivor}
    assert any(r["node_id"] == added for rs in results.values() for r in rs)  # the new node is used

    # what the sweep says: a count in the status line, the list at the end
    assert ", 1 retried" in stdout and f"retried 1 trial: {victim} (node lost)" in stdout
    _assert_members_as_trained_without_faults(report["path"], "remove")
    print(
        f"node loss: removal {events['removal_end'] - events['removal_start']:.2f} s, Tune retried the trial "
        f"{events['recovered'] - events['removal_start']:.2f} s after the removal began, its first result "
        f"from the surviving node {events['resumed'] - events['removal_start']:.2f} s after"
    )


@pytest.mark.slow
def test_a_draining_nodes_trial_checkpoints_its_chunk_and_resumes_elsewhere_uncounted(tmp_path):
    report, stdout = _run(tmp_path, "drain")  # with max_failures=0: a counted failure would fail the sweep
    results, events = report["results"], report["events"]
    victim, drained = events["victim"], events["victim_node"]
    stop = [r for r in results[victim] if "preempted_by" in r]
    assert len(stop) == 1 and stop[0]["preempted_by"] == "node draining"
    assert stop[0]["epoch"] == 4 and stop[0]["node_id"] == drained  # the chunk after the drain, checkpointed
    retry = [r for r in results[victim] if r["node_id"] != drained]
    assert retry and retry[0]["resumed_from_epoch"] == 4
    assert f"retried 1 trial: {victim} (preempted)" in stdout
    assert report["alive"][drained] is False  # idle once its trial left, the drained node went
    _assert_members_as_trained_without_faults(report["path"], "drain")
    print(
        f"drain: the victim's first result elsewhere {retry[0]['report_time'] - stop[0]['report_time']:.2f} s after its checkpoint"
    )
