"""The progress display of ``sweep.run``: its counts (from the plan, not Tune's trial list), the
configuration names, throughput and ETA, and the plain lines printed when not on a terminal."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
from helpers import tiny_spec

import sweep
from sweep.planning import hparams_key, make_plan
from sweep.tune._progress import ProgressState, duration, waited
from sweep.tune._sweep_progress import SweepProgress


def grid_spec(**changes) -> sweep.SweepSpec:
    """2 depths x 2 learning rates x 4 seeds in blocks of 2: 4 trials of 4 members."""
    base = dict(seeds=4, seeds_per_trial=2, grid={"model.depth": [1, 2], "optimizer.learning_rate": [3e-3, 1e-3]})
    return tiny_spec(**{**base, **changes})


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def tune_trial(trial_key: str, status: str):
    return SimpleNamespace(config={"trial_key": trial_key}, status=status)


def result(epoch: int, losses: list[float], resumed_from: int = 0, name: str = "member_test_loss") -> dict:
    return {"epoch": epoch, name: losses, "resumed_from_epoch": resumed_from}


def test_counts_come_from_the_plan_when_tune_knows_only_some_trials():
    spec, clock = grid_spec(), Clock()
    plan = make_plan(spec)
    state = ProgressState(spec, plan.trials, clock=clock)
    first = plan.trials[0]
    # max_concurrent_trials=1: Tune has created one trial so far
    state.statuses([tune_trial(first.trial_key, "RUNNING")])
    c = state.counts()
    assert c["trials"] == {"done": 0, "compiling": 1, "running": 0, "stopped": 0, "pending": 3, "failed": 0}
    assert (c["members_done"], c["members"]) == (0, 16)
    assert (c["epochs_done"], c["epochs"]) == (0, 16 * 4)
    assert c["eta"] is None  # nothing trained yet: no rate, no ETA

    clock.now += 10
    state.report(first.trial_key, result(2, [0.5, 0.4, 0.3, 0.2]))
    c = state.counts()
    assert c["epochs_done"] == 4 * 2 and c["rate"] == pytest.approx(8 / 10)
    assert (c["trials"]["compiling"], c["trials"]["running"]) == (0, 1)  # it has reported: compiled
    assert c["eta"] == pytest.approx((64 - 8) / 0.8)
    clock.now += 10
    state.report(first.trial_key, result(4, [0.45, 0.1, 0.3, 0.25]))
    state.statuses([tune_trial(first.trial_key, "TERMINATED")])
    c = state.counts()
    assert c["trials"]["done"] == 1 and c["members_done"] == 4 and c["members"] == 16
    # members are hparams-major: the first two ran at lr=0.003, the last two at lr=0.001; the best
    # member's latest loss, as the store will hold it (not 0.2, the last member's at epoch 2)
    assert c["best"] == {"depth=1 learning_rate=0.003": 0.1, "depth=1 learning_rate=0.001": 0.25}
    assert c["mean"] == pytest.approx({"depth=1 learning_rate=0.003": 0.275, "depth=1 learning_rate=0.001": 0.275})
    assert c["per_config"]["depth=1 learning_rate=0.003"] == 2


def test_members_trained_before_count_as_done_and_throughput_counts_only_this_process():
    spec = grid_spec(seeds=6)
    old = make_plan(grid_spec())  # seeds 0..3 are trained already
    done = {(t.config_id, s, hparams_key(h)) for t in old.trials for h, s in t.members()}
    left = make_plan(spec, done=done)
    clock = Clock()
    state = ProgressState(spec, left.trials, done, clock=clock)
    assert len(left.trials) == 2
    c = state.counts()
    assert (c["members_done"], c["members"]) == (16, 24)
    epochs = spec.training.epochs  # the members trained before count in the member-epochs as in the members
    assert (c["epochs_done"], c["epochs"]) == (16 * epochs, 24 * epochs)
    assert c["per_config"] == {label: 4 for label in c["per_config"]}
    # a trial resumed from epoch 2: only the 2 epochs trained now count towards the rate
    trial = left.trials[0]
    state.statuses([tune_trial(trial.trial_key, "RUNNING")])
    clock.now += 4
    state.report(trial.trial_key, result(4, [0.1] * 4, resumed_from=2))
    c = state.counts()
    assert c["rate"] == pytest.approx(4 * 2 / 4)
    assert c["elapsed"] == pytest.approx(4)  # since this process started, not since the sweep did


def test_members_trained_before_show_their_blocks_last_loss_beside_this_calls():
    """After a resume, the configurations finished earlier are ranked by their stored losses, not
    shown as "-" at the bottom; members not done (a block still to resume) are not counted."""
    import numpy as np

    spec = grid_spec()
    old = make_plan(spec)
    finished, resumed = old.trials[0], old.trials[1]
    done = {(finished.config_id, s, hparams_key(h)) for h, s in finished.members()}

    def block(trial, last: list[float]):  # a BlockRef's fields (two reports per member)
        losses = np.array([[9.0, x] for x in last], np.float32)
        history = SimpleNamespace(val={"loss": losses}, test={"loss": losses + 1})
        return SimpleNamespace(
            epoch=trial.spec.training.epochs,
            config_id=trial.config_id,
            trial_key=trial.trial_key,
            seeds=trial.seeds,
            hparams=trial.hparams,
            history=history,
        )

    state = ProgressState(spec, make_plan(spec, done=done).trials, done, clock=Clock())
    state.rank_on_validation(True)
    # the finished block: lr=0.003 members 0.2, 0.4 and lr=0.001 members 0.1, nan (diverged)
    state.restore([block(finished, [0.2, 0.4, 0.1, float("nan")]), block(resumed, [0.0] * 4)], done)
    c = state.counts()
    assert c["mean"] == pytest.approx({"depth=1 learning_rate=0.003": 0.3, "depth=1 learning_rate=0.001": 0.1})
    assert c["best"] == pytest.approx({"depth=1 learning_rate=0.003": 0.2, "depth=1 learning_rate=0.001": 0.1})
    assert "val loss, mean over seeds, best first: depth=1 learning_rate=0.001 0.1, depth=1" in state.line()
    state.rank_on_validation(False)  # no validation set: the test loss
    state.latest.clear()
    state.restore([block(finished, [0.2, 0.4, 0.1, 0.3])], done)
    assert state.counts()["mean"]["depth=1 learning_rate=0.003"] == pytest.approx(1.3)


def test_a_resumed_trial_counts_the_epochs_of_its_checkpoint_as_done_before_it_reports():
    """A trial this call resumes starts at its newest checkpoint's epoch, in the bar and the ETA;
    the rate counts only the epochs trained now."""
    spec, clock = grid_spec(), Clock()
    plan = make_plan(spec)
    partial = plan.trials[1]  # stopped at epoch 3 of 4 by an earlier call
    ref = SimpleNamespace(
        epoch=3,
        config_id=partial.config_id,
        trial_key=partial.trial_key,
        seeds=partial.seeds,
        hparams=partial.hparams,
        history=SimpleNamespace(val={}, test={}),
    )
    state = ProgressState(spec, (), clock=clock)
    state.restore([ref], set())
    state.add(plan.trials)
    c = state.counts()
    assert (c["epochs_done"], c["epochs"], c["members_done"]) == (4 * 3, 16 * 4, 0)
    state.statuses([tune_trial(partial.trial_key, "RUNNING")])
    clock.now += 2
    state.report(partial.trial_key, result(4, [0.1] * 4, resumed_from=3))
    c = state.counts()
    assert c["epochs_done"] == 4 * 4 and c["rate"] == pytest.approx(4 * 1 / 2)
    assert c["eta"] == pytest.approx((64 - 16) / 2)


def test_a_stopped_run_shows_its_running_trials_as_stopped_and_no_eta():
    spec, clock = grid_spec(), Clock()
    plan = make_plan(spec)
    stream = io.StringIO()
    display = SweepProgress(ProgressState(spec, plan.trials, clock=clock), mode="plain", stream=stream)
    running = [tune_trial(t.trial_key, "RUNNING") for t in plan.trials[:2]]
    display.on_step_end(iteration=1, trials=running)
    clock.now += 6
    display.on_trial_result(iteration=2, trials=[], trial=running[0], result=result(2, [0.5, 0.4, 0.3, 0.2]))
    display.on_step_end(iteration=2, trials=running)  # one running, one compiling
    assert "1 compiling, 1 running, 2 pending" in display.state.line() and "ETA" in display.state.line()
    display.close(stopped=True)
    last = stream.getvalue().splitlines()[-1]
    assert (
        "| trials 0/4 done, 2 stopped, 2 pending | members 0/16 | member-epochs 8/64 | 1.33 member-epochs/s |" in last
    )
    assert "ETA" not in last and "running" not in last and "compiling" not in last
    # stopped before any report: the bar does not say that the trials are starting or compiling
    state = ProgressState(spec, plan.trials, clock=clock)
    state.statuses(running[:1])
    assert "compiling (1 trial building programs)" in _rendered(state)
    state.stop()
    shown = _rendered(state)
    assert "trials 0/4 done, 1 stopped, 3 pending" in shown and "compiling" not in shown and "starting" not in shown


def test_validation_loss_is_shown_where_trials_report_it():
    spec = grid_spec()
    plan = make_plan(spec)
    state = ProgressState(spec, plan.trials, clock=Clock())
    state.report(plan.trials[0].trial_key, {**result(2, [9.0] * 4), "member_val_loss": [0.3, 0.2, 0.5, 0.6]})
    assert state.loss_name == "val loss"
    assert state.counts()["best"]["depth=1 learning_rate=0.003"] == 0.2
    assert "val loss, mean over seeds, best first: depth=1 learning_rate=0.003 0.25" in state.line()


def test_with_a_validation_set_the_display_ranks_by_validation_from_the_start():
    spec = grid_spec()
    plan = make_plan(spec)
    state = ProgressState(spec, plan.trials, clock=Clock())
    state.rank_on_validation(True)
    assert state.loss_name == "val loss" and state.ranking == "val loss, mean over seeds, best first"
    state.report(plan.trials[0].trial_key, result(2, [0.1, 0.1, 0.1, 0.1]))  # a test loss only: not ranked on
    assert state.counts()["mean"] == {} and state.loss_name == "val loss"
    state.report(plan.trials[0].trial_key, {**result(4, [0.1] * 4), "member_val_loss": [0.3, 0.2, 0.5, 0.6]})
    assert state.counts()["mean"] == pytest.approx(
        {"depth=1 learning_rate=0.003": 0.25, "depth=1 learning_rate=0.001": 0.55}
    )
    without = ProgressState(spec, plan.trials, clock=Clock())
    without.rank_on_validation(False)
    without.report(plan.trials[0].trial_key, {**result(2, [0.4] * 4), "member_val_loss": [0.3] * 4})
    assert without.loss_name == "test loss" and without.counts()["mean"]["depth=1 learning_rate=0.003"] == 0.4


def test_the_ranking_is_the_mean_over_seeds_as_the_summary_ranks_not_the_best_member():
    spec = grid_spec()
    plan = make_plan(spec)
    state = ProgressState(spec, plan.trials, clock=Clock())
    # lr=0.003 has the best member (0.01) but the worse mean; lr=0.001 ranks first
    state.report(plan.trials[0].trial_key, result(2, [0.01, 0.99, 0.3, 0.3]))
    line = state.line()
    assert line.endswith(
        "test loss, mean over seeds, best first: depth=1 learning_rate=0.001 0.3, depth=1 learning_rate=0.003 0.5"
    ), line
    state.report(plan.trials[0].trial_key, result(4, [0.02, float("nan"), 0.3, 0.3]))  # diverged: left out
    assert state.counts()["mean"]["depth=1 learning_rate=0.003"] == pytest.approx(0.02)


def test_nothing_is_printed_before_tune_has_created_a_trial():
    spec, clock = grid_spec(), Clock()
    plan = make_plan(spec)
    stream = io.StringIO()
    display = SweepProgress(ProgressState(spec, plan.trials, clock=clock), mode="plain", stream=stream, every_s=0)
    display.start()
    display.on_step_end(iteration=1, trials=[])  # Tune's first steps: no trial yet
    display.on_step_end(iteration=2, trials=[tune_trial("someone-else", "RUNNING")])
    assert stream.getvalue() == ""
    display.on_step_end(iteration=3, trials=[tune_trial(plan.trials[0].trial_key, "PENDING")])
    assert stream.getvalue().startswith("[tiny] 0:00 | trials 0/4 done, 0 running, 4 pending")
    idle = SweepProgress(ProgressState(spec, plan.trials, clock=clock), mode="plain", stream=io.StringIO())
    idle.start()
    idle.close()  # the sweep stopped before any trial existed (bad options, no resources): no line
    assert idle.stream.getvalue() == ""


def test_live_display_starts_with_the_first_trial_and_says_compiling():
    from rich.console import Console

    spec = grid_spec()
    plan = make_plan(spec)
    stream = io.StringIO()
    state = ProgressState(spec, plan.trials, clock=Clock())
    display = SweepProgress(state, mode="live", stream=stream)
    display.start()
    assert display._live is None  # nothing shown yet
    state.statuses([tune_trial(plan.trials[0].trial_key, "PENDING")])
    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(state.renderable())
    assert "starting (4 trials waiting for worker processes) | member-epochs 0/64" in console.file.getvalue()
    display.on_step_end(iteration=1, trials=[tune_trial(plan.trials[0].trial_key, "RUNNING")])
    assert display._live is not None
    display.close()
    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(state.renderable())
    text = console.file.getvalue()
    assert "trials 0/4 done, 1 compiling, 0 running, 3 pending" in text
    assert "compiling (1 trial building programs) | member-epochs 0/64" in text and " 0% " not in text


def test_plain_lines_name_configurations_and_show_eta():
    spec, clock = grid_spec(), Clock()
    plan = make_plan(spec)
    stream = io.StringIO()
    display = SweepProgress(ProgressState(spec, plan.trials, clock=clock), mode="auto", stream=stream, every_s=5)
    assert display.mode == "plain"  # a StringIO is not a terminal
    key = plan.trials[0].trial_key
    display.on_step_end(iteration=1, trials=[tune_trial(key, "RUNNING")])
    clock.now += 6
    display.on_trial_result(
        iteration=2, trials=[], trial=tune_trial(key, "RUNNING"), result=result(2, [0.5, 0.4, 0.3, 0.2])
    )
    display.on_step_end(iteration=2, trials=[tune_trial(key, "RUNNING")])
    display.on_step_end(iteration=3, trials=[tune_trial(key, "RUNNING")])  # within every_s: nothing printed
    display.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 3, lines
    assert (
        lines[0]
        == "[tiny] 0:00 | trials 0/4 done, 1 compiling, 0 running, 3 pending | members 0/16 | member-epochs 0/64"
    )
    assert "| members 0/16 | member-epochs 8/64 | 1.33 member-epochs/s | ETA 0:42 |" in lines[1]
    assert lines[1].endswith(
        "test loss, mean over seeds, best first: depth=1 learning_rate=0.001 0.25, depth=1 learning_rate=0.003 0.45"
    )


def _rendered(state: ProgressState, width: int = 120) -> str:
    from rich.console import Console

    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(state.renderable())
    return console.file.getvalue()


def _after_one_report(width: int) -> str:
    """The live display of :func:`grid_spec` after its first trial's one report, at ``width`` columns."""
    spec = grid_spec()
    plan = make_plan(spec)
    state = ProgressState(spec, plan.trials, clock=Clock())
    state.report(plan.trials[0].trial_key, result(2, [0.5, 0.4, 0.3, 0.2]))
    return _rendered(state, width)


