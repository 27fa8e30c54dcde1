"""An inverse problem found by import path ("inverse:heat_diffusivity"): heat1d fields in, their
diffusivity out."""

import numpy as np

import sweep

DIFFUSIVITIES = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5)


def heat_diffusivity(num_points: int = 16, per_level: int = 30, vector: bool = False, data_seed: int = 0):
    """Each sample a heat1d box function and its state one BTCS step later (two input channels,
    ``[n, 2, points]``), for one of :data:`DIFFUSIVITIES`; the target is that diffusivity
    (``[n]``), or with ``vector`` the diffusivity and the box's mean (``[n, 2]``). The train and
    test samples of each diffusivity are those heat1d draws for it (its own data seed), each split
    shuffled (so that its first samples, those a store keeps, cover every diffusivity)."""
    splits = {"train": ([], []), "test": ([], [])}
    for level, diffusivity in enumerate(DIFFUSIVITIES):
        data = sweep.problems.heat1d(
            num_points=num_points,
            num_samples=per_level,
            diffusivity=diffusivity,
            data_seed=data_seed * len(DIFFUSIVITIES) + level,
            val_fraction=0,
        )
        for name, split in (("train", data.train), ("test", data.test)):
            x = np.concatenate([split.x, split.y], axis=1)  # the field before and after the step
            d = np.full(len(x), diffusivity, np.float32)
            y = np.stack([d, split.x.mean(axis=(1, 2))], axis=1) if vector else d
            splits[name][0].append(x)
            splits[name][1].append(y)
    order = {name: np.random.default_rng(data_seed).permutation(sum(map(len, xs))) for name, (xs, _) in splits.items()}
    return {
        name: (np.concatenate(xs)[order[name]], np.concatenate(ys)[order[name]]) for name, (xs, ys) in splits.items()
    }


def returns_none(**_):
    """Not a data function: returns nothing."""
    return None


def returns_one_array(**_):
    """Not a data function: one array."""
    return np.zeros((4, 1, 8), np.float32)


def returns_wrong_mapping(**_):
    """Not a data function: a mapping of splits it does not know."""
    x = np.zeros((4, 1, 8), np.float32)
    return {"training": (x, x), "testing": (x, x)}
