"""Block trainer: block invariance, divergence, no recompilation, resumption, keys, the one loop."""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import assert_same_member, member, tiny_spec, tree_allclose

import sweep
from sweep import training


@pytest.fixture(scope="module")
def spec():
    return tiny_spec(training=sweep.Training(epochs=3, batch_size=16, report_every=1))


@pytest.fixture(scope="module")
def data(spec):
    return training.load_data(spec)


@pytest.fixture(scope="module")
def alone(spec, data):
    """Seed 5 trained alone: the reference for every block layout."""
    return sweep.train(spec, 5, data=data)


@pytest.mark.parametrize("seeds", [[5, 6], [0, 1, 2, 3, 4, 5, 6], list(range(64)), [9, 5, 2]])
def test_block_invariance_bitwise(spec, data, alone, seeds):
    model, history = sweep.train_block(spec, seeds, data=data)
    assert_same_member(model, history, seeds.index(5), *alone)


@pytest.mark.parametrize(("epochs", "report_every"), [(3, 1), (4, 2)])
def test_block_invariance_bitwise_with_epochs_of_a_single_minibatch(data, epochs, report_every):
    # all 42 training pairs in one minibatch, in chunks of one epoch or two
    spec = tiny_spec(training=sweep.Training(epochs=epochs, batch_size=42, report_every=report_every))
    alone = sweep.train(spec, 5, data=data)
    model, history = sweep.train_block(spec, [0, 5, 7], data=data)
    assert_same_member(model, history, 1, *alone)


def test_block_invariance_with_other_learning_rates_beside(spec, data, alone):
    lr = spec.optimizer.learning_rate
    hsets = [{"learning_rate": 1e-2}, {"learning_rate": lr}, {"learning_rate": 1e-4}]
    model, history = sweep.train_block(spec, [3, 5], hsets, data=data)
    assert history.hparams == tuple(hsets)
    assert_same_member(model, history, 1 * 2 + 1, *alone)  # hparams-major, then seeds


def test_learning_rate_from_grid_equals_fixed_in_spec(spec, data, alone):
    lr = spec.optimizer.learning_rate
    gridded = tiny_spec(
        training=spec.training,
        optimizer=sweep.Optimizer("adam", learning_rate=0.5),
        grid={"optimizer.learning_rate": [1e-1, lr]},
    )
    ((config, hsets),) = gridded.expand()
    model, history = sweep.train_block(config, [5], hsets, data=data)
    assert_same_member(model, history, 1, *alone)


def test_member_keys_use_fold_in_not_split():
    init, shuffle = training.member_keys(3, [7])
    expected = jax.random.key_data(jax.random.split(jax.random.fold_in(jax.random.key(3), 7)))
    np.testing.assert_array_equal(init[0], expected[0])
    np.testing.assert_array_equal(shuffle[0], expected[1])


def test_seeds_differ_and_learn(spec, data):
    model, history = sweep.train_block(spec, [0, 1], data=data)
    assert not tree_allclose(member(model, 0), member(model, 1))
    assert history.train_loss.shape == (2, 3) and history.test_loss.shape == (2, 3) and history.val_loss.shape == (2, 3)
    assert (history.train_loss[:, -1] < history.train_loss[:, 0]).all()
    np.testing.assert_array_equal(history.epoch, [1, 2, 3])
    assert not history.diverged.any()


def test_diverging_member_is_frozen_and_flagged(spec, data):
    hsets = [{"learning_rate": 1e30}, {"learning_rate": spec.optimizer.learning_rate}]
    model, history = sweep.train_block(spec, [5], hsets, data=data)
    assert history.diverged.tolist() == [True, False]
    leaves = jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_array))
    assert all(np.isfinite(np.asarray(x)).all() for x in leaves)  # frozen at a finite state
    _, alone_history = sweep.train(spec, 5, data=data)
    np.testing.assert_array_equal(history.test_loss[1], alone_history.test_loss[0])


def test_diverged_member_params_stop_changing(spec, data):
    block, state = training.init_block(spec, [5], [{"learning_rate": 1e30}], data=data)
    state, _ = training.run_chunk(block, state, 1)
    assert bool(state.diverged[0])
    later, _ = training.run_chunk(block, state, 2)
    assert tree_allclose(later.params, state.params, exact=True)
    assert int(later.epoch[0]) == 3


