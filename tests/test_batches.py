"""The one batching scheme (``sweep.training.equal_parts`` and its siblings) and the one rollout engine
(``sweep.training.rollout_steps``) that the trainer and the ensemble share."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sweep.training import equal_parts, in_parts, joined, pad_members, padded, pieces, rollout_steps


@pytest.mark.parametrize("n, most", [(1, 128), (128, 128), (129, 128), (300, 128), (7, 3), (5, 1), (5, 100)])
def test_equal_parts_are_the_fewest_of_one_size_that_cover(n, most):
    count, size = equal_parts(n, most)
    assert size <= most and count * size >= n
    assert count == -(-n // most)  # the fewest parts of at most `most`
    assert count * size - n < count  # less than one item of padding per part


@pytest.mark.parametrize("xp", [np, jnp], ids=["numpy", "jax"])
def test_parts_pad_cut_and_join_back_along_any_axis(xp):
    a = xp.arange(2 * 7 * 3).reshape(2, 7, 3)
    parts = in_parts(a, *equal_parts(7, 3), axis=1)
    assert parts.shape == (2, 3, 3, 3)
    np.testing.assert_array_equal(np.asarray(parts)[:, 2, 1:], 0)  # the last part's padding: zeros
    np.testing.assert_array_equal(joined(parts, 7, axis=1), a)
    first = padded(a, 9, axis=1, fill="first")
    np.testing.assert_array_equal(first[:, 7:], np.broadcast_to(np.asarray(a)[:, :1], (2, 2, 3)))
    assert padded(a, 7, axis=1) is a  # nothing to pad: the same array


def test_pieces_cover_every_item_once_in_order():
    assert pieces(10, 4) == [slice(0, 4), slice(4, 8), slice(8, 10)]
    assert pieces(3, 8) == [slice(0, 3)] and pieces(0, 8) == []


def test_members_are_padded_by_repeating_the_first():
    tree = {"w": np.arange(6.0).reshape(3, 2), "b": np.arange(3)}
    out, n = pad_members(tree, 4)
    assert n == 3 and out["w"].shape == (4, 2) and out["b"].tolist() == [0, 1, 2, 0]


def test_rollout_steps_feeds_each_output_back_and_records_each_state():
    def step(s):
        return 0.5 * s + 1.0

    x = jnp.asarray([[1.0, 2.0], [3.0, 4.0]])
    expected, state = [], np.asarray(x)
    for _ in range(4):
        state = 0.5 * state + 1.0
        expected.append(state)
    last, states = rollout_steps(step, x, 4, 4)
    np.testing.assert_allclose(states, np.stack(expected), rtol=1e-6)
    np.testing.assert_allclose(last, expected[-1], rtol=1e-6)
    reference = jnp.asarray(np.stack(expected)) + 1.0  # each state scored against a reference
    _, errors = rollout_steps(step, x, 4, 4, lambda s, t: jnp.mean(reference[t] - s))
    np.testing.assert_allclose(errors, np.ones(4), rtol=1e-6)


def test_rollout_steps_takes_a_traced_number_of_steps_without_compiling_again():
    traces = []

    @jax.jit
    def run(x, n):
        traces.append(1)
        return rollout_steps(lambda s: s + 1.0, x, n, 5)

    last, states = run(jnp.zeros(3), 2)
    np.testing.assert_array_equal(last, 2.0)
    np.testing.assert_array_equal(states[:, 0], [1.0, 2.0, 0.0, 0.0, 0.0])  # zeros past n
    last, _ = run(jnp.zeros(3), 5)
    np.testing.assert_array_equal(last, 5.0)
    assert len(traces) == 1
