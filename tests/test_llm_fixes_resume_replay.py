"""Resuming and replaying model runs: a resumed ``replay:`` run, a resume given a new transcript, a new
run given another run's transcript, and the price of a model whose name begins with a priced one's.

Runs are real: the committed H100 matmul recording and transcript, ``kerntune.tune`` in a child process
that SIGKILLs itself at a chosen point, ``cmd:`` models that are real programs, real SQLite stores."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import kerntune
from cli_runs import PACKAGE_ROOT, no_llm_env
from kerntune.llm import LLMClient
from kerntune.llm.providers.local import ReplayProvider
from kerntune.llm.types import Message
from kerntune.run.llm_resume import resumed_client
from scripted import ScriptedProvider, answer

ROOT = Path(__file__).resolve().parent.parent
SPACE = ROOT / "examples" / "spaces" / "matmul_256x8192x8192_h100.json.gz"
TRANSCRIPT = ROOT / "benchmarks" / "llm" / "transcripts" / "matmul_256x8192x8192_h100.llm.jsonl"
LLM_OPTIONS = {"initial": 25, "refine": 15, "max_rounds": 5}

#: ``kerntune.tune(**ARGS)`` that SIGKILLs itself at evaluation ``kill_at``.
CHILD = """
import json, os, signal, sys
import kerntune
args = json.loads(sys.argv[1])
kill_at = args.pop("kill_at", None)
kill_when_ahead = args.pop("kill_when_ahead", False)

def _ahead():  # whether the transcript holds a model call the store lacks (a kill now would lose it)
    import sqlite3
    lines = [l for l in open(args["llm_transcript"]).read().splitlines() if l.strip()] \
        if os.path.exists(args["llm_transcript"]) else []
    con = sqlite3.connect(args["store"])
    stored = sum(len(json.loads(c)) for (c,) in con.execute("SELECT calls_json FROM llm_exchanges"))
    con.close()
    return len(lines) > stored

