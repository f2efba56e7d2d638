"""``kerntune tensile …``: count, edit (by a model or an edits file), run, evaluate and
autotune Tensile benchmark configs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape
from rich.table import Table

from kerntune.cli.common import LLM_BASE_URL_HELP, check_output, console, write_output
from kerntune.tensile import TensileConfig, TensileError
from kerntune.tensile.evaluate import Evaluation

app = typer.Typer(no_args_is_help=True, help="Tensile/TensileLite benchmark configs: count, edit, run, evaluate.")

_LOGIC_YAML_HELP = "A library logic YAML whose winning solutions the prompt shows"
_PREBUILT_HELP = "A prebuilt Tensile client binary, passed to Tensile as --prebuilt-client"


def _client(llm: Optional[str], llm_base_url: Optional[str]) -> Any:
    if not llm:
        return None
    from kerntune.llm import LLMClient

    return LLMClient.from_spec(llm, llm_base_url)


@app.command("count")
def count(config: Path = typer.Argument(..., help="Tensile benchmark config YAML")) -> None:
    """Kernels per benchmark step, by Tensile's permutation rule.  Multi-valued
    BenchmarkCommonParameters fork too and multiply the count, so they are listed, marked (common):
    left out, the column did not explain the total."""
    cfg = TensileConfig.load(config)
    table = Table(title=f"{config.name}: {cfg.kernel_count():,} kernels")
    for col in ("problem", "step", "fork parameters", "groups", "kernels"):
        table.add_column(col)
    for s in cfg.steps():
        forks = [f"{k}×{len(v)}" for k, v in s.fork_params().items()]
        forks += [f"{k}×{len(v)} (common)" for k, v in s.common_forks().items()]
        table.add_row(str(s.problem), str(s.step), escape(", ".join(forks)),
                      " × ".join(str(len(g)) for g in s.groups()) or "-", f"{s.kernel_count():,}")
    console.print(table)


@app.command("generate")
def generate(config: Path = typer.Argument(..., help="Tensile benchmark config YAML (never modified)"),
             out: Path = typer.Argument(..., help="Output folder: config.yaml, explanation.md, kerntune_generate.json"),
             llm: Optional[str] = typer.Option(None, "--llm", envvar="KERNTUNE_LLM", help="Model that edits the config"),
             edits: Optional[Path] = typer.Option(None, "--edits", help='JSON {"edits":[...]} to apply instead of a model'),
             gpu: str = typer.Option("MI300X", "--gpu", help="Target GPU for the prompt"),
             results: Optional[Path] = typer.Option(None, "--results",
                                                    help="Benchmark results for the prompt: a Tensile output folder or a text file"),
             logic_yaml: Optional[Path] = typer.Option(None, "--logic-yaml",
                                                       help=_LOGIC_YAML_HELP),
             llm_base_url: Optional[str] = typer.Option(None, "--llm-base-url", envvar="KERNTUNE_LLM_BASE_URL",
                                                        help=LLM_BASE_URL_HELP)) -> None:
    """Write an edited config and a Markdown explanation (kernels before/after, every edit and refusal)."""
    from kerntune.tensile.autotune import generate as gen_config
    from kerntune.tensile.results import read_results, summary_text

    if bool(llm) == bool(edits):
        raise TensileError("choose one source of edits: --llm SPEC or --edits FILE")
    text = ""
    if results is not None:
        if not results.exists():
            raise TensileError(f"--results {results}: not found (give a Tensile output folder or a text file)")
        try:
            text = summary_text(read_results(results)) if results.is_dir() else results.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise TensileError(f"--results {results}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    gen = gen_config(config, out, _client(llm, llm_base_url), edits, gpu, text, logic_yaml)
    console.print(f"{gen.before:,} -> {gen.after:,} kernels; {len(gen.applied)} edits applied, "
                  f"{len(gen.refused)} refused -> {out}")


@app.command("run")
def run(config: Path = typer.Argument(..., help="Tensile benchmark config YAML"),
        out: Path = typer.Argument(..., help="Tensile's working folder"),
        prebuilt_client: Optional[Path] = typer.Option(None, "--prebuilt-client", help=_PREBUILT_HELP),
        quiet: bool = typer.Option(False, "--quiet", help="Tensile's output to OUT/tensile.log")) -> None:
    """Benchmark a config with Tensile ($TENSILE_PATH/Tensile.sh or Tensile/bin/Tensile, or Tensile.sh on PATH);
    writes OUT/kerntune_run.json (wall time, used for TR)."""
    from kerntune.tensile.results import read_results, summary_text
    from kerntune.tensile.runner import run_tensile

    rec = run_tensile(config, out, prebuilt_client, quiet)
    console.print(f"Tensile: {rec.kernels:,} kernels in {rec.wall_s:.1f} s -> {out}")
    try:
        res = read_results(out)
        console.print(escape(summary_text(res)))
        _skipped_note(str(out), res.skipped_rows)
    except TensileError as exc:
        console.print(f"[yellow]note:[/yellow] {escape(str(exc))}")


def _skipped_note(where: str, rows: int) -> None:
    """Rows a killed run left truncated are not results: say so, or sizes silently go missing."""
    if rows:
        console.print(f"[yellow]note:[/yellow] {escape(where)}: {rows} truncated row(s) skipped")


def _print_evaluation(ev: Evaluation, json_out: Optional[Path]) -> None:
    table = Table(title=f"{len(ev.runs)} edited run(s) against the original, every problem size")
    for col in ("run", "TR", "PR", "PR min", "winners kept", "T original s", "T edited s", "model s"):
        table.add_column(col, justify="right")
    f = lambda v, spec: "?" if v is None else format(v, spec)  # noqa: E731
    for r in ev.runs:
        table.add_row(escape(r.label), f(r.tr, ".3f"), f(r.pr, ".3f"), f(r.pr_min, ".3f"), f(r.winners_kept, ".0%"),
                      f(r.t_original_s, ".1f"), f(r.t_pruned_s, ".1f"), f(r.llm_s, ".1f"))
    console.print(table)
    s = ev.summary()
    console.print(f"TR {f(s['TR'], '.3f')}  PR {s['PR']:.3f} (min {s['PR_min']:.3f})  WC {s['WC']:.2f} "
                  f"(runs keeping every winner: {s['WC_all']:.2f}) over {s['sizes']} problem sizes")
    if s["unmeasurable_sizes"]:
        found = "/".join(str(sum(u.gflops is not None for u in r.unmeasurable)) for r in ev.runs)
        console.print(f"[yellow]note:[/yellow] {s['unmeasurable_sizes']} problem size(s) with no valid kernel in the "
                      f"original left out of PR and WC (the edited config found one at {found})")
    if ev.runs:
        _skipped_note("the original's results", ev.runs[0].original_skipped_rows)
    for r in ev.runs:
        _skipped_note(r.label, r.skipped_rows)
        if r.only_here:  # a crashed original run: these sizes are in no number above
            shown = ", ".join(r.only_here[:3]) + (", ..." if len(r.only_here) > 3 else "")
            console.print(f"[yellow]note:[/yellow] {escape(r.label)}: {len(r.only_here)} problem size(s) not in the "
                          f"original's results, left out of PR and WC ({escape(shown)})")
    if s["TR"] is None:
        console.print("[yellow]note:[/yellow] TR needs Tensile's wall times: run through `kerntune tensile run` "
                      "(kerntune_run.json) or give --time-original and --time-pruned")
    if json_out is not None:
        text = json.dumps(ev.to_dict(), indent=1, default=str) + "\n"
        write_output("--json", json_out, lambda: json_out.write_text(text))
        console.print(f"numbers: {json_out}")


@app.command("evaluate")
def evaluate(config: Optional[Path] = typer.Argument(None, help="Config to evaluate end to end (needs Tensile)"),
             out: Optional[Path] = typer.Argument(None, help="Folder for baseline/ and run_N/ (with CONFIG; "
                                                  "default CONFIG_evaluate/ beside it)"),
             runs: int = typer.Option(1, "--runs", help="With CONFIG: edited configs generated and benchmarked"),
             llm: Optional[str] = typer.Option(None, "--llm", envvar="KERNTUNE_LLM", help="Model that edits the config"),
             edits: Optional[Path] = typer.Option(None, "--edits", help='JSON {"edits":[...]} instead of a model'),
             gpu: str = typer.Option("MI300X", "--gpu", help="Target GPU for the prompt"),
             logic_yaml: Optional[Path] = typer.Option(None, "--logic-yaml", help=_LOGIC_YAML_HELP),
             original: Optional[Path] = typer.Option(None, "--original", help="Tensile output folder of the full config"),
             pruned: list[Path] = typer.Option([], "--pruned", help="Tensile output folder of an edited config (repeatable)"),
             llm_seconds: list[float] = typer.Option([], "--llm-seconds", help="Model seconds (one, or one per --pruned)"),
             time_original: Optional[float] = typer.Option(None, "--time-original", help="Tensile seconds of the original"),
             time_pruned: list[float] = typer.Option([], "--time-pruned", help="Tensile seconds (one per --pruned)"),
             prebuilt_client: Optional[Path] = typer.Option(None, "--prebuilt-client", help=_PREBUILT_HELP),
             json_out: Optional[Path] = typer.Option(None, "--json", help="Write every size's numbers here"),
             llm_base_url: Optional[str] = typer.Option(None, "--llm-base-url", envvar="KERNTUNE_LLM_BASE_URL",
                                                        help=LLM_BASE_URL_HELP)) -> None:
    """TR, PR and WC over every problem size, from CSVWinner results: of finished output folders
    (--original DIR --pruned DIR...), or end to end (CONFIG OUT --runs N --llm SPEC; finished
    run_N folders are reused, so the same command continues after a failure)."""
    from kerntune.tensile.autotune import EvaluationStopped, evaluate_folders, evaluate_runs

    check_output("--json", json_out)  # before the runs (hours of Tensile), not after them
    if config is not None:
        if original is not None or pruned:
            raise TensileError("give either CONFIG [OUT] (end to end) or --original DIR --pruned DIR (finished runs)")
        out = out or config.parent / f"{config.stem}_evaluate"
        if bool(llm) == bool(edits):
            raise TensileError("choose one source of edits: --llm SPEC or --edits FILE")
        if runs < 1:
            raise TensileError(f"--runs must be at least 1, got {runs}")
        try:
            ev = evaluate_runs(config, out, runs, _client(llm, llm_base_url), edits, gpu, logic_yaml,
                               prebuilt_client)
        except EvaluationStopped as exc:
            _print_evaluation(exc.evaluation, None)  # the finished runs, then the error
            raise
    else:
        if original is None or not pruned:
            raise TensileError("give --original DIR and at least one --pruned DIR (or CONFIG OUT --runs N --llm SPEC)")
        ev = evaluate_folders(original, pruned, llm_seconds or None, time_original, time_pruned or None)
    _print_evaluation(ev, json_out)


@app.command("autotune")
def autotune(config: Path = typer.Argument(..., help="Tensile benchmark config YAML (never modified)"),
             out: Path = typer.Argument(..., help="Folder for the edited config and Tensile's output"),
             llm: Optional[str] = typer.Option(None, "--llm", envvar="KERNTUNE_LLM", help="Model that edits the config"),
             edits: Optional[Path] = typer.Option(None, "--edits", help='JSON {"edits":[...]} instead of a model'),
             validate: Optional[Path] = typer.Option(None, "--validate", help="Golden folder: Tensile's results of the "
                                                     "original config (run there first when it holds none, or "
                                                     "kerntune's run there did not finish)"),
             tolerance: float = typer.Option(0.02, "--tolerance", help="Validation: GFLOPS below the golden best allowed"),
             gpu: str = typer.Option("MI300X", "--gpu", help="Target GPU for the prompt"),
             logic_yaml: Optional[Path] = typer.Option(None, "--logic-yaml", help=_LOGIC_YAML_HELP),
             prebuilt_client: Optional[Path] = typer.Option(None, "--prebuilt-client", help=_PREBUILT_HELP),
             quiet: bool = typer.Option(False, "--quiet", help="Tensile's output to tensile.log files"),
             llm_base_url: Optional[str] = typer.Option(None, "--llm-base-url", envvar="KERNTUNE_LLM_BASE_URL",
                                                        help=LLM_BASE_URL_HELP)) -> None:
    """Generate an edited config, run Tensile on it, read the CSVWinner results and, with --validate,
    compare with the golden run (winners and GFLOPS within --tolerance) and report TR, PR, WC.
    Exit code 1 when validation fails."""
    from kerntune.tensile.autotune import autotune as run_autotune

    if bool(llm) == bool(edits):
        raise TensileError("choose one source of edits: --llm SPEC or --edits FILE")
    rep = run_autotune(config, out, _client(llm, llm_base_url), edits, gpu, validate, tolerance, logic_yaml,
                       prebuilt_client, quiet)
    g = rep.generated
    console.print(f"{g.before:,} -> {g.after:,} kernels ({len(g.applied)} edits applied, {len(g.refused)} refused)"
                  + (f"; model {g.llm_s:.1f} s" if g.llm_s else ""))
    table = Table(title=f"{out}: winners")
    for col in ("benchmark", "size", "winner", "GFLOPS"):
        table.add_column(col)
    for r in rep.results.sizes.values():
        table.add_row(escape(r.benchmark), escape(r.label), escape(r.winner or "none"), f"{r.gflops or 0:.1f}")
    console.print(table)
    if rep.comparison is None:
        _skipped_note(str(out), rep.results.skipped_rows)
    else:
        _print_evaluation(Evaluation([rep.comparison]), None)
        for p in rep.problems:
            console.print(f"[red]validation:[/red] {escape(p)}")
        if rep.problems:
            missing = len(rep.comparison.only_here)
            why = ("lost performance" if not missing else "are not in the golden results"
                   if missing == len(rep.problems) else "lost performance or are not in the golden results")
            console.print(f"validation failed: {len(rep.problems)} problem size(s) {why}")
            raise typer.Exit(1)
        console.print(f"validation passed: every size kept its winner or stayed within {tolerance:.0%}")
