"""The run loop in-process (``RunOptions(executor="local")``): the same store as Ray Tune's, resume
after a failed trial, more seeds, bad options; ``sweep.RunOptions`` and the old keywords."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import signal
from pathlib import Path

import equinox as eqx
import pytest
from _faults import FailOnce, OnlyFor
from helpers import invoke, store_files, tiny_spec, tree_allclose

import sweep
from sweep.store import SweepDir
from sweep.training import load_block
from sweep.tune import TrialHooks

LOCAL = sweep.RunOptions(executor="local")


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    return Path(sweep.run(tiny_spec(), storage=str(tmp_path_factory.mktemp("local")), options=LOCAL))


def test_the_local_and_the_tune_executor_write_the_same_store(local_run, tune_tiny):
    assert store_files(tune_tiny) == store_files(local_run)  # conftest's tune_tiny: tiny_spec() on Tune
    assert sorted(p.name for p in local_run.iterdir() if p.name.startswith("tune-")) == []  # no Tune experiment
    assert len(list(local_run.glob("local/*/checkpoint_*/block.json"))) == 2  # the newest checkpoint per trial


def test_a_failed_trial_is_named_and_resume_continues_to_the_same_store(local_run, tmp_path):
    hooks = TrialHooks(after_report=FailOnce(str(tmp_path / "failed")))
    with pytest.raises(sweep.SweepError, match=r"1 trial\(s\) .* failed \(first: .*RuntimeError: injected failure"):
        sweep.run(tiny_spec(), storage=str(tmp_path), options=dataclasses.replace(LOCAL, trial_hooks=hooks))
    # a resume with a spec that no longer has the failed trial's configuration (a spec file without
    # the --set it ran with) is refused before any work, naming the fields and how to set them back
    other = tiny_spec(seeds=8, training=sweep.Training(epochs=6, batch_size=16, report_every=2))
    with pytest.raises(
        sweep.SpecError,
        match=r"^`resume`: 1 unfinished trial\(s\) of sweep 'tiny' train configurations this spec does not have: it "
        r"differs from the spec the sweep was last run with in training\.epochs \(6 here, 4 there\); resume with "
        r"that spec as it ran \(on the command line: --set seeds=4 --set training\.epochs=4\), or run without resume",
    ):
        sweep.run(other, storage=str(tmp_path), options=dataclasses.replace(LOCAL, resume=True))
    # a vmapped value is no part of the config id, but is of the members: refused as well
    vmapped = tiny_spec(grid={"optimizer.learning_rate": [1e-2, 3e-2]})
    with pytest.raises(
        sweep.SpecError,
        match=r"in grid\.optimizer\.learning_rate \(\[0\.01, 0\.03\] here, unset there\); resume with that spec "
        r"as it ran \(on the command line: remove grid\.optimizer\.learning_rate\), or run without resume",
    ):
        sweep.run(vmapped, storage=str(tmp_path), options=dataclasses.replace(LOCAL, resume=True))
    path = sweep.run(tiny_spec(), storage=str(tmp_path), options=dataclasses.replace(LOCAL, resume=True))
    assert store_files(path) == store_files(local_run)


def test_a_checkpoint_torn_short_is_passed_over_for_the_trials_older_one(local_run, tmp_path):
    """Tune copies a checkpoint's files in no set order: a trial killed while its newest checkpoint
    was copied leaves a block.json beside a short state.eqx. The older checkpoint stands: its
    members are not done, a resume trains them on from it, and the store is the uninterrupted one."""
    import shutil

    hooks = TrialHooks(after_report=FailOnce(str(tmp_path / "failed")))
    with pytest.raises(sweep.SweepError, match="injected failure"):
        sweep.run(tiny_spec(), storage=str(tmp_path), options=dataclasses.replace(LOCAL, trial_hooks=hooks))
    (older,) = (tmp_path / "tiny" / "local").glob("*/checkpoint_000002")  # the failed trial's, at epoch 2
    shutil.copytree(older, tmp_path / "older")
    sweep.run(tiny_spec(), storage=str(tmp_path), options=dataclasses.replace(LOCAL, resume=True))
    (newest,) = older.parent.glob("checkpoint_000004")
    shutil.copytree(tmp_path / "older", older)  # both kept, as Tune keeps its last two
    state = newest / "state.eqx"
    os.truncate(state, state.stat().st_size // 2)
    sweep_dir = SweepDir.at(tmp_path / "tiny")
    assert sweep_dir.blocks()[older.parent.name].path == str(older)
    assert len(sweep_dir.done(tiny_spec())[0]) == 2  # the other trial's two members
    path = sweep.run(tiny_spec(), storage=str(tmp_path), options=dataclasses.replace(LOCAL, resume=True))
    assert store_files(path) == store_files(local_run)


def test_a_run_whose_members_diverged_says_so(tmp_path):
    spec = tiny_spec(seeds=2, grid={"optimizer.learning_rate": [1e30, 3e-3]})
    with pytest.warns(UserWarning, match=r"^2 of 4 members diverged \(a NaN or infinite loss: .*a lower learning rate"):
        sweep.run(spec, storage=str(tmp_path), options=LOCAL)


def test_aggregating_an_unfinished_sweep_says_which_members_stand_short(tmp_path):
    hooks = TrialHooks(after_report=FailOnce(str(tmp_path / "failed")))
    with pytest.raises(sweep.SweepError, match="injected failure"):
        sweep.run(tiny_spec(), storage=str(tmp_path), options=dataclasses.replace(LOCAL, trial_hooks=hooks))
    result = invoke("aggregate", tmp_path / "tiny")
    assert result.exit_code == 0 and "ensembles: 4 members stored (1 structural config)" in result.output
    assert "note: 2 members of 1 unfinished trial stored as their last checkpoint left them (status stopped_early)" in (
        result.output
    )


def test_a_resume_builds_nothing_a_forged_checkpoint_names(tmp_path):
    """A partial checkpoint whose block.json names another model (a factory, code of its choosing)
    is refused by its spec's own id before that spec builds anything: no factory runs."""
    import json
    import sys

    hooks = TrialHooks(after_report=FailOnce(str(tmp_path / "failed")))
    with pytest.raises(sweep.SweepError, match="injected failure"):
        sweep.run(tiny_spec(), storage=str(tmp_path), options=dataclasses.replace(LOCAL, trial_hooks=hooks))
    metas = sorted((tmp_path / "tiny" / "local").glob("*/checkpoint_*/block.json"))
    meta = min(metas, key=lambda m: json.loads(m.read_text())["history"]["epoch"][-1])  # the failed trial's
    forged = json.loads(meta.read_text())
    marker = tmp_path / "the-checkpoint-ran-code"
    forged["spec"]["model"] = {"name": "_trap:touch", "marker": str(marker)}
    meta.write_text(json.dumps(forged))
    with pytest.raises(
        sweep.SweepError,
        match=r"not a checkpoint of trial '[\w-]+': its config \w+ \(the trial's: \w+\); it cannot be resumed",
    ):
        sweep.run(tiny_spec(), storage=str(tmp_path), options=dataclasses.replace(LOCAL, resume=True))
    assert not marker.exists() and "_trap" not in sys.modules


