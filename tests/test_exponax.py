"""exponax trajectories (issue 12): shapes, the steppers and defaults of APEBench, keys, errors."""

from __future__ import annotations

import sys

import jax
import numpy as np
import pytest

import sweep
from sweep import SpecError
from sweep.problems import check_problem, exponax_problem

TINY = {"num_points": 16, "num_train": 2, "num_val": 1, "num_test": 2, "train_steps": 3, "test_steps": 4}

# APEBench 0.1.1's physical scenarios, written out here (phy_adv, phy_diff, phy_burgers, phy_ks):
# the stepper each builds, as exponax's named class with the equivalent coefficients.
APEBENCH = {
    "Advection": (1.0, 0.1, {"velocity": 0.25}),  # GeneralLinearStepper a1 = -0.25
    "Diffusion": (1.0, 0.1, {"diffusivity": 0.008}),  # a2 = 0.008
    "Burgers": (1.0, 0.1, {"diffusivity": 0.0003, "convection_scale": 0.125, "conservative": True}),
    "KuramotoSivashinsky": (
        60.0,
        0.1,
        {"gradient_norm_scale": 1.0, "second_order_scale": 1.0, "fourth_order_scale": 1.0},
    ),
}


def exponax_trajectories(stepper: str, **options) -> dict:
    """The trajectories of each split of ``Problem("exponax:<stepper>", **options)``, as its data has them."""
    data = exponax_problem(stepper, **options)
    return {split: data.trajectories(split) for split in ("train", "val", "test")}


def check_exponax(stepper: str, options: dict) -> None:
    check_problem(f"exponax:{stepper}", options)


@pytest.fixture
def ex():
    return pytest.importorskip("exponax")


@pytest.mark.parametrize("stepper", sorted(APEBENCH))
def test_trajectories_follow_the_apebench_stepper(ex, stepper):
    data = exponax_trajectories(stepper, **TINY, warmup_steps=2)
    assert set(data) == {"train", "val", "test"}
    assert data["train"].shape == (2, 4, 1, 16)
    assert data["val"].shape == (1, 5, 1, 16) and data["test"].shape == (2, 5, 1, 16)
    assert all(a.dtype == np.float32 and np.isfinite(a).all() for a in data.values())
    extent, dt, coefs = APEBENCH[stepper]
    reference = getattr(ex.stepper, stepper)(1, extent, 16, dt, **coefs)
    for traj in data.values():
        following = jax.vmap(jax.vmap(reference))(traj[:, :-1])
        np.testing.assert_allclose(traj[:, 1:], following, rtol=1e-4, atol=1e-5)
        assert not np.allclose(traj[:, 1:], traj[:, :-1])  # it does move


def test_default_initial_states_are_apebench_fourier_5_zero_mean_max_one(ex):
    x0 = exponax_trajectories("Advection", **TINY)["train"][:, 0]
    np.testing.assert_allclose(np.abs(x0).max(axis=(1, 2)), 1.0, rtol=1e-5)
    np.testing.assert_allclose(x0.mean(axis=(1, 2)), 0.0, atol=1e-5)
    spectrum = np.abs(np.fft.rfft(x0[:, 0], axis=-1))
    assert spectrum[:, 6:].max() < 1e-4 * spectrum.max()  # wavenumbers 1..5 only


def test_kuramoto_sivashinsky_defaults_to_apebench_domain_and_warmup(ex):
    grid = {"num_points": 16, "num_train": 1, "num_test": 1, "train_steps": 1, "test_steps": 1}
    warmed = exponax_trajectories("KuramotoSivashinsky", **grid)["train"]
    cold = exponax_trajectories("KuramotoSivashinsky", **grid | {"warmup_steps": 0, "train_steps": 501})["train"]
    np.testing.assert_allclose(warmed, cold[:, 500:], rtol=1e-4, atol=1e-5)


