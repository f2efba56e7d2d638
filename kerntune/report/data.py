"""What a report is made of, read from the store into plain dataclasses.

A report covers one *group* of runs: a single ``tune`` run (or one repeat of a
comparison) is a group of one; a ``compare`` run is the group of all its
repeats, so that its report draws one curve per strategy.  Everything the
renderers need is loaded here once, so plotting and HTML/Markdown writing
never touch SQLite and can be tested on hand-made data.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kerntune.budget_default import describe_budget
from kerntune.compare.metrics import Reference
from kerntune.errors import KerntuneError
from kerntune.run.winner import WINNER
from kerntune.space.params import jsonable
from kerntune.store import Store
from kerntune.store.resume import SHAPES_PARENT_KIND


@dataclass
class TrialRow:
    """One stored trial, as the report needs it."""

    seq: int
    key: str
    config: dict[str, Any]
    status: str
    time_ms: float | None
    clock_s: float
    source: str
    error: str | None

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.time_ms is not None


@dataclass
class Exchange:
    """One model call of an LLM run (a round, or a repair of one)."""

    round: int
    provider: str
    model: str
    prompt: str
    response: str
    accepted: list[dict[str, Any]]      # {"config": ..., "reasoning": ...}
    rejected: list[dict[str, Any]]      # {"item": ..., "reason": ...}
    tokens_in: int
    tokens_out: int
    latency_s: float
    cost: float
    error: str | None


@dataclass
class RunData:
    id: str
    kind: str
    label: str | None
    strategy: str
    seed: int | None
    status: str
    created: float
    finished: float | None
    options: dict[str, Any]
    trials: list[TrialRow] = field(default_factory=list)
    exchanges: list[Exchange] = field(default_factory=list)
    #: What the finished search said of itself (stop reason, notes, ``extra`` figures); {} if unknown.
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.label or self.id

    @property
    def best(self) -> TrialRow | None:
        """The fastest screening time: the run's best where no re-time settled a winner (``winner``)."""
        ok = [t for t in self.trials if t.ok]
        return min(ok, key=lambda t: t.time_ms) if ok else None  # type: ignore[arg-type,return-value]

    @property
    def winner(self) -> dict[str, Any] | None:
        """The winner a re-time settled (``kerntune.run.winner.WINNER``: its config and re-timed
        ``time_ms``), None where the run has none (no re-time, a replay, a store written before).
        Why: the runoff may reject the screening's fastest, and the report named that one as best."""
        w = self.summary.get(WINNER)
        if not isinstance(w, dict) or not isinstance(w.get("config"), dict):
            return None
        t = w.get("time_ms")
        return w if isinstance(t, (int, float)) and not isinstance(t, bool) and t > 0 else None

    @property
    def best_ms(self) -> float | None:
        """The run's best time: its re-timed winner's, else its fastest screening time."""
        w = self.winner
        if w is not None:
            return float(w["time_ms"])
        b = self.best
        return float(b.time_ms) if b is not None else None  # type: ignore[arg-type]


@dataclass
class ReferenceInfo:
    """What the recording behind a replayed run says: the optimum and random search's
    exact expectation, the yardsticks every curve is read against."""

    source: str
    optimum_ms: float
    median_ms: float
    worst_ms: float
    configs: int
    mean_cost_s: float                  # compile + benchmark per config: random's clock per evaluation
    random_expectation: list[float]     # expected best of n random draws, n = 1..len
    optimum_config: dict[str, Any]
    ref: Reference                      # for the methodology score
    optimum_ties: int | None = None     # configs the recording cannot tell from its optimum (None: no runs kept)


@dataclass
class ReportData:
    """One report's input: the group's runs, grouped by strategy, and its yardsticks."""

    run_id: str
    kind: str                            # tune | compare | compare-child
    title: str
    space_name: str
    device: str
    created: float
    status: str
    budget: int
    params: list[str]
    runs: list[RunData]
    reference: ReferenceInfo | None
    notes: list[str] = field(default_factory=list)
    #: the budget as stated (evaluations, seconds, target), for the header; "" when none was stored
    budget_text: str = ""
    #: the comparison's first seed: the harness's bootstrap seed, so the score's interval is the one it printed
    seed: int = 0
    #: what a real (measured, not replayed) run tuned, for the header; "" where the run does not say
    kernel_file: str = ""
    shape: str = ""
    label: str = ""

    def by_strategy(self) -> dict[str, list[RunData]]:
        out: dict[str, list[RunData]] = {}
        for run in self.runs:
            out.setdefault(run.strategy, []).append(run)
        return out

    @property
    def all_trials(self) -> list[tuple[RunData, TrialRow]]:
        return [(run, t) for run in self.runs for t in run.trials]

    @property
    def has_llm(self) -> bool:
        return any(run.exchanges for run in self.runs)


