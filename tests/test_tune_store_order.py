"""``kerntune tune`` / ``kerntune.tune``: bad input is refused before the store exists, and a run's
``--llm-transcript`` is kept with the run, so that a resumed run's transcript replays the whole search.

* Bad input (a mistyped recording, an unknown strategy or option, a model spec that cannot work)
  was refused only after the store had been opened: ``.kerntune/kerntune.db`` (or ``--store X.db``)
  was created in the working directory by a command that ran nothing, although the README and the
  ``kerntune.tune`` docstring promise the error before the store is opened (``compare`` kept it).
* ``--llm-transcript FILE`` was honoured on ``--resume`` only when typed again, while the model's
  spec was kept with the run: after the README's kill-and-resume workflow the transcript lacked every
  answer given after the resume, and ``--llm replay:FILE`` then silently fell back to other
  proposals ("has no answer #N"): not the search it recorded.

Real processes for the killed runs and their resumes (most refusals and the transcript replays run
``kerntune.cli.main`` in this process, in the same working directory and environment), real stores, the
recorded convolution space, and a scripted ``cmd:`` model: a program
answering six valid configs chosen by a hash of its prompt, which SIGKILLs kerntune (its parent) once
at a given call, as a user killing kerntune while it waits for the model.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import kerntune
from cli_runs import PACKAGE_ROOT, no_llm_env, one_line, run_main
from kerntune.evaluate import ReplayEvaluator

ROOT = Path(__file__).resolve().parent.parent
CONV = ROOT / "examples" / "spaces" / "convolution_A100.json.gz"
KERNEL = ROOT / "examples" / "triton" / "matmul.py"
OPTIONS = ["-o", "initial=6", "-o", "refine=4", "-o", "max_rounds=40", "-o", "patience=1000",
           "-o", "min_improvement=0", "-o", "warmup=2"]
BUDGET = 36
KILL_AT = 3  # the model call kerntune is killed in (calls 1 and 2 answered and stored)

MODEL = """
import hashlib, json, os, random, signal, sys
prompt = sys.stdin.read()
here = os.path.dirname(os.path.abspath(__file__))
calls = os.path.join(here, "calls")
n = (int(open(calls).read()) if os.path.exists(calls) else 0) + 1
open(calls, "w").write(str(n))
kill_at = int(os.environ.get("SCRIPTED_KILL_AT", "0"))
marker = os.path.join(here, "killed")
if n == kill_at and not os.path.exists(marker):
    open(marker, "w").write("")
    os.kill(os.getppid(), signal.SIGKILL)  # kerntune, killed while it waits for this answer
    sys.exit(1)
configs = json.load(open(os.path.join(here, "configs.json")))
rng = random.Random(int(hashlib.sha256(prompt.encode()).hexdigest(), 16))
print(json.dumps({"configs": [{"reasoning": "r", "config": c} for c in rng.sample(configs, 6)]}))
"""


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    """No store or model from this environment, no API key, no keyring: kerntune as a new user runs it."""
    env = {k: v for k, v in no_llm_env().items()
           if k not in ("KERNTUNE_STORE", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    return {**env, "PYTHONPATH": str(PACKAGE_ROOT), "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
            "HOME": str(tmp), **extra}


def _kerntune(tmp: Path, *args: str, timeout: float = 180, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kerntune", *args], cwd=tmp, capture_output=True, text=True,
                          timeout=timeout, env=_env(tmp, **extra))


def _left_behind(tmp: Path) -> list[str]:
    """What a refused command left in its working directory (the store, ``.kerntune/``)."""
    return sorted(p.name for p in tmp.iterdir() if p.name in (".kerntune", "X.db") or p.suffix in (".db", ".db-wal"))


# -- defect 1: bad input refused before the store is created -----------------------------------------

BAD_TUNE_INPUTS = {
    "missing recording": (["--replay", "typo.json.gz"], "file not found"),
    "missing recording, --store": (["--replay", "typo.json.gz", "--store", "X.db"], "file not found"),
    "unknown strategy": (["--replay", str(CONV), "--strategy", "foo", "--store", "X.db"], "foo"),
    "unknown option": (["--replay", str(CONV), "--strategy", "random", "-o", "nosuch=1"], "nosuch"),
    "bad seed": (["--replay", str(CONV), "--seed", "-1"], "--seed"),
    "strategy needs a model": (["--replay", str(CONV), "--strategy", "llm"], "--llm"),
    "unknown provider": (["--replay", str(CONV), "--strategy", "llm", "--llm", "bogus:"], "bogus"),
    "openai without a key": (["--replay", str(CONV), "--strategy", "llm", "--llm", "openai:gpt-4o"], "OPENAI_API_KEY"),
    "cmd: not there": (["--replay", str(CONV), "--strategy", "llm", "--llm", "cmd:nonexistentprog"],
                       "nonexistentprog"),
    "not a recording": (["--replay", "junk.json"], "junk.json"),
    "--shapes, unknown option": ([str(KERNEL), "--shapes", "shapes.txt", "--budget", "4", "-o", "nosuch=1"],
                                 "nosuch"),
    "--shapes, missing kernel": (["nosuch.py", "--shapes", "shapes.txt", "--budget", "4"], "kernel file not found"),
    # the file is there but raises on import: it was imported only after the store was opened
    "--shapes, kernel fails to import": (["broken.py", "--shapes", "shapes.txt", "--budget", "4"],
                                         "importing the kernel file failed"),
}


#: Cases run as a real process: the key must come from neither the environment nor a keyring, which only a
#: fresh process with ``PYTHON_KEYRING_BACKEND`` set before keyring is loaded guarantees.
REAL_PROCESS = {"openai without a key"}


def _tune_in_process(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    """``kerntune ARGS`` through ``kerntune.cli.main`` in this process (``cli_runs.run_main``), in ``tmp`` with
    the environment of ``_env`` (no store, no model, no key): its exit code and stderr as a process's."""
    return run_main(tmp, *args, env={"KERNTUNE_STORE": None, "OPENAI_API_KEY": None, "ANTHROPIC_API_KEY": None,
                                     "HOME": str(tmp), "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"})


