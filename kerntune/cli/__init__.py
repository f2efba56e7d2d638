"""The ``kerntune`` command line.

User errors (:class:`KerntuneError`) end with one line on stderr and exit
code 2 (usage errors: typer's usual message, also exit 2); tracebacks are kept for real bugs.
"""

from __future__ import annotations

import sys

import typer

from kerntune.cli import cache_cmd, compare_cmd, tensile_cmd, llm_cmd, prompt_cmd, space_cmd, store_cmd, tune_cmd
from kerntune.cli import exec_cmd, options_cmd, report_cmd, transform_cmd
from kerntune.errors import KerntuneError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
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



def main(argv: list[str] | None = None) -> None:
    try:
        app(args=argv, prog_name="kerntune")
    except KerntuneError as exc:
        print(f"kerntune: error: {exc}", file=sys.stderr)
        sys.exit(2)
