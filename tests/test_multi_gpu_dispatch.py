"""The Triton evaluator's multi-GPU dispatch on CPU: two benchmark workers with fake
device ids ("0", "1" as their CUDA_VISIBLE_DEVICES), real worker processes, one stream
of compiled configs.  The kernel file below logs, from inside each benchmark process,
its pid, its CUDA_VISIBLE_DEVICES and the config it launches, so the tests check what
the processes really did rather than the evaluator's own bookkeeping."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from kerntune.errors import KerntuneError
from kerntune.evaluate.trial import Status
from kerntune.evaluate.triton_backend.evaluator import TritonEvaluator
from kerntune.run.search import RunOptions, run_search
from kerntune.store import Store
from kerntune.strategies import Budget

# Configs that compile fine and then, in the benchmark worker: kill it (SIGKILL), raise what
# PyTorch raises after an illegal address (the worker reports and exits), or hang.
CRASH_N, FATAL_N, HANG_N = 1, 9, 12

KERNEL = '''
import os, signal, sys, time
from kerntune.space import Choice, Space

name = "cpu_devices"
space = Space([Choice("n", options=tuple(range(16)))], default={"n": 0})
BENCH = "--compile-only" not in sys.argv

def make_inputs(shape):
    return ([1.0] * shape[0],)

def reference(inputs):
    return [sum(inputs[0])]

def launch(config, inputs):
    if BENCH:
        with open(LOG, "a") as f:
            f.write(f"{os.getpid()} {os.environ.get('CUDA_VISIBLE_DEVICES')} {config['n']}\\n")
        if config["n"] == CRASH_N:
            os.kill(os.getpid(), signal.SIGKILL)
        if config["n"] == FATAL_N:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        if config["n"] == HANG_N:
            time.sleep(3600)
        time.sleep(BENCH_S)  # a benchmark slower than a compile, so both GPUs have work queued
    return [sum(inputs[0])]
'''


def _kernel(tmp_path: Path, bench_s: float = 0.1) -> tuple[Path, Path]:
    """The kernel file and its launch log; each benchmark launch takes ``bench_s``."""
    log = tmp_path / "launches.log"
    path = tmp_path / "devices_kernel.py"
    path.write_text(f"LOG = {str(log)!r}\nCRASH_N, FATAL_N, HANG_N = {CRASH_N}, {FATAL_N}, {HANG_N}\n"
                    f"BENCH_S = {bench_s!r}\n" + KERNEL)
    return path, log


def _launches(log: Path) -> list[tuple[int, str, int]]:
    if not log.exists():
        return []
    return [(int(p), d, int(n)) for p, d, n in (line.split() for line in log.read_text().splitlines())]


@pytest.fixture(scope="module")
def _shared_two_gpus(tmp_path_factory: pytest.TempPathFactory):
    """One evaluator for the tests on two fake GPUs: its three workers each import torch at start-up, the
    bulk of these tests' time, and none of the tests needs workers that measured nothing yet."""
    path, log = _kernel(tmp_path_factory.mktemp("two_gpus"))
    # bench_timeout: what the planted hang costs (in two tests); a benchmark here takes 0.2 s (two 0.1 s launches)
    ev = TritonEvaluator(path, (100,), compile_workers=1, compile_timeout=20.0, bench_timeout=2.0, rep_ms=5,
                         devices=["0", "1"])
    yield ev, log
    ev.close()


@pytest.fixture
def two_gpus(_shared_two_gpus):
    """The shared evaluator with its launch log emptied (no launch is in flight between tests), so each
    test sees the launches of its own configs only."""
    ev, log = _shared_two_gpus
    log.unlink(missing_ok=True)
    return ev, log


@pytest.fixture(scope="module")
def every_config_streamed(_shared_two_gpus):
    """Every config streamed once over both GPUs, the crash, the fatal error and the hang among them:
    what the stream yielded, in its order, and the launches the workers logged.  The spread's test and
    the faults' test check this one batch (its hang and the workers started again after each fault
    are most of its time)."""
    ev, log = _shared_two_gpus
    log.unlink(missing_ok=True)
    yielded = list(ev.stream([{"n": n} for n in range(16)]))
    return yielded, _launches(log)


def test_configs_spread_over_both_gpus_each_benchmarked_once(two_gpus, every_config_streamed) -> None:
    ev, _ = two_gpus
    assert ev.parallelism == 1 + 2  # one compile worker plus one benchmark worker per GPU
    yielded, launches = every_config_streamed
    assert sorted(i for i, _ in yielded) == list(range(16))  # every config exactly once
    trials = ev.evaluate([])  # an empty batch is fine too
    assert trials == []

    by_config: dict[int, set[tuple[int, str]]] = defaultdict(set)
    for pid, dev, n in launches:
        by_config[n].add((pid, dev))
    assert sorted(by_config) == list(range(16))
    # None twice: every config's launches came from one process on one device.
    assert all(len(v) == 1 for v in by_config.values()), by_config
    per_device = defaultdict(int)
    for (_, dev), in by_config.values():
        per_device[dev] += 1
    assert set(per_device) == {"0", "1"} and min(per_device.values()) >= 3, per_device


