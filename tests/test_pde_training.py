"""Emulators of 2D and 3D PDEs (issue 31): every pdequinox architecture in 2D through the block
trainer, a 3D block trained and rolled out, the training methods (``cut``, ``noise``) and block
invariance for each in 2D."""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import assert_same_member, convolves, invoke, member, tiny_spec

import sweep
from sweep import SpecError, training

METRICS = ("nrmse", "vrmse", "correlation")


def pde_spec(dims: int, model: sweep.Model | None = None, **fields) -> sweep.SweepSpec:
    n = 8
    return tiny_spec(
        problem=sweep.Problem(
            "exponax:Diffusion",
            num_spatial_dims=dims,
            num_points=n,
            num_train=3,
            num_test=2,
            num_val=1,
            train_steps=3,
            test_steps=3,
        ),
        model=model or sweep.Model("ConvNet", hidden_channels=4, depth=1, activation="relu"),
        training=sweep.Training(
            **{"epochs": 2, "batch_size": 3, "report_every": 1, "rollout_steps": 3, "rollout_metrics": METRICS} | fields
        ),
    )


@pytest.fixture(scope="module")
def data_2d():
    pytest.importorskip("exponax")
    return sweep.load_data(pde_spec(2))


# slow (each compiles a 2D training and rollout for 10-40 s): in the default run every architecture
# builds and runs in test_models.py::test_every_architecture_builds_runs_and_counts_like_pdequinox, and a
# convolutional and a spectral one train and roll out in 2D here
ARCHITECTURES = [
    sweep.Model("ConvNet", hidden_channels=4, depth=1, activation="relu"),  # pde_spec's (relu: ConvNet's default)
    pytest.param(sweep.Model("ClassicResNet", hidden_channels=4, num_blocks=1), marks=pytest.mark.slow),
    pytest.param(sweep.Model("ModernResNet", hidden_channels=4, num_blocks=1), marks=pytest.mark.slow),
    pytest.param(
        sweep.Model("DilatedResNet", hidden_channels=4, num_blocks=1, dilation_rates=[1, 2]), marks=pytest.mark.slow
    ),
    pytest.param(sweep.Model("ClassicUNet", hidden_channels=4, num_levels=1), marks=pytest.mark.slow),
    pytest.param(sweep.Model("ModernUNet", hidden_channels=4, num_levels=1), marks=pytest.mark.slow),
    sweep.Model("ClassicFNO", hidden_channels=4, num_modes=3, num_blocks=1),
]


@pytest.mark.parametrize("model", ARCHITECTURES, ids=lambda m: m.name)
def test_every_architecture_trains_and_rolls_out_in_2d(data_2d, model):
    # a block of 3, as the method tests': the ConvNet's program is theirs ("one"), not one more
    spec = pde_spec(2, model, epochs=1)
    stacked, history = sweep.train_block(spec, [0, 1, 2], data=data_2d)
    net = member(stacked, 1)
    assert net(jnp.zeros((1, 8, 8))).shape == (1, 8, 8)
    for name in METRICS:
        assert history.test_rollout[name].shape == (3, 3) and np.isfinite(history.test_rollout[name]).all()
    assert np.isfinite(history.train_loss).all() and not history.diverged.any()


def test_a_3d_block_trains_and_rolls_out():
    pytest.importorskip("exponax")
    spec = pde_spec(3)
    stacked, history = sweep.train_block(spec, [0, 1])
    assert member(stacked, 0)(jnp.zeros((1, 8, 8, 8))).shape == (1, 8, 8, 8)
    assert history.test_rollout["vrmse"].shape == (2, 3) and np.isfinite(history.test_rollout["vrmse"]).all()
    assert history.train_loss[:, -1].tolist() != history.train_loss[:, 0].tolist()  # it learns


METHODS = {
    "one": {},
    "sup": {"unroll": 2},
    "cut": {"unroll": 2, "cut": True},
    "noise": {"noise": 0.05},
    "sup_noise": {"unroll": 2, "noise": 0.05},
    "div": {"unroll": 2, "diverted": True},
    "div_cut": {"unroll": 2, "diverted": True, "cut": True},
    "correct_sequential": {"correct": "sequential"},
    "correct_parallel": {"unroll": 2, "correct": "parallel"},
    "correct_bypass": {"correct": "sequential_with_bypass", "coarse_proportion": 0.25},
    "sup_noise_correct_parallel": {"unroll": 2, "noise": 0.05, "correct": "parallel"},
}


