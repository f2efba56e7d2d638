"""Run reports from real runs: replayed tunes, a comparison, and an LLM run with a
scripted model (so the LLM section is exercised without a real model)."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from kerntune.compare import run_compare
from kerntune.errors import KerntuneError
from kerntune.evaluate import ReplayEvaluator
from kerntune.llm import LLMClient
from kerntune.report import analysis, build_report, load_report, write_report
from kerntune.report.html import render_html
from kerntune.run.search import RunOptions, run_search
from kerntune.store import Store
from kerntune.strategies import Budget
from scripted import ScriptedProvider, answer, synthetic_evaluator

BEST = {"BM": 64, "W": 4, "bs": [32, 32]}
PNG = b"\x89PNG\r\n\x1a\n"
SECTIONS = ("Summary", "Best so far", "Parameter effects", "Top configurations", "Failures by status")


def llm_script(n: int, messages) -> str:  # noqa: ANN001 - list[Message]
    """Round 1: two good configs, one out of range, and a reason with markup in it; later rounds: one config."""
    if n == 1:
        return json.dumps({"configs": [
            {"reasoning": "balanced tile <script>alert(1)</script>", "config": BEST},
            {"reasoning": "smaller rows", "config": {"BM": 32}},
            {"reasoning": "huge rows", "config": {"BM": 999}},
        ]})
    return answer({"W": 8, "BM": 64}, {"bs": [64, 64]})


def llm_run(tmp_path: Path, store: Store, parent_id: str | None = None, label: str | None = None,
            seed: int = 0) -> str:
    client = LLMClient(ScriptedProvider(llm_script), retries=0, backoff_base=0.0)
    res = run_search(synthetic_evaluator(tmp_path), "llm", Budget(max_evals=30), seed=seed,
                     run=RunOptions(llm=client, store=store, parent_id=parent_id, label=label,
                                    strategy_options={"initial": 4, "refine": 3, "max_rounds": 3}))
    return res.run_id  # type: ignore[return-value]


def images(html: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)]


def external_references(html: str) -> list[str]:
    """Every src/href/url() that would make the browser fetch something."""
    refs = re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', html) + re.findall(r"url\(([^)]*)\)", html)
    return [r for r in refs if not r.startswith(("data:", "#"))]


def test_tune_report_is_one_self_contained_html_file(tmp_path, conv_path) -> None:
    store = Store(tmp_path / "k.db")
    res = run_search(ReplayEvaluator.from_file(conv_path), "random", Budget(max_evals=80), seed=3,
                     run=RunOptions(store=store))
    files = write_report(store, res.run_id, html=tmp_path / "r.html")
    html = files.html.read_text()
    for title in SECTIONS:
        assert f">{title}</h2>" in html
    pngs = images(html)
    assert len(pngs) >= 3                        # best vs evaluations, vs seconds, parameter effects
    assert all(p.startswith(PNG) and len(p) > 5_000 for p in pngs)
    assert external_references(html) == []
    assert "<link" not in html and "<script" not in html
    assert "0.5536 ms" in html                  # the recording's optimum, in the facts and as a curve
    assert "random search, expected best after 80" in html
    best = min(t.time_ms for _, t, _ in store.trials(res.run_id) if t.ok)
    first_row = re.search(r"<tbody><tr><td class=\"num\">1</td><td class=\"num\">([0-9.]+) ms", html)
    assert first_row and abs(float(first_row.group(1)) - best) / best < 1e-3


def test_comparison_report_curves_and_scores_match_the_compare_harness(tmp_path, conv_path) -> None:
    """One curve per strategy, the same numbers `kerntune compare` prints."""
    store = Store(tmp_path / "k.db")
    result = run_compare(str(conv_path), ["random", "genetic"], 30, 2, 0, store)
    data = load_report(store, result.run_id)
    assert data.kind == "compare" and len(data.runs) == 4
    assert sorted(data.by_strategy()) == ["genetic", "random"]
    assert data.reference is not None
    assert data.reference.optimum_ms == pytest.approx(result.optimum_ms)
    assert np.allclose(data.reference.random_expectation, result.random_expectation)
    curves = {c.strategy: c for c in analysis.curves_by_evaluations(data)}
    rows = {r.strategy: r for r in analysis.strategy_rows(data)}
    for name, stats in result.strategies.items():
        assert np.allclose(curves[name].mean, stats.mean_curve)
        assert curves[name].repeats == 2
        assert rows[name].score == pytest.approx(stats.score)
        assert rows[name].best_over_opt == pytest.approx(stats.best_over_opt)
    by_seconds = analysis.curves_by_seconds(data)
    assert {c.strategy for c in by_seconds} == {"random", "genetic"}
    for c in by_seconds:
        assert np.all(np.diff(c.mean) <= 1e-12)   # a best-so-far never gets worse with time
        assert c.mean[-1] == pytest.approx(curves[c.strategy].mean[-1])


def test_failures_and_parameter_effects_on_an_exhaustive_run(tmp_path) -> None:
    """The synthetic space fails exactly at BM=128 with W=2 (9 configs) and is fastest at W=4."""
    store = Store(tmp_path / "k.db")
    ev = synthetic_evaluator(tmp_path)
    res = run_search(ev, "exhaustive", Budget(max_evals=500), run=RunOptions(store=store))
    rep = build_report(store, res.run_id)
    assert rep.failures.total == 9
    assert rep.failures.counts == {("runtime_error", "exhaustive"): 9}
    assert rep.failures.errors == [("runtime_error", "out of resources", 9)]
    w = next(e for e in rep.effects if e.name == "W")
    assert w.labels == ["2", "4", "8"] and w.failed == [9, 0, 0]
    medians = dict(zip(w.labels, (np.median(ts) for ts in w.times)))
    assert medians["4"] < medians["8"] < medians["2"]
    bs = next(e for e in rep.effects if e.name == "bs")
    assert "[32, 32]" in bs.labels
    assert rep.top[0].config == BEST and rep.top[0].time_ms == 1.0 and rep.top[0].over_opt == 1.0
    assert {"best-vs-evaluations", "best-vs-seconds", "parameters", "failures"} <= set(rep.plots)
    html = render_html(rep)
    assert "out of resources" in html and "runtime_error" in html


def test_llm_report_shows_each_round_its_reasons_rejects_and_cost(tmp_path) -> None:
    store = Store(tmp_path / "k.db")
    run_id = llm_run(tmp_path, store)
    rep = build_report(store, run_id)
    assert len(rep.llm) == 1
    rounds = rep.llm[0].rounds
    assert [r.round for r in rounds] == [1, 2, 3]
    r1 = rounds[0]
    assert [c for c, _ in r1.accepted] == [BEST, {"BM": 32, "W": 2, "bs": [16, 16]}]
    assert r1.accepted[0][1] == "balanced tile <script>alert(1)</script>"
    assert len(r1.rejected) == 1 and "BM: 999 is not allowed" in r1.rejected[0][1]
    assert (r1.tokens_in, r1.tokens_out) == (100, 50)
    assert r1.best_after == 1.0                    # BEST is the optimum of the synthetic space
    assert r1.summary[0].startswith("first round")
    assert rounds[1].summary[0].startswith("refinement round")
    assert any("Best so far: 1 ms" in line for line in rounds[1].summary)
    html = render_html(rep)
    assert ">LLM rounds</h2>" in html and "Round 2 · scripted:scripted-model" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>" not in html   # model text is escaped
    assert "BM: 999 is not allowed" in html
    assert "100+50 tokens" in html
    assert "full prompt (" in html and "## Search state (after round 1)" in html
    row = next(r for r in rep.strategies if r.strategy == "llm")
    stored = store.llm_exchanges(run_id)
    assert (row.llm_calls, row.tokens_in, row.tokens_out) == (
        3, sum(ex["tokens_in"] for ex in stored), sum(ex["tokens_out"] for ex in stored))
    assert row.tokens_in > 300                    # round 3 repeated measured configs: a repair call was paid for


def test_comparison_with_llm_repeats_groups_by_strategy(tmp_path) -> None:
    """A comparison group as the harness stores it: a parent run and labelled child runs."""
    store = Store(tmp_path / "k.db")
    ev = synthetic_evaluator(tmp_path)
    parent = store.create_run("compare", options={"space": str(tmp_path / "synthetic.json"), "budget": 30,
                                                  "strategies": ["random", "llm"], "repeats": 2, "seed": 0})
    for r in range(2):
        run_search(ev, "random", Budget(max_evals=30), seed=r,
                   run=RunOptions(store=store, parent_id=parent, label=f"random#{r}"))
        llm_run(tmp_path, store, parent_id=parent, label=f"llm#{r}", seed=r)
    store.finish_run(parent)
    rep = build_report(store, parent)
    assert [r.strategy for r in rep.strategies] == ["random", "llm"]
    assert [r.repeats for r in rep.strategies] == [2, 2]
    assert rep.data.reference is not None and rep.data.reference.optimum_ms == 1.0
    assert [run.run for run in rep.llm] == ["llm#0", "llm#1"]
    assert next(r for r in rep.strategies if r.strategy == "llm").found_optimum == 1.0
    md = tmp_path / "out" / "report.md"
    files = write_report(store, parent, markdown=md)
    text = md.read_text()
    for title in (*SECTIONS, "LLM rounds"):
        assert f"## {title}" in text
    assert files.images and all(p.parent == md.parent and p.read_bytes().startswith(PNG) for p in files.images)
    for p in files.images:
        assert f"]({p.name})" in text
    assert "### llm#1 (llm)" in text


def test_missing_recording_still_gives_a_report_without_yardsticks(tmp_path) -> None:
    store = Store(tmp_path / "k.db")
    run_id = llm_run(tmp_path, store)
    (tmp_path / "synthetic.json").unlink()
    rep = build_report(store, run_id)
    assert rep.data.reference is None
    assert any("not found" in n for n in rep.data.notes)
    assert "best-vs-evaluations" in rep.plots
    assert rep.strategies[0].score is None
    assert "not found from here" in render_html(rep)


def test_a_run_without_success_or_without_trials_still_reports(tmp_path) -> None:
    from kerntune.evaluate.trial import Status, Trial

    store = Store(tmp_path / "k.db")
    empty = store.create_run("compare", options={"space": "gone.json", "budget": 10})
    failed = store.create_run("tune", strategy="random", options={"budget": {"max_evals": 5}})
    for i in range(3):
        store.add_trial(failed, i, str(i), Trial({"a": i}, Status.COMPILE_ERROR, error="boom"), float(i))
    rep = build_report(store, failed)
    assert set(rep.plots) == {"failures"} and rep.top == [] and rep.effects == []
    assert rep.failures.errors == [("compile_error", "boom", 3)]
    html = render_html(rep)
    assert "no successful trial: nothing to plot." in html and html.count("<img") == 1
    rep = build_report(store, empty)
    assert rep.plots == {} and "this comparison has no repeat yet" in rep.data.notes
    assert "no trial failed." in render_html(rep)


def test_run_ids_resolve_by_prefix_and_last(tmp_path) -> None:
    store = Store(tmp_path / "k.db")
    first = llm_run(tmp_path, store)
    time.sleep(0.01)
    second = run_search(synthetic_evaluator(tmp_path), "random", Budget(max_evals=5),
                        run=RunOptions(store=store)).run_id
    assert load_report(store, "last").run_id == second
    assert load_report(store, first[:6]).run_id == first
    with pytest.raises(KerntuneError, match="no run 'zzz'"):
        load_report(store, "zzz")


def test_a_large_comparison_report_is_cheap(tmp_path, conv_path) -> None:
    store = Store(tmp_path / "k.db")
    result = run_compare(str(conv_path), ["random", "pattern", "genetic"], 100, 4, 0, store)
    # CPU seconds of this process, not wall: a guard against a report that grows with the trials' square,
    # which other processes loading the machine must not trip (the wall once read 9.8 s on a loaded CI box)
    t0 = time.process_time()
    files = write_report(store, result.run_id, html=tmp_path / "c.html")
    seconds = time.process_time() - t0
    assert seconds < 8.0, seconds                 # about 1-2 s, matplotlib import included
    assert files.html.stat().st_size < 2_000_000


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, KERNTUNE_STORE=str(cwd / "store.db"))
    return subprocess.run([sys.executable, "-m", "kerntune", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=env)


def test_cli_tune_and_compare_say_where_the_report_is_and_report_rewrites_it(tmp_path, conv_path) -> None:
    proc = _cli(["tune", "--replay", str(conv_path), "--strategy", "random", "--budget", "20"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("report: "))
    run_id = re.search(r"run id: (\w+)", proc.stdout).group(1)
    path = tmp_path / line.removeprefix("report: ").strip()
    assert path == tmp_path / "reports" / f"{run_id}.html" and path.read_text().startswith("<!DOCTYPE html>")

    proc = _cli(["compare", "--space", str(conv_path), "--strategies", "random,pattern", "--budget", "15",
                 "--repeats", "2", "--report", "cmp.html"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "report: cmp.html" in proc.stdout
    html = (tmp_path / "cmp.html").read_text()
    assert html.count("<img") >= 3 and "<td>pattern</td>" in html and "<td>random</td>" in html

    proc = _cli(["report", "last", "--md", "out/r.md", "--html", "out/r.html"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "report: out/r.html" in proc.stdout and "report: out/r.md" in proc.stdout
    assert (tmp_path / "out" / "r-best-vs-evaluations.png").exists()

    proc = _cli(["compare", "--space", str(conv_path), "--strategies", "random", "--budget", "5",
                 "--repeats", "1", "--no-report"], tmp_path)
    assert proc.returncode == 0 and "report:" not in proc.stdout

    proc = _cli(["report", "nosuchrun"], tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"kerntune: error: no run 'nosuchrun' in {tmp_path / 'store.db'} (see `kerntune store runs`)"]


def test_the_header_states_the_budget_as_it_was_given(tmp_path) -> None:
    """A run under a time budget alone shows its seconds, not the count of evaluations it made."""
    import kerntune
    from kerntune.report.tables import facts

    space = Path(__file__).resolve().parents[1] / "examples/spaces/convolution_A100.json.gz"
    timed = kerntune.tune(space, strategy="random", seconds=40, store=tmp_path / "r.db", report=False)
    counted = kerntune.tune(space, strategy="random", budget=7, store=tmp_path / "r.db", report=False)
    with Store(tmp_path / "r.db") as st:
        assert dict(facts(load_report(st, timed.run_id)))["budget"] == "40 s"
        assert dict(facts(load_report(st, counted.run_id)))["budget"] == "7 evaluations"


def test_an_unfinished_repeat_of_a_comparison_is_said_in_its_row(tmp_path, conv_path) -> None:
    """A killed or interrupted comparison's report counts a repeat cut short in its figures; the
    strategy's row now says so ("2 (1 unfinished)") where it read as two whole repeats."""
    import sqlite3

    store = Store(tmp_path / "k.db")
    result = run_compare(str(conv_path), ["random"], 20, 2, 0, store)
    store.close()
    con = sqlite3.connect(tmp_path / "k.db")
    con.execute("UPDATE runs SET status='interrupted' WHERE label='random#1'")
    con.commit()
    con.close()
    with Store(tmp_path / "k.db") as st:
        (row,) = analysis.strategy_rows(load_report(st, result.run_id))
        files = write_report(st, result.run_id, markdown=tmp_path / "r.md")
    assert row.repeats == 2 and row.partial == 1
    assert "2 (1 unfinished)" in files.markdown.read_text()


def test_failure_messages_are_told_apart_by_their_error_line() -> None:
    """Cut at 160 characters, every OpenCL compile error read as the same clBuildProgram boilerplate."""
    boiler = "RuntimeError: clBuildProgram failed: BUILD_PROGRAM_FAILURE - " * 4
    one = analysis.error_gist(boiler + "\n\nBuild on <dev>:\n\n/tmp/tmpab12.cl:7:26: error: expected expression\n")
    two = analysis.error_gist(boiler + "\n\nBuild on <dev>:\n\n/tmp/tmpzz99.cl:9:3: error: use of undeclared x\n")
    same = analysis.error_gist(boiler + "\n\nBuild on <dev>:\n\n/tmp/tmpqq77.cl:7:26: error: expected expression\n")
    assert one != two and one == same and "expected expression" in one and len(one) <= 240
    assert analysis.error_gist("ValueError: boom") == "ValueError: boom"
