"""``kerntune transform`` on a Triton kernel file: the defects a review found, each held by a test.

Triton runs under its CPU interpreter (``TRITON_INTERPRET=1``); the model is scripted; kernels, checks,
evaluator workers and the CLI are real.  One test scripts the evaluator's screening and re-time as well,
to make the noise it judges deterministic (its name says so); runs whose checks do not depend on the
original's screening leave it unmeasured (``unmeasured``).  The interpreter's timings say nothing of a GPU's:
what is tested is how verdicts are reached and what a run leaves behind.  The defects found in the
explicit strategy's run (an answer identical to the accepted kernel, the headline speedup) are held by
tests/test_transform_triton_scripted.py, on its one explicit run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

from kerntune.evaluate.trial import Status, Trial  # noqa: E402
from kerntune.llm import LLMClient  # noqa: E402
from kerntune.transform.context import KernelState  # noqa: E402
from kerntune.transform.scripted import ScriptedTransformProvider  # noqa: E402
from kerntune.transform.triton_backend import TritonSession  # noqa: E402
from kerntune.transform.triton_context import TritonTransformContext, TritonTransformer  # noqa: E402
from processes import alive  # noqa: E402
from test_transform_triton_check import DATA, ORIG, ROOT, SHAPE  # noqa: E402
from test_transform_triton_check import GOOD as TILES  # noqa: E402
LAUNCH = "def launch(config, inputs):\n    a, b, c = inputs\n"
#: the original, whose launch runs the kernel on its first call per config only, then returns the output
#: buffer it is given, unwritten: correct when screened (one checked launch), no work when timed
CACHED = ORIG.replace(LAUNCH, "_seen = set()\n\n\n" + LAUNCH + "    key = tuple(sorted(config.items()))\n"
                      "    if key in _seen:\n        return c\n    _seen.add(key)\n")
#: the original with a launch that never returns
HANGS = ORIG.replace(LAUNCH, LAUNCH + "    import time\n    while True:\n        time.sleep(0.5)\n")


@pytest.fixture
def interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return dict(os.environ)


def unmeasured(monkeypatch: pytest.MonkeyPatch, time_ms: float = 1.0) -> None:
    """The original stands at its default config with a nominal ``time_ms`` instead of being tuned in worker
    processes (two per run, each importing torch), where its screening decides nothing a test checks: a
    run whose model gives no kernel file, one whose screening is scripted anyway, one whose rewrite only
    has to screen faster than the original to be accepted."""
    def original_at_default(ctx: TritonTransformContext) -> KernelState:
        ctx.original_state = ctx.current = KernelState(ctx.original, dict(ctx.triton.original_space.default),
                                                       time_ms)
        return ctx.current

    monkeypatch.setattr(TritonTransformContext, "measure_original", original_at_default)


#: ``kerntune ARGS`` with the original left unmeasured at a nominal second, as ``unmeasured`` leaves it, in the CLI's
#: own process: ``python -c UNMEASURED_CLI ARGS``
UNMEASURED_CLI = """import sys
from kerntune.transform.context import KernelState
from kerntune.transform.triton_context import TritonTransformContext
def original_at_default(ctx):
    ctx.original_state = ctx.current = KernelState(ctx.original, dict(ctx.triton.original_space.default),
                                                   1000.0)
    return ctx.current
TritonTransformContext.measure_original = original_at_default
from kerntune.cli import main
main(sys.argv[1:])
"""


def one_prompt(code: str) -> list[dict]:
    return [{"kind": "one-prompt", "reply": {"code": code, "explanation": "faster"}}]


def transformer(tmp_path: Path, rules: list[dict], **kwargs) -> TritonTransformer:
    client = LLMClient(ScriptedTransformProvider(rules), transcript=tmp_path / "transcript.jsonl")
    opts = dict(strategy="one-prompt", llm=client, budget=1, rep_ms=5, fix_rounds=0, workdir=tmp_path / "work")
    opts.update(kwargs)
    return TritonTransformer(DATA / "matmul_small.py", SHAPE, **opts)


def _pids_with(text: str) -> list[int]:
    """Live processes whose command line holds ``text``."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if text in (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    pids.append(int(d.name))
            except OSError:
                continue
    return [p for p in pids if alive(p) and p != os.getpid()]


