"""A kernel file's own ``reference()`` that never returns (or kills its worker), on CPU launchers in real
worker processes: the first benchmark worker that meets it is killed at the timeout, the config that was
waiting is not blamed, and every config from then on fails at once with the reference's message, instead
of each paying a timeout (and a fresh worker that calls ``reference()`` again) as a ``timeout`` of its own.
A reference that is slow but returns does not eat the time of the config behind it."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from kerntune.evaluate.trial import Status
from kerntune.evaluate.triton_backend.evaluator import TritonEvaluator

# REFERENCE is "hang", "exit", "cuda" or "slow"; each call of reference() and each launch in the benchmark
# worker is logged, so the tests see what the processes did.
KERNEL = '''
import os, sys, time
from kerntune.space import Choice, Space
name = "reference_hang"
space = Space([Choice("n", options=tuple(range(8)))], default={"n": 0})
BENCH = "--compile-only" not in sys.argv
def make_inputs(shape):
    return ([1.0] * shape[0],)
def _log(what):
    with open(LOG, "a") as f:
        f.write(f"{os.getpid()} {what}\\n")
def reference(inputs):
    _log("reference")
    if REFERENCE == "hang":
        time.sleep(3600)
    if REFERENCE == "exit":
        os._exit(7)
    if REFERENCE == "cuda":  # a sticky CUDA error: the worker's context is gone, it exits
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    if REFERENCE == "slow":
        time.sleep(4.0)
    return [sum(inputs[0])]
def launch(config, inputs):
    if BENCH:
        _log(f"launch {config['n']}")
        if REFERENCE == "slow":  # about 1.6 s a config: on a GPU Triton's do_bench launches about 8 times
            time.sleep(0.2 if _on_gpu() else 0.8)
    return [sum(inputs[0])]
def _on_gpu():
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False
'''


def _kernel(tmp_path: Path, reference: str) -> tuple[Path, Path]:
    log = tmp_path / "calls.log"
    path = tmp_path / f"reference_hang_{reference}.py"
    path.write_text(f"LOG = {str(log)!r}\nREFERENCE = {reference!r}\n" + KERNEL)
    return path, log


def _calls(log: Path) -> list[str]:
    return [ln.split(" ", 1)[1] for ln in log.read_text().splitlines()] if log.exists() else []


def test_a_hanging_reference_costs_one_timeout_and_fails_every_config_at_once(tmp_path: Path, caplog) -> None:
    """It used to cost every config a full timeout, each reported as the config's own ``timeout``."""
    path, log = _kernel(tmp_path, "hang")
    timeout, n = 2.0, 8
    ev = TritonEvaluator(path, (100,), compile_workers=1, compile_timeout=20.0, bench_timeout=timeout, rep_ms=2,
                         memory_limit_mb=0)
    try:
        ev.wait_ready()  # the workers' start-ups are not the run's
        with caplog.at_level(logging.WARNING, logger="kerntune.evaluate"):
            t0 = time.monotonic()
            trials = ev.evaluate([{"n": k} for k in range(n)])
            first_s = time.monotonic() - t0
            # a later batch, and the re-timing of leaders, fail at once too: no worker meets reference() again
            t1 = time.monotonic()
            again = ev.evaluate([{"n": 1}, {"n": 2}])
            retimed = ev.retime([{"n": 3}])
            later_s = time.monotonic() - t1
    finally:
        ev.close()
    assert first_s < 4 * timeout, f"{n} configs took {first_s:.1f} s: a timeout each?"
    assert later_s < timeout, later_s
    for t in trials + again + retimed:
        assert t.status is Status.RUNTIME_ERROR, t  # never a timeout of the config's own
        assert f"reference() in {path.name} did not return within {timeout:g} s" in (t.error or ""), t.error
        assert "fix it or remove it" in t.error
    assert _calls(log) == ["reference"], _calls(log)  # called once, and no config was launched
    said = [r for r in caplog.records if "reference()" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING, [r.getMessage() for r in said]
    assert "did not return" in said[0].getMessage()


@pytest.mark.parametrize("reference, said", [
    ("exit", ("killed its worker", "exit code 7")),              # each fresh worker called it again and died
    ("cuda", ("reference() failed", "illegal memory access")),   # each config got a fresh worker (on a GPU:
])                                                              # seconds of start-up) that called it again
def test_a_reference_that_ends_its_worker_is_met_once(tmp_path: Path, reference: str, said: tuple[str, ...]) -> None:
    """A reference() that kills its worker, or leaves its CUDA context unusable, used to cost every config
    a crash of its own; now it is called once and every config fails with its message."""
    path, log = _kernel(tmp_path, reference)
    ev = TritonEvaluator(path, (100,), compile_workers=1, compile_timeout=20.0, bench_timeout=10.0, rep_ms=2,
                         memory_limit_mb=0)
    try:
        trials = ev.evaluate([{"n": k} for k in range(4)])
    finally:
        ev.close()
    for t in trials:
        assert t.status is Status.RUNTIME_ERROR, t
        assert all(text in (t.error or "") for text in said), t.error
        if reference == "exit":
            assert f"reference() in {path.name} killed its worker" in t.error
    assert _calls(log) == ["reference"], _calls(log)


def test_a_slow_reference_that_returns_leaves_the_config_its_whole_timeout(tmp_path: Path) -> None:
    """reference() (4 s) and the config behind it (about 1.6 s: on CPU launchers its checked launch and one
    timed, on a GPU the 8 or so launches of do_bench) shared one 5-s timeout, and the config was blamed as
    a timeout; each has its own now.  (With 2 s and 3 s, a clean clone's run on two loaded cores took the
    config past its own timeout: the headroom is now 3.4 s, and the two together still overrun.)"""
    path, log = _kernel(tmp_path, "slow")
    ev = TritonEvaluator(path, (100,), compile_workers=1, compile_timeout=20.0, bench_timeout=5.0, rep_ms=2,
                         memory_limit_mb=0)
    try:
        ev.wait_ready()
        trials = ev.evaluate([{"n": 0}, {"n": 1}])
    finally:
        ev.close()
    assert [t.status for t in trials] == [Status.OK, Status.OK], trials
    assert _calls(log).count("reference") == 1, _calls(log)
