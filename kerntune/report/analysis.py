"""The numbers a report shows, computed from :class:`ReportData` alone.

Kept apart from plotting and from HTML/Markdown so that every renderer shows
the same numbers, and so that the numbers can be tested without matplotlib.
Curves follow the conventions of :mod:`kerntune.compare.metrics`: failed
configs count as evaluations, and until a run has a success its best counts as
the worst recorded time (the recording's, or the worst this group measured).
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kerntune.compare.metrics import best_so_far, score_spread
from kerntune.report.data import ReportData, RunData, TrialRow


@dataclass
class Curve:
    """Best-so-far of one strategy: the mean over its repeats, and their min..max."""

    strategy: str
    x: np.ndarray
    mean: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    repeats: int


@dataclass
class StrategyRow:
    strategy: str
    repeats: int
    evaluations: float                 # mean per repeat
    best_ms: float | None              # mean over the repeats that found a config of their best (None: none did)
    best_over_opt: float | None        # the same over the optimum (as ``compare`` reports it)
    found_optimum: float | None        # share of repeats that found the optimum
    score: float | None                # methodology score, where the optimum is known
    failures: int
    tuning_s: float                    # mean evaluator clock per repeat
    llm_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    llm_s: float = 0.0
    cost: float = 0.0
    partial: int = 0                   # repeats not finished (a killed or interrupted comparison's)
    found_config: int | None = None    # repeats that found a successful config (None: not counted, all)
    # The score's spread over repeats, from ``score_spread`` as ``compare`` prints it: standard error and
    # bootstrap 95% interval (inf / (-inf, inf) for one repeat), and the repeats the score rests on.
    score_stderr: float | None = None
    score_ci95: tuple[float, float] | None = None
    score_repeats: int = 0
    retimed: int = 0                   # repeats whose best is the winner a re-time settled, not a screening time


@dataclass
class TopConfig:
    rank: int
    time_ms: float | None              # screening time (median over repeats); None: a winner never screened
    over_opt: float | None
    config: dict[str, Any]
    found_by: str                      # the run (label) that measured it first
    at_evaluation: int                 # 1-based, in that run (0: not screened)
    source: str                        # which strategy / round proposed it
    retimed_ms: float | None = None    # the re-timed winner's time, where this config is a run's winner


@dataclass
class Failures:
    statuses: list[str]
    strategies: list[str]
    counts: dict[tuple[str, str], int]  # (status, strategy) -> trials
    total_trials: dict[str, int]
    errors: list[tuple[str, str, int]]  # (status, message, count), most frequent first

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass
class ParamEffect:
    name: str
    labels: list[str]                  # one per distinct value, in value order
    times: list[list[float]]           # successful times per value (one per distinct config)
    failed: list[int]                  # failed configs per value


@dataclass
class Round:
    """One model call of an LLM run, summarised for a reader."""

    round: int
    model: str
    summary: list[str]                 # what the prompt told the model, in a few lines
    prompt: str
    prompt_chars: int
    accepted: list[tuple[dict[str, Any], str]]   # (config, the model's reason)
    rejected: list[tuple[str, str]]              # (item as the model wrote it, why it was refused)
    tokens_in: int
    tokens_out: int
    latency_s: float
    cost: float
    error: str | None
    measured: int                      # trials this round's proposals produced
    best_in_round: float | None
    best_after: float | None


@dataclass
class LLMRun:
    run: str
    strategy: str
    rounds: list[Round] = field(default_factory=list)


def fill_value(data: ReportData) -> float | None:
    """What 'no success yet' counts as on a curve."""
    if data.reference is not None:
        return data.reference.worst_ms
    ok = [t.time_ms for _, t in data.all_trials if t.ok]
    return max(ok) if ok else None  # type: ignore[type-var]


def _run_curve(run: RunData, fill: float) -> np.ndarray:
    return best_so_far([t.time_ms if t.ok else None for t in run.trials], fill)


def _pad(curve: np.ndarray, n: int) -> np.ndarray:
    if len(curve) >= n:
        return curve[:n]
    return np.concatenate([curve, np.full(n - len(curve), curve[-1])])


def curves_by_evaluations(data: ReportData) -> list[Curve]:
    """A run that stopped early keeps its best to the end of the longest run."""
    fill = fill_value(data)
    out = []
    if fill is None:
        return out
    for name, runs in data.by_strategy().items():
        per_run = [_run_curve(r, fill) for r in runs if r.trials]
        if not per_run:
            continue
        n = max(len(c) for c in per_run)
        stack = np.array([_pad(c, n) for c in per_run])
        out.append(Curve(name, np.arange(1, n + 1), stack.mean(axis=0), stack.min(axis=0), stack.max(axis=0),
                         len(per_run)))
    return out


def curves_by_seconds(data: ReportData, points: int = 300) -> list[Curve]:
    """Best-so-far on the evaluator's clock (simulated for replays), sampled on one grid
    for all strategies so that repeats can be averaged."""
    fill = fill_value(data)
    runs_with = [r for r in data.runs if r.trials]
    if fill is None or not runs_with:
        return []
    # From the moment every run has measured something: before that the curves would only
    # show the 'no success yet' fill, which dwarfs everything else on a log axis.
    start = max(r.trials[0].clock_s for r in runs_with)
    end = max(r.trials[-1].clock_s for r in runs_with)
    grid = np.linspace(start, end if end > start else start + 1.0, points)
    out = []
    for name, runs in data.by_strategy().items():
        rows = []
        for run in runs:
            if not run.trials:
                continue
            clocks = np.array([t.clock_s for t in run.trials])
            curve = _run_curve(run, fill)
            idx = np.searchsorted(clocks, grid, side="right") - 1   # last trial finished by t
            rows.append(np.where(idx >= 0, curve[np.maximum(idx, 0)], fill))
        if rows:
            stack = np.array(rows)
            out.append(Curve(name, grid, stack.mean(axis=0), stack.min(axis=0), stack.max(axis=0), len(rows)))
    return out


def strategy_rows(data: ReportData) -> list[StrategyRow]:
    ref = data.reference
    fill = fill_value(data)
    out = []
    for name, runs in data.by_strategy().items():
        # a run's re-timed winner where it has one: the screening's fastest may be the config the runoff rejected
        bests = [r.best_ms for r in runs if r.best_ms is not None]
        score = stderr = ci95 = None
        scored = 0
        if ref is not None and fill is not None and any(r.trials for r in runs):
            # the harness's own function and seed, so the spread is the one `compare` printed
            spread = score_spread([_run_curve(r, fill) for r in runs if r.trials], ref.ref, data.budget,
                                  seed=data.seed)
            score, stderr, ci95, scored = spread.score, spread.stderr, (spread.ci_low, spread.ci_high), spread.repeats
        exchanges = [ex for r in runs for ex in r.exchanges]
        out.append(StrategyRow(
            strategy=name, repeats=len(runs), evaluations=statistics.fmean(len(r.trials) for r in runs) if runs else 0,
            best_ms=statistics.fmean(bests) if bests else None,  # type: ignore[arg-type]
            best_over_opt=statistics.fmean(b / ref.optimum_ms for b in bests) if bests and ref else None,  # type: ignore[operator]
            found_optimum=(sum(b <= ref.optimum_ms * (1 + 1e-9) for b in bests) / len(runs)) if ref else None,  # type: ignore[operator]
            score=score, failures=sum(1 for r in runs for t in r.trials if not t.ok),
            tuning_s=statistics.fmean(r.trials[-1].clock_s if r.trials else 0.0 for r in runs) if runs else 0.0,
            llm_calls=len(exchanges), tokens_in=sum(ex.tokens_in for ex in exchanges),
            tokens_out=sum(ex.tokens_out for ex in exchanges), llm_s=sum(ex.latency_s for ex in exchanges),
            cost=sum(ex.cost for ex in exchanges), partial=sum(r.status != "done" for r in runs),
            found_config=len(bests), score_stderr=stderr, score_ci95=ci95, score_repeats=scored,
            retimed=sum(r.winner is not None for r in runs)))
    return out


def top_configs(data: ReportData, n: int = 10) -> list[TopConfig]:
    """The fastest distinct configs; a config several repeats measured is listed once,
    with its median time and the run that measured it first.  A run's re-timed winner
    (``RunData.winner``) comes first, marked with its re-timed time, then the rest by screening
    time.  Why: ranked by screening alone, the report's #1 was a config the runoff had rejected."""
    seen: dict[str, list[tuple[RunData, TrialRow, int]]] = {}
    for run in data.runs:
        for i, t in enumerate(run.trials):
            if t.ok:
                seen.setdefault(t.key, []).append((run, t, i + 1))
    retimed: dict[str, tuple[float, RunData, dict[str, Any]]] = {}  # config -> (re-timed ms, run, config)
    for run in data.runs:
        w = run.winner
        if w is not None:
            key = _config_key(w["config"])
            if key not in retimed or float(w["time_ms"]) < retimed[key][0]:
                retimed[key] = (float(w["time_ms"]), run, w["config"])
    by_config = {_config_key(hits[0][1].config): hits for hits in seen.values()}
    ranked = sorted(seen.values(), key=lambda hits: (statistics.median(h[1].time_ms for h in hits), hits[0][1].key))  # type: ignore[misc]
    rest = [hits for hits in ranked if _config_key(hits[0][1].config) not in retimed]
    rows: list[tuple[list[tuple[RunData, TrialRow, int]] | None, float | None, RunData | None, dict[str, Any]]] = [
        (by_config.get(key), ms, run, cfg) for key, (ms, run, cfg) in sorted(retimed.items(), key=lambda kv: kv[1][0])]
    rows += [(hits, None, None, hits[0][1].config) for hits in rest]
    opt = data.reference.optimum_ms if data.reference else None
    out = []
    for rank, (hits, retimed_ms, winner_run, cfg) in enumerate(rows[:n], 1):
        if not hits:  # a winner the search never screened (the baseline, re-timed beside the pick)
            out.append(TopConfig(rank, None, None, cfg, winner_run.name if winner_run else "", 0, "re-time",
                                 retimed_ms))
            continue
        run, t, at = min(hits, key=lambda h: (h[1].clock_s, h[2]))
        time_ms = float(statistics.median(h[1].time_ms for h in hits))  # type: ignore[misc]
        out.append(TopConfig(rank, time_ms, time_ms / opt if opt else None, t.config, run.name, at, t.source,
                             retimed_ms))
    return out


