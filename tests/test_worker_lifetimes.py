"""How long the Triton evaluator's worker processes live, on CPU launchers in real processes: a
stream left early kills what is in flight instead of waiting for its timeout, workers end with the
tuner that started them (even a SIGKILLed one), and re-timing drops a config after its failure."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kerntune
from kerntune.evaluate.trial import Status
from kerntune.evaluate.triton_backend.evaluator import TritonEvaluator

ROOT = Path(kerntune.__file__).resolve().parents[1]  # the kerntune this test imported, for its subprocess

KERNEL = '''
import os, sys, threading, time
from kerntune.space import Choice, Space
name = "lifetimes"
space = Space([Choice("mode", options=("good", "good2", "hang", "stuck_compile", "threads"))],
              default={"mode": "good"})
BENCH = "--compile-only" not in sys.argv
def make_inputs(shape):
    return ([1.0] * shape[0],)
def reference(inputs):
    return [sum(inputs[0])]
def launch(config, inputs):
    if config["mode"] == "threads":  # the threads of the worker that launches it, in a log of their own
        with open(LOG + ".threads", "a") as f:
            f.write(f"{'bench' if BENCH else 'compile'} {','.join(sorted(t.name for t in threading.enumerate()))}\\n")
    if BENCH:
        with open(LOG, "a") as f:
            f.write(f"{os.getpid()} {config['mode']}\\n")
        if config["mode"] == "hang":
            time.sleep(3600)
    elif config["mode"] == "stuck_compile":  # a compile that runs for an hour (ptxas on a huge tile)
        with open(LOG, "a") as f:
            f.write(f"{os.getpid()} compiling\\n")
        time.sleep(3600)
    return [sum(inputs[0])]
'''


def _kernel(tmp_path: Path) -> tuple[Path, Path]:
    log = tmp_path / "launches.log"
    path = tmp_path / "lifetimes_kernel.py"
    path.write_text(f"LOG = {str(log)!r}\n" + KERNEL)
    return path, log


def _modes(log: Path) -> list[str]:
    return [ln.split()[1] for ln in log.read_text().splitlines()] if log.exists() else []


def _gone(pid: int) -> bool:
    """Dead: no such process, or a zombie nobody has reaped yet (it holds nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return True
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False


@pytest.fixture(scope="module")
def _shared(tmp_path_factory: pytest.TempPathFactory):
    """One evaluator for the tests of ``evaluator``: each of its workers imports torch at start-up, and
    none of the tests needs workers that never measured (a worker a test killed is started again)."""
    path, log = _kernel(tmp_path_factory.mktemp("lifetimes"))
    ev = TritonEvaluator(path, (100,), compile_workers=1, compile_timeout=20.0, bench_timeout=12.0, rep_ms=2,
                         memory_limit_mb=0)
    yield ev, log
    ev.close()


@pytest.fixture
def evaluator(_shared):
    """The shared evaluator, its workers started, with its launch log emptied (no launch is in flight
    between tests), so each test sees its own launches only."""
    ev, log = _shared
    ev.wait_ready()
    log.unlink(missing_ok=True)
    return ev, log


def test_a_stream_left_early_kills_the_hung_config_instead_of_waiting_for_it(evaluator) -> None:
    ev, log = evaluator
    stream = ev.stream([{"mode": "good"}, {"mode": "hang"}, {"mode": "good2"}])
    _, first = next(stream)
    assert first.config == {"mode": "good"} and first.status is Status.OK
    deadline = time.monotonic() + 10
    while "hang" not in _modes(log) and time.monotonic() < deadline:
        time.sleep(0.05)
    hung = ev.benchers[0].proc
    t0 = time.perf_counter()
    stream.close()  # the consumer stops (budget spent, Ctrl-C): the hang's 12 s are not waited for
    assert time.perf_counter() - t0 < 4
    assert hung is not None and hung.poll() is not None
    # the evaluator goes on: a fresh worker measures the next batch
    again = ev.evaluate([{"mode": "good2"}])
    assert [t.status for t in again] == [Status.OK], again[0].error


TUNER = '''
import sys
from kerntune.evaluate.triton_backend.evaluator import TritonEvaluator
ev = TritonEvaluator(sys.argv[1], (100,), compile_workers=2, compile_timeout=600, bench_timeout=600, rep_ms=2,
                     memory_limit_mb=0)
print(" ".join(str(w.proc.pid) for w in ev.benchers + ev.compilers), flush=True)
ev.evaluate([{"mode": m} for m in sys.argv[2:]])
'''


def test_workers_end_with_a_tuner_killed_by_sigkill(tmp_path: Path) -> None:
    """Killed while a benchmark worker hangs in a kernel and a compile worker is stuck in a compile
    (it used to look for its tuner between tasks only, and outlived it by the compile's length):
    every worker, and every process of its group, is gone within seconds.  One tuner holds both
    (two compile workers: the stuck one, and the one that compiled the hang)."""
    path, log = _kernel(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    tuner = subprocess.Popen([sys.executable, "-c", TUNER, str(path), "stuck_compile", "hang"],
                             stdout=subprocess.PIPE, text=True, env=env)
    pids: list[int] = []
    try:
        assert tuner.stdout is not None
        pids = [int(p) for p in tuner.stdout.readline().split()]
        deadline = time.monotonic() + 30  # three workers' start-ups first
        while not {"hang", "compiling"} <= set(_modes(log)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert {"hang", "compiling"} <= set(_modes(log)), _modes(log)
        pids += _group_members(pids)
        tuner.send_signal(signal.SIGKILL)  # no finally, no atexit: only the workers themselves can notice
        tuner.wait()
        deadline = time.monotonic() + 5
        while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert all(_gone(p) for p in pids), [p for p in pids if not _gone(p)]
    finally:
        if tuner.poll() is None:
            tuner.kill()
            tuner.wait()
        for p in pids:  # what this test started and the code under test left behind
            if not _gone(p):
                os.kill(p, signal.SIGKILL)


def _group_members(leaders: list[int]) -> list[int]:
    """Every other process in the process groups these workers lead (a compile worker's watchdog)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) not in leaders:
            try:
                if os.getpgid(int(entry.name)) in leaders:
                    out.append(int(entry.name))
            except OSError:
                pass
    return out


def test_retiming_drops_a_config_after_its_failure(evaluator, monkeypatch: pytest.MonkeyPatch) -> None:
    ev, log = evaluator
    monkeypatch.setattr(ev, "bench_timeout", 1.5)  # the hang's cost
    trials = ev.retime([{"mode": "good"}, {"mode": "hang"}], rounds=4)
    assert trials[0].status is Status.OK and len(trials[0].extra["rounds_ms"]) == 4
    assert trials[1].status is Status.TIMEOUT
    assert _modes(log).count("hang") == 1  # one timeout, not one per round


def test_halt_survives_a_worker_cleared_by_its_owner_and_the_stream_always_resumes(
        tmp_path: Path, evaluator, monkeypatch: pytest.MonkeyPatch) -> None:
    """halt() read ``proc`` twice without the owner's lock (kill() sets it None); the AttributeError
    escaped the stream's finally, skipped the pool shutdowns and resume(): workers halted for good."""
    from kerntune.evaluate.triton_backend.worker_proc import _Worker

    w = _Worker(str(tmp_path / "none.py"), (1,), {})

    class Proc:  # the owner's kill() clears the worker between halt()'s two reads
        pid = 2**30  # above any pid_max: no such process group

        def poll(self) -> None:
            w.proc = None

        def wait(self, timeout: float | None = None) -> int:  # halt() waits for the killed worker
            return -9

    w.proc, w.inflight = Proc(), 1  # type: ignore[assignment]
    w.halt()
    assert w.halted

    ev, _ = evaluator
    bencher = ev.benchers[0]
    real_halt = bencher.halt

    def failing_halt() -> None:
        real_halt()
        raise AttributeError("'NoneType' object has no attribute 'pid'")

    with monkeypatch.context() as patched:
        patched.setattr(bencher, "halt", failing_halt)
        stream = ev.stream([{"mode": "good"}, {"mode": "hang"}, {"mode": "good2"}])
        _, first = next(stream)
        assert first.status is Status.OK
        stream.close()  # no error escapes, and no worker stays halted
        assert not any(x.halted for x in ev.benchers + ev.compilers)
    again = ev.evaluate([{"mode": "good2"}])
    assert [t.status for t in again] == [Status.OK], again[0].error


def test_compile_workers_run_no_thread_that_their_forks_would_inherit(evaluator) -> None:
    """fork_compile forks compile workers; a watcher thread there made each fork warn of deadlocks
    (Python 3.12).  Benchmark workers keep theirs; compile workers watch the tuner between tasks."""
    ev, log = evaluator
    threads = Path(f"{log}.threads")
    threads.unlink(missing_ok=True)
    assert [t.status for t in ev.evaluate([{"mode": "threads"}])] == [Status.OK]
    seen = dict(ln.split(" ", 1) for ln in reversed(threads.read_text().splitlines()))
    assert seen["compile"] == "MainThread", seen
    assert "kerntune-parent-watch" in seen["bench"], seen


def test_an_idle_compile_worker_ends_once_its_tuner_is_gone_though_its_pipe_stays_open(tmp_path: Path) -> None:
    path, _ = _kernel(tmp_path)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a tuner pid that is not this worker's parent: read as the tuner gone
    env = {**os.environ, "KERNTUNE_WORKER_PARENT": str(gone.pid),
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    worker = subprocess.Popen([sys.executable, "-m", "kerntune.evaluate.triton_backend.worker", str(path), "100",
                               "--compile-only"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                              start_new_session=True)
    try:
        assert worker.wait(timeout=60) != 0  # stdin still open here: the worker noticed by itself
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
