"""A selection written as serialised StableHLO (``jax.export``): its batched mean/std and rollout,
weights and calibration inside, loadable with ``jax`` alone.

An export directory holds:

- ``mean_std.jaxexport``: ``(x [batch, *sample_shape]) -> (mean, std)`` over the members
  (population std, ddof=0; times the calibration's spread scale per channel where the selection
  has a calibration); the batch is symbolic, so any batch size runs;
- ``rollout.jaxexport``: ``(x0 [batch, *state]) -> (mean, std)`` each ``[steps + 1, batch,
  *state]`` (step 0: ``x0`` and zeros; calibrated per step where the calibration has rollout
  scales for as many steps), for models whose outputs feed back in; a model that takes ``h``
  states stacked (``Problem(..., history=h)``) rolls out from ``x0 [batch, h, *state]``, oldest
  first, as :meth:`~sweep.ensemble.Ensemble.rollout` does (step 0: the latest);
- ``manifest.json``: shapes, dtypes, the members (config, member ids, seeds, grid values, and the weights of
  a :class:`~sweep.ensemble.Blend`, whose members of several structural configs are exported
  together: the mean and std are then weighted), the normalisation (if any: both programs take
  and return physical units, as the ensemble's queries do; a blend's is given per config), the
  calibration (if any) and the sha256 and size of each part: :func:`~sweep.ensemble.verify_export` checks them (``sweep
  verify OUT_DIR``).

Every member's parameters are constants of the programs (an export of ``M`` members is about
``M`` times one member's parameters); the members run ``vmap``-ed, all at once.

```python
import jax, numpy as np
from pathlib import Path
mean_std = jax.export.deserialize(Path("out/mean_std.jaxexport").read_bytes())
mean, std = mean_std.call(np.zeros((5, 1, 48), np.float32))
```
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._errors import QueryError
from .._fs import checked_folder_around, flush_dir, write_flushed
from .._layout import EXPORT_FORMAT, EXPORT_KIND, EXPORT_MANIFEST, EXPORT_PARTS
from ..problems import Normalization, normalizations_json
from ..training import window_step
from ._calibration import Calibration
from ._predictions import Predictions

DEFAULT_STEPS = 10


def _part_outputs(params: Any, static: Any, x: jax.Array) -> jax.Array:
    """Every member of one structural config (``params`` with a leading member axis) on every
    sample of ``x`` ``[batch, ...]``: ``[M, batch, ...]``."""
    return jax.vmap(lambda p: jax.vmap(eqx.combine(p, static))(x))(params)


class Part(NamedTuple):
    """The members of one structural config: stacked ``params`` and the ``static`` rest of their
    model, and the statistics their fields were normalised with (None: not normalised)."""

    params: Any
    static: Any
    norm: Normalization | None

    def into(self, x: Any, spatial: int) -> Any:
        """``x`` in physical units as this part's networks take it."""
        return x if self.norm is None else self.norm.apply(x, spatial).astype(x.dtype)

    def out_of(self, y: Any, spatial: int) -> Any:
        """This part's networks' outputs ``y`` in physical units."""
        return y if self.norm is None else self.norm.undo(y, spatial)


def _members_program(parts: list[Part], spatial: int):
    """``x [batch, ...] -> [M, batch, ...]``: every member of every part on every sample, in
    physical units, the parts' members one after another."""

    def outputs(x):
        return jnp.concatenate(
            [p.out_of(_part_outputs(p.params, p.static, p.into(x, spatial)), spatial) for p in parts]
        )

    return outputs


def _rollout_program(
    parts: list[Part],
    state: tuple[int, ...],
    history: int,
    steps: int,
    weights: np.ndarray | None,
    rollout_scale: np.ndarray | None,
):
    """``x0 -> (mean, std)`` each ``[steps + 1, batch, *state]``: every member fed its own outputs
    ``steps`` times from ``x0`` (``[batch, *state]``; with ``history=h``, ``[batch, h, *state]``,
    oldest first, as :meth:`~sweep.ensemble.Ensemble.rollout` takes it), in physical units; step 0
    is the latest state of ``x0`` and zeros, the std scaled per step by ``rollout_scale``."""
    spatial = len(state) - 1

    def advance(part: Part):  # [M, batch, h * c, *s] -> the same windows one step on, member by member
        def member(params, windows):
            model = eqx.combine(params, part.static)
            return window_step(jax.vmap(model), history)(windows)

        return jax.vmap(member)

    def rollout(x0):
        windows = x0.reshape(x0.shape[0], history * state[0], *state[1:])  # the h states stacked as channels

        def step(states, t):  # each part's windows in its own (normalised) units
            nxt = [advance(part)(part.params, w) for part, w in zip(parts, states, strict=True)]
            latest = [w[:, :, w.shape[2] - state[0] :] for w in nxt]
            return nxt, jnp.concatenate([part.out_of(y, spatial) for part, y in zip(parts, latest, strict=True)])

        start = [
            jnp.broadcast_to(
                part.into(windows, spatial), (jax.tree_util.tree_leaves(part.params)[0].shape[0], *windows.shape)
            )
            for part in parts
        ]
        _, states = jax.lax.scan(step, start, jnp.arange(steps))  # [steps, M, batch, *state]
        mean, std = _moments(states.astype(jnp.float32), weights, 1)
        if rollout_scale is not None:
            std = std * jnp.asarray(rollout_scale, jnp.float32).reshape(steps, 1, -1, *([1] * spatial))
        first = windows[:, windows.shape[1] - state[0] :]
        mean = jnp.concatenate([first[None].astype(jnp.float32), mean])
        std = jnp.concatenate([jnp.zeros((1, *first.shape), jnp.float32), std])
        return mean.astype(x0.dtype), std.astype(x0.dtype)

    return rollout