@pytest.mark.parametrize("case", list(BAD_TUNE_INPUTS))
def test_tune_refuses_bad_input_before_the_store_is_created(tmp_path: Path, case: str) -> None:
    """Each was one error line, but ``.kerntune/kerntune.db`` (or ``--store X.db``) was created first:
    ``tune`` opened the store before the evaluator, the model, the strategy and its options were checked.
    The CLI's ``main`` runs in this process (the store is made relative to the working directory, which
    is ``tmp_path`` either way; an uncaught error would raise here, not exit 2); a good run's store in a
    real process is ``test_tune_that_runs_still_creates_its_default_store``."""
    (tmp_path / "junk.json").write_text('{"not": "a recording"}')
    (tmp_path / "shapes.txt").write_text("256x256x256\n")
    (tmp_path / "broken.py").write_text("raise RuntimeError('broken on import')\n")
    args, needle = BAD_TUNE_INPUTS[case]
    if case in REAL_PROCESS:
        proc = _kerntune(tmp_path, "tune", *args, "--no-report", timeout=120)
    else:
        proc = _tune_in_process(tmp_path, "tune", *args, "--no-report")
    one_line(proc, needle)
    assert _left_behind(tmp_path) == [], f"{case}: the refused command created {_left_behind(tmp_path)}"


def test_tune_that_runs_still_creates_its_default_store(tmp_path: Path) -> None:
    """The store is opened later, not never: a good run still makes ``.kerntune/kerntune.db``."""
    proc = _kerntune(tmp_path, "tune", "--replay", str(CONV), "--strategy", "random", "--budget", "5", "--no-report")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / ".kerntune" / "kerntune.db").is_file()


API_BAD = {
    "unknown strategy": dict(strategy="foo"),
    "unknown option": dict(strategy="random", options={"nosuch": 1}),
    "strategy needs a model": dict(strategy="llm"),
    "unknown provider": dict(strategy="llm", llm="bogus:"),
    "cmd: not there": dict(strategy="llm", llm="cmd:nonexistentprog"),
}


@pytest.mark.parametrize("case", list(API_BAD))
def test_api_tune_refuses_bad_arguments_before_the_store_is_created(tmp_path: Path, case: str) -> None:
    """``kerntune.tune(space, store=db, strategy="foo")`` raised the promised KerntuneError, but only
    after it had created ``db``."""
    db = tmp_path / "X.db"
    with pytest.raises(kerntune.KerntuneError):
        kerntune.tune(CONV, store=db, report=False, **API_BAD[case])
    assert not db.exists()


def test_api_tune_of_a_missing_recording_leaves_no_default_store(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A mistyped space created ``.kerntune/`` in the working directory before "file not found"."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KERNTUNE_STORE", raising=False)
    with pytest.raises(kerntune.KerntuneError, match="file not found"):
        kerntune.tune(tmp_path / "typo.json.gz", report=False)
    assert not (tmp_path / ".kerntune").exists()


# -- defect 2: the transcript kept with the run ------------------------------------------------------

@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The scripted model's folder: the program and 300 valid configs of the recorded space."""
    d = tmp_path_factory.mktemp("model")
    space = ReplayEvaluator.from_file(CONV).space
    configs = [c for i, c in enumerate(space.enumerate()) if i % 13 == 0][:300]
    (d / "configs.json").write_text(json.dumps(configs))
    (d / "model.py").write_text(MODEL)
    return d


def _model(model_dir: Path, tmp: Path) -> str:
    """A fresh copy of the scripted model in ``tmp`` (its call counter and kill marker are its own)."""
    for name in ("model.py", "configs.json"):
        (tmp / name).write_text((model_dir / name).read_text())
    return f"cmd:{sys.executable} {tmp / 'model.py'}"


def _trials(db: Path) -> list[tuple]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("SELECT config_key, status, time_ms FROM trials ORDER BY seq").fetchall()
    finally:
        con.close()


def _calls(db: Path) -> int:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return sum(len(json.loads(c)) for (c,) in con.execute("SELECT calls_json FROM llm_exchanges"))
    finally:
        con.close()


