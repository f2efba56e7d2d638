"""Fault injection into the Triton evaluator's workers, on CPU launchers: each
planted fault is classified, costs only its own config, and the run still
declares the right winner.

The faults strike where they strike on a GPU: a compile that never ends
(compile worker), and in the benchmark worker only — after a clean compile — a
segfault (a real NULL dereference through ctypes), an abort, a silent exit, a
hang, wrong output, NaN and inf.  A config that allocates far more host memory
than the worker's limit fails with MemoryError; one that prints to stdout must
not corrupt the results pipe.  GPU faults (illegal address, device OOM) are
tested on a GPU elsewhere.  Real worker processes throughout, no mocks.
"""

from __future__ import annotations

import os
import resource
import textwrap
from pathlib import Path

import pytest

from kerntune.evaluate.trial import Status
from kerntune.evaluate.triton_backend.evaluator import TritonEvaluator, default_memory_limit_mb
from kerntune.run.search import run_search
from kerntune.strategies import Budget

KERNEL = textwrap.dedent('''
    """Planted faults for tests/test_faults_workers.py (CPU launchers, no GPU)."""
    import ctypes, json, os, resource, sys, time
    from kerntune.space import Choice, Space

    name = "cpu_faults"
    MODES = ("good", "noisy", "compile_hang", "bench_hang", "segfault", "abort", "exit", "wrong", "nan", "inf",
             "hog")
    space = Space([Choice("mode", options=MODES), Choice("work", options=(1, 4))],
                  [lambda c: c["mode"] == "good" or c["work"] == 1],
                  default={"mode": "good", "work": 4})
    IN_BENCH = "--compile-only" not in sys.argv      # faults that strike only when the kernel runs
    _probed = set()

    def make_inputs(shape):
        return ([float(i % 7) for i in range(shape[0])],)

    def reference(inputs):
        return [sum(inputs[0])]

    def _probe(config):
        path = os.environ.get("KERNTUNE_FAULTS_PROBE")
        key = (config["mode"], config["work"])
        if path and key not in _probed:
            _probed.add(key)
            with open(path, "a") as fh:
                fh.write(json.dumps({"mode": config["mode"], "work": config["work"], "bench": IN_BENCH,
                                     "pid": os.getpid(), "ppid": os.getppid(),
                                     "data_limit": resource.getrlimit(resource.RLIMIT_DATA)[0]}) + "\\n")

    def launch(config, inputs):
        _probe(config)
        mode, data = config["mode"], inputs[0]
        if mode == "compile_hang" and not IN_BENCH:
            time.sleep(3600)
        if IN_BENCH:
            if mode == "bench_hang":
                time.sleep(3600)
            if mode == "segfault":
                ctypes.string_at(0)            # a real NULL dereference: SIGSEGV
            if mode == "abort":
                os.abort()
            if mode == "exit":
                os._exit(0)                    # dies without a word, exit code 0
        if mode == "hog":
            blob = bytearray(64 << 30)         # 64 GiB: only a limit stops it (calloc'd lazily, never touched)
            del blob
        if mode == "noisy":                    # debug output on stdout, Python's and the C library's
            print("debug: launching", config)
            os.write(1, b"{\\"status\\": \\"ok\\", \\"time_ms\\": 0.0}\\n")
        total = 0.0
        for _ in range(config["work"] * (16 if mode == "noisy" else 1)):
            total = sum(data)
        if mode == "wrong":
            total *= 1.5
        if mode == "nan":
            total = float("nan")
        if mode == "inf":
            total = float("inf")
        return [total]
''')


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("faults") / "cpu_faults.py"
    path.write_text(KERNEL)
    return path