def test_live_renderable_has_a_row_per_configuration():
    text = _after_one_report(120)
    assert "configuration (best first)" in text and "test loss: mean over seeds" in text and "best member" in text
    rows = [line.split() for line in text.splitlines() if line.startswith("depth=")]
    assert [r[:2] for r in rows] == [  # best mean first, then the configurations without a loss yet
        ["depth=1", "learning_rate=0.001"],
        ["depth=1", "learning_rate=0.003"],
        ["depth=2", "learning_rate=0.003"],
        ["depth=2", "learning_rate=0.001"],
    ]
    assert [r[2:] for r in rows] == [
        ["0/4", "0.25", "0.2"],
        ["0/4", "0.45", "0.4"],
        ["0/4", "-", "-"],
        ["0/4", "-", "-"],
    ]
    assert "trials 0/4 done" in text and "12% | member-epochs 8/64" in text


def test_duration_and_modes():
    assert [duration(s) for s in (0, 75, 3725)] == ["0:00", "1:15", "1:02:05"]
    with pytest.raises(ValueError, match="progress.*'fancy'"):
        SweepProgress(ProgressState(grid_spec(), ()), mode="fancy")


def test_the_seconds_streamed_trials_waited_for_data_are_summed_and_shown_when_they_waited():
    spec, clock = grid_spec(), Clock()
    plan = make_plan(spec)
    state = ProgressState(spec, plan.trials, clock=clock)
    first, second = plan.trials[0].trial_key, plan.trials[1].trial_key
    state.statuses([tune_trial(first, "RUNNING"), tune_trial(second, "RUNNING")])
    clock.now += 5
    state.report(first, result(2, [0.5, 0.4, 0.3, 0.2]))  # data that fit: no reader_wait_s
    assert "for data" not in state.line()
    state.report(first, {**result(4, [0.5, 0.4, 0.3, 0.2]), "reader_wait_s": 0.75})
    state.report(second, {**result(2, [0.5, 0.4, 0.3, 0.2]), "reader_wait_s": 0.55})
    assert "| waited 1.3 s for data |" in state.line()  # each report: the seconds since the last, summed
    assert "waited 1.3 s for data" in state.summary()
    assert [waited(s) for s in (0.0213, 1.234, 75)] == ["21 ms", "1.2 s", "1:15"]


