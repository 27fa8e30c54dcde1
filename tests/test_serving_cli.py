"""`sweep serve DIR` in a subprocess (its own local Ray): it answers httpx requests, follows a newer
generation with --watch, and Ctrl-C (SIGINT to its process group) stops it with exit status 130,
the request in flight answered (through Serve's proxy) and nothing it started left running."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
from _serving import MORE, free_port, port_closed, tiny_store, wait_healthy
from helpers import assert_one_line_error, invoke

import sweep


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_sweep_serve_answers_and_stops_cleanly_on_sigint(tmp_path):
    sweep_dir = tiny_store(tmp_path / "sweep")
    port = free_port()
    cmd = [sys.executable, "-m", "sweep", "serve", sweep_dir, "--port", str(port), "--max-batch", "2", "--best", "3"]
    cmd += ["--watch", "0.5"]  # follow newer generations on its own
    cmd += ["--batch-wait", "3"]  # a request of one row waits 3 s for another (two rows: a full batch, at once)
    # through Serve's proxy (the default for several replicas or a cluster; one replica answers its
    # own port otherwise), on which stopping Serve used to drop the requests in flight
    cmd += ["--ingress", "proxy"]
    # its own session, as a terminal's foreground job: Ctrl-C signals the whole process group
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy(), start_new_session=True
    )
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 240)
        assert ready, "sweep serve printed nothing within 240 s"
        line = proc.stdout.readline()
        assert f"serving 3 members (generation 000001) at http://127.0.0.1:{port}" in line, line
        wait_healthy(f"http://127.0.0.1:{port}", deadline_s=60)
        x = np.random.default_rng(0).standard_normal((2, 1, 16)).astype(np.float32)
        r = httpx.post(f"http://127.0.0.1:{port}/predict", json={"x": x.tolist()}, timeout=60)
        assert r.status_code == 200, r.text
        mean, std = sweep.load(sweep_dir).best(3).mean_std(x)
        np.testing.assert_array_equal(np.asarray(r.json()["mean"], np.float32), mean)
        np.testing.assert_array_equal(np.asarray(r.json()["std"], np.float32), std)
        assert r.json()["members_served"] == 3
        tiny_store(tmp_path / "sweep", MORE)  # a newer generation: the 3 best of 6 members
        newer = sweep.load(sweep_dir).best(3)
        end = time.monotonic() + 120
        while (
            time.monotonic() < end
            and httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=30).json()["generation"] != "000002"
        ):
            time.sleep(0.5)
        r = httpx.post(f"http://127.0.0.1:{port}/predict", json={"x": x.tolist()}, timeout=60)
        assert r.json()["generation"] == "000002", "--watch did not switch to the newer generation within 120 s"
        np.testing.assert_array_equal(np.asarray(r.json()["mean"], np.float32), newer.mean_std(x)[0])
        started = _descendants(proc.pid)
        assert started  # Ray's processes, started for the service
        in_flight: list[tuple[float, httpx.Response | httpx.HTTPError]] = []

        def send_one_row() -> None:
            try:
                r = httpx.post(f"http://127.0.0.1:{port}/predict", json={"x": x[:1].tolist()}, timeout=60)
                in_flight.append((time.monotonic(), r))
            except httpx.HTTPError as error:  # the connection dropped
                in_flight.append((time.monotonic(), error))

        one_row = threading.Thread(target=send_one_row)
        one_row.start()
        end = time.monotonic() + 60  # until the replica holds it, waiting for a second row
        while httpx.get(f"http://127.0.0.1:{port}/info", timeout=30).json()["requests_in_flight"] != 1:
            assert time.monotonic() < end and one_row.is_alive(), (
                f"the request never waited in the replica: {in_flight}"
            )
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
        interrupted = time.monotonic()
        out, err = proc.communicate(timeout=120)
        one_row.join(timeout=60)
        assert not one_row.is_alive(), "the request in flight got no answer within 60 s"
        ((answered, answer),) = in_flight
        assert isinstance(answer, httpx.Response) and answer.status_code == 200, repr(answer)
        assert answered > interrupted  # answered while the service stopped
        np.testing.assert_array_equal(np.asarray(answer.json()["mean"], np.float32), newer.mean_std(x[:1])[0])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err[-3000:]
    assert "stopped" in err and "Traceback" not in err, err[-3000:]
    # what became of the newer generation, as it came (a clock time first)
    changes = [line.split(" ", 1)[1] for line in out.splitlines() if " generation " in line]
    assert changes == ["serving generation 000002: 3 members"], out
    # the service's own lines, not Serve's INFO logs (one names the unused proxy's port: "ready at")
    assert " INFO " not in err and "is ready at" not in err and "Token authentication" not in err, err[-3000:]
    assert port_closed(port)
    end = time.monotonic() + 60
    while time.monotonic() < end and any(_alive(p) for p in started):
        time.sleep(0.5)
    assert not [p for p in started if _alive(p)], "processes the service started outlived it"


def test_sweep_serve_refuses_bad_arguments_before_starting(tmp_path):
    """Each mistake is one line naming the option, before Ray or Serve starts (in this process:
    nothing is started, so no subprocess is needed to see it)."""
    sweep_dir = tiny_store(tmp_path / "sweep")
    for args, message in (
        (["--port", "70000"], "--port: got 70000"),
        (["--max-batch", "0"], "--max-batch: got 0"),
        (["--cpu", "-1"], "--cpu: got -1.0"),
        (["--where", "seed=99"], "no member matches"),
        (["--token-file", str(tmp_path / "missing")], "is not a file"),
        (["--address", "127.0.0.1:1"], "`address`: nothing answers at 127.0.0.1:1"),
        (["--host", "no-such-host.invalid"], "--host: got 'no-such-host.invalid'"),
    ):
        assert_one_line_error(invoke("serve", sweep_dir, *args), message)
    import socket

    import ray

    with socket.socket() as busy:  # Serve would retry it for half a minute, then fail without naming it
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert_one_line_error(
            invoke("serve", sweep_dir, "--port", port), f"--port: {port} cannot be bound at 127.0.0.1"
        )
    leaves = next((Path(sweep_dir) / "ensembles").resolve().glob("*.eqx"))
    data = bytearray(leaves.read_bytes())
    data[len(data) // 2] ^= 1
    leaves.write_bytes(bytes(data))  # a replica would fail on it, inside Serve's tracebacks
    assert_one_line_error(invoke("serve", sweep_dir, "--port", "0"), f"{str(leaves)!r}: checksum mismatch")
    assert not ray.is_initialized()


def test_a_sigterm_stops_sweep_serve_as_ctrl_c_does(tmp_path, monkeypatch):
    """systemd, Docker and Kubernetes stop a service with SIGTERM: "stopping", the service shut
    down, "stopped", exit status 143 (before: Ray's handler, a C++ stack banner, status 15). In
    this process, on a stand-in for the running service (the shutdown itself: the test above)."""
    import sweep.serving

    stopped = []

    class Running:
        members, generation, url, ingress = 3, "000001", "http://127.0.0.1:1", "direct"

        def changes(self):  # asked in the command's loop, once it serves
            os.kill(os.getpid(), signal.SIGTERM)
            return []

        def shutdown(self):
            stopped.append(True)

    monkeypatch.setattr(sweep.serving, "serve", lambda path, options: Running())
    sweep_dir = tiny_store(tmp_path / "sweep")
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        result = invoke("serve", sweep_dir, "--port", "0")
    finally:
        for s, handler in before.items():  # the command ignores a second signal while it stops
            signal.signal(s, handler)
    assert result.exit_code == 143, (result.output, result.stderr)
    assert result.stderr.splitlines() == ["stopping", "stopped"] and stopped, result.stderr
