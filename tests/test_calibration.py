"""Recalibration: synthetic ensembles of known over- and under-dispersion get their coverage back,
the scale minimises the fair CRPS, and on a store: fitted on the validation split, applied by
mean_std / rollout_mean_std / predict_interval, saved checksummed, refused where it does not belong."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _blocks import datasets_of, trained_blocks
from helpers import tiny_spec

import sweep
from sweep import QueryError
from sweep.ensemble import Blend, Calibration, conformal_quantiles, crps_terms, fit_scale, load_calibration
from sweep.planning import make_plan
from sweep.store import aggregate_blocks

LEVELS = (0.5, 0.9)


def synthetic(rng, samples: int, widths=(0.3, 3.0), members: int = 16, points: int = 8):
    """Members whose spread is ``width`` times the truth's: per channel, ``[M, N, C, P]`` and ``[N, C, P]``."""
    center = rng.normal(size=(samples, len(widths), points))
    truth = center + rng.normal(size=center.shape)
    width = np.array(widths)[:, None]
    return center + width * rng.normal(size=(members, *center.shape)), truth


def coverage(values, truth, scale, quantiles):
    mean, std = values.mean(0), values.std(0)
    half = quantiles[:, None] * scale[:, None] * std  # per channel, on [N, C, P]
    return ((mean - half <= truth) & (truth <= mean + half)).mean(axis=(0, 2))  # per channel


def test_over_and_under_dispersed_members_get_nominal_coverage_back_on_new_samples():
    rng = np.random.default_rng(0)
    values, truth = synthetic(rng, 400)
    scale = fit_scale(values, truth)
    # calibrated: the truth is one more draw about the members' mean, var(y - mean) = var(member) (1 + 1/M),
    # with var(y - mean) = 1 + width^2 / M and var(member) = (scale * width)^2: the scale undoes the width
    width, m = np.array([0.3, 3.0]), len(values)
    np.testing.assert_allclose(scale, np.sqrt((1 + width**2 / m) / (width**2 * (1 + 1 / m))), rtol=0.15)
    quantiles = conformal_quantiles(values.mean(0), values.std(0) * scale[:, None], truth, LEVELS)
    new_values, new_truth = synthetic(rng, 400)
    raw = np.stack([np.quantile(new_values, [(1 - a) / 2, (1 + a) / 2], axis=0) for a in LEVELS])
    raw_coverage = ((raw[:, 0] <= new_truth) & (new_truth <= raw[:, 1])).mean(axis=(1, 3))  # [levels, C]
    assert raw_coverage[1, 0] < 0.45 and raw_coverage[0, 1] > 0.75  # overconfident, underconfident
    for i, level in enumerate(LEVELS):
        got = coverage(new_values, new_truth, scale, quantiles[i])
        np.testing.assert_allclose(got, level, atol=0.03)


def test_the_scale_minimises_the_fair_crps_of_the_stretched_members():
    rng = np.random.default_rng(1)
    values, truth = synthetic(rng, 50, widths=(0.5,))
    (scale,) = fit_scale(values, truth)
    mean = values.mean(0)

    def crps(s):
        skill, spread = crps_terms(mean + s * (values - mean), truth)
        return (skill - spread).mean()

    best = crps(scale)
    assert all(best <= crps(s) + 1e-12 for s in np.linspace(0.01, 10, 2001))
    assert crps(scale * 0.99) > best and crps(scale * 1.01) > best


def test_conformal_multiplier_is_the_order_statistic_of_the_normalised_residuals():
    truth = np.arange(1.0, 10.0).reshape(9, 1)  # residuals 1..9 against a zero mean with std 1
    q = conformal_quantiles(np.zeros_like(truth), np.ones_like(truth), truth, (0.5, 0.9, 0.95))
    assert q[:, 0].tolist() == [5.0, 9.0, np.inf]  # ceil(10 * 0.5) = 5th, ceil(10 * 0.9) = 9th, 10th > 9


PROBLEM = sweep.Problem("heat1d", num_points=16, num_samples=60, trajectory_steps=4)
PLAN = make_plan(tiny_spec(problem=PROBLEM, seeds=6, seeds_per_trial=6))


@pytest.fixture(scope="module")
def ens(tmp_path_factory):
    path = tmp_path_factory.mktemp("calibration") / "ensembles"
    aggregate_blocks(path, trained_blocks(PLAN), plan=PLAN, datasets=datasets_of(PLAN))
    return sweep.load(path)


@pytest.fixture(scope="module")
def fitted(ens):
    return ens.best(5).recalibrate("val", levels=LEVELS)


def test_recalibrate_fits_on_the_validation_split_what_the_array_functions_give(ens, fitted):
    cal = fitted.calibration
    assert (
        cal.split == "val"
        and cal.levels == LEVELS
        and cal.member_ids == tuple(ens.best(5).index["member_id"].to_pylist())
    )
    x, y = fitted.split_samples("val", "test")
    np.testing.assert_allclose(cal.scale, fit_scale(fitted.predict(x), y))
    assert cal.scale.shape == (1,) and cal.rollout_scale is not None and cal.rollout_scale.shape == (4, 1)
    assert cal.rollout_quantiles is not None and cal.rollout_quantiles.shape == (2, 4, 1)
    with pytest.warns(UserWarning, match=r"fitted on the val split, so the scores after it are not held out"):
        rows = fitted.calibration_scores("val").to_pylist()  # on the points it was fitted on, knowingly
    scores = {(r["calibrated"], r["step"]): r for r in rows}
    for step in range(5):  # conformal: at least the level on the points it was fitted on
        assert scores[True, step]["coverage_90"] >= 0.9 and scores[True, step]["coverage_50"] >= 0.5
    assert ens.best(5).calibration is None and fitted.where(seed=fitted.index["seed"].to_pylist()).calibration is None


