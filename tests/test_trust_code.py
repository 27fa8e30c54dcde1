"""Reading a store runs no code it names: a store whose problem is ``os:system`` with a
shell command, or whose model factory is a trap, is loaded, queried, shown, verified, plotted
and aggregated without the command ever running (its marker file never appears)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pyarrow.fs as pafs
import pytest
from _blocks import datasets_of, trained_blocks, write_sweep
from helpers import invoke, tiny_spec

import sweep
from sweep import StoreError
from sweep.planning import Plan, TrialPlan, make_plan
from sweep.store import Store, aggregate_blocks, write_samples

PLAN = make_plan(tiny_spec(grid={"model.depth": [1, 2], "optimizer.learning_rate": [1e-3, 3e-3]}))


def hostile_sweep(root: Path, marker: Path, factory: str | None = None, problem: sweep.Problem | None = None) -> Path:
    """The blocks of PLAN relabelled as if their problem were ``os:system`` running ``touch marker``
    (or ``problem``; and their model the ``factory`` import path, called with ``marker`` and the
    block's depth), with the test samples sweep.run would have stored for them."""
    problem = problem or sweep.Problem("os:system", command=f"touch {marker}")
    relabel = {}
    for t in PLAN.trials:
        model = {"name": factory, "marker": str(marker), "depth": t.spec.model.depth} if factory else {}
        spec = t.spec.__class__.from_dict(
            t.spec.to_dict() | {"problem": problem.to_dict()} | ({"model": model} if model else {})
        )
        relabel[t.trial_key] = TrialPlan(t.trial_key, spec.config_id, spec, t.seeds, t.hparams)
    plan = Plan(
        PLAN.spec.__class__.from_dict(PLAN.spec.to_dict() | {"problem": problem.to_dict()}),
        tuple(relabel.values()),
        PLAN.seeds_per_trial,
    )
    blocks = [b._replace(spec=relabel[b.trial_id].spec) for b in trained_blocks(PLAN)]
    write_sweep(root, plan, blocks, samples=False)
    datasets = {plan.trials[0].spec.problem_id: next(iter(datasets_of(PLAN).values()))}
    write_samples(pafs.LocalFileSystem(), str(root), datasets)
    if factory:  # `sweep aggregate` would build the factory's model to read the checkpoints: the sender did
        aggregate_blocks(root / "ensembles", blocks, plan=plan, datasets=datasets)
    return root


@pytest.fixture
def marker(tmp_path) -> Path:
    return tmp_path / "the-store-ran-code"


def test_reading_a_store_whose_problem_is_os_system_runs_nothing(tmp_path, marker):
    root = hostile_sweep(tmp_path / "sweep", marker)
    assert invoke("aggregate", root).exit_code == 0  # the aggregator loads no data
    ens = sweep.load(root)
    assert ens.where(depth=2).spec.problem.name == "os:system"
    ens.summary(), ens.where(depth=2).best(3).table, ens.compare({"depth": 1}, {"depth": 2}, pool=True)
    for command in ("show", "status", "verify"):
        result = invoke(command, root)
        assert result.exit_code == 0, (command, result.stderr)
    first = next(ax for ax in sweep.plot(root, num_samples=2).axes if ax.get_title().endswith("test sample 0"))
    # the predictions are drawn on the samples the store holds, not on regenerated data
    x, y = ens.where(**ens.best_configuration()).samples()
    truth = next(line for line in first.lines if line.get_label() == "ground truth")
    np.testing.assert_array_equal(truth.get_ydata(), y[0, 0])
    assert invoke("plot", root, "--out", tmp_path / "sweep.png").exit_code == 0
    assert not marker.exists()


def test_a_stored_model_factory_is_never_imported_by_reading(tmp_path, marker):
    root = hostile_sweep(tmp_path / "sweep", marker, "_trap:touch")
    assert "_trap" not in sys.modules
    for command in ("show", "status", "verify"):
        assert invoke(command, root).exit_code == 0, command
    with pytest.warns(UserWarning, match=r"predictions left out: the model of config .* is built by '_trap:touch'"):
        figure = sweep.plot(root)
    texts = [t.get_text() for t in figure.axes[-1].texts]
    assert any("figures never import it" in t for t in texts), texts
    # the row that only says why it is empty is a strip, not a row as tall as the curves'
    assert figure.axes[-1].get_position().height < 0.5 * figure.axes[0].get_position().height
    assert not marker.exists() and "_trap" not in sys.modules


def test_a_factory_that_came_with_the_store_is_refused(tmp_path, marker, monkeypatch):
    root = hostile_sweep(tmp_path / "sweep", marker, "shipped_factory:net")
    (root / "shipped_factory.py").write_text(f"open({str(marker)!r}, 'w').close()\ndef net(**kw): pass\n")
    monkeypatch.syspath_prepend(str(root))  # as `python -m sweep` run inside the sweep directory would
    ens = sweep.load(root, trust_code=True).where(depth=2)  # even where the store is trusted
    with pytest.raises(
        StoreError,
        match=r"'shipped_factory:net' would be imported from .*shipped_factory.py', inside "
        r"the store's directory",
    ):
        ens.member(seed=0, learning_rate=1e-3)
    assert not marker.exists() and "shipped_factory" not in sys.modules


def test_a_sweep_without_samples_aggregates_with_a_warning_and_plots_without_predictions(tmp_path):
    root = write_sweep(tmp_path / "sweep", PLAN, trained_blocks(PLAN), samples=False)
    with pytest.warns(UserWarning, match=r"samples.parquet' not found: the store holds no test samples"):
        sweep.aggregate(root, progress=False)
    with pytest.warns(UserWarning, match=r"predictions left out: the store holds no test samples for config"):
        figures = sweep.plot(root, "all")
    assert figures["predictions"].axes[0].texts  # the panel says why
    assert len(figures["curves"].axes) == 3  # train, val, test
    assert Store.open(root).samples(PLAN.config_ids[0]) is None


def test_samples_are_the_first_test_samples_of_each_problem(tmp_path):
    root = write_sweep(tmp_path / "sweep", PLAN, trained_blocks(PLAN))
    sweep.aggregate(root, progress=False)
    data = next(iter(datasets_of(PLAN).values()))
    x, y = sweep.load(root).where(depth=1).samples()
    np.testing.assert_array_equal(x, data.test_x[:16])
    np.testing.assert_array_equal(y, data.test_y[:16])
    assert "samples.parquet" in Store.open(root).manifest["files"]


def test_predictions_of_a_model_named_by_import_path_need_trust(tmp_path, marker):
    """A store may name any installed callable as its model, with arguments of its choosing
    (``logging:basicConfig`` truncating a file of yours, ``_trap:touch`` here): predicting,
    exporting, scoring and serving build it only for a store loaded with ``trust_code=True``."""
    root = hostile_sweep(tmp_path / "sweep", marker, "_trap:touch")
    ens = sweep.load(root).where(depth=2)
    x, _ = ens.samples()
    untrusted = r"its model is built by '_trap:touch', code the store names, .* load it with trust_code=True"
    for query in (
        lambda: ens.mean_std(x),
        lambda: ens.member(seed=0, learning_rate=1e-3),
        lambda: ens.best(2).export(tmp_path / "exp"),
        lambda: ens.scores(),
    ):
        with pytest.raises(StoreError, match=untrusted):
            query()
    np.save(tmp_path / "x.npy", x)
    for command in (
        ["predict", root, "-i", tmp_path / "x.npy", "-o", tmp_path / "y.npy", "--where", "depth=2", "--pool"],
        ["export", root, "--where", "depth=2", "--pool", "-o", tmp_path / "exp"],
        ["scores", root, "--fields"],
    ):
        result = invoke(*command)
        assert result.exit_code == 1 and "code the store names" in result.stderr, (command, result.output)
        assert "give --trust-code" in result.stderr and "trust_code=True" not in result.stderr
    with pytest.raises(StoreError, match=untrusted):  # before Ray starts
        sweep.serve(root, sweep.ServeOptions(where={"depth": 2, "learning_rate": 1e-3}))
    assert not marker.exists() and "_trap" not in sys.modules and not (tmp_path / "exp").exists()
    with pytest.raises(StoreError, match="trap sprung"):  # trusted: the factory runs (here, the trap)
        sweep.load(root, trust_code=True).where(depth=2).mean_std(x)
    assert marker.exists()
    sys.modules.pop("_trap", None)


def test_aggregating_a_sweep_whose_models_a_factory_builds_needs_trust(tmp_path, marker):
    """Reading a checkpoint rebuilds its model, which runs the factory the sweep names: `sweep
    aggregate` of a directory someone sent refuses it without --trust-code, before any work."""
    root = hostile_sweep(tmp_path / "sweep", marker, "_trap:touch")
    (root / "ensembles").unlink()  # (hostile_sweep aggregated it, as its sender did)
    shutil.rmtree(root / ".ensembles")
    refused = invoke("aggregate", root)
    assert refused.exit_code == 1 and "its models are built by '_trap:touch', code the sweep directory names" in (
        refused.stderr
    )
    assert "aggregate only a sweep directory you trust" in refused.stderr and "--trust-code" in refused.stderr
    with pytest.raises(StoreError, match=r"sweep.aggregate\(path, trust_code=True\)"):
        sweep.aggregate(root, progress=False)
    assert not marker.exists() and "_trap" not in sys.modules and not (root / "ensembles").exists()
    trusted = invoke("aggregate", root, "--trust-code")  # trusted: the factory runs (here, the trap)
    assert trusted.exit_code == 1 and "trap sprung" in trusted.stderr and marker.exists()
    sys.modules.pop("_trap", None)


def test_a_trusted_factory_that_does_not_import_is_named_before_any_work(tmp_path, marker):
    """`sweep aggregate --trust-code` of a colleague's sweep directory, without their module on the
    import path: one line naming it and where it is looked for, before anything is written."""
    root = hostile_sweep(tmp_path / "sweep", marker, "_trap:touch")
    (root / "ensembles").unlink()
    shutil.rmtree(root / ".ensembles")
    for meta in root.glob("run/*/checkpoint_*/block.json"):
        meta.write_text(meta.read_text().replace("_trap:touch", "nu_colleagues_models:net"))
    result = invoke("aggregate", root, "--trust-code")
    assert result.exit_code == 1 and not (root / "ensembles").exists()
    assert "cannot import module 'nu_colleagues_models'" in result.stderr
    assert "the factory is imported from your environment: install its package, or run with PYTHONPATH" in (
        result.stderr
    )


def test_a_run_trusts_only_the_factories_its_own_spec_names(tmp_path, marker):
    """`sweep.run` of a spec of built-in models into a directory that holds checkpoints of a
    factory it does not name (a received sweep directory) does not run that factory."""
    local = sweep.RunOptions(executor="local")
    root = hostile_sweep(tmp_path / "runs" / "tiny", marker, "_trap:touch", problem=tiny_spec().problem)
    with pytest.raises(StoreError, match=r"its models are built by '_trap:touch', code the sweep directory names"):
        sweep.run(tiny_spec(seeds=1), storage=str(tmp_path / "runs"), options=local)
    assert not marker.exists() and "_trap" not in sys.modules and root.exists()
    hostile_sweep(tmp_path / "other" / "tiny", marker, "_trap:touch")  # its problem runs code too: other data
    with pytest.raises(
        sweep.SpecError, match=r"`problem`: sweep 'tiny' holds members trained on a problem written otherwise"
    ):
        sweep.run(tiny_spec(seeds=1), storage=str(tmp_path / "other"), options=local)
    assert not marker.exists() and "_trap" not in sys.modules
