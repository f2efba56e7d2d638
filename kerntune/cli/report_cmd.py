"""``kerntune report RUN``: a run's (or a whole comparison's) report as HTML and/or Markdown."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from kerntune.cli.common import check_output, console, err_console, open_store, write_output
from kerntune.report import default_report_path, write_report
from kerntune.errors import KerntuneError
from kerntune.store import Store


def report(
    run: str = typer.Argument(..., help="Run id (a comparison's id reports all its repeats), a unique prefix, or 'last'"),
    html: Optional[Path] = typer.Option(None, "--html", help="Write a self-contained HTML report here"),
    md: Optional[Path] = typer.Option(None, "--md", help="Write a Markdown report here (its PNGs beside it)"),
    store: Optional[str] = typer.Option(None, "--store", help="SQLite store (default .kerntune/kerntune.db or $KERNTUNE_STORE)"),
) -> None:
    """Best-so-far curves, parameter effects, top configs, failures and the LLM's rounds of a run."""
    check_output("--html", html, (".html", ".htm"))
    check_output("--md", md, (".md", ".markdown"))
    st = open_store(store, readonly=True)
    try:
        run_id = st.resolve_run_id(run)
        flag = "--html" if html else "--md"
        if html is None and md is None:
            # No path given: the report goes next to the store, which may be read-only (a store
            # that is only read works as usual); name that folder, not an --html nobody gave.
            html, flag = default_report_path(st, run_id), "the report"
            try:
                check_output("--html", html)
            except KerntuneError as exc:
                reason = str(exc).removeprefix(f"--html {html}: ")
                raise KerntuneError(f"cannot write the report in its default folder {html.parent} next to the "
                                    f"store ({reason}); give --html PATH or --md PATH") from None
        target = html or md
        files = write_output(flag, target, lambda: write_report(st, run_id, html=html, markdown=md))
    finally:
        st.close()
    for path in (files.html, files.markdown):
        if path is not None:
            console.print(f"report: {path}")
    if files.images:
        err_console.print(f"[dim]{len(files.images)} plots beside {files.markdown}[/dim]")
    err_console.print(f"[dim]written in {files.seconds:.2f} s[/dim]")


def write_after_run(st: Store, run_id: str, path: Optional[Path]) -> None:
    """What ``tune`` and ``compare`` call when they end: the report next to the store (or at
    ``--report``), and one line saying where.  A report that cannot be written never costs the
    run the user just paid for (it is stored): at the default place it is a note; at a path the
    user asked for with ``--report`` it is the one-line error and exit code 2 of any output that
    cannot be written, as ``--json`` is, so that a script does not go on without the file."""
    try:
        files = write_report(st, run_id, html=path or default_report_path(st, run_id))
    except Exception as exc:  # noqa: BLE001 - the run is stored; the report can be redone with `kerntune report`
        reason = f"{type(exc).__name__}: {exc}"
        if path is not None:
            raise KerntuneError(f"--report {path}: not written ({reason}); the run is stored: "
                                f"`kerntune report {run_id} --html OTHER.html`") from None
        err_console.print(f"[yellow]note:[/yellow] no report written ({reason}); try `kerntune report {run_id}`")
        return
    console.print(f"report: {files.html}")