def test_a_spec_without_a_grid_names_its_one_configuration_not_a_hash():
    spec, clock = tiny_spec(seeds=2), Clock()
    plan = make_plan(spec)
    state = ProgressState(spec, plan.trials, clock=clock)
    state.statuses([tune_trial(plan.trials[0].trial_key, "RUNNING")])
    clock.now += 5
    state.report(plan.trials[0].trial_key, result(2, [0.5, 0.25]))
    line = state.line()
    assert line.endswith("test loss, mean over seeds, best first: (one configuration) 0.375"), line
    assert plan.trials[0].config_id not in line


def test_retried_trials_are_counted_in_the_status_line_and_listed_with_why_at_the_end():
    spec = grid_spec()
    plan = make_plan(spec)
    stream = io.StringIO()
    display = SweepProgress(ProgressState(spec, plan.trials), mode="plain", stream=stream)
    first, second = plan.trials[0].trial_key, plan.trials[1].trial_key
    display.on_step_end(iteration=1, trials=[tune_trial(first, "RUNNING"), tune_trial(second, "RUNNING")])
    assert "retried" not in display.state.line()
    display.on_trial_recover(iteration=2, trials=[], trial=tune_trial(first, "PENDING"), reason="node lost")
    display.on_trial_recover(iteration=3, trials=[], trial=tune_trial(second, "PENDING"), reason="preempted")
    display.on_trial_recover(iteration=4, trials=[], trial=tune_trial(second, "PENDING"), reason="preempted")
    assert "trials 0/4 done, 2 compiling, 0 running, 2 pending, 2 retried | members" in display.state.line()
    display.close()
    assert stream.getvalue().splitlines()[-1] == f"retried 2 trials: {first} (node lost), {second} (preempted x2)"


