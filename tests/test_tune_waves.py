"""A plan larger than one wave trains as several Tune experiments, one after another: every member
trained as an uninterrupted run trains it, the display counting every trial, Ctrl-C between
waves stops the run, and the run resumes with the waves it had not started."""

from __future__ import annotations

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
from sweep.tune import Interrupted, _tune_executor, _waves

SPEC = tiny_spec(name="waves", seeds=4, seeds_per_trial=1, training=sweep.Training(epochs=2, batch_size=16))


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


def _last_line(text: str) -> str:
    return [line for line in text.splitlines() if line.startswith("[waves]")][-1]


def test_a_plan_in_waves_trains_every_member_and_resumes_between_waves(ray_session, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(_waves, "wave_size", lambda slots: 2)  # 4 trials: 2 waves of 2
    planned = _waves.waves

    def ctrl_c_after_the_first_wave(trials, options, slots):
        first, *rest = planned(trials, options, slots)
        yield first
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C between two waves (Tune's first experiment has returned)
        yield from rest

    monkeypatch.setattr(_tune_executor, "waves", ctrl_c_after_the_first_wave)
    with pytest.raises(Interrupted, match="2 of 4 members done"):
        sweep.run(SPEC, storage=str(tmp_path), progress="plain")
    assert "trials 2/4 done" in _last_line(capsys.readouterr().out)  # every trial counted from the start
    sweep_dir = tmp_path / "waves"
    assert sorted(p.name for p in sweep_dir.glob("tune-*")) == ["tune-0001"]

    monkeypatch.setattr(_tune_executor, "waves", planned)
    path = sweep.run(SPEC, storage=str(tmp_path), resume=True, progress="plain")
    line = _last_line(capsys.readouterr().out)
    assert "trials 2/2 done" in line and "members 4/4" in line
    # the first wave restored (nothing left in it), then the two trials left in a new wave
    assert sorted(p.name for p in Path(path).glob("tune-*")) == ["tune-0001", "tune-0002"]
    blocks = find_blocks(path, pafs.LocalFileSystem())
    assert set(blocks) == {t.trial_key for t in make_plan(SPEC).trials}
    for t in make_plan(SPEC).trials:
        block = load_block(blocks[t.trial_key].path)
        model, _ = sweep.train_block(SPEC, t.seeds)
        assert tree_allclose(block.state.params, eqx.filter(model, eqx.is_array), exact=True)
    assert len(sweep.load(path)) == 4
