"""The PDE benchmarks' metrics (issue 31) against NumPy implementations written here, as built-ins
of training, rollouts and the store."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import sweep
from sweep.metrics import BANDS, BUILTINS, rollout_summaries, summarised_metric, valid_steps, window_mean

RNG = np.random.default_rng(0)
SHAPES = [(1, 16), (2, 8, 6), (3, 4, 4, 5)]


def np_vrmse(p, t):
    axes = tuple(range(1, t.ndim))
    mse = np.mean((p - t) ** 2, axis=axes)
    var = np.mean((t - t.mean(axis=axes, keepdims=True)) ** 2, axis=axes)
    return np.mean(np.sqrt(mse / (var + 1e-7)))


def np_correlation(p, t):
    return np.mean([np.corrcoef(pc.ravel(), tc.ravel())[0, 1] for pc, tc in zip(p, t)])


def np_apebench_nrmse(p, t):  # per channel, summed over the channels (exponax.metrics.nRMSE)
    return sum(np.linalg.norm(pc - tc) / np.linalg.norm(tc) for pc, tc in zip(p, t))


def np_apebench_correlation(p, t):  # per channel, not centred, averaged (exponax.metrics.correlation)
    return np.mean([pc.ravel() @ tc.ravel() / (np.linalg.norm(pc) * np.linalg.norm(tc)) for pc, tc in zip(p, t)])


def np_spectral(p, t, low, high):
    spatial = t.shape[1:]
    diff = np.fft.fftn(p - t, axes=tuple(range(1, t.ndim))) / np.prod(spatial)
    k = np.zeros(spatial)
    for axis, n in enumerate(spatial):
        shape = [1] * len(spatial)
        shape[axis] = n
        k = k + (np.fft.fftfreq(n) * n).reshape(shape) ** 2
    k = np.floor(np.sqrt(k))
    inside = (k >= low) & (k <= high)
    if not inside.any():
        return 0.0
    return np.sqrt(np.mean(np.abs(diff[:, inside]) ** 2))


@pytest.mark.parametrize("shape", SHAPES)
def test_field_metrics_equal_numpy(shape):
    p, t = RNG.normal(size=shape).astype(np.float32), RNG.normal(size=shape).astype(np.float32)
    t = t + np.arange(shape[-1], dtype=np.float32) * 0.3  # low modes carry most of it
    expected = {
        "vrmse": np_vrmse(p, t),
        "correlation": np_correlation(p, t),
        "apebench_nrmse": np_apebench_nrmse(p, t),
        "apebench_correlation": np_apebench_correlation(p, t),
        "spectral_low": np_spectral(p, t, 0, 3),
        "spectral_mid": np_spectral(p, t, 4, 11),
        "spectral_high": np_spectral(p, t, 12, np.inf),
    }
    for name, value in expected.items():
        got = float(BUILTINS[name].per_sample(jnp.asarray(p), jnp.asarray(t)))
        np.testing.assert_allclose(got, value, rtol=2e-5, atol=1e-7, err_msg=name)
    assert float(BUILTINS["correlation"].per_sample(jnp.asarray(t), jnp.asarray(2 * t + 1))) == pytest.approx(1.0)
    assert float(BUILTINS["vrmse"].per_sample(jnp.asarray(t), jnp.asarray(t))) == 0.0
    if shape[0] > 1:  # several channels: APEBench sums the channels' nRMSE, nrmse takes one norm of them all
        joint = np.linalg.norm(p - t) / np.linalg.norm(t)
        assert float(BUILTINS["nrmse"].per_sample(jnp.asarray(p), jnp.asarray(t))) == pytest.approx(joint, rel=2e-5)
        assert abs(joint - np_apebench_nrmse(p, t)) > 0.1


def test_apebench_metrics_are_exponaxs():
    import exponax

    p, t = RNG.normal(size=(2, 12, 10)).astype(np.float32), RNG.normal(size=(2, 12, 10)).astype(np.float32) + 1.0
    for name, theirs in (
        ("apebench_nrmse", exponax.metrics.nRMSE),
        ("apebench_correlation", exponax.metrics.correlation),
    ):
        ours = float(BUILTINS[name].per_sample(jnp.asarray(p), jnp.asarray(t)))
        assert ours == pytest.approx(float(theirs(jnp.asarray(p), jnp.asarray(t))), rel=1e-5), name
    mean_one = (t - t.mean(axis=(1, 2), keepdims=True), p - p.mean(axis=(1, 2), keepdims=True))  # mean zero: Pearson's
    assert float(BUILTINS["apebench_correlation"].per_sample(*map(jnp.asarray, mean_one))) == pytest.approx(
        float(BUILTINS["correlation"].per_sample(*map(jnp.asarray, mean_one))), rel=1e-5
    )


def band_errors(mode: int) -> dict[str, float]:
    """Each band's error of a 40-point field of one Fourier mode against zeros."""
    p = np.cos(2 * np.pi * mode * np.arange(40) / 40)[None].astype(np.float32)
    return {b: float(BUILTINS[f"spectral_{b}"].per_sample(jnp.asarray(p), jnp.zeros_like(p))) for b in BANDS}


