"""The ``kerntune`` command line.

User errors (:class:`KerntuneError`) end with one line on stderr and exit
code 2 (usage errors: typer's usual message, also exit 2); tracebacks are kept for real bugs.
"""

from __future__ import annotations

import sys

import typer

try:  # typer >= 0.16 carries its own copy of click
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer
    from click import exceptions as click_exceptions

from kerntune.cli import cache_cmd, compare_cmd, tensile_cmd, llm_cmd, prompt_cmd, space_cmd, store_cmd, tune_cmd
from kerntune.cli import exec_cmd, options_cmd, report_cmd, transform_cmd
from kerntune.errors import KerntuneError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="kerntune: GPU kernel autotuning with a language model in the loop.")
app.add_typer(space_cmd.app, name="space")
app.add_typer(store_cmd.app, name="store")
app.add_typer(llm_cmd.app, name="llm")
app.add_typer(prompt_cmd.app, name="prompt")
app.add_typer(cache_cmd.app, name="cache")
app.add_typer(tensile_cmd.app, name="tensile")
app.command("compare")(compare_cmd.compare)
app.command("tune")(tune_cmd.tune)
app.command("report")(report_cmd.report)
app.command("options")(options_cmd.options)
app.command("transform")(transform_cmd.transform)
app.command("exec", context_settings={"allow_interspersed_args": False})(exec_cmd.exec_)


def _version(value: bool) -> None:
    if value:
        from kerntune import __version__

        print(f"kerntune {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print kerntune's version and exit")) -> None:
    """kerntune: GPU kernel autotuning with a language model in the loop."""

def main(argv: list[str] | None = None) -> None:
    """Run the CLI.  Usage errors (a bad number, an unknown option) are one line too, like
    every other user error: the framework's boxed, multi-line message is not used."""
    _terminate_like_interrupt()
    try:
        rv = app(args=argv, prog_name="kerntune", standalone_mode=False)
    except KerntuneError as exc:
        _fail(str(exc))
    except click_exceptions.NoArgsIsHelpError:
        sys.exit(2)   # the help was shown
    except click_exceptions.UsageError as exc:
        ctx = getattr(exc, "ctx", None)
        where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        _fail(f"{exc.format_message()}{where}")
    except typer.Abort:
        _fail("aborted", 1)
    sys.exit(rv if isinstance(rv, int) else 0)


def _terminate_like_interrupt() -> None:
    """SIGTERM (a batch system's stop, ``kill``, a container's shutdown) ends the command as Ctrl-C does.

    Why: by default a SIGTERM ends Python at once, with no ``finally`` and no exit handler, so a model
    command a ``cmd:`` provider started (in a process group of its own) and a transform's workers kept
    running, and the run printed no way to resume it.  As KeyboardInterrupt, the command's own interrupt
    path runs: what is measured is in the store, children are ended, the resume hint is printed.  Only
    where no handler is set already (a program embedding the CLI keeps its own)."""
    import signal

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
            signal.signal(signal.SIGTERM, stop)
    except (ValueError, OSError):  # not the main thread, or no such signal here
        pass


def _fail(message: str, code: int = 2) -> None:
    print(f"kerntune: error: {' '.join(message.split())}", file=sys.stderr)
    sys.exit(code)
