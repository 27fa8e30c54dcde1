"""The ``sweep`` command line: the app, its error handling, and every command registered in
:data:`COMMANDS` order (run, plan, status, aggregate, verify, show, plot, scores, predict, serve,
export; one module per command or family, their shared options in :mod:`._options`).

Every :class:`sweep.SweepError` and every unreadable file ends the command with one line on
stderr (``error: <message>``, phrased with the command's options, see :func:`cli_phrasing`)
and exit status 1; ``sweep --debug ...`` (or ``SWEEP_DEBUG=1``) shows the traceback instead.
Ctrl-C ends a command with exit status 130. Ray and matplotlib are imported only by the
commands that use them.
"""

from __future__ import annotations

import functools
import inspect
import os
import signal
import sys
from typing import Annotated

import typer
from typer.core import TyperCommand, TyperGroup

from .._errors import SweepError
from ._args import cli_phrasing
from ._export import export
from ._plot import plot
from ._predict import predict
from ._run import plan, run
from ._scores import scores
from ._serve import serve
from ._show import show
from ._store import aggregate, status, verify


class _UntypedFlags:
    """Parameters with no type shown beside a flag: typer 0.29's rich help labels every flag
    ``<bool>`` (``--resume <bool>``), as if it took a value."""

    def get_params(self, ctx) -> list:
        params = super().get_params(ctx)  # type: ignore[misc]
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
        return params


_BOOLEAN_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "1", "0"})


class _Command(_UntypedFlags, TyperCommand):
    """typer's command, its flags shown without a type, and a flag given a value (`--resume true`)
    named as such (click's own word: an unexpected extra argument)."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        flags = {o for p in self.params if getattr(p, "is_flag", False) for o in p.opts}
        for flag, value in zip(args, args[1:], strict=False):
            if flag in flags and value.lower() in _BOOLEAN_WORDS:
                ctx.fail(f"{flag} is a flag and takes no value: give {flag} alone (without {value!r}), or leave it out")
        return super().parse_args(ctx, args)


class _Commands(_UntypedFlags, TyperGroup):
    """typer's group, which says where a command's option given before the command's name goes;
    its flags shown without a type."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        own = {o for p in self.params for o in p.opts} | set(ctx.help_option_names)
        named = next((i for i, a in enumerate(args) if a in self.commands), None)
        if named is not None:
            command = args[named]
            takes = {o for p in self.commands[command].params for o in p.opts}
            early = [a.split("=")[0] for a in args[:named] if a.startswith("-")]
            for option in (o for o in early if o not in own and o in takes):
                ctx.fail(
                    f"{option} is an option of `sweep {command}`: give it after the command's name "
                    f"(`sweep {command} {option} ...`)"
                )
        return super().parse_args(ctx, args)


app: typer.Typer = typer.Typer(
    cls=_Commands,
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


def _reader_left() -> bool:
    """Whether standard output is a pipe whose reader has gone (rather than another pipe or
    socket of the command's that broke)."""
    import select

    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's capture)
        return False
    poll = select.poll()
    poll.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poll.poll(0))


def guard(fn):
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
            raise typer.Exit(128 + getattr(e, "signal", signal.SIGINT)) from None  # 130; 143 after a SIGTERM
        except Exception as e:
            if isinstance(e, BrokenPipeError) and _reader_left():
                # the reader left (`sweep show DIR | head`): no more to say, nowhere to say it
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's advice: no error at exit
                raise typer.Exit(1) from None
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


def _format_warning(message, category, filename, lineno, line=None) -> str:
    return f"warning: {' '.join(str(message).split())}\n"


def main() -> None:
    """Console-script entry point (``sweep = "sweep.cli:main"``, ``python -m sweep``): configures the
    process (:func:`sweep.configure`), prints warnings as one line, runs the command."""
    import warnings

    from .._configure import configure

    configure()
    warnings.formatwarning = _format_warning
    try:
        app(prog_name="sweep")
    except SystemExit as e:
        leave(e.code)


def leave(code: int | str | None) -> None:
    """End the process with ``code`` (as ``sys.exit``) once a command is done.

    Without Ray running in this process the interpreter is not finalised (``os._exit`` after
    flushing the output): pyarrow's reader threads can still be alive then, and the C++ runtime
    destroying them aborts the process with SIGABRT after the command's correct output
    (apache/arrow#34314; seen in ``sweep serve --where`` and ``sweep scores`` runs). Where a
    command started Ray (``run``, ``serve``, ``aggregate``), the normal exit runs, so that Ray's
    own exit handler stops what it started; after a Ctrl-C (a SIGTERM), with a second one ignored.
    """
    ray = sys.modules.get("ray")
    if ray is not None and getattr(ray, "is_initialized", lambda: False)():
        if code in (130, 143):  # a second Ctrl-C (SIGTERM) must not cut Ray's exit handler short: processes would stay
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        if code == 143:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise SystemExit(code)
    if isinstance(code, str):
        print(code, file=sys.stderr)
    status = 0 if code is None else code if isinstance(code, int) else 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


COMMANDS = (
    run,
    plan,
    status,
    aggregate,
    verify,
    show,
    plot,
    scores,
    predict,
    serve,
    export,
)  # as `sweep --help` lists them


def _help(command) -> str:
    """``command``'s docstring with each paragraph on one line, so that the terminal wraps it to
    its width (typer's rich help keeps a docstring's line breaks)."""
    return "\n\n".join(" ".join(part.split()) for part in (inspect.getdoc(command) or "").split("\n\n"))


for _command in COMMANDS:
    app.command(cls=_Command, help=_help(_command))(guard(_command))
