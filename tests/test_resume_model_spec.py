"""What a run keeps of its model, and what a new run may write into, with real processes and stores.

* A new run given ``--llm-transcript FILE`` where FILE held another run's calls appended to them, so
  that ``--llm replay:FILE`` replayed the two runs as one: a new run now refuses such a file (``tune``,
  ``tune --shapes``, ``transform``, ``kerntune.tune``) before anything is measured; a resume appends
  to its own run's transcript as before.
* ``--llm-base-url`` was not kept with a run: ``--resume`` without it asked the provider's default
  endpoint (here: no key, refused) instead of the run's.  The run keeps it (never a password).
* A relative ``files:DIR`` or ``replay:FILE`` was stored as typed: a resume from another directory
  waited on a folder nobody answered, or found no transcript.  The stored spec holds absolute paths.
* A ``tune --shapes`` run resumed on another GPU between two shapes tuned the next shapes there without
  a word; it is refused as a single run's resume is.

The model servers are real HTTP servers on 127.0.0.1 answering from a script (``llm_servers``);
recordings are the repository's own (examples/spaces) and the synthetic one of ``scripted``.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import kerntune
from cli_runs import PACKAGE_ROOT, no_llm_env, one_line
from kerntune.errors import KerntuneError, StoreError
from scripted import answer, synthetic_evaluator
from shapes_cli import kernel_file, shapes_file

pytest.importorskip("openai")

from llm_servers import ScriptedServer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SPACE = ROOT / "examples" / "spaces" / "matmul_256x8192x8192_h100.json.gz"
#: A real recorded transcript: 3 model calls of another run
TRANSCRIPT = ROOT / "benchmarks" / "llm" / "transcripts" / "matmul_256x8192x8192_h100.llm.jsonl"
TRANSFORM_KERNEL = ROOT / "tests" / "data" / "triton_transform" / "matmul_small.py"
#: An llm run on the synthetic recording: 4 configs a round, no warm-up, so each round is one call
LLM = ["--strategy", "llm", "-o", "initial=4", "-o", "refine=4", "-o", "patience=9", "-o", "warmup=0",
       "-o", "fallback=random"]


def _env(tmp: Path) -> dict[str, str]:
    """No model, base URL, API key or keyring from this environment: kerntune as a new user runs it."""
    env = {k: v for k, v in no_llm_env().items()
           if k not in ("KERNTUNE_STORE", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY")}
    return {**env, "PYTHONPATH": str(PACKAGE_ROOT), "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
            "HOME": str(tmp)}


def _cli(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kerntune", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=_env(cwd))


def _start(cwd: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "kerntune", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(cwd))


def _kill_when(proc: subprocess.Popen, ready: Any, what: str) -> str:
    """SIGKILL ``proc`` once ``ready()`` holds (as a user kills kerntune while it waits); its stdout."""
    deadline = time.monotonic() + 180
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError(f"ended or stalled before {what}: {proc.returncode}\n{out[-1500:]}\n{err[-3000:]}")
        time.sleep(0.05)
    proc.kill()
    return proc.communicate(timeout=60)[0]


def _run_id(stdout: str) -> str:
    return next(line.split()[2] for line in stdout.splitlines() if line.startswith("run id: "))


def _rows(db: Path, sql: str, args: tuple = ()) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def _synthetic_answers(n: int) -> list[str]:
    """``n`` answers of 4 configs each of the synthetic space, no config twice."""
    configs = [{"BM": bm, "W": w, "bs": [a, b]} for bm in (64, 32, 16, 128) for w in (4, 8, 2)
               for a in (32, 16, 64) for b in (32, 64, 16)]
    return [answer(*configs[4 * i: 4 * i + 4]) for i in range(n)]


# -- 1. a new run's transcript --------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["tune", "tune --shapes", "transform"])
def test_a_new_run_refuses_a_transcript_that_holds_another_runs_calls(tmp_path: Path, command: str) -> None:
    """Before, the new run appended its calls to the 3 of the recorded run, and ``replay:FILE`` replayed
    both runs as one.  Refused in one line naming the file, before the store exists; the file untouched."""
    held = tmp_path / "held.jsonl"
    shutil.copy(TRANSCRIPT, held)
    target = {"tune": ["tune", "--replay", str(SPACE), "--strategy", "llm"],
              "tune --shapes": ["tune", str(kernel_file(tmp_path, "vsum")), "--shapes",
                                str(shapes_file(tmp_path, "1000\n2000\n")), "--strategy", "llm"],
              "transform": ["transform", str(TRANSFORM_KERNEL), "--shape", "32x32x32", "--strategy", "explicit"]}
    proc = _cli(tmp_path, *target[command], "--llm", f"replay:{TRANSCRIPT}", "--llm-transcript", str(held),
                "--store", str(tmp_path / "s.db"))
    one_line(proc, f"--llm-transcript {held} already holds 3 model calls", "new path or delete it")
    assert held.read_bytes() == TRANSCRIPT.read_bytes()
    assert not (tmp_path / "s.db").exists()


def test_kerntune_tune_refuses_a_new_runs_transcript_that_holds_calls(tmp_path: Path) -> None:
    """``kerntune.tune`` appended to it as the command line did; it raises before the store is opened."""
    held, db = tmp_path / "held.jsonl", tmp_path / "s.db"
    shutil.copy(TRANSCRIPT, held)
    with pytest.raises(KerntuneError, match="llm_transcript .*held.jsonl already holds 3 model calls"):
        kerntune.tune(SPACE, strategy="llm", llm=f"replay:{TRANSCRIPT}", llm_transcript=held, store=db,
                      report=False)
    assert held.read_bytes() == TRANSCRIPT.read_bytes() and not db.exists()


# -- 2. the run's base URL ------------------------------------------------------------------------------------

def test_scripted_server_tune_resumed_without_base_url_asks_the_runs_own_endpoint(tmp_path: Path) -> None:
    """Killed while its second model call waits, resumed without ``--llm-base-url``: before, the resume
    asked OpenAI's default endpoint (no key here: refused); now it asks the run's server and finishes."""
    synthetic_evaluator(tmp_path)
    db = tmp_path / "s.db"
    a = _synthetic_answers(4)
    with ScriptedServer("openai", [("ok", a[0]), ("hang", 20), ("ok", a[1]), ("ok", a[2]), ("ok", a[3])]) as srv:
        proc = _start(tmp_path, "tune", "--replay", str(tmp_path / "synthetic.json"), *LLM, "-o", "max_rounds=3",
                      "--budget", "12", "--llm", "openai:test-model", "--llm-base-url", srv.url, "--store", str(db),
                      "--no-report")
        run_id = _run_id(_kill_when(proc, lambda: len(srv.requests) >= 2, "the second model call"))
        done = _cli(tmp_path, "tune", "--resume", run_id, "--store", str(db), "--no-report")
        assert done.returncode == 0, done.stderr[-3000:]
        assert len(srv.requests) >= 3  # the resume's calls went to the run's server
    assert _rows(db, "SELECT COUNT(*) FROM trials WHERE run_id=?", (run_id,)) == [(12,)]


def test_scripted_server_shapes_run_resumed_without_base_url_asks_the_runs_own_endpoint(tmp_path: Path) -> None:
    """A ``tune --shapes`` run killed in its second shape's model call: before, the resume asked the
    default endpoint (refused: no key); now its stored base URL, and the second shape is tuned."""
    db = tmp_path / "store.db"
    configs = [{"work": w, "unroll": u} for w in (1, 2, 3, 4) for u in (1, 2, 3, 4)]
    a = [answer(*configs[2 * i: 2 * i + 2]) for i in range(6)]
    with ScriptedServer("openai", [("ok", a[0]), ("ok", a[1]), ("hang", 20), ("ok", a[2]), ("ok", a[3])]) as srv:
        proc = _start(tmp_path, "tune", str(kernel_file(tmp_path, "vsum")), "--shapes",
                      str(shapes_file(tmp_path, "1000\n2000\n")), "--strategy", "llm", "-o", "initial=2", "-o",
                      "refine=2", "-o", "max_rounds=2", "-o", "patience=9", "-o", "warmup=0", "-o", "fallback=random",
                      "--budget", "8", "--retime", "0", "--llm", "openai:test-model", "--llm-base-url", srv.url,
                      "--store", str(db))
        parent = _run_id(_kill_when(proc, lambda: len(srv.requests) >= 3, "the second shape's model call"))
        done = _cli(tmp_path, "tune", "--resume", parent, "--store", str(db))
        assert done.returncode == 0, done.stderr[-3000:]
        assert len(srv.requests) >= 4
    assert _rows(db, "SELECT status FROM runs WHERE id=?", (parent,)) == [("done",)]


def test_scripted_server_compare_resumed_without_base_url_asks_the_runs_own_endpoint(tmp_path: Path) -> None:
    """A comparison killed in its second repeat's model call, resumed without ``--llm-base-url``: before,
    refused for want of an OpenAI key (the default endpoint); now it finishes on the run's server."""
    synthetic_evaluator(tmp_path)
    db = tmp_path / "s.db"
    a = _synthetic_answers(4)
    options = [f"llm.{o}" if "=" in o else o for o in LLM[2:]]  # -o llm.initial=4 ...
    with ScriptedServer("openai", [("ok", a[0]), ("hang", 20), ("ok", a[1]), ("ok", a[2])]) as srv:
        proc = _start(tmp_path, "compare", "--space", str(tmp_path / "synthetic.json"), "--strategies", "llm",
                      "--repeats", "2", "--budget", "4", *options, "-o", "llm.max_rounds=1", "--llm",
                      "openai:test-model", "--llm-base-url", srv.url, "--store", str(db), "--no-report")
        run_id = _run_id(_kill_when(proc, lambda: len(srv.requests) >= 2, "the second repeat's model call"))
        done = _cli(tmp_path, "compare", "--resume", run_id, "--store", str(db), "--no-report")
        assert done.returncode == 0, done.stderr[-3000:]
        assert len(srv.requests) >= 3
    assert _rows(db, "SELECT status FROM runs WHERE id=?", (run_id,)) == [("done",)]


