"""``sweep status``, ``sweep aggregate`` and ``sweep verify``: a sweep directory and its store."""

from __future__ import annotations

from typing import Annotated

import typer

from ._args import CLIError
from ._options import DirArg, TrustCodeOpt, existing


def status(sweep_dir: DirArg) -> None:
    """Trials done/partial/failed/pending, members stored.

    Read from the sweep directory only (plan.json, trial checkpoints, ensembles/manifest.json);
    "partial" means a checkpoint short of its epochs without an error: the trial runs now, or its
    sweep was interrupted.
    """
    from .._errors import StoreError
    from ._status import storage_listing, sweep_status

    try:
        typer.echo(sweep_status(existing(sweep_dir)))
    except StoreError:
        listing = storage_listing(sweep_dir, "status")
        if listing is None:
            raise
        typer.echo(listing)


def aggregate(
    sweep_dir: DirArg,
    parallel: Annotated[
        bool,
        typer.Option("--parallel", help="One Ray task per leaves file, in parallel (a new local Ray, or --address)."),
    ] = False,
    address: Annotated[
        str | None,
        typer.Option(
            metavar="ADDRESS",
            help="With --parallel: the Ray cluster to run the tasks on ('auto', 'HOST:6379', 'ray://HOST:10001').",
        ),
    ] = None,
    trust_code: TrustCodeOpt = False,
) -> None:
    """Rebuild ensembles/ from the trial checkpoints (the same store, byte for byte, either way).

    Reading a checkpoint rebuilds its model: a sweep directory whose models a factory builds
    (model.name 'package.module:factory') is aggregated only with --trust-code, for directories
    you made or trust."""
    from .._words import counted
    from ._status import stored_line, trial_states

    if address and not parallel:
        raise CLIError("--address: only with --parallel (without it the aggregation runs in this process)")
    from ..ensemble import aggregate
    from ..store import SweepDir, live_driver

    where = SweepDir.at(existing(sweep_dir))  # (its plan and block.json files read once, here and below)
    if parallel:
        from ..tune import RayTasks

        store = aggregate(where, map_tasks=RayTasks(address=address), trust_code=trust_code)
    else:
        store = aggregate(where, trust_code=trust_code)
    typer.echo(f"store: {store}")
    typer.echo(stored_line(sweep_dir))
    partial = [t for t in trial_states(where)["trials"] if t["state"] == "partial"]
    if partial:  # (stored as they stand, marked stopped_early: a resume, or the run that drives it, trains them on)
        on = (
            "the run that drives it trains them on and aggregates again"
            if live_driver(where) is not None
            else "`sweep run SPEC --resume` trains them on, and aggregating again replaces them"
        )
        typer.echo(
            f"note: {counted(sum(t['members'] for t in partial), 'member')} of {counted(len(partial), 'unfinished trial')} "
            f"stored as their last checkpoint left them (status stopped_early); {on}"
        )


def verify(
    sweep_dir: Annotated[
        str,
        typer.Argument(
            metavar="DIR",
            help="A sweep directory (local path or URI such as s3://bucket/runs/heat), or an export folder.",
            show_default=False,
        ),
    ],
) -> None:
    """Check every file of the store; one line per problem.

    Reads every file of the committed store once and checks its size and sha256 against the
    manifest, looks for files and links the manifest does not list, and checks the tables
    against each other. Runs no code the store names. Exits 1 if anything is wrong; else prints
    the manifest's own sha256, for whoever sent the store to confirm. An export directory
    (`sweep export`) is checked likewise: its manifest's format, calibration (against its own
    sha256) and shapes (against the programs), every part's size and sha256 against it, and no
    file or link it does not list; then its manifest's sha256 is printed.
    """
    from .._errors import NoStoreError, StoreError
    from .._words import counted
    from ..ensemble import is_export, manifest_sha256, verify_export
    from ..store import Store

    if is_export(existing(sweep_dir, "DIR", "a sweep directory or an export folder")):
        problems = verify_export(sweep_dir)
        for problem in problems:
            typer.echo(f"error: {problem}", err=True)
        if problems:
            raise typer.Exit(1)
        typer.echo(
            f"ok: export verified (manifest.json: its format, calibration and shapes; every part it lists; no other "
            f"file) in {sweep_dir}"
        )
        typer.echo(f"manifest sha256: {manifest_sha256(sweep_dir)}")
        return

    try:
        store = Store.open(sweep_dir)
    except NoStoreError as e:  # verify checks an export too: say so
        raise StoreError(f"{e}; or give an export folder (made by `sweep export`)") from None
    try:
        store.verify()
    except StoreError as e:
        for problem in e.problems:
            typer.echo(f"error: {' '.join(problem.split())}", err=True)
        raise typer.Exit(1) from None
    manifest = store.manifest
    typer.echo(
        f"ok: {len(manifest['files']) + 1} files verified ({counted(manifest.get('num_members', 0), 'member')}, "
        f"{counted(len(store.configs), 'structural config')}) in {store.root}"
    )
    typer.echo(f"manifest sha256: {store.manifest_sha256}")
