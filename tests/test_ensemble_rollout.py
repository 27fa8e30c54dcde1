"""Ensemble rollouts: every member's rollout equals the member rolled alone in a
Python loop, in any chunk of members and any run of steps per call; mean/std equal NumPy over
the rollout; one compiled program whatever the number of steps; errors before any work."""

from __future__ import annotations

import logging

import jax
import numpy as np
import pytest
from _blocks import trained_blocks
from helpers import tiny_spec

import sweep
from sweep import QueryError
from sweep.planning import make_plan
from sweep.store import aggregate_blocks

PLAN = make_plan(tiny_spec(seeds=5, seeds_per_trial=5, grid={"model.depth": [1, 2]}))
STEPS = 6


@pytest.fixture(scope="module")
def ens(tmp_path_factory):
    path = tmp_path_factory.mktemp("rollout") / "ensembles"
    aggregate_blocks(path, trained_blocks(PLAN), plan=PLAN)
    return sweep.load(path)


@pytest.fixture(scope="module")
def x0():
    return np.asarray(sweep.load_data(PLAN.trials[0].spec).test_x[:3])


def rolled_alone(net, x0, steps):
    """``[steps + 1, batch, ...]``: the member applied step by step in a Python loop."""
    states = [x0]
    for _ in range(steps):
        states.append(np.asarray(jax.vmap(net)(states[-1])))
    return np.stack(states)


def test_rollout_equals_each_member_rolled_alone(ens, x0):
    sub = ens.where(depth=2).best(4)  # ranked order, not store order
    y = sub.rollout(x0, STEPS, chunk_size=3)
    assert y.shape == (4, STEPS + 1, 3, 1, 16) and y.dtype == np.float32
    np.testing.assert_array_equal(y[:, 0], np.broadcast_to(x0, (4, *x0.shape)))
    for i, seed in enumerate(sub.index["seed"].to_pylist()):
        np.testing.assert_allclose(y[i], rolled_alone(sub.member(seed=seed), x0, STEPS), rtol=1e-5, atol=1e-6)
    assert np.abs(y[:, -1] - y[:, 0]).max() > 1e-3  # the states move
    for chunk_size in (1, 64):
        np.testing.assert_array_equal(sub.rollout(x0, STEPS, chunk_size=chunk_size), y)


def test_a_rollout_longer_than_one_call_continues_exactly(ens, x0):
    sub = ens.where(depth=1)
    steps = 70  # one call takes at most 64 steps (docs/guides/autoregressive.md): a call of 64 and one of 6
    whole = sub.rollout(x0, steps, chunk_size=2)
    for i, seed in enumerate(sub.index["seed"].to_pylist()):
        np.testing.assert_allclose(whole[i], rolled_alone(sub.member(seed=seed), x0, steps), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(sub.rollout(x0, STEPS), whole[:, : STEPS + 1])  # a rollout is its own prefix


def test_rollout_with_the_vmap_layout_agrees(ens, x0, monkeypatch):
    sub = ens.where(depth=2)
    y = sub.rollout(x0, STEPS)
    monkeypatch.setenv("SWEEP_LAYOUT", "vmap")  # the accelerator layout
    np.testing.assert_allclose(sub.rollout(x0, STEPS, chunk_size=2), y, rtol=1e-5, atol=1e-6)


def test_rollout_mean_std_equals_numpy_over_the_rollout(ens, x0):
    sub = ens.where(depth=2)
    steps = 70  # two runs of steps: 64 (the most one call takes) and 6
    y = sub.rollout(x0, steps).astype(np.float64)
    for chunk_size in (2, 64):
        mean, std = sub.rollout_mean_std(x0, steps, chunk_size=chunk_size)
        assert mean.shape == std.shape == (steps + 1, *x0.shape)
        np.testing.assert_allclose(mean, y.mean(0), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(std, y.std(0), rtol=1e-5, atol=1e-7)
        np.testing.assert_array_equal(std[0], 0)
    assert std[-1].mean() > std[1].mean() > 0  # the members' spread grows over the rollout


class _Compiles(logging.Handler):
    def __init__(self):
        super().__init__()
        self.programs: list[str] = []

    def emit(self, record):
        if record.getMessage().startswith("Compiling"):
            self.programs.append(record.getMessage()[:80])


def test_a_second_rollout_with_the_same_shapes_compiles_nothing_whatever_the_steps(ens, x0):
    sub = ens.where(depth=1)
    sub.rollout(x0, 2)  # compiles the program (and whatever runs around it)
    compiles = _Compiles()
    logging.getLogger("jax").addHandler(compiles)
    try:
        with jax.log_compiles(True):
            sub.rollout(x0, 2)
            sub.rollout(x0, 5)
            sub.rollout_mean_std(x0, 9)
            assert compiles.programs == []
            sub.rollout(x0[:2], 2)  # another batch shape compiles, and the handler sees it
    finally:
        logging.getLogger("jax").removeHandler(compiles)
    assert compiles.programs


@pytest.mark.parametrize("steps", [0, -1, 2.5, True, "3", None])
def test_steps_must_be_a_positive_integer(ens, x0, steps):
    for call in (ens.where(depth=1).rollout, ens.where(depth=1).rollout_mean_std):
        with pytest.raises(QueryError, match=r"\(steps=.*\): the number of steps must be an integer >= 1"):
            call(x0, steps)


def test_rollout_input_errors_are_named_before_any_work(ens, x0):
    sub = ens.where(depth=1)
    with pytest.raises(QueryError, match=r"rollout: x0 has shape \(3, 1, 8\).*shape \(batch >= 1, 1, 16\)"):
        sub.rollout(x0[..., :8], 3)
    with pytest.raises(QueryError, match=r"rollout_mean_std: x0 has shape \(1, 16\)"):
        sub.rollout_mean_std(x0[0], 3)
    with pytest.raises(QueryError, match="spans 2 structural configs"):
        ens.rollout(x0, 3)
    with pytest.raises(QueryError, match="chunk_size=0"):
        sub.rollout(x0, 3, chunk_size=0)


def test_a_model_whose_outputs_differ_from_its_inputs_cannot_be_rolled_out(tmp_path):
    rng = np.random.default_rng(0)
    arrays = {f"{s}_x": rng.normal(size=(n, 1, 8)).astype(np.float32) for s, n in (("train", 16), ("test", 4))}
    arrays |= {f"{s}_y": rng.normal(size=(n, 2, 8)).astype(np.float32) for s, n in (("train", 16), ("test", 4))}
    np.savez(tmp_path / "two.npz", **arrays)
    plan = make_plan(
        tiny_spec(
            problem=sweep.Problem("arrays", path=str(tmp_path / "two.npz")),
            seeds=2,
            training=sweep.Training(epochs=1, batch_size=8, report_every=1),
        )
    )
    aggregate_blocks(tmp_path / "s", trained_blocks(plan), plan=plan)
    ens = sweep.load(tmp_path / "s")
    assert ens.predict(arrays["test_x"]).shape == (2, 4, 2, 8)  # one step is fine
    with pytest.raises(
        QueryError,
        match=r"maps a sample of shape \(1, 8\) to \(2, 8\) \(2 output channels for 1 "
        r"input channels\); a rollout feeds each output back in",
    ):
        ens.rollout(arrays["test_x"], 2)