def test_second_block_with_other_learning_rates_does_not_recompile(spec, data):
    block, _ = training.init_block(spec, [0, 1], [{"learning_rate": 1e-3}], data=data)
    sweep.train_block(spec, [0, 1], [{"learning_rate": 1e-3}], data=data)
    compiled = block.program._cache_size()
    again, _ = training.init_block(spec, [2, 3], [{"learning_rate": 5e-2}], data=data)
    assert again.program is block.program
    sweep.train_block(spec, [2, 3], [{"learning_rate": 5e-2}], data=data)
    assert block.program._cache_size() == compiled


def test_resume_from_saved_state_equals_uninterrupted(tmp_path, spec, data):
    from sweep.training import load_block, save_block

    block, state = training.init_block(spec, [1, 5], data=data)
    state, history = next(sweep.fit(block, state))  # one chunk, then "crash"
    save_block(tmp_path / "b", spec=spec, state=state, history=history, shapes=training.data_shapes(data))
    saved = load_block(tmp_path / "b")
    steps = list(sweep.fit(block, saved.state, saved.history))
    assert [int(h.epoch[-1]) for _, h in steps] == [2, 3]  # the chunks still to do, no more
    resumed, resumed_history = steps[-1]
    model, history = sweep.train_block(spec, [1, 5], data=data)
    assert tree_allclose(training.model_of(block, resumed), model, exact=True)
    for field in ("epoch", "train_loss", "test_loss", "val_loss", "diverged"):
        np.testing.assert_array_equal(getattr(resumed_history, field), getattr(history, field))


def test_checkpoint_carries_validation_and_test_curves_and_refuses_an_older_format(tmp_path, spec, data):
    import json

    from sweep.training import load_block, save_block

    block, state = training.init_block(spec, [1, 5], data=data)
    state, history = next(sweep.fit(block, state))
    path = save_block(tmp_path / "b", spec=spec, state=state, history=history, shapes=training.data_shapes(data))
    meta = json.loads((path / "block.json").read_text())
    assert set(meta["history"]["val"]) == set(meta["history"]["test"]) == {"loss"}
    (path / "block.json").write_text(json.dumps(meta | {"format": 1}))
    with pytest.raises(
        sweep.StoreError, match=r"format 1 was written by an older seed-sweep \(trained without a validation"
    ):
        load_block(path)


def test_fit_yields_after_every_chunk_and_stops_at_the_planned_epochs(spec, data):
    block, state = training.init_block(spec, [0], data=data)
    reports = [(int(s.epoch[0]), h.epoch.tolist(), h.test_loss.shape) for s, h in sweep.fit(block, state)]
    assert reports == [(1, [1], (1, 1)), (2, [1, 2], (1, 2)), (3, [1, 2, 3], (1, 3))]
    done, history = list(sweep.fit(block, state))[-1]
    assert list(sweep.fit(block, done, history)) == []  # a finished block has nothing left to do
    with pytest.raises(sweep.SpecError, match=r"`history`: its last report is at epoch 3, the state is at epoch 0"):
        next(sweep.fit(block, state, history))  # the history of another state
    other, _ = training.init_block(spec, [1], data=data)
    with pytest.raises(sweep.SpecError, match=r"`history`: of seeds \[0\] .*, the block's are \[1\]"):
        next(sweep.fit(other, done, history))
    assert int(sweep.run_chunk(block, state, np.int64(1))[0].epoch[0]) == 1  # a NumPy integer is an integer
    for epochs in (0, 1.5, True):
        with pytest.raises(sweep.SpecError, match=rf"`num_epochs`: got {epochs!r}; give the epochs to train"):
            sweep.run_chunk(block, state, epochs)  # type: ignore[arg-type]


def test_clear_caches_drops_compiled_programs(spec, data):
    block, _ = training.init_block(spec, [0, 1], data=data)
    assert training.init_block(spec, [0, 1], data=data)[0].program is block.program  # cached
    sweep.clear_caches()
    assert training.init_block(spec, [0, 1], data=data)[0].program is not block.program


