"""A sweep stored on object storage (a moto S3 server on 127.0.0.1)."""

from __future__ import annotations

import equinox as eqx
import pyarrow.fs as pafs
import pytest
from conftest import tiny_spec, tree_allclose
from conftest_ray import ray_session  # noqa: F401

import sweep
import sweep.tune
from sweep._fs import local_copy
from sweep.training import find_blocks
from sweep.training import load_block


@pytest.fixture(scope="module")
def s3():
    """``(filesystem, bucket)`` on a moto server in this process."""
    from moto.s3 import responses
    from moto.server import ThreadedMotoServer

    # moto 5.2.1 names the CompleteMultipartUpload root element wrongly (getmoto/moto#10055),
    # which pyarrow's S3 client rejects; put the name S3 uses back
    serialized = responses.S3Response.serialized

    def fixed(self, result):
        status, headers, body = serialized(self, result)
        if self.data.get("Action") == "CompleteMultipartUpload" and isinstance(body, (str, bytes)):
            old, new = "CompleteMultipartUploadResponse", "CompleteMultipartUploadResult"
            body = body.replace(old, new) if isinstance(body, str) else body.replace(old.encode(), new.encode())
        return status, headers, body

    responses.S3Response.serialized = fixed
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    fs = pafs.S3FileSystem(endpoint_override=f"{host}:{port}", scheme="http", access_key="testing",
                           secret_key="testing", region="us-east-1", allow_bucket_creation=True)
    fs.create_dir("sweeps")
    yield fs, "sweeps"
    server.stop()
    responses.S3Response.serialized = serialized


@pytest.fixture(scope="module")
def s3_sweep(ray_session, s3):
    fs, bucket = s3
    return fs, bucket, sweep.run(tiny_spec(), storage=f"s3://{bucket}/runs", storage_filesystem=fs)


def test_sweep_on_object_storage(s3_sweep):
    fs, bucket, path = s3_sweep
    spec = tiny_spec()
    assert path == f"s3://{bucket}/runs/tiny"
    assert fs.get_file_info(f"{bucket}/runs/tiny/plan.json").type == pafs.FileType.File

    refs = find_blocks(f"{bucket}/runs/tiny", fs)
    plan = sweep.planning.make_plan(spec)
    assert set(refs) == {t.trial_key for t in plan.trials}
    for t in plan.trials:
        assert refs[t.trial_key].epoch == spec.training.epochs
        with local_copy(fs, refs[t.trial_key].path) as d:
            block = load_block(d)
        model, _ = sweep.train_block(spec, t.seeds)
        assert tree_allclose(block.state.params, eqx.filter(model, eqx.is_array), exact=True)

    # a second run on the same bucket finds every member done and starts no experiment
    sweep.run(spec, storage=f"s3://{bucket}/runs", storage_filesystem=fs)
    tunes = [i.base_name for i in fs.get_file_info(pafs.FileSelector(f"{bucket}/runs/tiny"))
             if i.base_name.startswith("tune-")]
    assert tunes == ["tune-0001"]


def test_sweep_load_reads_the_remote_store(s3_sweep):
    fs, _, path = s3_sweep
    ens = sweep.load(path, storage_filesystem=fs)
    assert ens.table.num_rows == 4