def load_report(store: Store, run: str) -> ReportData:
    """Read a run (a ``compare`` run brings all its repeats) and its recording's yardsticks."""
    run_id = store.resolve_run_id(run)
    top = store.conn.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
    if top["kind"] == SHAPES_PARENT_KIND:  # one problem per child: no curve or optimum is shared, so one shape at a time
        children = store.conn.execute("SELECT id, label FROM runs WHERE parent_id=? ORDER BY created, id",
                                      (run_id,)).fetchall()
        listed = "; ".join(f"{c['id']} ({str(c['label'] or '').removeprefix('shapes ')})" for c in children)
        raise KerntuneError(f"run {run_id} is a `tune --shapes` run: report one shape with `kerntune report ID`"
                            f" ({listed or 'no shape tuned yet'}); its dispatch table: `kerntune cache list`")
    rows = store.conn.execute("SELECT * FROM runs WHERE parent_id=? ORDER BY created, id", (run_id,)).fetchall() \
        if top["kind"] == "compare" else [top]
    notes: list[str] = []
    runs = [_run(store, r) for r in rows]
    if top["kind"] == "compare" and not runs:
        notes.append("this comparison has no repeat yet")
    options = json.loads(top["options_json"] or "{}")
    space_json = next((json.loads(r["space_json"]) for r in rows if r["space_json"]), None) or {}
    evaluator = json.loads(top["evaluator_json"] or "{}") if top["evaluator_json"] else {}
    source = options.get("space") if top["kind"] == "compare" else None
    if source is None and evaluator.get("evaluator") == "replay":
        source = evaluator.get("source")
    budget = _budget(options, runs)
    reference = None
    if source:
        reference, note = _reference(str(source), budget, evaluator.get("recording_hash"))
        if note:
            notes.append(note)
    params = [p["name"] for p in space_json.get("params", [])] or \
        sorted({k for run in runs for t in run.trials for k in t.config})
    kernel = _kernel(evaluator)
    space_name = (Path(str(source)).name if source else "") or kernel["name"] or space_json.get("name") or "space"
    kind = str(top["kind"])
    what = {"compare": "comparison", "tune": "tuning run", "compare-child": "comparison repeat"}.get(kind, kind)
    strategies = ", ".join(dict.fromkeys(r.strategy for r in runs)) or "no strategy"
    return ReportData(
        run_id=run_id, kind=kind, title=f"{space_name}: {what} {run_id} ({strategies})", space_name=space_name,
        device=str(top["device"] or ""), created=float(top["created"]), status=str(top["status"]), budget=budget,
        params=params, runs=runs, reference=reference, notes=notes, budget_text=_budget_text(options, runs),
        seed=_seed(options), kernel_file=kernel["file"], shape=kernel["shape"], label=str(top["label"] or ""))


def _kernel(evaluator: dict[str, Any]) -> dict[str, str]:
    """The kernel a real run tuned, from its stored evaluator: name (``kernel_name``, else ``kernel``, else the
    kernel file's name), file and shape ("" where not said).  Why: the report of a real run said "space"
    and never which kernel or shape it was.  A replayed run is named by its recording, as before."""
    if evaluator.get("evaluator") == "replay":
        return {"name": "", "file": "", "shape": ""}
    file = str(evaluator.get("kernel_file") or "")
    name = evaluator.get("kernel_name") or evaluator.get("kernel") or (Path(file).name if file else "")
    shape = evaluator.get("shape") or evaluator.get("problem_size")
    if isinstance(shape, (list, tuple)):
        shape = "x".join(str(x) for x in shape)
    return {"name": str(name or ""), "file": file, "shape": str(shape or "")}


def _seed(options: dict[str, Any]) -> int:
    seed = options.get("seed")
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else 0


