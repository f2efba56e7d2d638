"""The Triton evaluator's process machinery (compile pool, isolated benchmark
worker, classification, restarts, in-place restore) on CPU launchers: real
worker processes, real crashes and hangs, no GPU needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from kerntune.evaluate.trial import Status
from kerntune.evaluate.triton_backend.evaluator import TritonEvaluator
from kerntune.run.search import run_search
from kerntune.strategies import Budget

KERNELS = Path(__file__).parent / "data" / "cpu_kernels.py"


@pytest.fixture(scope="module")
def evaluator():
    # compile_timeout: each planted hang (three in the search) costs it; every other compile takes milliseconds
    ev = TritonEvaluator(KERNELS, (2000,), compile_workers=2, compile_timeout=4.0, bench_timeout=20.0, rep_ms=5)
    yield ev
    ev.close()


@pytest.fixture(scope="module")
def search(evaluator):
    """One exhaustive search over every planted config (each hang costs a compile timeout, each crash a
    worker's start-up): the winner's test and the failures' test check the same run."""
    return run_search(evaluator, "exhaustive", Budget(max_evals=100), seed=0)


def test_every_planted_failure_is_classified_and_the_run_goes_on(evaluator, search) -> None:
    by_mode = {t.config["mode"]: t for t in search.history if t.config["work"] == 1}
    assert by_mode["good"].status is Status.OK and by_mode["good"].time_ms > 0
    # (a CPU launcher's first launch is its compile: it dies in its compile worker, the compiler's crash)
    assert by_mode["crash"].status is Status.COMPILE_ERROR and "signal 11" in by_mode["crash"].error
    assert by_mode["hang"].status is Status.COMPILE_TIMEOUT
    assert by_mode["wrong"].status is Status.WRONG_RESULT and "differs" in by_mode["wrong"].error
    assert by_mode["nan"].status is Status.WRONG_RESULT and "NaN" in by_mode["nan"].error
    assert by_mode["raise_oor"].status is Status.RUNTIME_ERROR
    assert by_mode["raise_compile"].status is Status.COMPILE_ERROR
    assert by_mode["inplace"].status is Status.OK
    # The workers that died or were killed were replaced: the next batch measures normally.
    again = evaluator.evaluate([{"mode": "good", "work": 4}, {"mode": "inplace", "work": 4}])
    assert [t.status for t in again] == [Status.OK, Status.OK]


def test_in_place_writes_are_undone_between_configs(evaluator) -> None:
    # Each of these writes its input many times while being timed; each check must still
    # start from the original input, or the second and third would be wrong.
    trials = evaluator.evaluate([{"mode": "inplace", "work": w} for w in (1, 4, 16)])
    assert [t.status for t in trials] == [Status.OK] * 3


def test_stream_yields_every_config_once(evaluator) -> None:
    configs = [{"mode": m, "work": w} for m in ("good", "wrong") for w in (1, 4, 16)]
    seen = sorted(i for i, _ in evaluator.stream(configs))
    assert seen == list(range(len(configs)))


def test_a_search_over_planted_configs_finds_the_right_winner(evaluator, search) -> None:
    res = search
    assert len(res.history) == evaluator.space.count()
    assert res.best.config["mode"] in {"good", "inplace"}
    bad = {t.config["mode"] for t in res.history if not t.ok}
    assert bad == {"crash", "hang", "wrong", "nan", "raise_oor", "raise_compile", "illegal"}


def test_a_config_after_a_fatal_cuda_error_gets_a_fresh_worker() -> None:
    """After an illegal address the worker reports and exits; the next config must not be
    sent to the dying process (and blamed for its death)."""
    ev = TritonEvaluator(KERNELS, (500,), compile_workers=1, compile_timeout=8.0, rep_ms=2)
    try:
        configs = [{"mode": "illegal", "work": 1}] + [{"mode": "good", "work": w} for w in (1, 4, 16)]
        trials = ev.evaluate(configs)
    finally:
        ev.close()
    assert trials[0].status is Status.RUNTIME_ERROR and "illegal" in trials[0].error
    assert [t.status for t in trials[1:]] == [Status.OK] * 3


def test_compile_workers_are_capped_so_that_every_workers_inputs_fit_on_the_gpu() -> None:
    from kerntune.evaluate.triton_backend.sizing import memory_capped_workers

    gib = 2**30
    # 80 GiB GPU: 60% of it over twice 4 GiB of inputs is 6 per GPU, less the benchmark worker
    assert memory_capped_workers(15, 1, 4 * gib, 80 * 1024) == 5
    assert memory_capped_workers(30, 2, 4 * gib, 80 * 1024) == 10
    # small inputs: the core count decides; unknown size or memory: unchanged
    assert memory_capped_workers(15, 1, 0.1 * gib, 80 * 1024) == 15
    assert memory_capped_workers(15, 1, None, 80 * 1024) == 15
    assert memory_capped_workers(15, 1, 4 * gib, None) == 15
    # inputs too large for even one more worker: still one compile worker
    assert memory_capped_workers(15, 1, 60 * gib, 80 * 1024) == 1
