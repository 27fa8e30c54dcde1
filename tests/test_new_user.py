"""What a new user sees first: readable results in terminals and notebooks (Ensemble, summary,
compare), and the axis orders of stored trajectories and rollouts."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest
from _blocks import trained_blocks
from helpers import tiny_spec

import sweep
from sweep.planning import make_plan
from sweep.store import aggregate_blocks

PLAN = make_plan(tiny_spec(grid={"model.depth": [1, 2], "optimizer.learning_rate": [1e-3, 3e-3]}))


@pytest.fixture(scope="module")
def ens(tmp_path_factory):
    path = tmp_path_factory.mktemp("sweep") / "ensembles"
    aggregate_blocks(path, trained_blocks(PLAN), plan=PLAN)
    return sweep.load(path)


def test_ensemble_repr_names_the_sweep_and_its_members_not_the_store_folder(ens):
    text = repr(ens)
    assert f"sweep {PLAN.spec.name!r}" in text and f"{len(ens)} members" in text
    assert ".gen" not in text and "ensembles" not in text and str(ens._store.root) not in text
    lines = text.splitlines()
    assert lines[1].split() == ["config_id", "depth", "learning_rate", "members", "seeds"]
    rows = [line.split() for line in lines[2:]]
    assert len(rows) == 4  # one row per configuration (depth x learning rate)
    assert sum(int(r[3]) for r in rows) == len(ens)
    seeds = sorted(set(ens.index["seed"].to_pylist()))
    assert all(r[4] == f"{seeds[0]}..{seeds[-1]}" for r in rows)
    sub = ens.where(depth=2, learning_rate=1e-3)
    assert "1 configuration(s)" in repr(sub) and len(repr(sub).splitlines()) == 3


def test_ensemble_html_is_a_table_of_its_configurations(ens):
    page = ens._repr_html_()
    assert page.count("<tr>") == 1 + 4 and "<th>learning_rate</th>" in page
    assert f"sweep &#x27;{PLAN.spec.name}&#x27;" in page or f"sweep '{PLAN.spec.name}'" in page


def test_summary_reads_as_rows_and_stays_a_pyarrow_table(ens):
    summary = ens.summary()
    assert isinstance(summary.table, pa.Table) and pa.table(summary).equals(summary.table)
    assert summary.num_rows == len(summary) == 4 and summary.to_pylist() == summary.table.to_pylist()
    assert summary.to_pandas().shape == (4, len(summary.table.column_names))
    text = repr(summary)
    assert "schema" not in text and "pyarrow" not in text and "chunked" not in text
    lines = text.splitlines()
    assert lines[0].startswith("val_loss over seeds per configuration")
    header = lines[1].split()
    assert header[:2] == ["depth", "learning_rate"] and "mean" in header and "test_loss_mean" in header
    assert not {"iqm", "config_id", "test_loss_ci_low"} & set(header)
    means = [float(line.split()[header.index("mean")]) for line in lines[2:6]]
    assert means == pytest.approx([r["mean"] for r in summary.to_pylist()], rel=1e-3)  # best first
    assert "iqm" in lines[-1] and "config_id" in lines[-1] and ".table" in lines[-1]  # the columns left out
    page = summary._repr_html_()
    assert page.count("<tr>") == 1 + 4 and "<th>mean</th>" in page and "schema" not in page


def test_comparison_reads_as_a_sentence_and_a_table(ens):
    c = ens.compare({"depth": 1, "learning_rate": 1e-3}, {"depth": 2, "learning_rate": 1e-3})
    text = repr(c)
    assert f"{c.probability:.2f}" in text and "val_loss" in text and "lower is better" in text
    assert f"{c.n_a} vs {c.n_b}" in text and "Comparison(probability=" not in text
    page = c._repr_html_()
    assert page.count("<tr>") == len(c._fields) + 1 and "<td>probability</td>" in page
    assert c.probability == c[0]  # still the named tuple


@pytest.mark.parametrize(
    "change, message",
    [
        ({"trainig": {}}, "spec: unknown field(s) ['trainig'] (did you mean 'training'?)"),
        ({"training": {"epochs": 1, "batch_size": 4, "epoch": 3}}, "(did you mean 'epochs'?)"),
        (
            {"problem": {"name": "heat1d", "num_point": 16}},
            "`problem.num_point`: not an option of heat1d (did you mean",
        ),
        ({"problem": {"name": "arrays", "pathh": "x.npz"}}, "got ['pathh'] (did you mean 'path'?)"),
        ({"model": {"name": "ConvNett"}}, "unknown architecture 'ConvNett' (did you mean 'ConvNet'?)"),
        ({"model": {"name": "ConvNet", "hiden_channels": 4}}, "(did you mean 'hidden_channels'?)"),
        ({"optimizer": {"name": "adamm", "learning_rate": 1e-3}}, "unknown optimizer 'adamm' (did you mean 'adam'?)"),
        ({"optimizer": {"name": "adam", "learning_rat": 1e-3}}, "(did you mean 'learning_rate'?)"),
        ({"grid": {"modle.depth": [1]}}, "`grid`: key 'modle.depth' is not a spec field (did you mean 'model.depth'?)"),
        ({"problem": {"name": "HDF5", "path": "x.hdf5"}}, "unknown problem 'HDF5' (did you mean 'hdf5'?)"),
    ],
)
def test_an_unknown_spec_field_gets_a_did_you_mean(change, message):
    data = tiny_spec().to_dict() | change
    with pytest.raises(sweep.SpecError) as e:
        sweep.SweepSpec.from_dict(data)
    assert message in str(e.value)


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda: sweep.SweepSpec(trainig=sweep.Training()),
            "SweepSpec(): unknown field(s) ['trainig'] (did you mean 'training'?)",
        ),
        (
            lambda: sweep.Training(epoch=3),
            "Training(): unknown field(s) ['epoch'] (did you mean 'epochs'?); allowed: epochs,",
        ),
        (lambda: sweep.Search(algoritm="tpe"), "(did you mean 'algorithm'?)"),
        (lambda: sweep.Adaptive(confidance=0.9), "(did you mean 'confidence'?)"),
        (lambda: sweep.Distribution("uniform", (0, 1), lo=0), "Distribution(): unknown field(s) ['lo']"),
    ],
)
def test_an_unknown_keyword_in_python_gets_a_did_you_mean_as_in_toml(make, message):
    with pytest.raises(sweep.SpecError) as e:  # as every other mistake in a spec
        make()
    assert message in str(e.value)


def test_no_suggestion_for_a_name_close_to_nothing_and_for_columns(ens):
    with pytest.raises(sweep.SpecError) as e:
        sweep.SweepSpec.from_dict(tiny_spec().to_dict() | {"zzzzqq": 1})
    assert "did you mean" not in str(e.value)
    with pytest.raises(sweep.QueryError, match=r"unknown column 'dept' \(did you mean 'depth'\?\)"):
        ens.where(dept=1)
    with pytest.raises(sweep.QueryError, match=r"no column named 'val_los' \(did you mean 'val_loss'\?\)"):
        ens.summary("val_los")


@pytest.mark.parametrize(
    "change, message",
    [
        ({"training": sweep.Training(epochs=2, batch_size=500, report_every=1)}, "batch_size"),
        ({"problem": sweep.Problem("arrays", path="nowhere/missing.npz")}, "missing.npz"),
    ],
)
def test_sweep_run_checks_the_data_before_ray_starts(tmp_path, monkeypatch, change, message):
    import ray

    def no_ray(*args, **kwargs):
        raise AssertionError("Ray was started before the data was checked")

    monkeypatch.setattr(ray, "init", no_ray)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # as in a fresh process
    with pytest.raises(sweep.SweepError, match=message):
        sweep.run(tiny_spec(**change), storage=tmp_path / "runs", progress="off")


FACTORY = """
from pathlib import Path
import equinox as eqx
import jax

