"""Small HDF5 files written with h5py in the layouts PDEBench and The Well ship, for the tests
and the docs: each writer returns the arrays it wrote, ``(samples, time, channels, *spatial)``."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np


def _states(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.normal(size=shape).astype(np.float32)


def pdebench_tensor(path: Path, samples: int = 10, time: int = 6, x: int = 16, seed: int = 0) -> np.ndarray:
    """A 1D PDEBench file: ``tensor`` ``(samples, time, x)``, ``x-coordinate``, ``t-coordinate``."""
    u = _states(np.random.default_rng(seed), (samples, time, x))
    with h5py.File(path, "w") as f:
        f["tensor"] = u
        f["x-coordinate"] = np.linspace(0, 1, x, dtype=np.float32)
        f["t-coordinate"] = np.linspace(0, 1, time + 1, dtype=np.float32)  # PDEBench's 1D files: one more
    return u[:, :, None]


def pdebench_variables(
    path: Path, samples: int = 6, time: int = 5, grid: tuple[int, ...] = (8, 8), seed: int = 0
) -> np.ndarray:
    """A PDEBench compressible-flow file: ``density``, ``pressure``, ``Vx``, ``Vy`` (, ``Vz``)."""
    names = ["density", "pressure", "Vx", "Vy", "Vz"][: 2 + len(grid)]
    rng = np.random.default_rng(seed)
    arrays = {n: _states(rng, (samples, time, *grid)) for n in names}
    with h5py.File(path, "w") as f:
        for n, a in arrays.items():
            f.create_dataset(n, data=a, compression="gzip", chunks=(1, time, *grid))
        for axis, size in zip("xyz", grid):
            f[f"{axis}-coordinate"] = np.linspace(0, 1, size, dtype=np.float32)
        f["t-coordinate"] = np.linspace(0, 1, time, dtype=np.float32)
    return np.stack([arrays[n] for n in names], axis=2)


def pdebench_samples(path: Path, samples: int = 5, time: int = 4, grid=(6, 6), channels: int = 2, seed: int = 0):
    """A PDEBench per-sample file: groups ``0000/data`` ``(time, *grid, channels)``, ``0000/grid/x``."""
    rng = np.random.default_rng(seed)
    data = _states(rng, (samples, time, *grid, channels))
    with h5py.File(path, "w") as f:
        for i in range(samples):
            g = f.create_group(f"{i:04d}")
            g["data"] = data[i]
            g["grid/x"] = np.linspace(0, 1, grid[0], dtype=np.float32)
            g["grid/t"] = np.linspace(0, 1, time, dtype=np.float32)
    return np.moveaxis(data, -1, 2)


def well_file(path: Path, trajectories: int = 3, time: int = 5, grid=(6, 4), seed: int = 0) -> np.ndarray:
    """A The Well file: scalar ``pressure``, vector ``velocity`` and a constant field ``mask``;
    channels ``pressure, velocity_x, velocity_y`` (2D) in that order."""
    rng = np.random.default_rng(seed)
    dims = "xyz"[: len(grid)]
    p = _states(rng, (trajectories, time, *grid))
    v = _states(rng, (trajectories, time, *grid, len(grid)))
    with h5py.File(path, "w") as f:
        f.attrs.update(
            dataset_name="toy",
            grid_type="cartesian",
            n_spatial_dims=len(grid),
            n_trajectories=trajectories,
            simulation_parameters=["Re"],
            Re=100.0,
        )
        d = f.create_group("dimensions")
        d.attrs["spatial_dims"] = list(dims)
        d["time"] = np.arange(time, dtype=np.float32)
        for axis, size in zip(dims, grid):
            d[axis] = np.linspace(0, 1, size, dtype=np.float32)
            d[axis].attrs.update(sample_varying=False, time_varying=False)
        bc = f.create_group("boundary_conditions/x_periodic")
        bc.attrs.update(associated_dims=["x"], bc_type="periodic", sample_varying=False, time_varying=False)
        t0 = f.create_group("t0_fields")
        t0.attrs["field_names"] = ["pressure", "mask"]
        t0["pressure"] = p
        t0["pressure"].attrs.update(dim_varying=[True] * len(grid), sample_varying=True, time_varying=True)
        t0["mask"] = np.ones((trajectories, *grid), np.float32)
        t0["mask"].attrs.update(dim_varying=[True] * len(grid), sample_varying=True, time_varying=False)
        t1 = f.create_group("t1_fields")
        t1.attrs["field_names"] = ["velocity"]
        t1["velocity"] = v
        t1["velocity"].attrs.update(dim_varying=[True] * len(grid), sample_varying=True, time_varying=True)
        f.create_group("t2_fields").attrs["field_names"] = []
    return np.concatenate([p[:, :, None], np.moveaxis(v, -1, 2)], axis=2)


def well_directory(root: Path, files: dict[str, int], **kwargs) -> dict[str, np.ndarray]:
    """``root/data/{train,valid,test}/``, ``files[split]`` files each; the states of each split."""
    out = {}
    for i, (split, count) in enumerate(files.items()):
        folder = root / "data" / split
        folder.mkdir(parents=True)
        parts = [well_file(folder / f"toy_{k}.hdf5", seed=10 * i + k, **kwargs) for k in range(count)]
        out[split] = np.concatenate(parts)
    return out