def test_batch_size_larger_than_training_set_is_rejected():
    bad = tiny_spec(training=sweep.Training(epochs=1, batch_size=1000, report_every=1))
    with pytest.raises(sweep.SpecError, match=r"`training.batch_size`: got 1000; the problem has only 42"):
        sweep.train_block(bad, [0])
    one = tiny_spec(problem=sweep.Problem("heat1d", num_points=16, num_samples=3, data_seed=0))
    with pytest.raises(sweep.SpecError, match=r"the problem has only 1 training sample \(batch size"):
        sweep.train_block(one, [0])


@pytest.mark.parametrize(
    ("seeds", "said"),
    [
        ([1, 1], r"duplicate seed\(s\) \[1\]"),
        ([-1], r"got -1; seeds must be non-negative integers below 2\*\*32"),
        ([2**32], r"got 4294967296; seeds must be"),
        ([2.7], r"got 2.7; seeds must be"),  # not truncated to seed 2
        (["3"], r"got '3'; seeds must be"),
        ([True], r"got True; seeds must be"),
        ([], r"got an empty list"),
        (4, r"got 4; give the block's seeds as a list: \[4\] for seed 4, range\(4\) for seeds 0..3"),
        (np.array(4), r"got 4; give the block's seeds as a list: \[4\] for seed 4"),  # not seeds 0..3
        (0, r"got 0; give the block's seeds as a list: \[0\] for seed 0$"),
        (2.5, r"got 2.5; give the block's seeds as a list: \[0, 1, 2\]$"),
    ],
)
def test_bad_seeds_rejected_as_the_specs_are(spec, data, seeds, said):
    with pytest.raises(sweep.SpecError, match=rf"^`seeds`: {said}"):
        sweep.train_block(spec, seeds, data=data)


def test_seeds_may_be_any_sequence_of_integers(spec, data):
    for seeds in (range(2), np.arange(2), jnp.arange(2), [np.int64(0), 1]):
        block, _ = sweep.init_block(spec, seeds, data=data)
        assert block.seeds == (0, 1) and all(type(s) is int for s in block.seeds), seeds


def test_a_set_of_hyperparameters_lacking_one_the_others_give_is_refused(spec, data):
    """Not a NaN rate (a member flagged diverged): the spec gives no b1 to fall back on."""
    sets = [{"learning_rate": 1e-3, "b1": 0.8}, {"learning_rate": 1e-3}]
    with pytest.raises(sweep.SpecError, match=r"^`hparams\[1\]` \{'learning_rate': 0.001\}: no 'b1', which other"):
        sweep.train_block(spec, [0], sets, data=data)
    with_b1 = dataclasses.replace(spec, optimizer=sweep.Optimizer("adam", learning_rate=1e-3, b1=0.9))
    _, history = sweep.train_block(with_b1, [0], sets, data=data)  # the spec's b1 for the second set
    assert not history.diverged.any()
    with pytest.raises(sweep.SpecError, match=r"`hparams\[0\]` .*: names \['b1'\] twice"):
        sweep.train_block(spec, [0], [{"b1": 0.8, "optimizer.b1": 0.7}], data=data)


def test_an_unknown_layout_is_refused(spec, data):
    with pytest.raises(sweep.SpecError, match=r"^`layout`: got 'VMAP'; give one of \['map', 'vmap'\]"):
        sweep.init_block(spec, [0], data=data, layout="VMAP")


@pytest.mark.parametrize(
    ("hparams", "said"),
    [
        (
            {"learning_rate": -1.0},
            r"`hparams\[1\]` \{'learning_rate': -1.0\}: `optimizer.learning_rate`: got -1.0; must be",
        ),
        ({"learning_rate": float("nan")}, r"`optimizer.learning_rate`: got nan; must be a finite number >= 0"),
        (
            {"learning_rat": 1e-3},
            r"`optimizer.learning_rat`: not an argument of optax.adam \(did you mean 'learning_rate'",
        ),
        (
            {"learning_rate": 1e-3, "depth": 2.0},
            r"`optimizer.depth`: not an argument .*; model.depth is no optimizer hyperparameter: set it in the spec",
        ),
    ],
)
def test_hyperparameters_of_a_block_follow_the_specs_rules(spec, data, hparams, said):
    """A rate the spec would refuse (a negative one trains by gradient ascent) is refused as a spec's is."""
    with pytest.raises(sweep.SpecError, match=said):
        sweep.train_block(spec, [0], [{"learning_rate": 1e-3}, hparams], data=data)


