"""``sweep run`` and ``sweep plan``: a spec's trials, planned or run on Ray Tune."""

from __future__ import annotations

import os
import shlex
from typing import Annotated

import typer

from ._args import Executor, Logger, LogPer, Progress, choice
from ._imports import spec_folder_importable
from ._options import SetOpt, SpecArg, load_spec
from ._tables import terminal_width


def _reports_or_auto(value: str) -> str:
    """The ``parser`` of ``--checkpoint-every``: ``auto`` or an integer >= 1, else a usage error (exit 2)."""
    if value == "auto" or (value.isdigit() and int(value) >= 1):
        return value
    raise typer.BadParameter(
        f"got {value!r}; give an integer >= 1 (a checkpoint every that many reports) or 'auto' (paced by the "
        "storage's write rate)"
    )


def run(
    spec: SpecArg,
    storage: Annotated[
        str,
        typer.Option(
            metavar="STORAGE", help="Where sweeps are stored (path or URI); the sweep goes to STORAGE/<name>."
        ),
    ] = "./runs",
    address: Annotated[
        str | None,
        typer.Option(
            metavar="ADDRESS",
            help="Ray cluster to join: 'auto', 'HOST:6379' or 'ray://HOST:10001'; default: a local Ray.",
        ),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue an interrupted sweep from its checkpoints.")
    ] = False,
    overrides: SetOpt = None,
    logger: Annotated[
        list[Logger] | None,
        typer.Option(
            "--logger",
            parser=choice(Logger),
            metavar="TRACKER",  # the trackers are in the help: a metavar of them all breaks mid-word at 80 columns
            help="Log every member's curves to a tracker: tensorboard, mlflow or wandb (repeatable).",
            show_default=False,
        ),
    ] = None,
    log_per: Annotated[
        LogPer, typer.Option(parser=choice(LogPer), help="One tracker run per member or per configuration.")
    ] = LogPer.member,
    verbose: Annotated[bool, typer.Option("--verbose", help="Show Ray's and Tune's own output.")] = False,
    progress: Annotated[
        Progress,
        typer.Option(
            parser=choice(Progress, aliases={"none": Progress.off}),
            help="live: one display updated in place; plain: a line every 10 s; off: nothing; "
            "auto: live on a terminal, plain otherwise.",
        ),
    ] = Progress.auto,
    checkpoint_every: Annotated[
        str,
        typer.Option(
            metavar="<N|auto>",
            parser=_reports_or_auto,
            help="A block checkpoint every N reports, or 'auto': paced by the storage's write rate.",
        ),
    ] = "auto",
    executor: Annotated[
        Executor,
        typer.Option(
            parser=choice(Executor),
            help="tune: every block a Ray Tune trial; local: the blocks one after another here, no Ray.",
        ),
    ] = Executor.tune,
) -> None:
    """Run a sweep on Ray Tune (or in this process: --executor local), then aggregate it.

    Trains every member of SPEC (or only those not trained yet in STORAGE/<name>), one Ray Tune
    trial per block of seeds, and builds the ensembles. A live display shows trials, members,
    epochs, throughput, ETA and the best loss of every configuration (plain lines when the
    output is not a terminal). Ctrl-C stops the trials, keeps what is done and prints how to
    resume (exit status 130); a second Ctrl-C stops at once; a SIGTERM (Slurm, Kubernetes) acts
    as a Ctrl-C (exit status 143). Modules named in SPEC are imported from its folder too (and from PYTHONPATH and
    the installed packages).
    """
    with spec_folder_importable(spec):
        _run_command(
            spec, storage, address, resume, overrides, logger, log_per, verbose, progress, checkpoint_every, executor
        )


def _run_command(
    spec, storage, address, resume, overrides, logger, log_per, verbose, progress, checkpoint_every, executor
):
    from ..tune import LOGGERS, RunOptions
    from ..tune import run as run_sweep

    parsed = load_spec(spec, overrides)
    command = [  # paths made absolute: it resumes from any folder (`sweep status` prints it too)
        "sweep",
        "run",
        os.path.abspath(spec),
        "--storage",
        storage if "://" in storage else os.path.abspath(os.path.expanduser(storage)),
        *(["--address", address] if address else []),
        *(a for o in overrides or () for a in ("--set", o)),
        *(["--checkpoint-every", checkpoint_every] if checkpoint_every != "auto" else []),
        *(["--progress", Progress(progress).value] if Progress(progress) is not Progress.auto else []),
        *(["--executor", Executor(executor).value] if Executor(executor) is not Executor.tune else []),
        *(a for n in logger or () for a in ("--logger", n.value)),
        *(["--log-per", LogPer(log_per).value] if LogPer(log_per) is not LogPer.member else []),
        *(["--verbose"] if verbose else []),
        "--resume",
    ]
    every = "auto" if checkpoint_every == "auto" else int(checkpoint_every)
    options = RunOptions(
        executor=Executor(executor).value,
        address=address,
        resume=resume,
        checkpoint_every=every,
        loggers=[LOGGERS[n.value](per=LogPer(log_per).value) for n in logger or ()],
        resume_command=shlex.join(command),
        progress=Progress(progress).value,
        verbose=1 if verbose else 0,
    )
    sweep_dir = run_sweep(parsed, storage=storage, options=options)
    typer.echo(f"sweep directory: {sweep_dir}")
    typer.echo(f"next: sweep show {sweep_dir}")


def plan(
    spec: SpecArg,
    storage: Annotated[
        str | None,
        typer.Option(
            metavar="STORAGE",
            help="Plan as `sweep run` would go on there: members already trained in STORAGE/<name> left out, "
            "a search's configurations so far counted, and what run refuses (other settings) refused.",
        ),
    ] = None,
    overrides: SetOpt = None,
) -> None:
    """Show trials, blocks and resources; run nothing.

    One trial per structural configuration and block of seeds; vmapped hyperparameters share a
    block. Configurations are shown by their grid values next to their config ids. Modules
    named in SPEC are imported from its folder too (and from PYTHONPATH and the installed packages).
    """
    from ..tune import plan as plan_sweep

    with spec_folder_importable(spec):
        typer.echo(plan_sweep(load_spec(spec, overrides), storage=storage).format(terminal_width()))
