"""Multivariate and event scores (sweep.ensemble) against scoringrules' definitions."""

import numpy as np
import pytest
import scoringrules as sr

from sweep import QueryError
from sweep.ensemble import brier_score, crps_terms, energy_score, twcrps, variogram_score

RNG = np.random.default_rng(0)
VALUES = RNG.normal(size=(7, 5, 2, 6))  # [members, samples, channels, points]
TRUTH = RNG.normal(size=(5, 2, 6))


def _sr(name, *args, **kwargs) -> np.ndarray:
    """scoringrules' ``name`` as a float64 array (its signatures are typed loosely)."""
    return np.asarray(getattr(sr, name)(*args, **kwargs), np.float64)


def _fields(values, truth):
    """scoringrules' layout: forecasts [samples, members, D], observations [samples, D]."""
    return truth.reshape(len(truth), -1), np.moveaxis(values, 0, 1).reshape(values.shape[1], len(values), -1)


@pytest.mark.parametrize("estimator", ["nrg", "fair"])
def test_energy_score_equals_scoringrules_also_a_field_at_a_time(estimator, monkeypatch):
    obs, fct = _fields(VALUES, TRUTH)
    expected = _sr("es_ensemble", obs, fct, m_axis=-2, v_axis=-1, estimator=estimator)
    np.testing.assert_allclose(energy_score(VALUES, TRUTH, estimator=estimator), expected, rtol=1e-10)
    monkeypatch.setattr("sweep.ensemble._field_scores.PAIR_BYTES", 1)  # one field's pairs at a time
    np.testing.assert_allclose(energy_score(VALUES, TRUTH, estimator=estimator), expected, rtol=1e-10)


def test_energy_score_of_identical_members_far_from_zero_is_their_distance():
    same = np.broadcast_to(1e4 + VALUES[:1], VALUES.shape)  # no spread: the pairwise term is 0
    distance = np.linalg.norm((same[0] - TRUTH).reshape(len(TRUTH), -1), axis=-1)
    np.testing.assert_allclose(
        energy_score(same, TRUTH, estimator="fair"), distance, rtol=1e-14
    )  # centred: no cancellation


@pytest.mark.parametrize("p", [0.5, 1.0])
def test_variogram_score_equals_scoringrules_also_in_blocks(p, monkeypatch):
    obs, fct = _fields(VALUES, TRUTH)
    expected = _sr("vs_ensemble", obs, fct, m_axis=-2, v_axis=-1, p=p)
    np.testing.assert_allclose(variogram_score(VALUES, TRUTH, p=p), expected, rtol=1e-10)
    monkeypatch.setattr("sweep.ensemble._field_scores.PAIR_BYTES", 1)  # one row of pairs at a time
    np.testing.assert_allclose(variogram_score(VALUES, TRUTH, p=p), expected, rtol=1e-10)
    w = RNG.uniform(size=(12, 12))
    weighted = _sr("vs_ensemble", obs, fct, w=np.broadcast_to(w, (5, 12, 12)), m_axis=-2, v_axis=-1, p=p)
    np.testing.assert_allclose(variogram_score(VALUES, TRUTH, p=p, weights=w), weighted, rtol=1e-10)


def test_fair_crps_is_skill_minus_spread_as_scoringrules_computes_it():
    skill, spread = crps_terms(VALUES, TRUTH)
    fair = _sr("crps_ensemble", TRUTH, np.moveaxis(VALUES, 0, -1), estimator="fair")
    np.testing.assert_allclose(skill - spread, fair, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(skill, np.abs(VALUES - TRUTH).mean(0))
    assert (spread > 0).all()


@pytest.mark.parametrize("estimator", ["nrg", "fair"])
def test_twcrps_of_exceedance_equals_scoringrules(estimator):
    for t in (-0.5, 0.7):
        expected = _sr("twcrps_ensemble", TRUTH, np.moveaxis(VALUES, 0, -1), a=t, estimator=estimator)
        np.testing.assert_allclose(twcrps(VALUES, TRUTH, t, estimator=estimator), expected, rtol=1e-9, atol=1e-12)
    per_channel = np.array([[0.0], [1.0]])  # one threshold per channel
    got = twcrps(VALUES, TRUTH, per_channel)
    for c, t in enumerate((0.0, 1.0)):
        expected = _sr("twcrps_ensemble", TRUTH[:, c], np.moveaxis(VALUES[:, :, c], 0, -1), a=t)
        np.testing.assert_allclose(got[:, c], expected, rtol=1e-9, atol=1e-12)


def test_twcrps_far_below_every_value_is_the_crps():
    crps = _sr("crps_ensemble", TRUTH, np.moveaxis(VALUES, 0, -1))
    np.testing.assert_allclose(twcrps(VALUES, TRUTH, -1e6), crps, rtol=1e-6, atol=1e-9)


def test_brier_score_of_exceedance_equals_scoringrules():
    t = 0.3
    expected = _sr("brier_score", (TRUTH > t).astype(float), (VALUES > t).mean(0))
    np.testing.assert_allclose(brier_score(VALUES, TRUTH, t), expected)
    assert brier_score(np.ones((3, 2)), np.full(2, 2.0), 1.5).tolist() == [1.0, 1.0]  # certain and wrong


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda: energy_score(VALUES, TRUTH[:, :1]), "same sample shape"),
        (lambda: energy_score(VALUES, TRUTH, estimator="pwm"), "estimator='pwm'"),
        (lambda: crps_terms(VALUES[:1], TRUTH), "at least 2 members"),
        (lambda: variogram_score(VALUES, TRUTH, p=0), "p=0"),
        (lambda: variogram_score(VALUES, TRUTH, weights=np.ones((3, 3))), "(12, 12)"),
        (lambda: brier_score(VALUES, TRUTH, "high"), "threshold='high'"),
        (lambda: twcrps(VALUES, TRUTH, np.zeros(4)), "threshold="),
        (lambda: twcrps(VALUES, TRUTH, float("nan")), "finite"),
    ],
)
def test_bad_arguments_are_named(call, named):
    with pytest.raises(QueryError) as e:
        call()
    assert named in str(e.value)
