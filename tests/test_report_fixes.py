"""Reports and ``compare``'s terminal output that left things out or said them wrongly: auto's model rounds
read "measured 0", a comparison's report gave scores without their spread, Markdown image links broke on
file names with spaces, a real run's report never named its kernel, compare's LLM line mixed a total with
per-repeat means, and compare's table garbled a file name with Rich markup in it.

Real runs: replayed recordings, the CPU kernel file of the measuring-worker tests, ``python -m kerntune``
subprocesses; a scripted model where a test says so.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import json
import math
import random
import re
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest
from markdown_it import MarkdownIt

from cli_runs import run_cli
from kerntune.compare import run_compare
from kerntune.llm import LLMClient
from kerntune.report import build_report, write_report
from kerntune.report.html import render_html
from kerntune.report.tables import facts as report_facts
from kerntune.run.search import RunOptions, run_search
from kerntune.store import Store
from kerntune.strategies import Budget
from scripted import ScriptedProvider, answer, synthetic_evaluator

CPU_KERNELS = Path(__file__).resolve().parent / "data" / "cpu_kernels.py"
FRESH = [{"BM": 64, "W": 4, "bs": [32, 32]}, {"BM": 32, "W": 8, "bs": [64, 16]}, {"BM": 128, "W": 4, "bs": [16, 64]}]
MODEL_SOURCE = re.compile(r"^(llm:round|auto:model)(\d+)$")   # the spellings the strategies store


def _rows(md: str, first: str) -> dict[str, str]:
    """The Markdown summary table's row of strategy ``first``, by column header, Markdown escapes undone."""
    lines = md.splitlines()
    header = next(line for line in lines if line.startswith("| strategy"))
    row = next(line for line in lines if line.startswith(f"| {first} "))
    cells = lambda line: [re.sub(r"\\(.)", r"\1", c.strip()) for c in line.strip().strip("|").split("|")]  # noqa: E731
    return dict(zip(cells(header), cells(row)))


@pytest.mark.parametrize("strategy", ["auto", "llm-seeded", "llm"])
def test_scripted_model_rounds_in_the_report_count_the_configs_each_round_had_measured(tmp_path, strategy) -> None:
    """``auto`` stores its model's configs as ``auto:model{N}``, ``llm`` and ``llm-seeded`` as ``llm:round{N}``;
    the report looked for the second spelling only, so auto's rounds (the default strategy's) read
    "measured 0" with no best though their configs were measured."""
    store = Store(tmp_path / "k.db")
    client = LLMClient(ScriptedProvider(lambda n, messages: answer(*FRESH)), retries=0, backoff_base=0.0)
    options = {"max_calls": 1} if strategy == "auto" else {"initial": 3} if strategy == "llm-seeded" else \
        {"initial": 3, "max_rounds": 1}
    res = run_search(synthetic_evaluator(tmp_path), strategy, Budget(max_evals=20), seed=0,
                     run=RunOptions(llm=client, store=store, strategy_options=options))
    rows = list(store.iter_trial_rows([res.run_id]))
    by_round: dict[int, list[float | None]] = {}
    for r in rows:
        m = MODEL_SOURCE.match(str(r["source"]))
        if m:
            by_round.setdefault(int(m.group(2)), []).append(r["time_ms"] if r["status"] == "ok" else None)
    assert by_round, [r["source"] for r in rows]           # the model's configs were measured
    rep = build_report(store, res.run_id)
    rounds = {r.round: r for r in rep.llm[0].rounds}
    for n, times in by_round.items():
        assert rounds[n].measured == len(times) > 0
        assert rounds[n].best_in_round == min(t for t in times if t is not None)
    md = tmp_path / "r.md"
    write_report(store, res.run_id, markdown=md)
    assert f"measured {len(by_round[1])} · best in round" in md.read_text()


