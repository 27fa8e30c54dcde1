"""A sweep on a simulated multi-node Ray cluster that loses a node (or drains one) and gets one
back (tests/test_tune_cluster.py runs :func:`main` in a subprocess of its own, away from the
session's Ray, importing this module by name so that Tune pickles the callback by reference).

The cluster (``ray.cluster_utils.Cluster``): a head without CPUs and two worker nodes of one
CPU each, all on 127.0.0.1. A driver-side Tune callback (:class:`Choreography`) and a trial hook
(:class:`_faults.HoldWhile`) order the events. ``mode="remove"``: three trials, at most two at
once:

1. the first two trials start together, one per node, and wait after each report;
2. at the first checkpoint, the node of its trial (the *victim*) is removed;
3. once Tune retries the victim, the other trial may finish; the victim resumes on the
   surviving node (the only one), the third trial waits for a slot;
4. once the victim reports from there, a new node is added, and the third trial runs on it;
5. once it reports from the new node, everything may finish.

``mode="drain"``: two trials of three chunks; at the first checkpoint, Ray drains the victim's
node for preemption (as ``ray start --block`` does on SIGTERM) and, once the victim's next drain
check is due, lets it go on: it checkpoints its next chunk and stops; once Tune retries it, the
other trial may finish, and the victim resumes on the other node.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from ray.tune import Callback

CLUSTER: dict = {}  # "cluster": the Cluster of this process (a Tune callback must pickle: no state in it)


class Choreography(Callback):
    """Removes the victim's node, lets the others go on, adds a node: see the module. Writes what
    happened, with times, to ``<directory>/events.json``."""

    def __init__(self, directory: str, mode: str):
        self.directory, self.mode = directory, mode

    def _events(self) -> dict:
        path = Path(self.directory) / "events.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def _save(self, events: dict) -> None:
        (Path(self.directory) / "events.json").write_text(json.dumps(events))

    def _release(self, trial_key: str) -> None:
        (Path(self.directory) / "hold" / trial_key).unlink(missing_ok=True)

    def on_checkpoint(self, iteration, trials, trial, checkpoint, **info):
        events = self._events()
        if "victim" in events:
            return
        cluster, node_id = CLUSTER["cluster"], trial.last_result["node_id"]
        victim = next(n for n in cluster.worker_nodes if n.node_id == node_id)
        events.update(victim=trial.config["trial_key"], victim_node=node_id, removal_start=time.time())
        if self.mode == "remove":
            cluster.remove_node(victim)
            events["removal_end"] = time.time()
            self._save(events)
            return
        from ray._private.worker import global_worker
        from ray.core.generated.autoscaler_pb2 import DrainNodeReason

        from sweep.tune._preemption import DRAIN_POLL_S

        deadline_ms = int(1000 * (time.time() + 120))
        accepted, why = global_worker.gcs_client.drain_node(
            node_id, DrainNodeReason.DRAIN_NODE_REASON_PREEMPTION, "a test drains it", deadline_ms
        )
        assert accepted, why
        self._save(events)
        time.sleep(DRAIN_POLL_S + 0.5)  # the victim asked Ray at its last chunk's end: its next question is due
        self._release(events["victim"])

    def on_trial_recover(self, iteration, trials, trial, **info):
        events = self._events()
        if trial.config["trial_key"] == events.get("victim") and "recovered" not in events:
            events["recovered"] = time.time()
            self._save(events)
            for other in trials:  # the other running trial may finish: its slot is the victim's
                if other.config["trial_key"] != events["victim"] and other.status == "RUNNING":
                    self._release(other.config["trial_key"])

    def on_trial_result(self, iteration, trials, trial, result, **info):
        events, key = self._events(), trial.config["trial_key"]
        if self.mode != "remove":
            return
        if key == events.get("victim") and result.get("resumed_from_epoch", 0) > 0 and "added_node" not in events:
            events["resumed"] = result["report_time"]
            node = CLUSTER["cluster"].add_node(num_cpus=1)
            events["added_node"] = node.node_id
            self._save(events)
        elif result.get("node_id") == events.get("added_node"):
            for t in trials:
                self._release(t.config["trial_key"])


def spec_of(mode: str):
    """``remove``: three trials of two seeds, two chunks each; ``drain``: two trials of three chunks."""
    from helpers import tiny_spec

    import sweep

    if mode == "remove":
        return tiny_spec(seeds=6)
    return tiny_spec(training=sweep.Training(epochs=6, batch_size=16, report_every=2))


def main(directory: str, mode: str = "remove") -> None:
    """Run the sweep (storage and markers under ``directory``); print ``RESULT`` + JSON."""
    import ray
    from _faults import Barrier, HoldWhile
    from helpers import trial_results
    from ray import tune
    from ray.cluster_utils import Cluster

    import sweep
    from sweep.tune import TrialHooks

    spec = spec_of(mode)
    for t in sweep.plan(spec).trials:
        (Path(directory) / "hold").mkdir(parents=True, exist_ok=True)
        (Path(directory) / "hold" / t.trial_key).touch()
    cluster = CLUSTER["cluster"] = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False}
    )
    workers = [cluster.add_node(num_cpus=1) for _ in range(2)]
    cluster.wait_for_nodes()
    try:
        hooks = TrialHooks(
            on_start=Barrier(f"{directory}/started", 2, 120),  # the first two run at once
            after_report=HoldWhile(f"{directory}/hold", 120),
        )
        path = sweep.run(
            spec,
            storage=f"{directory}/store",
            address=cluster.address,
            trial_hooks=hooks,
            progress="plain",
            tune_config=tune.TuneConfig(max_concurrent_trials=2, reuse_actors=True),
            run_config=tune.RunConfig(callbacks=[Choreography(directory, mode)]),
            failure_config=tune.FailureConfig(max_failures=0 if mode == "drain" else 2),  # a preemption is free
        )
        report = {
            "path": path,
            "results": trial_results(path),
            "workers": [w.node_id for w in workers],
            "events": json.loads((Path(directory) / "events.json").read_text()),
            "alive": {n["NodeID"]: n["Alive"] for n in ray.nodes()},
        }
        print("RESULT" + json.dumps(report), flush=True)
    finally:
        ray.shutdown()
        cluster.shutdown()
