"""``kerntune compare``: strategies side by side on a recorded space."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kerntune.cli.progress import RunLog
from kerntune.cli.common import (LLM_BASE_URL_HELP, check_number, check_output, check_store_exists, console,
                                 err_console, known_gpu, open_store, other_device_note, parse_options, print_unwrapped,
                                 store_flag, tie_note, write_output)
from kerntune.cli.report_cmd import write_after_run
from kerntune.compare import plot_compare, run_compare
from kerntune.compare.harness import CompareResult, StrategyStats
from kerntune.compare.metrics import UNDEFINED_SCORE, score_defined
from kerntune.errors import KerntuneError
from kerntune.strategies.base import MAX_EVALS, check_seed


def _fmt(x: float | None, spec: str = ".0f", none: str = "never") -> str:
    return none if x is None else format(x, spec)


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def print_table(result: CompareResult) -> None:
    file_name = escape(Path(result.space).name)  # a '[red]' in the file's name is text, not Rich markup
    table = Table(title=f"{file_name}: budget {result.budget}, scores over {result.repeats} repeats "
                        "(± standard error, bootstrap interval), "
                        f"optimum {result.optimum_ms:.4g} ms, score cutoff {result.cutoff} evaluations")
    for col in ("strategy", "score", "± se", "95% interval", "best/opt", "min..max", "found opt", "evals to 2%", "evals to 5%",
                "tuning s", "wall s"):
        table.add_column(col, justify="right" if col != "strategy" else "left")
    scored = [s for s in result.strategies.values() if score_defined(s.score)]
    best = max(scored, key=lambda s: s.score) if scored else None
    for name, s in result.strategies.items():
        style = "bold green" if s is best else ""
        table.add_row(name, f"{s.score:.3f}" if score_defined(s.score) else "n/a",
                      _fmt(_finite(s.score_stderr), ".3f", "n/a"),
                      f"{s.score_ci95[0]:.2f}..{s.score_ci95[1]:.2f}" if math.isfinite(s.score_ci95[0]) else "n/a",
                      _fmt(_finite(s.best_over_opt), ".3f", _nothing_found(s)) + _found_share(s),
                      f"{_fmt(_finite(s.best_over_opt_spread[0]), '.3f', '–')}.."
                      f"{_fmt(_finite(s.best_over_opt_spread[1]), '.3f', '–')}",
                      f"{s.found_optimum:.0%}", _fmt(s.evals_to_2pct, "g"), _fmt(s.evals_to_5pct, "g"),
                      f"{s.tuning_seconds:.1f}", f"{s.wall_seconds:.1f}", style=style)
    console.print(table)
    if len(scored) < len(result.strategies):  # the reason in full: in the cell it wrapped the 150-column table
        print_unwrapped(f"score: {UNDEFINED_SCORE}: every successful config of the recording ran in "
                        f"{result.optimum_ms:.4g} ms, so there is nothing to rank")
    partial = [f"{k} of {s.repeats} for {name}" for name, s in result.strategies.items()
               if (k := _found(s)) < s.repeats]
    if partial:  # the report says the same beside the same figures
        print_unwrapped("best/opt and min..max are over the repeats that found a successful config: "
                        + ", ".join(partial))
    if result.optimum_ties and result.optimum_ties > 1:
        print_unwrapped(tie_note(result.optimum_ties))


def _nothing_found(s: StrategyStats) -> str:
    """best/opt where no repeat found a successful config: "none ran" only where no config ran at all,
    "no success" where configs ran and all failed (it said "none ran" for both)."""
    return "no success" if s.evaluated else "none ran"


def _failed_calls(llm: dict[str, Any], repeats: int) -> str:
    """"(F of C calls failed over R repeats)": totals, said to be, beside the per-repeat means (it printed a
    total as "(4 failed calls)" after "2.0 LLM calls ... per repeat").  A results file from before has the
    total as ``failed_calls``."""
    failed = int(llm.get("failed_calls_total", llm.get("failed_calls", 0)))
    calls = int(llm.get("calls_total", round(llm["calls_per_repeat"] * repeats)))
    return f"({failed} of {calls} calls failed over {repeats} repeat{'s' if repeats != 1 else ''})"


def _found(s: StrategyStats) -> int:
    """The repeats of a strategy that found a successful config (all, for a result made before it was counted)."""
    return s.repeats if s.found_config is None else s.found_config


def _found_share(s: StrategyStats) -> str:
    """" (k of n)" beside best/opt where only k of the n repeats found a config; "" where all did or none."""
    k = _found(s)
    return f" ({k} of {s.repeats})" if 0 < k < s.repeats else ""


def _check_resume(st, run_id: str, space: Optional[Path], names: Optional[list[str]], budget: Optional[int],  # noqa: ANN001
                  repeats: Optional[int], seed: Optional[int], per_strategy: dict[str, dict[str, Any]]) -> None:
    """Anything typed again on ``--resume`` must match what the comparison was started with."""
    from kerntune.store.resume import check_compare_same

    check_compare_same(st.get_run(run_id), space, {"strategies": names, "budget": budget, "repeats": repeats,
                                                   "seed": seed}, per_strategy)


def compare(
    space: Optional[Path] = typer.Option(None, "--space", help="Recorded space: Kernel Tuner cache (.json/.json.gz), T4, KTT results or kerntune table"),
    source: Optional[Path] = typer.Option(None, "--source", help="The kernel's source file, shown to a model as a real run would"),
    device: Optional[str] = typer.Option(None, "--device", help="The GPU, as a name or a JSON/text file describing it (the recording may lack it)"),
    strategies: Optional[str] = typer.Option(None, "--strategies", help="Comma-separated strategy names"
                                             " (default auto,gp,genetic,random)"),
    budget: Optional[int] = typer.Option(None, "--budget", help="Evaluations per repeat (default 100)"),
    repeats: Optional[int] = typer.Option(None, "--repeats", help="Seeded repeats per strategy (default 10)"),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed of the first repeat (repeat r uses seed + r; default 0)"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write all numbers as JSON here"),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Write a best-so-far PNG plot here"),
    store: Optional[str] = typer.Option(None, "--store", help="SQLite store (default .kerntune/kerntune.db or $KERNTUNE_STORE)"),
    resume: Optional[str] = typer.Option(None, "--resume", help="Continue a killed comparison by its run id"),
    llm: Optional[str] = typer.Option(None, "--llm", envvar="KERNTUNE_LLM",
                                      help="Model for auto (optional), llm and llm-seeded: openai:M, anthropic:M, ollama:M, local:[PATH], cmd:C, files:DIR, replay:FILE, auto"),
    llm_timeout: float = typer.Option(300.0, "--llm-timeout", help="Seconds to wait for one model answer"),
    llm_base_url: Optional[str] = typer.Option(None, "--llm-base-url", envvar="KERNTUNE_LLM_BASE_URL",
                                               help=LLM_BASE_URL_HELP),
    option: list[str] = typer.Option([], "--option", "-o",
                                     help="A strategy's option STRATEGY.NAME=JSON, e.g. -o llm.initial=10"),
    report: Optional[Path] = typer.Option(None, "--report", help="Write the HTML report here (default: next to the store, reports/RUN_ID.html)"),
    no_report: bool = typer.Option(False, "--no-report", help="Write no report"),
) -> None:
    """Compare strategies by methodology score, best/optimum and evaluations to 2%/5%."""
    check_number("--llm-timeout", llm_timeout, 0, 86400)
    names = [s.strip() for s in strategies.split(",") if s.strip()] if strategies is not None else None
    if names is not None:
        if not names:
            raise KerntuneError("--strategies is empty")
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise KerntuneError(f"--strategies names {dupes[0]} twice (each strategy runs once, with --repeats seeds)")
    if budget is not None and not 1 <= budget <= MAX_EVALS:
        raise KerntuneError(f"budget must be 1 to {MAX_EVALS:,} evaluations, got {budget}")
    if repeats is not None and not 1 <= repeats <= 10_000:
        raise KerntuneError(f"--repeats must be 1 to 10,000, got {repeats}")
    if resume is not None and not resume.strip():
        raise KerntuneError("--resume needs a run id (`kerntune store runs` lists them)")
    if space is not None and not space.exists():
        raise KerntuneError(f"file not found: {space}")
    check_output("--json", json_out)
    check_output("--plot", plot, (".png", ".svg", ".pdf"))
    check_output("--report", report, (".html", ".htm"))
    per_strategy: dict[str, dict[str, Any]] = {}
    for item in option:  # values parse as `tune`'s -o do (parse_options); the key names its strategy
        strat, dot, name = item.partition("=")[0].partition(".")
        if "=" not in item or not dot or not strat or not name:
            raise KerntuneError(f"--option {item!r}: expected STRATEGY.NAME=VALUE")
        ((key, value),) = parse_options([item]).items()
        if name in per_strategy.get(strat, {}):
            raise KerntuneError(f"--option {key!r} is given twice")
        per_strategy.setdefault(strat, {})[name] = value
    _check_device(space, source, device)
    if resume:  # a mistyped --store is said, not created empty before "no run" is
        check_store_exists(store)
    st = open_store(store)
    if resume:  # `last` or a unique prefix of the id, as every command that reads a run takes it
        resume = st.resolve_run_id(resume)
        _check_resume(st, resume, space, names, budget, repeats, seed, per_strategy)
    else:
        names = names or ["auto", "gp", "genetic", "random"]
        budget, repeats, seed = budget or 100, repeats or 10, seed if seed is not None else 0
        check_seed(seed, repeats)
    if llm and not resume:
        _note_unused_model(llm, names or [], per_strategy)
    log = RunLog(every=25, min_interval_s=10.0)  # the run id first; plain progress lines when piped
    log.watch(st, "compare")
    if resume:
        log.run_id(resume, st.path)
    try:
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=err_console, transient=True, disable=log.plain) as bar:
            task = bar.add_task("comparing", total=None)

            def progress(label: str, done: int, total: int) -> None:
                bar.update(task, description=f"comparing: {label}", completed=done, total=total)
                log.repeat_done(label, done, total)

            result = run_compare(str(space) if space else None, names or [], budget or 0, repeats or 0, seed or 0, st,
                                 resume=resume,
                                 progress=progress, llm_spec=llm, llm_base_url=llm_base_url,
                                 llm_timeout=llm_timeout, strategy_options=per_strategy,
                                 kernel_source_path=str(source) if source else None, device=device)
    except KeyboardInterrupt:  # stored as interrupted: say how far it got and how to go on
        if log.announced is not None:
            err_console.print(f"interrupted after {log.evaluations} evaluations; continue with: kerntune compare"
                              f" --resume {log.announced}{store_flag(store)}", markup=False, highlight=False)
        raise
    print_table(result)
    for name, s in result.strategies.items():
        if s.llm:
            shares = ", ".join(f"round {r}: {v:.0%}" for r, v in s.llm["valid_share_by_round"].items())
            console.print(f"{name}: {s.llm['calls_per_repeat']:.1f} LLM calls, "
                          f"{s.llm['tokens_in_per_repeat']:.0f}+{s.llm['tokens_out_per_repeat']:.0f} tokens, "
                          f"{s.llm['llm_seconds_per_repeat']:.1f} LLM s per repeat"
                          f" {_failed_calls(s.llm, s.repeats)}; valid configs {shares or 'n/a'}")
        mt = s.extra.get("model_time")
        if mt:
            share = "n/a" if mt["hidden_share"] is None else f"{mt['hidden_share']:.0%}"
            console.print(f"{name}: {mt['seconds_per_repeat']:.1f} s of model time per repeat, "
                          f"{mt['hidden_seconds_per_repeat']:.1f} s ({share}) hidden behind measurements")
    console.print(f"run id: {result.run_id} (store {st.path})")
    if json_out:
        text = json.dumps(result.to_dict(), indent=1) + "\n"
        write_output("--json", json_out, lambda: json_out.write_text(text))
        console.print(f"numbers: {json_out}")
    if plot:
        write_output("--plot", plot, lambda: plot_compare(result, plot))
        console.print(f"plot: {plot}")
    if not no_report:
        write_after_run(st, result.run_id, report)
    st.close()


def _check_device(space: Optional[Path], source: Optional[Path], device: Optional[str]) -> None:
    """``--source`` / ``--device`` read before the store is opened: a file that is not there is one line
    (a --device path was taken as the GPU's name); a known GPU other than the recording's is a note."""
    from kerntune.evaluate.replay import replay_extras

    _, device_info = replay_extras(source, device)
    if device_info.get("name") is None or space is None:
        return
    if known_gpu(device_info["name"]) is None:  # no note can follow: the recording is not read for it
        return
    from kerntune.evaluate import load_recording

    note = other_device_note(load_recording(space).meta.get("device_name"), device_info, "a model's prompts")
    if note:
        err_console.print(f"[yellow]note:[/yellow] {escape(note)}")


def _note_unused_model(llm: str, names: list[str], per_strategy: dict) -> None:
    """A model that no strategy of the comparison asks is said once, after the names and options
    are checked (a misspelt strategy is its one-line error, not this note first)."""
    import os

    from kerntune.strategies import ALIASES, LLM_STRATEGIES, MODEL_OPTIONAL, get_strategy
    from kerntune.strategies.options import validate_options

    for name in names:
        get_strategy(name)
        validate_options(name, per_strategy.get(name))
    if not {ALIASES.get(n, n) for n in names} & (LLM_STRATEGIES | MODEL_OPTIONAL):
        given = "$KERNTUNE_LLM" if os.environ.get("KERNTUNE_LLM") == llm else "--llm"
        err_console.print(f"[yellow]note:[/yellow] {given} {llm} is not used: none of {', '.join(names)} asks a model"
                          " (auto, llm and llm-seeded do)")
