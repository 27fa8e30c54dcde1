"""Trajectories of PDEs in 1D, 2D and 3D solved by exponax: ``Problem("exponax:<Stepper>", ...)``.

exponax is an optional extra (``pip install seed-sweep[pde]``) and is imported only inside the
functions here. The steppers, the dimensions each is defined in and their defaults are one
table, :data:`~._scenarios.STEPPERS`: APEBench's physical scenarios (160 points per axis in 1D
and 2D, 32 in 3D, ``dt = 0.1`` unless the scenario says otherwise, 50 training trajectories of
50 steps, 30 test trajectories of 200 steps, a truncated Fourier series initial state with 5
modes scaled to max 1), so that a sweep trains on the data APEBench trains on; APEBench's names
are aliases (``Problem("apebench:phy_adv_2d")``). The stepper with those coefficients is the
very stepper of the APEBench scenario; the random draws differ, as keys are derived per
trajectory here: trajectory ``i`` of split ``s`` starts from ``fold_in(fold_in(key(data_seed),
s), i)``, so it does not depend on how many trajectories are asked for.

As a problem (:func:`exponax_problem`) the trajectories become a :class:`Dataset`: the one-step
pairs are every consecutive pair of states of each split's trajectories, and the validation
trajectories are generated like the test ones (by default ``val_fraction`` = 0.1 of all).

```python
problem = sweep.Problem("exponax:Burgers", num_points=64, num_train=20, train_steps=30,
                        num_test=10, test_steps=100, ic="fourier", ic_options={"cutoff": 3})
problem_2d = sweep.Problem("exponax:Burgers", num_spatial_dims=2, num_points=32)   # 2 channels, 32 x 32
```
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._errors import SpecError, did_you_mean
from ._dataset import DEFAULT_VAL_FRACTION, Dataset, as_dataset, check_val_fraction
from ._fourier_ic import fourier_series
from ._generated_size import check_generated_size
from ._scenarios import COMMON, STEPPERS, check_dims, resolution

_SPLITS = ("train", "val", "test")
# Initial-state generators by name (APEBench's ``fourier``/``diffused``/``grf`` and more): a class
# of ``exponax.ic`` by name, or a function of the exponax module that makes the class.
IC_GENERATORS = {
    "fourier": (fourier_series, {"cutoff": 5, "max_one": True}),  # exponax 0.1's, as APEBench draws them
    "diffused": ("DiffusedNoise", {}),
    "grf": ("GaussianRandomField", {}),
    "sine": ("RandomSineWaves1d", {}),
    "discontinuities": ("RandomDiscontinuities", {}),
    "gaussian_blobs": ("RandomGaussianBlobs", {}),
}
_COUNTS = {
    "num_train": 1,
    "num_val": 0,
    "num_test": 1,
    "train_steps": 1,
    "test_steps": 1,
    "warmup_steps": 0,
    "data_seed": 0,
    "num_points": 2,
    "num_substeps": 1,
}
_POSITIVE = ("domain_extent", "dt")
_SHAPE_ARGS = ("self", "num_spatial_dims", "domain_extent", "num_points", "dt")


def _exponax(stepper: str):
    try:
        import exponax
    except ImportError:
        raise SpecError(
            f'`problem.name`: "exponax:{stepper}" needs the optional package exponax; '
            f"install it with `pip install seed-sweep[pde]`"
        ) from None
    return exponax


def _coefficients(ex, stepper: str) -> dict[str, inspect.Parameter]:
    """The keyword arguments of ``exponax.stepper.<stepper>`` beyond the grid and time step."""
    params = inspect.signature(_stepper_class(ex, stepper).__init__).parameters
    return {k: p for k, p in params.items() if k not in _SHAPE_ARGS}


def _stepper_class(ex, stepper: str) -> type:
    module = ex
    for part in STEPPERS[stepper].module.split("."):
        module = getattr(module, part)
    return getattr(module, stepper)


def _defaults(ex, stepper: str) -> dict[str, Any]:
    coefs = {k: p.default for k, p in _coefficients(ex, stepper).items()}
    return COMMON | coefs | STEPPERS[stepper].options


def _resolved(stepper: str, defaults: Mapping[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """``defaults`` with ``options``, ``num_points`` by default the stepper's resolution in the
    dimensions. Another ``ic`` without ``ic_options`` takes its generators' own defaults: a row's
    ``ic_options`` are arguments of the row's generators (FisherKPP's offsets, GrayScott's blobs)."""
    merged = dict(defaults) | dict(options)
    if "ic" in options and "ic_options" not in options and options["ic"] != defaults["ic"]:
        merged["ic_options"] = [{} for _ in options["ic"]] if isinstance(options["ic"], list) else {}
    if merged["num_points"] is None:
        merged["num_points"] = resolution(stepper, merged["num_spatial_dims"])
    return merged


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_like(field: str, value: Any, default: Any) -> None:
    """``value`` must be of the kind of ``default`` (bool, int, number or pair of numbers)."""
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise SpecError(f"`{field}`: got {value!r}; must be true or false")
    elif isinstance(default, int):
        if not isinstance(value, int) or isinstance(value, bool):
            raise SpecError(f"`{field}`: got {value!r}; must be an integer")
    elif isinstance(default, float):
        if not _is_number(value):
            raise SpecError(f"`{field}`: got {value!r}; must be a finite number")
    elif isinstance(default, tuple) and (
        not isinstance(value, (list, tuple)) or len(value) != len(default) or not all(map(_is_number, value))
    ):
        raise SpecError(f"`{field}`: got {value!r}; must be a list of {len(default)} finite numbers")