def _config_key(config: dict[str, Any]) -> str:
    """A config as one string whatever its key order (a winner's config against its trials')."""
    return json.dumps(config, sort_keys=True, default=str)


def failures(data: ReportData, max_errors: int = 8) -> Failures:
    counts: dict[tuple[str, str], int] = {}
    total: dict[str, int] = {}
    errors: dict[tuple[str, str], int] = {}
    for run, t in data.all_trials:
        total[run.strategy] = total.get(run.strategy, 0) + 1
        if t.ok:
            continue
        counts[(t.status, run.strategy)] = counts.get((t.status, run.strategy), 0) + 1
        msg = error_gist(t.error or "") or "(no message)"
        errors[(t.status, msg)] = errors.get((t.status, msg), 0) + 1
    statuses = sorted({s for s, _ in counts}, key=lambda s: -sum(v for (st, _), v in counts.items() if st == s))
    top = sorted(errors.items(), key=lambda kv: (-kv[1], kv[0]))[:max_errors]
    return Failures(statuses, list(data.by_strategy()), counts, total, [(s, m, c) for (s, m), c in top])


_TEMP_PATH = re.compile(r"(/tmp|/var/folders)/[^\s:'\"]+")


def error_gist(text: str, width: int = 240) -> str:
    """One line that tells errors apart: the first line and, when there are more, the first later line
    that names an error (else the last), with temporary file paths as ``<tmp>``.  Why: cut at 160
    characters, every OpenCL compile error read as the same 200 characters of clBuildProgram
    boilerplate, and different errors were counted as one."""
    lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    later = lines[1:]
    detail = next((line for line in later if "error" in line.lower()), later[-1] if later else "")
    head = lines[0] if len(lines[0]) <= width // 2 or not detail else lines[0][: width // 2]
    gist = _TEMP_PATH.sub("<tmp>", f"{head} … {detail}" if detail else head)
    return gist if len(gist) <= width else gist[: width - 1] + "…"