def test_calibrated_mean_std_rollout_and_intervals_apply_the_scales(fitted):
    cal = fitted.calibration
    x = fitted.samples()[0][:3]
    mean, std = fitted.mean_std(x)
    cmean, cstd = fitted.mean_std(x, calibrated=True)
    np.testing.assert_array_equal(cmean, mean)
    np.testing.assert_allclose(cstd, std * cal.scale[0], rtol=1e-6)
    low, high = fitted.predict_interval(x, level=0.9)
    np.testing.assert_allclose(high - low, 2 * cal.quantiles[1, 0] * cstd, rtol=1e-5)
    np.testing.assert_allclose((low + high) / 2, mean, rtol=1e-5, atol=1e-6)
    rmean, rstd = fitted.rollout_mean_std(x, 3)
    crmean, crstd = fitted.rollout_mean_std(x, 3, calibrated=True)
    np.testing.assert_array_equal(crmean, rmean)
    np.testing.assert_allclose(crstd[1:], rstd[1:] * cal.rollout_scale[:3, None, :, None], rtol=1e-6)
    with pytest.raises(QueryError, match="fitted on 4 steps"):
        fitted.rollout_mean_std(x, 5, calibrated=True)
    with pytest.raises(QueryError, match=r"levels \[0.5, 0.9\]"):
        fitted.predict_interval(x, level=0.8)
    with pytest.raises(QueryError, match="recalibrate"):
        fitted.where(seed=0).mean_std(x, calibrated=True)


def test_a_saved_calibration_reads_back_checked_and_only_for_its_members(ens, fitted, tmp_path):
    path = fitted.calibration.save(tmp_path / "cal.json")
    again = load_calibration(path)
    assert isinstance(again, Calibration) and again.to_dict() == fitted.calibration.to_dict()
    x = fitted.samples()[0][:2]
    np.testing.assert_array_equal(
        ens.best(5).with_calibration(again).predict_interval(x)[1], fitted.predict_interval(x)[1]
    )
    with pytest.raises(QueryError, match="fitted on members"):
        ens.best(4).with_calibration(again)
    body = json.loads(path.read_text())
    body["scale"] = [s * 2 for s in body["scale"]]
    path.write_text(json.dumps(body))
    with pytest.raises(QueryError, match="altered"):
        load_calibration(path)


def test_a_calibration_of_another_store_is_refused_though_its_member_ids_match(ens, fitted, tmp_path):
    """Member ids are renumbered when a store is aggregated again with more seeds: the same ids
    then name other members, so a calibration names the store it was fitted on."""
    import dataclasses

    other = dataclasses.replace(fitted.calibration, store_sha256="0" * 64)  # of another store
    with pytest.raises(QueryError, match=r"fitted on members of the store .* 000000000000\.\.\., this selection is"):
        ens.best(5).with_calibration(other)
    assert ens.best(5).with_calibration(fitted.calibration).calibration is fitted.calibration  # its own: taken


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda e: e.best(5).recalibrate("train"), "split='train'"),
        (lambda e: e.best(5).recalibrate(levels=[0.9, 1.0]), "levels=[0.9, 1.0]"),
        (lambda e: e.best(2).recalibrate(), "needs at least 3 members, 2 of them distinct, to fit a spread"),
        (lambda e: Blend([e.best(1)], [3]).recalibrate(), "(a greedy blend counts a member as often as chosen)"),
        (lambda e: e.best(5).recalibrate(levels=0.995), "the 0.995 interval needs at least 199 points per channel"),
        (lambda e: e.best(5).with_calibration("cal.json"), "load_calibration"),
    ],
)
def test_bad_arguments_are_named(ens, call, named):
    with pytest.raises(QueryError) as e:
        call(ens)
    assert named in str(e.value)


def test_two_members_have_no_finite_best_scale_hence_three(ens):
    """The fair CRPS of two members stretched by ``s`` is ``max(0, |y - mu| - s |d|)``: it only
    falls as ``s`` grows, so a fit would end at its search's upper bound."""
    x, y = ens.best(2).split_samples("val", "test")
    values = ens.best(2).predict(x).astype(np.float64)
    mean = values.mean(0)

    def crps(s: float) -> float:
        skill, spread = crps_terms(mean + s * (values - mean), y)
        return float((skill - spread).mean())

    costs = [crps(s) for s in (0.5, 1, 2, 4, 8, 1e3)]
    assert all(a >= b for a, b in zip(costs, costs[1:])) and costs[0] > costs[-1] == pytest.approx(0, abs=1e-9)
    with pytest.raises(QueryError, match="at least 3 members to scale a spread, got 2"):
        fit_scale(values, y)


def test_rollouts_too_few_for_a_level_are_left_uncalibrated_with_a_warning(ens):
    """The 4 stored trajectories of 16 points give 64 points per step, fewer than the 66 a 98.5%
    interval needs; the one-step samples (6 of 16 points) have them: those are calibrated."""
    with pytest.warns(UserWarning, match=r"rollouts left uncalibrated: the 0.985 interval needs at least 66 points"):
        fitted = ens.best(5).recalibrate(levels=(0.985,))
    assert fitted.calibration is not None and fitted.calibration.rollout_scale is None
    assert np.isfinite(fitted.calibration.quantiles).all()
    with pytest.raises(QueryError, match=r"no rollout scales .* or too few points per step for its levels"):
        fitted.rollout_mean_std(np.zeros((1, 1, 16), np.float32), 2, calibrated=True)