# slow (10-20 s each): unroll, noise, diversion and parallel correction run in the default suite in
# their combinations (cut, div_cut, and sup_noise_correct_parallel at XLA's defaults, where one
# method costs about 20 CPU-seconds)
ALSO_COMBINED = ("sup", "noise", "div", "sup_noise", "correct_parallel")


@pytest.mark.parametrize(
    "method", [pytest.param(m, marks=pytest.mark.slow) if m in ALSO_COMBINED else m for m in METHODS]
)
def test_a_member_is_the_same_in_any_2d_block_with_each_method(data_2d, method):
    spec = pde_spec(2, **METHODS[method])
    block_model, block_history = sweep.train_block(spec, [0, 1, 2], data=data_2d)
    alone_model, alone_history = sweep.train(spec, 1, data=data_2d)
    assert_same_member(block_model, block_history, 1, alone_model, alone_history)


@pytest.mark.parametrize(
    "model",
    [  # slow, both: their forwards equal vmap's in test_fast_forward.py, and the ConvNet of the
        # method tests above trains through the matmul forward in any block by default
        pytest.param(  # at XLA's defaults only (helpers.AT_XLA_DEFAULTS_SLOW; 11 s of that pytest's 36, cold)
            sweep.Model("ClassicResNet", hidden_channels=2, num_blocks=1, use_norm=True), marks=pytest.mark.slow
        ),
        pytest.param(  # 30-40 s at a high load
            sweep.Model(
                "DilatedResNet", hidden_channels=2, num_blocks=1, dilation_rates=[1, 2], boundary_mode="neumann"
            ),
            marks=pytest.mark.slow,
        ),
    ],
    ids=["ClassicResNet", "DilatedResNet"],
)
def test_a_2d_member_trained_through_the_matmul_forward_is_the_same_in_any_block(data_2d, model):
    """Residual blocks, GroupNorm and dilations in 2D through the trainer's matmul forward (the
    ConvNet of the method tests above takes it too): bitwise block invariance on CPU."""
    spec = pde_spec(2, model, epochs=1)
    template = sweep.models.model_template(model.name, model.options, (1, 8, 8), (1, 8, 8))
    assert not convolves(sweep.models.batched_forward(template), template, jnp.zeros((3, 1, 8, 8)))
    block_model, block_history = sweep.train_block(spec, [0, 1, 2], data=data_2d)
    alone_model, alone_history = sweep.train(spec, 1, data=data_2d)
    assert_same_member(block_model, block_history, 1, alone_model, alone_history)


def test_noise_changes_training_and_each_seed_draws_its_own(data_2d):
    clean = sweep.train_block(pde_spec(2, epochs=1), [0], data=data_2d)[1].train_loss
    noisy = sweep.train_block(pde_spec(2, epochs=1, noise=0.05), [0], data=data_2d)[1].train_loss
    assert not np.array_equal(clean, noisy)


def _grad_step_spec(**fields) -> sweep.SweepSpec:
    """One update per epoch (every window in one batch) of plain SGD with learning rate 1: the
    parameters move by minus the gradient of the unrolled loss."""
    return tiny_spec(
        problem=sweep.Problem("heat1d", num_points=16, num_samples=6, trajectory_steps=3, val_fraction=0.0),
        model=sweep.Model("ConvNet", hidden_channels=4, depth=1, activation="tanh", boundary_mode="dirichlet"),
        optimizer=sweep.Optimizer("sgd", learning_rate=1.0),
        training=sweep.Training(epochs=1, batch_size=5, report_every=1, unroll=3, **fields),
    )