def _ic_generator(ex, name: str, options: Mapping[str, Any], domain_extent: float, dims: int = 1):
    """Build the named initial-state generator (one channel); errors name ``problem.ic*``."""
    if not isinstance(name, str) or name not in IC_GENERATORS:
        raise SpecError(f"`problem.ic`: got {name!r}; choose one of {', '.join(IC_GENERATORS)}")
    if not isinstance(options, Mapping):
        raise SpecError(f"`problem.ic_options`: got {options!r}; give a table of options of the {name!r} generator")
    if name == "sine" and dims != 1:
        raise SpecError(f"`problem.ic`: 'sine' (exponax.ic.RandomSineWaves1d) is 1D only; got {dims} dimensions")
    made, defaults = IC_GENERATORS[name]
    cls = getattr(ex.ic, made) if isinstance(made, str) else made(ex)
    cls_name = f"exponax.ic.{made}" if isinstance(made, str) else f"exponax 0.1's {cls.__name__}"
    params = {
        k: p
        for k, p in inspect.signature(cls.__init__).parameters.items()
        if k not in ("self", "num_spatial_dims", "domain_extent")
    }
    for key, value in options.items():
        if key not in params:
            raise SpecError(
                f"`problem.ic_options.{key}`: not an option of {name!r} ({cls_name}); allowed: {', '.join(params)}"
            )
        _check_like(f"problem.ic_options.{key}", value, params[key].default)
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in (defaults | dict(options)).items()}
    if "domain_extent" in inspect.signature(cls.__init__).parameters:
        kwargs["domain_extent"] = domain_extent
    try:
        return cls(dims, **kwargs)
    except (ValueError, TypeError) as e:
        raise SpecError(f"`problem.ic_options`: {dict(options)!r} rejected by {cls_name}: {e}") from None


def _ic_set(ex, o: Mapping[str, Any], channels: int):
    """The multi-channel initial-state generator of options ``o``: ``ic`` one name for every
    channel or a list of one per channel (``ic_options`` then a list too), clamped to
    ``ic_clamp = [low, high]`` unless it is None."""
    names, options = o["ic"], o["ic_options"]
    if isinstance(names, list):
        if len(names) != channels or not isinstance(options, list) or len(options) != channels:
            raise SpecError(
                f"`problem.ic`: got {names!r} with ic_options {options!r}; a list of generators needs one "
                f"name and one table of options per channel ({channels})"
            )
    else:
        names, options = [names], [options]
    extent, dims = float(o["domain_extent"]), o["num_spatial_dims"]
    gens = [_ic_generator(ex, n, opts, extent, dims) for n, opts in zip(names, options)]
    clamp = o["ic_clamp"]
    if clamp is not None:
        if not (isinstance(clamp, list) and len(clamp) == 2 and all(map(_is_number, clamp)) and clamp[0] < clamp[1]):
            raise SpecError(f"`problem.ic_clamp`: got {clamp!r}; give [low, high] with low < high, or null")
        gens = [ex.ic.ClampingICGenerator(g, limits=(float(clamp[0]), float(clamp[1]))) for g in gens]
    return ex.ic.RandomMultiChannelICGenerator(gens if len(gens) == channels else gens * channels)