def _label(value: Any) -> str:
    return json.dumps(value) if isinstance(value, (list, dict, bool)) or value is None else str(value)


def _order(value: Any) -> tuple:
    if isinstance(value, bool):
        return (0, int(value), "")
    if isinstance(value, (int, float)):
        return (1, float(value), "")
    return (2, 0.0, _label(value))


def param_effects(data: ReportData, max_values: int = 24) -> list[ParamEffect]:
    """Time by value of each parameter, over the distinct configs the group measured.

    Parameters with a single measured value say nothing and are left out; a
    parameter with very many values keeps the ``max_values`` most measured."""
    distinct: dict[str, tuple[dict[str, Any], list[float], bool]] = {}
    for _, t in data.all_trials:
        cfg, times, failed = distinct.setdefault(t.key, (t.config, [], False))
        if t.ok:
            times.append(float(t.time_ms))  # type: ignore[arg-type]
        else:
            distinct[t.key] = (cfg, times, True)
    out = []
    for name in data.params:
        groups: dict[str, tuple[Any, list[float], int]] = {}
        for cfg, times, failed in distinct.values():
            if name not in cfg:
                continue
            label = _label(cfg[name])
            value, ts, nf = groups.get(label, (cfg[name], [], 0))
            if times:
                ts.append(statistics.median(times))
            groups[label] = (value, ts, nf + (1 if failed and not times else 0))
        if sum(1 for _, ts, _ in groups.values() if ts) < 2:
            continue                   # one measured value (or none that ran) shows no effect
        keep = sorted(groups.items(), key=lambda kv: -(len(kv[1][1]) + kv[1][2]))[:max_values]
        keep.sort(key=lambda kv: _order(kv[1][0]))
        out.append(ParamEffect(name, [k for k, _ in keep], [v[1] for _, v in keep], [v[2] for _, v in keep]))
    return out