def test_a_race_goes_on_ranking_its_metric_at_its_levels_as_it_ran(tmp_path):
    """A race's eliminations so far ranked its metric one way: a run that goes on with it (resumed
    or adding to it) ranking it the other way, or ranking another metric, is refused before any
    work, saying how to go on as it ran."""
    race = sweep.Adaptive(start=2, step=2, max=4)
    training = dataclasses.replace(tiny_spec().training, metrics=("nrmse",))
    spec = tiny_spec(seeds=race, grid={"optimizer.learning_rate": [1e-3, 3e-2]}, training=training)
    sweep.run(spec, storage=str(tmp_path), options=LOCAL)
    flipped = dataclasses.replace(spec, seeds=dataclasses.replace(race, mode="max"))
    for options in (dataclasses.replace(LOCAL, resume=True), LOCAL):
        with pytest.raises(
            sweep.SpecError,
            match=r"^`seeds\.adaptive`: the race of sweep 'tiny' ranked val_loss lowest first; this spec ranks val_loss "
            r"highest first\. Go on as it ran \(--set seeds\.adaptive\.metric=val_loss --set "
            r"seeds\.adaptive\.mode=min\)",
        ):
            sweep.run(flipped, storage=str(tmp_path), options=options)
    other = dataclasses.replace(spec, seeds=dataclasses.replace(race, metric="val_nrmse"))
    with pytest.raises(sweep.SpecError, match=r"ranked val_loss lowest first; this spec ranks val_nrmse lowest"):
        sweep.run(other, storage=str(tmp_path), options=LOCAL)
    # its levels, and the promise they keep, come from its rounds and confidence: another is refused
    for changed, how in (
        (
            {"confidence": 0.9},
            r"confidence \(0\.9 here, 0\.95 there\)\. Go on as it ran \(--set seeds\.adaptive\.confidence=0\.95\)",
        ),
        ({"step": 1}, r"step \(1 here, 2 there\)\. Go on as it ran \(--set seeds\.adaptive\.step=2\)"),
        (
            {"precision": 0.5},
            r"precision \(0\.5 here, unset there\)\. Go on as it ran \(remove seeds\.adaptive\.precision\)",
        ),
    ):
        with pytest.raises(sweep.SpecError, match=r"^`seeds\.adaptive`: the race of sweep 'tiny' decided .*" + how):
            sweep.run(
                dataclasses.replace(spec, seeds=dataclasses.replace(race, **changed)), str(tmp_path), options=LOCAL
            )
    sweep.run(spec, storage=str(tmp_path), options=dataclasses.replace(LOCAL, resume=True))  # as it ran: taken
    sweep.run(dataclasses.replace(spec, seeds=dataclasses.replace(race, max=6)), str(tmp_path), options=LOCAL)  # more