def _channel_scale(scale: np.ndarray, ndim: int) -> jax.Array:
    return jnp.asarray(scale.reshape(-1, *([1] * (ndim - 1))), jnp.float32)


def _moments(y: jax.Array, weights: np.ndarray | None, axis: int) -> tuple[jax.Array, jax.Array]:
    """Mean and population std over the members' ``axis`` (weighted by ``weights``, summing to 1)."""
    if weights is None:
        return y.mean(axis), y.std(axis)
    w = jnp.asarray(weights, jnp.float32).reshape((1,) * axis + (-1,) + (1,) * (y.ndim - axis - 1))
    mean = (w * y).sum(axis)
    return mean, jnp.sqrt((w * jnp.square(y - jnp.expand_dims(mean, axis))).sum(axis))


def export_selection(
    ens: Predictions,
    selections: list[Predictions],
    weights: np.ndarray | None,
    cal: Calibration | None,
    path: str | os.PathLike[str],
    steps: int | None = None,
) -> Path:
    """Write ``ens`` (its members: those of ``selections``, one per structural config, one after
    another, weighing ``weights`` or equally), calibrated by ``cal`` (None: not calibrated), into
    the directory ``path`` (created, or an empty one: see :func:`new_export_dir`): see the module
    docstring. ``steps``: rollout steps (default: the calibration's rollout steps, else
    :data:`DEFAULT_STEPS`)."""
    new_export_dir(path)  # refused before any program is traced
    configs = [s.one_config("export") for s in selections]
    parts = [Part(*s.stacked_params("export"), s.normalization_of(c)) for s, c in zip(selections, configs, strict=True)]
    config = configs[0]
    dtype = jax.tree_util.tree_leaves(parts[0].params)[0].dtype
    sample = tuple(config.sample_shape)
    given_steps = steps
    if steps is None:
        steps = len(cal.rollout_scale) if cal is not None and cal.rollout_scale is not None else DEFAULT_STEPS
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise QueryError(f"export(steps={steps!r}): give the rollout's number of steps, an integer >= 1")
    spatial = len(sample) - 1
    members = _members_program(parts, spatial)
    out_shape = tuple(jax.eval_shape(members, jax.ShapeDtypeStruct((1, *sample), dtype)).shape[2:])

    history = ens.history_of(config)
    state = (sample[0] // history, *sample[1:])  # what one step predicts (history=h: one of the h stacked)
    if out_shape != state and given_steps is not None:  # before any program is traced
        raise QueryError(
            f"export(steps={given_steps!r}): the members' outputs {out_shape} are not the state {state} their inputs "
            f"{'stack' if history > 1 else 'hold'}, so they cannot be fed back: there is no rollout to export; "
            f"leave steps out"
        )

    def mean_std(x):
        mean, std = _moments(members(x).astype(jnp.float32), weights, 0)
        if cal is not None:
            std = std * _channel_scale(cal.scale, len(out_shape))
        return mean.astype(x.dtype), std.astype(x.dtype)

    (batch,) = jax.export.symbolic_shape("batch")
    spec = jax.ShapeDtypeStruct((batch, *sample), dtype)
    mean_std_part, rollout_part = EXPORT_PARTS
    programs = {mean_std_part: jax.export.export(jax.jit(mean_std))(spec)}
    fitted = None if cal is None else cal.rollout_scale
    rollout_scale = fitted[:steps] if fitted is not None and len(fitted) >= steps else None
    if out_shape == state:
        rollout_input = state if history == 1 else (history, *state)  # as Ensemble.rollout takes x0
        programs[rollout_part] = jax.export.export(
            jax.jit(_rollout_program(parts, state, history, steps, weights, rollout_scale))
        )(jax.ShapeDtypeStruct((batch, *rollout_input), dtype))
    written = {name: bytes(exported.serialize()) for name, exported in programs.items()}
    manifest = {
        "kind": EXPORT_KIND,
        "format": EXPORT_FORMAT,
        "config_id": "+".join(c.config_id for c in configs),
        "members": ens.index["member_id"].to_pylist(),
        "seeds": ens.index["seed"].to_pylist(),
        "grid": {c: ens.index[c].to_pylist() for c in ens.store.grid_columns if c in ens.index.column_names},
        "weights": None if weights is None else weights.tolist(),
        "input": {"shape": ["batch", *sample], "dtype": np.dtype(dtype).name},
        "output": {"shape": ["batch", *out_shape], "dtype": np.dtype(dtype).name, "channels": out_shape[0]},
        "mean_std": {"returns": ["mean", "std"], "std": "population (ddof=0)", "calibrated": cal is not None},
        "rollout": (
            {"steps": steps, "returns": ["mean", "std"], "shape": ["steps + 1", "batch", *state]}
            | {"input": ["batch", *rollout_input], "history": history, "calibrated": rollout_scale is not None}
            if rollout_part in programs
            else None
        ),
        "normalization": normalizations_json({c.config_id: p.norm for c, p in zip(configs, parts, strict=True)}),
        "calibration": None if cal is None else cal.to_dict(),
        "store_sha256": ens.store.manifest_sha256,
        "jax": jax.__version__,
        "parts": {
            name: {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)} for name, data in written.items()
        },
    }
    written[EXPORT_MANIFEST] = (json.dumps(manifest, indent=1) + "\n").encode()
    return _committed(path, written)