def test_a_crash_on_one_gpu_costs_that_config_only_and_the_worker_is_replaced(every_config_streamed) -> None:
    """Each benchmark worker has the next config queued in its pipe: when it dies, hangs or
    exits after a fatal error, that queued config must go to a fresh worker, not be blamed."""
    yielded, launches = every_config_streamed
    trials = [t for _, t in sorted(yielded, key=lambda it: it[0])]
    assert trials[CRASH_N].status is Status.RUNTIME_ERROR and "signal 9" in trials[CRASH_N].error
    assert trials[FATAL_N].status is Status.RUNTIME_ERROR and "illegal" in trials[FATAL_N].error
    assert trials[HANG_N].status is Status.TIMEOUT
    special = {CRASH_N, FATAL_N, HANG_N}
    assert [t.status for i, t in enumerate(trials) if i not in special] == [Status.OK] * 13
    crashed_dev = next(d for _, d, n in launches if n == CRASH_N)
    # Each trial names the GPU that measured it, and that is where the process ran.
    where = {n: d for _, d, n in launches}
    assert all(t.extra["gpu"] == where[t.config["n"]] for t in trials)
    # The dead worker was replaced: its device went on benchmarking in a new process.
    after = [p for p, d, n in launches[launches.index(next(x for x in launches if x[2] == CRASH_N)) + 1:]
             if d == crashed_dev]
    assert after and all(p != next(x for x in launches if x[2] == CRASH_N)[0] for p in after), launches
    # The two first workers, and the fresh ones after the crash and the fatal error (early in the batch).
    assert len({p for p, _, _ in launches}) >= 4


def test_leaders_are_retimed_on_one_gpu(two_gpus) -> None:
    ev, log = two_gpus
    ev.evaluate([{"n": n} for n in (2, 3, 4, 5)])
    before = len(_launches(log))
    again = ev.retime([{"n": n} for n in (2, 3, 4, 5)], rep_ms=5, rounds=2)
    assert [t.status for t in again] == [Status.OK] * 4
    retimed = _launches(log)[before:]
    assert {n for _, _, n in retimed} == {2, 3, 4, 5}
    assert {d for _, d, _ in retimed} == {"0"}  # the first GPU only, so the times compare


def test_store_and_resume_with_two_gpus(two_gpus, tmp_path: Path) -> None:
    ev, log = two_gpus
    with Store(tmp_path / "kt.db") as store:
        first = run_search(ev, "exhaustive", Budget(max_evals=6), run=RunOptions(store=store))
        assert len(store.trials(first.run_id)) == 6
        res = run_search(ev, "exhaustive", Budget(max_evals=100), run=RunOptions(store=store, run_id=first.run_id))
        rows = store.trials(res.run_id)
    assert res.resumed_trials == 6
    assert len(rows) == 16 and len({key for key, _, _ in rows}) == 16
    counts = defaultdict(set)
    for pid, _, n in _launches(log):
        counts[n].add(pid)
    # The resumed run measured only what the store lacked: no config went to a worker twice.
    assert all(len(p) == 1 for p in counts.values()), counts
    assert {t.extra.get("gpu") for _, t, _ in rows if t.ok} == {"0", "1"}


def _devices(path: Path, **kwargs: object) -> tuple[list[str | None], int]:
    """The devices an evaluator picks and its benchmark worker count; its workers, started by the
    constructor, are killed at once (left running, each went on to import torch for nothing)."""
    ev = TritonEvaluator(path, (10,), compile_workers=1, **kwargs)  # type: ignore[arg-type]
    try:
        return ev.devices, len(ev.benchers)
    finally:
        ev.close()