def test_a_grid_with_high_modes_has_a_high_band_error():
    errors = band_errors(15)
    assert errors["low"] < 1e-7 and errors["mid"] < 1e-7
    assert errors["high"] == pytest.approx(np.sqrt((0.5**2 + 0.5**2) / 17), rel=1e-5)  # +-15 of 17 with 12 <= |k| <= 20


@pytest.mark.parametrize(("mode", "band"), [(3, "low"), (4, "mid"), (11, "mid"), (12, "high")])
def test_the_bands_split_wavenumbers_as_pdebench_does(mode, band):
    # PDEBench's metric_func: bins [:4] low, [4:12] mid, [12:] high (iLow=4, iHigh=12)
    assert {b for b, e in band_errors(mode).items() if e > 1e-7} == {band}


def test_rollout_summaries_equal_numpy():
    curves = RNG.uniform(0.5, 1.0, size=(3, 40))
    curves[0, :5] = 0.95
    curves[0, 5] = 0.7
    curves[1] = 0.9  # never drops
    curves[2, 0] = np.nan
    assert valid_steps(curves).tolist() == [5, 40, 0]
    np.testing.assert_allclose(window_mean(curves[:2], 6, 12), curves[:2, 5:12].mean(axis=1))
    np.testing.assert_allclose(window_mean(curves[:2], 13, 30), curves[:2, 12:30].mean(axis=1))
    with pytest.raises(ValueError, match="steps 13..30 of curves of 20 steps"):
        window_mean(curves[:, :20], 13, 30)
    with pytest.raises(ValueError, match=r"valid_steps: curves of shape \(2, 0\); need at least one step"):
        valid_steps(np.zeros((2, 0)))


def test_field_metrics_are_built_ins_of_training_and_rollouts():
    names = ("vrmse", "correlation", "apebench_nrmse", "apebench_correlation", "spectral_low", "spectral_mid")
    training = sweep.Training(metrics=names, rollout_steps=3, rollout_metrics=names)
    assert training.metrics == names and training.rollout_metrics == names


def test_each_rollout_metric_has_its_summaries_by_name():
    errors = RNG.uniform(0.1, 2.0, size=(2, 30))
    assert sorted(rollout_summaries("vrmse", errors)) == [
        "rollout_gmean_vrmse",
        "rollout_window_13_30_vrmse",
        "rollout_window_6_12_vrmse",
    ]
    summaries = rollout_summaries("vrmse", errors)
    np.testing.assert_array_equal(summaries["rollout_window_13_30_vrmse"], errors[:, 12:30].mean(axis=1))
    assert list(rollout_summaries("vrmse", errors[:, :29])) == ["rollout_gmean_vrmse", "rollout_window_6_12_vrmse"]
    correlations = np.array([[0.9, 0.85, 0.5] + [0.9] * 27])
    assert {k: v.tolist() for k, v in rollout_summaries("correlation", correlations).items()} == {
        "rollout_valid_steps_correlation": [2.0]
    }
    assert [
        summarised_metric(n) for n in ("rollout_window_6_12_my_err", "rollout_valid_steps_correlation", "loss")
    ] == [
        "my_err",
        "correlation",
        None,
    ]
    training = sweep.Training(rollout_steps=12, rollout_metrics=("nrmse", "correlation"))
    assert training.validation_columns() == [
        "val_loss",
        "val_rollout_gmean_nrmse",
        "val_rollout_window_6_12_nrmse",
        "val_rollout_valid_steps_correlation",
    ]
