"""Concurrent and failing writers: two aggregations at once both succeed; a full disk or
a refused permission mid-aggregation is a StoreError naming the file and the cause, and the
previous store stays readable."""

from __future__ import annotations

import errno
import fnmatch
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from _blocks import trained_blocks, write_sweep
from _local_fs import LocalHandler
from helpers import tiny_spec

import sweep
from sweep import StoreError
from sweep.planning import make_plan
from sweep.store import Store

PLAN = make_plan(tiny_spec(grid={"model.depth": [1, 2], "optimizer.learning_rate": [1e-3, 3e-3]}))


@pytest.fixture
def sweep_dir(tmp_path) -> Path:
    return write_sweep(tmp_path / "sweep", PLAN, trained_blocks(PLAN))


def _generation_dirs(sweep_dir: Path) -> list[str]:
    return sorted(p.name for p in (sweep_dir / ".ensembles").iterdir() if p.name.isdigit())


# -- concurrent aggregations ----------------------------------------------------------------------
_AGGREGATE = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import sweep, sweep.store._writer as writer
    sweep_dir, role = Path(sys.argv[1]), sys.argv[2]
    waiting = sweep_dir / "second-waiting"
    if role == "first":  # after its first leaves file, wait until the second waits for the lock (at most 60 s)
        write = writer.write_leaves
        def slow(*args):
            record = write(*args)
            deadline = time.monotonic() + 60
            while not waiting.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            return record
        writer.write_leaves = slow
    else:  # says so when it finds the lock held: the warning, shown as ever, and a file for the first
        import warnings
        show = warnings.showwarning
        def shown(message, *args, **kwargs):
            show(message, *args, **kwargs)
            if "another aggregation is writing" in str(message):
                waiting.touch()
        warnings.showwarning = shown
    sweep.aggregate(sweep_dir, progress=False)
