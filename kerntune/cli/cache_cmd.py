"""``kerntune cache``: the persistent tuning cache (winners per kernel, problem, device)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from kerntune.cli.common import console, open_store
from kerntune.errors import KerntuneError

app = typer.Typer(help="The persistent tuning cache: list winners, export them for plain Triton.")

_LAUNCH_KEYS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def triton_configs(entries: list[dict[str, Any]]) -> str:
    """Python source of a ``triton.Config`` list, one per cached winner (fastest first, no duplicates)."""
    lines = ["import triton", "", "# exported by `kerntune cache export --triton`", "configs = ["]
    seen: set[str] = set()
    for e in sorted(entries, key=lambda e: e["time_ms"]):
        cfg = e["config"]
        meta = {k: v for k, v in cfg.items() if k not in _LAUNCH_KEYS}
        launch = "".join(f", {k}={cfg[k]!r}" for k in _LAUNCH_KEYS if k in cfg)
        text = f"triton.Config({meta!r}{launch})"
        if text in seen:
            continue
        seen.add(text)
        lines.append(f"    {text},  # {e['problem_key']} on {e['device']}: {e['time_ms']:.4f} ms")
    lines.append("]")
    return "\n".join(lines) + "\n"


@app.command("list")
def list_(store: Optional[str] = typer.Option(None, "--store"),
          kernel: Optional[str] = typer.Option(None, "--kernel", help="Only this kernel hash")) -> None:
    """Show every cached winner."""
    entries = open_store(store).iter_best(kernel)
    table = Table(title=f"{len(entries)} cached winners")
    for col in ("kernel", "problem", "device", "versions", "time ms", "config"):
        table.add_column(col)
    for e in entries:
        table.add_row(e["kernel_hash"], e["problem_key"], e["device"], e["versions"], f"{e['time_ms']:.4f}",
                      str(e["config"]))
    console.print(table)


@app.command("export")
def export(triton: bool = typer.Option(False, "--triton", help="Emit a triton.Config list (Python source)"),
           store: Optional[str] = typer.Option(None, "--store"),
           kernel: Optional[str] = typer.Option(None, "--kernel", help="Only this kernel hash"),
           device: Optional[str] = typer.Option(None, "--device", help="Only winners measured on this device"),
           output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write here instead of stdout")) -> None:
    """Export cached winners: for users who ship plain ``@triton.autotune``."""
    if not triton:
        raise KerntuneError("choose an export format: --triton")
    entries = [e for e in open_store(store).iter_best(kernel) if device is None or e["device"] == device]
    if not entries:
        raise KerntuneError("the cache holds no winners" + (f" for kernel {kernel}" if kernel else "")
                            + (f" on {device}" if device else ""))
    text = triton_configs(entries)
    if output is not None:
        output.write_text(text)
        console.print(f"{len(entries)} winners -> {output}")
    else:
        typer.echo(text, nl=False)