def test_gpu_count_follows_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path, _ = _kernel(tmp_path)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,GPU-5e1f")
    assert _devices(path) == (["3", "GPU-5e1f"], 2)
    assert _devices(path, gpus=1) == (["3"], 1)
    with pytest.raises(KerntuneError, match="only 2 GPU"):
        TritonEvaluator(path, (10,), compile_workers=1, gpus=3)
    with pytest.raises(KerntuneError, match="at least 1"):
        TritonEvaluator(path, (10,), compile_workers=1, gpus=0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert _devices(path) == ([None], 1)  # no GPU: one worker, environment untouched


def test_tune_command_with_gpus(tmp_path: Path) -> None:
    """`kerntune tune KERNEL --gpus N`, end to end in a subprocess, on two fake GPUs."""
    import json
    import os
    import sqlite3
    import subprocess
    import sys

    # 20 ms a launch: still far slower than a compile, and the runoff's and the re-timing's 70-90 launches
    # on the first GPU take 2 s instead of 7 s
    path, log = _kernel(tmp_path, bench_s=0.02)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="0,1")
    base = [sys.executable, "-m", "kerntune", "tune", str(path), "--shape", "100", "--store", str(tmp_path / "t.db"),
            "--no-report", "--compile-timeout", "20"]
    bad = subprocess.run(base + ["--gpus", "3"], capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 2 and "only 2 GPU(s) visible" in bad.stderr and "Traceback" not in bad.stderr
    proc = subprocess.run(base + ["--strategy", "exhaustive", "--budget", "8", "--gpus", "all", "--retime", "2"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    # the runoff settled the two leaders (equal costs: launched in turn on the first GPU's worker), then the
    # winner and the default config were re-timed (one line each; the default may be the winner)
    assert "runoff: 2 leaders screened" in proc.stderr, proc.stderr
    assert 1 <= proc.stderr.count("re-timed:") <= 2 and "over 10 rounds" in proc.stderr and "best:" in proc.stdout
    with sqlite3.connect(tmp_path / "t.db") as con:
        extras = [json.loads(r[0]) for r in con.execute("SELECT extra_json FROM trials")]
        cached = con.execute("SELECT problem_key FROM best_configs").fetchall()
    assert len(extras) == 8 and {e.get("gpu") for e in extras if e} == {"0", "1"}
    assert cached == [("100",)]


# A GPU whose benchmark worker cannot start (its make_inputs fails there only: a broken device).
BROKEN_GPU = '''
import os, sys, time
from kerntune.space import Choice, Space
name = "broken_gpu"
space = Space([Choice("n", options=tuple(range(16)))], default={"n": 0})
BENCH = "--compile-only" not in sys.argv
def make_inputs(shape):
    if BENCH and os.environ.get("CUDA_VISIBLE_DEVICES") in BROKEN:
        raise RuntimeError("CUDA error: unspecified launch failure (this GPU is broken)")
    return ([1.0] * shape[0],)
def reference(inputs):
    return [sum(inputs[0])]
def launch(config, inputs):
    if BENCH:
        with open(LOG, "a") as f:
            f.write(f"{os.getpid()} {os.environ.get('CUDA_VISIBLE_DEVICES')} {config['n']}\\n")
        time.sleep(0.05)
    return [sum(inputs[0])]
'''


def _broken_gpu_kernel(tmp_path: Path, broken: tuple[str, ...]) -> tuple[Path, Path]:
    log = tmp_path / "launches.log"
    path = tmp_path / "broken_gpu_kernel.py"
    path.write_text(f"LOG = {str(log)!r}\nBROKEN = {broken!r}\n" + BROKEN_GPU)
    return path, log


def test_a_gpu_whose_worker_cannot_start_hands_its_configs_to_the_others(tmp_path: Path, caplog) -> None:
    """GPU "0" fails every start-up: its configs are not lost as runtime errors, they go to GPU "1";
    after three start-ups in a row it is left out (said once), and re-timing runs on GPU "1"."""
    import logging

    path, log = _broken_gpu_kernel(tmp_path, ("0",))
    ev = TritonEvaluator(path, (100,), compile_workers=1, compile_timeout=20.0, bench_timeout=5.0, rep_ms=2,
                         devices=["0", "1"], memory_limit_mb=0)
    try:
        with caplog.at_level(logging.WARNING, logger="kerntune.evaluate"):
            trials = ev.evaluate([{"n": n} for n in range(10)])
            again = ev.retime([{"n": 2}, {"n": 3}], rep_ms=2, rounds=2)
    finally:
        ev.close()
    assert [t.status for t in trials] == [Status.OK] * 10, [(t.status, t.error) for t in trials if not t.ok]
    assert {t.extra["gpu"] for t in trials} == {"1"}
    said = [r.getMessage() for r in caplog.records if "failed to start" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("GPU 0") and "this GPU is broken" in said[0]
    assert [t.status for t in again] == [Status.OK] * 2
    assert {d for _, d, _ in _launches(log)} == {"1"}


def test_a_run_whose_every_gpu_fails_to_start_fails_with_the_error(tmp_path: Path) -> None:
    path, _ = _broken_gpu_kernel(tmp_path, ("0", "1"))
    ev = TritonEvaluator(path, (100,), compile_workers=1, compile_timeout=20.0, bench_timeout=5.0, rep_ms=2,
                         devices=["0", "1"], memory_limit_mb=0)
    try:
        with pytest.raises(KerntuneError, match="this GPU is broken"):
            ev.evaluate([{"n": n} for n in range(6)])
        with pytest.raises(KerntuneError, match="this GPU is broken"):
            ev.retime([{"n": 1}])
    finally:
        ev.close()
