"""Compile workers' start-ups take turns with their GPU's timings (``worker_life.gpu_turn``), on CPU
launchers in real worker processes.

A compile worker's start-up builds its inputs, which for a package kernel launches the package call's
other kernels on the GPU.  Nothing synchronised that with the benchmark worker: a compile worker restarted
after a compile timeout ran its start-up inside a config's timed window, and at start the benchmark
worker's own ``make_inputs`` (a package's autotune: the baseline's pick) ran beside every compile
worker's.  Each worker here logs its ``make_inputs`` and every timed launch, with its role and the
system-wide monotonic clock."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from kerntune.evaluate.trial import Status
from kerntune.evaluate.triton_backend.evaluator import TritonEvaluator

KERNEL = '''
import os, sys, time
from kerntune.space import Choice, Space
name = "quiet"
space = Space([Choice("mode", options=("good", "hang")), Choice("n", options=tuple(range(40)))],
              default={"mode": "good", "n": 0})
ROLE = "compile" if "--compile-only" in sys.argv else "bench"

def _log(kind, t0, t1):
    with open(LOG, "a") as f:
        f.write(f"{os.getpid()} {ROLE} {kind} {t0!r} {t1!r}\\n")

def make_inputs(shape):  # a start-up's GPU work (a package call), made long
    t0 = time.monotonic()
    time.sleep(STARTUP_S[ROLE])
    _log("make_inputs", t0, time.monotonic())
    return ([1.0] * shape[0],)

def reference(inputs):
    return [sum(inputs[0])]

def _timed():  # "cpu": called in a window of the worker's timer (its "gpu" one on a GPU machine); "settle": in the runoff; else None
    f = sys._getframe(2)
    while f is not None:
        if f.f_code.co_name in ("cpu", "gpu", "settle"):
            return "settle" if f.f_code.co_name == "settle" else "cpu"
        f = f.f_back
    return None

def launch(config, inputs):
    if ROLE == "compile":  # a slow compile keeps configs pending; "hang" times out, the worker restarts
        time.sleep(3600 if config["mode"] == "hang" else 0.2)
        return [sum(inputs[0])]
    t0 = time.monotonic()
    time.sleep(0.002)
    out = [sum(inputs[0])]
    timed = _timed()
    if timed:
        _log(timed, t0, time.monotonic())
    return out
'''

Span = tuple[int, str, str, float, float]


def _kernel(tmp_path: Path, compile_s: float, bench_s: float) -> tuple[Path, Path]:
    """The kernel file, its make_inputs taking ``compile_s`` in compile workers, ``bench_s`` in benchmark ones."""
    log = tmp_path / "spans.log"
    path = tmp_path / "quiet_kernel.py"
    path.write_text(f"LOG = {str(log)!r}\nSTARTUP_S = {dict(compile=compile_s, bench=bench_s)!r}\n" + KERNEL)
    return path, log


def _spans(log: Path) -> list[Span]:
    out = []
    for ln in log.read_text().splitlines():
        pid, role, kind, t0, t1 = ln.split()
        out.append((int(pid), role, kind, float(t0), float(t1)))
    return out


def _overlaps(a: Span, b: Span) -> bool:
    return a[3] < b[4] and b[3] < a[4]


def _lock_of(ev: TritonEvaluator) -> str:
    return next(a.partition("=")[2] for a in ev.benchers[0].args if a.startswith("--gpu-lock="))


def _hold_shared(lock: str, seconds: float) -> subprocess.Popen[str]:
    """A process standing in for a compile worker's start-up: holds ``lock`` shared for ``seconds``;
    ``_released`` waits for it and says when it let go."""
    code = ("import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_SH);"
            " end = time.monotonic() + float(sys.argv[2]); print('held', flush=True);"
            " time.sleep(end - time.monotonic()); print(repr(time.monotonic()), flush=True)")
    proc = subprocess.Popen([sys.executable, "-c", code, lock, str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def _released(proc: subprocess.Popen[str]) -> float:
    out, _ = proc.communicate(timeout=30)
    return float(out.strip())


def test_no_compile_worker_start_up_overlaps_a_timed_window_or_the_benchmark_workers_start_up(tmp_path) -> None:
    """Before, the compile worker restarted after the compile timeout built its inputs while the
    benchmark worker timed configs, and every compile worker's start-up ran beside the benchmark
    worker's (whose make_inputs runs a package's own autotune)."""
    # a benchmark worker starts a second or more after the compile workers here: their start-ups are long
    path, log = _kernel(tmp_path, 3.0, 0.5)
    ev = TritonEvaluator(path, (100,), compile_workers=2, compile_timeout=2.0, bench_timeout=20.0, rep_ms=100)
    try:
        configs = [{"mode": "hang", "n": 0}] + [{"mode": "good", "n": n} for n in range(40)]
        trials = ev.evaluate(configs)
    finally:
        ev.close()
    assert trials[0].status is Status.COMPILE_TIMEOUT
    assert all(t.status is Status.OK for t in trials[1:]), [t.error for t in trials[1:] if not t.ok]
    spans = _spans(log)
    starts = [s for s in spans if s[1] == "compile" and s[2] == "make_inputs"]
    assert len({s[0] for s in starts}) >= 3  # the two first compile workers and the one restarted after the hang
    busy = [s for s in spans if s[1] == "bench"]  # timed launches and the benchmark worker's make_inputs
    assert any(s[2] == "cpu" for s in busy) and any(s[2] == "make_inputs" for s in busy)
    clashes = [(c, b) for c in starts for b in busy if _overlaps(c, b)]
    assert not clashes, f"{len(clashes)} overlaps, the first: {clashes[0]}"
    # compile workers still start in parallel with each other (a shared lock)
    first = sorted(starts, key=lambda s: s[3])[:2]
    assert _overlaps(first[0], first[1])


def test_retime_and_runoff_wait_for_a_compile_start_up_and_are_not_charged_the_wait(tmp_path) -> None:
    """The re-timing's and the runoff's timed launches wait while a compile worker's start-up holds the
    GPU (here a process holding the lock shared for 2.5 s), and the wait is not counted in the task's
    timeout (1.5 s): it is not the config's, which would otherwise time out."""
    path, log = _kernel(tmp_path, 0.0, 0.0)
    # re-timing and the runoff need no compile worker: none is started
    ev = TritonEvaluator(path, (100,), compile_workers=1, compile_timeout=20.0, bench_timeout=1.5, rep_ms=20,
                         lazy_compilers=True)
    configs = [{"mode": "good", "n": 1}, {"mode": "good", "n": 2}]
    try:
        # the benchmark worker's start-up is over (its own turn on the lock) before the holder takes the lock
        assert ev.benchers[0].run({"mode": "ping"}, 60.0) == {"status": "ok"}
        holder = _hold_shared(_lock_of(ev), 2.5)
        trials = ev.retime(configs, rounds=1)
        let_go = _released(holder)
        assert [t.status for t in trials] == [Status.OK, Status.OK], [t.error for t in trials]
        windows = [s for s in _spans(log) if s[2] == "cpu"]
        assert windows and min(s[3] for s in windows) >= let_go
        holder = _hold_shared(_lock_of(ev), 2.5)
        res = ev.runoff(configs, [t.time_ms for t in trials])
        let_go = _released(holder)
        assert res is not None
        runoff = [s for s in _spans(log) if s[2] == "settle"]
        assert runoff and min(s[3] for s in runoff) >= let_go
    finally:
        ev.close()


def test_a_worker_waiting_for_the_gpu_goes_on_after_its_bound_and_at_once_when_the_holder_dies(tmp_path) -> None:
    """A compile worker's start-up that hangs holding the lock must not stall timings for ever: the wait is
    bounded (then the worker goes on, and says so before and after, for its parent's clock), and a
    holder killed mid start-up lets go at once (flock)."""
    from kerntune.evaluate.triton_backend.worker_life import gpu_turn

    lock = tmp_path / "gpu0.lock"
    lock.touch()
    holder = _hold_shared(str(lock), 60.0)
    said: list[dict[str, str]] = []
    t0 = time.monotonic()
    with gpu_turn(str(lock), exclusive=True, say=said.append, wait_s=0.5):
        waited = time.monotonic() - t0
    assert 0.4 < waited < 5 and said == [{"gpu": "waiting"}, {"gpu": "held"}]
    holder.kill()
    holder.wait()
    said.clear()
    with gpu_turn(str(lock), exclusive=True, say=said.append, wait_s=30):
        pass
    assert said == []  # free at once: nothing to wait for
