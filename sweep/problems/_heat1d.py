"""1D heat equation, one BTCS step from random box functions (the pdequinox reference example)."""

from __future__ import annotations

import functools
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from .._caches import register
from ._dataset import DEFAULT_VAL_FRACTION, Dataset, as_dataset


def heat1d(
    num_points: int = 48,
    num_samples: int = 1000,
    dt: float = 0.1,
    diffusivity: float = 0.1,
    domain_extent: float = 3.0,
    test_fraction: float = 0.2,
    val_fraction: float = DEFAULT_VAL_FRACTION,
    data_seed: int = 0,
    trajectory_steps: int = 0,
    box_edges: Literal["grid", "averaged"] = "grid",
) -> Dataset:
    """Initial box functions and their state one implicit (BTCS) step later, Dirichlet points excluded.

    The last ``test_fraction`` of the samples are the test set; ``val_fraction`` of all samples,
    drawn from the others with ``data_seed``, the validation set (0: none).

    ``box_edges="grid"`` (the default): a point is 1 inside the box and 0 outside, so the edges
    fall on grid points (as in the pdequinox example, reproduced bit for bit) and the samples
    repeat: about a hundred distinct boxes at 48 points, and at the defaults 197 of the 200 test
    inputs are copies of training inputs; the validation and test losses measure the fit, not
    generalisation (docs/guides/data.md). ``box_edges="averaged"``: each point holds the share of
    its cell (the points halfway to its neighbours) that the box covers, so an edge between two
    points shows as a value between 0 and 1 and no two samples are alike (the same boxes drawn).

    ``trajectory_steps=S > 0`` adds trajectories: every sample's initial state advanced ``S``
    BTCS steps, ``[samples, S + 1, 1, num_points]`` per split (training trajectories for
    unrolled training, validation and test ones for rollout metrics), each split's from its own
    samples. The one-step pairs are the same with or without them (state 0 -> state 1).

    ```python
    data = heat1d(num_points=16, num_samples=10, trajectory_steps=4)
    assert (data.train.size, data.val.size, data.test.size) == (7, 1, 2)
    assert data.test_traj.shape == (2, 5, 1, 16)
    ```
    """
    traj = _generate(
        num_points,
        num_samples,
        float(dt),
        float(diffusivity),
        float(domain_extent),
        data_seed,
        max(trajectory_steps, 1),
        box_edges == "averaged",
    )
    traj = np.asarray(traj[:, :, None, :], dtype=np.float32)
    train_size = num_samples - int(round(num_samples * test_fraction))
    x, y = traj[:, 0], traj[:, 1]
    splits = {"train": (x[:train_size], y[:train_size]), "test": (x[train_size:], y[train_size:])}
    trajectories = {"train": traj[:train_size], "test": traj[train_size:]} if trajectory_steps else None
    return as_dataset(
        splits, "`problem` 'heat1d'", val_fraction=val_fraction, data_seed=data_seed, trajectories=trajectories
    )


def _grid(num_points, domain_extent):
    """Positions of the points: the interior of ``num_points + 2`` equidistant points on [0, L]."""
    return jnp.linspace(0, domain_extent, num_points + 2)[1:-1]


def heat1d_coordinates(num_points: int = 48, domain_extent: float = 3.0, **_: object) -> np.ndarray:
    """The physical position of every point of a ``heat1d`` sample (for plots)."""
    return np.asarray(_grid(num_points, float(domain_extent)))


@register
@functools.partial(jax.jit, static_argnums=(0, 1, 5, 6, 7))
def _generate(num_points, num_samples, dt, diffusivity, domain_extent, data_seed, steps, averaged):
    """``[num_samples, steps + 1, num_points]``: random box functions (``averaged``: each point the
    share of its cell inside the box) and ``steps`` BTCS steps of each."""
    grid = _grid(num_points, domain_extent)
    dx = grid[1] - grid[0]
    laplacian = (
        jnp.diag(jnp.ones(num_points - 1), -1)
        - 2 * jnp.diag(jnp.ones(num_points), 0)
        + jnp.diag(jnp.ones(num_points - 1), 1)
    ) / dx**2
    system_matrix = jnp.eye(num_points) - diffusivity * dt * laplacian

    def discontinuity(key):
        k1, k2 = jax.random.split(key)
        lower = jax.random.uniform(k1, (), minval=0.2 * domain_extent, maxval=0.4 * domain_extent)
        upper = jax.random.uniform(k2, (), minval=0.6 * domain_extent, maxval=0.8 * domain_extent)
        if averaged:  # the overlap of [lower, upper] with each point's cell [x - dx / 2, x + dx / 2]
            covered = jnp.minimum(grid + dx / 2, upper) - jnp.maximum(grid - dx / 2, lower)
            return jnp.clip(covered / dx, 0.0, 1.0)
        return jnp.where((grid >= lower) & (grid <= upper), 1.0, 0.0)

    keys = jax.random.split(jax.random.PRNGKey(data_seed), num_samples)
    initial = jax.vmap(discontinuity)(keys)
    solve = jax.vmap(lambda u: jnp.linalg.solve(system_matrix, u))
    following = solve(initial)  # the first step as it always was, so that the pairs stay bit for bit

    def step(u, _):
        u = solve(u)
        return u, u

    _, later = jax.lax.scan(step, following, None, length=steps - 1)
    return jnp.concatenate([initial[:, None], following[:, None], jnp.moveaxis(later, 0, 1)], axis=1)
