"""``kerntune space prune``, ``space expand`` and ``space evaluate``: a model (or the rule
pruner, or an edits file) edits a space, optionally over several measured iterations;
TR, PR and WC judge pruning on a recording."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from kerntune.cli.common import LLM_BASE_URL_HELP, STORE_HELP, check_output, console, open_store, write_output
from kerntune.errors import KerntuneError
from kerntune.evaluate import ReplayEvaluator
from kerntune.prune import evaluate_pruner, llm_pruner, rule_pruner
from kerntune.prune.edits import Edit
from kerntune.prune.evaluate import NO_COST
from kerntune.prune.iterate import Editor, IterationResult, iterate, measure
from kerntune.prune.pruners import Pruner, as_editor, edits_file_editor, llm_expander
from kerntune.prune.spacefile import load_state, save_state


def _client(llm: str, llm_base_url: Optional[str], timeout: float):  # type: ignore[no-untyped-def]
    from kerntune.llm import LLMClient

    return LLMClient.from_spec(llm, llm_base_url, timeout=timeout)


def _pruner(llm: Optional[str], rule: bool, llm_base_url: Optional[str], timeout: float) -> Pruner:
    if rule == bool(llm):
        raise KerntuneError("choose a pruner: --llm SPEC or --rule")
    if rule:
        return rule_pruner()
    return llm_pruner(_client(llm, llm_base_url, timeout))  # type: ignore[arg-type]


def _evaluator(space: Path) -> ReplayEvaluator:
    if not space.exists():
        raise KerntuneError(f"file not found: {space}")
    return ReplayEvaluator.from_file(space)


def _edits_file(path: Path) -> list[Edit]:
    try:
        items = json.loads(path.read_text())["edits"]
        return [Edit.from_dict(i) for i in items]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise KerntuneError(f"{path}: expected JSON {{\"edits\": [...]}} ({exc})") from None


def _check_iterations(iterations: int, sample: int) -> None:
    if iterations < 1:
        raise KerntuneError(f"--iterations must be at least 1, got {iterations}")
    if sample < 1:
        raise KerntuneError(f"--sample must be at least 1, got {sample}")


def _run(verb: str, space: Path, replay: Optional[Path], output: Optional[Path], profile: Optional[str],
         store: Optional[str], profile_size: int, seed: int, iterations: int, sample: int,
         make_editor, allow_new: list[str]) -> IterationResult:  # type: ignore[no-untyped-def]
    """Load, profile, iterate, print the diff and counts, write the space file and its diff."""
    _check_iterations(iterations, sample)
    for src in (space, replay):
        if output is not None and src is not None and src.exists() and output.resolve() == src.resolve():
            raise KerntuneError("--output must not be the input file (it is never modified in place)")
    check_output("--output", output, (".json", ".yaml", ".yml"))  # `-o iterations=3` (tune's -o) is no file name
    diff_path = output.with_name(output.name + ".diff") if output is not None else None
    check_output("--output", diff_path)  # its diff is written beside it: checked before the model's minutes too
    state, ev = load_state(space, replay, allow_new)
    if iterations > 1 and ev is None:
        raise KerntuneError("--iterations above 1 measures each edited space: give a recording "
                            "(--space RECORDING, or --replay RECORDING with a space file)")
    workload = ev.workload() if ev else {"kernel_name": state.base.name, "description": state.base.description}
    device = ev.device() if ev else {"name": "unknown"}
    if profile:  # `last` or a unique prefix of the id, as every command that reads a run takes it
        with open_store(store, readonly=True) as st:
            profile = st.resolve_run_id(profile)
            prof = [t for _, t, _ in st.trials(profile)]
        if not prof:
            raise KerntuneError(f"run {profile} has no trials to use as a profile")
    elif ev is not None:
        prof = measure(ev, state.space.sample(random.Random(seed), profile_size), state.implicit)
    else:
        prof = []
    editor: Editor = make_editor(workload, device)
    result = iterate(state, editor, prof, iterations, ev, sample, seed)
    diff = result.outcome.diff(result.start)
    console.print(escape(diff))
    for it in result.iterations:
        if it.note:
            console.print(f"[yellow]note:[/yellow] iteration {it.index}: {escape(it.note)}")
        if iterations > 1:
            ok = [t.time_ms for t in it.measured if t.ok]
            console.print(f"iteration {it.index}: {len(it.applied)} applied, {len(it.refused)} refused, "
                          f"{it.configs_before:,} -> {it.configs_after:,} configs"
                          + (f"; measured {len(it.measured)}, best {min(ok):.4g} ms" if ok else "")
                          + (f"; model {it.llm_s:.1f} s" if it.llm_s else ""))
    if iterations > 1:
        console.print(f"stopped: {result.stop}")
    if result.llm_s:
        console.print(f"model time: {result.llm_s:.1f} s")
    if output is not None and diff_path is not None:
        done = {"prune": "pruned", "expand": "expanded"}[verb]
        extra = {"edits": [e.to_dict() for e in result.applied], f"{done}_from": str(space),
                 **({"replayed_with": str(replay)} if replay else {}),
                 "iterations": [i.to_dict() for i in result.iterations], "stop": result.stop}
        # through write_output: its folder is made, and a failed write is one line, not a traceback
        note = write_output("--output", output, lambda: save_state(result.state, output, extra))
        write_output("--output", diff_path, lambda: diff_path.write_text(diff + "\n"))
        console.print(f"{done} space -> {output}  (diff: {diff_path})")
        if note:
            console.print(f"[yellow]note:[/yellow] {escape(note)}")
    return result


_SPACE_HELP = "Space file (YAML/JSON) or recording (Kernel Tuner cache, T4, KTT results, kerntune table)"
_SEED_HELP = "Seed of the configs sampled as the profile and between iterations"
_STORE_HELP = f"{STORE_HELP}, where --profile is read"
_LLM_TIMEOUT_HELP = "Seconds to wait for one model answer"


def prune(space: Path = typer.Option(..., "--space", help=_SPACE_HELP),
          llm: Optional[str] = typer.Option(None, "--llm", envvar="KERNTUNE_LLM", help="Model that edits the space"),
          rule: bool = typer.Option(False, "--rule", help="The rule pruner instead of a model"),
          replay: Optional[Path] = typer.Option(None, "--replay", help="Recording that measures a space file"),
          profile: Optional[str] = typer.Option(None, "--profile", help="A stored run whose trials are the profile"),
          profile_size: int = typer.Option(40, "--profile-size", help="Configs measured as the profile when no --profile"),
          iterations: int = typer.Option(1, "--iterations", help="Edit, measure a sample, show it, edit again: K times"),
          sample: int = typer.Option(20, "--sample", help="Configs of each edited space measured between iterations"),
          seed: int = typer.Option(0, "--seed", help=_SEED_HELP),
          output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write the pruned space here (.json or .yaml)"),
          store: Optional[str] = typer.Option(None, "--store", help=_STORE_HELP),
          llm_base_url: Optional[str] = typer.Option(None, "--llm-base-url", envvar="KERNTUNE_LLM_BASE_URL",
                                                     help=LLM_BASE_URL_HELP),
          llm_timeout: float = typer.Option(300.0, "--llm-timeout", help=_LLM_TIMEOUT_HELP)) -> None:
    """Let a model (or the rule pruner) remove values and pin parameters; print the diff."""
    pruner = _pruner(llm, rule, llm_base_url, llm_timeout)
    _run("prune", space, replay, output, profile, store, profile_size, seed, iterations, sample,
         lambda workload, device: as_editor(pruner, workload, device), [])


def expand(space: Path = typer.Option(..., "--space", help=_SPACE_HELP),
           llm: Optional[str] = typer.Option(None, "--llm", envvar="KERNTUNE_LLM", help="Model that edits the space"),
           edits: Optional[Path] = typer.Option(None, "--edits", help='JSON {"edits":[...]} to apply instead of a model'),
           replay: Optional[Path] = typer.Option(None, "--replay", help="Recording that measures a space file"),
           allow_new: list[str] = typer.Option([], "--allow-new", help="A parameter the kernel reads that may be "
                                               "added (repeatable; or declare it under 'extensible:')"),
           profile: Optional[str] = typer.Option(None, "--profile", help="A stored run whose trials are the profile"),
           profile_size: int = typer.Option(40, "--profile-size", help="Configs measured as the profile when no --profile"),
           iterations: int = typer.Option(1, "--iterations", help="Edit, measure a sample, show it, edit again: K times"),
           sample: int = typer.Option(20, "--sample", help="Configs of each edited space measured between iterations"),
           seed: int = typer.Option(0, "--seed", help=_SEED_HELP),
           output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write the expanded space here (.json or .yaml)"),
           store: Optional[str] = typer.Option(None, "--store", help=_STORE_HELP),
           llm_base_url: Optional[str] = typer.Option(None, "--llm-base-url", envvar="KERNTUNE_LLM_BASE_URL",
                                                      help=LLM_BASE_URL_HELP),
           llm_timeout: float = typer.Option(300.0, "--llm-timeout", help=_LLM_TIMEOUT_HELP)) -> None:
    """Let a model add values and parameters (and remove, split into additive groups, join);
    print the diff and the config counts before and after."""
    if bool(llm) == bool(edits):
        raise KerntuneError("choose one source of edits: --llm SPEC or --edits FILE")
    if edits is not None:
        fixed = _edits_file(edits)
        make = lambda workload, device: edits_file_editor(fixed)  # noqa: E731
    else:
        client = _client(llm, llm_base_url, llm_timeout)  # type: ignore[arg-type]
        make = lambda workload, device: llm_expander(client, workload, device)  # noqa: E731
    _run("expand", space, replay, output, profile, store, profile_size, seed, iterations, sample, make, allow_new)


def evaluate(space: Path = typer.Option(..., "--space", help="Recorded space"),
             llm: Optional[str] = typer.Option(None, "--llm", envvar="KERNTUNE_LLM", help="Model that prunes the space"
                                               " (or --rule)"),
             rule: bool = typer.Option(False, "--rule", help="The rule pruner instead of a model"),
             runs: int = typer.Option(5, "--runs", help="Independent prunings (profile seeds)"),
             profile_size: int = typer.Option(40, "--profile-size", help="Configs measured as each pruning's profile"),
             iterations: int = typer.Option(1, "--iterations", help="Pruning iterations per run (samples measured between)"),
             sample: int = typer.Option(20, "--sample", help="Configs measured between iterations"),
             seed: int = typer.Option(0, "--seed", help="Seed of the first pruning's samples (pruning r uses seed + r)"),
             json_out: Optional[Path] = typer.Option(None, "--json", help="Write every run's numbers here"),
             llm_base_url: Optional[str] = typer.Option(None, "--llm-base-url", envvar="KERNTUNE_LLM_BASE_URL",
                                                        help=LLM_BASE_URL_HELP),
             llm_timeout: float = typer.Option(300.0, "--llm-timeout", help=_LLM_TIMEOUT_HELP)) -> None:
    """TR, PR and WC of pruning against the full space, LLM time counted in TR."""
    if runs < 1:
        raise KerntuneError(f"--runs must be at least 1, got {runs}")
    _check_iterations(iterations, sample)
    check_output("--json", json_out)  # before the prunings (a model's minutes), not after them
    ev = _evaluator(space)
    summary = evaluate_pruner(ev, _pruner(llm, rule, llm_base_url, llm_timeout), runs, profile_size, seed,
                              iterations, sample)
    s = summary.table()
    table = Table(title=f"{space.name}: {runs} prunings, profile {profile_size}"
                        + (f", {iterations} iterations" if iterations > 1 else ""))
    for col in ("pruner", "TR", "PR", "PR min", "WC", "configs kept", "LLM s"):
        table.add_column(col, justify="right")
    tr = "?" if s["TR"] is None else f"{s['TR']:.3f}"
    table.add_row("rule" if rule else str(llm), tr, f"{s['PR']:.3f}", f"{s['PR_min']:.3f}",
                  f"{s['WC']:.2f}", f"{s['kept']:.1%}", f"{s['llm_s']:.1f}")
    console.print(table)
    if s["TR"] is None:
        console.print(f"[yellow]note:[/yellow] {escape(NO_COST)}")
    if json_out is not None:
        text = json.dumps({"space": str(space), "pruner": "rule" if rule else llm, "runs": runs,
                           "profile_size": profile_size, "iterations": iterations, "seed": seed,
                           **summary.to_dict()}, indent=1)
        write_output("--json", json_out, lambda: json_out.write_text(text))
        console.print(f"numbers: {json_out}")