def test_a_comparison_report_gives_each_score_the_spread_compare_printed(tmp_path, conv_path) -> None:
    """``compare`` prints each score with its standard error and bootstrap interval; the report (HTML and
    Markdown) showed the bare score.  Now both show the harness's own spread (same function, same seed)
    and how many repeats it rests on; one repeat has none ("n/a")."""
    store = Store(tmp_path / "k.db")
    result = run_compare(str(conv_path), ["random", "genetic"], 25, 3, 7, store)
    md = tmp_path / "c.md"
    files = write_report(store, result.run_id, html=tmp_path / "c.html", markdown=md)
    text, html = md.read_text(), files.html.read_text()
    for name, stats in result.strategies.items():
        row = _rows(text, name)
        se, interval = f"{stats.score_stderr:.3f}", f"{stats.score_ci95[0]:.2f}..{stats.score_ci95[1]:.2f}"
        assert row["score"] == f"{stats.score:.3f}", row
        assert row["± se"] == se and row["95% interval"] == f"{interval} (3 repeats)", row
        assert f'<td class="num">{se}</td><td class="num">{interval} (3 repeats)</td>' in html
    one = run_search(synthetic_evaluator(tmp_path), "random", Budget(max_evals=10), seed=0,
                     run=RunOptions(store=store))
    write_report(store, one.run_id, markdown=md)
    row = _rows(md.read_text(), "random")
    assert row["± se"] == "n/a" and row["95% interval"] == "n/a (1 repeat)", row


def test_markdown_image_links_survive_spaces_and_parentheses_in_the_file_name(tmp_path, conv_path) -> None:
    """The PNG names follow the .md's: ``my report (v2)-parameters.png`` written raw as a link target ends
    the link at the space, and no renderer showed the images."""
    store = Store(tmp_path / "k.db")
    res = run_search(synthetic_evaluator(tmp_path), "exhaustive", Budget(max_evals=500), run=RunOptions(store=store))
    md = tmp_path / "my report (v2).md"
    files = write_report(store, res.run_id, markdown=md)
    tokens = MarkdownIt("commonmark").parse(md.read_text())
    srcs = [child.attrs["src"] for t in tokens if t.type == "inline" for child in t.children or []
            if child.type == "image"]
    assert len(srcs) == len(files.images) >= 3
    assert sorted((md.parent / unquote(str(s))).resolve() for s in srcs) == sorted(p.resolve() for p in files.images)


def test_a_real_runs_report_names_its_kernel_file_shape_and_label(tmp_path) -> None:
    """A measured run (the CPU kernel file, as ``tune --shapes`` runs it, whose runs are labelled by shape)
    had a report titled "space" that never said which kernel or shape it tuned."""
    from kerntune.evaluate.triton_backend.evaluator import TritonEvaluator
    from kerntune.run.shapes import tune_shapes

    store = Store(tmp_path / "k.db")
    (result,) = tune_shapes(lambda s: TritonEvaluator(CPU_KERNELS, s), [(8,)], "random", 3, store, warm=False)
    rep = build_report(store, result.run_id)
    facts = dict(report_facts(rep.data))
    assert facts["kernel"] == "cpu_planted" and facts["kernel file"] == str(CPU_KERNELS)
    assert facts["shape"] == "8" and facts["label"] == "shapes 8"
    assert rep.data.title.startswith("cpu_planted: tuning run")
    html = render_html(rep)
    assert "<dt>kernel</dt><dd>cpu_planted</dd>" in html and "<dt>shape</dt><dd>8</dd>" in html
    assert f"<dt>kernel file</dt><dd>{CPU_KERNELS}</dd>" in html and "<dt>label</dt><dd>shapes 8</dd>" in html
    md = tmp_path / "r.md"
    write_report(store, result.run_id, markdown=md)
    text = md.read_text()
    assert "# cpu\\_planted: tuning run" in text and "- **shape**: 8" in text and "- **label**: shapes 8" in text
    assert "- **kernel file**: " + str(CPU_KERNELS).replace("_", "\\_") in text


