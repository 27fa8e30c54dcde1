"""The ``sweep`` command line: run, plan, status, aggregate, show, plot, predict.

Every :class:`sweep.SweepError` and every unreadable file ends the command with one line on
stderr (``error: <message>``) and exit status 1; ``sweep --debug ...`` (or ``SWEEP_DEBUG=1``)
shows the traceback instead. Ray and matplotlib are imported only by the commands that use them.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from .._errors import SweepError

app = typer.Typer(
    name="sweep",
    help="Train ensembles of independently seeded JAX/Equinox networks with Ray Tune, and query them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class CLIError(SweepError):
    """A command-line argument or input file that cannot be used."""


_state = {"debug": False}


def _message(e: BaseException) -> str:
    if isinstance(e, SweepError):
        text = str(e)
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
        except KeyboardInterrupt:
            typer.echo("error: interrupted", err=True)
            raise typer.Exit(130) from None
        except Exception as e:
            if _state["debug"]:
                raise
            typer.echo(f"error: {_message(e)}", err=True)
            raise typer.Exit(1) from None

    return wrapper


@app.callback()
def _main(debug: Annotated[bool, typer.Option("--debug", help="Show the full traceback on errors.")] = False) -> None:
    """seed-sweep: hybrid seed ensembles (vmapped blocks of seeds, Ray Tune trials)."""
    _state["debug"] = debug or bool(os.environ.get("SWEEP_DEBUG"))


# -- arguments shared by several commands ---------------------------------------------------------
SpecArg = Annotated[Path, typer.Argument(help="Sweep specification (TOML).", show_default=False)]
DirArg = Annotated[str, typer.Argument(help="Sweep directory (local path or URI such as s3://bucket/runs/heat).",
                                       show_default=False)]


def _spec(path: Path):
    from ..spec import SweepSpec

    if path.is_dir():
        raise CLIError(f"SPEC: {str(path)!r} is a directory; give a sweep specification .toml file")
    return SweepSpec.from_toml(path)


def _parse_value(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def parse_where(items: list[str] | None) -> dict[str, Any]:
    """``["depth=6", "learning_rate=3e-4"]`` -> ``{"depth": 6, "learning_rate": 0.0003}``; a key
    given twice keeps either value (``depth=4 depth=6`` -> ``{"depth": [4, 6]}``)."""
    out: dict[str, Any] = {}
    for item in items or ():
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise CLIError(f"--where: got {item!r}; use key=value, e.g. --where depth=6")
        value = _parse_value(value.strip())
        if key in out:
            out[key] = [*(out[key] if isinstance(out[key], list) else [out[key]]), value]
        else:
            out[key] = value
    return out


# -- commands -------------------------------------------------------------------------------------
@app.command()
@_guard
def run(
    spec: SpecArg,
    storage: Annotated[str, typer.Option(
        help="Where sweeps are stored (path or URI); the sweep goes to STORAGE/<name>.")] = "./runs",
    address: Annotated[str | None, typer.Option(
        help="Ray cluster to join: 'auto', 'HOST:6379' or 'ray://HOST:10001'; default: a local Ray.")] = None,
    resume: Annotated[bool, typer.Option(
        "--resume", help="Continue an interrupted sweep from its checkpoints.")] = False,
) -> None:
    """Run a sweep on Ray Tune, then aggregate it.

    Trains every member of SPEC (or only those not trained yet in STORAGE/<name>), one Ray Tune
    trial per block of seeds, and builds the ensembles. Progress is printed while it runs.
    """
    from ..tune import run as run_sweep

    sweep_dir = run_sweep(_spec(spec), storage=storage, address=address, resume=resume)
    typer.echo(f"sweep directory: {sweep_dir}")
    typer.echo(f"next: sweep show {sweep_dir}")


@app.command()
@_guard
def plan(
    spec: SpecArg,
    storage: Annotated[str | None, typer.Option(help="Leave out members already trained in STORAGE/<name>.")] = None,
) -> None:
    """Show trials, blocks and resources; run nothing.

    One trial per structural configuration and block of seeds; vmapped hyperparameters share a block.
    """
    from ..tune import plan as plan_sweep

    typer.echo(str(plan_sweep(_spec(spec), storage=storage)))


@app.command()
@_guard
def status(sweep_dir: DirArg) -> None:
    """Trials done/running/failed/pending, members stored.

    Read from the sweep directory only (plan.json, trial checkpoints, ensembles/manifest.json);
    "running" means a partial checkpoint without an error (or an interrupted sweep).
    """
    from ._status import sweep_status

    typer.echo(sweep_status(sweep_dir))


@app.command()
@_guard
def aggregate(sweep_dir: DirArg) -> None:
    """Rebuild ensembles/ from the trial checkpoints."""
    from ..store import aggregate as aggregate_sweep
    from ._status import stored_line

    store = aggregate_sweep(sweep_dir)
    typer.echo(f"store: {store}")
    typer.echo(stored_line(sweep_dir))


MetricOpt = Annotated[str, typer.Option(help="Member column that ranks (a validation column: the test columns "
                                               "are reported, never used to choose).")]
ModeOpt = Annotated[str, typer.Option(help="'min' if lower --metric is better, 'max' if higher (e.g. accuracy).")]


@app.command()
@_guard
def show(
    sweep_dir: DirArg,
    metric: MetricOpt = "val_loss",
    mode: ModeOpt = "min",
    members: Annotated[bool, typer.Option(
        "--members", help="List members (best first) instead of configurations.")] = False,
    where: Annotated[list[str] | None, typer.Option(help="Keep members with column=value (repeatable).")] = None,
    limit: Annotated[int, typer.Option(min=1, help="Print at most this many rows.")] = 50,
    wide: Annotated[bool, typer.Option("--wide", help="Every statistic (IQM and intervals too).")] = False,
) -> None:
    """Statistics over seeds per configuration, best first.

    One row per configuration (structural config x vmapped hyperparameters), ranked by the mean of
    METRIC (validation loss by default): member counts and, over members that did not diverge,
    mean, std and the 95% bootstrap interval of the mean (--wide: median, min, max, IQM too), with
    the test mean and its interval beside (reported, not used to rank).
    """
    from ..ensemble import load
    from ._tables import format_table

    ens = load(sweep_dir)
    kw = parse_where(where)
    if kw:
        ens = ens.where(**kw)
    if members:
        table = ens.best(min(limit, len(ens)), metric=metric, mode=mode).table  # reads only the rows shown
        table = table.drop_columns([c for c in table.column_names if c.endswith("_history") or c == "history_epochs"])
        typer.echo(f"members ranked by {metric} ({'lowest' if mode == 'min' else 'highest'} first):")
        typer.echo(format_table(table, limit))
        if len(ens) > limit:
            typer.echo(f"... {len(ens) - limit} more members (--limit)")
        return
    table = ens.summary(metric, mode)
    if not wide:
        hidden = {"iqm", "iqm_ci_low", "iqm_ci_high", "n", "median", "min", "max"} | ({"stopped_early"} if not any(
            table.column("stopped_early").to_pylist()) else set())
        table = table.drop_columns([c for c in table.column_names if c in hidden])
    beside = [c.removesuffix("_mean") for c in table.column_names if c.startswith("test_") and c.endswith("_mean")]
    typer.echo(f"{metric} over seeds per configuration ({len(ens)} members), best mean first; 95% bootstrap "
               f"intervals" + (f"; {', '.join(beside)} reported beside, not used to rank:" if beside else ":"))
    typer.echo(format_table(table, limit))


@app.command()
@_guard
def plot(
    sweep_dir: DirArg,
    out: Annotated[str | None, typer.Option(help="PNG file for one figure, or a prefix (no .png) for one PNG per panel. "
                                            "Default: <SWEEP_DIR>/sweep.png (./sweep.png for remote sweeps).")] = None,
    samples: Annotated[int, typer.Option(min=1, help="Test samples shown with the ensemble's predictions.")] = 3,
    max_curves: Annotated[int, typer.Option(min=1, help="Learning curves drawn per configuration (at most).")] = 200,
    metric: MetricOpt = "val_loss",
    mode: ModeOpt = "min",
) -> None:
    """Learning curves, spread over seeds, predictions ±std.

    Panels: every member's train/validation loss with each configuration's median and 10-90% band
    (log scale); final METRIC over seeds per configuration; for the configuration chosen by METRIC
    only, its test loss curves and final test values, and its ensemble mean ±std against the ground
    truth on the first test samples of its spec's data.
    """
    from ..ensemble import load
    from ..figures._plots import sweep_figures, write_figures

    if out is None:
        out = str(Path(sweep_dir) / "sweep.png") if "://" not in sweep_dir else "sweep.png"
    figures = sweep_figures(load(sweep_dir), panels=not out.endswith(".png"), num_samples=samples, max_curves=max_curves,
                            metric=metric, mode=mode)
    for path in write_figures(figures, out):
        typer.echo(f"wrote {path}")


@app.command()
@_guard
def predict(
    sweep_dir: DirArg,
    input: Annotated[Path, typer.Option("--input", "-i", help="Inputs (.npy): [samples, channels, *spatial].",
                                        show_default=False)],
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the predictions (.npy).",
                                         show_default=False)],
    where: Annotated[list[str] | None, typer.Option(help="Keep members with column=value (repeatable), "
                                                    "e.g. --where depth=6 --where learning_rate=3e-4.")] = None,
    best: Annotated[int | None, typer.Option(help="Keep the K best members by --metric (validation loss).")] = None,
    metric: MetricOpt = "val_loss",
    mode: ModeOpt = "min",
    mean: Annotated[bool, typer.Option("--mean", help="Write the mean over members instead of every member.")] = False,
    std: Annotated[bool, typer.Option("--std", help="Write the mean to OUTPUT and the std over members "
                                      "(ddof=0) to OUTPUT's name + '_std.npy'.")] = False,
) -> None:
    """Predict with selected members; write .npy.

    OUTPUT holds [members, samples, channels, *spatial] (or the mean with --mean / --std). The
    selection must lie in one structural configuration.
    """
    import numpy as np

    from ..ensemble import load

    if output.suffix != ".npy":
        raise CLIError(f"--output: got {str(output)!r}; give a file name ending in .npy")
    x = load_npy(input, "--input")
    ens = load(sweep_dir)
    kw = parse_where(where)
    if kw:
        ens = ens.where(**kw)
    if best is not None:
        ens = ens.best(best, metric=metric, mode=mode)
    n = len(ens)
    if std or mean:
        m, s = ens.mean_std(x)
        _save(output, np.asarray(m))
        typer.echo(f"wrote {output}: mean over {n} members, shape {tuple(np.shape(m))}")
        if std:
            std_path = output.with_name(output.name.removesuffix(".npy") + "_std.npy")
            _save(std_path, np.asarray(s))
            typer.echo(f"wrote {std_path}: std over {n} members, shape {tuple(np.shape(s))}")
        return
    y = np.asarray(ens.predict(x))
    _save(output, y)
    typer.echo(f"wrote {output}: {n} members, shape {y.shape}")


def load_npy(path: Path, option: str):
    """An array from a .npy file (never unpickled); errors name the option and the file."""
    import numpy as np

    if not path.is_file():
        raise CLIError(f"{option}: {str(path)!r} does not exist or is not a file")
    try:
        array = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise CLIError(f"{option}: {str(path)!r} is not a readable .npy array ({e})") from None
    if not isinstance(array, np.ndarray):
        array.close()
        raise CLIError(f"{option}: {str(path)!r} is an .npz archive; give one array saved with numpy.save (.npy)")
    return array


def _save(path: Path, array) -> None:
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, array)


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
