"""Serving a greedy selection of two architectures (issue 35): `/predict` answers the blend's
weighted mean and std, `/rollout` its calibrated std and conformal intervals per rollout step
(the calibration the blend holds, served with it),
and a calibrated rollout longer than the calibration's trajectories is a 422 naming `steps`."""

from __future__ import annotations

import numpy as np
import pytest
from _blocks import datasets_of, trained_blocks
from _serving import served
from helpers import tiny_spec

import sweep
from sweep.ensemble import Blend
from sweep.planning import make_plan
from sweep.store import aggregate_blocks

PROBLEM = sweep.Problem("heat1d", num_points=16, num_samples=60, data_seed=0, trajectory_steps=3)
PLAN = make_plan(tiny_spec(problem=PROBLEM, seeds=2, seeds_per_trial=2, grid={"model.depth": [1, 2]}))


@pytest.fixture(scope="module")
def blend(tmp_path_factory):
    """Members of both depths, one of them counted twice, recalibrated on the validation split."""
    path = tmp_path_factory.mktemp("serve-blend") / "ensembles"
    aggregate_blocks(path, trained_blocks(PLAN), plan=PLAN, datasets=datasets_of(PLAN))
    return Blend.of(sweep.load(path), [2, 1, 1, 0]).recalibrate("val")


@pytest.fixture(scope="module")
def client(ray_session, blend):
    with served(blend, max_batch=4, name="blend") as c:  # its calibration travels with it
        yield c


def test_predict_answers_the_weighted_mean_and_std_of_both_architectures(client, blend):
    x = blend.parts[0].samples()[0][:4]
    body = client.post("/predict", json={"x": x.tolist(), "calibrated": True, "interval": 0.9}).json()
    mean, std = blend.mean_std(x, calibrated=True)
    low, high = blend.predict_interval(x, level=0.9)
    np.testing.assert_allclose(np.asarray(body["mean"], np.float32), mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(body["std"], np.float32), std, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(body["low"], np.float32), low, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(body["high"], np.float32), high, rtol=1e-5, atol=1e-6)
    info = client.get("/info").json()
    assert info["members"] == 3 and info["weights"] == pytest.approx(blend.weights.tolist())
    assert info["config_id"].count("+") == 1  # two structural configs in one service


def test_rollout_answers_calibrated_std_and_intervals_per_step(client, blend):
    x0 = blend.parts[0].samples()[0][:2]
    body = client.post("/rollout", json={"x0": x0.tolist(), "steps": 3, "calibrated": True, "interval": 0.5})
    assert body.status_code == 200, body.text
    got = {k: np.asarray(v, np.float32) for k, v in body.json().items() if k in ("mean", "std", "low", "high")}
    mean, std = blend.rollout_mean_std(x0, 3, calibrated=True)
    np.testing.assert_allclose(got["mean"], mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["std"], std, rtol=1e-5, atol=1e-6)
    cal = blend.calibration
    assert cal is not None and cal.rollout_quantiles is not None
    q = cal.rollout_quantiles[cal.levels.index(0.5)]  # [steps, channels]
    half = q[:, None, :, None] * std[1:]
    np.testing.assert_allclose(got["high"][1:], mean[1:] + half, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["low"][1:], mean[1:] - half, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got["low"][0], x0)  # step 0 is the initial state itself
    plain = client.post("/rollout", json={"x0": x0.tolist(), "steps": 3}).json()
    np.testing.assert_allclose(np.asarray(plain["std"], np.float32), blend.rollout_mean_std(x0, 3)[1], rtol=1e-5)


def test_a_calibrated_rollout_past_the_fitted_steps_is_a_422_naming_steps(client, blend):
    x0 = blend.parts[0].samples()[0][:1]
    r = client.post("/rollout", json={"x0": x0.tolist(), "steps": 4, "calibrated": True})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == "steps" and "at most 3 steps" in r.json()["error"]["allowed"]
    assert client.post("/rollout", json={"x0": x0.tolist(), "steps": 4}).status_code == 200
