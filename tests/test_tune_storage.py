"""A sweep stored on object storage (a moto S3 server on 127.0.0.1).

The default tests train with the in-process executor (the storage code is the product's, whatever
trains); Ray Tune's own checkpoint syncing to object storage, with a killed driver resumed from a
fresh process, is the slow test at the end."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import equinox as eqx
import jax
import numpy as np
import pyarrow.fs as pafs
import pytest
from _moto import moto_server, s3_filesystem
from helpers import member, tiny_spec, tree_allclose, trial_path_env

import sweep
import sweep.tune
from sweep.training import find_blocks, load_block


@pytest.fixture(scope="module")
def s3():
    """``(filesystem, bucket)`` on a moto server in this process."""
    with moto_server() as (host, port):
        fs = s3_filesystem(host, port)
        fs.create_dir("sweeps")
        yield fs, "sweeps"


LOCAL = sweep.RunOptions(executor="local", progress="off")


@pytest.fixture(scope="module")
def s3_sweep(s3):
    fs, bucket = s3
    return fs, bucket, sweep.run(tiny_spec(), storage=f"s3://{bucket}/runs", storage_filesystem=fs, options=LOCAL)


def _files(fs: pafs.FileSystem, path: str) -> dict[str, tuple[int, object]]:
    """Every file under ``path``: its size and modification time."""
    selector = pafs.FileSelector(path, recursive=True)
    return {i.path: (i.size, i.mtime) for i in fs.get_file_info(selector) if i.type == pafs.FileType.File}


def test_sweep_on_object_storage(s3_sweep, tmp_path):
    fs, bucket, path = s3_sweep
    spec = tiny_spec()
    assert path == f"s3://{bucket}/runs/tiny"
    assert fs.get_file_info(f"{bucket}/runs/tiny/plan.json").type == pafs.FileType.File

    refs = find_blocks(f"{bucket}/runs/tiny", fs)
    plan = sweep.planning.make_plan(spec)
    assert set(refs) == {t.trial_key for t in plan.trials}
    for t in plan.trials:
        assert refs[t.trial_key].epoch == spec.training.epochs
        local = tmp_path / t.trial_key  # a checkpoint on object storage, copied down to read it
        local.mkdir()
        pafs.copy_files(
            refs[t.trial_key].path, str(local), source_filesystem=fs, destination_filesystem=pafs.LocalFileSystem()
        )
        block = load_block(local)
        model, _ = sweep.train_block(spec, t.seeds)
        assert tree_allclose(block.state.params, eqx.filter(model, eqx.is_array), exact=True)

    # a second run on the same bucket finds every member done and writes nothing
    before = _files(fs, f"{bucket}/runs/tiny")
    sweep.run(spec, storage=f"s3://{bucket}/runs", storage_filesystem=fs, options=LOCAL)
    assert _files(fs, f"{bucket}/runs/tiny") == before


def test_sweep_load_reads_the_remote_store(s3_sweep):
    fs, _, path = s3_sweep
    ens = sweep.load(path, storage_filesystem=fs)
    assert ens.table.num_rows == 4


# -- from fresh processes: nothing of the sweep lives outside its directory -------------------------
def _s3_env(fs: pafs.S3FileSystem) -> dict[str, str]:
    """The moto server as ``s3://`` URIs find it in another process (the usual ``AWS_*`` variables)."""
    return {
        "AWS_ENDPOINT_URL": f"http://{fs.__reduce__()[1][0]['endpoint_override']}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }


def _fresh_process_env(fs: pafs.S3FileSystem, root: Path) -> dict:
    """The environment of a process with its own new, empty HOME and TMPDIR under ``root`` (short
    paths: Ray's sockets live in TMPDIR) and the S3 endpoint in ``AWS_*`` variables."""
    home, tmp = root / "home", root / "tmp"
    home.mkdir(parents=True), tmp.mkdir()
    return {**trial_path_env(), **_s3_env(fs), "HOME": str(home), "TMPDIR": str(tmp)}


def _processes(match) -> list[int]:
    """Live processes for which ``match(pid, command line)`` holds."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            if state != "Z" and match(int(entry.name), cmdline):
                found.append(int(entry.name))
        except (ValueError, OSError, IndexError):
            continue
    return found


def _end_group(pgid: int) -> None:
    """End what is left of the process group ``pgid`` (a driver started in a session of its own)."""
    for pid in _processes(lambda pid, _: os.getpgid(pid) == pgid):
        os.kill(pid, signal.SIGKILL)


def _assert_uninterrupted_members(fs: pafs.FileSystem, path: str, spec: sweep.SweepSpec) -> None:
    """The store at ``path`` loads, predicts, and holds the members an uninterrupted run trains."""
    ens = sweep.load(path, storage_filesystem=fs)
    assert len(ens) == len(spec.seed_list)
    x, _ = ens.samples()
    y = ens.predict(x[:3])
    seeds = ens.table.column("seed").to_pylist()
    for t in sweep.planning.make_plan(spec).trials:
        model, _ = sweep.train_block(spec, t.seeds)  # the members of an uninterrupted trial
        for i, seed in enumerate(t.seeds):
            stored = ens.member(seed=seed)
            assert tree_allclose(
                eqx.filter(stored, eqx.is_array), eqx.filter(member(model, i), eqx.is_array), exact=True
            )
            np.testing.assert_allclose(y[seeds.index(seed)], jax.vmap(stored)(x[:3]), rtol=1e-5, atol=1e-6)


def test_a_fresh_process_aggregates_and_reads_the_remote_sweep(s3_sweep, tmp_path):
    # a process with its own new HOME and TMPDIR that knows the sweep by its s3:// URI alone
    fs, bucket, path = s3_sweep
    env = _fresh_process_env(fs, tmp_path / "fresh")
    for command in (["aggregate", f"s3://{bucket}/runs/tiny"], ["show", f"s3://{bucket}/runs/tiny"]):
        done = subprocess.run(["sweep", *command], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
    assert "4 members" in done.stdout
    assert fs.open_input_stream(f"{bucket}/runs/tiny/.ensembles/CURRENT").read().strip() == b"000002"
    _assert_uninterrupted_members(fs, path, tiny_spec())


@pytest.mark.slow
def test_driver_killed_on_object_storage_resumes_from_a_fresh_process(s3, tmp_path):
    fs, bucket = s3
    spec = tiny_spec(name="killed", training=sweep.Training(epochs=12, batch_size=16, report_every=1))
    spec.to_toml(tmp_path / "spec.toml")
    path = f"{bucket}/killed/killed"
    command = ["sweep", "run", str(tmp_path / "spec.toml"), "--storage", f"s3://{bucket}/killed"]
    command += ["--checkpoint-every", "1"]
    first_root, second_root = Path(tempfile.mkdtemp(prefix="ss-a-")), Path(tempfile.mkdtemp(prefix="ss-b-"))
    first = second = None
    try:
        first = subprocess.Popen(
            command,
            env=_fresh_process_env(fs, first_root),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,  # the driver and the Ray it starts: one process group
        )
        deadline = time.monotonic() + 180
        selector = pafs.FileSelector(f"{path}/tune-0001", recursive=True, allow_not_found=True)
        while not any(i.base_name == "block.json" for i in fs.get_file_info(selector)):
            assert first.poll() is None, first.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "no checkpoint within 180 s"
            time.sleep(0.1)
        first.kill()  # SIGKILL: no clean-up of any kind
        first.wait()
        # Ray's processes end with their driver (its GCS, raylet and workers name the session
        # directory in TMPDIR on their command line); its two node agents linger (Ray 2.60) and
        # are ended with the rest of the process group
        deadline = time.monotonic() + 60
        while _processes(lambda _, cmd: str(first_root) in cmd) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _processes(lambda _, cmd: str(first_root) in cmd), "Ray's processes outlived their driver"
        _end_group(first.pid)
        done = {r.trial_key for r in find_blocks(path, fs).values() if r.epoch == 12}
        assert len(done) < 2  # killed mid-sweep
        shutil.rmtree(first_root)  # the first driver's HOME and TMPDIR (Ray's session, Tune's staging) are gone

        second = subprocess.Popen(
            [*command, "--resume"],
            env=_fresh_process_env(fs, second_root),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        _, err = second.communicate(timeout=300)
        assert second.returncode == 0, err[-3000:]
    finally:
        for driver in (first, second):
            if driver is not None:
                driver.kill()
                _end_group(driver.pid)
        for root in (first_root, second_root):
            shutil.rmtree(root, ignore_errors=True)
    tunes = [i.base_name for i in fs.get_file_info(pafs.FileSelector(path)) if i.base_name.startswith("tune-")]
    assert tunes == ["tune-0001"]  # the killed experiment was restored and finished in place
    _assert_uninterrupted_members(fs, path, spec)


def test_a_sweep_on_object_storage_writes_the_store_it_writes_on_disk(s3_sweep, tmp_path):
    from sweep.store import Store

    fs, bucket, path = s3_sweep
    refs = find_blocks(f"{bucket}/runs/tiny", fs)
    assert {r.path.split("/")[-3] for r in refs.values()} == {"local"}  # <sweep>/local/<trial>/checkpoint_*
    on_disk = sweep.run(tiny_spec(), storage=str(tmp_path), options=LOCAL)

    def files(where: str, filesystem: pafs.FileSystem | None = None) -> dict:
        return {k: v["sha256"] for k, v in Store.open(where, filesystem=filesystem).manifest["files"].items()}

    assert files(path, fs) == files(on_disk)
