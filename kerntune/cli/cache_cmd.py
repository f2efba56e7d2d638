"""``kerntune cache``: the persistent tuning cache (winners per kernel, problem, device)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from kerntune.cli.common import console, open_store
from kerntune.errors import KerntuneError

app = typer.Typer(help="The persistent tuning cache: list winners, export them for plain Triton.")

_LAUNCH_KEYS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def _triton_config(cfg: dict[str, Any]) -> str:
    """``triton.Config(...)`` source: launch options as keywords, the rest as meta-parameters."""
    meta = {k: v for k, v in cfg.items() if k not in _LAUNCH_KEYS}
    launch = "".join(f", {k}={cfg[k]!r}" for k in _LAUNCH_KEYS if k in cfg)
    return f"triton.Config({meta!r}{launch})"


def triton_configs(entries: list[dict[str, Any]]) -> str:
    """Python source of a ``triton.Config`` list, one per cached winner (fastest first, no duplicates)."""
    lines = ["import triton", "", "# exported by `kerntune cache export --triton`", "configs = ["]
    seen: set[str] = set()
    for e in sorted(entries, key=lambda e: e["time_ms"]):
        text = _triton_config(e["config"])
        if text in seen:
            continue
        seen.add(text)
        lines.append(f"    {text},  # {e['problem_key']} on {e['device']}: {e['time_ms']:.4f} ms")
    lines.append("]")
    shaped = [e for e in entries if all(p.isdigit() for p in e["problem_key"].split("x"))]
    if shaped:
        # A key-based lookup: the dispatch table, and the nearest shape's config for unseen shapes
        # (sum of |log2| differences, as kerntune's decorator does).
        lines += ["", "import math", "", "DISPATCH = {"]
        for e in sorted(shaped, key=lambda e: e["problem_key"]):
            shape = tuple(int(p) for p in e["problem_key"].split("x"))
            lines.append(f"    {shape!r}: {_triton_config(e['config'])},  # {e['time_ms']:.4f} ms on {e['device']}")
        lines += ["}", "", "", "def config_for(*shape):",
                  '    """The tuned config of this shape, else of the nearest tuned shape on log2 sizes."""',
                  "    if shape in DISPATCH:", "        return DISPATCH[shape]",
                  "    return DISPATCH[min(DISPATCH, key=lambda s: sum(abs(math.log2(a) - math.log2(b)) "
                  "for a, b in zip(s, shape)))]"]
    return "\n".join(lines) + "\n"


@app.command("list")
def list_(store: Optional[str] = typer.Option(None, "--store"),
          kernel: Optional[str] = typer.Option(None, "--kernel", help="Only this kernel hash")) -> None:
    """Show every cached winner."""
    entries = open_store(store, readonly=True).iter_best(kernel)
    table = Table(title=f"{len(entries)} cached winners")
    for col in ("kernel", "problem", "device", "versions", "time ms", "config"):
        table.add_column(col)
    for e in entries:
        table.add_row(e["kernel_hash"], e["problem_key"], e["device"], e["versions"], f"{e['time_ms']:.4f}",
                      str(e["config"]))
    console.print(table)


@app.command("export")
def export(triton: bool = typer.Option(False, "--triton", help="Emit a triton.Config list and a shape lookup (Python source)"),
           as_json: bool = typer.Option(False, "--json", help="Emit the dispatch table (shape -> config) as JSON, "
                                        "for the decorator's dispatch="),
           kernel_tuner: Optional[Path] = typer.Option(None, "--kernel-tuner", help="Write one Kernel Tuner cache "
                                                       "file per shape into this folder"),
           store: Optional[str] = typer.Option(None, "--store"),
           kernel: Optional[str] = typer.Option(None, "--kernel", help="Only this kernel hash"),
           device: Optional[str] = typer.Option(None, "--device", help="Only winners measured on this device"),
           output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write here instead of stdout")) -> None:
    """Export cached winners: for users who ship plain @triton.autotune."""
    if sum([triton, as_json, kernel_tuner is not None]) != 1:
        raise KerntuneError("choose one export format: --triton, --json or --kernel-tuner DIR")
    st = open_store(store, readonly=True)
    entries = [e for e in st.iter_best(kernel) if device is None or e["device"] == device]
    if not entries:
        raise KerntuneError("the cache holds no winners" + (f" for kernel {kernel}" if kernel else "")
                            + (f" on {device}" if device else ""))
    if kernel_tuner is not None:
        from kerntune.store.export import export_kernel_tuner

        kernel_tuner.mkdir(parents=True, exist_ok=True)
        for e in entries:
            if not e.get("run_id"):
                continue
            path = kernel_tuner / f"{e['kernel_hash']}_{e['problem_key'].replace('/', '_')}.json"
            n = export_kernel_tuner(st, e["run_id"], path)
            console.print(f"{e['problem_key']}: {n} configs -> {path}")
        return
    if as_json:
        from kerntune.run.dispatch import dispatch_table

        text = json.dumps(dispatch_table(entries), indent=1) + "\n"
    else:
        text = triton_configs(entries)
    if output is not None:
        output.write_text(text)
        console.print(f"{len(entries)} winners -> {output}")
    else:
        typer.echo(text, nl=False)
