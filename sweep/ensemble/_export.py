"""A selection written as serialised StableHLO (``jax.export``): its batched mean/std and rollout,
weights and calibration inside, loadable with ``jax`` alone.

An export directory holds:

- ``mean_std.jaxexport``: ``(x [batch, *sample_shape]) -> (mean, std)`` over the members
  (population std, ddof=0; times the calibration's spread scale per channel where the selection
  has a calibration); the batch is symbolic, so any batch size runs;
- ``rollout.jaxexport``: ``(x0 [batch, *sample_shape]) -> (mean, std)`` each
  ``[steps + 1, batch, *sample_shape]`` (step 0: ``x0`` and zeros; calibrated per step where the
  calibration has rollout scales for as many steps), for models whose outputs feed back in;
- ``manifest.json``: shapes, dtypes, the members (config, member ids, seeds), the
  normalisation (if any: both programs take and return physical units, as the ensemble's
  queries do), the calibration (if any) and the sha256 and size of each part: :func:`verify_export` checks them (``sweep
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
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._errors import QueryError
from .._layout import EXPORT_MANIFEST, EXPORT_PARTS
from ._calibration import Calibration
from ._predictions import Predictions

KIND = "seed-sweep export"
FORMAT = 1
DEFAULT_STEPS = 10


def _members_program(params: Any, static: Any):
    """``x [batch, ...] -> [M, batch, ...]``: every member on every sample."""

    def outputs(x):
        return jax.vmap(lambda p: jax.vmap(eqx.combine(p, static))(x))(params)

    return outputs


def _channel_scale(scale: np.ndarray, ndim: int) -> jax.Array:
    return jnp.asarray(scale.reshape(-1, *([1] * (ndim - 1))), jnp.float32)


def export_selection(
    ens: Predictions, cal: Calibration | None, path: str | os.PathLike[str], steps: int | None = None
) -> Path:
    """Write ``ens``, calibrated by ``cal`` (None: not calibrated), into the directory ``path``
    (created; an existing export there is replaced): see the module docstring. ``steps``: rollout
    steps (default: the calibration's rollout steps, else :data:`DEFAULT_STEPS`)."""
    config = ens.one_config("export")
    params, static = ens.stacked_params("export")
    dtype = jax.tree_util.tree_leaves(params)[0].dtype
    sample = tuple(config.sample_shape)
    if steps is None:
        steps = len(cal.rollout_scale) if cal is not None and cal.rollout_scale is not None else DEFAULT_STEPS
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise QueryError(f"export(steps={steps!r}): give the rollout's number of steps, an integer >= 1")
    norm, spatial = ens.normalization_of(config), len(sample) - 1
    members = _members_program(params, static)
    if norm is not None:
        networks = members

        def members(x):  # physical units in and out
            return norm.undo(networks(norm.apply(x, spatial).astype(x.dtype)), spatial)

    out_shape = tuple(jax.eval_shape(members, jax.ShapeDtypeStruct((1, *sample), dtype)).shape[2:])

    def mean_std(x):
        y = members(x).astype(jnp.float32)
        mean, std = y.mean(0), y.std(0)
        if cal is not None:
            std = std * _channel_scale(cal.scale, len(out_shape))
        return mean.astype(x.dtype), std.astype(x.dtype)

    (batch,) = jax.export.symbolic_shape("batch")
    spec = jax.ShapeDtypeStruct((batch, *sample), dtype)
    mean_std_part, rollout_part = EXPORT_PARTS
    programs = {mean_std_part: jax.export.export(jax.jit(mean_std))(spec)}
    fitted = None if cal is None else cal.rollout_scale
    rollout_scale = fitted[:steps] if fitted is not None and len(fitted) >= steps else None
    if out_shape == sample:

        def rollout(x0):
            def step(states, t):
                nxt = jax.vmap(lambda p, s: jax.vmap(eqx.combine(p, static))(s))(params, states)
                return nxt, nxt

            first = x0 if norm is None else norm.apply(x0, spatial).astype(x0.dtype)
            start = jnp.broadcast_to(first, (jax.tree_util.tree_leaves(params)[0].shape[0], *x0.shape))
            _, states = jax.lax.scan(step, start, jnp.arange(steps))  # [steps, M, batch, ...]
            states = states if norm is None else norm.undo(states, spatial)
            y = states.astype(jnp.float32)
            mean, std = y.mean(1), y.std(1)
            if rollout_scale is not None:
                std = std * jnp.asarray(rollout_scale, jnp.float32).reshape(steps, 1, -1, *([1] * (len(sample) - 1)))
            mean = jnp.concatenate([x0[None].astype(jnp.float32), mean])
            std = jnp.concatenate([jnp.zeros((1, *x0.shape), jnp.float32), std])
            return mean.astype(x0.dtype), std.astype(x0.dtype)

        programs[rollout_part] = jax.export.export(jax.jit(rollout))(spec)
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    for name in EXPORT_PARTS:
        (out / name).unlink(missing_ok=True)
    parts = {}
    for name, exported in programs.items():
        data = bytes(exported.serialize())
        (out / name).write_bytes(data)
        parts[name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    manifest = {
        "kind": KIND,
        "format": FORMAT,
        "config_id": config.config_id,
        "members": ens.index["member_id"].to_pylist(),
        "seeds": ens.index["seed"].to_pylist(),
        "input": {"shape": ["batch", *sample], "dtype": np.dtype(dtype).name},
        "output": {"shape": ["batch", *out_shape], "dtype": np.dtype(dtype).name, "channels": out_shape[0]},
        "mean_std": {"returns": ["mean", "std"], "std": "population (ddof=0)", "calibrated": cal is not None},
        "rollout": (
            {"steps": steps, "returns": ["mean", "std"], "shape": ["steps + 1", "batch", *sample]}
            | {"calibrated": rollout_scale is not None}
            if rollout_part in programs
            else None
        ),
        "normalization": None if norm is None else {str(c): v for c, v in norm.as_dict().items()},
        "calibration": None if cal is None else cal.to_dict(),
        "store_sha256": ens.store.manifest_sha256,
        "jax": jax.__version__,
        "parts": parts,
    }
    (out / EXPORT_MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return out


def is_export(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a directory whose manifest says it is an export."""
    try:
        return json.loads((Path(path) / EXPORT_MANIFEST).read_text()).get("kind") == KIND
    except (OSError, ValueError, AttributeError):
        return False


def verify_export(path: str | os.PathLike[str]) -> list[str]:
    """The problems of an export directory (empty: every part listed is there, of its size and
    sha256, and no other part is): one line each, naming the file."""
    root = Path(path)
    try:
        manifest = json.loads((root / EXPORT_MANIFEST).read_text())
        parts = manifest["parts"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        return [f"{root / EXPORT_MANIFEST}: not an export manifest ({e})"]
    problems = []
    for name, record in parts.items():
        file = root / name
        if name not in EXPORT_PARTS or not file.is_file():
            problems.append(f"{file}: listed in the manifest but missing")
            continue
        data = file.read_bytes()
        if len(data) != record.get("bytes") or hashlib.sha256(data).hexdigest() != record.get("sha256"):
            problems.append(
                f"{file}: altered ({len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()[:16]}..., the "
                f"manifest says {record.get('bytes')} bytes, {str(record.get('sha256'))[:16]}...)"
            )
    for name in EXPORT_PARTS:
        if name not in parts and (root / name).exists():
            problems.append(f"{root / name}: not listed in the manifest")
    return problems
