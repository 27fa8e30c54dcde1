"""The arguments and options several ``sweep`` commands share, and the checks of what they name."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from ._args import CLIError, apply_overrides, choice, parse_where

SpecArg = Annotated[Path, typer.Argument(metavar="SPEC", help="Sweep specification (TOML).", show_default=False)]
DirArg = Annotated[
    str,
    typer.Argument(
        metavar="SWEEP_DIR",
        help="Sweep directory (local path or URI such as s3://bucket/runs/heat).",
        show_default=False,
    ),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="FIELD=VALUE",
        help="Override a spec field, e.g. --set training.epochs=50 --set seeds=8 (repeatable; "
        "values in TOML syntax, validated as in the file).",
        show_default=False,
    ),
]
WhereOpt = Annotated[
    list[str] | None,
    typer.Option(
        metavar="COLUMN=VALUE",
        help="Keep the members whose column takes this value, e.g. --where depth=6 (repeatable: each narrows; "
        "a column given twice takes either value; true, false and none name a boolean and no value).",
    ),
]
MetricOpt = Annotated[
    str,
    typer.Option(
        metavar="COLUMN",
        help="Member column that ranks: a validation column (val_loss by default); a test column where there "
        "is no validation set (beside one, with a warning: test columns should report a choice, not make it).",
    ),
]
PoolOpt = Annotated[
    bool,
    typer.Option(
        "--pool",
        help="Allow a selection whose members take several values of a grid column that --where leaves free "
        "(e.g. both learning rates of --where depth=4): they are pooled into one ensemble.",
    ),
]
TrustCodeOpt = Annotated[
    bool,
    typer.Option(
        "--trust-code",
        help="Run a model built by a factory the store or sweep directory names (model.name "
        "'package.module:factory', your own model; imported from your environment, never from the store's or "
        "sweep directory's files). Only for stores and sweep directories you trust.",
    ),
]
ModeOpt = Annotated[
    Literal["min", "max"] | None,
    typer.Option(
        parser=choice(["min", "max"]),
        show_default=False,
        help="'min' if lower --metric is better, 'max' if higher (default: max for a score such as "
        "val_accuracy or val_correlation, else min).",
    ),
]


def selected(ens, where: list[str] | None, best: int | None = None, metric: str = "val_loss", mode: str | None = None):
    """The members of ``ens`` that the ``--where`` items ``where`` keep, and of them the ``best``
    by ``metric`` (every command's selection, in this order)."""
    kw = parse_where(where)
    if kw:
        ens = ens.where(**kw)
    if best is None:
        return ens
    warn_test_ranking(ens, metric)
    if best > len(ens):
        from .._errors import warn

        warn(f"--best {best}: the selection has {len(ens)} member(s); all of them are kept")
    return ens.best(best, metric=metric, mode=mode)


def warn_test_ranking(ens, metric: str) -> None:
    """A warning where ``--metric`` ranks by a test column while ``ens`` has its validation column:
    members chosen on the test set have optimistic test numbers."""
    val = "val_" + metric.removeprefix("test_")
    if metric.startswith("test_") and val in ens.columns and ens.index[val].null_count < len(ens):
        from .._errors import warn

        warn(
            f"--metric {metric} ranks by the test set although these members have {val}: members chosen on it "
            f"have optimistic test numbers; rank by --metric {val} to report them honestly"
        )


def one_setting(ens, where: list[str] | None, pool: bool, blend: bool = False):
    """``ens``, a selection by ``--where`` items ``where`` (and ``--best``), or a CLI error where it
    pools members trained with different settings (a grid column ``--where`` leaves free takes
    several values in it) and ``--pool`` was not given: the check of every command that makes one
    ensemble of a selection (predict, serve, export, scores --recalibrate). ``--pool`` is offered
    for the columns it can pool (not those that set structural configs apart); ``blend``: the
    command blends configurations with ``--greedy K``."""
    free = {} if pool else ens.free_columns(parse_where(where))
    if free:
        listed = "; ".join(f"{c} takes {values}" for c, values in free.items())
        chosen = " ".join(f"--where {item}" for item in where or ()) or "the whole store (no --where)"
        apart = [c for c in ens.structural_columns() if c in free]
        poolable = [c for c in free if c not in apart]
        fix = apart or poolable
        advice = f"Fix {', '.join(fix)} with --where (e.g. --where {fix[0]}=VALUE)"
        if apart:
            advice += ": members of different structural configs are not pooled"
            advice += f"; fix {', '.join(poolable)} too, or pass --pool to pool over " if poolable else ""
            advice += ("it" if len(poolable) == 1 else "them") if poolable else ""
        else:
            advice += ", or pass --pool to pool over them"
        advice += "; or blend configurations with --greedy K" if blend else ""
        raise CLIError(f"{chosen} selects members trained with different settings: {listed}. {advice}")
    return ens


def load_spec(path: Path, overrides: list[str] | None = None):
    """The spec of the TOML file at ``path`` with the ``--set`` overrides applied, validated once
    they are (so that they can mend a file that is not valid here, such as a problem too large for
    this machine)."""
    from ..spec import read_toml

    if path.is_dir():
        raise CLIError(f"SPEC: {str(path)!r} is a directory; give a sweep specification .toml file")
    return apply_overrides(read_toml(path), overrides or [])


def existing(sweep_dir: str, name: str = "SWEEP_DIR", what: str = "a sweep directory") -> str:
    """``sweep_dir`` (argument ``name``: ``what``) if it is a folder (local path or URI), else a
    CLI error saying what it is."""
    import pyarrow.fs as pafs

    from .._fs import filesystem_path

    fs, path = filesystem_path(sweep_dir, None)
    kind = fs.get_file_info(path).type
    if kind == pafs.FileType.NotFound:
        raise CLIError(f"{name}: {sweep_dir!r} does not exist; give {what}")
    if kind == pafs.FileType.File:
        raise CLIError(f"{name}: {sweep_dir!r} is a file; give {what} (STORAGE/<name>, made by sweep run)")
    return sweep_dir