def test_cut_gradients_are_the_sum_of_one_step_gradients_on_the_rolled_out_states():
    spec = _grad_step_spec(cut=True)
    data = sweep.load_data(spec)
    traj = np.asarray(data.train_traj)  # [5, 4, 1, 16]: one window of 3 steps per trajectory, one batch
    assert traj.shape[:2] == (spec.training.batch_size, 4)
    block, state = sweep.init_block(spec, [0], data=data)
    before = member(training.model_of(block, state), 0)
    after_state, _ = sweep.run_chunk(block, state, 1)
    moved = jax.tree_util.tree_map(
        lambda a, b: np.asarray(a, np.float64) - np.asarray(b, np.float64),
        eqx.filter(before, eqx.is_array),
        eqx.filter(member(training.model_of(block, after_state), 0), eqx.is_array),
    )
    params, static = eqx.partition(before, eqx.is_array)

    def one_step_loss(p, states, targets):
        return jnp.mean((jax.vmap(eqx.combine(p, static))(states) - targets) ** 2)

    states, total = jnp.asarray(traj[:, 0]), None
    for k in range(3):  # the states the member's own rollout reaches, as constants
        g = jax.grad(one_step_loss)(params, states, jnp.asarray(traj[:, k + 1]))
        total = g if total is None else jax.tree_util.tree_map(jnp.add, total, g)
        states = jax.vmap(before)(states)
    expected = jax.tree_util.tree_map(lambda g: np.asarray(g, np.float64) / 3, total)
    for got, want in zip(jax.tree_util.tree_leaves(moved), jax.tree_util.tree_leaves(expected)):
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=1e-6)

    # backpropagating through the unroll is another gradient
    full = _grad_step_spec(cut=False)
    block, state = sweep.init_block(full, [0], data=data)
    through = member(training.model_of(block, sweep.run_chunk(block, state, 1)[0]), 0)
    assert not all(
        np.allclose(np.asarray(a) - np.asarray(b), -d, rtol=2e-4, atol=1e-6)
        for a, b, d in zip(
            jax.tree_util.tree_leaves(eqx.filter(through, eqx.is_array)),
            jax.tree_util.tree_leaves(eqx.filter(before, eqx.is_array)),
            jax.tree_util.tree_leaves(moved),
        )
    )


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"cut": True}, r"`training.cut`: true with unroll=1; .* needs unroll >= 2"),
        ({"cut": "yes", "unroll": 2}, r"`training.cut`: got 'yes'; must be true or false"),
        ({"noise": -0.1}, r"`training.noise`: got -0.1; must be a finite number >= 0"),
        ({"noise": float("inf")}, r"`training.noise`: got inf"),
        ({"diverted": True}, r"`training.diverted`: true with unroll=1; .* unroll >= 2"),
        ({"diverted": 1, "unroll": 2}, r"`training.diverted`: got 1; must be true or false"),
        ({"correct": "serial"}, r"`training.correct`: got 'serial'; choose one of 'sequential', 'parallel'"),
        ({"correct": "parallel", "coarse_proportion": 0}, r"`training.coarse_proportion`: got 0; .* \(0, 1\]"),
    ],
)
def test_bad_methods_are_named(fields, match):
    with pytest.raises(SpecError, match=match):
        sweep.Training(**fields)


def test_default_methods_keep_config_ids():
    identity = sweep.Training().identity()
    assert not {"cut", "noise", "diverted", "correct", "coarse_proportion"} & set(identity)
    assert sweep.Training(unroll=2, diverted=True).identity()["diverted"] is True
    assert sweep.Training(unroll=2, cut=True).identity()["cut"] is True


@pytest.mark.parametrize("fields", [{"unroll": 2, "diverted": True}, {"correct": "parallel"}])
def test_a_stepper_method_needs_a_pde_problem(fields):
    with pytest.raises(
        SpecError, match=r"`training.(diverted|correct)`: needs the problem's exponax stepper.*'heat1d'"
    ):
        tiny_spec(training=sweep.Training(**fields))


@pytest.mark.parametrize(
    ("problem", "training", "said"),
    [
        ({}, {"unroll": 4}, r"`training.unroll`: got 4; the training trajectories of 'exponax:Diffusion' have 3 steps"),
        (
            {},
            {"rollout_steps": 4},
            r"`training.rollout_steps`: got 4; the validation and test trajectories .* have 3 steps",
        ),
        (
            {"history": 2},
            {"rollout_steps": 3},
            r"`training.rollout_steps`: got 3; .* have 2 steps after the first 2 states",
        ),
        ({}, {"unroll": 2, "rollout_steps": 3}, None),  # as long as they are: trains
    ],
)
def test_an_unroll_or_rollout_longer_than_the_trajectories_is_refused_before_they_are_solved(problem, training, said):
    """Checked from each configuration's options before a run or a plan (at APEBench's sizes
    solving them takes minutes), as `load_data` checks the solved trajectories."""
    spec = pde_spec(1)
    spec = dataclasses.replace(
        spec, problem=spec.problem.replace(**problem), training=dataclasses.replace(spec.training, **training)
    )
    if said is None:
        sweep.plan(spec)
        sweep.load_data(spec)  # (the same bounds as the solved trajectories': none refused there)
        return
    with pytest.raises(SpecError, match=rf"^{said}"):
        sweep.plan(spec)


