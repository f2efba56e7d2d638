"""The Tensile workflow: generate an edited config -> run Tensile -> read the CSVWinner
results -> validate against a golden run -> TR, PR, WC.

Every step leaves its files in the output folder, so a step that fails (no
Tensile on this machine, a Tensile crash) keeps what came before it: the
edited config and its explanation are written before Tensile is looked for.
A run folder is reused only when the run there finished (``kerntune_run.json`` with exit code 0): a
crashed golden run's partial results were reused, and validated the edited run over a subset of sizes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kerntune.errors import KerntuneError
from kerntune.tensile.config import TensileConfig, TensileError
from kerntune.tensile.edits import TensileEdit, apply
from kerntune.tensile.evaluate import (Evaluation, RunComparison, check_original, compare, not_in_golden,
                                      validate)
from kerntune.tensile.results import Results, model_seconds, read_results, run_seconds, summary_text
from kerntune.tensile.runner import find_tensile, run_tensile


@dataclass
class Generated:
    source: str
    path: Path
    before: int
    after: int
    applied: list[TensileEdit]
    refused: list[tuple[TensileEdit, str]]
    dropped: list[str] = field(default_factory=list)
    llm_s: float = 0.0
    logic: str | None = None


def read_edits(path: Path) -> list[TensileEdit]:
    try:
        items = json.loads(path.read_text())["edits"]
        return [TensileEdit.from_dict(i) for i in items]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise TensileError(f"{path}: expected JSON {{\"edits\": [...]}} ({exc})") from None


def generate(config: Path, out: Path, client: Any = None, edits: Path | None = None, gpu: str = "MI300X",
             results: str = "", logic: Path | None = None) -> Generated:
    """Write ``out/config.yaml`` (the edited config), ``out/explanation.md`` and
    ``out/kerntune_generate.json`` (the model's seconds, counted in TR)."""
    cfg = TensileConfig.load(config)
    if (client is None) == (edits is None):
        raise TensileError("choose one source of edits: --llm SPEC or --edits FILE")
    evidence = ""
    if logic is not None:
        from kerntune.tensile.logic import evidence as logic_evidence, read_logic

        params = [k for s in cfg.steps() for k in s.fork_params()]
        evidence = logic_evidence(read_logic(logic), params, cfg.problem_type(0))
    dropped: list[str] = []
    seconds = 0.0
    if edits is not None:
        proposed = read_edits(edits)
    else:
        from kerntune.tensile.prompting import ask

        proposed, dropped, seconds = ask(client, cfg, gpu, results, evidence)
    new, refused = apply(cfg, proposed)
    out.mkdir(parents=True, exist_ok=True)
    target = out / "config.yaml"
    new.save(target)
    applied = [e for e in proposed if all(e is not r for r, _ in refused)]
    gen = Generated(str(config), target, cfg.kernel_count(), new.kernel_count(), applied, refused, dropped,
                    seconds, str(logic) if logic else None)
    (out / "explanation.md").write_text(explanation(gen, config.name))
    (out / "kerntune_generate.json").write_text(json.dumps({
        "source": gen.source, "config": str(target), "kernels_before": gen.before, "kernels_after": gen.after,
        "llm_s": seconds, "logic": gen.logic, "applied": [_edit_dict(e) for e in applied],
        "refused": [f"{e.op} {e.param}: {why}" for e, why in refused], "dropped": dropped}, indent=1) + "\n")
    return gen


def _edit_dict(e: TensileEdit) -> dict[str, Any]:
    return {k: v for k, v in vars(e).items() if v not in (None, [], "")}


def explanation(gen: Generated, name: str) -> str:
    lines = [f"# {name}: {gen.before:,} -> {gen.after:,} kernels", ""]
    lines += ["## Applied", ""] + [f"- {e.op} {e.param} {e.value if e.value is not None else e.values or ''} "
                                   f"(problem {e.problem}, step {e.step}){': ' + e.reason if e.reason else ''}"
                                   for e in gen.applied] + [""]
    lines += ["## Refused", ""] + [f"- {e.op} {e.param}: {why}" for e, why in gen.refused]
    lines += [f"- dropped: {d}" for d in gen.dropped]
    if gen.logic:
        lines += ["", f"Evidence: the winners of {gen.logic} were shown to the model."]
    if gen.llm_s:
        lines += ["", f"Model time: {gen.llm_s:.1f} s"]
    return "\n".join(lines) + "\n"


def _run(config: Path, out: Path, prebuilt_client: Path | None, quiet: bool, before: str = "") -> Results:
    try:
        run_tensile(config, out, prebuilt_client, quiet)
    except TensileError as exc:
        raise TensileError(f"{before}{exc}") from None
    return read_results(out)


RUN_RECORD = "kerntune_run.json"


def _has_results(folder: Path) -> bool:
    return any((folder / "2_BenchmarkData").glob("*_CSVWinner.csv"))


def finished(folder: Path) -> bool:
    """Tensile finished there: CSVWinner files and a ``kerntune_run.json`` with exit code 0.  A crash
    (a non-zero code) or a kill (the "started" record :func:`golden_results` writes first) is not."""
    try:
        record = json.loads((folder / RUN_RECORD).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and record.get("returncode") == 0 and _has_results(folder)


def reusable(golden: Path, given: bool = False) -> bool:
    """Whether ``golden``'s results are read instead of running Tensile there: a finished run, or,
    for a folder the user gave (``given``), results of a Tensile run kerntune did not start (no
    ``kerntune_run.json`` at all), accepted as finished results."""
    if given and _has_results(golden) and not (golden / RUN_RECORD).exists():
        return True
    return finished(golden)


def golden_results(config: Path, golden: Path, prebuilt_client: Path | None = None, quiet: bool = False,
                   given: bool = False) -> Results:
    """The golden (full config) results: read from ``golden`` when :func:`reusable`, else Tensile runs
    the original config into it.  A "started" record is written first, so a run killed part way
    (which writes no record of its own) is run again, not reused."""
    if reusable(golden, given):
        return read_results(golden)
    golden.mkdir(parents=True, exist_ok=True)
    (golden / RUN_RECORD).write_text(json.dumps({"config": str(config), "returncode": None,
                                                 "state": "started; Tensile has not finished"}, indent=1) + "\n")
    return _run(config, golden, prebuilt_client, quiet)


@dataclass
class AutotuneReport:
    generated: Generated
    results: Results
    comparison: RunComparison | None = None
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        g = self.generated
        return {"config": str(g.path), "kernels_before": g.before, "kernels_after": g.after, "llm_s": g.llm_s,
                "results": summary_text(self.results, limit=1000).splitlines(),
                "validation": None if self.comparison is None else {"passed": not self.problems,
                                                                    "problems": self.problems},
                "comparison": self.comparison.to_dict() if self.comparison else None}


def autotune(config: Path, out: Path, client: Any = None, edits: Path | None = None, gpu: str = "MI300X",
             golden: Path | None = None, tolerance: float = 0.02, logic: Path | None = None,
             prebuilt_client: Path | None = None, quiet: bool = False) -> AutotuneReport:
    gen = generate(config, out, client, edits, gpu, logic=logic)
    where = f"the edited config is in {gen.path} ({gen.before:,} -> {gen.after:,} kernels); "
    try:
        find_tensile()
        if golden is not None and reusable(golden, given=True):
            check_original(read_results(golden))  # before Tensile runs for hours, not after
    except TensileError as exc:
        raise TensileError(where + str(exc)) from None
    res = _run(gen.path, out, prebuilt_client, quiet, where)
    report = AutotuneReport(gen, res)
    if golden is not None:
        gold = golden_results(config, golden, prebuilt_client, quiet, given=True)
        report.comparison = compare(gold, res, str(out), run_seconds(golden), run_seconds(out), gen.llm_s)
        report.problems = validate(gold, res, tolerance) + not_in_golden(report.comparison, gold)
    (out / "kerntune_autotune.json").write_text(json.dumps(report.to_dict(), indent=1, default=str) + "\n")
    return report


class EvaluationStopped(TensileError):
    """A run of :func:`evaluate_runs` failed after others finished: those (``evaluation``, also in
    evaluation.json) are shown with the error instead of being lost."""

    def __init__(self, message: str, evaluation: Evaluation) -> None:
        super().__init__(message)
        self.evaluation = evaluation


def evaluate_runs(config: Path, out: Path, runs: int, client: Any = None, edits: Path | None = None,
                  gpu: str = "MI300X", logic: Path | None = None, prebuilt_client: Path | None = None,
                  quiet: bool = True) -> Evaluation:
    """The baseline (``out/baseline``, reused when Tensile finished there) and ``runs`` edited
    configs (``out/run_N``), each generated, benchmarked and compared over every size.  A run_N that
    finished before (generated, Tensile exit code 0) is compared from disk, not redone, and
    evaluation.json is written after every run: a failure at run k lost runs 1..k-1, and the next
    attempt paid for all of them again."""
    find_tensile()
    base = out / "baseline"
    gold = golden_results(config, base, prebuilt_client, quiet)
    t0 = run_seconds(base)
    ev = Evaluation()
    saved = out / "evaluation.json"
    for i in range(1, runs + 1):
        folder = out / f"run_{i}"
        try:
            if finished(folder) and (folder / "kerntune_generate.json").is_file():
                res, llm_s = read_results(folder), model_seconds(folder) or 0.0
            else:
                gen = generate(config, folder, client, edits, gpu, logic=logic)
                res, llm_s = _run(gen.path, folder, prebuilt_client, quiet), gen.llm_s
            ev.runs.append(compare(gold, res, folder.name, t0, run_seconds(folder), llm_s))
        except KerntuneError as exc:
            if not ev.runs:
                raise
            raise EvaluationStopped(f"{exc} ({len(ev.runs)} finished run(s) in {saved}; the same command "
                                    f"continues from {folder.name})", ev) from None
        saved.write_text(json.dumps(ev.to_dict(), indent=1, default=str) + "\n")
    return ev


def evaluate_folders(original: Path, edited: list[Path], llm_s: list[float] | None = None,
                     t_original: float | None = None, t_edited: list[float] | None = None) -> Evaluation:
    """TR, PR, WC of finished Tensile output folders.  Times come from each folder's
    ``kerntune_run.json`` unless given; model seconds from ``kerntune_generate.json`` unless given."""
    from kerntune.tensile.results import model_seconds

    for name, values in (("--llm-seconds", llm_s), ("--time-pruned", t_edited)):
        if values and len(values) not in (1, len(edited)):
            raise TensileError(f"{name}: give one value, or one per --pruned folder ({len(edited)})")
    gold = read_results(original)
    t0 = t_original if t_original is not None else run_seconds(original)
    ev = Evaluation()
    for i, folder in enumerate(edited):
        lam = (llm_s[i if len(llm_s) > 1 else 0] if llm_s else model_seconds(folder)) or 0.0
        t1 = t_edited[i if len(t_edited) > 1 else 0] if t_edited else run_seconds(folder)
        ev.runs.append(compare(gold, read_results(folder), str(folder), t0, t1, lam))
    return ev
