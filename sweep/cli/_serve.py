"""``sweep serve DIR``: the combined ensemble over HTTP on Ray Serve, until Ctrl-C."""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path
from typing import Annotated

import typer

from .._errors import SpecError
from ._args import CLIError, parse_where
from ._options import DirArg, MetricOpt, ModeOpt, PoolOpt, TrustCodeOpt, WhereOpt, existing, one_setting, selected

CHANGES_S = 1.0  # how often the service is asked what became of newer generations
_FLAGS = {"cpus": "--cpu", "gpus": "--gpu", "batch_wait_s": "--batch-wait", "watch_s": "--watch"}


def _flags(error: SpecError) -> CLIError:
    """A :class:`ServeOptions` error phrased with this command's options (``--max-batch``, not
    ``ServeOptions.max_batch``)."""
    text = re.sub(r"ServeOptions\.(\w+)", lambda m: _FLAGS.get(m[1], "--" + m[1].replace("_", "-")), str(error))
    return CLIError(text.replace(" or None", " (or leave the option out)"))


def serve(
    sweep_dir: DirArg,
    where: WhereOpt = None,
    best: Annotated[
        int | None, typer.Option(min=1, metavar="K", help="Serve the K best members by --metric (validation loss).")
    ] = None,
    metric: MetricOpt = "val_loss",
    mode: ModeOpt = None,
    greedy: Annotated[
        int | None,
        typer.Option(
            min=1,
            metavar="K",
            help="Serve K steps of greedy selection (validation CRPS) over the selected members, "
            "configurations and architectures mixed.",
        ),
    ] = None,
    recalibrate: Annotated[
        bool,
        typer.Option(
            "--recalibrate",
            help='Fit a recalibration on the validation split; /predict then answers "calibrated": true and '
            '"interval": 0.5 or 0.9.',
        ),
    ] = False,
    host: Annotated[
        str, typer.Option(metavar="HOST", help="Address to bind; 127.0.0.1 answers this machine only.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port.")] = 8000,
    replicas: Annotated[int, typer.Option(help="Replicas, each holding every served member.")] = 1,
    cpu: Annotated[float, typer.Option("--cpu", help="CPUs per replica.")] = 1.0,
    gpu: Annotated[float, typer.Option("--gpu", help="GPUs per replica.")] = 0.0,
    ingress: Annotated[
        str,
        typer.Option(
            metavar="<direct|proxy>",  # checked by ServeOptions, which names them
            help="direct: one replica answers HTTP itself (no proxy hop); proxy: through Serve's HTTP proxy "
            "(always so with several replicas).",
        ),
    ] = "direct",
    max_batch: Annotated[
        int, typer.Option(help="Most rows per forward pass; the powers of two up to it are compiled at start-up.")
    ] = 64,
    batch_wait: Annotated[
        float,
        typer.Option(
            help="Seconds a forward pass waits for more requests when fewer than --max-batch are queued (0: it "
            "takes what arrived while the previous pass ran)."
        ),
    ] = 0.0,
    max_rows: Annotated[int | None, typer.Option(help="Most rows per request (default: --max-batch).")] = None,
    max_steps: Annotated[int, typer.Option(help="Most steps per /rollout request.")] = 1000,
    token_file: Annotated[
        Path | None,
        typer.Option(help="File holding a bearer token; requests without it get 401 (/healthz stays open)."),
    ] = None,
    watch: Annotated[
        float | None,
        typer.Option(
            metavar="SECONDS", help="Switch to a newer generation of the store on its own, checking every SECONDS."
        ),
    ] = None,
    address: Annotated[
        str | None,
        typer.Option(metavar="ADDRESS", help="Ray cluster to run on (default: a local Ray started for the service)."),
    ] = None,
    trust_code: TrustCodeOpt = False,
    pool: PoolOpt = False,
) -> None:
    """Serve the ensemble's mean and std (and its members' predictions) over HTTP until Ctrl-C.

    Routes: POST /predict, POST /rollout, GET /members, GET /info, GET /healthz, POST /reload;
    OpenAPI at /docs. Built on Ray Serve (the seed-sweep\\[serve] extra). Ctrl-C answers the
    requests in flight, stops and exits with status 130; a SIGTERM (systemd, Docker, Kubernetes)
    acts as a Ctrl-C (exit status 143).
    """
    from ..serving import ServeOptions

    try:
        options = ServeOptions(
            where=parse_where(where),
            best=best,
            metric=metric,
            mode=mode,
            pool=pool,
            greedy=greedy,
            recalibrate=recalibrate,
            trust_code=trust_code,
            host=host,
            port=port,
            replicas=replicas,
            cpus=cpu,
            gpus=gpu,
            ingress=ingress,
            max_batch=max_batch,
            batch_wait_s=batch_wait,
            max_rows=max_rows,
            max_steps=max_steps,
            token_file=token_file,
            watch_s=watch,
            address=address,
        )
    except SpecError as e:
        raise _flags(e) from None
    if greedy is None:  # (a greedy selection blends configurations by design)
        from ..ensemble import load  # before Ray starts: as sweep predict, pooled settings need --pool

        one_setting(
            selected(load(existing(sweep_dir), trust_code=trust_code), where, best, metric, mode),
            where,
            pool,
            blend=True,
        )
    from .._interrupt import SigtermAsCtrlC

    # a SIGTERM (systemd, Docker, Kubernetes) stops it as Ctrl-C does; where it reached the Ray the
    # service started too (a process group's), the process ends at once, not after Ray's minute
    with SigtermAsCtrlC("stopped: the service's Ray ended") as sigterm:
        _serve_until_stopped(existing(sweep_dir), options, sigterm)


def _serve_until_stopped(path: str, options, sigterm) -> None:
    from .._interrupt import starting_ray
    from ..serving import serve as start

    service = None
    try:
        try:
            with starting_ray():
                service = start(path, options)
        except SpecError as e:
            raise _flags(e) from None
        typer.echo(
            f"serving {service.members} members (generation {service.generation or '-'}) at {service.url} "
            f"(OpenAPI: {service.url}/docs; {service.ingress} ingress); Ctrl-C stops"
        )
        watching = True
        while True:  # what became of each newer generation (--watch, POST /reload), as it comes
            time.sleep(CHANGES_S if watching else 3600)
            try:
                lines = service.changes() if watching else []
            except Exception as error:  # Ray lost the service's board: it serves on, unreported
                typer.echo(f"no longer told of newer generations ({type(error).__name__}: {error})", err=True)
                watching = False
                lines = []
            for line in lines:
                typer.echo(f"{time.strftime('%H:%M:%S')} {line}")
    except KeyboardInterrupt as e:
        for stop in (signal.SIGINT, signal.SIGTERM):  # a second one must not cut the shutdown short
            signal.signal(stop, signal.SIG_IGN)
        status = 128 + getattr(e, "signal", signal.SIGINT)  # 130; 143 after a SIGTERM
        sigterm.stopping(status)  # (its Ray found gone as it stops it: the same status)
        typer.echo("stopping", err=True)
        if service is not None:
            service.shutdown()
        typer.echo("stopped", err=True)
        raise typer.Exit(status) from None
    finally:
        if service is not None:
            service.shutdown()
