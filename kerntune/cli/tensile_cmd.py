"""``kerntune tensile …``: count, edit (by a model or an edits file) and run Tensile benchmark configs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from kerntune.cli.common import console
from kerntune.tensile import TensileConfig, TensileEdit, TensileError, apply

app = typer.Typer(no_args_is_help=True, help="Tensile/TensileLite benchmark configs: count, edit, run.")


@app.command("count")
def count(config: Path = typer.Argument(..., help="Tensile benchmark config YAML")) -> None:
    """Kernels per benchmark step, by Tensile's permutation rule."""
    cfg = TensileConfig.load(config)
    table = Table(title=f"{config.name}: {cfg.kernel_count():,} kernels")
    for col in ("problem", "step", "fork parameters", "groups", "kernels"):
        table.add_column(col)
    for s in cfg.steps():
        table.add_row(str(s.problem), str(s.step), ", ".join(f"{k}×{len(v)}" for k, v in s.fork_params().items()),
                      " × ".join(str(len(g)) for g in s.groups()) or "-", f"{s.kernel_count():,}")
    console.print(table)


@app.command("generate")
def generate(config: Path = typer.Argument(..., help="Tensile benchmark config YAML (never modified)"),
             out: Path = typer.Argument(..., help="Output folder: config.yaml and explanation.md"),
             llm: Optional[str] = typer.Option(None, "--llm", envvar="KERNTUNE_LLM", help="Model that edits the config"),
             edits: Optional[Path] = typer.Option(None, "--edits", help='JSON {"edits":[...]} to apply instead of a model'),
             gpu: str = typer.Option("MI300X", "--gpu", help="Target GPU for the prompt"),
             results: Optional[Path] = typer.Option(None, "--results", help="Benchmark results (CSV/text) for the prompt"),
             llm_base_url: Optional[str] = typer.Option(None, "--llm-base-url", envvar="KERNTUNE_LLM_BASE_URL")) -> None:
    """Write an edited config and a Markdown explanation (kernels before/after, every edit and refusal)."""
    cfg = TensileConfig.load(config)
    if bool(llm) == bool(edits):
        raise TensileError("choose one source of edits: --llm SPEC or --edits FILE")
    dropped: list[str] = []
    seconds = 0.0
    if edits is not None:
        try:
            items = json.loads(edits.read_text())["edits"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise TensileError(f"{edits}: expected JSON {{\"edits\": [...]}} ({exc})") from None
        proposed = [TensileEdit.from_dict(i) for i in items]
    else:
        from kerntune.llm import LLMClient
        from kerntune.tensile.prompting import ask

        client = LLMClient.from_spec(llm, llm_base_url)  # type: ignore[arg-type]
        proposed, dropped, seconds = ask(client, cfg, gpu, results.read_text() if results else "")
    new, refused = apply(cfg, proposed)
    out.mkdir(parents=True, exist_ok=True)
    new.save(out / "config.yaml")
    applied = [e for e in proposed if all(e is not r for r, _ in refused)]
    lines = [f"# {config.name}: {cfg.kernel_count():,} -> {new.kernel_count():,} kernels", ""]
    lines += ["## Applied", ""] + [f"- {e.op} {e.param} {e.value if e.value is not None else e.values or ''} "
                                   f"(problem {e.problem}, step {e.step}){': ' + e.reason if e.reason else ''}"
                                   for e in applied] + [""]
    lines += ["## Refused", ""] + [f"- {e.op} {e.param}: {why}" for e, why in refused] + [f"- dropped: {d}" for d in dropped]
    if seconds:
        lines += ["", f"Model time: {seconds:.1f} s"]
    (out / "explanation.md").write_text("\n".join(lines) + "\n")
    console.print(f"{cfg.kernel_count():,} -> {new.kernel_count():,} kernels; {len(applied)} edits applied, "
                  f"{len(refused)} refused -> {out}")


@app.command("run")
def run(config: Path = typer.Argument(..., help="Tensile benchmark config YAML"),
        out: Path = typer.Argument(..., help="Tensile's working folder"),
        prebuilt_client: Optional[Path] = typer.Option(None, "--prebuilt-client")) -> None:
    """Benchmark a config with Tensile (Tensile.sh under $TENSILE_PATH, or the Tensile Python module)."""
    TensileConfig.load(config)  # refuse legacy or broken configs before starting Tensile
    root = os.environ.get("TENSILE_PATH")
    script = Path(root) / "Tensile" / "bin" / "Tensile" if root else None
    if script is not None and script.exists():
        cmd = [str(script), str(config), str(out)]
    elif shutil.which("Tensile"):
        cmd = ["Tensile", str(config), str(out)]
    else:
        raise TensileError("Tensile not found: set TENSILE_PATH to a Tensile checkout (with Tensile/bin/Tensile) "
                           "or install the Tensile Python package")
    if prebuilt_client is not None:
        cmd += ["--prebuilt-client", str(prebuilt_client)]
    raise typer.Exit(subprocess.run(cmd).returncode)
