"""The report's figures, drawn with matplotlib's Agg backend into PNG bytes.

Bytes rather than files, so the HTML report can embed them (one file that
reads offline) and the Markdown report can write them beside itself.  Each
figure is small (about 100 dpi) so that a report takes well under a second
or two to draw.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

import numpy as np

from kerntune.report.analysis import Curve, Failures, LLMRun, ParamEffect
from kerntune.report.data import ReportData

DPI = 100


@dataclass
class Plot:
    key: str          # file-name friendly: best-vs-evaluations, parameters, ...
    title: str        # the figure's title, also the HTML caption and alt text
    caption: str
    png: bytes


def _pyplot():  # noqa: ANN202 - the pyplot module
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:  # noqa: ANN001 - a matplotlib Figure
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    _pyplot().close(fig)
    return buf.getvalue()


def _colors(names: list[str]) -> dict[str, str]:
    cycle = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]
    return {n: cycle[i % len(cycle)] for i, n in enumerate(names)}


def _log_y(ax) -> None:  # noqa: ANN001 - a matplotlib Axes
    """A log axis labelled in plain milliseconds (0.6, 1, 2) rather than powers of ten."""
    from matplotlib.ticker import FuncFormatter

    ax.set_yscale("log")
    plain = FuncFormatter(lambda y, _: f"{y:g}")
    ax.yaxis.set_major_formatter(plain)

    def minor(y: float, _: object) -> str:
        lo, hi = ax.get_ylim()
        span = math.log10(hi / lo) if lo > 0 and hi > lo else 3.0
        digit = round(y / 10 ** math.floor(math.log10(y))) if y > 0 else 0
        keep = {2, 3, 4, 5, 6, 8} if span < 1.2 else {2, 5} if span < 2.5 else set()
        return f"{y:g}" if digit in keep else ""

    ax.yaxis.set_minor_formatter(FuncFormatter(minor))


def best_so_far_plot(data: ReportData, curves: list[Curve], by: str) -> Plot | None:
    """Best-so-far per strategy (mean over repeats, min..max shaded), random search's
    expectation and the optimum.  ``by`` is ``evaluations`` or ``seconds``."""
    if not curves:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8.5, 4.6))
    colors = _colors([c.strategy for c in curves])
    ref = data.reference
    single = len(data.runs) == 1
    if single and by == "evaluations":
        run = data.runs[0]
        ok = [(i + 1, t.time_ms) for i, t in enumerate(run.trials) if t.ok]
        if ok:
            ax.scatter(*zip(*ok), s=9, color="#999999", alpha=0.55, label="each measured config", zorder=1)
    if ref is not None and ref.random_expectation:
        n = np.arange(1, len(ref.random_expectation) + 1)
        if by == "evaluations":
            ax.plot(n, ref.random_expectation, "k--", lw=1.2, label="random search (expected)")
        elif ref.mean_cost_s > 0:
            ax.plot(n * ref.mean_cost_s, ref.random_expectation, "k--", lw=1.2,
                    label=f"random search (expected, {ref.mean_cost_s:.3g} s per config)")
    for c in curves:
        label = c.strategy if c.repeats == 1 else f"{c.strategy} (mean of {c.repeats})"
        ax.plot(c.x, c.mean, color=colors[c.strategy], lw=1.8, label=label, zorder=3, drawstyle="steps-post")
        if c.repeats > 1:
            ax.fill_between(c.x, c.lo, c.hi, color=colors[c.strategy], alpha=0.13, lw=0, zorder=2, step="post")
    if ref is not None:
        ax.axhline(ref.optimum_ms, color="green", lw=0.9, ls=":", label=f"optimum {ref.optimum_ms:.4g} ms")
    if by == "seconds":
        ax.set_xlim(0, max(float(c.x[-1]) for c in curves))
    ax.set_xlabel("evaluations" if by == "evaluations" else "tuning seconds (evaluator clock)")
    ax.set_ylabel("best time so far (ms)")
    title = f"Best so far against {by}"
    ax.set_title(f"{title} — {data.space_name}", fontsize=11)
    lows = [float(np.min(c.lo)) for c in curves] + ([ref.optimum_ms] if ref else [])
    if min(lows) > 0:
        _log_y(ax)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    what = "the mean over repeats, shaded from the best to the worst repeat" if any(c.repeats > 1 for c in curves) \
        else "one run"
    caption = (f"Best time found after each {'evaluation' if by == 'evaluations' else 'second of tuning'}: "
               f"{what}. Failed configs count as evaluations.")
    return Plot(f"best-vs-{by}", title, caption, _png(fig))


def parameter_plot(data: ReportData, effects: list[ParamEffect]) -> Plot | None:
    """One panel per parameter: each measured config's time at its value, and the median."""
    if not effects:
        return None
    plt = _pyplot()
    cols = 3 if len(effects) > 4 else min(len(effects), 2)
    rows = math.ceil(len(effects) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.6 * rows + 0.5), squeeze=False)
    rng = np.random.default_rng(0)
    positive = all(t > 0 for e in effects for ts in e.times for t in ts)
    for ax, eff in zip(axes.flat, effects):
        for i, ts in enumerate(eff.times):
            if ts:
                ax.scatter(i + rng.uniform(-0.18, 0.18, len(ts)), ts, s=8 if len(ts) > 30 else 14, alpha=0.5,
                           color="#1f77b4", lw=0, zorder=3)
                ax.hlines(float(np.median(ts)), i - 0.3, i + 0.3, color="#d62728", lw=2)
        ax.set_xticks(range(len(eff.labels)))
        ax.set_xticklabels(eff.labels, fontsize=7, rotation=40 if len(eff.labels) > 5 else 0,
                           ha="right" if len(eff.labels) > 5 else "center")
        ax.set_title(eff.name, fontsize=9)
        if positive:
            _log_y(ax)
        ax.tick_params(axis="y", which="both", labelsize=7)
        ax.grid(alpha=0.25)
    for ax in list(axes.flat)[len(effects):]:
        ax.axis("off")
    title = "Time by parameter value"
    fig.suptitle(f"{title} (ms; red: median)", fontsize=11)
    fig.tight_layout()
    caption = ("Every distinct successful config the runs measured, at its value of each parameter; the red bar is "
               "the median. A parameter whose medians differ a lot matters; one whose clouds overlap does not.")
    return Plot("parameters", title, caption, _png(fig))