_SECTION = re.compile(r"^## (.+)$", re.MULTILINE)


def prompt_summary(prompt: str) -> list[str]:
    """A few lines that say what the model was shown: the round's kind, the search state
    and the task, instead of the whole prompt (which the report keeps folded)."""
    sections: dict[str, str] = {}
    marks = list(_SECTION.finditer(prompt))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(prompt)
        sections.setdefault(m.group(1).strip(), prompt[m.end():end].strip())
    titles = [t for t in sections if t not in ("system", "user")]
    lines = []
    state = sections.get("Search state") or next((v for k, v in sections.items() if k.startswith("Search state")), "")
    if state:
        lines.append("refinement round: shown the ranked results, anchors and patterns")
        lines.extend(line.lstrip("- ").strip() for line in state.splitlines() if line.strip())
    elif titles:
        lines.append("first round: shown " + ", ".join(t.lower() for t in titles[:6]))
    task = sections.get("Task") or sections.get("Next step") or ""
    first = next((line.lstrip("- ").strip() for line in task.splitlines() if line.strip()), "")
    if first:
        lines.append("asked: " + first)
    if not lines:
        lines = [line.strip() for line in prompt.splitlines() if line.strip()][:3]
    return [line[:300] for line in lines]


def round_sources(round_no: int) -> tuple[str, ...]:
    """The trial sources under which a model's round ``round_no`` is stored, in every strategy that records
    LLM exchanges: ``llm`` and ``llm-seeded`` (``strategies.llm.rounds``) as ``llm:round{N}``, ``auto``
    with a model (``strategies.auto_model``) as ``auto:model{N}``.  Why: the report looked up the first
    spelling only, and auto's rounds read "measured 0" with no best though their configs were measured."""
    return f"llm:round{round_no}", f"auto:model{round_no}"


def llm_runs(data: ReportData) -> list[LLMRun]:
    out = []
    for run in data.runs:
        if not run.exchanges:
            continue
        by_source: dict[str, list[tuple[int, TrialRow]]] = {}
        for i, t in enumerate(run.trials):
            by_source.setdefault(t.source, []).append((i, t))
        curve = [t.time_ms if t.ok else None for t in run.trials]
        llm = LLMRun(run.name, run.strategy)
        for ex in run.exchanges:
            mine = sorted((hit for src in round_sources(ex.round) for hit in by_source.get(src, [])),
                          key=lambda hit: hit[0])
            ok = [t.time_ms for _, t in mine if t.ok]
            last = max((i for i, _ in mine), default=None)
            upto = [c for c in curve[: last + 1] if c is not None] if last is not None else []
            llm.rounds.append(Round(
                round=ex.round, model=f"{ex.provider}:{ex.model}" if ex.provider else ex.model,
                summary=prompt_summary(ex.prompt), prompt=ex.prompt, prompt_chars=len(ex.prompt),
                accepted=[(a.get("config") or {}, str(a.get("reasoning") or "")) for a in ex.accepted],
                rejected=[(_label(r.get("item")), str(r.get("reason") or "")) for r in ex.rejected],
                tokens_in=ex.tokens_in, tokens_out=ex.tokens_out, latency_s=ex.latency_s, cost=ex.cost,
                error=ex.error, measured=len(mine), best_in_round=min(ok) if ok else None,  # type: ignore[type-var]
                best_after=min(upto) if upto else None))
        out.append(llm)
    return out