def progress(ctx):
    if (kill_at is not None and ctx.evaluations >= kill_at) or (kill_when_ahead and _ahead()):
        print("killed at", ctx.evaluations, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

kerntune.tune(**args, report=False, progress=progress, on_start=lambda rid, p: print("run", rid, flush=True))
"""

#: A ``cmd:`` model: 15 random valid matmul configs, after ``argv[1]`` seconds.
MODEL = """
import json, random, sys, time
sys.stdin.read()
time.sleep(float(sys.argv[1]))
r = random.Random()
print(json.dumps({"configs": [{"reasoning": "r", "config": {"BLOCK_M": r.choice([64, 128]),
    "BLOCK_N": r.choice([64, 128, 256]), "BLOCK_K": r.choice([32, 64]), "GROUP_M": 8,
    "num_warps": r.choice([4, 8]), "num_stages": r.choice([3, 4, 5])}} for _ in range(15)]}))
"""


def _child(tmp: Path, **args: Any) -> tuple[int, str | None]:
    """Run ``CHILD``: (exit code, run id)."""
    script = tmp / "child.py"
    script.write_text(CHILD)
    env = dict(no_llm_env(), PYTHONPATH=str(PACKAGE_ROOT))
    proc = subprocess.run([sys.executable, str(script), json.dumps(args)], cwd=tmp, capture_output=True, text=True,
                          env=env, timeout=300)
    rid = next((line.split()[1] for line in proc.stdout.splitlines() if line.startswith("run ")), None)
    assert rid is not None, proc.stderr[-3000:]
    return proc.returncode, rid


def _model(tmp: Path, delay: float) -> str:
    path = tmp / "model.py"
    path.write_text(MODEL)
    return f"cmd:{sys.executable} {path} {delay}"


def _query(db: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _trials(db: Path, run_id: str) -> list[tuple]:
    return _query(db, f"SELECT seq, config_key, status, time_ms FROM trials WHERE run_id='{run_id}' ORDER BY seq")


def _responses(db: Path, run_id: str) -> list[str]:
    """The answer of every stored call of the run, repair calls included, in order."""
    rows = _query(db, f"SELECT calls_json FROM llm_exchanges WHERE run_id='{run_id}' ORDER BY id")
    return [call.get("text") or call.get("error") for (c,) in rows for call in json.loads(c)]


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _replayed(tmp: Path, transcript: Path, name: str, strategy: str = "llm", budget: int = 100,
              options: dict[str, Any] | None = None) -> list[tuple]:
    """The trials of a run that replays ``transcript``."""
    db = tmp / f"{name}.db"
    res = kerntune.tune(SPACE, strategy=strategy, llm=f"replay:{transcript}", options=options or LLM_OPTIONS,
                        budget=budget, store=db, report=False)
    return _trials(db, res.run_id)


def test_a_resumed_replay_run_goes_on_with_the_transcripts_next_answers(tmp_path: Path) -> None:
    """Killed at evaluation 30 (two rounds stored) and resumed, a ``replay:`` run is the uninterrupted one.
    Before, the resumed replay began again at answer #1: round 3 got answers #1 and #2, 0 valid configs."""
    db = tmp_path / "killed.db"
    code, rid = _child(tmp_path, space=str(SPACE), strategy="llm", llm=f"replay:{TRANSCRIPT}", options=LLM_OPTIONS,
                       budget=100, store=str(db), kill_at=30)
    assert code == -9
    assert len(_query(db, "SELECT id FROM llm_exchanges")) == 2
    kerntune.tune(SPACE, resume=rid, store=db, report=False)
    recorded = [e["response"] for e in _lines(TRANSCRIPT)]
    assert _responses(db, rid) == recorded[: len(_responses(db, rid))] and len(_responses(db, rid)) >= 3
    assert _trials(db, rid) == _replayed(tmp_path, TRANSCRIPT, "whole")


def test_a_resumed_replay_recording_into_its_own_transcript_adds_no_line(tmp_path: Path) -> None:
    """``replay:T`` with ``llm_transcript=T``, resumed: T is unchanged (its answers are there already).
    Before, the live replay's answers, behind the resumed run's provider, were appended to T again."""
    tx = tmp_path / "t.jsonl"
    shutil.copy(TRANSCRIPT, tx)
    before = tx.read_text()
    db = tmp_path / "own.db"
    code, rid = _child(tmp_path, space=str(SPACE), strategy="llm", llm=f"replay:{tx}", options=LLM_OPTIONS,
                       budget=100, store=str(db), llm_transcript=str(tx), kill_at=30)
    assert code == -9
    kerntune.tune(SPACE, resume=rid, store=db, report=False)
    assert tx.read_text() == before


def test_scripted_resume_of_a_replay_chain_goes_on_to_its_spec_after_the_transcript(tmp_path: Path) -> None:
    """``replay:T|SPEC`` resumed with 3 stored calls where T holds 2: the 4th call goes to SPEC, once, and
    the replay hands out none of T's answers again.  Before, the replay began at T's answer #1."""
    tx = tmp_path / "t.jsonl"
    tx.write_text("".join(json.dumps({"response": answer({"x": i}), "model": "m"}) + "\n" for i in (1, 2)))
    spec = ScriptedProvider(lambda n, m: answer({"x": 10 + n}))
    client = LLMClient(ReplayProvider(str(tx), then=spec))
    stored = [{"response": answer({"x": i}), "model": "m", "latency_s": 1.0, "calls": None} for i in (1, 2, 3)]
    resumed = resumed_client(client, stored)
    asked = [Message("user", "configs?")]
    texts = [resumed.complete(asked).text for _ in range(5)]
    assert texts == [answer({"x": i}) for i in (1, 2, 3, 11, 12)]
    assert len(spec.prompts) == 2


def test_a_resume_given_a_new_transcript_writes_the_whole_run_into_it(tmp_path: Path) -> None:
    """A ``cmd:`` run without a transcript, killed at evaluation 30 and resumed with a new
    ``llm_transcript``: the file holds every call of the run and alone replays it.  Before, it held only
    the calls made after the resume (2 of 5), and replaying it failed."""
    db = tmp_path / "p.db"
    code, rid = _child(tmp_path, space=str(SPACE), strategy="llm", llm=_model(tmp_path, 0), options=LLM_OPTIONS,
                       budget=100, store=str(db), kill_at=30)
    assert code == -9
    tx = tmp_path / "p.jsonl"
    kerntune.tune(SPACE, resume=rid, store=db, llm_transcript=tx, report=False)
    assert [e["response"] for e in _lines(tx)] == _responses(db, rid)
    assert _replayed(tmp_path, tx, "again") == _trials(db, rid)


def test_an_auto_runs_model_answer_is_stored_before_the_surrogate_measures_the_models_time(tmp_path: Path) -> None:
    """An ``auto`` run on a recording's clock never has a model call in its transcript that its store lacks
    when a trial ends, so a kill at any trial resumes without asking the model again.  Before, the
    surrogate measured the model's time before the answer's exchange was stored: a kill there asked
    round 1 again on resume, and the transcript held two different round-1 answers."""
    db, tx = tmp_path / "x.db", tmp_path / "x.jsonl"
    code, rid = _child(tmp_path, space=str(SPACE), strategy="auto", llm=_model(tmp_path, 0.5), budget=60,
                       store=str(db), llm_transcript=str(tx), kill_when_ahead=True)
    if code == -9:  # the old code: resumed, the run asks again and its transcript no longer replays it
        kerntune.tune(SPACE, resume=rid, store=db, report=False)
    assert [e["response"] for e in _lines(tx)] == _responses(db, rid)
    assert code == 0


@pytest.mark.parametrize("model, price", [
    ("gpt-4.1-nano", (0.1, 0.4)), ("gpt-4.1-nano-2025-04-14", (0.1, 0.4)), ("gpt-4.1-2025-04-14", (2.0, 8.0)),
    ("gpt-4o-mini-2024-07-18", (0.15, 0.6)), ("claude-sonnet-4-5-20250929", (3.0, 15.0)),
    ("gpt-4.1-turbo", None), ("gpt-4o-realtime-preview", None), ("claude-opus-4-1-fast", None)])
def test_scripted_model_is_priced_as_itself_or_a_dated_release_of_a_priced_model(
        model: str, price: tuple[float, float] | None) -> None:
    """The cost of 100 input and 50 output tokens; unknown (0) for a model that only begins with a priced
    one's name.  Before, the longest priced prefix won: gpt-4.1-nano cost gpt-4.1's price (20x)."""
    provider = ScriptedProvider(lambda n, m: "{}")
    provider.model = model
    client = LLMClient(provider)
    client.complete([Message("user", "hi")])
    expected = (100 * price[0] + 50 * price[1]) / 1e6 if price else 0.0
    assert client.cost == pytest.approx(expected, abs=1e-12)
