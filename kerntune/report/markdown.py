"""The Markdown report: the same sections as the HTML one, for pull requests, wikis and
terminals; its plots are PNG files written beside the ``.md`` (``STEM-KEY.png``) and
linked relatively, so the folder can be moved as a whole."""

from __future__ import annotations

import html
import re
from pathlib import Path
from urllib.parse import quote

from kerntune.report import tables
from kerntune.report.model import Report
from kerntune.report.html import DETAILED_LLM_RUNS
from kerntune.report.plots import Plot
from kerntune.report.tables import Table


_MD_SPECIAL = re.compile(r"([\\`*_\[\]~|])")


def cell(text: str) -> str:
    """Text from a run (a model's reasons, error messages, the model's own name) as inert Markdown:
    one line, HTML escaped (a `<script>` or `<img onerror>` in a reason stays text in every
    renderer that passes HTML through) and Markdown's link, emphasis and table characters escaped."""
    flat = _MD_SPECIAL.sub(r"\\\1", html.escape(" ".join(str(text).split()), quote=False))
    return "\\" + flat if flat.startswith(("#", "+", "-")) else flat


def code(text: str) -> str:
    """A code span: inside it nothing is rendered, so only the table's pipes are escaped."""
    flat = " ".join(str(text).split())
    if "`" in flat:
        return cell(flat)
    return "`" + flat.replace("|", "\\|") + "`"


def fenced(text: str, info: str = "text") -> str:
    """A fenced block that text cannot close: the fence is longer than any backtick run in it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def md_table(t: Table, code_columns: tuple[int, ...] = ()) -> str:
    if not t.rows:
        return ""
    lines = ["| " + " | ".join(cell(h) for h in t.headers) + " |",
             "|" + "|".join("---:" if num else "---" for num in t.numeric) + "|"]
    for row in t.rows:
        lines.append("| " + " | ".join(code(c) if i in code_columns else cell(c)
                                       for i, c in enumerate(row)) + " |")
    return "\n".join(lines) + "\n"


def _image(p: Plot | None, md_path: Path, written: list[Path]) -> str:
    if p is None:
        return ""
    png = md_path.with_name(f"{md_path.stem}-{p.key}.png")
    png.write_bytes(p.png)
    written.append(png)
    # percent-encoded: a raw name with a space or parenthesis ends the link early and the image is lost
    return f"![{cell(p.title)}]({quote(png.name)})\n\n*{cell(p.title)}.* {cell(p.caption)}\n\n"


def write_markdown(rep: Report, md_path: Path) -> list[Path]:
    """Write the report and its PNGs; return the PNG paths."""
    md_path.parent.mkdir(parents=True, exist_ok=True)
    d = rep.data
    ref = d.reference is not None
    images: list[Path] = []
    out = [f"# {cell(d.title)}\n"]
    out += [f"> {cell(n)}\n" for n in d.notes]
    out.append("## Summary\n")
    out += [f"- **{cell(k)}**: {cell(v)}" for k, v in tables.facts(d)]
    out.append("\n" + md_table(tables.strategies(rep.strategies, ref)))
    out.append("## Best so far\n")
    progress = _image(rep.plot("best-vs-evaluations"), md_path, images) + \
        _image(rep.plot("best-vs-seconds"), md_path, images)
    out.append(progress or "No successful trial: nothing to plot.\n")
    out.append("## Parameter effects\n")
    out.append(_image(rep.plot("parameters"), md_path, images) or "Too few distinct configs to show an effect.\n")
    out.append("## Top configurations\n")
    top = tables.top(rep.top, ref)
    out.append(md_table(top, code_columns=(top.headers.index("config"),)) or "No successful trial.\n")
    out.append("## Failures by status\n")
    if rep.failures.total:
        out.append(_image(rep.plot("failures"), md_path, images))
        out.append(md_table(tables.failure_counts(rep.failures)))
        out.append("### Most frequent messages\n")
        out.append(md_table(tables.failure_messages(rep.failures), code_columns=(1,)))
    else:
        out.append("No trial failed.\n")
    if rep.llm:
        out.append("## LLM rounds\n")
        out.append(_image(rep.plot("llm-rounds"), md_path, images))
        shown: dict[str, int] = {}
        hidden = 0
        for run in rep.llm:
            if shown.get(run.strategy, 0) >= DETAILED_LLM_RUNS:
                hidden += 1
                continue
            shown[run.strategy] = shown.get(run.strategy, 0) + 1
            out.append(f"### {cell(run.run)} ({cell(run.strategy)})\n")
            for r in run.rounds:
                out.append(f"#### Round {r.round} · {cell(r.model or 'model')}\n")
                out.append(cell(tables.round_facts(r)) + "\n")
                if r.error:
                    out.append(f"**The call failed:** {cell(r.error)}\n")
                out += [f"- {cell(line)}" for line in r.summary]
                out.append("")
                out.append(md_table(tables.accepted(r), code_columns=(0,)))
                out.append(md_table(tables.rejected(r), code_columns=(0,)))
                out.append(f"<details><summary>full prompt ({r.prompt_chars:,} characters)</summary>\n\n"
                           f"{fenced(r.prompt)}\n\n</details>\n")
        if hidden:  # as the HTML report says it
            out.append(f"> {hidden} more LLM runs are not shown round by round; their calls, tokens and cost are in"
                       " the summary table.\n")
    md_path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return images