def test_a_grid_over_the_steps_is_checked_per_configuration():
    """The base spec's 3 test steps would not hold 5 rollout steps; every configuration's do (a
    stored spec of this kind stays readable: nothing is refused when it is made)."""
    spec = pde_spec(1, rollout_steps=5)
    grown = dataclasses.replace(spec, grid={"problem.test_steps": [5, 6]})
    assert sweep.plan(grown).trials
    with pytest.raises(
        SpecError, match=r"^`grid` \(problem.test_steps=4\): `training.rollout_steps`: got 5; .* have 4"
    ):
        sweep.plan(dataclasses.replace(spec, grid={"problem.test_steps": [4, 6]}))


@pytest.mark.parametrize(
    ("space", "said"),
    [
        ({"training.unroll": sweep.randint(1, 8)}, r"training.unroll=7 makes no valid spec \(`training.unroll`: got 7"),
        ({"training.rollout_steps": sweep.choice([1, 9])}, r"training.rollout_steps=9 makes no valid spec"),
        ({"training.unroll": sweep.randint(1, 4)}, None),  # 1..3: every value holds
    ],
)
def test_a_search_that_may_propose_a_longer_unroll_or_rollout_is_refused_before_work(space, said):
    pytest.importorskip("optuna")
    spec = dataclasses.replace(pde_spec(1), search=sweep.Search(space=space, configurations=2, batch=1))
    if said is None:
        sweep.plan(spec)
        return
    with pytest.raises(SpecError, match=rf"^`search.space`: {said}"):
        sweep.plan(spec)


def test_the_points_a_search_asked_and_a_large_space_are_checked_for_the_steps_too():
    """The configurations a search has asked so far (a resumed search's points), and a space of more
    combinations of bounding values than are tried together (70 x 60 x 2): each field's values alone."""
    pytest.importorskip("optuna")
    search = sweep.Search(space={"training.unroll": sweep.randint(1, 4)}, configurations=2, batch=1)
    asked = dataclasses.replace(pde_spec(1), search=search).with_points(
        [{"training.unroll": 2}, {"training.unroll": 5}]
    )
    with pytest.raises(SpecError, match=r"^`points\[1\]` \(training.unroll=5\): `training.unroll`: got 5"):
        asked.check_new()
    rates, noises = sweep.choice([1e-4 * (1 + i) for i in range(70)]), sweep.choice([0.01 * i for i in range(60)])
    large = {"optimizer.learning_rate": rates, "training.noise": noises, "training.unroll": sweep.randint(1, 8)}
    spec = dataclasses.replace(pde_spec(1), search=sweep.Search(space=large, configurations=2, batch=1))
    with pytest.raises(SpecError, match=r"^`search.space`: training.unroll=7 makes no valid spec"):
        spec.check_new()


@pytest.mark.parametrize("option", [{"normalize": "zscore"}, {"history": 2}])
def test_a_stepper_method_refuses_normalised_or_stacked_states(option):
    spec = pde_spec(1)
    with pytest.raises(SpecError, match=r"`training.correct`: the problem's stepper advances one state in physical"):
        dataclasses.replace(
            spec, problem=spec.problem.replace(**option), training=sweep.Training(correct="parallel", epochs=1)
        )


@pytest.mark.parametrize("option", [{"normalize": "none"}, {"history": 1}])
def test_a_stepper_method_trains_with_the_settings_its_refusal_asks_for(option):
    """The refusal above says `set normalize="none" and history=1`: written out, they train."""
    pytest.importorskip("exponax")
    spec = _sgd_2d(correct="parallel")
    spec = dataclasses.replace(spec, problem=spec.problem.replace(**option))
    _, after = _one_update(spec, sweep.load_data(spec))
    assert all(
        np.isfinite(np.asarray(leaf)).all() for leaf in jax.tree_util.tree_leaves(eqx.filter(after, eqx.is_array))
    )


def _one_update(spec, data):
    """``(member before, member after)`` one chunk of one member of ``spec``."""
    block, state = sweep.init_block(spec, [0], data=data)
    before = member(training.model_of(block, state), 0)
    return before, member(training.model_of(block, sweep.run_chunk(block, state, 1)[0]), 0)


