"""The winner a re-time settled is kept with its run, and the report names it first.

``tune`` (and each ``tune --shapes`` child, and ``kerntune exec``'s searches) printed and cached the
runoff's winner, but stored only the screening trials: the report ranked by screening time and named
as best ("#1", "best (mean)") a config the runoff had rejected, and the run's summary held no winner.
Now the run's summary keeps it (``kerntune.run.winner.WINNER``) and the report shows it first, marked,
falling back to the screening ranking for a run without one.

Scripted evaluators (a recorded space whose runoff picks the screening's second-fastest config and
whose re-time gives it the best time) make the disagreement deterministic; real SQLite stores, the
real ``tune`` command and ``tune_shapes``, and the report as ``kerntune report`` writes it in a real
process.  The ``exec`` test runs a real Triton kernel under Triton's interpreter in a subprocess, its
runoff planted to pick another config than the screening's fastest.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

import pytest
from typer.testing import CliRunner

from cli_runs import PACKAGE_ROOT, run_cli
from kerntune.cli import app
from kerntune.evaluate import Status, Trial
from scripted import synthetic_evaluator

#: The re-timed time the scripted re-time gives the runoff's pick (the screening's times are 1 ms and up).
PICK_MS = 0.9


def _scripted(tmp_path: Path):  # noqa: ANN202 - a ReplayEvaluator with a scripted runoff and re-time
    """The synthetic recorded space, able to re-time: its runoff picks the leader the screening ranked
    second, and its re-time gives that pick ``PICK_MS`` (the default config: 5 ms)."""
    ev = synthetic_evaluator(tmp_path)
    ev.picked = []

    def runoff(configs: Sequence[dict], first_ms: Sequence[float]) -> dict[str, Any]:
        ev.picked.append(json.loads(json.dumps(dict(configs[1]))))
        return {"winner": 1, "rounds": {"0": [first_ms[0]], "1": [first_ms[1]]}, "cycles": 5}

    def retime(configs: Sequence[dict], rounds: int | None = None) -> list[Trial]:
        out = []
        for i, cfg in enumerate(configs):
            ms = PICK_MS if i == 0 else 5.0
            out.append(Trial(dict(cfg), Status.OK, ms, [ms] * 6, extra={"rounds_ms": [ms] * 6, "ci_ms": [ms, ms]}))
        return out

    ev.can_retime, ev.runoff, ev.retime = True, runoff, retime
    return ev


def _summary(db: Path, run_id: str) -> dict[str, Any]:
    con = sqlite3.connect(db)
    try:
        (text,), = con.execute("SELECT summary_json FROM runs WHERE id=?", (run_id,)).fetchall()
    finally:
        con.close()
    return json.loads(text)


def _report(tmp_path: Path, db: Path, run_id: str) -> str:
    """The run's Markdown report, as ``kerntune report`` writes it (a real process)."""
    md = tmp_path / f"{run_id}.md"
    out = run_cli(tmp_path, "report", run_id, "--store", str(db), "--md", str(md), timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return md.read_text()


def _top_rows(md: str) -> list[str]:
    """The top configurations table's rows."""
    section = md.split("## Top configurations", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| \\#")]


def _screening_best(db: Path, run_id: str) -> dict[str, Any]:
    con = sqlite3.connect(db)
    try:
        (cfg,), = con.execute("SELECT config_json FROM trials WHERE run_id=? AND status='ok' ORDER BY time_ms"
                              " LIMIT 1", (run_id,)).fetchall()
    finally:
        con.close()
    return json.loads(cfg)


def scripted_tune(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Path, Any, str]:
    """``kerntune tune`` (exhaustive) over ``_scripted``'s evaluator, in-process: (evaluator, store, the
    CLI's result, run id)."""
    ev = _scripted(tmp_path)
    monkeypatch.setattr("kerntune.cli.tune_cmd._evaluator", lambda *a, **k: ev)
    db = tmp_path / "t.db"
    res = CliRunner().invoke(app, ["tune", "--replay", str(tmp_path / "synthetic.json"), "--strategy", "exhaustive",
                                   "--budget", "200", "--store", str(db), "--no-report"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output[-3000:]
    run_id = next(line.split()[2] for line in res.output.splitlines() if line.startswith("run id: "))
    return ev, db, res, run_id


def test_scripted_tune_keeps_the_re_timed_winner_and_the_report_names_it_first(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """``tune`` printed the runoff's pick as best while the report's #1 and "best (mean)" were the
    screening's fastest, which the runoff rejected, and the run's summary held no winner."""
    ev, db, res, run_id = scripted_tune(tmp_path, monkeypatch)
    pick = ev.picked[0]
    screened = _screening_best(db, run_id)
    assert screened != pick  # the disagreement this is about
    assert f"best: {PICK_MS:g} ms" in res.output

    winner = _summary(db, run_id)["winner"]
    assert winner["config"] == pick and winner["time_ms"] == PICK_MS and winner["retimed"] is True
    assert winner["speedup"]["verdict"] == "faster" and winner["speedup"]["over"] == "the default config"

    md = _report(tmp_path, db, run_id)
    cfg = json.dumps(pick, separators=(", ", ": "))
    assert f"**winner (re-timed)**: {PICK_MS:.4g} ms" in md and md.index("winner (re-timed)") < md.index("## Top")
    assert "| 0.9 ms (re-timed) |" in md  # best (mean): the winner's time, not the screening's 1 ms
    rows = _top_rows(md)
    assert rows[0].startswith("| 1 (winner) |") and cfg in rows[0] and "| 0.9 ms |" in rows[0]
    assert json.dumps(screened, separators=(", ", ": ")) in rows[1] and rows[1].startswith("| 2 |")


def test_a_run_without_a_re_time_keeps_the_screening_ranking(tmp_path: Path) -> None:
    """A replay (no re-time) and a store written before: no winner line, no "re-timed" column, #1 is the
    screening's fastest, as before."""
    synthetic_evaluator(tmp_path)
    db = tmp_path / "r.db"
    out = run_cli(tmp_path, "tune", "--replay", str(tmp_path / "synthetic.json"), "--strategy", "random",
                  "--budget", "20", "--store", str(db), "--no-report", timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    run_id = next(line.split()[2] for line in out.stdout.splitlines() if line.startswith("run id: "))
    assert "winner" not in _summary(db, run_id)
    md = _report(tmp_path, db, run_id)
    assert "winner" not in md and "re-timed" not in md
    rows = _top_rows(md)
    assert rows[0].startswith("| 1 |") and json.dumps(_screening_best(db, run_id), separators=(", ", ": ")) in rows[0]


def test_scripted_shapes_child_keeps_its_re_timed_winner(tmp_path: Path) -> None:
    """Each ``tune --shapes`` child wrote its re-timed winner to the dispatch table, but its run (what its
    report reads) kept only the screening, whose fastest the runoff rejected."""
    from kerntune.run.shapes import tune_shapes
    from kerntune.store import Store

    ev = _scripted(tmp_path)
    db = tmp_path / "s.db"
    store = Store(db)
    try:
        (res,) = tune_shapes(lambda shape: ev, [(1000,)], "exhaustive", 200, store, warm=False)
    finally:
        store.close()
    pick = ev.picked[0]
    assert json.loads(json.dumps(res.best_config)) == pick and res.retimed
    assert _screening_best(db, res.run_id) != pick
    summary = _summary(db, res.run_id)
    assert summary["winner"]["config"] == pick and summary["winner"]["time_ms"] == PICK_MS
    assert summary["shape_result"]["best_config"] == pick  # what a resume reads back: kept as it was
    rows = _top_rows(_report(tmp_path, db, res.run_id))
    assert rows[0].startswith("| 1 (winner) |") and json.dumps(pick, separators=(", ", ": ")) in rows[0]


# One autotuned kernel over a four-config list, its runoff planted: it picks the config the screening
# ranked second (so never the screening's fastest), at a time below every screening time.
PROGRAM = """
import json, sys, time
import torch, triton, triton.language as tl
import kerntune.retune as r

def _cpu_bench(fn, quantiles):
    t0 = time.perf_counter(); fn(); ms = (time.perf_counter() - t0) * 1000
    return [ms, ms, ms]

def planted(ev, history, setting):
    ok = sorted((t for t in history if t.ok), key=lambda t: t.time_ms)
    return {"config": dict(ok[1].config), "ms": ok[0].time_ms / 2, "rounds": {}, "cycles": 5}

r.runoff = planted
r.enable(store=sys.argv[1])

@triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=2) for b in (16, 32, 64, 128)],
                 key=["n"], do_bench=_cpu_bench)
@triton.jit
def double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

x = torch.arange(256, dtype=torch.float32)
y = torch.zeros_like(x)
double[lambda m: (triton.cdiv(256, m["BLOCK"]),)](x, y, 256)
print(json.dumps(r.STATS.searches[0]["config"]))
"""


def test_scripted_exec_keeps_the_runoff_winner_with_its_run(tmp_path: Path) -> None:
    """``kerntune exec`` (``kerntune.retune``) cached the runoff's winner, but its run kept only the
    screening, so the run's report named the screening's fastest, which the runoff had rejected."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    db = tmp_path / "x.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNTUNE_")}
    env.update(TRITON_INTERPRET="1", PYTHONPATH=str(PACKAGE_ROOT))
    proc = subprocess.run([sys.executable, str(prog), str(db)], capture_output=True, text=True, env=env,
                          timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "left to triton" not in proc.stderr, proc.stderr[-3000:]
    pick = json.loads(proc.stdout.strip().splitlines()[-1])
    con = sqlite3.connect(db)
    try:
        (run_id,), = con.execute("SELECT id FROM runs").fetchall()
    finally:
        con.close()
    assert _screening_best(db, run_id) != pick
    winner = _summary(db, run_id)["winner"]
    assert winner["config"] == pick and winner["retimed"] is True and winner["runoff"] is True
    rows = _top_rows(_report(tmp_path, db, run_id))
    assert rows[0].startswith("| 1 (winner) |") and json.dumps(pick, separators=(", ", ": ")) in rows[0]


def test_scripted_api_tune_keeps_the_re_timed_winner_with_its_run(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """``kerntune.tune`` confirms the leaders as ``tune`` does but kept no winner with the run: its report
    named the screening's fastest."""
    import kerntune

    ev = _scripted(tmp_path)
    monkeypatch.setattr("kerntune.api._evaluator", lambda *a, **k: ev)
    db = tmp_path / "a.db"
    res = kerntune.tune(str(tmp_path / "synthetic.json"), strategy="exhaustive", budget=200, store=str(db),
                        report=False)
    pick = ev.picked[0]
    assert _screening_best(db, res.run_id) != pick
    winner = _summary(db, res.run_id)["winner"]
    assert winner["config"] == pick and winner["time_ms"] == PICK_MS and winner["retimed"] is True
