"""The `sweep` command line on small stores built in-process (no Ray): every command's output,
and every error path printing one `error:` line, exiting 1, without a traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _blocks import train_trial, write_sweep
from conftest import tiny_spec
from typer.testing import CliRunner

import sweep
from sweep.cli import app, parse_where
from sweep.planning import make_plan

COMMANDS = ["run", "plan", "status", "aggregate", "show", "plot", "predict"]


def grid_spec() -> sweep.SweepSpec:
    """2 depths (structural) x 2 learning rates (vmapped) x 4 seeds in blocks of 2: 4 trials."""
    return tiny_spec(name="cli", seeds=4, seeds_per_trial=2,
                     grid={"model.depth": [1, 2], "optimizer.learning_rate": [3e-3, 1e-3]})


def invoke(*args: str):
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result


def assert_one_line_error(result, *fragments: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 1, (result.exit_code, result.output, result.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A complete, aggregated sweep directory of :func:`grid_spec` (16 members, 4 configurations)."""
    plan = make_plan(grid_spec())
    root = write_sweep(tmp_path_factory.mktemp("cli") / "cli", plan, [train_trial(t) for t in plan.trials])
    sweep.aggregate(root, progress=False)
    return root


@pytest.fixture
def x() -> np.ndarray:
    return np.random.default_rng(0).normal(size=(3, 1, 16)).astype(np.float32)


# -- help and plan ------------------------------------------------------------------------------
@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command):
    result = invoke(command, "--help")
    assert result.exit_code == 0, result.output
    assert f"Usage: sweep {command}" in result.output or f"Usage: root {command}" in result.output


def test_help_lists_the_options_of_the_contract():
    options = {"run": ["--storage", "--address", "--resume"], "plot": ["--out"],
               "predict": ["--input", "--output", "--where", "--best", "--std"]}
    for command, names in options.items():
        text = invoke(command, "--help").output
        assert all(n in text for n in names), (command, text)
    assert all(c in invoke("--help").output for c in COMMANDS)


def test_plan_prints_every_trial_before_anything_runs(tmp_path):
    spec = grid_spec()
    spec.to_toml(tmp_path / "spec.toml")
    result = invoke("plan", tmp_path / "spec.toml")
    assert result.exit_code == 0, result.stderr
    plan = make_plan(spec)
    assert "4 trials, 16 members, 2 structural configs" in result.output
    assert all(t.trial_key in result.output for t in plan.trials)
    assert not (tmp_path / "runs").exists()


def test_parse_where_types_values():
    assert parse_where(["depth=6", "learning_rate=3e-4", "status=ok", "name= a b "]) == {
        "depth": 6, "learning_rate": 3e-4, "status": "ok", "name": "a b"}
    assert isinstance(parse_where(["depth=6"])["depth"], int)
    assert parse_where(["depth=4", "depth=6", "depth=8"]) == {"depth": [4, 6, 8]}


# -- status / aggregate -------------------------------------------------------------------------
def test_status_counts_done_running_failed_pending(tmp_path):
    plan = make_plan(grid_spec())
    t_done, t_running, t_failed, t_pending = plan.trials
    root = write_sweep(tmp_path / "cli", plan, [train_trial(t_done), train_trial(t_running, num_chunks=1),
                                                train_trial(t_failed, num_chunks=1)])
    (root / "run" / f"trial_{t_failed.trial_key}").rename(root / "run" / t_failed.trial_key)
    (root / "run" / t_failed.trial_key / "error.txt").write_text("Traceback ...\nRuntimeError: boom\n")

    result = invoke("status", root)
    assert result.exit_code == 0, result.stderr
    out = result.output
    assert "4 planned: 1 done, 1 running, 1 failed, 1 pending" in out, out
    assert "members: 16 planned, 4 trained" in out
    assert "not aggregated yet" in out
    lines = {line.split()[0]: line.split()[1] for line in out.splitlines() if line.startswith(plan.config_ids)}
    assert lines == {t_running.trial_key: "running", t_failed.trial_key: "failed", t_pending.trial_key: "pending"}
    assert "RuntimeError: boom" in next(x for x in out.splitlines() if x.startswith(t_failed.trial_key))

    with pytest.warns(UserWarning):
        sweep.aggregate(root, progress=False)
    manifest = json.loads((root / "ensembles" / "manifest.json").read_text())
    out = invoke("status", root).output
    assert f"{manifest['num_members']} members stored" in out
    assert f"{manifest['num_missing']} planned members missing" in out
    assert manifest["num_missing"] > 0