def _sgd_2d(**fields) -> sweep.SweepSpec:
    """One update of plain SGD (learning rate 1) on every window (or pair) of one trajectory of
    3 steps, all in one batch of 2."""
    spec = pde_spec(2, epochs=1, batch_size=2, rollout_steps=0, rollout_metrics=["nrmse"], **fields)
    return dataclasses.replace(
        spec, optimizer=sweep.Optimizer("sgd", learning_rate=1.0), problem=spec.problem.replace(num_train=1)
    )


def _moved(before, after):
    return [
        np.asarray(b, np.float64) - np.asarray(a, np.float64)
        for a, b in zip(
            jax.tree_util.tree_leaves(eqx.filter(after, eqx.is_array)),
            jax.tree_util.tree_leaves(eqx.filter(before, eqx.is_array)),
        )
    ]


def test_the_diverted_chain_fits_the_exponax_step_from_the_members_own_states():
    pytest.importorskip("exponax")
    spec = _sgd_2d(unroll=2, diverted=True)
    data = sweep.load_data(spec)
    before, after = _one_update(spec, data)
    params, static = eqx.partition(before, eqx.is_array)
    reference = sweep.problems.pde_stepper("exponax:Diffusion", {**spec.problem.options, "num_spatial_dims": 2})
    traj = jnp.asarray(data.train_traj)  # [1, 4, 1, 8, 8]: windows start at states 0 and 1

    def diverted_loss(p):
        model, losses = eqx.combine(p, static), []
        for start in (traj[0, 0], traj[0, 1]):
            states = start[None]
            for _ in range(2):
                pred = jax.vmap(model)(states)
                losses.append(jnp.mean((pred - jax.vmap(reference)(states)) ** 2))
                states = pred
        return sum(losses) / 4

    expected = jax.tree_util.tree_leaves(jax.grad(diverted_loss)(params))
    for got, want in zip(_moved(before, after), expected):
        np.testing.assert_allclose(got, np.asarray(want, np.float64), rtol=2e-4, atol=1e-7)


@pytest.mark.parametrize("mode", ["sequential", "parallel", "sequential_with_bypass"])
def test_a_corrected_member_predicts_around_the_coarse_stepper(mode):
    pytest.importorskip("exponax")
    spec = _sgd_2d(correct=mode, coarse_proportion=0.5)
    data = sweep.load_data(spec)
    block, state = sweep.init_block(spec, [0], data=data)
    state, evaluation = sweep.run_chunk(block, state, 1)
    net = member(training.model_of(block, state), 0)
    coarse = sweep.problems.pde_stepper("exponax:Diffusion", {**spec.problem.options, "num_spatial_dims": 2}, 0.5)
    x, y = jnp.asarray(data.test.x), jnp.asarray(data.test.y)
    c = jax.vmap(coarse)(x)
    pred = {
        "sequential": jax.vmap(net)(c),
        "parallel": c + jax.vmap(net)(x),
        "sequential_with_bypass": c + jax.vmap(net)(c),
    }[mode]
    np.testing.assert_allclose(float(evaluation["test"]["loss"][0]), float(jnp.mean((pred - y) ** 2)), rtol=1e-5)


def test_a_corrected_sweep_stores_its_rollouts_and_refuses_predictions_outside_the_trainer(tmp_path):
    pytest.importorskip("exponax")
    # the program of the block of 3 of test_a_member_is_the_same_in_any_2d_block_with_each_method[correct_sequential]
    # (every mode of correction is refused alike)
    spec = dataclasses.replace(pde_spec(2, epochs=1, correct="sequential"), seeds=3, seeds_per_trial=3)
    ens = sweep.load(sweep.run(spec, storage=str(tmp_path), options=sweep.RunOptions(executor="local")))
    curves = ens.table.column("test_rollout_nrmse").to_pylist()
    assert [len(c) for c in curves] == [3, 3, 3] and np.isfinite(np.asarray(curves)).all()
    with pytest.raises(sweep.StoreError, match=r"trained with training.correct='sequential'.*not supported yet"):
        ens.predict(np.zeros((1, 1, 8, 8), np.float32))
    # its figure draws the stored curves and says why the predictions are left out; scores say why none
    with pytest.warns(UserWarning, match=r"predictions left out: config \w+ was trained with training.correct"):
        sweep.plot(ens, out=tmp_path / "overview.png")
    assert (tmp_path / "overview.png").stat().st_size > 0
    said = " ".join(invoke("scores", str(tmp_path / spec.name)).output.split())
    assert "not scored: trained with training.correct (a network correcting a coarse stepper)" in said
