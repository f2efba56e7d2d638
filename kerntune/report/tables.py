"""The report's tables as rows of strings, shared by the HTML and Markdown writers so
that both show the same figures with the same formatting."""

from __future__ import annotations

import datetime
import json
import math
from dataclasses import dataclass
from typing import Any

from kerntune.compare.metrics import UNDEFINED_SCORE, score_defined
from kerntune.report.analysis import Failures, Round, StrategyRow, TopConfig
from kerntune.report.data import ReportData


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]
    numeric: list[bool]               # right-align these columns


def ms(x: float | None) -> str:
    return "–" if x is None else f"{x:.4g} ms"


def ratio(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def config(cfg: dict[str, Any]) -> str:
    return json.dumps(cfg, separators=(", ", ": "))


def when(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


def facts(data: ReportData) -> list[tuple[str, str]]:
    """The header's key facts: what ran, where, and the yardsticks."""
    out = [("run", f"{data.run_id} ({data.kind}, {data.status})")]
    out += winners(data)
    out.append(("created", when(data.created)))
    if data.label:
        out.append(("label", data.label))
    # a real run names its kernel, its file and shape; a replayed one its recording
    out.append(("kernel" if data.kernel_file or data.shape else "space", data.space_name))
    if data.kernel_file:
        out.append(("kernel file", data.kernel_file))
    if data.shape:
        out.append(("shape", data.shape))
    if data.device:
        out.append(("device", data.device))
    out.append(("budget", data.budget_text or f"{data.budget} evaluations"))
    out.append(("runs", f"{len(data.runs)} ({sum(len(r.trials) for r in data.runs)} trials)"))
    hidden = model_time(data)
    if hidden:
        out.append(("model time", hidden))
    ref = data.reference
    if ref is not None:
        exp = ref.random_expectation
        out += [("optimum", f"{ms(ref.optimum_ms)} {config(ref.optimum_config)}"),
                ("median / optimum", f"{ref.median_ms / ref.optimum_ms:.2f} over {ref.configs} recorded configs"),
                (f"random search, expected best after {len(exp)}", ms(exp[-1]) if exp else "–")]
        if ref.optimum_ties and ref.optimum_ties > 1:
            out.append(("optimum within noise", f"{ref.optimum_ties - 1} other config(s) within two standard errors "
                                                "of its runs: near the top a score measures which one the noise favoured"))
    return out


def winners(data: ReportData) -> list[tuple[str, str]]:
    """Each run's re-timed winner (``RunData.winner``), named first: the config ``tune`` printed and
    cached, which the screening's fastest (the top configurations' ranking) may not be."""
    out = []
    many = len(data.runs) > 1
    for run in data.runs:
        w = run.winner
        if w is None:
            continue
        text = f"{ms(float(w['time_ms']))} {config(w['config'])}"
        s = w.get("speedup")
        if isinstance(s, dict) and all(isinstance(s.get(k), (int, float)) for k in ("median", "lo", "hi")):
            text += (f"; {s['median']:.3f}x [{s['lo']:.3f}, {s['hi']:.3f}] over {s.get('over') or 'the baseline'}"
                     + (f" ({s['verdict']})" if s.get("verdict") else ""))
        elif w.get("baseline"):
            text += f"; {w['baseline']}: the search's pick re-timed slower"
        out.append((f"winner (re-timed){f', {run.name}' if many else ''}", text))
    return out


def model_time(data: ReportData) -> str:
    """How much of the model's time the search hid behind measurements (``auto`` with a model)."""
    runs = [r.summary.get("extra", {}) for r in data.runs]
    runs = [e for e in runs if isinstance(e, dict) and e.get("model_seconds")]
    if not runs:
        return ""
    total = sum(float(e["model_seconds"]) for e in runs)
    hidden = sum(float(e.get("model_hidden_seconds", 0.0)) for e in runs)
    calls = sum(int(e.get("model_calls", 0)) for e in runs)
    each = f" over {len(runs)} runs" if len(runs) > 1 else ""
    return (f"{calls} model call(s){each}, {total:.1f} s of model time, {hidden:.1f} s "
            f"({hidden / total:.0%}) hidden behind measurements")


def strategies(rows: list[StrategyRow], with_reference: bool) -> Table:
    llm = any(r.llm_calls for r in rows)
    headers = ["strategy", "repeats", "evaluations", "best (mean)"]
    if with_reference:
        headers += ["best/opt", "found optimum", "score", "± se", "95% interval"]
    headers += ["failed trials", "tuning s"]
    if llm:
        headers += ["LLM calls", "tokens in+out", "LLM s", "cost"]
    out = []
    for r in rows:
        # a repeat a kill or Ctrl-C cut short is counted in the figures, and said to be
        row = [r.strategy, f"{r.repeats} ({r.partial} unfinished)" if r.partial else str(r.repeats),
               f"{r.evaluations:.0f}", ms(r.best_ms) + retimed_share(r) + found_share(r)]
        if with_reference:
            row += [ratio(r.best_over_opt) + found_share(r),
                    "–" if r.found_optimum is None else f"{r.found_optimum:.0%}",
                    score(r), *score_spread(r)]
        row += [str(r.failures), f"{r.tuning_s:.1f}"]
        if llm:
            row += [str(r.llm_calls), f"{r.tokens_in}+{r.tokens_out}", f"{r.llm_s:.1f}", f"{r.cost:.4f}"]
        out.append(row)
    return Table(headers, out, [h != "strategy" for h in headers])


def score(r: StrategyRow) -> str:
    """The methodology score; "–" without a reference, and the reason where it is undefined (NaN: every
    successful config ties), where the report printed "nan" (and 1.000 before the score was NaN there)."""
    if r.score is None:
        return "–"
    return f"{r.score:.3f}" if score_defined(r.score) else UNDEFINED_SCORE


def score_spread(r: StrategyRow) -> list[str]:
    """The score's standard error and 95% bootstrap interval as ``compare`` prints them ("n/a" for one
    repeat), the interval with the repeats the score rests on.  Why: the report showed a bare score, which
    over a few heavy-tailed repeats says little, while ``compare``'s table gave its spread."""
    if r.score is None:
        return ["–", "–"]
    se = r.score_stderr
    lo, hi = r.score_ci95 or (math.nan, math.nan)
    n = f"{r.score_repeats} repeat{'s' if r.score_repeats != 1 else ''}"
    interval = f"{lo:.2f}..{hi:.2f}" if math.isfinite(lo) and math.isfinite(hi) else "n/a"
    return ["n/a" if se is None or not math.isfinite(se) else f"{se:.3f}", f"{interval} ({n})"]


def retimed_share(r: StrategyRow) -> str:
    """" (re-timed)" beside a best that is the re-timed winner's time (" (k re-timed)" where only k of the
    repeats had one); "" where every best is a screening time."""
    if not r.retimed:
        return ""
    return " (re-timed)" if r.retimed == r.repeats else f" ({r.retimed} re-timed)"


def found_share(r: StrategyRow) -> str:
    """" (k of n repeats found one)" beside a mean over only the k repeats that found a successful config,
    as ``compare`` prints it; "" where all did (or none: the mean is then "–")."""
    k = r.repeats if r.found_config is None else r.found_config
    return f" ({k} of {r.repeats} repeats found one)" if 0 < k < r.repeats else ""


def top(configs: list[TopConfig], with_reference: bool) -> Table:
    """The top configurations; where a run has a re-timed winner, its row (first) says "winner" and a
    "re-timed" column gives its time beside the screening time."""
    retimed = any(c.retimed_ms is not None for c in configs)
    headers = ["#", "time", *(["re-timed"] if retimed else []), *(["/opt"] if with_reference else []), "config",
               "found by", "at evaluation", "proposed by"]
    rows = [[f"{c.rank} (winner)" if c.retimed_ms is not None else str(c.rank), ms(c.time_ms),
             *([ms(c.retimed_ms)] if retimed else []), *([ratio(c.over_opt)] if with_reference else []),
             config(c.config), c.found_by, str(c.at_evaluation) if c.at_evaluation else "–", c.source or "–"]
            for c in configs]
    return Table(headers, rows, [h in ("#", "time", "re-timed", "/opt", "at evaluation") for h in headers])


def failure_counts(fails: Failures) -> Table:
    headers = ["status", *fails.strategies]
    rows = [[s, *(str(fails.counts.get((s, k), 0)) for k in fails.strategies)] for s in fails.statuses]
    rows.append(["share of trials", *(f"{sum(fails.counts.get((s, k), 0) for s in fails.statuses) / n:.0%}"
                                      if (n := fails.total_trials.get(k, 0)) else "–" for k in fails.strategies)])
    return Table(headers, rows, [False] + [True] * len(fails.strategies))


def failure_messages(fails: Failures) -> Table:
    return Table(["status", "message", "trials"], [[s, m, str(c)] for s, m, c in fails.errors], [False, False, True])


def round_facts(r: Round) -> str:
    parts = [f"{r.tokens_in}+{r.tokens_out} tokens", f"{r.latency_s:.2f} s", f"cost {r.cost:.4f}",
             f"measured {r.measured}"]
    if r.best_in_round is not None:
        parts.append(f"best in round {ms(r.best_in_round)}")
    if r.best_after is not None:
        parts.append(f"best so far {ms(r.best_after)}")
    return " · ".join(parts)


def accepted(r: Round) -> Table:
    return Table(["accepted config", "the model's reason"], [[config(c), why or "–"] for c, why in r.accepted],
                 [False, False])


def rejected(r: Round) -> Table:
    return Table(["rejected proposal", "why it was refused"], [[item, why] for item, why in r.rejected],
                 [False, False])