def test_aggregate_command_builds_the_store(store, tmp_path):
    root = tmp_path / "cli"
    shutil.copytree(store, root, ignore=shutil.ignore_patterns("ensembles", ".ensembles"))
    result = invoke("aggregate", root)
    assert result.exit_code == 0, result.stderr
    assert "16 members stored (2 structural configs), 0 planned members missing" in result.output
    assert sweep.load(root).table.num_rows == 16


# -- show ---------------------------------------------------------------------------------------
def _rows(output: str, header_word: str) -> tuple[list[str], list[list[str]]]:
    lines = output.strip().splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == [header_word])
    header = lines[start].split()
    return header, [line.split() for line in lines[start + 1:] if not line.startswith("...")]


def test_show_prints_the_summary_best_validation_mean_first_with_test_beside(store):
    result = invoke("show", store)
    assert result.exit_code == 0, result.stderr
    assert result.output.startswith("val_loss over seeds per configuration (16 members), best mean first; 95% bootstrap "
                                    "intervals; test_loss reported beside, not used to rank:")
    header, rows = _rows(result.output, "config_id")
    assert {"depth", "learning_rate", "mean", "std", "mean_ci_low", "mean_ci_high", "test_loss_mean",
            "test_loss_ci_low", "test_loss_ci_high"} <= set(header)
    assert "median" in _rows(invoke("show", store, "--wide").output, "config_id")[0]
    assert len(rows) == 4
    means = [float(r[header.index("mean")]) for r in rows]
    assert means == sorted(means)
    summary = sweep.load(store).summary().to_pylist()
    best = min(summary, key=lambda r: r["mean"])
    assert int(rows[0][header.index("depth")]) == best["depth"]
    assert float(rows[0][header.index("learning_rate")]) == pytest.approx(best["learning_rate"], rel=1e-3)


def test_show_where_with_a_repeated_key_keeps_either_value(store):
    result = invoke("show", store, "--where", "learning_rate=0.001", "--where", "learning_rate=0.003",
                    "--where", "depth=2")
    header, rows = _rows(result.output, "config_id")
    assert len(rows) == 2 and {r[header.index("depth")] for r in rows} == {"2"}


def test_show_members_filtered_by_where(store):
    result = invoke("show", store, "--members", "--where", "depth=2", "--where", "learning_rate=0.001")
    assert result.exit_code == 0, result.stderr
    header, rows = _rows(result.output, "member_id")
    assert len(rows) == 4 and "test_loss_history" not in header
    assert {r[header.index("depth")] for r in rows} == {"2"}
    assert {"val_loss", "test_loss"} <= set(header)
    losses = [float(r[header.index("val_loss")]) for r in rows]
    assert losses == sorted(losses)
    tests = [float(r[header.index("test_loss")]) for r in _rows(invoke("show", store, "--members", "--metric", "test_loss",
                                                                        "--where", "depth=2").output, "member_id")[1]]
    assert tests == sorted(tests)
    out = invoke("show", store, "--members", "--limit", "3").output
    assert len(_rows(out, "member_id")[1]) == 3 and "... 13 more members" in out


# -- predict ------------------------------------------------------------------------------------
def test_predict_writes_the_selected_members_predictions(store, tmp_path, x):
    np.save(tmp_path / "x.npy", x)
    result = invoke("predict", store, "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy",
                    "--where", "depth=2", "--where", "learning_rate=0.003", "--best", "3")
    assert result.exit_code == 0, result.stderr
    expected = sweep.load(store).where(depth=2, learning_rate=0.003).best(3).predict(x)
    y = np.load(tmp_path / "y.npy")
    assert y.shape == (3, 3, 1, 16)
    np.testing.assert_array_equal(y, expected)