IMPORTED = Path(__file__).with_name("imported-marker")
IMPORTED.touch()  # importing this module leaves a mark


def net(hidden: int = 4, *, key):
    k1, k2 = jax.random.split(key)
    return eqx.nn.Sequential([
        eqx.nn.Conv1d(1, hidden, 3, padding=1, key=k1), eqx.nn.Lambda(jax.nn.relu),
        eqx.nn.Conv1d(hidden, 1, 3, padding=1, key=k2),
    ])
"""


@pytest.fixture
def own_factory_store(tmp_path, monkeypatch):
    """A store of one's own sweep whose model a factory builds (``nu_own_factory:net``, a module in
    a folder of the user's, outside the store), trained and aggregated with its samples."""
    import sys

    from _blocks import datasets_of

    code = tmp_path / "code"
    code.mkdir()
    (code / "nu_own_factory.py").write_text(FACTORY)
    monkeypatch.syspath_prepend(str(code))
    plan = make_plan(tiny_spec(name="own", model=sweep.Model("nu_own_factory:net", hidden=4), seeds=2))
    root = tmp_path / "sweep" / "ensembles"
    aggregate_blocks(root, trained_blocks(plan), plan=plan, datasets=datasets_of(plan))
    sys.modules.pop("nu_own_factory", None)  # trained blocks are cached: maybe not imported this time
    (code / "imported-marker").unlink(missing_ok=True)
    yield root, code / "imported-marker"
    sys.modules.pop("nu_own_factory", None)


