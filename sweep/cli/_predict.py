"""``sweep predict``: predictions or rollouts of selected members, written as ``.npy``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._args import CLIError, load_npy, save_npy
from ._options import DirArg, MetricOpt, ModeOpt, PoolOpt, TrustCodeOpt, WhereOpt, existing, one_setting, selected


def predict(
    sweep_dir: DirArg,
    input: Annotated[
        Path,
        typer.Option(
            "--input",
            "-i",
            show_default=False,
            help=("Inputs (.npy): \\[samples, channels, *spatial] (the initial states with --rollout)."),
        ),
    ],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Where to write the predictions (.npy).", show_default=False)
    ],
    where: WhereOpt = None,
    best: Annotated[
        int | None, typer.Option(min=1, metavar="K", help="Keep the K best members by --metric (validation loss).")
    ] = None,
    metric: MetricOpt = "val_loss",
    mode: ModeOpt = None,
    mean: Annotated[bool, typer.Option("--mean", help="Write the mean over members instead of every member.")] = False,
    std: Annotated[
        bool,
        typer.Option(
            "--std", help="Write the mean to OUTPUT and the std over members (ddof=0) to OUTPUT's name + '_std.npy'."
        ),
    ] = False,
    pool: PoolOpt = False,
    rollout: Annotated[
        int | None,
        typer.Option(
            "--rollout",
            metavar="STEPS",
            help="Roll every member out autoregressively for STEPS steps from the "
            "inputs (each output fed back in) instead of one prediction.",
            show_default=False,
        ),
    ] = None,
    trust_code: TrustCodeOpt = False,
) -> None:
    """Predict with selected members; write .npy.

    OUTPUT holds \\[members, samples, *output] (the model's output on one sample: channels and grid for an
    emulator, a vector or class logits otherwise), or the mean with --mean / --std. With
    --rollout STEPS the inputs are initial states and OUTPUT holds every member's rollout,
    \\[members, STEPS + 1, samples, channels, *spatial] (index 0: the inputs), or its mean (and std)
    over members at every step with --mean / --std. The selection must lie in one structural
    configuration; a grid column that --where leaves free must take one value there (else
    name it with --where, or pass --pool to pool members trained with different settings).
    """
    import numpy as np

    from ..ensemble import load

    if output.suffix != ".npy":
        raise CLIError(f"--output: got {str(output)!r}; give a file name ending in .npy")
    if rollout is not None and rollout < 1:
        raise CLIError(f"--rollout: got {rollout}; the number of steps must be an integer >= 1")
    x = _real_and_finite(load_npy(input, "--input"), input)
    ens = load(existing(sweep_dir), trust_code=trust_code)
    ens = one_setting(selected(ens, where, best, metric, mode), where, pool)
    n = len(ens)
    what = f"rollout of {rollout} steps" if rollout is not None else "predictions"
    if std or mean:
        m, s = ens.mean_std(x) if rollout is None else ens.rollout_mean_std(x, rollout)
        save_npy(output, np.asarray(m))
        typer.echo(f"wrote {output}: mean over {n} members, {what}, shape {tuple(np.shape(m))}")
        if std:
            std_path = output.with_name(output.name.removesuffix(".npy") + "_std.npy")
            save_npy(std_path, np.asarray(s))
            typer.echo(f"wrote {std_path}: std over {n} members, {what}, shape {tuple(np.shape(s))}")
        return
    y = np.asarray(ens.predict(x) if rollout is None else ens.rollout(x, rollout))
    save_npy(output, y)
    typer.echo(f"wrote {output}: {n} members, {what}, shape {y.shape}")


def _real_and_finite(x, path):
    """``x`` if its values are real numbers, finite in float32 (the models' precision), else the
    error the service gives such a request: a NaN input would give NaN predictions, written."""
    from .._input_values import REAL, bad_value, is_real

    if not is_real(x):
        raise CLIError(f"--input: {str(path)!r} holds dtype {x.dtype}; {REAL}")
    bad = bad_value(x)
    if bad is not None:
        raise CLIError(f"--input: {str(path)!r} holds {bad[0]}; {bad[1]}")
    return x
