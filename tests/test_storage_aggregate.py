"""Aggregations of one sweep on object storage (a moto S3 server on 127.0.0.1): two at once both
commit, in turn, distinct complete generations; one killed while it writes (its own process)
leaves its lease to expire, and the next takes over and commits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from _blocks import trained_blocks, write_sweep
from _moto import moto_server, s3_filesystem
from helpers import tiny_spec

import sweep
from sweep.planning import make_plan
from sweep.store import Store, _writer

PLAN = make_plan(tiny_spec(grid={"model.depth": [1, 2], "optimizer.learning_rate": [1e-3, 3e-3]}))


@pytest.fixture(scope="module")
def s3():
    """``(filesystem, environment)``: the moto server as ``s3://`` URIs see it in other processes."""
    with moto_server() as (host, port):
        env = {
            **os.environ,
            "AWS_ENDPOINT_URL": f"http://{host}:{port}",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        fs = s3_filesystem(host, port)
        fs.create_dir("sweeps")
        yield fs, env


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory) -> Path:
    return write_sweep(tmp_path_factory.mktemp("local") / "sweep", PLAN, trained_blocks(PLAN))


@pytest.fixture
def remote(s3, local_sweep, request) -> str:
    """The sweep copied to ``sweeps/<test name>`` on the server."""
    fs, _ = s3
    path = f"sweeps/{request.node.name}"
    pafs.copy_files(str(local_sweep), path, pafs.LocalFileSystem(), fs)
    return path


def _generations(fs: pafs.FileSystem, path: str) -> list[str]:
    infos = fs.get_file_info(pafs.FileSelector(f"{path}/.ensembles"))
    return sorted(i.base_name for i in infos if i.base_name.isdigit())


# after its first leaves file, the aggregation "crash" says so and waits to be killed (lease of 1.5 s)
_CRASH = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import sweep, sweep.store._writer as writer, sweep.store._lease as lease
    uri, writing = sys.argv[1], Path(sys.argv[2])
    write = writer.write_leaves
    def held(*args):
        write(*args)
        writing.touch()
        time.sleep(3600)
    writer.write_leaves, lease.DEFAULT_TTL_S = held, 1.5
    sweep.aggregate(uri, progress=False)
""")


def test_two_aggregations_at_once_commit_distinct_generations(s3, remote, monkeypatch):
    # "first" holds on after its first leaves file until "second" says it waits for the lease (at most 60 s)
    fs, _ = s3
    errors, write = [], _writer.write_leaves

    def held(*args):
        record = write(*args)
        deadline = time.monotonic() + 60
        while threading.current_thread().name == "first" and time.monotonic() < deadline:
            if any("waiting for it to finish" in str(w.message) for w in caught):
                break
            time.sleep(0.02)
        return record

    def aggregate():
        try:
            sweep.aggregate(remote, filesystem=fs, progress=False)
        except Exception as e:
            errors.append(e)

    monkeypatch.setattr(_writer, "write_leaves", held)
    with pytest.warns(UserWarning) as caught:
        first = threading.Thread(target=aggregate, name="first")
        first.start()
        deadline = time.monotonic() + 60
        while fs.get_file_info(f"{remote}/.ensembles/000001").type == pafs.FileType.NotFound:
            assert time.monotonic() < deadline
            time.sleep(0.02)  # the first holds the lease and writes generation 1
        second = threading.Thread(target=aggregate, name="second")
        second.start()
        first.join(), second.join()
    assert not errors, errors
    said = [str(w.message) for w in caught]
    assert any(f"is writing 's3://{remote}/ensembles'; waiting for it to finish" in m for m in said), said
    assert not any("conditional" in m for m in said)  # S3's conditional writes, not the fallback
    assert fs.open_input_stream(f"{remote}/.ensembles/CURRENT").read().strip() == b"000002"
    assert _generations(fs, remote) == ["000001", "000002"]  # the previous one is kept, complete
    for name in ("000001", "000002"):
        Store.open(f"{remote}/.ensembles/{name}", filesystem=fs).verify()
    assert len(sweep.load(remote, storage_filesystem=fs)) == 16


def test_a_killed_aggregations_lease_expires_and_the_next_one_commits(s3, remote, tmp_path):
    fs, env = s3
    crashed = subprocess.Popen(
        [sys.executable, "-c", _CRASH, f"s3://{remote}", str(tmp_path / "writing")], env=env, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 120
    while not (tmp_path / "writing").exists():
        assert crashed.poll() is None and time.monotonic() < deadline, crashed.communicate()
        time.sleep(0.05)
    crashed.send_signal(signal.SIGKILL)
    crashed.wait()
    assert fs.get_file_info(f"{remote}/.ensembles/.lock").is_file  # left behind, no longer renewed
    with pytest.warns(UserWarning) as caught:
        sweep.aggregate(f"s3://{remote}", filesystem=fs, progress=False)
    said = " ".join(str(w.message) for w in caught)
    assert "took over the writer lease" in said and "not renewed for 1.5 s" in said
    # the killed one's unfinished generation 1 is collected; generation 2 is the store
    assert fs.open_input_stream(f"{remote}/.ensembles/CURRENT").read().strip() == b"000002"
    assert _generations(fs, remote) == ["000002"]
    Store.open(remote, filesystem=fs).verify()
    assert not fs.get_file_info(f"{remote}/.ensembles/.lock").is_file  # released
