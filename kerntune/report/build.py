"""From a run id to report files: load, compute, draw, write.

The :class:`Report` the writers render lives in ``model`` so that this module
imports the writers and they do not import it back.

``tune`` and ``compare`` call :func:`write_report` after every run, so it has
to stay cheap: one pass over the store, a handful of small figures.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from kerntune.report import analysis, plots
from kerntune.report.data import load_report
from kerntune.report.html import render_html
from kerntune.report.markdown import write_markdown
from kerntune.report.model import Report
from kerntune.store import Store


@dataclass
class ReportFiles:
    run_id: str
    html: Path | None
    markdown: Path | None
    images: list[Path]
    seconds: float


def build_report(store: Store, run: str) -> Report:
    t0 = time.perf_counter()
    data = load_report(store, run)
    rep = Report(data=data, strategies=analysis.strategy_rows(data), top=analysis.top_configs(data),
                 failures=analysis.failures(data), effects=analysis.param_effects(data), llm=analysis.llm_runs(data))
    drawn = [
        plots.best_so_far_plot(data, analysis.curves_by_evaluations(data), "evaluations"),
        plots.best_so_far_plot(data, analysis.curves_by_seconds(data), "seconds"),
        plots.parameter_plot(data, rep.effects),
        plots.failure_plot(rep.failures),
        plots.llm_plot(rep.llm),
    ]
    rep.plots = {p.key: p for p in drawn if p is not None}
    rep.seconds = time.perf_counter() - t0
    return rep


def write_report(store: Store, run: str, html: str | Path | None = None,
                 markdown: str | Path | None = None) -> ReportFiles:
    """Write the HTML (self-contained) and/or Markdown (PNGs beside it) report of ``run``."""
    t0 = time.perf_counter()
    rep = build_report(store, run)
    html_path = md_path = None
    images: list[Path] = []
    if html is not None:
        html_path = Path(html)
        html_path.parent.mkdir(parents=True, exist_ok=True)
        html_path.write_text(render_html(rep), encoding="utf-8")
    if markdown is not None:
        md_path = Path(markdown)
        images = write_markdown(rep, md_path)
    return ReportFiles(rep.data.run_id, html_path, md_path, images, time.perf_counter() - t0)


def default_report_path(store: Store, run_id: str) -> Path:
    """Reports live next to the store they describe, one file per run id."""
    return store.path.parent / "reports" / f"{run_id}.html"
