"""The command line as a user meets it, on real files: ``kerntune.cli.main`` (what ``python -m kerntune``
runs) in this process, and real processes where a run is killed and resumed (a process costs about a
second of imports)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from cli_runs import run_main

KERNTUNE = [sys.executable, "-m", "kerntune"]


def run(args: list[str], cwd: Path, store: Path | None = None) -> subprocess.CompletedProcess:
    """``kerntune ARGS`` in this process (``cli_runs.run_main``), in ``cwd``, with the store ``store`` (else
    ``cwd/store.db``) and no model from the environment.  Exceptions propagate."""
    return run_main(cwd, *args, store=store)


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    for needle in needles:
        assert needle in lines[0]


def test_missing_file(tmp_path) -> None:
    assert_one_line_error(run(["space", "info", "nope.json.gz"], tmp_path), "not found", "nope.json.gz")
    assert_one_line_error(run(["compare", "--space", "nope.json", "--budget", "5"], tmp_path), "not found")


def test_non_json_file(tmp_path) -> None:
    (tmp_path / "x.json").write_text("this is not json at all\n")
    assert_one_line_error(run(["compare", "--space", "x.json", "--budget", "5"], tmp_path), "not JSON")


def test_unknown_cache_format(tmp_path) -> None:
    (tmp_path / "x.json").write_text(json.dumps({"hello": [1, 2, 3]}))
    assert_one_line_error(run(["space", "info", "x.json"], tmp_path), "unknown recording format")


def test_constraint_naming_an_unknown_parameter(tmp_path) -> None:
    (tmp_path / "s.yaml").write_text(
        "params:\n  - {name: BM, kind: pow2, low: 16, high: 128}\n  - {name: W, kind: choice, options: [2, 4]}\n"
        "constraints:\n  - BM * WARPS <= 256\n")
    assert_one_line_error(run(["space", "info", "s.yaml"], tmp_path), "unknown parameter 'WARPS'")


def test_budget_of_zero(tmp_path, conv_path) -> None:
    assert_one_line_error(run(["compare", "--space", str(conv_path), "--budget", "0"], tmp_path), "budget")


def test_space_info_prints_the_facts(tmp_path, conv_path) -> None:
    proc = run(["space", "info", str(conv_path)], tmp_path)
    assert proc.returncode == 0, proc.stderr
    for needle in ("block_size_x", "recorded configs: 4,362", "optimum: 0.5536", "median/optimum"):
        assert needle in proc.stdout


def test_compare_prints_a_table_and_writes_json_and_plot(tmp_path, conv_path) -> None:
    proc = run(["compare", "--space", str(conv_path), "--strategies", "random,genetic", "--budget", "30",
                "--repeats", "2", "--json", "out.json", "--plot", "out.png", "--no-report"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "random" in proc.stdout and "genetic" in proc.stdout and "score" in proc.stdout
    data = json.loads((tmp_path / "out.json").read_text())
    for name in ("random", "genetic"):
        s = data["strategies"][name]
        assert {"score", "best_over_opt", "evals_to_2pct", "evals_to_5pct"} <= set(s)
        assert s["best_over_opt"] >= 1.0
    png = (tmp_path / "out.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def _trial_rows(db: Path) -> list[tuple[str, str, int]]:
    con = sqlite3.connect(db)
    try:
        if not con.execute("SELECT name FROM sqlite_master WHERE name='trials'").fetchone():
            return []  # the store is still being created
        return con.execute("SELECT r.label, t.config_key, t.seq FROM trials t JOIN runs r ON r.id = t.run_id"
                           " WHERE r.kind = 'compare-child'").fetchall()
    finally:
        con.close()


def test_sigkilled_compare_resumes_without_losing_or_repeating_a_trial(tmp_path, conv_path) -> None:
    args = ["compare", "--space", str(conv_path), "--strategies", "random,bayes,genetic", "--budget", "60",
            "--repeats", "4", "--seed", "11", "--no-report"]
    ref_dir = tmp_path / "ref"
    ref_dir.mkdir()
    assert run(args, ref_dir).returncode == 0
    reference = sorted((label, key) for label, key, _ in _trial_rows(ref_dir / "store.db"))
    assert len(reference) == 3 * 4 * 60

    db = tmp_path / "store.db"
    env = dict(os.environ, KERNTUNE_STORE=str(db))
    kills = 0
    run_id = ""
    for threshold in (150, 400):
        if kills == 0:
            proc = subprocess.Popen(KERNTUNE + args, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
        else:
            proc = subprocess.Popen(KERNTUNE + ["compare", "--resume", run_id, "--no-report"], cwd=tmp_path, env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            if db.exists() and len(_trial_rows(db)) >= threshold:
                break
            time.sleep(0.01)
        assert proc.poll() is None, "the run finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
        run_id = sqlite3.connect(db).execute("SELECT id FROM runs WHERE kind='compare'").fetchone()[0]
        assert len(_trial_rows(db)) < len(reference)

    done = subprocess.run(KERNTUNE + ["compare", "--resume", run_id, "--no-report"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)  # a process that ran no reference
    assert done.returncode == 0, done.stderr
    rows = _trial_rows(db)
    pairs = [(label, key) for label, key, _ in rows]
    assert len(pairs) == len(set(pairs)), "a trial was measured twice"
    assert sorted(pairs) == reference, "a trial was lost or the resumed search diverged"
    for label in {label for label, _, _ in rows}:
        seqs = sorted(seq for lab, _, seq in rows if lab == label)
        assert seqs == list(range(60))


def test_compare_passes_options_to_one_strategy(tmp_path, conv_path) -> None:
    proc = run(["compare", "--space", str(conv_path), "--strategies", "random,bayes", "--budget", "12", "--repeats",
                "1", "-o", "bayes.surrogate=tpe", "-o", "bayes.startup=4", "--no-report"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    con = sqlite3.connect(tmp_path / "store.db")
    rows = dict(con.execute("SELECT strategy, options_json FROM runs WHERE parent_id IS NOT NULL").fetchall())
    assert json.loads(rows["bayes"])["surrogate"] == "tpe" and json.loads(rows["bayes"])["startup"] == 4
    assert "surrogate" not in json.loads(rows["random"])
    sources = {s for (s,) in con.execute("SELECT DISTINCT source FROM trials")}
    assert "bayes:startup" in sources  # TPE's startup, not the GP's ("gp:startup")
    assert_one_line_error(run(["compare", "--space", str(conv_path), "--strategies", "random", "--budget", "5",
                               "-o", "bayes.surrogate=tpe"], tmp_path), "not among the strategies compared")


def test_a_config_line_is_never_wrapped_nor_read_as_markup(monkeypatch) -> None:
    """`config: {...}` is pasted into the next command: at any console width it stays one line of JSON,
    and a list value is not swallowed as a rich style tag."""
    import io
    import json

    from rich.console import Console

    import kerntune.cli.common as common

    buf = io.StringIO()
    monkeypatch.setattr(common, "console", Console(file=buf, width=40))
    cfg = {"BLOCK_M": 128, "BLOCK_N": 256, "GROUP_M": 4, "EPI_SUBTILE": 2, "FLATTEN": True, "order": [1, 0],
           "TMA_STORE": True, "num_warps": 8, "num_stages": 4, "style": "[bold]x[/bold]"}
    common.print_unwrapped(f"config: {json.dumps(cfg)}")
    lines = buf.getvalue().splitlines()
    assert len(lines) == 1 and json.loads(lines[0].removeprefix("config: ")) == cfg


def test_first_contact_review_items(tmp_path, conv_path) -> None:
    """What a newcomer's review found (2026-11-29): --seconds alone was capped at 100 evaluations,
    tune never said which strategy ran, a space file given to --replay read as broken JSON, -h was
    no help option, a bayes option error named gp, and compare took an unused --llm silently."""
    proc = run(["tune", "--replay", str(conv_path), "--seconds", "300", "--no-report"], tmp_path)  # 116 evaluations
    assert proc.returncode == 0, proc.stderr
    assert "strategy: auto (the default) without a model; budget: 300 s" in proc.stdout
    best = next(line for line in proc.stdout.splitlines() if line.startswith("best:"))
    assert "(time budget)" in best and int(best.split(" after ")[1].split()[0]) > 100, best
    proc = run(["tune", "--replay", str(conv_path), "--budget", "7", "--strategy", "gp", "--no-report"], tmp_path)
    assert "strategy: gp; budget: 7 evaluations" in proc.stdout and "after 7 evaluations" in proc.stdout

    (tmp_path / "space.yaml").write_text("name: s\nparams:\n  BLOCK: {kind: pow2, low: 16, high: 256}\n")
    assert_one_line_error(run(["tune", "--replay", "space.yaml"], tmp_path), "looks like a space file", "space info")
    (tmp_path / "space.json").write_text(json.dumps({"name": "s", "params": {"BLOCK": {"kind": "pow2", "low": 16, "high": 256}}}))
    assert_one_line_error(run(["tune", "--replay", "space.json"], tmp_path), "not a recording", "space file")

    assert "Usage: kerntune tune" in run(["tune", "-h"], tmp_path).stdout
    assert_one_line_error(run(["tune", "--replay", str(conv_path), "--strategy", "bayes", "-o", "kapa=2"], tmp_path),
                          "bayes (surrogate gp): unknown option 'kapa'")
    proc = run(["compare", "--space", str(conv_path), "--strategies", "random", "--budget", "3", "--repeats", "1",
                "--llm", "local:", "--no-report"], tmp_path)
    assert proc.returncode == 0 and "--llm local: is not used" in proc.stderr, proc.stderr
    (tmp_path / "shapes.txt").write_text("64\n")
    assert_one_line_error(run(["tune", "k.py", "--shapes", "shapes.txt", "--seconds", "5"], tmp_path),
                          "--shapes takes --budget")
    assert_one_line_error(run(["compare", "--space", str(conv_path), "--strategies", "lmm", "--budget", "3",
                               "--llm", "local:"], tmp_path), "unknown strategy 'lmm'")
    # A report asked for at a path that cannot be written is an error (exit 2), as --json is; the run is stored.
    # (/proc passes the up-front check as root and fails at the write; as another user it fails the check.)
    proc = run(["tune", "--replay", str(conv_path), "--budget", "3", "--report", "/proc/kerntune-test.html"], tmp_path)
    assert_one_line_error(proc, "/proc/kerntune-test.html")
    proc = run(["tune", "--replay", str(conv_path), "--budget", "3", "--report", "out.html"], tmp_path)
    assert proc.returncode == 0 and (tmp_path / "out.html").exists(), proc.stderr


def test_a_resumed_compare_counts_the_wall_time_of_the_repeats_it_reads_back(tmp_path, conv_path) -> None:
    """``compare --resume`` of a finished run reads every repeat from the store; its wall figure is the
    wall time those repeats recorded when they ran, not the milliseconds of reading them (it once was)."""
    from kerntune.compare.harness import run_compare
    from kerntune.store import Store

    with Store(tmp_path / "s.db") as st:
        first = run_compare(str(conv_path), ["auto", "random"], 40, 2, 0, st)
        children = [st.find_child(first.run_id, f"auto#{r}") for r in range(2)]
        again = run_compare(None, [], 0, 0, 0, st, resume=first.run_id)
    recorded = sum(c.summary["wall_s"] for c in children)
    assert recorded > 0
    assert again.strategies["auto"].wall_seconds >= recorded
    assert again.strategies["auto"].wall_seconds > 0.5 * first.strategies["auto"].wall_seconds
    assert again.strategies["auto"].score == first.strategies["auto"].score


def test_a_comparison_that_stops_on_an_error_is_stored_as_failed(tmp_path, conv_path) -> None:
    """A model that fails (a real ``cmd:`` model: ``false``) under ``fallback=error`` ends the comparison
    with one line; the store then says the comparison and its child failed, and why (it said 'running')."""
    proc = run(["compare", "--space", str(conv_path), "--strategies", "random,llm", "--budget", "15", "--repeats", "1",
                "--llm", "cmd:false", "-o", "llm.fallback=error", "--no-report"], tmp_path)
    assert proc.returncode == 2 and "the model failed in round 1" in proc.stderr
    con = sqlite3.connect(tmp_path / "store.db")
    rows = dict(con.execute("SELECT COALESCE(label, kind), status FROM runs").fetchall())
    summary = json.loads(con.execute("SELECT summary_json FROM runs WHERE kind='compare'").fetchone()[0])
    con.close()
    assert rows == {"compare": "failed", "random#0": "done", "llm#0": "failed"}, rows
    assert "the model failed in round 1" in summary["error"]


def test_a_repeat_where_no_config_ran_found_nothing(tmp_path) -> None:
    """A Kernel Tuner cache of 30 configs where one runs: random search's 5 draws miss it in most repeats.
    The score counts those runs at the worst successful time (the methodology's rule), but best/optimum,
    'found opt' and 'evals to' once did too, and said 100% found at evaluation 1."""
    from kerntune.compare.harness import run_compare
    from kerntune.store import Store

    cache = {"device_name": "test", "kernel_name": "one_runs", "tune_params_keys": ["x"],
             "tune_params": {"x": list(range(30))}, "objective": "time",
             "cache": {str(x): {"x": x, "time": 2.0 if x == 29 else "CompilationFailedConfig"} for x in range(30)}}
    path = tmp_path / "one_runs.json"
    path.write_text(json.dumps(cache))
    with Store(tmp_path / "s.db") as st:
        res = run_compare(str(path), ["random"], 5, 20, 0, st)
    s = res.strategies["random"]
    assert 0 < s.found_optimum < 0.6   # about 5/30 of the repeats draw it
    # best/optimum is over the repeats that found a config, with how many did (as the report says it)
    assert s.found_config == round(s.found_optimum * 20) and s.best_over_opt == 1.0 and s.best_over_opt_spread == (1.0, 1.0)
    assert s.evals_to_2pct is None     # the median repeat never found it
    assert s.to_dict()["best_over_opt"] == 1.0 and s.to_dict()["repeats_found_config"] == s.found_config


def test_each_repeat_of_a_comparison_replays_the_transcript_from_its_start(tmp_path) -> None:
    """`--llm replay:FILE` is one run's answers: every repeat gets them (the repeats once shared one
    position in the transcript, so from the second on the model 'failed': 'has no answer #3')."""
    root = Path(__file__).resolve().parent.parent
    proc = run(["compare", "--space", str(root / "examples/spaces/matmul_4096_h100.json.gz"), "--strategies", "llm",
                "--budget", "30", "--repeats", "2", "--llm",
                f"replay:{root / 'benchmarks/llm/transcripts/matmul_4096_h100.llm.jsonl'}", "--json", "c.json",
                "--no-report"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    con = sqlite3.connect(tmp_path / "store.db")
    answered = con.execute("SELECT r.label, count(*) FROM llm_exchanges x JOIN runs r ON r.id = x.run_id"
                           " WHERE x.error IS NULL GROUP BY r.label ORDER BY r.label").fetchall()
    con.close()
    assert answered == [("llm#0", 2), ("llm#1", 2)], answered   # the transcript's two answers, each repeat


def test_a_comparison_of_a_relative_path_resumes_from_another_directory(tmp_path, conv_path) -> None:
    """The recording's path is stored absolute: `compare --resume` from elsewhere once said 'file not found'."""
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    (here / "rec.json.gz").write_bytes(conv_path.read_bytes())
    store = tmp_path / "store.db"
    first = run(["compare", "--space", "rec.json.gz", "--strategies", "random", "--budget", "10", "--repeats", "1",
                 "--no-report"], here, store)
    assert first.returncode == 0, first.stderr
    run_id = sqlite3.connect(store).execute("SELECT id FROM runs WHERE kind='compare'").fetchone()[0]
    again = run(["compare", "--resume", run_id, "--no-report"], elsewhere, store)
    assert again.returncode == 0, again.stderr