def test_compare_says_failed_model_calls_as_totals_beside_per_repeat_means(tmp_path, conv_path) -> None:
    """Two repeats of auto with a model that always fails: the line read "1.0 LLM calls ... per repeat
    (2 failed calls)", a total beside per-repeat means; the JSON's ``failed_calls`` was a total among
    per-repeat keys.  Now each figure says which it is."""
    model = tmp_path / "fails.py"
    model.write_text("import sys\nsys.stdin.read()\nsys.exit(3)\n")
    proc = run_cli(tmp_path, "compare", "--space", str(conv_path), "--strategies", "auto", "--budget", "8",
                   "--repeats", "2", "--llm", f"cmd:{sys.executable} {model}", "-o", "auto.max_calls=1",
                   "-o", "auto.overlap_first=2", "--json", "c.json", "--no-report", env={"COLUMNS": "250"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "(2 of 2 calls failed over 2 repeats)" in proc.stdout, proc.stdout
    llm = json.loads((tmp_path / "c.json").read_text())["strategies"]["auto"]["llm"]
    assert llm["calls_per_repeat"] == 1.0 and llm["calls_total"] == 2
    assert llm["failed_calls_per_repeat"] == 1.0 and llm["failed_calls_total"] == 2
    assert "failed_calls" not in llm


def _mostly_failing(path: Path) -> None:
    """A Kernel Tuner cache of 64 configs of which only one runs."""
    values = {"a": list(range(8)), "b": list(range(8))}
    rng = random.Random(1)
    cache = {f"{a},{b}": {"a": a, "b": b, "compile_time": 100.0, "benchmark_time": 10.0,
                          "time": round(rng.uniform(1, 5), 3) if (a, b) == (7, 7) else "RuntimeFailedConfig"}
             for a, b in itertools.product(values["a"], values["b"])}
    path.write_text(json.dumps({"device_name": "X", "kernel_name": "k", "problem_size": [1],
                                "tune_params_keys": list(values), "tune_params": values, "objective": "time",
                                "cache": cache}))


def test_compare_table_keeps_a_file_name_with_markup_and_says_no_success_when_all_configs_failed(tmp_path) -> None:
    """A recording named ``conv[red]x.json`` lost its ``[red]`` (read as Rich markup) in the table's title;
    and best/opt said "none ran" where configs ran and all failed."""
    rec = tmp_path / "conv[red]x.json"
    _mostly_failing(rec)
    proc = run_cli(tmp_path, "compare", "--space", str(rec), "--strategies", "random", "--budget", "1",
                   "--repeats", "2", "--json", "c.json", "--no-report", env={"COLUMNS": "250"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "conv[red]x.json: budget 1" in proc.stdout, proc.stdout
    stats = json.loads((tmp_path / "c.json").read_text())["strategies"]["random"]
    assert stats["repeats_found_config"] == 0                  # the seeds make it so: both picked a failing config
    row = next(line for line in proc.stdout.splitlines() if "random" in line and "│" in line)
    assert "no success" in row and "none ran" not in row, row


def test_compare_table_says_none_ran_only_where_no_config_ran(tmp_path, conv_path) -> None:
    """The other side of "no success": a strategy whose repeats measured nothing (a result as one would
    be with zero evaluations) still reads "none ran"."""
    from rich.console import Console

    from kerntune.cli import compare_cmd

    store = Store(tmp_path / "k.db")
    result = run_compare(str(conv_path), ["random"], 5, 2, 0, store)
    stats = result.strategies["random"]
    assert stats.evaluated == 10
    result.strategies["random"] = dataclasses.replace(stats, best_over_opt=math.inf, found_config=0, evaluated=0,
                                                      best_over_opt_spread=(math.inf, math.inf))
    out = io.StringIO()
    saved = compare_cmd.console
    compare_cmd.console = Console(file=out, width=250)
    try:
        compare_cmd.print_table(result)
    finally:
        compare_cmd.console = saved
    row = next(line for line in out.getvalue().splitlines() if "random" in line and "│" in line)
    assert "none ran" in row and "no success" not in row, row


def test_markdown_report_says_llm_runs_beyond_three_per_strategy_are_not_shown(tmp_path) -> None:
    """The HTML report says how many LLM runs it leaves out round by round; the Markdown one left them out
    silently.  Four scripted-model repeats of one strategy: one is not shown."""
    store = Store(tmp_path / "k.db")
    ev = synthetic_evaluator(tmp_path)
    parent = store.create_run("compare", options={"space": str(tmp_path / "synthetic.json"), "budget": 8,
                                                  "strategies": ["llm"], "repeats": 4, "seed": 0})
    for r in range(4):
        client = LLMClient(ScriptedProvider(lambda n, messages: answer(*FRESH)), retries=0, backoff_base=0.0)
        run_search(ev, "llm", Budget(max_evals=8), seed=r,
                   run=RunOptions(llm=client, store=store, parent_id=parent, label=f"llm#{r}",
                                  strategy_options={"initial": 3, "max_rounds": 1}))
    store.finish_run(parent)
    md = tmp_path / "r.md"
    write_report(store, parent, markdown=md)
    text = md.read_text()
    assert "### llm#2 (llm)" in text and "llm#3 (llm)" not in text
    assert "> 1 more LLM runs are not shown round by round" in text
