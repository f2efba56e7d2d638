"""``kerntune store …``: list runs and export their trials."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from kerntune.cli.common import check_output, console, open_store, write_output
from kerntune.errors import KerntuneError
from kerntune.store.export import check_table, export_csv, export_kernel_tuner, export_table

app = typer.Typer(no_args_is_help=True, help="Runs and trials in the SQLite store.")


@app.command("runs")
def runs(store: Optional[str] = typer.Option(None, "--store", help="SQLite store (default $KERNTUNE_STORE, else .kerntune/kerntune.db)"),
         limit: int = typer.Option(20, "--limit", help="How many runs to list, the latest first")) -> None:
    """List the latest top-level runs."""
    if limit < 1:
        raise KerntuneError(f"--limit must be at least 1, got {limit}")
    st = open_store(store, readonly=True)
    table = Table("id", "kind", "strategy", "status", "created", "trials")
    for r in st.list_runs(limit):
        n = st._read("SELECT COUNT(*) FROM trials WHERE run_id=? OR run_id IN"
                     " (SELECT id FROM runs WHERE parent_id=?)", (r.id, r.id))[0][0]
        when = datetime.datetime.fromtimestamp(r.created).strftime("%Y-%m-%d %H:%M")
        strategy = r.strategy or ",".join((r.options or {}).get("strategies") or [])  # a comparison's: all of them
        table.add_row(r.id, r.kind, strategy, r.status, when, str(n))
    console.print(table)


@app.command("export")
def export(run_id: str = typer.Argument(..., help="Run id (a comparison exports all its repeats, one column"
                                         " naming each), a unique prefix, or 'last'"),
           csv: Optional[Path] = typer.Option(None, "--csv", help="Write trials as CSV"),
           kernel_tuner: Optional[Path] = typer.Option(None, "--kernel-tuner", help="Write a Kernel Tuner cache file"),
           table: Optional[Path] = typer.Option(None, "--table", help="Write a kerntune table (replayable)"),
           store: Optional[str] = typer.Option(None, "--store", help="SQLite store (default $KERNTUNE_STORE, else .kerntune/kerntune.db)")) -> None:
    """Export a run's trials, its re-timed winner first (with its screening time)."""
    if not (csv or kernel_tuner or table):
        raise KerntuneError("say where to export: --csv, --kernel-tuner and/or --table")
    for flag, path in (("--csv", csv), ("--kernel-tuner", kernel_tuner), ("--table", table)):
        check_output(flag, path)
    st = open_store(store, readonly=True)
    run_id = st.resolve_run_id(run_id)
    if table:
        check_table(st, run_id)  # before anything is written: a half-done export is one more thing to clean
    if csv:
        console.print(f"{write_output('--csv', csv, lambda: export_csv(st, run_id, csv))} trials -> {csv}")
    if kernel_tuner:
        n = write_output("--kernel-tuner", kernel_tuner, lambda: export_kernel_tuner(st, run_id, kernel_tuner))
        console.print(f"{n} configs -> {kernel_tuner}")
    if table:
        console.print(f"{write_output('--table', table, lambda: export_table(st, run_id, table))} configs -> {table}")
