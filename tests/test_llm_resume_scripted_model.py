"""Resuming `llm` runs, with a scripted model behind `cmd:` (a real process, answering a
deterministic function of its prompt: sometimes valid configs, sometimes configs outside the
space that need a repair call, and sometimes a repair that still has no valid config).

* Item 3 of issue 22: every call of a round (repair calls too) is stored and replayed in order,
  so a run SIGKILLed at random moments (by exchanges stored, by trials stored, and blind) a dozen
  times resumes each time and ends with the same trials, and the same stored exchanges, as an
  uninterrupted run.  A second `--resume` of a run that is still going is refused with one line
  (the running one is held inside a model call meanwhile, then answered at full speed).
* Item 10: a rejected answer is stored with its text, provider and model; the configs the fallback
  topped a round up with are credited to the fallback, not to the model's round.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from processes import alive
from scripted import synthetic_evaluator

KERNTUNE = [sys.executable, "-m", "kerntune"]
ROOT = Path(__file__).resolve().parent.parent
OPTIONS = ["-o", "initial=6", "-o", "refine=4", "-o", "max_rounds=40", "-o", "patience=1000",
           "-o", "min_improvement=0", "-o", "warmup=2"]
BUDGET = 100

MODEL = """
import hashlib, json, os, random, sys, time
prompt = sys.stdin.read()
h = int(hashlib.sha256(prompt.encode()).hexdigest(), 16)
rng = random.Random(h)
hold = os.environ.get("SCRIPTED_MODEL_HOLD")
if hold and os.path.exists(hold):  # answer only once the test removes the file (at most a minute)
    open(hold + ".asked", "w").close()
    until = time.monotonic() + 60
    while os.path.exists(hold) and time.monotonic() < until:
        time.sleep(0.02)
time.sleep(float(os.environ.get("SCRIPTED_MODEL_DELAY", "0.03")))
def valid(n):
    return [{"reasoning": "r", "config": {"BM": rng.choice([16, 32, 64, 128]), "W": rng.choice([2, 4, 8]),
             "bs": [rng.choice([16, 32, 64]), rng.choice([16, 32, 64])]}} for _ in range(n)]
bad = [{"reasoning": "too big", "config": {"BM": 512}}, {"reasoning": "made up", "config": {"NOPE": 1}}]
repair = "could not be used" in prompt
ok = (h % 2 == 0) if repair else (h % 3 == 0)
print(json.dumps({"configs": valid(6) if ok else bad}))
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("llm-resume")
    synthetic_evaluator(d)
    (d / "model.py").write_text(MODEL)
    return d


def _env(delay: float = 0.03) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "SCRIPTED_MODEL_DELAY": str(delay)}


def _args(workdir: Path, db: Path, resume: str | None = None) -> list[str]:
    base = ["tune", "--replay", str(workdir / "synthetic.json"), "--strategy", "llm",
            "--llm", f"cmd:{sys.executable} {workdir / 'model.py'}", "--store", str(db), "--no-report"]
    return KERNTUNE + base + (["--resume", resume] if resume else ["--budget", str(BUDGET), *OPTIONS])


def _query(db: Path, sql: str) -> list[tuple]:
    if not db.exists():
        return []
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return con.execute(sql).fetchall()
    except sqlite3.OperationalError:  # schema not written yet
        return []
    finally:
        con.close()


def _trials(db: Path) -> list[tuple]:
    return _query(db, "SELECT seq, config_key, status, time_ms, source FROM trials ORDER BY seq")


def _exchanges(db: Path) -> list[tuple]:
    return _query(db, "SELECT round, calls_json, error FROM llm_exchanges ORDER BY id")


def _run_id(db: Path) -> str | None:
    rows = _query(db, "SELECT id FROM runs")
    return rows[0][0] if rows else None