def _run(store: Store, row: Any) -> RunData:
    options = json.loads(row["options_json"] or "{}")
    trials = [TrialRow(int(r["seq"]), str(r["config_key"]), json.loads(r["config_json"]), str(r["status"]),
                       r["time_ms"], float(r["clock_s"] or 0.0), str(r["source"] or ""), r["error"])
              for r in store.iter_trial_rows([row["id"]])]
    exchanges = [Exchange(int(ex["round"] or 0), ex["provider"] or "", ex["model"] or "", ex["prompt"] or "",
                          ex["response"] or "", list(ex["accepted"] or []), list(ex["rejected"] or []),
                          int(ex["tokens_in"] or 0), int(ex["tokens_out"] or 0), float(ex["latency_s"] or 0.0),
                          float(ex["cost"] or 0.0), ex["error"])
                 for ex in store.llm_exchanges(row["id"])]
    return RunData(id=str(row["id"]), kind=str(row["kind"]), label=row["label"], strategy=str(row["strategy"] or "?"),
                   seed=row["seed"], status=str(row["status"]), created=float(row["created"]),
                   finished=row["finished"], options=options, trials=trials, exchanges=exchanges,
                   summary=_summary(row))


def _summary(row: Any) -> dict[str, Any]:
    text = row["summary_json"] if "summary_json" in row.keys() else None
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _budget_text(options: dict[str, Any], runs: list[RunData]) -> str:
    """How the run's budget was stated: "100 evaluations", "60 s", "60 s, 200 evaluations"
    (a comparison states its count as an int; a tuning run stores a Budget's fields)."""
    stated = options.get("budget")
    if not isinstance(stated, dict):
        stated = next((r.options["budget"] for r in runs if isinstance(r.options.get("budget"), dict)), None)
    if not isinstance(stated, dict):
        return describe_budget(stated, None, None) if isinstance(stated, int) else ""
    return describe_budget(stated.get("max_evals"), stated.get("max_seconds"), stated.get("target_ms"))


def _budget(options: dict[str, Any], runs: list[RunData]) -> int:
    """The evaluations the curves span: the stated budget, or the longest run."""
    stated = options.get("budget")
    if isinstance(stated, dict):
        stated = stated.get("max_evals")
    if not isinstance(stated, int):
        stated = max((int(r.options.get("budget", {}).get("max_evals") or 0) for r in runs
                      if isinstance(r.options.get("budget"), dict)), default=0)
    longest = max((len(r.trials) for r in runs), default=0)
    return max(int(stated or 0), longest, 1)


def _reference(source: str, budget: int, digest: str | None = None) -> tuple[ReferenceInfo | None, str | None]:
    """Load the recording (a fraction of a second even for thousands of configs).

    ``digest``: the recording's hash when the run was made.  The file is read by its path, and Kernel
    Tuner appends to its caches in place: a recording that changed since would score the run against
    an optimum it never had in its space, so without the same digest the report has no yardsticks."""
    path = Path(source)
    if not path.exists():
        return None, f"recording {source} not found from here: no optimum or random-search expectation"
    from kerntune.evaluate.recorded import load_recording

    try:
        rec = load_recording(path)
    except Exception as exc:  # noqa: BLE001 - a report should still be written without its yardsticks
        return None, f"recording {source} could not be read ({exc}): no optimum or random-search expectation"
    if digest and rec.digest and rec.digest != digest:
        return None, (f"the recording changed since the run: {source} is not the file it replayed (another"
                      " digest), so no optimum, score or random-search expectation")
    ok = rec.ok_times
    if not ok:
        return None, f"recording {source} has no successful measurement"
    ref = Reference.from_times(ok, len(rec.trials) - len(ok))
    costs = [t.cost_s for t in rec.trials.values()]
    return ReferenceInfo(
        source=source, optimum_ms=ref.optimum, median_ms=ref.median, worst_ms=ref.worst, configs=len(rec.trials),
        mean_cost_s=float(statistics.fmean(costs)) if costs else 0.0,
        random_expectation=[float(x) for x in ref.random_expectation(budget)],
        optimum_config={k: jsonable(v) for k, v in rec.optimum.config.items()}, ref=ref,
        optimum_ties=rec.optimum_ties()), None