""")


def test_two_aggregations_at_once_both_succeed(sweep_dir):
    def start(role):
        return subprocess.Popen(
            [sys.executable, "-c", _AGGREGATE, str(sweep_dir), role],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    first = start("first")
    deadline = time.monotonic() + 120
    while not (sweep_dir / ".ensembles" / "000001").exists():  # the first is writing its generation
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.05)
    second = start("second")
    (_, first_err), (_, second_err) = first.communicate(timeout=300), second.communicate(timeout=300)
    assert first.returncode == 0, first_err[-2000:]
    assert second.returncode == 0, second_err[-2000:]
    assert "another aggregation is writing" in second_err  # it waited for the first
    assert (sweep_dir / ".ensembles" / "CURRENT").read_text().strip() == "000002"
    assert _generation_dirs(sweep_dir) == ["000001", "000002"]  # the previous one is kept, complete
    for name in ("000001", "000002"):
        Store.open(sweep_dir / ".ensembles" / name).verify()
    assert len(sweep.load(sweep_dir)) == 16


def test_a_generation_number_taken_meanwhile_is_skipped(sweep_dir, monkeypatch):
    # Another writer (one without the lock: a filesystem without locks) creates 000002 between this
    # writer's listing and its own create: the exclusive create fails and the next number is taken.
    sweep.aggregate(sweep_dir, progress=False)
    mkdir = os.mkdir

    def racing(path, *args, **kwargs):
        if str(path).endswith("/000002"):
            mkdir(path)  # the other writer wins this number
        return mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", racing)
    sweep.aggregate(sweep_dir, progress=False)
    assert (sweep_dir / ".ensembles" / "CURRENT").read_text().strip() == "000003"
    assert _generation_dirs(sweep_dir)[-1] == "000003"  # (the other writer's empty 000002 cleaned up)
    Store.open(sweep_dir / "ensembles").verify()


# -- failing writes -------------------------------------------------------------------------------
class _FailingWrites(LocalHandler):
    """A local filesystem on which creating or writing files matching ``pattern`` fails as a full
    disk does (ENOSPC: the file's stream is ``/dev/full``, so the disk's own error surfaces in the
    middle of the write) or as a refused permission does (EACCES, when the file or directory is
    created)."""

    def __init__(self, pattern: str, error: int):
        super().__init__()
        self.pattern, self.error = pattern, error
        self.armed = True

    def _fails(self, path: str) -> bool:
        return self.armed and fnmatch.fnmatch(path.rsplit("/", 1)[-1], self.pattern)

    def open_output_stream(self, path, metadata):
        if self._fails(path) and self.error == errno.ENOSPC:
            return self.local.open_output_stream("/dev/full")
        if self._fails(path):
            raise OSError(self.error, os.strerror(self.error), path)
        return self.local.open_output_stream(path)

    def create_dir(self, path, recursive):
        if self._fails(path):
            raise OSError(self.error, os.strerror(self.error), path)
        self.local.create_dir(path, recursive=recursive)


ERRORS = (errno.ENOSPC, errno.EACCES)
PATTERNS = (
    "*.eqx",
    "members.parquet",
    "configs.parquet",
    "samples.parquet",
    "manifest.json",
    ".CURRENT.tmp-*",
    "00000[2-9]",
)


def failing_write(sweep_dir: Path, pattern: str, error: int) -> dict:
    """Aggregate once, then again with writes to ``pattern`` failing, then again with room: what the
    failing one raised and what each left behind."""
    handler = _FailingWrites(pattern, error)
    fs = pafs.PyFileSystem(handler)
    handler.armed = False
    sweep.aggregate(str(sweep_dir), filesystem=fs, progress=False)  # the previous store
    handler.armed = True
    try:
        sweep.aggregate(str(sweep_dir), filesystem=fs, progress=False)
        message = None
    except StoreError as e:
        message = str(e)
    store = Store.open(str(sweep_dir), filesystem=fs)
    store.verify()
    left = {
        "root": store.root,
        "members": len(sweep.load(str(sweep_dir), storage_filesystem=fs)),
        "generations": _generation_dirs(sweep_dir),
    }
    handler.armed = False  # space freed: the next aggregation goes through
    sweep.aggregate(str(sweep_dir), filesystem=fs, progress=False)
    return {
        "pattern": pattern,
        "error": error,
        "message": message,
        **left,
        "members_after": len(sweep.load(str(sweep_dir), storage_filesystem=fs)),
    }


@pytest.mark.parametrize("error", ERRORS, ids=errno.errorcode.get)
@pytest.mark.parametrize("pattern", PATTERNS)
def test_a_failing_write_names_the_file_and_leaves_the_previous_store(sweep_dir, pattern, error):
    case = failing_write(sweep_dir, pattern, error)
    message = case["message"]
    assert message is not None, "the failing aggregation did not raise StoreError"
    assert os.strerror(error) in message and "previous store is unchanged and readable" in message, message
    name = pattern.replace("*", "").replace(".tmp-", "").lstrip(".").removesuffix("[2-9]")
    assert name in message.split(":")[0], message  # the file it could not write comes first
    assert case["root"].endswith("/000001") and case["members"] == 16  # the previous store, verified
    assert [g for g in case["generations"] if g != "000001"] in ([], ["000002"])  # removed if it could be
    assert case["members_after"] == 16


@pytest.fixture
def tiny_disk(tmp_path):
    """A 1 MiB tmpfs (skipped where this process may not mount one: mounting needs root)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(
            f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}); the filesystem wrapper "
            f"tests cover full disks"
        )
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_full_tmpfs_during_aggregation(tiny_disk):
    root = write_sweep(tiny_disk / "sweep", PLAN, trained_blocks(PLAN))
    sweep.aggregate(root, progress=False)
    filler = tiny_disk / "filler"
    with open(filler, "wb", buffering=0) as f:  # fill the disk, then free a little: the next store does not fit
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as e:
            assert e.errno == errno.ENOSPC
    os.truncate(filler, filler.stat().st_size - 8192)
    with pytest.raises(
        StoreError, match=r"/000002/[^']+': cannot write \(.*No space left on device\); the previous store is unchanged"
    ):
        sweep.aggregate(root, progress=False)
    Store.open(root).verify()
    assert len(sweep.load(root)) == 16
    filler.unlink()
    sweep.aggregate(root, progress=False)
    assert len(sweep.load(root)) == 16