def test_numpy_and_jax_scalars_are_rates_as_floats_are(spec, data):
    _, floats = sweep.train_block(spec, [0], [{"learning_rate": 1e-3}, {"learning_rate": 3e-3}], data=data)
    rates = [{"learning_rate": np.float32(1e-3)}, {"learning_rate": jnp.asarray(3e-3, jnp.float32)}]
    _, scalars = sweep.train_block(spec, [0], rates, data=data)
    np.testing.assert_array_equal(scalars.train_loss, floats.train_loss)  # (float32 either way in the program)


def test_structural_grid_must_be_expanded_first(data):
    gridded = tiny_spec(grid={"model.depth": [1, 2]})
    with pytest.raises(sweep.SpecError, match="structural config"):
        sweep.train_block(gridded, [0], data=data)


def test_chunks_cover_all_epochs():
    assert training.chunks(sweep.Training(epochs=25, report_every=10)) == [10, 10, 5]
    assert training.chunks(sweep.Training(epochs=20, report_every=10)) == [10, 10]
    assert training.chunks(sweep.Training(epochs=25, report_every=10), done_epochs=10) == [10, 5]
    assert training.chunks(sweep.Training(epochs=25, report_every=10), done_epochs=13) == [7, 5]
    assert training.chunks(sweep.Training(epochs=25, report_every=10), done_epochs=25) == []


def test_vmap_layout_matches_map_layout_within_tolerance(spec, data):
    fast, h1 = sweep.train_block(spec, [0, 1, 2], data=data, layout="map")
    vm, h2 = sweep.train_block(spec, [0, 1, 2], data=data, layout="vmap")
    assert tree_allclose(fast, vm, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(h1.test_loss, h2.test_loss, rtol=1e-3)


def test_evaluation_holds_the_activations_of_a_minibatch_not_of_the_split():
    """Validation predictions go a minibatch at a time: a split 8 minibatches long adds its own
    bytes and its predictions to a chunk call, not 8 minibatches of hidden activations."""
    from sweep.problems import Split

    spec = tiny_spec(
        problem=sweep.Problem("heat1d", num_points=64, num_samples=120, data_seed=0),
        model=sweep.Model("ConvNet", hidden_channels=64, depth=2, activation="relu", boundary_mode="dirichlet"),
    )
    data = sweep.load_data(spec)
    batch = Split(*(a[: spec.training.batch_size] for a in data.val))
    one, eight = (
        training.compiled_bytes(spec, data._replace(val=Split(*(np.concatenate([a] * k) for a in batch))), (), 1, "map")
        for k in (1, 8)
    )
    added = 7 * sum(a.nbytes for a in batch)  # the samples; a hidden layer's activations are 64x larger than x
    assert 0 < eight - one < 4 * added, (eight - one, added)  # 1.9x; parts of 128 samples: 186x


def test_the_vmap_layout_holds_the_training_split_once_not_once_per_member():
    """§5: the dataset lives once per block. Vmapped, a shuffled copy of the split taken before an
    epoch's scan would be one per member (each member its own order): minibatches are gathered in
    the step instead, so a member adds its state and its step, not the training split."""
    spec = tiny_spec(
        problem=sweep.Problem("heat1d", num_points=64, num_samples=2000, data_seed=0),
        model=sweep.Model("ConvNet", hidden_channels=2, depth=1, activation="relu", boundary_mode="dirichlet"),
    )
    data = sweep.load_data(spec)
    pairs = data.train.x.nbytes + data.train.y.nbytes
    one, eight = (training.compiled_bytes(spec, data, (), m, "vmap") for m in (1, 8))
    assert 0 < (eight - one) / 7 < pairs / 2, ((eight - one) / 7, pairs)  # a copy per member: > pairs each