def test_live_race_columns_show_brackets_as_written():
    """The race's interval text ("0.5 [decides from 6 seeds]", "0.4 [p 0.0011]") and its header reach the
    screen as written: rich would read a bracketed word as markup and drop it."""
    from rich.console import Console

    spec = grid_spec()
    plan = make_plan(spec)
    state = ProgressState(spec, plan.trials, clock=Clock())
    keys = list(dict.fromkeys((t.config_id, hparams_key(h)) for t in plan.trials for h in t.hparams))
    state.show_race(
        {
            keys[0]: (4, "0.5 [decides from 6 seeds]", "racing (tested at round 1)"),
            keys[1]: (4, "0.4 [p 0.0011]", "racing (tested at round 1)"),
        },
        "race of 2 configurations on val_loss",
    )
    console = Console(file=io.StringIO(), width=160, color_system=None)
    console.print(state.renderable())
    text = console.file.getvalue()
    assert "race: mean [p or interval]" in text
    assert "0.5 [decides from 6 seeds]" in text and "0.4 [p 0.0011]" in text


def test_a_narrow_terminal_folds_labels_and_wraps_messages_after_the_display(monkeypatch):
    """At 60 columns every configuration's label reaches the screen whole (folded, not cut to
    ``depth=…``, which would read the same on every row), and a message printed after the display
    (the race's result) wraps at words to the terminal's width."""
    from rich.console import Console

    spec = grid_spec()
    plan = make_plan(spec)
    state = ProgressState(spec, plan.trials, clock=Clock())
    keys = list(dict.fromkeys((t.config_id, hparams_key(h)) for t in plan.trials for h in t.hparams))
    state.show_race({k: (4, "0.4 [p 0.0011]", "not separated from the best (4 seeds)") for k in keys}, "race")
    console = Console(file=io.StringIO(), width=60, color_system=None)
    console.print(state.renderable())
    text = console.file.getvalue()
    assert "…" not in text and all(len(line) <= 60 for line in text.splitlines())
    folded = "".join(line.split("  ")[0].strip() for line in text.splitlines())  # the first column's pieces
    assert all("".join(label.split()) in folded for label in state.configs)
    assert all(word in text for word in "not separated from the best (4 seeds)".split())  # wrapped, never cut
    # without a race's columns, each grid value on one line ("learning_rate=0.003", not
    # "learning_rate=" above "0.003")
    plain = Console(file=io.StringIO(), width=60, color_system=None)
    plain.print(ProgressState(spec, plan.trials, clock=Clock()).renderable())
    assert all(value in plain.file.getvalue() for label in state.configs for value in label.split())
    monkeypatch.setenv("COLUMNS", "40")
    stream = io.StringIO()
    display = SweepProgress(state, mode="live", stream=stream)
    display.start()
    display.on_step_end(iteration=1, trials=[tune_trial(plan.trials[0].trial_key, "RUNNING")])
    display.close()
    before = len(stream.getvalue())
    words = "race of 4 configurations on val_loss (lower is better): over after 3 rounds; best: depth=2"
    display.message(words, wrap=True)
    lines = stream.getvalue()[before:].splitlines()
    assert len(lines) > 1 and all(len(line) <= 40 for line in lines) and " ".join(" ".join(lines).split()) == words
    display.message(command := "sweep run " + "x" * 60 + " --resume")  # a command: whole, to copy
    assert stream.getvalue().splitlines()[-1] == command


