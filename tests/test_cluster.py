"""cluster/: the launcher YAML and KubeRay manifest are valid and ask for GPUs safely, and
local.sh starts a head + workers that run a sweep (`sweep run --address`, in a subprocess so it
never meets the test session's own Ray instance), then stops exactly what it started."""

from __future__ import annotations

import json
import os
import random
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml
from helpers import tiny_spec

from sweep.planning import make_plan

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = ROOT / "cluster"
LOCAL_SH = CLUSTER / "local.sh"
INTERNAL_PORTS = (6379, 8265, 10001)


def test_aws_launcher_config_is_valid_and_gpu_workers_autoscale():
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = yaml.safe_load((CLUSTER / "aws-gpu.yaml").read_text())
    validate_config(prepare_config(config))  # Ray's own schema, defaults filled in
    types = config["available_node_types"]
    head = types[config["head_node_type"]]
    workers = [t for name, t in types.items() if name != config["head_node_type"]]
    assert head["resources"] == {"CPU": 0}  # no trials on the head
    assert len(workers) == 1
    gpu = workers[0]
    assert gpu["node_config"]["InstanceType"].startswith(("g", "p"))  # AWS GPU families
    assert 1 <= gpu["min_workers"] < gpu["max_workers"] <= config["max_workers"]
    assert "gpu" in config["docker"]["worker_image"]
    assert any("[cuda12]" in c and "seed-sweep" in c for c in config["worker_setup_commands"])


def test_aws_config_opens_no_ray_port_to_the_internet():
    config = yaml.safe_load((CLUSTER / "aws-gpu.yaml").read_text())
    for rule in config["provider"]["security_group"]["IpPermissions"]:
        ports = range(rule.get("FromPort", 0), rule.get("ToPort", 65535) + 1)
        open_to_all = any(r.get("CidrIp") == "0.0.0.0/0" for r in rule.get("IpRanges", []))
        assert not (open_to_all and any(p in ports for p in INTERNAL_PORTS)), rule
    head_start = " ".join(config["head_start_ray_commands"])
    assert "--dashboard-host=127.0.0.1" in head_start and "0.0.0.0" not in head_start


def test_kuberay_manifest_has_a_gpu_worker_group():
    docs = [d for d in yaml.safe_load_all((CLUSTER / "kuberay.yaml").read_text()) if d]
    assert len(docs) == 1
    cluster = docs[0]
    assert cluster["apiVersion"] == "ray.io/v1" and cluster["kind"] == "RayCluster"
    head = cluster["spec"]["headGroupSpec"]
    assert head["serviceType"] == "ClusterIP"
    assert head["rayStartParams"]["num-cpus"] == "0"
    (group,) = cluster["spec"]["workerGroupSpecs"]
    assert 1 <= group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
    (container,) = group["template"]["spec"]["containers"]
    for part in ("limits", "requests"):
        assert int(container["resources"][part]["nvidia.com/gpu"]) >= 1
    assert any(t["key"] == "nvidia.com/gpu" for t in group["template"]["spec"]["tolerations"])
    assert "FROM rayproject/ray" in (CLUSTER / "Dockerfile").read_text()
    assert "[cuda12]" in (CLUSTER / "Dockerfile").read_text()


def test_local_sh_rejects_unknown_options():
    out = subprocess.run(["bash", str(LOCAL_SH), "start", "--bogus", "1"], capture_output=True, text=True)
    assert out.returncode == 2 and "unknown option '--bogus'" in out.stderr


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    """A base port below the ephemeral range whose derived node ports (local.sh) are free."""
    rng = random.Random()
    for _ in range(100):
        base = rng.randrange(20000, 30000, 10)
        if all(_bindable(p) for p in (base, *range(base + 10, base + 50))):
            return base
    raise RuntimeError("no free port range for the local cluster")


def _nodes(address: str, env: dict) -> list[dict]:
    script = (
        f"import json, logging, ray; ray.init(address={address!r}, logging_level=logging.ERROR); "
        "print('NODES' + json.dumps([{'id': n['NodeID'], 'alive': n['Alive'], 'res': n['Resources']} "
        "for n in ray.nodes()]))"
    )
    out = subprocess.run(["python", "-c", script], capture_output=True, text=True, env=env, timeout=120)
    line = next((x for x in out.stdout.splitlines() if x.startswith("NODES")), None)
    assert line, out.stderr[-2000:]
    return json.loads(line[len("NODES") :])


@pytest.mark.slow
def test_local_cluster_runs_a_sweep_on_its_workers(tmp_path):
    state = tempfile.mkdtemp(prefix="sl-", dir="/tmp")  # short: Ray's socket paths live below it
    # a token of its own for every node and driver: without one, local.sh generates ~/.ray/auth_token
    # where there is none (Ray 2.60 writes one too, at a local ray.init: the user's, not this test's)
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32), "RAY_ADDRESS": ""}
    had_token = Path.home().joinpath(".ray", "auth_token").exists()
    spec = tiny_spec(name="on-cluster", resources={"cpu": 1, "gpu": 1})  # fake GPUs: only workers fit
    spec.to_toml(tmp_path / "spec.toml")
    port = _free_port()
    try:
        start = subprocess.run(
            [
                "bash",
                str(LOCAL_SH),
                "start",
                "--workers",
                "2",
                "--worker-cpus",
                "1",
                "--worker-gpus",
                "1",
                "--port",
                str(port),
                "--dir",
                state,
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=240,
        )
        assert start.returncode == 0, start.stdout + start.stderr
        address = next(x.split()[1] for x in start.stdout.splitlines() if x.startswith("address:"))
        nodes = _nodes(address, env)
        assert sum(n["alive"] for n in nodes) == 3
        workers = {n["id"] for n in nodes if n["res"].get("GPU", 0) >= 1}
        assert len(workers) == 2

        run = subprocess.run(
            ["sweep", "run", str(tmp_path / "spec.toml"), "--storage", str(tmp_path / "runs"), "--address", address],
            capture_output=True,
            text=True,
            env=env,
            timeout=400,
        )
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
        sweep_dir = tmp_path / "runs" / "on-cluster"
        assert f"sweep directory: {sweep_dir}" in run.stdout

        results = [
            json.loads(line)
            for p in sweep_dir.glob("tune-*/*/result.json")
            for line in p.read_text().splitlines()
            if line.strip()
        ]
        assert {r["trial_key"] for r in results} == {t.trial_key for t in make_plan(spec).trials}
        assert {r["node_id"] for r in results} <= workers  # every trial ran on a GPU worker

        status = subprocess.run(
            ["sweep", "status", str(sweep_dir)], capture_output=True, text=True, env=env, timeout=120
        )
        assert "2 planned: 2 done" in status.stdout and "4 members stored" in status.stdout, (
            status.stdout + status.stderr
        )
    finally:
        stop = subprocess.run(
            ["bash", str(LOCAL_SH), "stop", "--dir", state], capture_output=True, text=True, env=env, timeout=120
        )
        pids = Path(state, "pids")
        shutil.rmtree(state, ignore_errors=True)
    assert stop.returncode == 0, stop.stderr
    assert not pids.exists()
    leftover = subprocess.run(["pgrep", "-f", state], capture_output=True, text=True)
    assert leftover.stdout.strip() == "", leftover.stdout
    assert Path.home().joinpath(".ray", "auth_token").exists() == had_token  # the user's own Ray untouched
