"""The ``sweep`` command line: run, plan, status, aggregate, verify, show, plot, predict, scores.

Every :class:`sweep.SweepError` and every unreadable file ends the command with one line on
stderr (``error: <message>``, phrased with the command's options, see :func:`cli_phrasing`)
and exit status 1; ``sweep --debug ...`` (or ``SWEEP_DEBUG=1``) shows the traceback instead.
Ctrl-C ends a command with exit status 130. Ray and matplotlib are imported only by the
commands that use them.
"""

from __future__ import annotations

import functools
import os
import shlex
from pathlib import Path
from typing import Annotated

import typer

from .._errors import SweepError
from ._args import (
    CLIError,
    Format,
    Kind,
    Logger,
    LogPer,
    Progress,
    apply_overrides,
    cli_phrasing,
    parse_where,
)
from ._imports import spec_folder_importable
from ._scores import scores as scores_command

app: typer.Typer = typer.Typer(
    name="sweep",
    help="Train ensembles of independently seeded JAX/Equinox networks with Ray Tune, and query them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)


_state = {"debug": False}


def _message(e: BaseException) -> str:
    if isinstance(e, SweepError):
        text = cli_phrasing(str(e))
    elif isinstance(e, FileNotFoundError) and e.filename:
        text = f"{e.filename!r}: no such file or directory"
    elif isinstance(e, OSError) and e.filename:
        text = f"{e.filename!r}: {e.strerror or e}"
    else:
        text = f"{type(e).__name__}: {e} (rerun as `sweep --debug ...` for the traceback)"
    return " ".join(text.split())  # one line


def _guard(fn):
    """Turn any error of a command into ``error: <message>`` on stderr and exit status 1."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except KeyboardInterrupt as e:
            if not str(e):  # sweep.run prints how far it got and how to resume
                typer.echo("interrupted", err=True)
            raise typer.Exit(130) from None
        except Exception as e:
            if _state["debug"]:
                raise
            typer.echo(f"error: {_message(e)}", err=True)
            raise typer.Exit(1) from None

    return wrapper


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"seed-sweep {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    debug: Annotated[bool, typer.Option("--debug", help="Show the full traceback on errors.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """seed-sweep: hybrid seed ensembles (vmapped blocks of seeds, Ray Tune trials)."""
    _state["debug"] = debug or bool(os.environ.get("SWEEP_DEBUG"))


# -- arguments shared by several commands ---------------------------------------------------------
SpecArg = Annotated[Path, typer.Argument(help="Sweep specification (TOML).", show_default=False)]
DirArg = Annotated[
    str, typer.Argument(help="Sweep directory (local path or URI such as s3://bucket/runs/heat).", show_default=False)
]


SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="Override a spec field, e.g. --set training.epochs=50 --set seeds=8 (repeatable; "
        "values in TOML syntax, validated as in the file).",
        show_default=False,
    ),
]


def _spec(path: Path, overrides: list[str] | None = None):
    from ..spec import SweepSpec

    if path.is_dir():
        raise CLIError(f"SPEC: {str(path)!r} is a directory; give a sweep specification .toml file")
    spec = SweepSpec.from_toml(path)
    return apply_overrides(spec, overrides) if overrides else spec


def _existing(sweep_dir: str) -> str:
    """``sweep_dir`` if it exists (local path or URI), else a CLI error saying it does not."""
    import pyarrow.fs as pafs

    from .._fs import filesystem_path

    fs, path = filesystem_path(sweep_dir, None)
    if fs.get_file_info(path).type == pafs.FileType.NotFound:
        raise CLIError(f"SWEEP_DIR: {sweep_dir!r} does not exist")
    return sweep_dir


# -- commands -------------------------------------------------------------------------------------
@app.command()
@_guard
def run(
    spec: SpecArg,
    storage: Annotated[
        str, typer.Option(help="Where sweeps are stored (path or URI); the sweep goes to STORAGE/<name>.")
    ] = "./runs",
    address: Annotated[
        str | None,
        typer.Option(help="Ray cluster to join: 'auto', 'HOST:6379' or 'ray://HOST:10001'; default: a local Ray."),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue an interrupted sweep from its checkpoints.")
    ] = False,
    overrides: SetOpt = None,
    logger: Annotated[
        list[Logger] | None,
        typer.Option("--logger", help="Log every member's curves to a tracker (repeatable).", show_default=False),
    ] = None,
    log_per: Annotated[LogPer, typer.Option(help="One tracker run per member or per configuration.")] = LogPer.member,
    verbose: Annotated[bool, typer.Option("--verbose", help="Show Ray's and Tune's own output.")] = False,
    progress: Annotated[
        Progress,
        typer.Option(
            help="live: one display updated in place; plain: a line every 10 s; none: nothing; "
            "auto: live on a terminal, plain otherwise."
        ),
    ] = Progress.auto,
    checkpoint_every: Annotated[
        str, typer.Option(help="A block checkpoint every N reports, or 'auto': paced by the storage's write rate.")
    ] = "auto",
) -> None:
    """Run a sweep on Ray Tune, then aggregate it.

    Trains every member of SPEC (or only those not trained yet in STORAGE/<name>), one Ray Tune
    trial per block of seeds, and builds the ensembles. A live display shows trials, members,
    epochs, throughput, ETA and the best loss of every configuration (plain lines when the
    output is not a terminal). Ctrl-C stops the trials, keeps what is done and prints how to
    resume (exit status 130); a second Ctrl-C stops at once. Modules named in SPEC are imported
    from its folder too (and from PYTHONPATH and the installed packages).
    """
    with spec_folder_importable(spec):
        _run_command(spec, storage, address, resume, overrides, logger, log_per, verbose, progress, checkpoint_every)


def _run_command(spec, storage, address, resume, overrides, logger, log_per, verbose, progress, checkpoint_every):
    from ..tune import LOGGERS
    from ..tune import run as run_sweep

    parsed = _spec(spec, overrides)
    command = [
        "sweep",
        "run",
        str(spec),
        *(["--storage", storage] if storage != "./runs" else []),
        *(["--address", address] if address else []),
        *(a for o in overrides or () for a in ("--set", o)),
        *(["--checkpoint-every", checkpoint_every] if checkpoint_every != "auto" else []),
        *(["--progress", Progress(progress).value] if Progress(progress) is not Progress.auto else []),
        "--resume",
    ]
    every = int(checkpoint_every) if checkpoint_every.isdigit() else checkpoint_every  # "auto" or bad: run says
    sweep_dir = run_sweep(
        parsed,
        storage=storage,
        address=address,
        resume=resume,
        checkpoint_every=every,
        loggers=[LOGGERS[n.value](per=LogPer(log_per).value) for n in logger or ()],
        resume_command=shlex.join(command),
        progress="off" if Progress(progress) is Progress.none else Progress(progress).value,
        verbose=1 if verbose else 0,
    )
    typer.echo(f"sweep directory: {sweep_dir}")
    typer.echo(f"next: sweep show {sweep_dir}")


@app.command()
@_guard
def plan(
    spec: SpecArg,
    storage: Annotated[str | None, typer.Option(help="Leave out members already trained in STORAGE/<name>.")] = None,
    overrides: SetOpt = None,
) -> None:
    """Show trials, blocks and resources; run nothing.

    One trial per structural configuration and block of seeds; vmapped hyperparameters share a
    block. Configurations are shown by their grid values next to their config ids. Modules
    named in SPEC are imported from its folder too (and from PYTHONPATH and the installed packages).
    """
    from ..tune import plan as plan_sweep

    with spec_folder_importable(spec):
        typer.echo(str(plan_sweep(_spec(spec, overrides), storage=storage)))


@app.command()
@_guard
def status(sweep_dir: DirArg) -> None:
    """Trials done/running/failed/pending, members stored.

    Read from the sweep directory only (plan.json, trial checkpoints, ensembles/manifest.json);
    "running" means a partial checkpoint without an error (or an interrupted sweep).
    """
    from ._status import sweep_status

    typer.echo(sweep_status(_existing(sweep_dir)))


@app.command()
@_guard
def aggregate(
    sweep_dir: DirArg,
    parallel: Annotated[
        bool,
        typer.Option("--parallel", help="One Ray task per leaves file, in parallel (a new local Ray, or --address)."),
    ] = False,
    address: Annotated[
        str | None,
        typer.Option(
            help="With --parallel: the Ray cluster to run the tasks on ('auto', 'HOST:6379', 'ray://HOST:10001')."
        ),
    ] = None,
) -> None:
    """Rebuild ensembles/ from the trial checkpoints (the same store, byte for byte, either way)."""
    from ._status import stored_line

    if address and not parallel:
        raise CLIError("--address: only with --parallel (without it the aggregation runs in this process)")
    if parallel:
        from ..tune import aggregate as aggregate_sweep

        store = aggregate_sweep(_existing(sweep_dir), address=address)
    else:
        from ..ensemble import aggregate as aggregate_sweep

        store = aggregate_sweep(_existing(sweep_dir))
    typer.echo(f"store: {store}")
    typer.echo(stored_line(sweep_dir))


MetricOpt = Annotated[
    str,
    typer.Option(
        help="Member column that ranks (a validation column: the test columns are reported, never used to choose)."
    ),
]
ModeOpt = Annotated[str, typer.Option(help="'min' if lower --metric is better, 'max' if higher (e.g. accuracy).")]


@app.command()
@_guard
def verify(sweep_dir: DirArg) -> None:
    """Check every file of the store; one line per problem.

    Reads every file of the committed store once and checks its size and sha256 against the
    manifest, looks for files and links the manifest does not list, and checks the tables
    against each other. Runs no code the store names. Exits 1 if anything is wrong; else prints
    the manifest's own sha256, for whoever sent the store to confirm.
    """
    from .._errors import StoreError
    from ..store import Store

    store = Store.open(sweep_dir)
    try:
        store.verify()
    except StoreError as e:
        for problem in e.problems:
            typer.echo(f"error: {' '.join(problem.split())}", err=True)
        raise typer.Exit(1) from None
    manifest = store.manifest
    typer.echo(
        f"ok: {len(manifest['files']) + 1} files verified ({manifest.get('num_members', 0)} members, "
        f"{len(store.configs)} structural configs) in {store.root}"
    )
    typer.echo(f"manifest sha256: {store.manifest_sha256}")


@app.command()
@_guard
def show(
    sweep_dir: DirArg,
    metric: MetricOpt = "val_loss",
    mode: ModeOpt = "min",
    members: Annotated[
        bool, typer.Option("--members", help="List members (best first) instead of configurations.")
    ] = False,
    where: Annotated[list[str] | None, typer.Option(help="Keep members with column=value (repeatable).")] = None,
    limit: Annotated[int, typer.Option(min=1, help="Print at most this many rows.")] = 50,
    wide: Annotated[bool, typer.Option("--wide", help="Every statistic (median, min, max, IQM too).")] = False,
    format: Annotated[
        Format,
        typer.Option("--format", help="table (for reading), csv or json (for other tools; every row up to --limit)."),
    ] = Format.table,
    scores: Annotated[bool, typer.Option("--scores", help="The stored ensemble scores beside (sweep scores).")] = False,
) -> None:
    """Statistics over seeds per configuration, best first.

    One row per configuration (structural config x vmapped hyperparameters), ranked by the mean of
    METRIC (validation loss by default): member counts and, over members that did not diverge,
    mean, std and the 95% bootstrap interval of the mean (--wide: median, min, max, IQM too), with
    the test mean and its interval beside (reported, not used to rank).
    """
    from .._errors import StoreError
    from ..ensemble import load
    from ..ensemble._rows import compact
    from ._race import race_lines
    from ._scores import seeds_line
    from ._status import sweeps_in
    from ._tables import format_table, write_table

    try:
        ens = load(_existing(sweep_dir))
    except StoreError:
        inside = sweeps_in(sweep_dir)
        if not inside:
            raise
        typer.echo(f"{sweep_dir} is a storage folder holding {len(inside)} sweep(s):")
        for path, stored in inside:
            typer.echo(f"  {path}  ({stored})")
        typer.echo(f"show one: sweep show {inside[0][0]}")
        return
    kw = parse_where(where)
    if kw:
        ens = ens.where(**kw)
    fmt = Format(format).value
    if members:
        table = ens.best(min(limit, len(ens)), metric=metric, mode=mode).table  # reads only the rows shown
        table = table.drop_columns([c for c in table.column_names if c.endswith("_history") or c == "history_epochs"])
        if fmt != "table":
            typer.echo(write_table(table, fmt), nl=False)
            return
        typer.echo(f"members ranked by {metric} ({'lowest' if mode == 'min' else 'highest'} first):")
        typer.echo(format_table(table, limit))
        if len(ens) > limit:
            typer.echo(f"... {len(ens) - limit} more members (--limit)")
        return
    table = ens.summary(metric, mode, scores=scores).table
    if not wide:
        table = compact(table)
    if fmt != "table":
        typer.echo(write_table(table.slice(0, limit), fmt), nl=False)
        return
    beside = [c.removesuffix("_mean") for c in table.column_names if c.startswith("test_") and c.endswith("_mean")]
    typer.echo(
        f"{metric} over seeds per configuration ({len(ens)} members), best mean first; 95% bootstrap "
        f"intervals" + (f"; {', '.join(beside)} reported beside, not used to rank:" if beside else ":")
    )
    typer.echo(format_table(table, limit))
    typer.echo(seeds_line(ens, metric, mode))
    race_lines(ens, limit)


@app.command()
@_guard
def plot(
    sweep_dir: DirArg,
    out: Annotated[
        str | None,
        typer.Option(
            help="Figure file: .png, .pdf or .svg. Several figures (--kind all) go "
            "to <stem>-<kind><suffix> next to it. Default: <SWEEP_DIR>/sweep.png "
            "(./sweep.png for remote sweeps)."
        ),
    ] = None,
    kind: Annotated[
        Kind,
        typer.Option(
            help="overview (every panel in one figure), curves, spread, predictions, "
            "rollout_error, rollout, calibration, spread_skill, ensemble_size, or all "
            "(one file per figure the store has the data for)."
        ),
    ] = Kind.overview,
    dpi: Annotated[int, typer.Option(min=10, max=2400, help="Resolution of PNG files.")] = 200,
    metric: MetricOpt = "val_loss",
    mode: ModeOpt = "min",
    samples: Annotated[
        int,
        typer.Option(min=1, help="Test samples shown with the ensemble's predictions (at most those the store keeps)."),
    ] = 3,
    max_curves: Annotated[int, typer.Option(min=1, help="Learning curves drawn per configuration (at most).")] = 200,
    rollout_metric: Annotated[
        str | None,
        typer.Option(
            help="Rollout metric whose error over steps is drawn (default: the first stored, e.g. nrmse).",
            show_default=False,
        ),
    ] = None,
    trust_code: Annotated[
        bool,
        typer.Option(
            "--trust-code",
            help="Run a model built by a factory the store names (imported from your environment, never "
            "from the store's files) to draw its predictions and rollouts. Only for stores you trust.",
        ),
    ] = False,
) -> None:
    """Learning curves, spread over seeds, predictions ±std.

    Panels: every member's learning curves with each configuration's median and 10-90% band (log
    scale, one panel per split on a shared y axis; with a validation set the test panel shows the
    configuration chosen on METRIC only); the final METRIC over seeds per configuration; the
    chosen configuration's ensemble mean ±std against the ground truth on the first test samples
    the store holds; for autoregressive emulators the rollout error over steps per configuration
    (median and 10-90% band over seeds) and the chosen configuration's ensemble rolled out
    against a stored test trajectory (mean ±std). Configurations are ordered best first by
    METRIC, as in `sweep show`. Draws only from the store: no data is regenerated and no model
    factory the store names is imported (that panel then says why it is empty) unless
    --trust-code is given.
    """
    from ..figures import figure_paths
    from ..figures import plot as plot_sweep

    if out is None:
        out = str(Path(sweep_dir) / "sweep.png") if "://" not in sweep_dir else "sweep.png"
    chosen = Kind(kind).value
    figure_paths(out, chosen)  # a bad --out fails before the store is read
    try:
        figures = plot_sweep(
            _existing(sweep_dir),
            chosen,
            out=out,
            dpi=dpi,
            metric=metric,
            mode=mode,
            num_samples=samples,
            max_curves=max_curves,
            rollout_metric=rollout_metric,
            trust_code=trust_code,
        )
    except SweepError as e:
        if not trust_code or "cannot import module" not in str(e):
            raise
        raise type(e)(
            f"{e}; --trust-code imports the factory from your environment: install its package or run "
            f"with PYTHONPATH=<the folder of its module>"
        ) from None
    for path in figure_paths(out, list(figures)) if isinstance(figures, dict) else [out]:
        typer.echo(f"wrote {path}")


app.command(name="scores")(_guard(scores_command))


def _format_warning(message, category, filename, lineno, line=None) -> str:
    return f"warning: {' '.join(str(message).split())}\n"


def main() -> None:
    """Console-script entry point (``sweep = "sweep.cli:main"``, ``python -m sweep``): configures the
    process (:func:`sweep.configure`), prints warnings as one line, runs the command."""
    import warnings

    from .._configure import configure

    configure()
    warnings.formatwarning = _format_warning
    app(prog_name="sweep")


from . import _predict  # noqa: E402, F401  (registers `sweep predict`; it uses the options above)
from . import _serve as _serve  # noqa: E402  (registers `sweep serve`)