def test_a_run_of_ones_own_factory_stores_its_scores_and_a_trusted_plot_computes_missing_ones(
    own_factory_store, tmp_path
):
    """`sweep.run` of one's own model (a factory its spec names: trusted) stores its ensemble scores
    as for a built-in one; of a store aggregated without that trust, the calibration figure of the
    trusted selection computes them, and the untrusted one says why it cannot."""
    spec = tiny_spec(name="own", model=sweep.Model("nu_own_factory:net", hidden=4), seeds=2)
    ran = sweep.load(sweep.run(spec, storage=str(tmp_path / "runs"), options=sweep.RunOptions(executor="local")))
    stored = ran.stored_scores()
    assert stored.num_rows and set(stored["config_id"].to_pylist()) == set(ran.index["config_id"].to_pylist())
    root, _ = own_factory_store  # aggregated without trust, and without scores
    fig = sweep.plot(sweep.load(root, trust_code=True), "calibration")
    assert fig.axes and any(line.get_xydata().size for ax in fig.axes for line in ax.lines)
    with pytest.raises(
        sweep.QueryError,
        match=r"(scored none of these|holds no ensemble scores).*, nor can they be scored here: .*trust",
    ):
        sweep.plot(sweep.load(root), "calibration")


def test_plot_runs_a_stored_factory_only_when_trusted(own_factory_store):
    import sys

    root, marker = own_factory_store
    with pytest.warns(UserWarning, match="predictions left out: .*built by 'nu_own_factory:net'.*trust_code=True"):
        fig = sweep.plot(root, "predictions")
    assert not marker.exists() and "nu_own_factory" not in sys.modules  # the default imports nothing
    assert any("--trust-code" in t.get_text() for t in fig.axes[0].texts)

    fig = sweep.plot(root, "predictions", num_samples=2, trust_code=True)
    assert marker.exists() and "nu_own_factory" in sys.modules
    first, second, residual = fig.axes
    x, _ = sweep.load(root).samples()
    with pytest.raises(sweep.StoreError, match=r"built by 'nu_own_factory:net', code the store names.*trust_code=True"):
        sweep.load(root).mean_std(x[:2])  # predictions too run it only when trusted
    mean, _ = sweep.load(root, trust_code=True).mean_std(x[:2])
    untrusted = sweep.load(root)
    sweep.plot(untrusted, "predictions", num_samples=1, trust_code=True)  # trusted for this figure only
    with pytest.raises(sweep.StoreError, match="code the store names"):
        untrusted.mean_std(x[:2])
    drawn = next(line for line in first.lines if line.get_label() == "ensemble mean").get_ydata()
    np.testing.assert_allclose(drawn, mean[0, 0], rtol=1e-6)
    assert residual.get_ylabel() == "ensemble mean − ground truth"