def _run_id(db: Path) -> str:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("SELECT id FROM runs").fetchone()[0]
    finally:
        con.close()


def _lines(path: Path) -> int:
    return len([line for line in path.read_text().splitlines() if line.strip()]) if path.exists() else 0


def _killed_run(tmp: Path, model: str, transcript: Path) -> tuple[Path, str]:
    """A scripted llm run with ``--llm-transcript``, killed by the model in call ``KILL_AT``; (store, run id)."""
    db = tmp / "store.db"
    proc = _kerntune(tmp, "tune", "--replay", str(CONV), "--strategy", "llm", "--llm", model, "--llm-transcript",
                     str(transcript), "--budget", str(BUDGET), *OPTIONS, "--store", str(db), "--no-report",
                     SCRIPTED_KILL_AT=str(KILL_AT))
    assert proc.returncode == -9, proc.stderr[-2000:]
    assert _lines(transcript) == KILL_AT - 1 and len(_trials(db)) < BUDGET
    return db, _run_id(db)


def _replayed(tmp: Path, transcript: Path) -> tuple[list[tuple], str]:
    """The search ``--llm replay:TRANSCRIPT`` makes (the README's "re-run the exact same search"); its trials
    and stderr.  In this process (``_tune_in_process``): it reads only the transcript file and the recording."""
    db = tmp / "replayed.db"
    proc = _tune_in_process(tmp, "tune", "--replay", str(CONV), "--strategy", "llm", "--llm",
                            f"replay:{transcript}", "--budget", str(BUDGET), *OPTIONS, "--store", str(db),
                            "--no-report")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return _trials(db), proc.stderr


def test_scripted_model_transcript_of_a_killed_run_resumed_without_the_flag_replays_the_same_search(
        tmp_path: Path, model_dir: Path) -> None:
    """``tune --resume ID`` kept the model's spec but not ``--llm-transcript``: the answers after the
    resume were never written, and replaying the transcript went another way ("has no answer #3")."""
    model, transcript = _model(model_dir, tmp_path), tmp_path / "run.jsonl"
    db, run_id = _killed_run(tmp_path, model, transcript)
    done = _kerntune(tmp_path, "tune", "--resume", run_id, "--store", str(db), "--no-report")
    assert done.returncode == 0, done.stderr[-2000:]
    resumed = _trials(db)
    assert len(resumed) == BUDGET
    assert _lines(transcript) == _calls(db), "the transcript lacks the answers given after the resume"
    trials, err = _replayed(tmp_path, transcript)
    assert "has no answer" not in err, err[-2000:]
    assert trials == resumed


def test_scripted_model_explicit_llm_transcript_on_resume_wins_over_the_runs_own(
        tmp_path: Path, model_dir: Path) -> None:
    """A transcript typed again on ``--resume`` is still the one written (the run's own is left as the kill
    left it), and it holds the whole run: the stored calls are copied in before the new ones, so that file
    alone replays the run (it held only the calls made after the resume)."""
    model, transcript, other = _model(model_dir, tmp_path), tmp_path / "run.jsonl", tmp_path / "other.jsonl"
    db, run_id = _killed_run(tmp_path, model, transcript)
    done = _kerntune(tmp_path, "tune", "--resume", run_id, "--store", str(db), "--llm-transcript", str(other),
                     "--no-report")
    assert done.returncode == 0, done.stderr[-2000:]
    assert _lines(transcript) == KILL_AT - 1
    assert _lines(other) == _calls(db) > KILL_AT - 1


def test_scripted_model_api_resume_appends_to_the_runs_transcript(tmp_path: Path, model_dir: Path) -> None:
    """``kerntune.tune(resume=ID)`` takes the run's transcript too: a run started and killed through the
    API, resumed through the API without ``llm_transcript``, replays to the same search."""
    model, transcript, db = _model(model_dir, tmp_path), tmp_path / "run.jsonl", tmp_path / "store.db"
    options = dict(o.split("=") for o in OPTIONS[1::2])
    start = (f"import kerntune; kerntune.tune({str(CONV)!r}, strategy='llm', llm={model!r}, budget={BUDGET},"
             f" options={ {k: int(v) for k, v in options.items()} !r}, llm_transcript={str(transcript)!r},"
             f" store={str(db)!r}, report=False)")
    proc = subprocess.run([sys.executable, "-c", start], cwd=tmp_path, capture_output=True, text=True, timeout=180,
                          env=_env(tmp_path, SCRIPTED_KILL_AT=str(KILL_AT)))
    assert proc.returncode == -9, proc.stderr[-2000:]
    assert _lines(transcript) == KILL_AT - 1
    resume = (f"import kerntune; r = kerntune.tune({str(CONV)!r}, resume={_run_id(db)!r}, store={str(db)!r},"
              " report=False); print(r.trials)")
    proc = subprocess.run([sys.executable, "-c", resume], cwd=tmp_path, capture_output=True, text=True, timeout=180,
                          env=_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _lines(transcript) == _calls(db)
    trials, err = _replayed(tmp_path, transcript)
    assert "has no answer" not in err, err[-2000:]
    assert trials == _trials(db)
