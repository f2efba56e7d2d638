"""kerntune as Helion's autotuner (kerntune/helion/tuner.py) on Helion 1.4.0's own search path.

The kernels run on the CPU in Triton's interpreter (TRITON_INTERPRET=1) with Helion's in-process
benchmark; Helion's GPU timer (``do_bench``) is replaced by a wall-clock one, so these tests skip
where a GPU is present, and where Helion is not installed (CI).  Locally:
``PYTHONPATH=/path/to/helion-1.4.0 pytest tests/test_helion_tuner.py``.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch")
if torch.cuda.is_available():
    pytest.skip("these tests replace Helion's GPU timer with a wall clock: CPU only", allow_module_level=True)
os.environ.setdefault("TRITON_INTERPRET", "1")
helion = pytest.importorskip("helion")
if os.environ.get("TRITON_INTERPRET") != "1":  # triton imported without it: not what these tests are for
    pytest.skip("needs TRITON_INTERPRET=1 before triton is imported", allow_module_level=True)

import helion.autotuner as helion_autotuner  # noqa: E402
import helion.autotuner.base_search as base_search  # noqa: E402
import helion.autotuner.benchmark_provider as provider  # noqa: E402
import helion.language as hl  # noqa: E402
from helion.autotuner.base_cache import AutotuneCacheBase  # noqa: E402
from helion.runtime.kernel import BoundKernel  # noqa: E402

import kerntune.helion  # noqa: E402
from kerntune.evaluate.trial import Status  # noqa: E402
from kerntune.helion import HelionEvaluator  # noqa: E402

#: Configs timed by Helion's benchmark (its ``do_bench`` in benchmark_provider), and the final re-times.
BENCHED: list[float] = []
RETIMED: list[float] = []
FAIL: list[BaseException] = []  # set to make every benchmark raise this (a scripted kernel failure)
RAISED: list[BaseException] = []  # the scripted failures raised
FLAT_16 = {"pid_type": "flat", "block_sizes": [16, 16]}  # one program: fast in the interpreter


def _wall(fn: Callable[[], Any]) -> float:
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return float(statistics.median(times))


def _bench(fn: Callable[[], Any], *args: Any, **kwargs: Any) -> float:
    if FAIL:
        RAISED.append(FAIL[0])
        raise FAIL[0]
    BENCHED.append(_wall(fn))
    return BENCHED[-1]


def _retime(fn: Callable[[], Any], *args: Any, **kwargs: Any) -> float:
    RETIMED.append(_wall(fn))
    return RETIMED[-1]


@pytest.fixture(autouse=True)
def cpu_helion(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wall-clock stand-ins for Helion's GPU timers; Helion's own defaults for the final re-time."""
    for name in ("HELION_AUTOTUNE_FINAL_REBENCHMARK_TOP_K", "HELION_AUTOTUNE_FINAL_REBENCHMARK_ISOLATED",
                 "HELION_AUTOTUNE_FINAL_REBENCHMARK_TARGET_MS", "HELION_AUTOTUNE_BUDGET_SECONDS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(provider, "do_bench", _bench)
    monkeypatch.setattr(base_search, "do_bench", _retime)
    monkeypatch.setattr(base_search, "interleaved_bench", lambda fns, **kw: [_retime(f) for f in fns])
    for kept in (BENCHED, RETIMED, FAIL, RAISED):
        kept.clear()


def add_kernel(autotuner_fn: Any = None, overrides: dict[str, Any] | None = None, **settings: Any) -> Any:
    """A fresh elementwise-add Helion kernel (a new one per test: Helion keeps a tuned config)."""
    if autotuner_fn is not None:
        settings["autotuner_fn"] = autotuner_fn

    @helion.kernel(static_shapes=True, autotune_precompile=None, autotune_progress_bar=False,
                   autotune_benchmark_subprocess=False, autotune_random_seed=5,
                   autotune_config_overrides=overrides or FLAT_16, **settings)
    def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(out.size()):
            out[tile] = x[tile] + y[tile]
        return out

    return add


def tune(strategy: str = "random", settings: dict[str, Any] | None = None, **kwargs: Any) -> list[Any]:
    """Tune a fresh kernel through kerntune.helion.autotuner; the finished search objects."""
    searches: list[Any] = []
    fn = kerntune.helion.autotuner(strategy=strategy, seed=0, use_helion_seeds=False, on_result=searches.append,
                                   **kwargs)
    x = torch.randn(16, 16)
    out = add_kernel(fn, **(settings or {}))(x, x)
    assert torch.allclose(out, x + x)
    return searches


@pytest.fixture
def prepared() -> Any:
    """A kerntune search object of a bound kernel, prepared as Helion's autotune() prepares it."""
    x = torch.randn(16, 16)
    bound = add_kernel().bind((x, x))
    search = kerntune.helion.autotuner(strategy="random")(bound, (x, x))
    search._prepare()
    search.benchmark_provider.setup()
    yield search
    search.benchmark_provider.cleanup()


# -- defect 1: errors Helion treats as fatal -----------------------------------------------------------
def test_a_triton_error_helion_raises_ends_the_search_at_once_with_helions_message():
    """A kernel error Helion classifies as fatal (TritonError: set autotune_ignore_errors) was caught,
    each config retried alone, the whole budget spent, and the run ended with 'no config compiled'."""
    FAIL.append(RuntimeError("scripted kernel failure"))
    with pytest.raises(helion.exc.TritonError, match="autotune_ignore_errors"):
        tune(max_evals=6)
    assert len(RAISED) == 1


def test_an_unrecoverable_runtime_error_ends_the_search_even_under_ignore_errors():
    """Helion raises TritonUnrecoverableRuntimeError (a poisoned CUDA context) whatever the settings;
    kerntune swallowed it and went on measuring in the broken process."""
    FAIL.append(RuntimeError("CUDA error: an illegal memory access was encountered"))
    with pytest.raises(helion.exc.TritonUnrecoverableRuntimeError):
        tune(max_evals=6, settings={"autotune_ignore_errors": True})
    assert len(RAISED) == 1


def test_no_config_passing_says_how_many_failed_how_and_the_first_error():
    """Under autotune_ignore_errors every config fails; the message gave no count and no error."""
    FAIL.append(RuntimeError("scripted kernel failure"))
    with pytest.raises(RuntimeError, match=r"no config compiled .*\(4 runtime_error\); first error: Helion"):
        tune(max_evals=4, settings={"autotune_ignore_errors": True})


def test_codegen_failures_are_compile_errors_of_their_own_configs_and_nothing_is_timed_twice(
        prepared: Any, monkeypatch: pytest.MonkeyPatch):
    """Helion skips a config whose codegen fails when another of its batch compiles, and raises the last
    one when none did: each failing config then gets its own error (scripted codegen failures)."""
    real = BoundKernel.to_triton_code

    def to_triton_code(self: Any, config: Any = None, *args: Any, **kwargs: Any) -> Any:
        if config is not None and config.config.get("num_warps") in (2, 16):
            raise RuntimeError(f"scripted codegen failure num_warps={config.config['num_warps']}")
        return real(self, config, *args, **kwargs)

    monkeypatch.setattr(BoundKernel, "to_triton_code", to_triton_code)
    layout = prepared.kerntune_layout()
    evaluator = HelionEvaluator(prepared, layout)
    base = layout.space.default
    bad2, bad16, good = dict(base, num_warps=2), dict(base, num_warps=16), dict(base, num_warps=8)
    both_bad = evaluator.evaluate([bad2, bad16])
    assert [t.status for t in both_bad] == [Status.COMPILE_ERROR] * 2
    assert "num_warps=2" in both_bad[0].error and "num_warps=16" in both_bad[1].error
    mixed = evaluator.evaluate([good, dict(bad2, num_stages=3)])
    assert [t.status for t in mixed] == [Status.OK, Status.COMPILE_ERROR]
    assert len(BENCHED) == 1  # the good config, once


# -- defect 2: one Helion config, one measurement ----------------------------------------------------
def test_configs_helion_normalises_to_one_are_measured_once_across_batches(prepared: Any):
    """pid_type flat drops num_sm_multiplier: two kerntune configs are one Helion config, which was
    compiled and timed again in a later batch and could fill two finalist slots."""
    layout = prepared.kerntune_layout()
    evaluator = HelionEvaluator(prepared, layout)
    a = dict(layout.space.default, num_sm_multiplier=1)
    b = dict(a, num_sm_multiplier=8)
    (first,) = evaluator.evaluate([a])
    (again,) = evaluator.evaluate([b])
    assert first.ok and again.ok and again.time_ms == first.time_ms
    assert "same_helion_config_as" in again.extra and again.cost_s == 0.0
    assert len(BENCHED) == 1
    assert len(evaluator.members) == 1


# -- defect 3: Helion's autotune_budget_seconds ---------------------------------------------------------
def test_helions_budget_running_out_ends_the_search_and_its_cut_configs_are_unmeasured(
        monkeypatch: pytest.MonkeyPatch):
    """Configs Helion skips once its budget is spent were stored as runtime errors and the search went on
    to its own budget (scripted: Helion's budget check reports it spent after three timed configs)."""
    monkeypatch.setattr(base_search.BaseSearch, "_autotune_budget_exceeded", lambda self: len(BENCHED) >= 3)
    (search,) = tune(max_evals=16, settings={"autotune_budget_seconds": 3600})
    history = search.kerntune_result.history
    assert [t.status for t in history[:3]] == [Status.OK] * 3
    assert history[3:] and all(t.status is Status.UNMEASURED for t in history[3:])
    assert "autotune_budget_seconds" in history[3].error
    assert search.kerntune_result.stop_reason == "Helion's autotune_budget_seconds"
    assert len(BENCHED) == 3


# -- defect 4: statuses of Helion's failure kinds ---------------------------------------------------
def test_configs_rejected_by_autotune_config_filter_are_invalid_not_runtime_errors():
    """Helion's status "filtered" was stored as a runtime error."""
    (search,) = tune(max_evals=8, settings={"autotune_config_filter":
                                            lambda c: c if c.config["num_warps"] <= 4 else None})
    history = search.kerntune_result.history
    rejected = [t for t in history if t.config["num_warps"] > 4]
    assert rejected and all(t.status is Status.INVALID and t.error == "rejected by autotune_config_filter"
                            for t in rejected)
    assert all(t.ok for t in history if t.config["num_warps"] <= 4)


def test_a_benchmark_timeout_is_a_timeout_and_only_a_compile_at_its_limit_a_compile_timeout(
        prepared: Any, monkeypatch: pytest.MonkeyPatch):
    """Helion's status "timeout" was always stored as compile_timeout, also for a benchmark that timed
    out after a fast compile (scripted results of Helion's provider)."""
    compile_times: list[float | None] = []

    def benchmark(self: Any, configs: list[Any], *, desc: str = "") -> list[Any]:
        return [provider.BenchmarkResult(c, provider._unset_fn, float("inf"), "timeout", compile_times.pop(0))
                for c in configs]

    monkeypatch.setattr(provider.LocalBenchmarkProvider, "benchmark", benchmark)
    prepared.settings.autotune_compile_timeout = 7
    layout = prepared.kerntune_layout()
    evaluator = HelionEvaluator(prepared, layout)
    statuses = []
    for n, seconds in enumerate((7.2, 0.4, None)):
        compile_times.append(seconds)
        (trial,) = evaluator.evaluate([dict(layout.space.default, num_stages=n + 2)])
        statuses.append(trial.status)
        if trial.status is Status.TIMEOUT:
            assert "compile" not in trial.error
    assert statuses == [Status.COMPILE_TIMEOUT, Status.TIMEOUT, Status.TIMEOUT]


# -- defect 5: best-of-K --------------------------------------------------------------------------------
class NoStoreCache(AutotuneCacheBase):
    """Helion's cache layer (its best-of-K loop included) with nothing on disk."""

    def get(self) -> Any:
        return None

    def put(self, config: Any) -> None:
        pass

    def _get_cache_key(self) -> Any:
        return None

    def _list_cache_entries(self) -> list[Any]:
        return []


def test_best_of_k_trials_search_with_seeds_moved_as_helions_are(monkeypatch: pytest.MonkeyPatch):
    """Helion's best-of-K sets autotune_random_seed = base + i for trial i; kerntune ran one search,
    the same configs in the same order, K times."""
    monkeypatch.setitem(helion_autotuner.cache_classes, "LocalAutotuneCache", NoStoreCache)
    searches = tune(max_evals=3, cache=True,
                    settings={"autotune_best_of_k": 3, "autotune_cache": "LocalAutotuneCache"})
    assert [s.kerntune_result.seed for s in searches] == [0, 1, 2]
    paths = {tuple(t.extra["helion_config"] for t in s.kerntune_result.history) for s in searches}
    assert len(paths) == 3


# -- defects 6 and 7: the final re-time ----------------------------------------------------------------
@pytest.fixture(params=[False, True], ids=["rebenchmark", "helion_final"])
def finalised(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[dict[str, Any]], bool]:
    """A search with final_top_k=10, the re-benchmark calls it made, and whether it ended as Helion's
    own searches end (``helion_final=True``)."""
    calls: list[dict[str, Any]] = []
    real = base_search.PopulationBasedSearch.rebenchmark

    def rebenchmark(self: Any, members: list[Any], **kwargs: Any) -> None:
        calls.append({"configs": [m.config for m in members], **kwargs})
        real(self, members, **kwargs)

    monkeypatch.setattr(base_search.PopulationBasedSearch, "rebenchmark", rebenchmark)
    (search,) = tune(max_evals=12, final_top_k=10, helion_final=request.param)
    return search, calls, request.param


def test_finalists_are_re_timed_by_helion_as_documented(finalised: Any):
    """The docs promised Helion's interleaved re-benchmark; 1.4.0's rebenchmark with its defaults takes the
    isolated path, which is what the default ending calls now and says.  ``helion_final=True`` ends as
    Helion's own searches end: final_rebenchmark_best, do_bench at a 5 s target, neither isolated nor
    interleaved."""
    search, calls, helion_final = finalised
    assert len(calls) == 1
    if helion_final:
        assert calls[0]["use_interleaved"] is False and calls[0]["use_isolated"] is False
        assert calls[0]["target_ms"] == 5000.0
    else:  # Helion's defaults: none of the final verification's arguments
        assert calls[0]["desc"] == "kerntune final re-benchmark" and "target_ms" not in calls[0]
    assert search.best.config in calls[0]["configs"]


def test_final_top_k_above_eight_retimes_that_many_distinct_configs(finalised: Any):
    """At most 8 finalists were kept, whatever final_top_k asked for."""
    search, calls, _ = finalised
    assert sum(t.ok for t in search.kerntune_result.history) >= 10
    assert len(calls[0]["configs"]) == 10 == len({repr(c) for c in calls[0]["configs"]})
    assert len(RETIMED) == 10