def test_warmup_steps_are_skipped_states(ex):
    warmed = exponax_trajectories("Burgers", **TINY | {"train_steps": 2}, warmup_steps=3)["train"]
    long = exponax_trajectories("Burgers", **TINY | {"train_steps": 5}, warmup_steps=0)["train"]
    np.testing.assert_allclose(warmed, long[:, 3:], rtol=1e-5, atol=1e-6)


def test_generation_is_deterministic_and_per_trajectory(ex):
    a = exponax_trajectories("Advection", **TINY)
    b = exponax_trajectories("Advection", **TINY | {"num_train": 4, "num_val": 0, "num_test": 3})
    assert all(np.array_equal(x, y) for x, y in zip(a.values(), exponax_trajectories("Advection", **TINY).values()))
    # trajectory i does not depend on how many trajectories there are
    assert np.array_equal(a["train"], b["train"][:2]) and np.array_equal(a["test"], b["test"][:2])
    assert b["val"] is None  # num_val=0: no validation trajectories
    # splits and data seeds draw different initial states
    assert not np.allclose(a["train"][:, 0], a["test"][:, 0])
    assert not np.allclose(a["val"][0, 0], a["test"][0, 0])
    other = exponax_trajectories("Advection", **TINY, data_seed=1)
    assert not np.allclose(a["train"], other["train"])


def test_initial_state_generator_and_options_by_name(ex):
    data = exponax_trajectories("Diffusion", **TINY, ic="fourier", ic_options={"cutoff": 2, "offset_range": [0.5, 0.5]})
    x0 = data["train"][:, 0, 0]
    np.testing.assert_allclose(np.abs(x0).max(axis=1), 1.0, rtol=1e-5)  # the default max_one=True kept
    spectrum = np.abs(np.fft.rfft(x0, axis=-1))
    assert spectrum[:, 3:].max() < 1e-4 * spectrum.max()
    assert np.all(np.abs(x0.mean(axis=1)) > 1e-2)  # the offset moved the mean off zero (default: 0)
    blobs = exponax_trajectories("Diffusion", **TINY, ic="gaussian_blobs", ic_options={"num_blobs": 2})
    assert not np.allclose(blobs["train"][:, 0], data["train"][:, 0])


BAD = [
    ({"num_points": 1}, r"`problem.num_points`: got 1; must be an integer >= 2"),
    ({"num_points": 16.0}, r"`problem.num_points`: got 16.0"),
    ({"domain_extent": 0}, r"`problem.domain_extent`: got 0; must be a finite number > 0"),
    ({"domain_extent": float("inf")}, r"`problem.domain_extent`: got inf"),
    ({"dt": -0.1}, r"`problem.dt`: got -0.1; must be a finite number > 0"),
    ({"dt": "0.1"}, r"`problem.dt`: got '0.1'"),
    ({"num_train": 0}, r"`problem.num_train`: got 0; must be an integer >= 1"),
    ({"num_val": -1}, r"`problem.num_val`: got -1; must be an integer >= 0"),
    ({"num_test": 0}, r"`problem.num_test`: got 0; must be an integer >= 1"),
    ({"train_steps": 0}, r"`problem.train_steps`: got 0; must be an integer >= 1"),
    ({"test_steps": True}, r"`problem.test_steps`: got True"),
    ({"warmup_steps": -5}, r"`problem.warmup_steps`: got -5; must be an integer >= 0"),
    ({"data_seed": -1}, r"`problem.data_seed`: got -1; must be a"),  # (an integer >= 0; a non-negative integer)
    ({"data_seed": 2**32}, r"`problem.data_seed`: got 4294967296; must be < 2\*\*32"),
    ({"ic": "white"}, r"`problem.ic`: got 'white'; choose one of fourier, diffused, grf"),
    ({"ic_options": 5}, r"`problem.ic_options`: got 5; give a table"),
    ({"ic_options": {"cutof": 3}}, r"`problem.ic_options.cutof`: not an option of 'fourier' .*allowed: cutoff"),
    ({"ic_options": {"cutoff": 2.5}}, r"`problem.ic_options.cutoff`: got 2.5; must be an integer"),
    ({"ic_options": {"offset_range": [0.1]}}, r"`problem.ic_options.offset_range`: got \[0.1\]; must be a list of 2"),
    (
        {"ic_options": {"std_one": True}},
        r"`problem.ic_options`: .*rejected by exponax 0.1's RandomTruncatedFourierSeries: std_one=True and max_one=True exclude",
    ),
    ({"diffusivity": "a lot"}, r"`problem.diffusivity`: got 'a lot'; must be a finite number"),
    ({"conservative": 1}, r"`problem.conservative`: got 1; must be true or false"),
    ({"order": 2.0}, r"`problem.order`: got 2.0; must be an integer"),
    (
        {"velocity": 1.0},
        r"`problem.velocity`: not an option of exponax:Burgers; allowed: num_spatial_dims, num_points, .*diffusivity",
    ),
]