def test_scripted_server_base_url_credentials_are_not_stored_and_a_resume_asks_for_the_url(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A base URL's user name and password stay out of the store; a resume then asks for the URL again
    instead of asking the provider's default endpoint."""
    monkeypatch.delenv("KERNTUNE_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    synthetic_evaluator(tmp_path)
    db = tmp_path / "s.db"
    with ScriptedServer("openai", [("ok", x) for x in _synthetic_answers(3)]) as srv:
        url = srv.url.replace("http://", "http://kt-user:kt-secret-pw@")
        res = kerntune.tune(tmp_path / "synthetic.json", strategy="llm", llm="openai:test-model", llm_base_url=url,
                            budget=8, options={"initial": 4, "refine": 4, "warmup": 0, "max_rounds": 2},
                            store=db, report=False)
    (options,) = _rows(db, "SELECT options_json FROM runs WHERE id=?", (res.run_id,))[0]
    assert json.loads(options)["llm_base_url"] == url.replace("kt-user:kt-secret-pw", "[REDACTED]")
    assert all(b"kt-secret-pw" not in p.read_bytes() for p in tmp_path.glob("s.db*"))
    with pytest.raises(StoreError, match="base URL held credentials.* give llm_base_url again"):
        kerntune.tune(tmp_path / "synthetic.json", resume=res.run_id, store=db, report=False)


# -- 3. relative paths in the spec ----------------------------------------------------------------------------

def _write(path: Path, text: str) -> None:
    """An answer as the README says to write one: elsewhere, then renamed into place."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.rename(path)


def test_files_model_of_a_relative_folder_resumes_from_another_directory(tmp_path: Path) -> None:
    """``--llm files:exchange`` killed while it waits for answer 2, answered, resumed from another
    directory: before, the resume waited on ``exchange/`` there, where no answer came (the round went to
    the fallback's configs); now it takes the answer from the run's own folder."""
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir(), elsewhere.mkdir()
    synthetic_evaluator(here)
    db, exchange = tmp_path / "s.db", here / "exchange"
    a = _synthetic_answers(2)
    proc = _start(here, "tune", "--replay", str(here / "synthetic.json"), *LLM, "-o", "max_rounds=2", "--budget", "8",
                  "--llm", "files:exchange", "--llm-timeout", "120", "--store", str(db), "--no-report")
    deadline = time.monotonic() + 120
    while not (exchange / "0001.prompt.md").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    _write(exchange / "0001.response.json", a[0])
    run_id = _run_id(_kill_when(proc, (exchange / "0002.prompt.md").exists, "the second request"))
    _write(exchange / "0002.response.json", a[1])
    done = _cli(elsewhere, "tune", "--resume", run_id, "--store", str(db), "--no-report", "--llm-timeout", "3")
    assert done.returncode == 0, done.stderr[-3000:]
    calls = [c.get("text") or c.get("error") for (j,) in
             _rows(db, "SELECT calls_json FROM llm_exchanges WHERE run_id=? ORDER BY id", (run_id,))
             for c in json.loads(j)]
    assert calls == a  # the second answer too, not a timeout there and the fallback's configs
    assert _rows(db, "SELECT COUNT(*) FROM trials WHERE run_id=?", (run_id,)) == [(8,)]
    assert not (elsewhere / "exchange").exists()


CHILD = """
import json, os, signal, sys
import kerntune
args = json.loads(sys.argv[1])
def progress(ctx):
    if ctx.evaluations >= 30:
        os.kill(os.getpid(), signal.SIGKILL)
kerntune.tune(**args, report=False, progress=progress, on_start=lambda rid, p: print("run", rid, flush=True))
"""


def test_replay_model_of_a_relative_transcript_resumes_from_another_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``kerntune.tune(llm="replay:t.jsonl")`` killed at evaluation 30, resumed from another directory:
    before, "replay: transcript not found: t.jsonl"; now the same search as the uninterrupted run."""
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir(), elsewhere.mkdir()
    shutil.copy(TRANSCRIPT, here / "t.jsonl")
    db, options = tmp_path / "s.db", {"initial": 25, "refine": 15, "max_rounds": 5}
    args = dict(space=str(SPACE), strategy="llm", llm="replay:t.jsonl", options=options, budget=100, store=str(db))
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(args)], cwd=here, capture_output=True, text=True,
                          timeout=300, env=dict(no_llm_env(), PYTHONPATH=str(PACKAGE_ROOT)))
    assert proc.returncode == -9, proc.stderr[-3000:]
    run_id = proc.stdout.split()[1]
    monkeypatch.chdir(elsewhere)
    kerntune.tune(SPACE, resume=run_id, store=db, report=False)
    whole = kerntune.tune(SPACE, strategy="llm", llm=f"replay:{here / 't.jsonl'}", options=options, budget=100,
                          store=tmp_path / "whole.db", report=False)
    trials = "SELECT seq, config_key, status, time_ms FROM trials WHERE run_id=? ORDER BY seq"
    assert _rows(db, trials, (run_id,)) == _rows(tmp_path / "whole.db", trials, (whole.run_id,))


# -- 4. a --shapes run on another GPU -------------------------------------------------------------------------

def test_shapes_run_resumed_on_another_gpu_between_two_shapes_is_refused_untouched(tmp_path: Path) -> None:
    """The first shape finished on an A100 (the stored device rewritten in SQLite, as a run moved to
    another machine reads), the second not started: before, the resume tuned it on this H100 recording
    without a word.  Now it is refused with ``tune --resume``'s message, nothing measured or marked."""
    from kerntune.evaluate import ReplayEvaluator
    from kerntune.run.shapes import create_parent, tune_shapes
    from kerntune.store import Store

    files = {(4096, 4096, 4096): "matmul_4096_h100", (256, 8192, 8192): "matmul_256x8192x8192_h100"}
    made: list[tuple] = []

    def evaluator(shape: tuple) -> ReplayEvaluator:
        made.append(shape)
        if len(made) == 2 and stop:
            raise KeyboardInterrupt  # killed between the two shapes
        return ReplayEvaluator.from_file(ROOT / "examples" / "spaces" / f"{files[shape]}.json.gz")

    store = Store(tmp_path / "kt.db")
    parent = create_parent(store, "replay", {"evaluator": "replay"}, list(files), "random", 0, 20)
    stop = True
    with pytest.raises(KeyboardInterrupt):
        tune_shapes(evaluator, list(files), "random", 20, store, seed=0, parent_id=parent)
    store.close()
    (child,) = _rows(tmp_path / "kt.db", "SELECT id FROM runs WHERE parent_id=?", (parent,))
    con = sqlite3.connect(tmp_path / "kt.db")
    with con:
        con.execute("UPDATE runs SET device='NVIDIA A100-SXM4-80GB' WHERE id=?", child)
    con.close()
    before = _rows(tmp_path / "kt.db", "SELECT id, status, device FROM runs ORDER BY id")
    stop = False
    store = Store(tmp_path / "kt.db")
    with pytest.raises(StoreError) as err:
        tune_shapes(evaluator, list(files), "random", 20, store, seed=0, parent_id=parent)
    store.close()
    assert str(err.value) == (f"cannot resume {parent}: it measured on NVIDIA A100-SXM4-80GB, this one measures on"
                              " NVIDIA H100 80GB HBM3 (resume it on that GPU, or start a new run)")
    assert _rows(tmp_path / "kt.db", "SELECT id, status, device FROM runs ORDER BY id") == before