def _probes(path: Path) -> list[dict]:
    import json

    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_every_fault_is_classified_and_the_run_declares_the_right_winner(kernel: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():  # measured on an H200 (torch 2.11): every worker died of a MemoryError importing
        pytest.skip("CPU-launcher faults under a 1 GiB address-space limit: on a CUDA machine the worker's own"
                    " imports need more than that (benchmarks/gpu_checks covers the faults on a GPU)")
    probe = tmp_path / "probe.jsonl"
    monkeypatch.setenv("KERNTUNE_FAULTS_PROBE", str(probe))
    # each planted hang costs its timeout; every other compile or benchmark here takes milliseconds
    ev = TritonEvaluator(kernel, (2000,), compile_workers=2, compile_timeout=4.0, bench_timeout=4.0, rep_ms=5,
                         memory_limit_mb=1024)
    try:
        res = run_search(ev, "exhaustive", Budget(max_evals=100), seed=0)
    finally:
        ev.close()
    by_mode = {t.config["mode"]: t for t in res.history if t.config["work"] == 1}
    assert len(res.history) == ev.space.count() == 12
    assert res.best is not None and res.best.config == {"mode": "good", "work": 1}
    expected = {
        "good": (Status.OK, None), "noisy": (Status.OK, None),
        "compile_hang": (Status.COMPILE_TIMEOUT, "no result within 4 s"),
        "bench_hang": (Status.TIMEOUT, "no result within 4 s"),
        "segfault": (Status.RUNTIME_ERROR, "signal 11"), "abort": (Status.RUNTIME_ERROR, "signal 6"),
        "exit": (Status.RUNTIME_ERROR, "exit code 0"),
        "wrong": (Status.WRONG_RESULT, "differs"), "nan": (Status.WRONG_RESULT, "NaN"),
        "inf": (Status.WRONG_RESULT, "differs"), "hog": (Status.RUNTIME_ERROR, "out of host memory"),
    }
    for mode, (status, needle) in expected.items():
        trial = by_mode[mode]
        assert trial.status is status, (mode, trial)
        if needle:
            assert needle in (trial.error or ""), (mode, trial.error)
    assert by_mode["noisy"].time_ms > by_mode["good"].time_ms  # really measured, not a stray line from stdout
    assert "1024 MiB" in by_mode["hog"].error
    # Every crash, hang and exit in the benchmark worker cost a worker: the configs after it
    # were benchmarked by a fresh process.
    bench_pids = [p["pid"] for p in _probes(probe) if p["bench"]]
    assert len(set(bench_pids)) >= 5, bench_pids   # segfault, abort, exit, hang each ended one


@pytest.fixture(scope="module")
def default_limit_run(kernel: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[list, list[dict]]:
    """A good config, a segfault and the config queued behind it, under the default heap limit: the
    trials and the workers' probes.  The crash's test and the memory limit's test check this one run
    (each run here starts two workers that import torch)."""
    probe = tmp_path_factory.mktemp("default_limit") / "probe.jsonl"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KERNTUNE_FAULTS_PROBE", str(probe))
        mp.delenv("KERNTUNE_WORKER_MEMORY_MB", raising=False)
        ev = TritonEvaluator(kernel, (500,), compile_workers=1, compile_timeout=8.0, bench_timeout=8.0, rep_ms=2)
        try:
            trials = ev.evaluate([{"mode": "good", "work": 4}, {"mode": "segfault", "work": 1},
                                  {"mode": "good", "work": 1}])
        finally:
            ev.close()
    return trials, _probes(probe)


def test_a_crashed_benchmark_worker_is_replaced_and_the_next_config_measures(default_limit_run) -> None:
    trials, probes = default_limit_run
    assert [t.status for t in trials] == [Status.OK, Status.RUNTIME_ERROR, Status.OK]
    pids = {(p["mode"], p["work"]): p["pid"] for p in probes if p["bench"]}
    assert pids[("good", 4)] == pids[("segfault", 1)] != pids[("good", 1)]


def test_kernel_code_runs_only_in_worker_processes_under_a_memory_limit(kernel: Path, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        default_limit_run) -> None:
    """The launcher never runs in the tuning process, and each worker has a heap limit:
    the default (half the memory), or $KERNTUNE_WORKER_MEMORY_MB; 0 turns it off."""
    own_limit = resource.getrlimit(resource.RLIMIT_DATA)
    for env, expected_mb in ((None, default_memory_limit_mb()), ("1536", 1536), ("0", None)):
        if env is None:  # the default: the crash's run (its fresh benchmark worker included)
            trials, runs = default_limit_run
            assert [t.status for t in trials if t.config["mode"] == "good"] == [Status.OK] * 2
        else:
            probe = tmp_path / f"probe-{env}.jsonl"
            monkeypatch.setenv("KERNTUNE_FAULTS_PROBE", str(probe))
            monkeypatch.setenv("KERNTUNE_WORKER_MEMORY_MB", env)
            ev = TritonEvaluator(kernel, (500,), compile_workers=1, compile_timeout=8.0, rep_ms=2)
            try:
                assert [t.status for t in ev.evaluate([{"mode": "good", "work": 1}])] == [Status.OK]
            finally:
                ev.close()
            runs = _probes(probe)
        assert {p["bench"] for p in runs} == {True, False}          # compiled, then benchmarked
        assert all(p["pid"] != os.getpid() and p["ppid"] == os.getpid() for p in runs)
        limits = {p["data_limit"] for p in runs}
        if expected_mb is None:
            assert limits == {own_limit[0]}
        else:
            assert limits == {expected_mb << 20}, (env, limits)
    assert resource.getrlimit(resource.RLIMIT_DATA) == own_limit  # the tuner's own limit is untouched


def test_a_bad_memory_limit_setting_is_a_user_error(kernel: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kerntune.errors import KerntuneError

    monkeypatch.setenv("KERNTUNE_WORKER_MEMORY_MB", "lots")
    with pytest.raises(KerntuneError, match="KERNTUNE_WORKER_MEMORY_MB"):
        TritonEvaluator(kernel, (500,), compile_workers=1)
