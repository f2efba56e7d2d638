"""What a resumed run must share with the run it continues: its model (or having none), the device
and kernel source a replay showed, and the id as every other command takes it (``last``, a prefix).

Real processes on a small generated Kernel Tuner cache and a scripted ``cmd:`` model; a run "killed"
after some trials is the stored run with its later trials removed and its status back to running,
as a SIGKILL leaves it (every trial is committed the moment it ends).
"""

from __future__ import annotations

import json
import sqlite3
import stat
import sys
from pathlib import Path

from cli_runs import one_line, run_cli

VALUES = {"bx": [16, 32, 64, 128], "by": [1, 2, 4, 8], "u": [0, 1]}


def _recording(tmp: Path) -> Path:
    """64 configs with distinct times, a few that fail to compile: a space auto and random can walk."""
    cache = {}
    for bx in VALUES["bx"]:
        for by in VALUES["by"]:
            for u in VALUES["u"]:
                fails = (bx == 16 and by == 1) or (bx == 128 and by == 8 and u == 1)
                t = 1.0 + abs(bx - 64) / 64 + abs(by - 4) / 4 + 0.3 * u
                cache[f"{bx},{by},{u}"] = {"bx": bx, "by": by, "u": u, "compile_time": 100.0, "benchmark_time": 10.0,
                                           "time": "CompilationFailedConfig" if fails else round(t, 4)}
    doc = {"device_name": "TestGPU", "kernel_name": "k", "problem_size": [1024], "tune_params_keys": list(VALUES),
           "tune_params": VALUES, "objective": "time", "cache": cache}
    path = tmp / "rec.json"
    path.write_text(json.dumps(doc))
    return path


def _model(tmp: Path) -> str:
    """A ``cmd:`` model that answers every prompt with the same six configs of the space."""
    script = tmp / "model.py"
    configs = [{"bx": 64, "by": 4, "u": 0}, {"bx": 32, "by": 4, "u": 0}, {"bx": 64, "by": 2, "u": 0},
               {"bx": 128, "by": 4, "u": 0}, {"bx": 64, "by": 8, "u": 0}, {"bx": 32, "by": 2, "u": 1}]
    answer = json.dumps({"configs": [{"config": c, "reasoning": "near the middle"} for c in configs]})
    script.write_text(f"#!{sys.executable}\nimport sys\nsys.stdin.read()\nprint({answer!r})\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return f"cmd:{script}"


def _cut(db: Path, run_id: str, keep: int) -> None:
    """The run as a kill after its first ``keep`` trials leaves it (a comparison: its later repeats gone)."""
    con = sqlite3.connect(db, isolation_level=None)
    kind = con.execute("SELECT kind FROM runs WHERE id=?", (run_id,)).fetchone()[0]
    if kind == "compare":
        children = [r[0] for r in con.execute("SELECT id FROM runs WHERE parent_id=? ORDER BY created", (run_id,))]
        for child in children[keep:]:
            con.execute("DELETE FROM llm_exchanges WHERE run_id=?", (child,))
            con.execute("DELETE FROM trials WHERE run_id=?", (child,))
            con.execute("DELETE FROM runs WHERE id=?", (child,))
    else:
        con.execute("DELETE FROM trials WHERE run_id=? AND seq>=?", (run_id, keep))
    con.execute("UPDATE runs SET status='running', finished=NULL, summary_json=NULL WHERE id=?", (run_id,))
    con.close()


def _run_id(proc) -> str:  # noqa: ANN001 - CompletedProcess
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("run id: "))
    return line.split()[2]


def _counts(db: Path) -> tuple[int, int, set[str]]:
    """(trials, model exchanges, trial sources) over the whole store."""
    con = sqlite3.connect(db)
    trials = con.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
    exchanges = con.execute("SELECT COUNT(*) FROM llm_exchanges").fetchone()[0]
    sources = {s for (s,) in con.execute("SELECT DISTINCT source FROM trials")}
    con.close()
    return trials, exchanges, sources


