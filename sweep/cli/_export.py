"""``sweep export DIR -o OUT_DIR``: a selection's mean/std and rollout as serialised StableHLO."""

from __future__ import annotations

from typing import Annotated

import typer

from .._words import counted
from ._args import CLIError
from ._options import DirArg, PoolOpt, TrustCodeOpt, WhereOpt, existing, one_setting, selected


def export(
    sweep_dir: DirArg,
    out: Annotated[
        str,
        typer.Option("-o", "--out", metavar="DIR", help="The directory to write: a new one (created) or an empty one."),
    ],
    where: WhereOpt = None,
    best: Annotated[
        int | None, typer.Option(min=1, metavar="K", help="The K best members (by validation loss).")
    ] = None,
    greedy: Annotated[
        int | None,
        typer.Option(
            min=1,
            metavar="K",
            help="Export K steps of greedy selection (validation CRPS) over the selected members, "
            "configurations and architectures mixed (weighted).",
        ),
    ] = None,
    recalibrate: Annotated[
        bool, typer.Option("--recalibrate", help="Fit a recalibration on the validation split and include it.")
    ] = False,
    calibration: Annotated[
        str | None,
        typer.Option(metavar="FILE", help="Include a calibration written by `sweep scores --save-calibration`."),
    ] = None,
    steps: Annotated[int | None, typer.Option(min=1, help="Rollout steps of rollout.jaxexport.")] = None,
    trust_code: TrustCodeOpt = False,
    pool: PoolOpt = False,
) -> None:
    """Write the selection's batched mean/std and rollout as serialised StableHLO (jax.export).

    OUT holds mean_std.jaxexport and rollout.jaxexport (weights and calibration inside, the batch
    size symbolic) and manifest.json (shapes, members, a sha256 per part). Loading needs jax and
    flatbuffers alone (pip install jax flatbuffers):
    jax.export.deserialize(Path("OUT/mean_std.jaxexport").read_bytes()).call(x) returns (mean, std). `sweep verify OUT` checks it.
    """
    import json

    from .._layout import EXPORT_MANIFEST, EXPORT_PARTS
    from ..ensemble import Blend, load, load_calibration, new_export_dir

    if recalibrate and calibration is not None:
        raise CLIError("--recalibrate and --calibration: give one (fit now, or one fitted before)")
    new_export_dir(out)  # an OUT that holds files is refused before the store is read
    ens = load(existing(sweep_dir), trust_code=trust_code)
    ens = selected(ens, where, best)
    if greedy is not None:
        ens = ens.select_greedy(greedy)  # (a blend of configurations by design)
    else:
        one_setting(ens, where, pool, blend=True)
    if recalibrate:
        ens = ens.recalibrate("val")
    elif calibration is not None:
        ens = ens.with_calibration(load_calibration(calibration))
    path = ens.export(out, steps)
    calibrated = "calibrated" if ens.calibration is not None else "not calibrated"
    name = (ens.parts[0] if isinstance(ens, Blend) else ens).spec.name
    weighted = f", weighted {ens.counts.tolist()}" if isinstance(ens, Blend) else ""
    rollout = "" if (path / EXPORT_PARTS[1]).exists() else "; mean_std only: the outputs do not feed back, no rollout"
    said = json.loads((path / EXPORT_MANIFEST).read_text()).get("rollout") or {}
    if ens.calibration is not None and said and not said.get("calibrated"):
        fitted = ens.calibration.rollout_scale
        rollout = (
            f"; its rollout is not: the store holds no {ens.calibration.split} trajectories"
            if fitted is None
            else f"; its rollout is not: the calibration has {len(fitted)} rollout steps, the export {said['steps']}"
        )
    typer.echo(f"exported {counted(len(ens), 'member')} of sweep {name!r} ({calibrated}{weighted}{rollout}) to {path}")
    typer.echo(f"check it with: sweep verify {path}")