@pytest.mark.parametrize("model", [None, "test_models:make_linear"])
def test_ctrl_c_while_aggregating_says_how_to_aggregate(tmp_path, monkeypatch, model):
    """The trials ended and the aggregation was stopped: the one step left is named, and
    ``sweep status`` says the sweep is not aggregated yet, with the command (which asks for
    --trust-code where the sweep's models a factory builds: aggregating runs it)."""

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("sweep.tune._run.aggregate", stopped)
    spec = tiny_spec() if model is None else tiny_spec(model=sweep.Model(model, width=3))
    trust = "" if model is None else " --trust-code"
    with pytest.raises(
        sweep.tune.Interrupted,
        match=rf"^interrupted while aggregating the trained members; aggregate them with: sweep aggregate \S*tiny{trust}$",
    ):
        sweep.run(spec, storage=str(tmp_path), options=LOCAL)
    status = invoke("status", tmp_path / "tiny")
    said = f"ensembles: not aggregated yet (run `sweep aggregate {tmp_path / 'tiny'}{trust}`"
    assert said + (")" if model is None else ", if you trust the model factory it names)") in status.output


def test_a_store_older_than_the_checkpoints_is_aggregated_again(local_run, tmp_path, monkeypatch):
    """A failed run stores its unfinished trial as the checkpoint left it; the resume that finished
    it was stopped while aggregating: the next run has nothing to train, and aggregates the store
    again, as many members as before but the finished ones."""
    hooks = TrialHooks(after_report=FailOnce(str(tmp_path / "failed")))
    with pytest.raises(sweep.SweepError, match="injected failure"):
        sweep.run(tiny_spec(), storage=str(tmp_path), options=dataclasses.replace(LOCAL, trial_hooks=hooks))
    assert sorted(sweep.load(tmp_path / "tiny").table["epochs"].to_pylist()) == [2, 2, 4, 4]

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr("sweep.tune._run.aggregate", stopped)
        with pytest.raises(sweep.tune.Interrupted, match="interrupted while aggregating"):
            sweep.run(tiny_spec(), storage=str(tmp_path), options=dataclasses.replace(LOCAL, resume=True))
    behind = "older than the trials' checkpoints (members stored part way, trained on since): aggregate it again"
    assert behind in " ".join(invoke("status", tmp_path / "tiny").output.split())
    path = sweep.run(tiny_spec(), storage=str(tmp_path), options=dataclasses.replace(LOCAL, resume=True))
    assert store_files(path) == store_files(local_run)
    assert "older than" not in invoke("status", path).output


def test_more_gpus_than_this_process_sees_are_refused_before_any_trial(tmp_path):
    """The local executor trains every trial in this process: its GPUs are all a trial can have."""
    spec = dataclasses.replace(tiny_spec(), resources={"cpu": 1, "gpu": 64})
    with pytest.raises(
        sweep.SpecError, match=r"^`resources.gpu`: got 64; this process sees \d+ GPU\(s\), and the local"
    ):
        sweep.run(spec, storage=str(tmp_path), options=LOCAL)
    assert not list(tmp_path.glob("tiny/local/*"))  # no trial started