def test_sweep_plot_trust_code_on_the_command_line(own_factory_store, tmp_path):
    from helpers import invoke

    root, marker = own_factory_store
    result = invoke("plot", root, "--kind", "predictions", "--out", tmp_path / "p.png")
    assert result.exit_code == 0 and not marker.exists()
    result = invoke("plot", root, "--kind", "predictions", "--out", tmp_path / "p.png", "--trust-code")
    assert result.exit_code == 0, result.stderr
    assert marker.exists() and (tmp_path / "p.png").stat().st_size > 0


def test_sweep_plot_trust_code_says_where_a_missing_factory_is_looked_for(own_factory_store, tmp_path, monkeypatch):
    import sys

    from helpers import assert_one_line_error, invoke

    root, _ = own_factory_store
    monkeypatch.setattr(sys, "path", [p for p in sys.path if not p.endswith("code")])
    assert_one_line_error(
        invoke("plot", root, "--kind", "predictions", "--out", tmp_path / "p.png", "--trust-code"),
        "cannot import module 'nu_own_factory'",
        "the factory is imported from your environment: install its package",
        "PYTHONPATH=",
    )
    np.save(tmp_path / "x.npy", sweep.load(root).samples()[0][:2])
    assert_one_line_error(  # every command that builds the model says so
        invoke("predict", root, "-i", tmp_path / "x.npy", "-o", tmp_path / "y.npy", "--trust-code"),
        "cannot import module 'nu_own_factory'",
        "the factory is imported from your environment: install its package",
    )


SCRIPT = """
import sys
sys.path.insert(0, {code!r})  # the model module is on the driver's path only, not PYTHONPATH
from helpers import tiny_spec
import sweep
spec = tiny_spec(name="script", model=sweep.Model("nu_script_model:net", hidden=4), seeds=2)
print(sweep.run(spec, storage={storage!r}, options=sweep.RunOptions(progress="off")))
"""


def test_the_local_ray_a_run_starts_gives_its_workers_the_drivers_import_path(tmp_path, monkeypatch):
    """A run without an address starts Ray's own local instance (not one started with ``ray
    start``), whose workers inherit the folders on the driver's ``sys.path`` as ``PYTHONPATH``: a
    model module a script put there imports in its trials (trained there: the slow test below)."""
    import ray

    class Started(Exception):  # where the run would start Ray: what it was started with, in what environment
        def __init__(self, **kwargs):
            self.kwargs, self.pythonpath = kwargs, os.environ.get("PYTHONPATH")

    def init(**kwargs):
        raise Started(**kwargs)

    code = tmp_path / "code"
    code.mkdir()
    monkeypatch.syspath_prepend(str(code))
    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # (the session's Ray: as in a fresh script)
    monkeypatch.setattr(ray, "init", init)
    before = os.environ.get("PYTHONPATH")
    with pytest.raises(Started) as started:
        sweep.run(tiny_spec(seeds=1, seeds_per_trial=1), storage=str(tmp_path / "runs"))
    assert started.value.kwargs["address"] == "local"
    # inherited by Ray's processes (not a runtime_env: a job's workers would start through another process)
    assert "runtime_env" not in started.value.kwargs
    assert started.value.pythonpath.split(os.pathsep)[0] == str(code)
    assert os.environ.get("PYTHONPATH") == before  # this process's environment as it was


@pytest.mark.slow
def test_a_script_that_puts_its_model_on_sys_path_trains_on_the_local_ray(tmp_path):
    """The embedded local Ray's trials import what the driver imports (not: every trial failing
    with "No module named ..."). Slow (a driver, its own Ray and a trial: about 25 s on 2 cores);
    the default run checks what that Ray is started with (the test above)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = tmp_path / "code"
    code.mkdir()
    (code / "nu_script_model.py").write_text(FACTORY)
    script = SCRIPT.format(code=str(code), storage=str(tmp_path / "runs"))
    tests = str(Path(__file__).parent)  # for helpers; the model's folder is not on PYTHONPATH
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (tests, os.environ.get("PYTHONPATH")) if p)}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert sweep.load(out.stdout.strip().splitlines()[-1]).table.num_rows == 2
