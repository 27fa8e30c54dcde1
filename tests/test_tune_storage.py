"""A sweep stored on object storage (a moto S3 server on 127.0.0.1)."""

from __future__ import annotations

import equinox as eqx
import pyarrow.fs as pafs
import pytest
from _moto import moto_server, s3_filesystem
from helpers import tiny_spec, tree_allclose

import sweep
import sweep.tune
from sweep._fs import local_copy
from sweep.training import find_blocks, load_block


@pytest.fixture(scope="module")
def s3():
    """``(filesystem, bucket)`` on a moto server in this process."""
    with moto_server() as (host, port):
        fs = s3_filesystem(host, port)
        fs.create_dir("sweeps")
        yield fs, "sweeps"


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
    tunes = [
        i.base_name
        for i in fs.get_file_info(pafs.FileSelector(f"{bucket}/runs/tiny"))
        if i.base_name.startswith("tune-")
    ]
    assert tunes == ["tune-0001"]


def test_sweep_load_reads_the_remote_store(s3_sweep):
    fs, _, path = s3_sweep
    ens = sweep.load(path, storage_filesystem=fs)
    assert ens.table.num_rows == 4