def test_a_tune_run_started_without_a_model_refuses_one_from_the_environment_on_resume(tmp_path: Path) -> None:
    """$KERNTUNE_LLM set in the shell that resumes an ``auto`` run begun without a model once turned its
    remaining trials model-guided while the run said "no model"; now it is refused, the store untouched,
    and the same resume without it ends the run as it began."""
    rec, db, model = _recording(tmp_path), tmp_path / "store.db", _model(tmp_path)
    run_id = _run_id(run_cli(tmp_path, "tune", "--replay", str(rec), "--strategy", "auto", "--budget", "24",
                             "--no-report"))
    _cut(db, run_id, 10)
    refused = run_cli(tmp_path, "tune", "--resume", run_id, "--no-report", env={"KERNTUNE_LLM": model})
    assert _counts(db)[:2] == (10, 0), "the resume asked the model"
    one_line(refused, f"cannot resume {run_id}", "without a model", "KERNTUNE_LLM", "start a new run")
    options = json.loads(sqlite3.connect(db).execute("SELECT options_json FROM runs").fetchone()[0])
    assert "llm" in options and options["llm"] is None  # on record, not merely left out
    _run_id(run_cli(tmp_path, "tune", "--resume", run_id, "--no-report"))
    trials, exchanges, sources = _counts(db)
    assert trials == 24 and exchanges == 0 and not any("llm" in s or "model" in s for s in sources), sources


def test_a_comparison_started_without_a_model_refuses_one_on_resume_unless_no_strategy_asks_it(
        tmp_path: Path) -> None:
    rec, db, model = _recording(tmp_path), tmp_path / "store.db", _model(tmp_path)
    args = ["compare", "--space", str(rec), "--budget", "12", "--repeats", "3", "--no-report"]
    auto = _run_id(run_cli(tmp_path, *args, "--strategies", "auto"))
    _cut(db, auto, 1)
    refused = run_cli(tmp_path, "compare", "--resume", auto, "--no-report", env={"KERNTUNE_LLM": model})
    assert _counts(db)[1] == 0, "the resumed repeats asked the model"
    one_line(refused, f"cannot resume {auto}", "without a model", "KERNTUNE_LLM")
    _run_id(run_cli(tmp_path, "compare", "--resume", auto, "--no-report"))
    assert _counts(db)[:2] == (36, 0)
    # random asks no model: the one from the environment is unused, and the resume goes on
    rnd = _run_id(run_cli(tmp_path, *args, "--strategies", "random"))
    _cut(db, rnd, 1)
    _run_id(run_cli(tmp_path, "compare", "--resume", rnd, "--no-report", env={"KERNTUNE_LLM": model}))
    assert _counts(db)[:2] == (72, 0)


def test_a_run_started_with_a_model_resumes_with_it_when_none_is_given(tmp_path: Path) -> None:
    """The reverse: a run that asked a model, resumed without --llm, asks the stored model again."""
    rec, db, model = _recording(tmp_path), tmp_path / "store.db", _model(tmp_path)
    run_id = _run_id(run_cli(tmp_path, "tune", "--replay", str(rec), "--strategy", "llm", "--budget", "20",
                             "--llm", model, "--no-report"))
    full = _counts(db)
    assert full[1] > 0
    _cut(db, run_id, 3)
    sqlite3.connect(db, isolation_level=None).execute("DELETE FROM llm_exchanges")  # killed before it stored any
    proc = run_cli(tmp_path, "tune", "--resume", run_id, "--no-report")
    assert _run_id(proc) == run_id and "with the model" in proc.stdout + proc.stderr
    assert _counts(db)[0] == full[0] and _counts(db)[1] > 0


def test_a_run_stored_before_the_key_was_kept_takes_a_model_as_before(tmp_path: Path) -> None:
    """A store of an older kerntune has no "llm" key for a run without a model: it cannot tell "none" from
    "one whose spec was not kept", and keeps today's behaviour (the given model is used)."""
    rec, db, model = _recording(tmp_path), tmp_path / "store.db", _model(tmp_path)
    run_id = _run_id(run_cli(tmp_path, "tune", "--replay", str(rec), "--strategy", "auto", "--budget", "24",
                             "--no-report"))
    _cut(db, run_id, 10)
    con = sqlite3.connect(db, isolation_level=None)
    options = json.loads(con.execute("SELECT options_json FROM runs").fetchone()[0])
    options.pop("llm", None)
    con.execute("UPDATE runs SET options_json=?", (json.dumps(options),))
    con.close()
    _run_id(run_cli(tmp_path, "tune", "--resume", run_id, "--no-report", env={"KERNTUNE_LLM": model}))
    assert _counts(db)[1] > 0


