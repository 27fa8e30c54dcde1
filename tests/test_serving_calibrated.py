"""`sweep.serve(..., recalibrate=True)`: the calibration is fitted on the validation split when a
generation is opened, /predict answers the calibrated std and conformal intervals as
`Ensemble.mean_std(calibrated=True)` and `predict_interval` compute them, and refuses levels it
was not fitted at, naming the field."""

from __future__ import annotations

import numpy as np
import pytest
from _blocks import datasets_of, trained_blocks
from _serving import PLAN, served

import sweep
from sweep import QueryError
from sweep.serving import ServeOptions
from sweep.store import aggregate_blocks


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve-calibrated")
    aggregate_blocks(root / "ensembles", trained_blocks(PLAN), plan=PLAN, datasets=datasets_of(PLAN))
    return root


@pytest.fixture(scope="module")
def client(ray_session, sweep_dir):
    with served(sweep_dir, max_batch=4, recalibrate=True, name="calibrated") as c:
        yield c


def test_calibrated_std_and_intervals_are_the_ensembles(client, sweep_dir):
    fitted = sweep.load(sweep_dir).recalibrate("val")
    x = fitted.samples()[0][:4]
    body = client.post("/predict", json={"x": x.tolist(), "calibrated": True, "interval": 0.9}).json()
    mean, std = fitted.mean_std(x, calibrated=True)
    low, high = fitted.predict_interval(x, level=0.9)
    np.testing.assert_allclose(np.asarray(body["std"], np.float32), std, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(body["low"], np.float32), low, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(body["high"], np.float32), high, rtol=1e-5, atol=1e-6)
    plain = client.post("/predict", json={"x": x.tolist()}).json()
    np.testing.assert_array_equal(np.asarray(plain["std"], np.float32), fitted.mean_std(x)[1])
    assert "low" not in plain
    info = client.get("/info").json()["calibration"]
    assert info["split"] == "val" and info["levels"] == [0.5, 0.9]
    assert fitted.calibration is not None and info["scale"] == pytest.approx(fitted.calibration.scale.tolist())


@pytest.mark.parametrize(
    ("fields", "field", "allowed"),
    [({"interval": 0.8}, "interval", "[0.5, 0.9]"), ({"calibrated": "yes please"}, "calibrated", "true or false")],
)
def test_a_level_not_fitted_is_a_422_naming_the_field(client, fields, field, allowed):
    r = client.post("/predict", json={"x": np.zeros((1, 1, 16)).tolist(), **fields})
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"] == field and allowed in error["allowed"]


def test_without_validation_samples_recalibrate_is_refused_before_ray_starts(tmp_path):
    aggregate_blocks(tmp_path / "ensembles", trained_blocks(PLAN), plan=PLAN)  # no datasets: no samples
    with pytest.raises(QueryError, match="no val samples"):
        sweep.serve(tmp_path, ServeOptions(recalibrate=True))