def _committed(path: str | os.PathLike[str], files: dict[str, bytes]) -> Path:
    """``files`` (the manifest last) written and flushed into a hidden folder, then moved into
    ``path`` (still new or empty: :func:`new_export_dir`): a new folder is the hidden one renamed,
    an empty one (the current directory, a link to a folder) gets the files renamed into it, the
    manifest last. An export is there whole or not at all: one that fails part way (a full disk)
    leaves nothing behind."""
    out = new_export_dir(path)
    there = out.is_dir()  # an empty folder: filled in place (it may be the current directory)
    target = out.absolute().resolve()
    staging = target if there else target.parent
    staging.mkdir(parents=True, exist_ok=True)
    partial = staging / f".{target.name}.partial-{os.getpid()}"
    moved: list[Path] = []
    try:
        partial.mkdir()
        for name, data in files.items():
            write_flushed(partial / name, data)
        flush_dir(partial)
        others = [p for p in staging.iterdir() if p != partial] if there else [target] * os.path.lexists(target)
        if others:  # something arrived there meanwhile (another export): refused, naming it
            shutil.rmtree(partial)
            new_export_dir(path)
            raise QueryError(f"export(path={str(path)!r}): another export began there meanwhile; export again")
        if there:
            for name in files:
                os.replace(partial / name, target / name)
                moved.append(target / name)
            partial.rmdir()
        else:
            os.replace(partial, target)
        flush_dir(staging)
    except BaseException as e:  # a full disk, or Ctrl-C: nothing is left behind
        for file in moved:
            file.unlink(missing_ok=True)
        if not isinstance(e, OSError):
            raise
        where = f": {e.filename}" if e.filename else ""
        raise QueryError(
            f"export(path={str(path)!r}): could not be written ({e.strerror or e}{where}); nothing was left there"
        ) from None
    finally:
        if partial.exists():
            shutil.rmtree(partial, ignore_errors=True)
    return out


def new_export_dir(path: str | os.PathLike[str]) -> Path:
    """``path`` if an export may be written there (nothing there yet, or an empty folder), else a
    :class:`QueryError` naming it and what it holds: an export never replaces or mixes with what a
    folder holds (another export, the user's files). ``sweep export`` asks before any work."""
    out = Path(path)
    folder = checked_folder_around(out)  # a store's or an export's files: every file is listed
    if folder is not None:
        raise QueryError(
            f"export(path={str(path)!r}): lies inside {str(folder)!r}, a seed-sweep store or export, whose "
            f"checks would find it an unlisted file; export into a folder of its own"
        )
    if not os.path.lexists(out) or (out.is_dir() and not any(out.iterdir())):
        return out
    if out.is_dir():
        names = sorted(p.name for p in out.iterdir())
        held = f"is not empty ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
    else:
        held = "is not a folder"
    raise QueryError(
        f"export(path={str(path)!r}): exists and {held}; export into a new folder, or remove this one first"
    )