def _kill(pids: list[int]) -> None:
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


# -- 1. a final re-time that finds a wrong output ----------------------------------------------------
def test_scripted_winner_wrong_at_the_final_retime_is_rejected_and_the_original_stays(tmp_path, interpreter,
                                                                                      monkeypatch):
    """A re-time that found the winner's output wrong was only logged: a launch that returns its cached
    output (no work) won at 10341x.  The per-step paired rounds are switched off here so that the final
    re-time alone has to catch it; the step must end rejected, and result.json must say so.  The original
    screens at a nominal second (``unmeasured``), which a launch that does no work beats as it beats the
    real one (about 0.1 s here); the final re-time measures both for real."""
    unmeasured(monkeypatch, time_ms=1000.0)
    monkeypatch.setattr(TritonTransformContext, "side_by_side", lambda self, *a, **k: None)
    result = transformer(tmp_path, one_prompt(CACHED), budget=2, retime_rounds=3).run()
    step = result.steps[0]
    assert step.status == "rejected" and "re-timed against the original at the end" in step.reason, step.reason
    assert "incorrect" in step.reason
    assert result.accepted == [] and result.kernel_source == ORIG and result.speedup == 1.0
    assert result.retimed is None and result.combined_file is None
    saved = json.loads((Path(result.workdir) / "result.json").read_text())
    assert saved["accepted"] == [] and saved["steps"][0]["status"] == "rejected" and saved["kernel_source"] == ORIG


# -- 2. paired verdicts ---------------------------------------------------------------------------------
def test_scripted_noop_screened_faster_is_judged_on_paired_rounds_and_rejected(tmp_path, interpreter, monkeypatch):
    """A no-op rewrite (a comment added) was accepted on screening noise (1.25x, 1.95x).  Here a scripted
    screening says 2x and a scripted re-time says "the same within noise" round by round (the evaluator's
    re-time is the paired judge now, as on the Kernel Tuner path): it must be rejected on the rounds.  The
    original's screening is scripted too (``unmeasured``: 1 ms)."""
    import kerntune.transform.context as context
    from kerntune.evaluate.triton_backend.evaluator import TritonEvaluator

    unmeasured(monkeypatch)
    real_best = context.settled_best
    monkeypatch.setattr(context, "settled_best", lambda *a: (lambda t: t and dataclasses.replace(
        t, time_ms=0.5))(real_best(*a)))  # the rewrite's screening: noise said twice as fast
    noise = iter([0.8, 1.25, 0.9, 1.1, 0.95, 1.05] * 10)

    def scripted_retime(self, configs, rep_ms=None, rounds=None):
        times = [100.0 * (next(noise) if c.get("variant") else 1.0) for c in configs]  # variant 0: the original
        return [Trial(dict(c), Status.OK, t, [t] * (rounds or 1), extra={"rounds_ms": [t] * (rounds or 1)})
                for c, t in zip(configs, times)]

    monkeypatch.setattr(TritonEvaluator, "retime", scripted_retime)
    result = transformer(tmp_path, one_prompt(ORIG + "\n# the same kernel, said again\n"), retime_rounds=6).run()
    step = result.steps[0]
    assert step.status == "rejected" and step.reason.startswith("not faster"), step.reason
    assert "paired by round over 6 rounds" in step.reason and "same within noise" in step.reason
    assert result.accepted == [] and result.speedup == 1.0 and result.kernel_source == ORIG