def check_exponax(stepper: str, options: Mapping[str, Any]) -> None:
    """Raise :class:`SpecError` unless ``Problem("exponax:<stepper>", **options)`` can be generated.

    Cheap: imports exponax and builds the initial-state generator, solves nothing.

    ```python
    check_exponax("Burgers", {"num_points": 32, "dt": 0.05})     # fine
    check_exponax("Burgers", {"dt": -1.0})                        # SpecError: `problem.dt`: ...
    ```
    """
    ex = _exponax(stepper)
    if stepper not in STEPPERS:
        raise SpecError(
            f"`problem.name`: unknown exponax stepper {stepper!r}{did_you_mean(stepper, STEPPERS)}; choose one of "
            f"{', '.join('exponax:' + s for s in STEPPERS)}"
        )
    defaults = _defaults(ex, stepper)
    for key in options:
        if key not in defaults:
            raise SpecError(f"`problem.{key}`: not an option of exponax:{stepper}; allowed: {', '.join(defaults)}")
    check_dims(stepper, options.get("num_spatial_dims"))
    merged = _resolved(stepper, defaults, options)
    for key, low in _COUNTS.items():
        value = merged[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise SpecError(f"`problem.{key}`: got {value!r}; must be an integer >= {low}")
    if merged["data_seed"] >= 2**32:
        raise SpecError(f"`problem.data_seed`: got {merged['data_seed']!r}; must be < 2**32")
    for key in _POSITIVE:
        if not _is_number(merged[key]) or merged[key] <= 0:
            raise SpecError(f"`problem.{key}`: got {merged[key]!r}; must be a finite number > 0")
    for key, param in _coefficients(ex, stepper).items():
        if key in options:
            _check_like(f"problem.{key}", options[key], param.default)
    solver = _solver(ex, stepper, merged)
    _ic_set(ex, merged, solver.num_channels)


def _solver(ex, stepper: str, o: Mapping[str, Any]):
    """The exponax stepper of options ``o``: ``num_substeps`` steps of ``dt / num_substeps`` each."""
    coefs = {k: tuple(v) if isinstance(v, list) else v for k, v in o.items() if k in _coefficients(ex, stepper)}
    n = o["num_substeps"]
    dims, extent, dt = o["num_spatial_dims"], float(o["domain_extent"]), float(o["dt"])
    solver = _stepper_class(ex, stepper)(dims, extent, o["num_points"], dt / n, **coefs)
    return solver if n == 1 else ex.RepeatedStepper(solver, n)


def exponax_stepper(stepper: str, time_scale: float = 1.0, **options: Any):
    """The exponax stepper of ``Problem("exponax:<stepper>", **options)``: a differentiable
    function of one state ``[channels, *grid]`` to the next. ``time_scale < 1``: a coarse
    stepper, the same PDE advanced ``time_scale * dt`` (APEBench's coarse stepper with its
    ``coarse_proportion``).

    ```python
    step = exponax_stepper("Diffusion", num_points=16)
    assert step(np.zeros((1, 16), np.float32)).shape == (1, 16)
    ```
    """
    options = _generated(options)
    check_exponax(stepper, options)
    ex = _exponax(stepper)
    o = _resolved(stepper, _defaults(ex, stepper), options)
    return _solver(ex, stepper, {**o, "dt": float(o["dt"]) * time_scale})


def exponax_trajectories(stepper: str, **options: Any) -> dict[str, np.ndarray]:
    """Trajectories ``[samples, steps + 1, channels, *[num_points] * num_spatial_dims]`` (float32) per split.

    Keys ``"train"`` (``num_train`` trajectories of ``train_steps`` steps), ``"val"``
    (``num_val``, may be 0) and ``"test"`` (``num_test``), the latter two of ``test_steps``.
    Each starts from its own random initial state, advanced ``warmup_steps`` steps first.

    ```python
    data = exponax_trajectories("Burgers", num_points=32, num_train=4, num_test=2,
                                train_steps=5, test_steps=8)
    assert data["train"].shape == (4, 6, 1, 32) and data["val"].shape == (0, 9, 1, 32)
    ```
    """
    check_exponax(stepper, options)
    ex = _exponax(stepper)
    o = _resolved(stepper, _defaults(ex, stepper), options)
    solver = _solver(ex, stepper, o)
    check_generated_size(stepper, o, solver.num_channels)  # before anything is solved
    ic = _ic_set(ex, o, solver.num_channels)
    counts = {"train": o["num_train"], "val": o["num_val"], "test": o["num_test"]}
    steps = {"train": o["train_steps"], "val": o["test_steps"], "test": o["test_steps"]}
    out = {}
    for length in dict.fromkeys(steps.values()):  # one compiled program per trajectory length
        group = [s for s in _SPLITS if steps[s] == length]
        trajectories = _rollouts(
            ex,
            solver,
            ic,
            (o["num_points"],) * o["num_spatial_dims"],
            o["warmup_steps"],
            length,
            _keys(o["data_seed"], [(_SPLITS.index(s), counts[s]) for s in group]),
        )
        for split, part in zip(group, np.split(trajectories, np.cumsum([counts[s] for s in group])[:-1])):
            out[split] = part
    _check_finite(stepper, o, out)
    return {split: out[split] for split in _SPLITS}


def _check_finite(stepper: str, o: Mapping[str, Any], out: Mapping[str, np.ndarray]) -> None:
    """A :class:`SpecError` if the solver blew up: a grid too coarse for the PDE (Kuramoto-
    Sivashinsky on ``[0, 60)^d`` needs 64 points per axis in 1D and 2D), or a time step too long."""
    for split, trajectories in out.items():
        bad = ~np.isfinite(trajectories).all(axis=tuple(range(1, trajectories.ndim)))
        if bad.any():
            raise SpecError(
                f"`problem.num_points`: exponax:{stepper} in {o['num_spatial_dims']}D on {o['num_points']} points "
                f"per axis (dt {o['dt']}, {o['warmup_steps']} warm-up steps) blew up: {int(bad.sum())} of "
                f"{trajectories.shape[0]} {split} trajectories are not finite (the first: {int(np.argmax(bad))}); give a finer "
                f"grid (num_points) or a smaller dt"
            )


def _keys(data_seed: int, splits: list[tuple[int, int]]):
    """``fold_in(fold_in(key(data_seed), split), i)`` for ``i < count`` of each ``(split, count)``."""
    import jax
    import jax.numpy as jnp

    base = jax.random.key(data_seed)
    return jnp.concatenate(
        [
            jax.vmap(lambda i, s=split: jax.random.fold_in(jax.random.fold_in(base, s), i))(
                jnp.arange(count, dtype=jnp.uint32)
            )
            for split, count in splits
        ]
    )


def _rollouts(ex, solver, ic, grid: tuple[int, ...], warmup: int, steps: int, keys) -> np.ndarray:
    """One trajectory per key, all in one jitted, vmapped program."""
    import equinox as eqx
    import jax

    if keys.shape[0] == 0:
        return np.zeros((0, steps + 1, solver.num_channels, *grid), np.float32)

    @eqx.filter_jit
    def generate(solver, keys):
        def one(key):
            u0 = ic(grid[0], key=key)
            u0 = ex.repeat(solver, warmup)(u0) if warmup else u0
            return ex.rollout(solver, steps, include_init=True)(u0)

        return jax.vmap(one)(keys)

    return np.asarray(generate(solver, keys), dtype=np.float32)


def _generated(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options exponax generates from: ``val_fraction`` (seed-sweep's own option) turned into
    ``num_val``, ``val_fraction`` of all trajectories (default 0.1), unless ``num_val`` is given."""
    rest = dict(options)
    fraction = rest.pop("val_fraction", None)
    if fraction is not None and "num_val" in rest:
        raise SpecError(
            f"`problem.val_fraction`: got {fraction!r}, but num_val={rest['num_val']!r} says how many "
            f"validation trajectories to generate; give one or the other"
        )
    if "num_val" not in rest:
        fraction = DEFAULT_VAL_FRACTION if fraction is None else fraction
        check_val_fraction(fraction)
        total = rest.get("num_train", COMMON["num_train"]) + rest.get("num_test", COMMON["num_test"])
        if isinstance(total, int):  # else check_exponax names the bad count
            rest["num_val"] = max(1, round(fraction * total)) if fraction > 0 else 0
    return rest


def check_exponax_problem(stepper: str, options: Mapping[str, Any]) -> None:
    """Raise :class:`SpecError` unless ``Problem("exponax:<stepper>", **options)`` gives a dataset:
    the options of :func:`check_exponax` and ``val_fraction``. Cheap: nothing is solved."""
    check_exponax(stepper, _generated(options))


def exponax_problem(stepper: str, **options: Any) -> Dataset:
    """The :class:`Dataset` of ``Problem("exponax:<stepper>", **options)``: the trajectories of
    :func:`exponax_trajectories` and the one-step pairs derived from them.

    Validation trajectories are generated, never carved from the training ones (so that the
    ``num_train`` training trajectories are APEBench's): ``num_val`` of them (of ``test_steps``
    steps), by default ``val_fraction`` (0.1) of ``num_train + num_test``; ``num_val=0`` or
    ``val_fraction=0``: none.
    """
    generated = _generated(options)
    return as_dataset(
        None,
        f"`problem` 'exponax:{stepper}'",
        data_seed=generated.get("data_seed", 0),
        trajectories=exponax_trajectories(stepper, **generated),
    )


def exponax_coordinates(stepper: str, **options: Any) -> np.ndarray | None:
    """The positions of a 1D state's points: ``num_points`` on the periodic domain ``[0,
    domain_extent)``; None in 2D and 3D (a state's points are a grid, not a line)."""
    o = _resolved(stepper, COMMON | STEPPERS[stepper].options, options)
    if o["num_spatial_dims"] != 1:
        return None
    return np.arange(o["num_points"]) * (float(o["domain_extent"]) / o["num_points"])
