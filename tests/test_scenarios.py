"""PDEs in 1D, 2D and 3D (issue 31): every stepper of the table in every dimension, APEBench's
coefficients checked against the generic exponax steppers APEBench builds, the aliases."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np
import pytest
from helpers import machine_of

import sweep
from sweep import SpecError
from sweep.problems import STEPPERS, load_problem, pde_stepper

GRID = {1: 16, 2: 8, 3: 8}
OLD_1D = {"Advection", "Diffusion", "AdvectionDiffusion", "Burgers", "KuramotoSivashinsky"}  # test_exponax.py
CASES = [(s, d) for s, row in STEPPERS.items() for d in row.dims if not (d == 1 and s in OLD_1D)]
CHANNELS = {"Burgers": "dims", "GrayScott": 2}


@pytest.fixture
def ex():
    return pytest.importorskip("exponax")


@pytest.mark.parametrize(("stepper", "dims"), CASES)
def test_every_stepper_gives_trajectories_of_its_shape_in_every_dimension(ex, stepper, dims):
    n = GRID[dims]
    problem = load_problem(
        f"exponax:{stepper}",
        {
            "num_spatial_dims": dims,
            "num_points": n,
            "num_train": 2,
            "num_val": 0,
            "num_test": 1,
            "train_steps": 1,
            "test_steps": 1,
            "warmup_steps": 0,  # (Kolmogorov flow on 8 x 8 points settles into its forcing's steady state)
        },
    )
    data = {split: problem.trajectories(split) for split in ("train", "test")}
    channels = CHANNELS.get(stepper, 1)
    channels = dims if channels == "dims" else channels
    grid = (n,) * dims
    assert data["train"].shape == (2, 2, channels, *grid)
    assert data["test"].shape == (1, 2, channels, *grid) and problem.trajectories("val") is None
    assert all(a.dtype == np.float32 and np.isfinite(a).all() for a in data.values())
    assert not np.allclose(data["train"][:, 1], data["train"][:, 0])  # it does move


# APEBench's physical scenarios (commit 77c27f8) as APEBench builds them: the generic stepper,
# its domain, dt and coefficient tuples, written out here from apebench/scenarios/physical.
def _generic(ex, dims):
    g = ex.stepper.generic
    return (
        {
            "Advection": g.GeneralLinearStepper(dims, 1.0, 16, 0.1, linear_coefficients=(0, -0.25, 0, 0, 0)),
            "Diffusion": g.GeneralLinearStepper(dims, 1.0, 16, 0.1, linear_coefficients=(0, 0, 0.008, 0, 0)),
            "AdvectionDiffusion": g.GeneralLinearStepper(
                dims, 1.0, 16, 0.1, linear_coefficients=(0, -0.25, 0.008, 0, 0)
            ),
            "Dispersion": g.GeneralLinearStepper(dims, 1.0, 16, 0.001, linear_coefficients=(0, 0, 0, 0.00025, 0)),
            "HyperDiffusion": g.GeneralLinearStepper(dims, 1.0, 16, 1e-5, linear_coefficients=(0, 0, 0, 0, -0.000075)),
            "Burgers": g.GeneralConvectionStepper(
                dims, 1.0, 16, 0.1, linear_coefficients=(0, 0, 0.0003, 0, 0), convection_scale=0.125
            ),
            "KortewegDeVries": g.GeneralNonlinearStepper(
                dims, 50.0, 16, 0.1, linear_coefficients=(0, 0, 0, -1.0, -0.125), nonlinear_coefficients=(0, -6.0, 0)
            ),
            "KuramotoSivashinsky": g.GeneralNonlinearStepper(
                dims, 60.0, 16, 0.1, linear_coefficients=(0, 0, -1.0, 0, -1.0), nonlinear_coefficients=(0, 0, -1.0)
            ),
        }
        | (
            {  # the generic polynomial stepper applies a_0 once per axis: APEBench's Fisher-KPP only in 1D
                "FisherKPP": g.GeneralPolynomialStepper(
                    1, 1.0, 16, 0.001, linear_coefficients=(20.0, 0, 0.004, 0, 0), polynomial_coefficients=(0, 0, -20.0)
                )
            }
            if dims == 1
            else {}
        )
        | (
            {  # apebench/scenarios/physical/_gray_scott.py: dt 10 in 10 substeps on [0, 1)^d
                "GrayScott": ex.RepeatedStepper(
                    ex.stepper.reaction.GrayScott(
                        dims, 1.0, 16, 1.0, feed_rate=0.04, kill_rate=0.06, diffusivity_1=2e-5, diffusivity_2=1e-5
                    ),
                    10,
                )
            }
            if dims > 1
            else {}
        )
    )


@pytest.mark.parametrize("dims", [1, 2])
def test_the_table_is_apebench_s_scenarios(ex, dims):
    for stepper, reference in _generic(ex, dims).items():
        ours = pde_stepper(f"exponax:{stepper}", {"num_spatial_dims": dims, "num_points": 16})
        u = ex.ic.RandomTruncatedFourierSeries(dims, cutoff=3, max_one=True)(16, key=jax.random.key(1))
        u = np.concatenate([u] * ours.num_channels)
        np.testing.assert_allclose(ours(u), reference(u), atol=1e-6, err_msg=stepper)
        assert not np.allclose(ours(u), u)


def test_kolmogorov_flow_is_apebench_s_under_exponax_0_1_s_drag(ex, monkeypatch):
    # apebench/scenarios/physical/_navier_stokes.py: KolmogorovFlowVorticity(drag=-0.1, diffusivity=0.01,
    # 2π, dt 0.1 in 20 substeps) on exponax 0.1, whose zeroth-order Laplacian sums one 1 per axis (0.2: 1)
    ours = pde_stepper("apebench:phy_kolm_flow_2d", {"num_points": 16})
    monkeypatch.setattr(  # exponax 0.1's build_laplace_operator
        "exponax.stepper._navier_stokes.build_laplace_operator",
        lambda derivative, order=2: jax.numpy.sum(derivative**order, axis=0, keepdims=True),
    )
    reference = ex.RepeatedStepper(
        ex.stepper.KolmogorovFlowVorticity(2, 2 * np.pi, 16, 0.1 / 20, diffusivity=0.01, drag=-0.1), 20
    )
    u = ex.ic.RandomTruncatedFourierSeries(2, cutoff=3, max_one=True)(16, key=jax.random.key(1))
    np.testing.assert_allclose(ours(u), reference(u), atol=1e-5)


def test_a_solver_that_blows_up_is_named_not_returned(ex):
    # Kuramoto-Sivashinsky on [0, 60)^2 at 32 points per axis: NaN within 110 of its 500 warm-up steps
    # (APEBench's own scenario too); 3D at 32 points blew up the same way, as the table's default
    with pytest.raises(
        SpecError,
        match=r"`problem.num_points`: exponax:KuramotoSivashinsky in 2D on 32 points per axis \(dt 0.1, 500 "
        r"warm-up steps\) blew up: 2 of 2 train trajectories are not finite \(the first: 0\); give a finer grid",
    ):
        load_problem(
            "exponax:KuramotoSivashinsky",
            {"num_spatial_dims": 2, "num_points": 32, "num_train": 2, "num_test": 1, "train_steps": 1, "test_steps": 1},
        )


@pytest.mark.parametrize("dims", [1, 2])
def test_kuramoto_sivashinsky_stays_finite_from_64_points(ex, dims):
    data = load_problem(
        "exponax:KuramotoSivashinsky",
        {"num_spatial_dims": dims, "num_points": 64, "num_train": 1, "num_test": 1, "train_steps": 2, "test_steps": 2},
    )
    assert all(np.isfinite(a).all() for a in (data.train_traj, data.test_traj))
    assert 1.0 < np.abs(data.train_traj).max() < 50.0  # chaotic, not blowing up (APEBench plots it in [-6.5, 6.5])


def test_kuramoto_sivashinsky_defaults_to_96_points_in_3d(ex):
    # 32 (the 3D default of the other rows) and 64 points per axis blow up within 110 warm-up steps in
    # 3D, APEBench's scenario as this one (benchmarks/trainer/apebench_table.py); 96 stays finite
    assert pde_stepper("apebench:phy_ks_3d", {}).num_points == 96


def test_trajectories_and_pairs_over_half_the_memory_are_refused_before_anything_is_solved(ex, monkeypatch):
    machine_of(monkeypatch, 2**30)
    # a spec names it on any machine (a store trained elsewhere reads back); only generating it is refused
    assert sweep.Problem("apebench:phy_ks_3d").name == "apebench:phy_ks_3d"
    assert pde_stepper("apebench:phy_ks_3d", {}).num_points == 96  # a stepper alone generates nothing
    machine_of(monkeypatch, 64 * 2**30)
    # the defaults here: 50 x 51 training states, (8 + 30) x 201 validation and test states, 96^3 points
    with pytest.raises(
        SpecError,
        match=r"`problem`: exponax:KuramotoSivashinsky in 3D, 10188 states of 1 channel\(s\) on 96x96x96 points "
        r"\(50 training trajectories of 51 states, 38 validation and test trajectories of 201\), are 33.6 GiB of "
        r"float32 trajectories and 100.7 GiB with the one-step pairs derived from them, more than half of the "
        r"memory available here \(64.0 GiB: the machine's, or its control group's limit where lower\); give fewer "
        r"or shorter trajectories \(num_train, num_test, num_val or "
        r"val_fraction, train_steps, test_steps\) or fewer points \(num_points\), or write .* HDF5 file",
    ):
        load_problem("apebench:phy_ks_3d", {})
    # the channels count: 3D Burgers has three; 4 states of 3 x 8^3 float32, 3 times over, are half of it
    machine_of(monkeypatch, 2 * 3 * 4 * 3 * 8**3 * 4)
    tiny = {"num_points": 8, "num_train": 1, "num_val": 0, "num_test": 1, "train_steps": 1, "test_steps": 1}
    assert load_problem("apebench:phy_burgers_3d", tiny).train_traj.shape == (1, 2, 3, 8, 8, 8)
    with pytest.raises(SpecError, match=r"5 states of 3 channel\(s\) on 8x8x8 points"):
        load_problem("apebench:phy_burgers_3d", tiny | {"test_steps": 2})


def test_apebench_names_are_aliases_of_the_steppers(ex):
    tiny = {"num_points": 8, "num_train": 2, "num_test": 1, "train_steps": 1, "test_steps": 1, "num_val": 0}
    alias = load_problem("apebench:phy_adv_2d", tiny)
    named = load_problem("exponax:Advection", tiny | {"num_spatial_dims": 2})
    assert alias.sample_shape == (1, 8, 8)
    np.testing.assert_array_equal(alias.train_traj, named.train_traj)
    assert sweep.Problem("apebench:phy_kolm_flow_2d", num_points=8).name == "apebench:phy_kolm_flow_2d"


@pytest.mark.parametrize(
    ("name", "options", "match"),
    [
        (
            "apebench:phy_decay_turb_3d",
            {},
            r"`problem.name`: unknown APEBench scenario 'apebench:phy_decay_turb_3d' \(it is defined as "
            r"apebench:phy_decay_turb_2d\); ",
        ),
        (
            "apebench:phy_adv",
            {},
            r"\(give its dimensions: apebench:phy_adv_1d, apebench:phy_adv_2d, apebench:phy_adv_3d\)",
        ),
        ("apebench:phy_advection_2d", {}, r"'apebench:phy_advection_2d' \(did you mean 'apebench:phy_adv_2d'\?\)"),
        ("apebench:2d_phy_adv", {}, r"'apebench:2d_phy_adv' \(did you mean 'apebench:phy_adv_2d'\?\)"),
        ("apebench:phy_adv_2d", {"num_spatial_dims": 3}, r"`problem.num_spatial_dims`: 'apebench:phy_adv_2d' says"),
        (
            "exponax:NavierStokesVorticity",
            {},
            r"`problem.num_spatial_dims`: 1 by default; exponax:NavierStokesVorticity is defined .* in 2 spatial "
            r"dimension\(s\): set num_spatial_dims=2",
        ),
        ("exponax:SwiftHohenberg", {"num_spatial_dims": 4}, r"got 4; .*in 2 or 3 spatial dimension"),
        ("exponax:GrayScott", {"num_spatial_dims": 2, "ic": ["fourier"]}, r"`problem.ic`: .*one name .* per channel"),
        ("exponax:FisherKPP", {"ic_clamp": [1.0, 0.0]}, r"`problem.ic_clamp`: got \[1.0, 0.0\]; give \[low, high\]"),
        ("exponax:Diffusion", {"num_spatial_dims": 2, "ic": "sine"}, r"`problem.ic`: 'sine' .* is 1D only"),
    ],
)
def test_bad_dimensions_and_aliases_are_named(ex, name, options, match):
    with pytest.raises(SpecError, match=match):
        sweep.Problem(name, **options)


def test_fourier_initial_states_are_exponax_0_1_s_as_apebench_draws_them():
    """``ic="fourier"`` draws exactly the states exponax 0.1's RandomTruncatedFourierSeries draws
    from the same keys (recorded in APEBench's environment by
    ``benchmarks/trainer/_exponax01_ic_side.py``); exponax 0.2's own generator draws others."""
    recorded = np.load(Path(__file__).with_name("exponax01_fourier.npz"))
    for name, (dims, points, options) in json.loads(str(recorded["cases"])).items():
        data = load_problem(
            "exponax:Advection",
            {
                "num_spatial_dims": dims,
                "num_points": points,
                "num_train": 4,
                "num_test": 1,
                "train_steps": 1,
                "test_steps": 1,
                "ic": "fourier",
                "ic_options": options,
                "data_seed": 0,
            },
        )
        np.testing.assert_array_equal(np.asarray(data.train_traj)[:, 0], recorded[name], err_msg=name)


@pytest.mark.parametrize(
    ("stepper", "options"),
    [
        ("FisherKPP", {"ic": "grf"}),  # the row's offsets are the fourier generator's arguments
        ("GrayScott", {"num_spatial_dims": 2, "ic": "fourier"}),  # the row's are a list, for its blobs
        ("GrayScott", {"num_spatial_dims": 2, "ic": ["fourier", "gaussian_blobs"]}),
    ],
)
def test_another_initial_state_takes_its_own_defaults(ex, stepper, options):
    tiny = {"num_points": 8, "num_train": 1, "num_test": 1, "train_steps": 1, "test_steps": 1, "num_val": 1}
    data = load_problem(f"exponax:{stepper}", {**tiny, **options})
    assert np.isfinite(data.train_traj).all() and data.train_traj.shape[:2] == (1, 2)