@pytest.fixture(scope="module")
def reference(workdir: Path) -> tuple[list[tuple], list[tuple]]:
    db = workdir / "reference.db"
    proc = subprocess.run(_args(workdir, db), capture_output=True, text=True, env=_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    trials, exchanges = _trials(db), _exchanges(db)
    assert len(trials) == BUDGET
    calls = [len(json.loads(c)) for _, c, _ in exchanges]
    assert len(exchanges) >= 15 and calls.count(2) >= 5, "the scripted model should need repair calls"
    return trials, exchanges


def test_scripted_model_llm_run_killed_a_dozen_times_resumes_to_the_uninterrupted_run(
        tmp_path: Path, workdir: Path, reference: tuple[list[tuple], list[tuple]]) -> None:
    ref_trials, ref_exchanges = reference
    rng = random.Random(22)
    db = tmp_path / "store.db"
    kills = 0
    for k in range(40):
        if kills >= 12:
            break
        run_id = _run_id(db)
        before_t, before_x = len(_trials(db)), len(_exchanges(db))
        # A slower model than the reference's (the answers do not depend on it): on a fast CPU the
        # whole run took less than a dozen blind kill windows, and the loop ran out of run to kill.
        proc = subprocess.Popen(_args(workdir, db, run_id), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                env=_env(0.15))
        try:
            mode = k % 3
            deadline = time.monotonic() + 60
            if mode == 0:    # just after an exchange is stored, before or while its configs are measured
                target = before_x + rng.randint(1, 2)
                while proc.poll() is None and len(_exchanges(db)) < target and time.monotonic() < deadline:
                    time.sleep(0.003)
                time.sleep(rng.uniform(0, 0.03))
            elif mode == 1:  # a few trials in
                target = before_t + rng.randint(1, 8)
                while proc.poll() is None and len(_trials(db)) < target and time.monotonic() < deadline:
                    time.sleep(0.003)
                time.sleep(rng.uniform(0, 0.01))
            else:            # blind: start-up, the replay of stored calls, or a model call in flight
                time.sleep(rng.uniform(0.2, 1.5))
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                kills += 1
            _, err = proc.communicate()
        assert proc.returncode in (0, -signal.SIGKILL), err.decode()[-3000:]
        rows = _trials(db)
        assert rows == ref_trials[: len(rows)], f"kill {kills}: the resumed run left the uninterrupted run's path"
        assert _exchanges(db) == ref_exchanges[: len(_exchanges(db))], "an exchange was stored twice or differs"
        if proc.returncode == 0:
            break
    assert kills >= 10, f"only {kills} kills landed before the run finished"
    run_id = _run_id(db)
    done = subprocess.run(_args(workdir, db, run_id), capture_output=True, text=True, env=_env(), timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert _trials(db) == ref_trials
    assert _exchanges(db) == ref_exchanges
    assert _query(db, "SELECT status FROM runs") == [("done",)]


def _killed_after_three_exchanges(workdir: Path, db: Path) -> str | None:
    """A run SIGKILLed once the store holds three exchanges; its id."""
    first = subprocess.Popen(_args(workdir, db), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env())
    while first.poll() is None and len(_exchanges(db)) < 3:
        time.sleep(0.01)
    first.send_signal(signal.SIGKILL)
    first.wait()
    return _run_id(db)


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "answer.py"
    path.write_text(textwrap.dedent(body))
    return f"cmd:{sys.executable} {path}"


def test_a_rejected_answer_is_stored_with_its_text_provider_and_model(tmp_path: Path, workdir: Path) -> None:
    spec = _script(tmp_path, """
        import sys
        sys.stdin.read()
        print("I would rather not: no JSON here")
    """)
    db = tmp_path / "s.db"
    proc = subprocess.run(KERNTUNE + ["tune", "--replay", str(workdir / "synthetic.json"), "--strategy", "llm",
                                      "--llm", spec, "--store", str(db), "--no-report", "--budget", "12",
                                      "-o", "max_rounds=1"], capture_output=True, text=True, env=_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = _query(db, "SELECT provider, model, response, error, calls_json FROM llm_exchanges")
    assert len(rows) == 1
    provider, model, response, error, calls = rows[0]
    assert provider == "cmd" and "answer.py" in model
    assert "I would rather not" in response and "no usable JSON" in error
    assert [c["text"].strip() for c in json.loads(calls)] == ["I would rather not: no JSON here"] * 2


def test_configs_the_fallback_topped_up_are_credited_to_the_fallback(tmp_path: Path, workdir: Path) -> None:
    spec = _script(tmp_path, """
        import json, sys
        sys.stdin.read()
        print(json.dumps({"configs": [{"reasoning": "one good", "config": {"BM": 64, "W": 4, "bs": [32, 32]}},
                                      {"reasoning": "bad", "config": {"BM": 512}}]}))
    """)
    db = tmp_path / "s.db"
    proc = subprocess.run(KERNTUNE + ["tune", "--replay", str(workdir / "synthetic.json"), "--strategy", "llm",
                                      "--llm", spec, "--store", str(db), "--no-report", "--budget", "20",
                                      "-o", "max_rounds=1", "-o", "initial=8", "-o", "warmup=1"],
                          capture_output=True, text=True, env=_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    sources = [s for (s,) in _query(db, "SELECT source FROM trials ORDER BY seq")]
    assert sources.count("llm:round1") == 1                     # the one valid config the model proposed
    assert sources.count("llm:fallback-pattern") == 7           # the top-up, credited to its proposer
    accepted = json.loads(_query(db, "SELECT accepted_json FROM llm_exchanges")[0][0])
    assert [a["reasoning"] for a in accepted] == ["one good"]


def test_a_resume_without_llm_asks_the_runs_own_model_and_a_second_resume_while_it_runs_is_refused(
        tmp_path: Path, workdir: Path, reference: tuple[list[tuple], list[tuple]]) -> None:
    """The run keeps its model's spec: `--resume ID` alone asks the same model and ends on the
    uninterrupted run's trials (it once went on without a model, off the stored path, and stored more
    trials than the budget); `--llm` naming another model is refused in one line.  While that resume
    runs (held inside its first model call, so it is surely past its start and still going), a second
    `--resume` of the run is refused with one line and changes nothing."""
    ref_trials = reference[0]
    db = tmp_path / "store.db"
    run_id = _killed_after_three_exchanges(workdir, db)
    assert run_id is not None and len(_trials(db)) < BUDGET
    other = subprocess.run(KERNTUNE + ["tune", "--resume", run_id, "--store", str(db), "--no-report", "--llm",
                                       "replay:elsewhere.jsonl"], capture_output=True, text=True, env=_env(), timeout=120)
    assert other.returncode == 2 and "it was started with --llm" in other.stderr, other.stderr
    hold = tmp_path / "hold"
    hold.touch()
    winner = subprocess.Popen(KERNTUNE + ["tune", "--resume", run_id, "--store", str(db), "--no-report"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**_env(), "SCRIPTED_MODEL_HOLD": str(hold)})
    try:
        asked = tmp_path / "hold.asked"
        deadline = time.monotonic() + 60
        while not asked.exists() and winner.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert asked.exists() and winner.poll() is None, "the resume never asked its model"
        loser = subprocess.run(_args(workdir, db, run_id), capture_output=True, text=True, env=_env(), timeout=60)
        assert winner.poll() is None, "the held resume ended while the second one ran"
    finally:
        hold.unlink(missing_ok=True)
        out, err = winner.communicate(timeout=120)
    assert loser.returncode == 2, loser.stderr[-3000:]
    assert "Traceback" not in loser.stderr
    lines = [line for line in loser.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("kerntune: error:") and "in use by another" in lines[0], lines
    assert winner.returncode == 0, err[-3000:]
    assert "with the model cmd:" in out + err
    assert _trials(db) == ref_trials


@pytest.mark.parametrize("strategy", ["auto", "llm"])
def test_ctrl_c_during_a_model_call_ends_the_run_at_once(tmp_path: Path, workdir: Path, strategy: str) -> None:
    """SIGINT while a slow `cmd:` model is out (it answers in 60 s): the process ends within seconds
    (it waited for the call, up to --llm-timeout), the run is stored as interrupted, and the model's
    process is gone (it runs in a process group of its own, which Ctrl-C does not reach)."""
    db = tmp_path / "store.db"
    marker = tmp_path / "model.pid"
    slow = tmp_path / "slow_model.py"
    slow.write_text(f"import os, sys, time\nsys.stdin.read()\nopen({str(marker)!r}, 'w').write(str(os.getpid()))\n"
                    "time.sleep(60)\n")
    args = KERNTUNE + ["tune", "--replay", str(workdir / "synthetic.json"), "--strategy", strategy, "--budget", "40",
                       "--llm", f"cmd:{sys.executable} {slow}", "--store", str(db), "--no-report"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env())
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), "the model was never asked"
    time.sleep(0.3)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 15
    assert _query(db, "SELECT status FROM runs") == [("interrupted",)]
    model, deadline = int(marker.read_text()), time.monotonic() + 0.5
    while alive(model) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(model), "the model's process outlived kerntune"