def test_predict_std_writes_mean_and_std(store, tmp_path, x):
    np.save(tmp_path / "x.npy", x)
    result = invoke("predict", store, "-i", tmp_path / "x.npy", "-o", tmp_path / "out" / "m.npy",
                    "--where", "depth=1", "--std")
    assert result.exit_code == 0, result.stderr
    mean, std = sweep.load(store).where(depth=1).mean_std(x)
    np.testing.assert_allclose(np.load(tmp_path / "out" / "m.npy"), mean, rtol=1e-6)
    np.testing.assert_allclose(np.load(tmp_path / "out" / "m_std.npy"), std, rtol=1e-6)
    assert float(std.mean()) > 0


# -- plot ---------------------------------------------------------------------------------------
def _png(path: Path) -> np.ndarray:
    import matplotlib.image

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return matplotlib.image.imread(path)


def test_plot_writes_one_png_with_every_panel(store, tmp_path):
    out = tmp_path / "figs" / "sweep.png"
    result = invoke("plot", store, "--out", out)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == f"wrote {out}"
    image = _png(out)
    assert image.shape[0] > 500 and image.shape[1] > 1000


def test_plot_prefix_writes_one_png_per_panel(store, tmp_path):
    result = invoke("plot", store, "--out", tmp_path / "p_", "--samples", "2")
    assert result.exit_code == 0, result.stderr
    for name in ("p_curves.png", "p_spread.png", "p_predictions.png"):
        _png(tmp_path / name)


def test_plot_figure_has_the_documented_panels(store):
    (name, fig), = sweep.plot(store, num_samples=2).items()
    assert name == "sweep"
    train, val, test, spread, *predictions = fig.axes
    for ax, which in ((train, "train"), (val, "val")):  # every member plus one median per configuration
        assert ax.get_xlabel() == "epoch" and ax.get_ylabel() == f"{which} loss (mse)" and ax.get_yscale() == "log"
        assert len(ax.lines) == 16 + 4 and len(ax.get_legend().get_texts()) == 4
    summary = sweep.load(store).summary().to_pylist()
    best = summary[0]  # chosen on validation
    chosen = f"depth={best['depth']}, learning_rate={best['learning_rate']:g}"
    assert test.get_ylabel() == "test loss (mse)" and len(test.lines) == 4 + 1  # the chosen configuration only
    assert [t.get_text() for t in test.get_legend().get_texts()] == [f"{chosen} (n=4)"]
    assert spread.get_ylabel() == "final val_loss" and len(spread.get_xticklabels()) == 4
    assert f"{chosen} (chosen)" in [t.get_text() for t in spread.get_xticklabels()]
    points = [len(c.get_offsets()) for c in spread.collections]
    assert sum(points) == 16 + 4  # every member's val_loss as a point, and the chosen members' test_loss
    assert len(predictions) == 2
    for ax in predictions:
        assert [t.get_text() for t in ax.get_legend().get_texts()] == [
            "input", "ground truth", "ensemble mean", "±1 std over members"]
    assert f"chosen on val_loss: {chosen}" in predictions[0].get_title()


def test_plot_draws_a_sample_of_curves_but_spreads_every_member(store):
    figures = sweep.plot(sweep.load(store), max_curves=2)
    train = figures["sweep"].axes[0]
    assert len(train.lines) == 8 + 4  # 2 of 4 members per configuration, plus the medians
    assert all("(2 of 4 shown)" in t.get_text() for t in train.get_legend().get_texts())
    spread = figures["sweep"].axes[3]
    assert sum(len(c.get_offsets()) for c in spread.collections) == 16 + 4


# -- errors -------------------------------------------------------------------------------------
@pytest.fixture
def files(tmp_path, x):
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "wrong.npy", x[:, :, :8])
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    (tmp_path / "text.npy").write_text("not an array")
    np.savez(tmp_path / "arrays.npz", x=x)
    (tmp_path / "bad.toml").write_text("name = [unclosed")
    (tmp_path / "unknown_arch.toml").write_text(
        grid_spec().to_toml().replace('name = "ConvNet"', 'name = "NoSuchNet"'))
    (tmp_path / "empty").mkdir()
    return tmp_path


