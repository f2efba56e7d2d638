"""The winner of a GPU run settled by the runoff in the Triton benchmark worker (kerntune.evaluate.retime,
kerntune.evaluate.runoff), on CPU: a real worker process runs a kernel file whose launch spends a
known cost per config by sleeping (without a GPU the runoff times launches on the wall clock), and the search's
history carries screening times that misread those costs, as a window taken in a drifting clock state
does.  The runoff must pick the config whose launches are cheapest, not the screening best."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kerntune.evaluate.retime import confirm, settle_leaders
from kerntune.evaluate.trial import Status, Trial
from kerntune.evaluate.triton_backend.evaluator import TritonEvaluator

KERNEL = '''
import time
from kerntune.space import Choice, Space

name = "cpu_costs"
space = Space([Choice("n", options=(0, 1, 2, 3, 4))], default={"n": 0})
# config 2 is the cheapest the runoff may see, 4x under the next: a sleep's wake-up comes late on a
# loaded CPU (xdist beside compiling workers), and at 2x one run read the 1 ms config above the 2 ms one
COST_MS = {0: 6.0, 1: 4.0, 2: 1.0, 3: 4.4, 4: 0.2}

def make_inputs(shape):
    return ([1.0] * shape[0],)

def reference(inputs):
    return [sum(inputs[0])]

def launch(config, inputs):
    time.sleep(COST_MS[config["n"]] / 1000)  # a sleep, not a busy wait: its wall time holds on a busy CPU
    return [sum(inputs[0])]
'''


@pytest.fixture
def evaluator(tmp_path: Path):
    path = tmp_path / "costs_kernel.py"
    path.write_text(KERNEL)
    ev = TritonEvaluator(path, (10,), compile_workers=1, compile_timeout=20.0, bench_timeout=20.0, rep_ms=5)
    yield ev
    ev.close()


def _history() -> list[Trial]:
    """Screening as a drifting clock could leave it: config 1 read fastest, config 2 (the cheapest
    launch) 40% slow, config 4 far slow (beyond the runoff's 1.5x: it is not re-timed, whatever its
    launches cost)."""
    return [Trial({"n": 1}, Status.OK, 1.0, [1.0]), Trial({"n": 2}, Status.OK, 1.4, [1.4]),
            Trial({"n": 3}, Status.OK, 1.1, [1.1]), Trial({"n": 0}, Status.OK, 1.45, [1.45]),
            Trial({"n": 4}, Status.OK, 2.0, [2.0])]


def test_runoff_in_the_worker_picks_the_cheapest_launch_over_the_screening_best(evaluator) -> None:
    picked, reply = settle_leaders(evaluator, _history())
    assert picked is not None and picked.config == {"n": 2}, reply
    assert reply is not None and sorted(reply["screen"]) == ["0", "1", "2", "3"]  # config 4 left out
    assert reply["timed"] >= 4 and 0.5 < reply["time_ms"] < 1.8  # wall-clock launches of the 1 ms config


def test_confirm_re_times_the_runoff_winner_beside_the_default(evaluator) -> None:
    found = confirm(evaluator, _history(), n_leaders=16, baseline={"n": 0}, rounds=3)
    assert found.winner is not None and found.winner.config == {"n": 2}
    assert [t.config for t in found.retimed] == [{"n": 2}, {"n": 0}] and found.baseline is found.retimed[1]
    assert found.runoff is not None and found.to_dict()["runoff"]["winner"] == 2
    # windows of the 1 ms config against the 6 ms default: a speedup near 6 (a sleep's wake-up comes
    # late on a busy machine, so only a floor)
    assert found.speedup is not None and found.speedup.n == 3 and found.speedup.median > 1.5


def test_without_a_runoff_the_leaders_are_re_timed_and_the_lowest_median_wins(evaluator) -> None:
    """An evaluator that has no runoff (the Ray wrapper of a replay, Helion): the rule before it."""

    class WindowsOnly:
        space = evaluator.space

        def retime(self, configs, rounds=None):
            return evaluator.retime(configs, rounds=rounds)

    # three rounds: a median of two is a mean, and one window stalled by a loaded CI machine (a 1 ms
    # sleep waking late) read the 1 ms config above the 4 ms ones
    found = confirm(WindowsOnly(), _history(), n_leaders=3, baseline={"n": 0}, rounds=3)
    assert found.runoff is None and len(found.retimed) == 4  # three leaders and the default
    assert found.winner is not None and found.winner.config == {"n": 2}


def test_an_evaluator_that_only_re_times_starts_no_compile_worker(tmp_path: Path) -> None:
    """A transform's side-by-side rounds only re-time, yet each evaluator started its compile workers
    (torch imported, the inputs built, on a GPU a CUDA context) for nothing; ``lazy_compilers`` starts
    them only when a config is sent to them."""
    path = tmp_path / "costs_kernel.py"
    path.write_text(KERNEL)
    ev = TritonEvaluator(path, (10,), compile_workers=1, compile_timeout=20.0, bench_timeout=20.0, rep_ms=5,
                         lazy_compilers=True)
    try:
        trials = ev.retime([{"n": 2}, {"n": 0}], rounds=2)
        assert all(t.ok for t in trials) and [t.config for t in trials] == [{"n": 2}, {"n": 0}]
        assert all(w.proc is None for w in ev.compilers) and ev.benchers[0].proc is not None
        assert ev.evaluate([{"n": 1}])[0].ok  # a config sent to them starts them
        assert all(w.proc is not None for w in ev.compilers)
    finally:
        ev.close()


def test_the_gpu_is_asked_once_per_process_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every evaluator started a process importing torch to ask the GPU's name and properties; a
    ``transform`` or ``--shapes`` run builds one evaluator per step or shape."""
    from kerntune.evaluate.triton_backend import sizing

    monkeypatch.setattr(sizing, "no_gpu_driver", lambda: False)  # as on a machine with a GPU driver
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "kerntune-test-probe"}
    first = sizing.probe_device(env)  # no such GPU: "unknown GPU", asked of a child all the same
    assert first["name"] == "unknown GPU"

    def no_second_child(*a, **k):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("asked the GPU again")

    monkeypatch.setattr(sizing.subprocess, "run", no_second_child)
    assert sizing.probe_device(dict(env)) == first
    with pytest.raises(AssertionError, match="asked the GPU again"):  # another GPU is asked
        sizing.probe_device({**env, "CUDA_VISIBLE_DEVICES": "kerntune-test-other"})


def test_without_a_gpu_driver_no_child_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no driver library loads, the probe's child (importing torch, 2-3 s of CPU) could only
    find no GPU: the answer is given without it, as the child would give it."""
    from kerntune.evaluate.triton_backend import sizing

    def no_child(*a, **k):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("a child was asked")

    monkeypatch.setattr(sizing.subprocess, "run", no_child)
    monkeypatch.setattr(sizing.ctypes, "CDLL", lambda name: (_ for _ in ()).throw(OSError(name)))
    monkeypatch.setattr(sizing.os.path, "exists", lambda p: False)
    monkeypatch.setattr(sizing.sys, "platform", "linux")
    assert sizing.probe_device({**os.environ, "CUDA_VISIBLE_DEVICES": "kerntune-test-nodriver"}) == {"name": "unknown GPU"}
    monkeypatch.setattr(sizing.os.path, "exists", lambda p: p == "/dev/kfd")  # an AMD GPU's node: asked
    with pytest.raises(AssertionError, match="a child was asked"):
        sizing.probe_device({**os.environ, "CUDA_VISIBLE_DEVICES": "kerntune-test-kfd"})