# -- 3. a workdir of its own ------------------------------------------------------------------------
def test_runs_started_in_the_same_second_get_workdirs_of_their_own(tmp_path, interpreter, monkeypatch):
    """The default workdir was NAME-TIME to the second, made with exist_ok: two runs started together
    wrote into one folder.  A given folder holding another run's files is not written into either."""
    unmeasured(monkeypatch)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(time, "strftime", lambda fmt, *a: "20260101-000000")
    prose = [{"kind": "one-prompt", "reply": "Sure! Bigger tiles and tl.dot."}]
    first = transformer(tmp_path, prose, workdir=None, retime_rounds=0).run()
    saved = (Path(first.workdir) / "result.json").read_bytes()
    second = transformer(tmp_path, prose, workdir=None, retime_rounds=0).run()
    assert first.workdir != second.workdir
    assert all(Path(r.workdir).parent == tmp_path / ".kerntune" / "transform" for r in (first, second))
    assert (Path(first.workdir) / "result.json").read_bytes() == saved
    third = transformer(tmp_path, prose, workdir=first.workdir, retime_rounds=0).run()
    assert Path(third.workdir).parent == Path(first.workdir)  # a fresh subfolder
    assert (Path(first.workdir) / "result.json").read_bytes() == saved


# -- 4. checkpoints -----------------------------------------------------------------------------------
def test_run_killed_after_an_accepted_step_keeps_it_in_o_json_and_workdir(tmp_path, interpreter):
    """-o and --json were written only at the end: a run killed after accepting a rewrite lost it.  The
    scripted model (through ``cmd:``) hangs on the first prompt after the tiles step; the run is then
    SIGKILLed, and the accepted tiles kernel must be in -o, --json and WORKDIR/result.json.  The tiles are
    accepted on their screening (``--retime-rounds 0``, no paired rounds) against an original left at a
    nominal second (``UNMEASURED_CLI``: the CLI with ``unmeasured``'s patch, not tuned in two more worker
    processes): how a step is accepted is not what is tested here, only that its acceptance is written at once."""
    model, marker = tmp_path / "model.py", tmp_path / "hanging"
    model.write_text("import sys, time\nfrom kerntune.transform.scripted import Script, load_script\n"
                     "p = sys.stdin.read()\nif '(persistent)' in p and 'evaluate-step' in p:\n"
                     f"    open({str(marker)!r}, 'w').close()\n    time.sleep(3600)\n"
                     "print(Script(load_script(sys.argv[1])).answer(p))\n")
    out, js, work = tmp_path / "best.py", tmp_path / "result.json", tmp_path / "work"
    cmd = [sys.executable, "-c", UNMEASURED_CLI, "transform", str(DATA / "matmul_small.py"), "--shape", "32x32x32",
           "--strategy", "explicit", "--llm", f"cmd:{sys.executable} {model} {DATA / 'scripted_explicit.yaml'}",
           "--budget", "2", "--rep-ms", "5", "--retime-rounds", "0", "--workdir", str(work), "-o", str(out),
           "--json", str(js)]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=interpreter, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 400
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert marker.exists(), proc.stderr.read().decode()[-3000:] if proc.poll() is not None else "no hang"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert out.read_text() == TILES
    saved = json.loads(js.read_text())
    assert saved["accepted"] == ["tiles"] and saved["finished"] is False and saved["kernel_source"] == TILES
    assert [(st["id"], st["status"]) for st in saved["steps"]][-1] == ("tiles", "accepted")
    assert json.loads((work / "result.json").read_text())["accepted"] == ["tiles"]
    assert not list(tmp_path.glob(".*.tmp")) and not list(work.glob(".*.tmp"))