def test_the_header_of_a_grid_of_two_values_takes_one_line_at_80_columns():
    """The table's header at 80 columns, the labels of a grid over two fields: each column's name
    on one line (the first is not folded into "configuration (by mean test" over "loss)")."""
    lines = _after_one_report(80).splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("configuration"))
    assert lines[header].split("  ")[0] == "configuration (best first)"
    assert [c.strip() for c in lines[header].split("  ") if c.strip()][1:] == [
        "members",
        "test loss: mean over seeds",
        "best member",
    ]
    assert lines[header + 1].startswith("depth=1 learning_rate=0.001 ")  # the first row: no header left over


def test_the_status_lines_wrap_between_their_parts_not_inside_one():
    """At 60 columns the summary and the speed line break between their ``|``-separated parts, so
    that no count is split over two lines (``members`` on one, ``0/16`` on the next)."""
    from rich.console import Console

    spec, clock = grid_spec(name="heat-depth-lr"), Clock()
    plan = make_plan(spec)
    state = ProgressState(spec, plan.trials, clock=clock)
    state.statuses([tune_trial(t.trial_key, "RUNNING") for t in plan.trials[:2]])
    clock.now += 30
    state.report(plan.trials[0].trial_key, {**result(2, [0.5, 0.4, 0.3, 0.2]), "reader_wait_s": 1.5})
    console = Console(file=io.StringIO(), width=60, color_system=None)
    console.print(state.renderable())
    lines = [line.strip() for line in console.file.getvalue().splitlines()]
    assert lines[:3] == ["[heat-depth-lr] 0:30", "trials 0/4 done, 1 compiling, 1 running, 2 pending", "members 0/16"]
    for part in ("member-epochs 8/64", "0.267 member-epochs/s", "ETA 3:30", "waited 1.5 s for data"):
        assert any(part in line for line in lines), (part, lines)
    for width in range(40, 121):  # no width leaves a separator alone on a line or runs past the edge
        narrow = Console(file=io.StringIO(), width=width, color_system=None)
        narrow.print(state.renderable())
        text = narrow.file.getvalue().splitlines()
        assert all(line.strip() not in ("|", "") for line in text[:4]), (width, text[:4])
        assert all(len(line.rstrip()) <= width for line in text), width
    wide = Console(file=io.StringIO(), width=200, color_system=None)  # one line where it fits
    wide.print(state.renderable())
    assert " | ".join(state.summary().split(" | ")[:3]) in wide.file.getvalue()


