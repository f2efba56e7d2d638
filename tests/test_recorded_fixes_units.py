"""Two recording-reader defects: a T4 file as Kernel Tuner's ``store_output_file`` writes it (no
``metadata``, ``times`` in ms) replayed at 1000 times its cost, read as seconds; and Kernel Tuner cache
entries lacking a tuned parameter were dropped without a word, the optimum among them."""

from __future__ import annotations

import pytest

from kerntune.evaluate import load_recording
from test_recorded_formats import refused, write

PARAMS = {"block_size_x": [32, 64, 128], "tile": [1, 2]}


def kt_results() -> list[dict]:
    """Kernel Tuner's results list (``tune_kernel``'s first return): times all in its milliseconds."""
    out = []
    for i, (bx, tile) in enumerate((b, t) for b in PARAMS["block_size_x"] for t in PARAMS["tile"]):
        runs = [1.0 + i / 4 + d for d in (-0.02, 0.0, 0.03)]
        out.append({"block_size_x": bx, "tile": tile, "time": sum(runs) / len(runs), "times": runs,
                    "GFLOP/s": 100.0 / (1.0 + i), "compile_time": 700.0 + 10 * i, "benchmark_time": 30.0 + i,
                    "framework_time": 5.0, "strategy_time": 0.5, "verification_time": 2.0,
                    "timestamp": "2024-01-01 00:00:00"})
    return out


def store_output_file(results: list[dict], objective: str = "time") -> dict:
    """Field for field what kernel_tuner/file_utils.py ``store_output_file`` writes (upstream 02544eb):
    ``dict(results=..., schema_version=...)``, no metadata; measurements are every other key, "ms" for
    those starting with "time"."""
    timing = ["compile_time", "benchmark_time", "framework_time", "strategy_time", "verification_time"]
    skip = list(PARAMS) + timing + ["timestamp", "times"]
    out = []
    for r in results:
        out.append({"timestamp": r["timestamp"], "configuration": {k: v for k, v in r.items() if k in PARAMS},
                    "times": {"compilation": r["compile_time"], "benchmark": r["benchmark_time"],
                              "framework": r["framework_time"], "search_algorithm": r["strategy_time"],
                              "validation": r["verification_time"], "runtimes": r["times"]},
                    "invalidity": "correct", "correctness": 1,
                    "measurements": [{"name": k, "value": v, "unit": "ms" if k.startswith("time") else ""}
                                     for k, v in r.items() if k not in skip],
                    "objectives": [objective]})
    return {"results": out, "schema_version": "1.0.0"}


def store_cache(results: list[dict]) -> dict:
    """The same results as Kernel Tuner's cache file holds them."""
    return {"device_name": "X", "kernel_name": "k", "problem_size": [1024], "tune_params_keys": list(PARAMS),
            "tune_params": PARAMS, "objective": "time",
            "cache": {f"{r['block_size_x']},{r['tile']}": dict(r) for r in results}}


# ------------------------------------------------------------------ 1. T4 without metadata.timeunit
def test_kernel_tuner_t4_without_metadata_replays_at_the_same_cost_as_its_cache(tmp_path):
    """Kernel Tuner's T4 output declares no timeunit; its ms were read as seconds, so every compile
    and benchmark cost 1000 times what the same results cost from its cache."""
    results = kt_results()
    cache = load_recording(write(tmp_path / "cache.json", store_cache(results)))
    t4 = load_recording(write(tmp_path / "t4.json", store_output_file(results)))
    assert len(t4.trials) == len(cache.trials) == 6
    for key, a in cache.trials.items():
        b = t4.trials[key]
        assert (b.status, b.time_ms) == (a.status, a.time_ms)
        assert b.times_ms == pytest.approx(a.times_ms)
        assert (b.compile_s, b.bench_s) == pytest.approx((a.compile_s, a.bench_s))
    assert sum(t.cost_s for t in t4.trials.values()) == pytest.approx(sum(t.cost_s for t in cache.trials.values()))
    assert t4.meta["timeunit"].startswith("milliseconds")


def test_kernel_tuner_t4_tuned_for_gflops_still_reads_its_times_as_ms(tmp_path):
    """The objective may be GFLOP/s (unit ""); the ``time`` measurement Kernel Tuner always writes
    still tells the runtimes' unit."""
    t4 = load_recording(write(tmp_path / "t4.json", store_output_file(kt_results(), objective="GFLOP/s")))
    assert t4.meta["timeunit"].startswith("milliseconds")
    assert max(t.compile_s for t in t4.trials.values()) == pytest.approx(0.75)


def seconds_file(declared: bool) -> dict:
    """The methodology's way: times in seconds, the ``time`` measurement in ms."""
    data = store_output_file(kt_results())
    for res in data["results"]:
        times = res["times"]
        for k in ("compilation", "benchmark", "framework", "search_algorithm", "validation"):
            times[k] /= 1e3
        times["runtimes"] = [r / 1e3 for r in times["runtimes"]]
    if declared:
        data["metadata"] = {"timeunit": "seconds"}
    return data


@pytest.mark.parametrize("declared", [True, False])
def test_t4_in_seconds_still_reads_as_seconds(tmp_path, declared):
    """A file that declares seconds (or whose runtimes are the time / 1000) keeps reading as before."""
    results = kt_results()
    cache = load_recording(write(tmp_path / "cache.json", store_cache(results)))
    t4 = load_recording(write(tmp_path / "t4.json", seconds_file(declared)))
    assert t4.meta["timeunit"].startswith("seconds")
    for key, a in cache.trials.items():
        b = t4.trials[key]
        assert b.time_ms == a.time_ms and b.times_ms == pytest.approx(a.times_ms)
        assert (b.compile_s, b.bench_s) == pytest.approx((a.compile_s, a.bench_s))


def test_t4_whose_undeclared_unit_the_runtimes_cannot_tell_is_refused_naming_metadata_timeunit(tmp_path):
    """Runtimes neither on the time's scale nor on its scale / 1000 (here / 30): guessing either unit
    would misprice the replay by 10x or more, so the file is refused with what to add."""
    data = store_output_file(kt_results())
    for res in data["results"]:
        res["times"]["runtimes"] = [r / 30 for r in res["times"]["runtimes"]]
    refused(write(tmp_path / "t4.json", data), "metadata.timeunit")


# ------------------------------------------------------------------ 2. cache entries lacking a parameter
def test_cache_entry_missing_a_tuned_parameter_is_refused_naming_key_and_parameter(tmp_path):
    """Entry "1,2" lacks b; it held the 0.5 ms optimum and was dropped silently (optimum shown: 3 ms)."""
    data = {"device_name": "X", "kernel_name": "k", "tune_params_keys": ["a", "b"],
            "tune_params": {"a": [1, 2], "b": [1, 2]},
            "cache": {"1,1": {"a": 1, "b": 1, "time": 5.0}, "1,2": {"a": 1, "time": 0.5},
                      "2,1": {"a": 2, "b": 1, "time": 3.0}}}
    refused(write(tmp_path / "missing.json", data), "'1,2'", "b")


def test_cache_entry_that_is_not_an_object_is_refused_naming_its_key(tmp_path):
    """A non-object entry was dropped as silently as one lacking a parameter."""
    data = store_cache(kt_results())
    data["cache"]["64,2"] = 1.25
    refused(write(tmp_path / "scalar.json", data), "'64,2'", "not an object")