@pytest.mark.parametrize(
    ("options", "message"), BAD, ids=[next(iter(o)) + "=" + repr(next(iter(o.values()))) for o, _ in BAD]
)
def test_bad_options_are_named_before_any_work(ex, options, message):
    with pytest.raises(SpecError, match=message):
        check_exponax("Burgers", options)
    with pytest.raises(SpecError, match=message):
        exponax_trajectories("Burgers", **options)


def test_unknown_stepper_names_the_supported_ones(ex):
    with pytest.raises(
        SpecError,
        match=r"`problem.name`: unknown exponax stepper 'Wave'; choose one of exponax:Advection, "
        r"exponax:Diffusion, .*exponax:Burgers, .*exponax:KuramotoSivashinsky, .*exponax:KolmogorovFlowVorticity",
    ):
        check_exponax("Wave", {})


def test_missing_exponax_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "exponax", None)  # makes `import exponax` fail
    with pytest.raises(
        SpecError, match=r"`problem.name`: \"exponax:Burgers\" needs the optional package exponax; .*seed-sweep\[pde\]"
    ):
        check_exponax("Burgers", {})


def test_exponax_problem_derives_pairs_and_generates_validation_trajectories(ex):
    from sweep.problems import coordinates, load_problem

    problem = sweep.Problem("exponax:Diffusion", **{k: v for k, v in TINY.items() if k != "num_val"})
    data = load_problem(problem.name, problem.options)  # a generator, not the import path exponax:Diffusion
    raw = exponax_trajectories("Diffusion", **TINY)  # the same trajectories: num_val = 0.1 of 4 -> 1
    for split in ("train", "val", "test"):
        np.testing.assert_array_equal(data.trajectories(split), raw[split])
    assert (data.train.size, data.val.size, data.test.size) == (6, 4, 8)  # every consecutive pair
    np.testing.assert_array_equal(data.train.y[:3], raw["train"][0, 1:])
    none = load_problem(problem.name, problem.options | {"val_fraction": 0})
    assert none.val_traj is None and none.val.size == 0
    np.testing.assert_allclose(coordinates("exponax:KuramotoSivashinsky", {"num_points": 4}), [0, 15, 30, 45])


def test_exponax_problem_options_are_checked_when_the_spec_is_built(ex):
    with pytest.raises(SpecError, match=r"`problem.val_fraction`: got 0.2, but num_val=2 says how many validation"):
        sweep.Problem("exponax:Burgers", num_val=2, val_fraction=0.2)
    with pytest.raises(SpecError, match=r"`problem.dt`: got -0.1; must be a finite number > 0"):
        sweep.Problem("exponax:Burgers", dt=-0.1)
    with pytest.raises(SpecError, match=r"unknown exponax stepper 'Burgres' \(did you mean 'Burgers'\?\)"):
        sweep.Problem("exponax:Burgres")
    with pytest.raises(SpecError, match=r"unknown exponax stepper 'Wave'"):
        sweep.Problem("exponax:Wave")


def test_missing_exponax_is_named_when_the_spec_is_built(monkeypatch):
    monkeypatch.setitem(sys.modules, "exponax", None)
    with pytest.raises(SpecError, match=r"needs the optional package exponax; .*seed-sweep\[pde\]"):
        sweep.Problem("exponax:Advection")
