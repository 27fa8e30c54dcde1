"""A plan larger than one wave trains as several Tune experiments, one after another: every member
trained as an uninterrupted run trains it, the display counting every trial, Ctrl-C between
waves stops the run, and the run resumes with the waves it had not started."""

from __future__ import annotations

import dataclasses
import os
import signal
from pathlib import Path

import equinox as eqx
import pyarrow.fs as pafs
import pytest
from helpers import tiny_spec, tree_allclose

import sweep
from sweep.planning import make_plan
from sweep.training import find_blocks, load_block
from sweep.tune import Interrupted, _round_searcher, _waves

SPEC = tiny_spec(name="waves", seeds=2, seeds_per_trial=1, training=sweep.Training(epochs=2, batch_size=16))


def test_waves_split_a_large_plan_evenly_unless_a_scheduler_compares_trials():
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler

    options = sweep.RunOptions()
    trials = list(range(2501))
    assert [len(w) for w in _waves.waves(trials, options, slots=2)] == [834, 834, 833]
    assert [len(w) for w in _waves.waves(trials[:2500], options, slots=100)] == [2500]  # at least 25 trials per slot
    assert [len(w) for w in _waves.waves(trials[:1000], options, slots=2)] == [1000]
    assert len(_waves.waves(trials, sweep.RunOptions(scheduler=ASHAScheduler()), slots=2)) == 1
    budget = sweep.RunOptions(tune_config=tune.TuneConfig(time_budget_s=60))
    assert len(_waves.waves(trials, budget, slots=2)) == 1


def test_rounds_share_an_experiment_while_they_fit_in_a_wave_and_a_failed_round_ends_them():
    """The searcher's side, without Tune: each experiment takes whole waves while they fit in its
    room; the next round is asked for only once every trial of the last one has completed."""
    from ray.tune.search import Searcher

    from sweep.tune._executor import Outcome, Round

    trials = make_plan(dataclasses.replace(SPEC, seeds=6)).trials  # 6 trials of one seed, 2 epochs
    sent: list[Outcome] = []

    def rounds():  # three rounds of 2, 3 and 1 trials; a failure after the second ends them
        for part in (trials[:2], trials[2:5], trials[5:]):
            sent.append((yield Round(tuple(part))))
            if sent[-1].failures:
                return

    started: list[int] = []
    live = _round_searcher.LiveRounds(
        rounds(),
        lambda r: started.append(len(r.trials)),
        parts=lambda ts: [ts[:2], ts[2:]] if len(ts) > 2 else [ts],  # waves of at most 2
        room=lambda: 4,
    )
    live.open()
    assert [live.suggest(f"t{i}") for i in range(3)] == [trials[0].trial_key, trials[1].trial_key, None]
    live.complete("t0", {"epoch": 2}, error=False)
    assert live.suggest("t3") is None and started == [2]  # round 1 still trains
    live.complete("t1", {"epoch": 1}, error=False)  # stopped early (2 epochs planned)
    assert live.suggest("t4") == trials[2].trial_key and started == [2, 3]  # round 2: its first wave of 2
    assert sent == [Outcome(frozenset({trials[1].trial_key}), ())]
    assert live.suggest("t5") == trials[3].trial_key
    live.complete("t4", None, error=True)
    live.complete("t5", {"epoch": 2}, error=False)
    assert live.suggest("t6") == Searcher.FINISHED and live.left  # the room of 4 is full: a new experiment
    live.open()
    assert live.suggest("t7") == trials[4].trial_key
    live.complete("t7", {"epoch": 2}, error=False)
    assert live.suggest("t8") == Searcher.FINISHED and not live.left  # round 2 failed: no round 3
    assert sent[-1].failures and started == [2, 3]


def _last_line(text: str) -> str:
    return [line for line in text.splitlines() if line.startswith("[waves]")][-1]


def test_a_plan_in_waves_trains_every_member_and_resumes_between_waves(ray_session, tmp_path, monkeypatch, capsys):
    # 2 trials: 2 waves of 1 (each trial is a process of about 5 CPU-seconds; how a plan is cut into
    # waves is tested above)
    monkeypatch.setattr(_waves, "wave_size", lambda slots: 1)
    opened, open_experiment = [], _round_searcher.LiveRounds.open

    def ctrl_c_after_the_first_wave(live):
        opened.append(live)
        if len(opened) == 2:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C between two waves (Tune's first experiment has returned)
        open_experiment(live)

    monkeypatch.setattr(_round_searcher.LiveRounds, "open", ctrl_c_after_the_first_wave)
    with pytest.raises(Interrupted, match="1 of 2 members done"):
        sweep.run(SPEC, storage=str(tmp_path), progress="plain")
    assert "trials 1/2 done" in _last_line(capsys.readouterr().out)  # every trial counted from the start
    sweep_dir = tmp_path / "waves"
    assert sorted(p.name for p in sweep_dir.glob("tune-*")) == ["tune-0001"]

    monkeypatch.setattr(_round_searcher.LiveRounds, "open", open_experiment)
    path = sweep.run(SPEC, storage=str(tmp_path), resume=True, progress="plain")
    line = _last_line(capsys.readouterr().out)
    assert "trials 1/1 done" in line and "members 2/2" in line
    # the first wave restored (nothing left in it), then the trial left in a new wave
    assert sorted(p.name for p in Path(path).glob("tune-*")) == ["tune-0001", "tune-0002"]
    blocks = find_blocks(path, pafs.LocalFileSystem())
    assert set(blocks) == {t.trial_key for t in make_plan(SPEC).trials}
    for t in make_plan(SPEC).trials:
        block = load_block(blocks[t.trial_key].path)
        model, _ = sweep.train_block(SPEC, t.seeds)
        assert tree_allclose(block.state.params, eqx.filter(model, eqx.is_array), exact=True)
    assert len(sweep.load(path)) == 2