def _live_display(clock, mode: str = "live"):
    """``(plan, stream, display)``: a display of :func:`grid_spec`'s plan writing to ``stream``."""
    spec = grid_spec()
    plan = make_plan(spec)
    stream = io.StringIO()
    return plan, stream, SweepProgress(ProgressState(spec, plan.trials, clock=clock), mode=mode, stream=stream)


def test_a_typed_ctrl_c_cannot_shift_the_live_display():
    """The terminal echoes a typed ^C where the cursor is: after a frame's last line, as wide as
    the terminal, it would wrap, rich's next frame would start a line low and the first line
    would show twice. While live, every frame ends on an empty line (the cursor at its start);
    the last frame, which stays on the screen, does not."""
    plan, stream, display = _live_display(Clock())
    display.start()
    display.on_step_end(iteration=1, trials=[tune_trial(plan.trials[0].trial_key, "RUNNING")])
    display._live.refresh()
    live = stream.getvalue()
    last_row = live.rstrip("\n").rsplit("\n", 1)[-1]
    assert live.endswith(last_row + "\n") and last_row.startswith("depth=2 learning_rate=0.001")
    display.close()
    final = stream.getvalue()[len(live) :]
    assert final.endswith(last_row + "\n\x1b[?25h")  # the last row, then the line rich ends a display with


def test_a_live_display_says_what_starts_until_the_first_trial_shows():
    """Ray's start takes seconds before Tune creates a trial: a live display says so in its place
    (a plain one prints nothing more), then shows the trials; a stop meanwhile leaves that line."""
    clock = Clock()
    plan, stream, display = _live_display(clock)
    clock.now += 3
    display.starting("starting Ray and the first trial's worker")
    display.start()
    display._live.refresh()
    assert "[tiny] 0:03 | starting Ray and the first trial's worker\n" in stream.getvalue()
    display.on_step_end(iteration=1, trials=[tune_trial(plan.trials[0].trial_key, "RUNNING")])
    display.close()
    final = stream.getvalue().rsplit("starting Ray", 1)[1]
    assert "trials 0/4 done, 1 compiling, 0 running, 3 pending" in final

    _, stopped, early = _live_display(clock)
    early.starting("starting Ray and the first trial's worker")
    early.close()  # a Ctrl-C while Ray starts: the line stays, nothing else
    assert stopped.getvalue().endswith("| starting Ray and the first trial's worker\n\x1b[?25h")
    _, plain, display = _live_display(clock, mode="plain")
    display.starting("starting Ray")
    assert plain.getvalue() == ""