def test_a_replay_resumed_with_another_device_or_kernel_source_is_refused(tmp_path: Path) -> None:
    """--device and --source are shown to a model as a real run's would be: another one takes the search
    off its stored path, so a resume with another (or without the run's own) is refused."""
    rec, db = _recording(tmp_path), tmp_path / "store.db"
    (tmp_path / "a.cu").write_text("__global__ void k(float *x) { x[0] = 1; }\n")
    (tmp_path / "b.cu").write_text("__global__ void k(float *x) { x[0] = 2; x[1] = 3; }\n")
    run_id = _run_id(run_cli(tmp_path, "tune", "--replay", str(rec), "--strategy", "random", "--budget", "20",
                             "--device", "GPU A", "--source", "a.cu", "--no-report"))
    _cut(db, run_id, 5)
    base = ["tune", "--resume", run_id, "--replay", str(rec), "--no-report"]
    one_line(run_cli(tmp_path, *base, "--device", "GPU B", "--source", "a.cu"), f"cannot resume {run_id}",
             "device", "GPU A", "GPU B")
    one_line(run_cli(tmp_path, *base, "--source", "a.cu"), f"cannot resume {run_id}", "device")
    one_line(run_cli(tmp_path, *base, "--device", "GPU A", "--source", "b.cu"), f"cannot resume {run_id}",
             "kernel source")
    one_line(run_cli(tmp_path, *base, "--device", "GPU A"), f"cannot resume {run_id}", "kernel source")
    (tmp_path / "c.cu").write_text((tmp_path / "a.cu").read_text().replace("= 1;", "= 7;"))  # same length
    one_line(run_cli(tmp_path, *base, "--device", "GPU A", "--source", "c.cu"), f"cannot resume {run_id}",
             "kernel source", "same length")
    assert _counts(db)[0] == 5
    _run_id(run_cli(tmp_path, *base, "--device", "GPU A", "--source", "a.cu"))
    assert _counts(db)[0] == 20


def test_a_comparison_resumed_with_another_device_is_refused(tmp_path: Path) -> None:
    rec, db = _recording(tmp_path), tmp_path / "store.db"
    run_id = _run_id(run_cli(tmp_path, "compare", "--space", str(rec), "--strategies", "random", "--budget", "10",
                             "--repeats", "2", "--device", "GPU A", "--no-report"))
    _cut(db, run_id, 1)
    one_line(run_cli(tmp_path, "compare", "--resume", run_id, "--device", "GPU B", "--no-report"),
             f"cannot resume {run_id}", "--device", "GPU B")
    _run_id(run_cli(tmp_path, "compare", "--resume", run_id, "--device", "GPU A", "--no-report"))
    assert _counts(db)[0] == 20


def test_tune_and_compare_resume_take_last_and_a_unique_prefix(tmp_path: Path) -> None:
    """Every command that reads a run takes ``last`` or a unique prefix of its id; ``--resume`` did not."""
    rec, db = _recording(tmp_path), tmp_path / "store.db"
    tune_id = _run_id(run_cli(tmp_path, "tune", "--replay", str(rec), "--strategy", "random", "--budget", "20",
                              "--no-report"))
    _cut(db, tune_id, 5)
    assert _run_id(run_cli(tmp_path, "tune", "--resume", "last", "--no-report")) == tune_id
    _cut(db, tune_id, 5)
    assert _run_id(run_cli(tmp_path, "tune", "--resume", tune_id[:6], "--no-report")) == tune_id
    assert _counts(db)[0] == 20
    cmp_id = _run_id(run_cli(tmp_path, "compare", "--space", str(rec), "--strategies", "random", "--budget", "10",
                             "--repeats", "2", "--no-report"))
    _cut(db, cmp_id, 1)
    assert _run_id(run_cli(tmp_path, "compare", "--resume", cmp_id[:7], "--no-report")) == cmp_id
    _cut(db, cmp_id, 1)
    assert _run_id(run_cli(tmp_path, "compare", "--resume", "last", "--no-report")) == cmp_id
    assert _counts(db)[0] == 40
