"""Unrolled training (``Training(unroll=K)``): what it computes against a hand-rolled
loop, block invariance (bitwise on CPU), resume equals uninterrupted, unroll=1 as before, and
the checks against the data."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from helpers import assert_same_member, member, tiny_spec, tree_allclose

import sweep
from sweep import training

PROBLEM = sweep.Problem("heat1d", num_points=16, num_samples=40, trajectory_steps=6, data_seed=0)
MODEL = sweep.Model("ConvNet", hidden_channels=4, depth=1, activation="relu", boundary_mode="dirichlet")


def unrolled(**changes):
    # 4 epochs in chunks of 2: one program per block layout (3 epochs in chunks of 2 and 1 compiled two)
    base = {
        "epochs": 4,
        "batch_size": 8,
        "report_every": 2,
        "unroll": 3,
        "rollout_steps": 4,
        "rollout_metrics": ("nrmse", "mse"),
    }
    return tiny_spec(problem=PROBLEM, model=MODEL, training=sweep.Training(**base | changes))


@pytest.fixture(scope="module")
def spec():
    return unrolled()


@pytest.fixture(scope="module")
def data(spec):
    return training.load_data(spec)


def test_unrolled_training_is_the_hand_rolled_loop(data):
    spec = unrolled(epochs=1, report_every=1, rollout_steps=0)
    block, state = training.init_block(spec, [3], data=data)
    net = member(training.model_of(block, state), 0)
    traj = jnp.asarray(data.train_traj)  # [28, 7, 1, 16]: 4 windows of 4 states per trajectory
    starts = traj.shape[1] - 3
    key = jax.random.fold_in(jax.random.wrap_key_data(training.member_keys(0, [3])[1][0]), 0)  # epoch 0
    order = np.asarray(jax.random.permutation(key, traj.shape[0] * starts))
    opt = optax.adam(3e-3)
    params, static = eqx.partition(net, eqx.is_array)
    opt_state = opt.init(params)

    def loss(params, window):  # K steps from the window's first state, mean of the per-step MSEs
        model, state, losses = eqx.combine(params, static), window[:, 0], []
        for k in range(1, 4):
            state = jax.vmap(model)(state)
            losses.append(jnp.mean((state - window[:, k]) ** 2))
        return sum(losses) / 3

    batch_losses = []
    for b in range(len(order) // 8):
        index = order[b * 8 : (b + 1) * 8]
        window = jnp.stack([traj[i // starts, i % starts : i % starts + 4] for i in index])
        value, grads = jax.value_and_grad(loss)(params, window)
        updates, opt_state = opt.update(grads, opt_state, params)
        params = eqx.apply_updates(params, updates)
        batch_losses.append(float(value))
    model, history = sweep.train_block(spec, [3], data=data)
    assert tree_allclose(member(model, 0), eqx.combine(params, static), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(history.train_loss[0, -1], np.mean(batch_losses), rtol=1e-5)


@pytest.mark.parametrize("seeds", [[2, 5], [9, 5, 0, 1, 4]])
def test_unrolled_block_invariance_bitwise(spec, data, seeds):
    alone = sweep.train(spec, 5, data=data)
    model, history = sweep.train_block(spec, seeds, data=data)
    assert_same_member(model, history, seeds.index(5), *alone)
    assert history.test_rollout["nrmse"].shape == (len(seeds), 4)


def test_unrolled_resume_equals_uninterrupted(tmp_path, spec, data):
    from sweep.training import load_block, save_block

    block, state = training.init_block(spec, [1, 5], data=data)
    state, history = next(sweep.fit(block, state))  # one chunk, then "crash"
    save_block(tmp_path / "b", spec=spec, state=state, history=history, shapes=training.data_shapes(data))
    saved = load_block(tmp_path / "b")
    resumed, resumed_history = list(sweep.fit(block, saved.state, saved.history))[-1]
    model, history = sweep.train_block(spec, [1, 5], data=data)
    assert tree_allclose(training.model_of(block, resumed), model, exact=True)
    np.testing.assert_array_equal(resumed_history.train_loss, history.train_loss)
    for field in ("val", "test", "val_rollout", "test_rollout"):
        a, b = getattr(resumed_history, field), getattr(history, field)
        assert a.keys() == b.keys() and a
        for name in a:
            assert a[name].dtype == b[name].dtype and np.array_equal(a[name], b[name]), (field, name)


def test_unroll_1_trains_as_before_with_trajectories_and_rollouts_beside(data):
    plain = tiny_spec(
        problem=PROBLEM.replace(trajectory_steps=0),
        model=MODEL,
        training=sweep.Training(epochs=2, batch_size=8, report_every=1),
    )
    beside = unrolled(epochs=2, report_every=1, unroll=1)  # same pairs; trajectories and rollouts added
    model, history = sweep.train_block(plain, [0, 4])
    with_rollouts, rolled = sweep.train_block(beside, [0, 4], data=data)
    assert tree_allclose(with_rollouts, model, exact=True)
    np.testing.assert_array_equal(rolled.train_loss, history.train_loss)
    np.testing.assert_array_equal(rolled.test["loss"], history.test["loss"])
    assert set(rolled.test) == {"loss", "rollout_gmean_nrmse", "rollout_gmean_mse"} and set(history.test) == {"loss"}


def test_unrolled_program_takes_no_pairs_and_no_recompile_per_learning_rate(spec, data):
    block, _ = training.init_block(spec, [0], data=data)
    assert block.data.train.size == 0 and block.data.train_traj.shape == data.train_traj.shape
    assert block.data.test_traj.shape[1] == 5  # only the states the rollout compares: T + 1
    before = block.program._cache_size()
    for lr in (1e-3, 1e-4):
        b, s = training.init_block(spec, [0], [{"learning_rate": lr}], data=data)
        training.run_chunk(b, s, spec.training.report_every)
    assert block.program._cache_size() - before <= 1  # at most one trace (the number of epochs), not one per rate


@pytest.mark.parametrize(
    "changes, problem, message",
    [
        (
            {"unroll": 2},
            {"trajectory_steps": 0},
            (
                r"`training.unroll`: got 2; unrolled training needs training trajectories "
                r"and problem 'heat1d' has none \(heat1d: trajectory_steps="
            ),
        ),
        ({"unroll": 7}, {}, r"`training.unroll`: got 7; the training trajectories of problem 'heat1d' have 6 steps"),
        (
            {"batch_size": 200},
            {},
            r"`training.batch_size`: got 200; with unroll=3 the problem has only 112 training windows",
        ),
        (
            {"unroll": 1, "rollout_steps": 2},
            {"trajectory_steps": 0},
            (
                r"`training.rollout_steps`: got 2; rollouts need test "
                r"trajectories and problem 'heat1d' has none"
            ),
        ),
        (
            {"rollout_steps": 9},
            {},
            r"`training.rollout_steps`: got 9; the val trajectories of problem 'heat1d' have 6 steps",
        ),
    ],
)
def test_data_that_cannot_carry_the_training_is_named(changes, problem, message):
    spec = tiny_spec(problem=PROBLEM.replace(**problem), model=MODEL, training=unrolled().training.replace(**changes))
    with pytest.raises(sweep.SpecError, match=message):
        training.load_data(spec)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"unroll": 0}, r"`training.unroll`: got 0; must be an integer >= 1"),
        ({"rollout_steps": -1}, r"`training.rollout_steps`: got -1; must be an integer >= 0"),
        ({"rollout_steps": 2.5}, r"`training.rollout_steps`: got 2.5"),
        ({"rollout_metrics": "nrmse"}, r"`training.rollout_metrics`: got 'nrmse'; give a list of names"),
        (
            {"rollout_metrics": ["rmse"]},
            r"`training.rollout_metrics\[0\]`: unknown rollout metric 'rmse' \(did you mean .*\); choose one of mse",
        ),
        (
            {"rollout_metrics": ["cross_entropy"]},
            (
                r"`training.rollout_metrics\[0\]`: 'cross_entropy' compares predictions "
                r"with class indices; .*choose one of mse, mae, nrmse"
            ),
        ),
        (
            {"rollout_metrics": ["nrmse", "a.b:nrmse"]},
            r"`training.rollout_metrics\[1\]`: 'a.b:nrmse' and 'nrmse' would both",
        ),
        ({"rollout_steps": 3, "rollout_metrics": []}, r"`training.rollout_metrics`: empty with rollout_steps=3"),
    ],
)
def test_bad_training_fields_are_named(changes, message):
    with pytest.raises(sweep.SpecError, match=message):
        sweep.Training(**changes)


def test_new_fields_at_their_defaults_leave_config_ids_alone():
    spec = tiny_spec()
    assert spec.config_id == "fcd7f9688340"  # as before the fields existed: stores written then still read
    assert "unroll" in spec.training.to_dict() and "unroll" not in spec.structure_dict()["training"]
    assert sweep.SweepSpec.from_dict(spec.to_dict()) == spec
    assert unrolled().config_id != unrolled(unroll=2).config_id != unrolled(rollout_steps=0).config_id


def test_a_grid_value_that_makes_no_valid_spec_is_named_with_the_parts_error():
    """``cut=True`` with a grid over ``unroll`` that holds 1: the error names the grid's value, not
    only the training field it breaks (which the spec file does not set to 1)."""
    problem = sweep.Problem("heat1d", num_points=16, num_samples=60, trajectory_steps=5)
    training = sweep.Training(epochs=2, batch_size=16, unroll=3, cut=True)
    with pytest.raises(
        sweep.SpecError, match=r"^`grid.training.unroll` = 1: `training.cut`: true with unroll=1; cutting gradients"
    ):
        tiny_spec(problem=problem, training=training, grid={"training.unroll": [1, 3]})
