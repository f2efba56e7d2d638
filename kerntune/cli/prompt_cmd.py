"""``kerntune prompt show``: the exact prompt a round would send, without a model."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import typer

from kerntune.cli.common import STORE_HELP, console, err_console, open_store, other_device_note
from kerntune.errors import KerntuneError
from kerntune.evaluate import ReplayEvaluator
from kerntune.evaluate.trial import Trial
from kerntune.llm.types import Message
from kerntune.store import Store
from kerntune.strategies.llm.prompting import PromptOptions, first_round, refine_round

app = typer.Typer(no_args_is_help=True, help="Prompts of the LLM strategies.")

#: What a stored refinement prompt shows of its round, to rebuild it with other options: the trials it
#: reported on (its search state's count), the "stuck" rules (``feedback.next_step_rules``), past winners.
_COUNT = re.compile(r"^- (?:Coverage: \d+ successful / (\d+) measured configurations"
                    r"|No successful configuration yet: \d+ of (\d+) failed\.)$", re.M)
STUCK = "- The last rounds brought no improvement: escape the current region."
PAST = "## Past runs of this kernel on other shapes"
#: The batch size a stored first-round prompt asked for (``prompts/first_round.md``).
_FIRST_N = re.compile(r"Suggest the first batch of (\d+) configurations\.")
#: The batch size a stored refinement prompt asked for (a rebuild asks for the same unless --n is given).
_LATER_N = re.compile(r"Suggest up to (\d+) NEW UNIQUE configurations")


def _reported(prompt: str) -> Optional[int]:
    """How many trials a stored refinement prompt reported on (None: not found, all are used); the run
    went on measuring after it, so its whole history is not what that round showed."""
    state = prompt.find("## Search state")
    found = _COUNT.search(prompt, state) if state >= 0 else None
    return int(found.group(1) or found.group(2)) if found else None


def _run_trials(st: Store, run: str, ev: ReplayEvaluator, space: Path, trials: Optional[int],
                need_trials: bool) -> tuple[str, list[Trial]]:
    """The run's id and trials, refused with one line where they cannot be this recording's: a
    comparison (no trials of its own), another space or another recording; ``need_trials`` (a
    refinement prompt reports on them): a run without any too."""
    run = st.resolve_run_id(run)
    record = st.get_run(run)
    if record.kind == "compare":
        children = st.child_runs(run)
        raise KerntuneError(f"run {run} is a comparison of {len(children)} repeats: give one repeat's id"
                            + (f", e.g. {children[0].id} ({children[0].label})" if children else ""))
    history = [t for _, t, _ in st.trials(run)]
    if need_trials and not history:
        raise KerntuneError(f"run {run} has no trials")
    names = set(ev.space.names)  # checked before a stored prompt too: it was printed for any --space
    other = next((t.config for t in history[:trials] if set(t.config) != names), None)
    if other is not None:
        raise KerntuneError(f"run {run} measured another space (parameters {', '.join(sorted(other))}; this"
                            f" recording's are {', '.join(ev.space.names)})")
    stored_hash = (record.evaluator or {}).get("recording_hash")
    this_hash = ev.describe().get("recording_hash")
    if stored_hash and this_hash and stored_hash != this_hash:  # same parameter names, other times
        raise KerntuneError(f"run {run} replayed another recording than {space.name} (its times would be"
                            " shown under this recording's kernel and device): give the run's own recording")
    return run, history


def _first_of_run(ev: ReplayEvaluator, run: str, stored: Optional[str], n: Optional[int],
                  opts: PromptOptions) -> list[Message]:
    """Round 1 of ``run`` rebuilt with the options given (its ``stored`` prompt, if any, is not what is
    wanted): it reports on no trials, so only the options given change it; the batch size is the one the
    run asked for unless --n is given (not the default 25 the run may not have used)."""
    asked = _FIRST_N.search(stored) if stored else None
    n = n or (int(asked.group(1)) if asked else 25)
    if stored:
        err_console.print(f"(rebuilt with the options given, not the prompt run {run} stored for round 1"
                          + ("; past runs' winners left out)" if PAST in stored else ")"), style="dim")
    else:
        err_console.print(f"(no prompt stored for round 1 of run {run}: built from the options given,"
                          f" {n} configs)", style="dim")
    return first_round(ev.space, ev.workload(), ev.device(), n, opts)


@app.command("show")
def show(space: Path = typer.Option(..., "--space", help="Recorded space (Kernel Tuner cache, T4, KTT results, kerntune table)"),
         round_no: int = typer.Option(1, "--round", help="1 = first batch; 2+ = refinement after a run's trials"),
         run: Optional[str] = typer.Option(None, "--run", help="Run whose prompt of that round is shown, round 1"
                                            " too, and whose trials feed a refinement prompt (an id,"
                                            " a unique prefix, or 'last'), a run of this --space's recording;"
                                            " the prompt it stored for that round is printed as sent, or rebuilt"
                                            " from the trials that round reported on where --n, --no-source,"
                                            " --source or --device is given (past runs' winners left out)"),
         n: Optional[int] = typer.Option(None, "--n", help="Configs asked for (default: what a --run asked for in that round, else 25, later rounds 15)"),
         trials: Optional[int] = typer.Option(None, "--trials", help="Build the refinement prompt from the run's"
                                              " first N trials (default: the prompt the run stored for that"
                                              " round, else all its trials)"),
         no_source: bool = typer.Option(False, "--no-source", help="Leave the kernel source out"),
         source: Optional[Path] = typer.Option(None, "--source", help="The kernel's source file, shown to the model"),
         device: Optional[str] = typer.Option(None, "--device", help="The GPU: a name, or a JSON/text file describing it"),
         store: Optional[str] = typer.Option(None, "--store", help=f"{STORE_HELP}, where --run is read")) -> None:
    """Print the system and user messages exactly as the strategy would send them."""
    if not space.exists():
        raise KerntuneError(f"file not found: {space}")
    if round_no < 1:
        raise KerntuneError("--round must be 1 or more")
    if trials is not None and trials < 1:
        raise KerntuneError("--trials must be 1 or more")
    if n is not None and n < 1:
        raise KerntuneError(f"--n must be 1 or more, got {n}")
    from kerntune.evaluate.replay import replay_extras

    kernel_source, device_info = replay_extras(source, device)
    ev = ReplayEvaluator.from_file(space, kernel_source=kernel_source, device_info=device_info)
    note = other_device_note(ev.recording.meta.get("device_name"), device_info, "the prompt's GPU facts")
    if note:
        err_console.print(f"note: {note}", markup=False, highlight=False)
    opts = PromptOptions(include_source=not no_source)
    rebuild = n is not None or no_source or source is not None or device is not None  # not the stored prompt
    if round_no == 1 and not run:
        messages = first_round(ev.space, ev.workload(), ev.device(), n or 25, opts)
    else:
        if not run:
            raise KerntuneError("a refinement prompt needs --run RUN_ID (the trials it reports on)")
        st = open_store(store, readonly=True)
        run, history = _run_trials(st, run, ev, space, trials, need_trials=round_no > 1)
        stored = [ex for ex in st.llm_exchanges(run) if ex["round"] == round_no and ex["prompt"]]
        # what was sent, exactly (redacted when stored); round 1 too (it printed a fresh prompt, --run ignored)
        if stored and not rebuild and (trials is None or round_no == 1):
            err_console.print(f"(the prompt run {run} sent in round {round_no}, as stored)", style="dim")
            console.print(stored[0]["prompt"], markup=False, highlight=False, soft_wrap=True)
            return
        if round_no == 1:
            messages = _first_of_run(ev, run, stored[0]["prompt"] if stored else None, n, opts)
        else:
            whole, stuck, note = len(history), False, ""
            if trials is None and stored:  # the options change the prompt: rebuilt from the trials it reported on
                trials, stuck = _reported(stored[0]["prompt"]), STUCK in stored[0]["prompt"]
                note = (f"(rebuilt with the options given, not the prompt run {run} stored for round {round_no}:"
                        f" from {'its first ' + str(trials) if trials else 'all ' + str(whole)} trials"
                        + ("; past runs' winners left out" if PAST in stored[0]["prompt"] else "") + ")")
            elif trials is None:
                note = (f"(no prompt stored for round {round_no} of run {run}: built from all {whole} of"
                        " its trials; --trials N uses the first N)")
            history = history[:trials]
            history = [t.__class__(ev.space.canonical(t.config), t.status, t.time_ms, t.times_ms, t.compile_s,
                                   t.bench_s, t.error, t.extra) for t in history]
            if note:
                err_console.print(note, style="dim")
            # the batch size the run asked for in that round unless --n is given (it was 15 whatever the run's)
            asked = _LATER_N.search(stored[0]["prompt"]) if stored else None
            messages = refine_round(ev.space, ev.workload(), ev.device(), history,
                                    n or (int(asked.group(1)) if asked else 15), round_no - 1, stuck, opts)
    for m in messages:
        console.rule(m.role)
        console.print(m.content, markup=False, highlight=False, soft_wrap=True)