# -- 5. the check's processes and a killed tuner --------------------------------------------------------
def test_check_processes_die_with_a_sigkilled_tuner(tmp_path, interpreter):
    """The judge (a session of its own) waited for its runner without a limit, and neither watched the
    tuner: a check of a hung variant outlived a SIGKILLed tuner for ever."""
    session = TritonSession(DATA / "matmul_small.py", SHAPE, workdir=tmp_path, timeout_s=600, memory_mb=4096)
    harness = str(session.write_variant("hangs", HANGS).harness)
    tuner = subprocess.Popen([sys.executable, "-c", (
        "from kerntune.transform.triton_backend import TritonSession, TritonVariant\n"
        f"s = TritonSession({str(DATA / 'matmul_small.py')!r}, {SHAPE!r}, workdir={str(tmp_path / 't')!r},"
        " timeout_s=600, memory_mb=4096)\n"
        f"from pathlib import Path\nv = TritonVariant('hangs', '', Path({harness!r}), Path({harness!r}))\n"
        "print(s.check(v))\n")], env=interpreter, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while not _pids_with(f"--run {harness}") and time.monotonic() < deadline:
            time.sleep(0.3)
        seen = _pids_with(harness)
        assert _pids_with(f"--run {harness}"), "the runner never started"
        time.sleep(2)  # the runner is in its launch, hung
        tuner.kill()
        tuner.wait()
        deadline = time.monotonic() + 10
        while any(alive(p) for p in seen) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [p for p in seen if alive(p)], "the check's processes outlived the tuner"
    finally:
        tuner.kill()
        _kill([p for p in seen if alive(p)])


def test_judge_gives_up_on_a_hung_runner_after_its_timeout(tmp_path, interpreter):
    """The judge's wait for its runner had no limit of its own (only the session's kill bounded it).  The
    limit here is 2 s: the runner may still be importing torch when it ends, which is no answer either
    (its launch would never return); without a limit the judge waits until this test's 150 s."""
    session = TritonSession(DATA / "matmul_small.py", SHAPE, workdir=tmp_path, timeout_s=600, memory_mb=4096)
    harness = session.write_variant("hangs", HANGS).harness
    proc = subprocess.Popen([sys.executable, "-m", "kerntune.transform.triton_check", str(DATA / "matmul_small.py"),
                             str(harness), "32x32x32", "2"], env=interpreter, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=150)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the runner, if the judge left it
        except OSError:
            pass
        proc.wait()
    verdict = json.loads(out.decode().splitlines()[-1])
    assert verdict["ok"] is False and verdict["stage"] == "timeout" and "within 2 s" in verdict["error"], verdict


# -- 6. output paths checked first ------------------------------------------------------------------------
def test_unwritable_output_path_is_refused_before_any_measurement(tmp_path, interpreter):
    """An -o under a regular file crashed with a traceback after the whole run, and --json was lost."""
    (tmp_path / "file.txt").write_text("not a folder")
    js = tmp_path / "result.json"
    cmd = [sys.executable, "-m", "kerntune", "transform", str(DATA / "matmul_small.py"), "--shape", "32x32x32",
           "--strategy", "one-prompt", "--llm", f"cmd:{sys.executable} -m kerntune.transform.scripted "
           f"{DATA / 'scripted_explicit.yaml'}", "--budget", "1", "--rep-ms", "5", "--workdir", str(tmp_path / "w"),
           "-o", str(tmp_path / "file.txt" / "best.py"), "--json", str(js)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=interpreter)
    assert proc.returncode != 0
    assert "is a file, not a directory" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "original kernel" not in proc.stderr and not (tmp_path / "w").exists()


# -- 7. model calls ----------------------------------------------------------------------------------------
def test_scripted_model_calls_count_the_repair_round(tmp_path, interpreter, monkeypatch):
    """An answer without JSON goes back to the model once (``LLMClient``'s repair round): two exchanges,
    both in the transcript, counted as one "model call"."""
    unmeasured(monkeypatch)
    prose = [{"kind": "one-prompt", "reply": "Sure! Bigger tiles and tl.dot."}]
    result = transformer(tmp_path, prose, retime_rounds=0).run()
    assert [s.status for s in result.steps] == ["failed"]
    exchanges = (tmp_path / "transcript.jsonl").read_text().splitlines()
    assert len(exchanges) == 2 and result.counts()["model_calls"] == 2
    assert "2 model calls" in result.summary()