ERRORS = [
    (["plan", "{d}/missing.toml"], ["missing.toml", "does not exist"]),
    (["plan", "{d}/bad.toml"], ["not valid TOML"]),
    (["plan", "{d}/unknown_arch.toml"], ["model.name", "NoSuchNet"]),
    (["plan", "{d}/empty"], ["is a directory"]),
    (["run", "{d}/unknown_arch.toml", "--storage", "{d}/runs"], ["NoSuchNet"]),
    (["status", "{d}/empty"], ["plan.json", "not a sweep directory"]),
    (["show", "{d}/empty"], ["not a seed-sweep store"]),
    (["aggregate", "{d}/empty"], ["no block checkpoints"]),
    (["show", "{s}", "--where", "width=3"], ["unknown column 'width'"]),
    (["show", "{s}", "--metric", "nope"], ["metric='nope'"]),
    (["show", "{s}", "--mode", "best"], ["mode='best'", "\"min\"", "\"max\""]),
    (["predict", "{s}", "-i", "{d}/x.npy", "-o", "{d}/y.npy", "--where", "depth"], ["--where", "key=value"]),
    (["predict", "{s}", "-i", "{d}/x.npy", "-o", "{d}/y.npy", "--where", "depth=7"], ["no member matches"]),
    (["predict", "{s}", "-i", "{d}/x.npy", "-o", "{d}/y.npy", "--best", "0"], ["best(k=0)"]),
    (["predict", "{s}", "-i", "{d}/x.npy", "-o", "{d}/y.npy"], ["spans 2 structural configs"]),
    (["predict", "{s}", "-i", "{d}/wrong.npy", "-o", "{d}/y.npy", "--where", "depth=1"], ["shape (3, 1, 8)"]),
    (["predict", "{s}", "-i", "{d}/nothing.npy", "-o", "{d}/y.npy"], ["--input", "does not exist"]),
    (["predict", "{s}", "-i", "{d}/text.npy", "-o", "{d}/y.npy"], ["--input", "not a readable .npy"]),
    (["predict", "{s}", "-i", "{d}/objects.npy", "-o", "{d}/y.npy"], ["--input", "not a readable .npy"]),
    (["predict", "{s}", "-i", "{d}/arrays.npz", "-o", "{d}/y.npy"], ["--input", ".npz archive"]),
    (["predict", "{s}", "-i", "{d}/x.npy", "-o", "{d}/y.txt", "--where", "depth=1"], ["--output", ".npy"]),
]


@pytest.mark.filterwarnings("ignore:.*plan.json.* not found")
@pytest.mark.parametrize("args, fragments", ERRORS, ids=[" ".join(a[:1] + a[2:3] + a[-2:]) for a, _ in ERRORS])
def test_errors_print_one_line_and_exit_1(store, files, args, fragments):
    result = invoke(*[a.format(d=files, s=store) for a in args])
    assert_one_line_error(result, *fragments)
    assert not (files / "y.npy").exists() and not (files / "runs").exists()


def test_debug_shows_the_exception(files):
    result = invoke("--debug", "status", files / "empty")
    assert result.exit_code == 1
    assert isinstance(result.exception, sweep.StoreError)
    assert_one_line_error(invoke("status", files / "empty"), "plan.json")  # only for that call


def test_console_script_error_has_no_traceback(tmp_path):
    exe = shutil.which("sweep")
    assert exe, "the console script `sweep` is not installed (pip install -e .)"
    env = {**os.environ, "SWEEP_DEBUG": ""}
    out = subprocess.run([exe, "show", str(tmp_path / "nowhere")], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 1
    assert out.stderr.startswith("error: ") and len(out.stderr.strip().splitlines()) == 1, out.stderr
    out = subprocess.run([sys.executable, "-m", "sweep", "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "predict" in out.stdout
