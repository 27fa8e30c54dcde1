"""Trackers see members: TensorBoard event files and an MLflow file store hold one run per member,
named by grid values and seed, with the grid values and seed as parameters and the curves the
store holds; ``per="config"`` logs statistics over a configuration's members."""

from __future__ import annotations

import math
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import tiny_spec

import sweep
from sweep.planning import make_plan
from sweep.tune import MemberLogger, MLflowLogger, TensorBoardLogger, WandbLogger


def logged_spec() -> sweep.SweepSpec:
    """2 depths (structural) x 2 learning rates (vmapped) x 2 seeds: 2 trials, 8 members."""
    return tiny_spec(
        name="logged", seeds=2, seeds_per_trial=2, grid={"model.depth": [1, 2], "optimizer.learning_rate": [3e-3, 1e-3]}
    )


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    """The trackers fed in-process (the events Tune sends them: test_tune.py checks them on Tune)."""
    root = tmp_path_factory.mktemp("logged")
    uri = f"file://{root / 'mlruns'}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps the file store behind this switch
        path = sweep.run(
            logged_spec(),
            storage=str(root / "runs"),
            options=sweep.RunOptions(
                executor="local", progress="off", loggers=("tensorboard", MLflowLogger(tracking_uri=uri))
            ),
        )
    return Path(path), uri, sweep.load(path).table.to_pylist()


def _name(row: dict, seed: bool = True) -> str:
    return f"depth={row['depth']} learning_rate={row['learning_rate']:g}" + (f" seed={row['seed']}" if seed else "")


def test_tensorboard_event_files_hold_one_run_per_member(logged):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    path, _, members = logged
    runs = sorted(p.parent for p in (path / "tensorboard").rglob("events.out.tfevents.*"))
    assert len(set(runs)) == 8
    for row in members:
        run = (
            path
            / "tensorboard"
            / f"depth={row['depth']},learning_rate={row['learning_rate']:g}"
            / f"seed={row['seed']}"
        )
        events = EventAccumulator(str(run))
        events.Reload()
        assert set(events.Tags()["scalars"]) == {"train_loss", "val_loss", "test_loss"}
        for tag in ("train_loss", "val_loss", "test_loss"):
            scalars = events.Scalars(tag)
            assert [s.step for s in scalars] == row["history_epochs"]
            np.testing.assert_allclose([s.value for s in scalars], row[f"{tag}_history"], rtol=1e-6)
        params = {}
        for content in events.PluginTagToContent("hparams").values():
            data = plugin_data_pb2.HParamsPluginData.FromString(content)
            if data.HasField("session_start_info"):
                params = {
                    k: v.number_value if v.HasField("number_value") else v.string_value
                    for k, v in data.session_start_info.hparams.items()
                }
        assert params["depth"] == row["depth"] and params["seed"] == row["seed"]
        assert params["learning_rate"] == pytest.approx(row["learning_rate"])


def test_mlflow_file_store_holds_one_run_per_member(logged, monkeypatch):
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    path, uri, members = logged
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("logged")
    runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
    assert sorted(runs) == sorted(_name(row) for row in members)
    for row in members:
        run = runs[_name(row)]
        assert run.info.status == "FINISHED"
        assert run.data.params["depth"] == str(row["depth"]) and run.data.params["seed"] == str(row["seed"])
        assert float(run.data.params["learning_rate"]) == pytest.approx(row["learning_rate"])
        assert run.data.params["config_id"] == row["config_id"]
        for key in ("train_loss", "val_loss", "test_loss"):
            history = sorted(client.get_metric_history(run.info.run_id, key), key=lambda m: m.step)
            assert [m.step for m in history] == row["history_epochs"]
            np.testing.assert_allclose([m.value for m in history], row[f"{key}_history"], rtol=1e-6)


class Recorder(MemberLogger):
    package, extra = "numpy", "test"

    def __init__(self, per: str):
        super().__init__(per)
        self.opened, self.writes, self.finished = {}, [], []

    def _open(self, key, name, params, group):
        self.opened[name] = params
        return name

    def _write(self, handle, metrics, step):
        self.writes.append((handle, step, metrics))

    def _finish(self, handle):
        self.finished.append(handle)


def _feed(logger: MemberLogger, spec: sweep.SweepSpec):
    plan = make_plan(spec)
    logger.add(plan.trials)
    for epoch in (2, 4):
        for i, t in enumerate(plan.trials):
            losses = [float(10 * i + j + epoch) for j in range(t.num_members)]
            logger.on_trial_result(
                trial=SimpleNamespace(config={"trial_key": t.trial_key}),
                result={
                    "epoch": epoch,
                    "member_test_loss": losses,
                    "member_seeds": list(t.seeds),
                    "member_train_loss": [math.nan] * t.num_members,
                    "test_loss_mean": 0.0,
                },
            )
    logger.close()
    return plan