def failure_plot(fails: Failures) -> Plot | None:
    if not fails.total:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8.5, max(2.2, 1.0 + 0.45 * len(fails.strategies))))
    left = np.zeros(len(fails.strategies))
    palette = ["#d62728", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"]
    for k, status in enumerate(fails.statuses):
        vals = np.array([fails.counts.get((status, s), 0) for s in fails.strategies], dtype=float)
        ax.barh(fails.strategies, vals, left=left, color=palette[k % len(palette)], label=status)
        left += vals
    ax.set_xlabel("failed trials (all repeats)")
    title = "Failures by status"
    ax.set_title(title, fontsize=11)
    ax.legend(fontsize=8, loc="lower right")
    ax.invert_yaxis()
    fig.tight_layout()
    return Plot("failures", title, "Failed trials of each strategy, by why they failed.", _png(fig))


def llm_plot(runs: list[LLMRun]) -> Plot | None:
    """Accepted and rejected proposals per round, summed over the LLM runs."""
    rounds: dict[int, list[int]] = {}
    for run in runs:
        for r in run.rounds:
            acc_rej = rounds.setdefault(r.round, [0, 0])
            acc_rej[0] += len(r.accepted)
            acc_rej[1] += len(r.rejected)
    if not rounds:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8.5, 3.4))
    xs = sorted(rounds)
    acc = [rounds[x][0] for x in xs]
    rej = [rounds[x][1] for x in xs]
    ax.bar(xs, acc, color="#2ca02c", label="accepted")
    ax.bar(xs, rej, bottom=acc, color="#d62728", label="rejected")
    ax.set_xticks(xs)
    ax.set_xlabel("round")
    ax.set_ylabel("proposed configs")
    title = "Model proposals per round"
    ax.set_title(title + (f" (over {len(runs)} runs)" if len(runs) > 1 else ""), fontsize=11)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.25, axis="y")
    fig.tight_layout()
    return Plot("llm-rounds", title, "Configs the model proposed in each round: valid and new (accepted) or "
                                     "refused with a reason (rejected).", _png(fig))
