"""One self-contained HTML file: inline CSS, PNGs as base64 data URIs, no script and
no external URL, so that it reads the same offline, attached to an issue or archived.

Everything from the store (configs, model answers, prompts, error messages) is
escaped: a model's reply is untrusted text and must never become markup.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable

from kerntune.report import tables
from kerntune.report.analysis import LLMRun, Round
from kerntune.report.model import Report
from kerntune.report.plots import Plot
from kerntune.report.tables import Table

# How many LLM runs per strategy get their rounds in full (a comparison may hold many repeats).
DETAILED_LLM_RUNS = 3

CSS = """
body{font:14px/1.45 -apple-system,"Segoe UI",Helvetica,Arial,sans-serif;color:#1d1d1f;margin:0;background:#f6f7f9}
main{max-width:1100px;margin:0 auto;padding:20px 28px 60px;background:#fff}
h1{font-size:22px;margin:8px 0 6px}h2{font-size:18px;margin:30px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{font-size:15px;margin:20px 0 6px}h4{font-size:14px;margin:14px 0 4px}
nav a{margin-right:14px;color:#2456a6;text-decoration:none}
dl.facts{display:grid;grid-template-columns:max-content auto;gap:2px 14px;margin:10px 0}
dl.facts dt{color:#666}dl.facts dd{margin:0;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:13px}
table{border-collapse:collapse;margin:8px 0 14px;font-size:13px}
th,td{border:1px solid #dcdcdc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f2f5}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td code,li code{font-size:12px}
figure{margin:10px 0 18px}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{color:#555;font-size:13px;margin-top:4px}figcaption b{color:#1d1d1f}
.note{background:#fff6dd;border-left:4px solid #e6b800;padding:6px 10px;margin:8px 0}
.round{border:1px solid #e2e2e2;border-radius:6px;padding:6px 14px 10px;margin:12px 0}
.round .facts{color:#555;font-size:13px}.error{color:#b00020}
details pre{white-space:pre-wrap;background:#f6f8fa;padding:8px;font-size:12px;max-height:420px;overflow:auto}
"""


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def render_table(t: Table, code_columns: Iterable[int] = ()) -> str:
    code = set(code_columns)
    head = "".join(f"<th>{esc(h)}</th>" for h in t.headers)
    body = []
    for row in t.rows:
        cells = []
        for i, cell in enumerate(row):
            content = f"<code>{esc(cell)}</code>" if i in code else esc(cell)
            cells.append(f'<td class="num">{content}</td>' if t.numeric[i] else f"<td>{content}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def render_plot(p: Plot | None) -> str:
    if p is None:
        return ""
    data = base64.b64encode(p.png).decode("ascii")
    return (f'<figure id="plot-{esc(p.key)}"><img data-plot="{esc(p.key)}" alt="{esc(p.title)}" '
            f'src="data:image/png;base64,{data}"><figcaption><b>{esc(p.title)}.</b> {esc(p.caption)}'
            f"</figcaption></figure>")


def _section(sid: str, title: str, body: str) -> str:
    return f'<section id="{sid}"><h2>{esc(title)}</h2>{body}</section>'


def _round(r: Round) -> str:
    parts = [f"<h4>Round {r.round} · {esc(r.model or 'model')}</h4>",
             f'<div class="facts">{esc(tables.round_facts(r))}</div>']
    if r.error:
        parts.append(f'<p class="error">the call failed: {esc(r.error)}</p>')
    parts.append("<ul class=\"summary\">" + "".join(f"<li>{esc(line)}</li>" for line in r.summary) + "</ul>")
    if r.accepted:
        parts.append(render_table(tables.accepted(r), code_columns=[0]))
    elif not r.error:
        parts.append("<p>no proposal was accepted.</p>")
    if r.rejected:
        parts.append(render_table(tables.rejected(r), code_columns=[0]))
    parts.append(f"<details><summary>full prompt ({r.prompt_chars:,} characters)</summary>"
                 f"<pre>{esc(r.prompt)}</pre></details>")
    return '<div class="round">' + "".join(parts) + "</div>"


def _llm(rep: Report) -> str:
    if not rep.llm:
        return ""
    body = [render_plot(rep.plot("llm-rounds"))]
    shown: dict[str, int] = {}
    hidden = 0
    for run in rep.llm:
        if shown.get(run.strategy, 0) >= DETAILED_LLM_RUNS:
            hidden += 1
            continue
        shown[run.strategy] = shown.get(run.strategy, 0) + 1
        body.append(_llm_run(run))
    if hidden:
        body.append(f'<p class="note">{hidden} more LLM runs are not shown round by round; their calls, tokens '
                    f"and cost are in the summary table.</p>")
    return _section("llm", "LLM rounds", "".join(body))


def _llm_run(run: LLMRun) -> str:
    tok = sum(r.tokens_in + r.tokens_out for r in run.rounds)
    secs = sum(r.latency_s for r in run.rounds)
    cost = sum(r.cost for r in run.rounds)
    return (f"<h3>{esc(run.run)} ({esc(run.strategy)}): {len(run.rounds)} calls, {tok:,} tokens, "
            f"{secs:.1f} s, cost {cost:.4f}</h3>" + "".join(_round(r) for r in run.rounds))


def render_html(rep: Report) -> str:
    d = rep.data
    ref = d.reference is not None
    top = tables.top(rep.top, ref)
    sections = [
        _section("summary", "Summary",
                 '<dl class="facts">' + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in tables.facts(d))
                 + "</dl>" + render_table(tables.strategies(rep.strategies, ref))),
        _section("progress", "Best so far",
                 (render_plot(rep.plot("best-vs-evaluations")) + render_plot(rep.plot("best-vs-seconds")))
                 or "<p>no successful trial: nothing to plot.</p>"),
        _section("parameters", "Parameter effects",
                 render_plot(rep.plot("parameters")) or "<p>too few distinct configs to show an effect.</p>"),
        _section("top", "Top configurations",
                 render_table(top, code_columns=[top.headers.index("config")]) if rep.top
                 else "<p>no successful trial.</p>"),
        _section("failures", "Failures by status",
                 (render_plot(rep.plot("failures")) + render_table(tables.failure_counts(rep.failures))
                  + "<h3>Most frequent messages</h3>"
                  + render_table(tables.failure_messages(rep.failures), code_columns=[1]))
                 if rep.failures.total else "<p>no trial failed.</p>"),
        _llm(rep),
    ]
    nav = [("summary", "Summary"), ("progress", "Best so far"), ("parameters", "Parameters"),
           ("top", "Top configs"), ("failures", "Failures")] + ([("llm", "LLM rounds")] if rep.llm else [])
    notes = "".join(f'<p class="note">{esc(n)}</p>' for n in d.notes)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>kerntune report {esc(d.run_id)}</title><style>{CSS}</style></head><body><main>"
        f"<h1>{esc(d.title)}</h1>"
        "<nav>" + "".join(f'<a href="#{k}">{esc(v)}</a>' for k, v in nav) + "</nav>"
        + notes + "".join(sections)
        + f'<footer><p class="facts">made by kerntune report in {rep.seconds:.2f} s</p></footer>'
        "</main></body></html>\n"
    )
