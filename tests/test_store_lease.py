"""The writer lease of a store on object storage (a moto S3 server on 127.0.0.1): one holder at a
time through S3's conditional writes, waiting, a crashed holder's lease taken over, a holder that
lost its lease commits nothing, and stores that ignore conditional writes."""

from __future__ import annotations

import threading
import time
import warnings

import pytest
from _moto import moto_server, s3_filesystem

from sweep import StoreError
from sweep.store._lease import Lease, writer_lease
from sweep.store._objects import ConditionalObjects, PlainObjects, objects_for, s3_client


@pytest.fixture(scope="module")
def fs():
    with moto_server() as (host, port):
        fs = s3_filesystem(host, port)
        fs.create_dir("leases")
        yield fs


@pytest.fixture
def key(request):
    return f"leases/{request.node.name}/.lock"


def test_the_s3_client_is_the_filesystems(fs):
    client = s3_client(fs)
    assert client.meta.endpoint_url == f"http://{fs.__reduce__()[1][0]['endpoint_override']}"
    assert client.meta.region_name == "us-east-1"
    objects, why = objects_for(fs)
    assert isinstance(objects, ConditionalObjects) and why is None


def test_conditional_objects_create_replace_delete(fs, key):
    objects, _ = objects_for(fs)
    first = objects.create(key, b"a")
    assert first is not None
    assert objects.create(key, b"b") is None  # taken
    assert objects.replace(key, b"c", '"not-the-version"') is None
    second = objects.replace(key, b"c", first)
    assert second is not None and second != first
    assert objects.read(key) == (b"c", second)
    objects.delete(key, first)  # not the version there: left alone
    assert objects.read(key) is not None
    objects.delete(key, second)
    assert objects.read(key) is None


def test_holders_take_turns(fs, key):
    # four aggregations start at the same moment: each holds the lease alone, in turn
    held: list[tuple[float, float]] = []
    barrier = threading.Barrier(4)

    def aggregate():
        lease = writer_lease(fs, key, "s3://store", ttl_s=2.0)
        barrier.wait()
        with lease:
            start = time.monotonic()
            time.sleep(0.3)
            lease.check()
            held.append((start, time.monotonic()))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        threads = [threading.Thread(target=aggregate) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(held) == 4
    held.sort()
    assert all(end <= next_start for (_, end), (next_start, _) in zip(held, held[1:]))  # never two at once
    waited = [str(w.message) for w in caught if "is writing 's3://store'; waiting for it to finish" in str(w.message)]
    assert len(waited) == 3


def test_a_live_holder_is_waited_for_however_long_it_takes(fs, key):
    first = Lease(objects_for(fs)[0], key, "s3://store", ttl_s=0.4).acquire()
    got = threading.Event()

    def second():
        with Lease(objects_for(fs)[0], key, "s3://store", ttl_s=0.4):
            got.set()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        waiter = threading.Thread(target=second)
        waiter.start()
        assert not got.wait(2.0)  # five lease lengths: the holder renews, the waiter waits
        first.check()
        first.release()
        waiter.join()
    assert got.is_set()


def test_a_crashed_holders_lease_is_taken_over_and_the_holder_commits_nothing(fs, key):
    crashed = Lease(objects_for(fs)[0], key, "s3://store", ttl_s=0.5).acquire()
    crashed._stop.set()  # it stops renewing, as a killed process does
    crashed._thread.join()
    with pytest.warns(UserWarning) as caught:
        with Lease(objects_for(fs)[0], key, "s3://store", ttl_s=5.0) as taker:
            with pytest.raises(StoreError, match=r"writer lease was taken over by .* commits nothing"):
                crashed.check()
            taker.check()  # still the taker's
    said = [str(w.message) for w in caught]
    assert "waiting for it to finish" in said[0]
    assert "took over the writer lease of 's3://store'" in said[1] and "not renewed for 0.5 s" in said[1]


def test_a_lock_file_that_holds_no_lease_is_taken_at_once(fs, key):
    # the empty file flock uses on local disks, copied to object storage with the sweep
    with fs.open_output_stream(key) as f:
        f.write(b"")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no waiting, no take-over to report
        with writer_lease(fs, key, "s3://store", ttl_s=60.0) as lease:
            lease.check()


def test_a_store_that_ignores_conditional_writes_is_named(fs, key, monkeypatch):
    objects = objects_for(fs)[0]
    put = objects.client.put_object

    def unconditional(**kwargs):
        kwargs.pop("IfNoneMatch", None), kwargs.pop("IfMatch", None)
        return put(**kwargs)

    monkeypatch.setattr(objects.client, "put_object", unconditional)
    lease = Lease(objects, key, "s3://store", ttl_s=5.0, fallback=PlainObjects(fs))
    with pytest.warns(UserWarning, match="the object store ignores conditional writes"):
        lease.acquire()
    assert isinstance(lease.objects, PlainObjects)
    lease.check()
    lease.release()
    assert not fs.get_file_info(key).is_file


def test_plain_objects_lease_on_any_filesystem(tmp_path):
    import pyarrow.fs as pafs

    key = str(tmp_path / ".lock")
    with writer_lease(pafs.LocalFileSystem(), key, "store", ttl_s=5.0) as lease:
        assert isinstance(lease.objects, PlainObjects)
        assert PlainObjects(pafs.LocalFileSystem()).create(key, b"other") is None
        lease.check()
    assert not (tmp_path / ".lock").exists()


def test_a_waiting_aggregation_is_told_at_the_line_that_started_it(tmp_path):
    """The local writer lock's warning (raised inside a ``contextlib`` context manager) names the
    caller's line, not one of seed-sweep's or contextlib's."""
    import pyarrow.fs as pafs

    from sweep.store._generations import writer_lock

    fs, store = pafs.LocalFileSystem(), str(tmp_path / "ensembles")

    def second() -> None:
        with writer_lock(fs, store):  # waits for the first
            pass

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with writer_lock(fs, store):
            waiter = threading.Thread(target=second)
            waiter.start()
            deadline = time.monotonic() + 30
            while not caught and time.monotonic() < deadline:
                time.sleep(0.01)
        waiter.join()
    (told,) = caught
    assert "another aggregation is writing" in str(told.message)
    assert told.filename == __file__ and told.lineno == second.__code__.co_firstlineno + 1