@pytest.mark.parametrize("storage", [None, 3, ""])
def test_a_storage_that_is_no_folder_is_refused(storage, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(sweep.SpecError, match=r"^`storage`: got .*; give the folder to keep sweeps in"):
        sweep.run(tiny_spec(), storage=storage, options=LOCAL)
    assert not any(tmp_path.iterdir())  # no folder named None or 3


def test_a_sweep_directory_given_as_storage_is_refused(local_run, tmp_path):
    """``--storage runs/tiny`` for ``runs``: the new sweep would hide inside the other."""
    inside = tmp_path / "tiny"
    (inside).mkdir()
    (inside / "plan.json").write_text((local_run / "plan.json").read_text())
    other = dataclasses.replace(tiny_spec(), name="other")
    with pytest.raises(sweep.SpecError, match=r"^`storage`: '.*tiny' is a sweep's directory \(it holds plan.json\); "):
        sweep.run(other, storage=str(inside), options=LOCAL)
    assert not (inside / "other").exists()


def test_ctrl_c_before_any_trial_is_planned_says_nothing_is_trained(tmp_path, monkeypatch):
    """A Ctrl-C while the driver reads the data: no plan.json yet, and the hint and `sweep status` agree."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "lp_interrupted_data.py").write_text("def data(**options):\n    raise KeyboardInterrupt\n")
    monkeypatch.syspath_prepend(str(code))
    spec = tiny_spec(problem=sweep.Problem("lp_interrupted_data:data"))
    with pytest.raises(KeyboardInterrupt, match=r"^interrupted before any trial was planned \(nothing is trained\); "):
        sweep.run(spec, storage=str(tmp_path / "runs"), options=LOCAL)
    sweep_dir = tmp_path / "runs" / "tiny"
    sweep_dir.mkdir(parents=True, exist_ok=True)  # as a run stopped while Ray started leaves it (storage probed)
    said = invoke("status", sweep_dir).stderr
    assert (
        "is empty (no plan.json): not a sweep directory, or one whose run stopped before it planned any trial" in said
    )
    (sweep_dir / "data_scans.json").write_text("{}")  # as a run stopped after its data check leaves it
    said = invoke("status", sweep_dir)
    assert "its run stopped before it planned any trial (no plan.json); nothing is trained" in said.stderr


@pytest.mark.parametrize("sigint", ["handled", "ignored"])
def test_a_sigterm_to_the_driver_stops_the_run_as_a_ctrl_c_does(local_run, tmp_path, sigint, capsys):
    """Slurm, Kubernetes and `ray job stop` end a process with SIGTERM: the trials stop, the complete
    blocks are aggregated, the resume command is said, and the resumed run ends where an
    uninterrupted one does; outside the run, SIGTERM is handled as before it. A process that
    ignores Ctrl-C (started with `&` by a script) still stops."""
    from _faults import SigtermAtStart

    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    # as the CLI words it (sigint="ignored"), or a Python call's (which removes the file a CLI run kept)
    command = shlex.join(["sweep", "run", "/a spec/tiny.toml", "--storage", str(tmp_path), "--executor", "local"])
    command += " --resume"
    kept = tmp_path / "tiny" / "resume.json"
    if sigint == "handled":
        kept.parent.mkdir()
        kept.write_text(json.dumps({"command": command, "folder": "/"}))
    stop = dataclasses.replace(
        LOCAL,
        trial_hooks=TrialHooks(on_start=SigtermAtStart(2)),
        resume_command=command if sigint == "ignored" else None,
        progress="plain",
    )
    try:
        if sigint == "ignored":
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        with pytest.raises(
            sweep.tune.Interrupted,
            match=r"^interrupted: 2 of 4 members done \(the trials' checkpoints are kept\); resume with: "
            + (
                re.escape(command)
                if sigint == "ignored"
                else r"sweep\.run\(spec, storage='.*', "
                r"options=sweep\.RunOptions\(executor='local', resume=True\)\)$"  # in this process, as it ran
            ),
        ) as stopped:
            sweep.run(tiny_spec(), storage=str(tmp_path), options=stop)
        assert stopped.value.signal == signal.SIGTERM  # (the CLI exits with 143)
        assert signal.getsignal(signal.SIGTERM) is before[0]
    finally:
        signal.signal(signal.SIGINT, before[1])
    # the last line: the second trial, stopped as it started (compiling), is not running and has no ETA
    last = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[tiny]")][-1]
    assert "| trials 1/2 done, 1 stopped, 0 pending | members 2/4 |" in last and "ETA" not in last
    # `sweep status` says to go on in this process too, as the run's own hint does: the CLI's
    # command as it was run, else the spec to fill in
    expected = (
        f"next: resume it with `{command}` (its last run, from {os.getcwd()});"
        if sigint == "ignored"
        else f"`sweep run SPEC --storage {tmp_path} --executor local --resume`"
    )
    assert expected in invoke("status", tmp_path / "tiny").output
    assert len(sweep.load(tmp_path / "tiny")) == 2  # the first trial's block, aggregated
    sweep.run(tiny_spec(), storage=str(tmp_path), options=dataclasses.replace(LOCAL, resume=True))
    assert store_files(tmp_path / "tiny") == store_files(local_run)
    assert not kept.exists()  # a Python call's: status names the spec


def test_members_on_other_data_are_not_added_to_a_sweep(local_run, tmp_path):
    import shutil

    shutil.copytree(local_run, tmp_path / "tiny", symlinks=True)
    trials = sorted((tmp_path / "tiny" / "local").iterdir())
    other = tiny_spec(problem=sweep.Problem("heat1d", num_points=16, num_samples=48, data_seed=0))
    refused = (
        r"^`problem`: sweep 'tiny' holds members trained on a problem written otherwise: this spec differs in "
        r"problem.num_samples \(48 here, 60 there\)\. .*write the problem as the sweep did \(on the command line: "
        r"--set problem.num_samples=60\), give this spec another name, or vary the field in the grid$"
    )
    with pytest.raises(sweep.SpecError, match=refused):
        sweep.plan(other, storage=str(tmp_path))  # the plan says what the run would refuse
    with pytest.raises(sweep.SpecError, match=refused):
        sweep.run(other, storage=str(tmp_path), options=LOCAL)
    assert sorted((tmp_path / "tiny" / "local").iterdir()) == trials  # nothing trained


def test_a_resume_takes_more_seeds(tmp_path):
    """More seeds name more members of the same configurations: the interrupted trials continue
    and the new seeds train beside them (what the resume check leaves to a resume)."""
    hooks = TrialHooks(after_report=FailOnce(str(tmp_path / "failed")))
    with pytest.raises(sweep.SweepError, match=r"1 trial\(s\) .* failed"):
        sweep.run(tiny_spec(), storage=str(tmp_path), options=dataclasses.replace(LOCAL, trial_hooks=hooks))
    path = sweep.run(tiny_spec(seeds=6), storage=str(tmp_path), options=dataclasses.replace(LOCAL, resume=True))
    assert sorted(sweep.load(path).table["seed"].to_pylist()) == list(range(6))


def test_more_seeds_leave_a_trial_trained_part_way_its_block(local_run, tmp_path):
    """Seeds 0-2 in blocks of 2, the trial of seed 2 failed part way; with 6 seeds, seed 2 goes on
    in its own trial from its checkpoint, and 3-5 are split around it: regrouped as [2, 3], seed 2
    would be trained again beside its old checkpoint, and the store would refuse the twin."""
    from sweep.planning import make_plan

    spec = tiny_spec(seeds=3)
    (_, last) = make_plan(spec).trials
    assert last.seeds == (2,)
    hooks = TrialHooks(after_report=OnlyFor([last.trial_key], FailOnce(str(tmp_path / "failed"))))
    with pytest.raises(sweep.SweepError, match="injected failure"):
        sweep.run(spec, storage=str(tmp_path), options=dataclasses.replace(LOCAL, trial_hooks=hooks))
    more = tiny_spec(seeds=6)
    assert [t.seeds for t in sweep.plan(more, storage=str(tmp_path)).trials] == [(2,), (3, 4), (5,)]
    wider = make_plan(tiny_spec(seeds=6, resources={"cpu": 2, "gpu": 0}), unfinished=[last]).trials[0]
    assert wider.trial_key == last.trial_key and wider.spec.resources == {"cpu": 2, "gpu": 0}  # this spec's
    path = sweep.run(more, storage=str(tmp_path), options=LOCAL)
    table = sweep.load(path).table
    assert sorted(table["seed"].to_pylist()) == list(range(6))
    assert sweep.load(path).where(seed=2).table["trial_id"].to_pylist() == [last.trial_key]
    # trained on from its checkpoint, it is the member an uninterrupted run trains
    seed2 = sweep.load(path).where(seed=2).table["val_loss"].to_pylist()
    assert seed2 == sweep.load(local_run).where(seed=2).table["val_loss"].to_pylist()
    sweep.aggregate(path)  # the store made again from the checkpoints: no twin


def test_more_seeds_train_only_the_new_members(local_run, tmp_path, capsys):
    import shutil

    shutil.copytree(local_run, tmp_path / "tiny", symlinks=True)
    before = {p: p.read_bytes() for p in (tmp_path / "tiny" / "local").rglob("state.eqx")}
    assert len(sweep.plan(tiny_spec(seeds=6), storage=str(tmp_path)).trials) == 1
    path = sweep.run(tiny_spec(seeds=6), storage=str(tmp_path), options=LOCAL)
    assert {p: p.read_bytes() for p in before} == before  # old checkpoints untouched
    (new_block,) = [p for p in Path(path).glob("local/*/checkpoint_*/state.eqx") if p not in before]
    model, _ = sweep.train_block(tiny_spec(seeds=6), [4, 5])
    saved = load_block(new_block.parent)
    assert saved.seeds == (4, 5)
    assert tree_allclose(saved.state.params, eqx.filter(model, eqx.is_array), exact=True)
    old, new = sweep.load(local_run), sweep.load(path)
    assert new.table.num_rows == 6
    assert new.where(seed=1).table["val_loss"].to_pylist() == old.where(seed=1).table["val_loss"].to_pylist()
    capsys.readouterr()
    sweep.run(tiny_spec(seeds=6), storage=str(tmp_path), options=LOCAL)
    assert "nothing to train: 6 members already in" in capsys.readouterr().out


def test_run_options_fold_the_old_keywords_and_refuse_unknown_ones(tmp_path):
    with pytest.raises(sweep.SpecError, match=r"`executor`: got 'ray'; choose one of 'tune', 'local'"):
        sweep.RunOptions(executor="ray")
    with pytest.raises(sweep.SpecError, match=r"`progress`: got 'loud'"):
        sweep.RunOptions(progress="loud")
    with pytest.raises(sweep.SpecError, match=r"`address`: got 'auto'; executor='local' trains in this process"):
        sweep.RunOptions(executor="local", address="auto")
    with pytest.raises(sweep.SpecError, match=r"`resume`: given both as sweep.run\(resume=...\) and in options="):
        sweep.run(tiny_spec(), storage=str(tmp_path), options=sweep.RunOptions(resume=True), resume=False)
    with pytest.raises(sweep.SpecError, match=r"`options`: got dict; give a sweep.RunOptions"):
        sweep.run(tiny_spec(), storage=str(tmp_path), options={"resume": True})
    with pytest.raises(sweep.SpecError, match=r"`checkpoint_every`: got 0"):
        sweep.run(tiny_spec(), storage=str(tmp_path), executor="local", checkpoint_every=0)
    assert not (tmp_path / "tiny").exists()  # refused before anything was written
    with pytest.raises(dataclasses.FrozenInstanceError):
        LOCAL.resume = True  # type: ignore[misc]
    assert sweep.RunOptions(loggers="tensorboard").loggers == ("tensorboard",)


def test_the_local_executor_feeds_the_trackers_and_the_display(tmp_path, capsys):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    options = dataclasses.replace(LOCAL, loggers=("tensorboard",), progress="plain")
    path = Path(sweep.run(tiny_spec(), storage=str(tmp_path), options=options))
    assert "trials 2/2 done" in capsys.readouterr().out
    for row in sweep.load(path).table.to_pylist():
        (run,) = (path / "tensorboard").glob(f"*/seed={row['seed']}")  # one run per member
        events = EventAccumulator(str(run))
        events.Reload()
        assert [s.step for s in events.Scalars("val_loss")] == row["history_epochs"]
        assert [s.value for s in events.Scalars("val_loss")] == pytest.approx(row["val_loss_history"], rel=1e-6)