def test_per_config_runs_log_statistics_over_the_configuration_members():
    spec = tiny_spec(seeds=4, seeds_per_trial=2, grid={"optimizer.learning_rate": [3e-3, 1e-3]})
    logger = Recorder("config")
    logger.bind(spec, "")
    _feed(logger, spec)  # 2 trials x (2 learning rates x 2 seeds)
    assert sorted(logger.opened) == ["learning_rate=0.001", "learning_rate=0.003"]
    assert (
        logger.opened["learning_rate=0.003"]["learning_rate"] == 0.003
        and "seed" not in logger.opened["learning_rate=0.003"]
    )
    writes = {(h, step): m for h, step, m in logger.writes}
    assert len(writes) == 4  # one write per configuration and epoch, once all 4 members reported
    # lr=0.003 holds the first two members of each trial: losses epoch + {0, 1} and epoch + {10, 11}
    m = writes[("learning_rate=0.003", 2)]
    assert m["members"] == 4 and m["test_loss_mean"] == pytest.approx(np.mean([2, 3, 12, 13]))
    assert m["test_loss_min"] == 2 and m["test_loss_max"] == 13 and "train_loss_mean" not in m  # NaN left out
    assert sorted(logger.finished) == sorted(logger.opened)


def test_per_member_runs_are_named_by_grid_values_and_seed():
    spec = tiny_spec(seeds=2, seeds_per_trial=2, grid={"optimizer.learning_rate": [3e-3, 1e-3]})
    logger = Recorder("member")
    logger.bind(spec, "")
    _feed(logger, spec)
    assert sorted(logger.opened) == [f"learning_rate={lr} seed={s}" for lr in ("0.001", "0.003") for s in (0, 1)]
    assert logger.opened["learning_rate=0.001 seed=1"] == {
        "sweep": "tiny",
        "config_id": spec.expand()[0][0].config_id,
        "learning_rate": 0.001,
        "seed": 1,
    }
    steps = sorted(step for h, step, _ in logger.writes if h == "learning_rate=0.001 seed=1")
    assert steps == [2, 4]


def test_logger_errors_name_what_to_do(tmp_path):
    spec = tiny_spec()

    def run(loggers):
        sweep.run(spec, storage=str(tmp_path), options=sweep.RunOptions(executor="local", loggers=loggers))

    with pytest.raises(sweep.SpecError, match=r"unknown logger 'neptune'; choose from tensorboard, mlflow, wandb"):
        run(["neptune"])
    with pytest.raises(sweep.SpecError, match=r"per.*'seed'"):
        TensorBoardLogger(per="seed")
    with pytest.raises(sweep.SpecError, match=r"`mode`: got 'offlne'; choose one of .* \(did you mean 'offline'\?\)"):
        WandbLogger(mode="offlne")  # type: ignore[arg-type]  (a typo wandb would take only when the run starts)

    class Missing(Recorder):
        package, extra = "no_such_tracker_package", "nosuch"

    with pytest.raises(sweep.SpecError, match=r'pip install "seed-sweep\[nosuch\]"'):
        run([Missing("member")])
    assert not any(tmp_path.iterdir())  # refused before anything starts


def test_wandb_offline_runs_one_per_member(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_SILENT", "true")
    spec = tiny_spec(seeds=2, seeds_per_trial=2)
    logger = WandbLogger(mode="offline", dir=str(tmp_path))
    logger.bind(spec, "")
    plan = _feed(logger, spec)
    runs = sorted((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == plan.num_members == 2
    names = sorted(p.name for r in runs for p in r.glob("run-*.wandb"))
    assert len(names) == 2


def test_an_unreachable_mlflow_server_is_reported_after_one_retry_not_minutes(monkeypatch):
    """The check before Ray starts asks MLflow for one retry and a 10 s timeout (its defaults, 7
    retries with backoff and 120 s, took four minutes to report a closed port); the environment is
    left as it was, and a value the user set is kept."""
    from mlflow.tracking import MlflowClient

    seen = []

    def get_experiment_by_name(self, name):
        seen.append({k: os.environ.get(k) for k in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT")})
        raise ConnectionError("refused")

    monkeypatch.setattr(MlflowClient, "get_experiment_by_name", get_experiment_by_name)
    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")  # the user's
    with pytest.raises(sweep.SpecError, match=r"`loggers`: mlflow at http://127.0.0.1:9: refused"):
        MLflowLogger(tracking_uri="http://127.0.0.1:9").bind(tiny_spec(), "runs/tiny")
    assert seen == [{"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}]
    assert "MLFLOW_HTTP_REQUEST_MAX_RETRIES" not in os.environ and os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "30"


def test_a_tracker_that_fails_is_taken_off_the_run_without_its_hint(tmp_path, capsys):
    """A TensorBoard folder that cannot be made (a file in its place): the run goes on, warns
    once, and does not end by pointing at logs that were never written."""
    (tmp_path / "a_file").write_text("")
    logger = TensorBoardLogger(logdir=str(tmp_path / "a_file"))
    options = sweep.RunOptions(executor="local", loggers=[logger])
    with pytest.warns(RuntimeWarning, match=r"TensorBoardLogger failed \(NotADirectoryError: .*off for the rest"):
        sweep.run(tiny_spec(seeds=1), storage=str(tmp_path / "runs"), options=options)
    assert logger.off and "tensorboard --logdir" not in capsys.readouterr().out
    assert not logger.bind(tiny_spec(seeds=1), str(tmp_path)).off  # on again for the next run it is given to
