"""Recordings as Kernel Tuner 1.5 and the T4 format really write them, and what the readers once got
wrong about them: T4 results whose configuration lists its names in another order (dropped),
Kernel Tuner 1.5's ``"__error__"`` failures (all read as runtime errors), T4 times in the file's
declared unit (read as seconds), a cache key given twice (the last silently kept), values equal in
Python but not in the file (``1``, ``1.0``, ``true`` merged), another objective than time (unsaid),
and a time written as a string (a failure).  Every file here is built the way Kernel Tuner's
``util.store_cache`` / ``file_utils.get_t4_results`` write it (kernel_tuner 1.5.0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kerntune.errors import FormatError
from kerntune.evaluate import ReplayEvaluator, Status, load_recording


def write(path: Path, data) -> Path:
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def refused(path: Path, *needles: str) -> str:
    with pytest.raises(FormatError) as info:
        load_recording(path)
    message = str(info.value)
    assert message and "\n" not in message, message
    for needle in needles:
        assert needle in message, message
    return message


def kt_cache(tune_params: dict, entries: dict, objective="time") -> dict:
    """A closed Kernel Tuner cache: its header, then ``cache`` keyed by ",".join(str(value))."""
    return {"device_name": "NVIDIA A100-PCIE-40GB", "kernel_name": "vector_add", "problem_size": [1024],
            "tune_params_keys": list(tune_params), "tune_params": tune_params, "objective": objective,
            "cache": entries}


def kt15_entry(x, time=None, error=None, compile_ms=100.0, bench_ms=10.0) -> dict:
    """A Kernel Tuner 1.5 entry: a failure is ``"__error__"`` and the entry has no ``time``."""
    entry = {"x": x}
    if time is not None:
        entry.update(time=time, times=[time, time])
    if error is not None:
        entry["__error__"] = error
    entry.update(compile_time=compile_ms, verification_time=0, benchmark_time=bench_ms,
                 strategy_time=0, framework_time=0.5, timestamp="2025-01-01 00:00:00+00:00")
    return entry


def t4_result(config: dict, invalidity="correct", value=None, unit="ms", compilation=500.0, benchmark=120.0,
              runtimes=None) -> dict:
    """One result as ``get_t4_results`` writes it (a failed one has an empty ``time`` and ``__error__``)."""
    measurements = ([{"name": "time", "value": value, "unit": unit}] if invalidity == "correct" else
                    [{"name": "time", "value": "", "unit": unit}, {"name": "__error__", "value": "", "unit": ""}])
    return {"timestamp": "t", "configuration": config,
            "times": {"compilation": compilation, "benchmark": benchmark, "framework": 1.0, "search_algorithm": 0.0,
                      "validation": 0.0, "runtimes": runtimes if runtimes is not None else
                      ([value] * 5 if invalidity == "correct" else [])},
            "invalidity": invalidity, "correctness": 1, "measurements": measurements, "objectives": ["time"]}


def t4_file(results: list, timeunit="milliseconds") -> dict:
    data = {"results": results, "schema_version": "1.0.0"}
    if timeunit is not None:
        data["metadata"] = {"timeunit": timeunit}
    return data


def by_x(rec) -> dict:
    return {t.config["x"]: t for t in rec.trials.values()}


# ------------------------------------------------------------------ 1. T4 configurations in another order
def test_t4_results_whose_configuration_lists_names_in_another_order_are_all_read(tmp_path):
    """Kernel Tuner builds each configuration from the result's own keys, so the order may differ;
    two of these four (the optimum among them) were dropped."""
    results = [t4_result({"x": 1, "y": 1}, value=4.0), t4_result({"y": 2, "x": 1}, value=3.0),
               t4_result({"x": 2, "y": 1}, value=2.0), t4_result({"y": 2, "x": 2}, value=1.0)]
    rec = load_recording(write(tmp_path / "t4.json", t4_file(results)))
    assert rec.space.names == ["x", "y"] and len(rec.trials) == 4 and rec.space.count() == 4
    assert rec.optimum.config == {"x": 2, "y": 2} and rec.optimum.time_ms == 1.0
    assert {(t.config["x"], t.config["y"]): t.time_ms for t in rec.trials.values()} == {
        (1, 1): 4.0, (1, 2): 3.0, (2, 1): 2.0, (2, 2): 1.0}


def test_t4_result_with_other_parameter_names_is_one_line_error(tmp_path):
    results = [t4_result({"x": 1, "y": 1}, value=4.0), t4_result({"x": 2, "z": 1}, value=1.0)]
    refused(write(tmp_path / "t4.json", t4_file(results)), "result 2", "differ")


# ------------------------------------------------------------------ 2. Kernel Tuner 1.5's "__error__"
def test_kernel_tuner_1_5_error_entries_keep_their_failure_kind(tmp_path):
    data = kt_cache({"x": [1, 2, 3, 4, 5]}, {
        "1": kt15_entry(1, time=1.5),
        "2": kt15_entry(2, error="InvalidConfig", compile_ms=0, bench_ms=0),
        "3": kt15_entry(3, error="CompilationFailedConfig", compile_ms=300.0, bench_ms=0),
        "4": kt15_entry(4, error="RuntimeFailedConfig", compile_ms=200.0, bench_ms=5.0),
        # core.py: a launch that fails in benchmark_continuous, after the time was taken, is still failed
        "5": kt15_entry(5, time=0.5, error="RuntimeFailedConfig"),
    })
    rec = load_recording(write(tmp_path / "kt15.json", data))
    t = by_x(rec)
    assert {x: tr.status for x, tr in t.items()} == {1: Status.OK, 2: Status.INVALID, 3: Status.COMPILE_ERROR,
                                                      4: Status.RUNTIME_ERROR, 5: Status.RUNTIME_ERROR}
    assert [t[x].error for x in (2, 3, 4, 5)] == ["InvalidConfig", "CompilationFailedConfig",
                                                   "RuntimeFailedConfig", "RuntimeFailedConfig"]
    assert all(t[x].time_ms is None for x in (2, 3, 4, 5)) and rec.optimum.config == {"x": 1}
    assert t[3].compile_s == pytest.approx(0.3) and t[4].cost_s == pytest.approx(0.205)


def test_old_and_new_failure_forms_read_alike(tmp_path):
    data = kt_cache({"x": [1, 2, 3]}, {"1": kt15_entry(1, time=1.0),
                                       "2": kt15_entry(2, error="CompilationFailedConfig"),
                                       "3": {**kt15_entry(3), "time": "CompilationFailedConfig"}})
    t = by_x(load_recording(write(tmp_path / "mixed.json", data)))
    assert t[2].status is t[3].status is Status.COMPILE_ERROR and t[2].error == t[3].error


@pytest.mark.parametrize("entry,needle", [
    (kt15_entry(2, time=1.0, error="Oops"), "__error__"),
    (kt15_entry(2, time=1.0, error=True), "__error__"),
    ({**kt15_entry(2, error="InvalidConfig"), "time": "RuntimeFailedConfig"}, "different failures"),
])
def test_error_that_kernel_tuner_never_writes_is_one_line_error(tmp_path, entry, needle):
    data = kt_cache({"x": [1, 2]}, {"1": kt15_entry(1, time=1.0), "2": entry})
    refused(write(tmp_path / "bad.json", data), "cache entry '2'", needle)


# ------------------------------------------------------------------ 3. T4 times in the declared unit
def test_kernel_tuner_t4_file_costs_what_the_same_cache_costs(tmp_path):
    """The same four configs as Kernel Tuner writes them to its cache and to T4 (times in ms):
    the replay's clock once charged the T4 file 480 s (benchmark read as seconds, compile as 0)."""
    cache = kt_cache({"x": [1, 2, 3, 4]}, {
        str(x): {"x": x, "time": float(x), "times": [float(x)] * 5, "compile_time": 500.0, "benchmark_time": 120.0,
                 "verification_time": 0.0} for x in (1, 2, 3)})
    cache["cache"]["4"] = {"x": 4, "__error__": "CompilationFailedConfig", "compile_time": 500.0,
                           "benchmark_time": 120.0, "verification_time": 0.0}
    t4 = t4_file([t4_result({"x": x}, value=float(x)) for x in (1, 2, 3)] + [t4_result({"x": 4}, "compile")])
    a, b = load_recording(write(tmp_path / "c.json", cache)), load_recording(write(tmp_path / "t4.json", t4))
    for x, ta in by_x(a).items():
        tb = by_x(b)[x]
        assert (ta.status, ta.time_ms, ta.times_ms) == (tb.status, tb.time_ms, tb.times_ms)
        assert (ta.compile_s, ta.bench_s) == pytest.approx((tb.compile_s, tb.bench_s))
    assert sum(t.cost_s for t in b.trials.values()) == pytest.approx(4 * 0.62)
    assert b.meta["timeunit"] == "milliseconds"


def test_t4_time_units_every_spelling(tmp_path):
    """The measurement's unit scales the time, ``metadata.timeunit`` every ``times`` value."""
    per_ms = {"ms": 1.0, "milliseconds": 1.0, "s": 1e3, "seconds": 1e3, "us": 1e-3, "microseconds": 1e-3,
              "ns": 1e-6, "nanoseconds": 1e-6}
    for unit, scale in per_ms.items():
        results = [t4_result({"x": 1}, value=2.0, unit=unit, compilation=3.0, benchmark=4.0, runtimes=[5.0]),
                   t4_result({"x": 2}, "compile", unit=unit, compilation=3.0)]
        rec = load_recording(write(tmp_path / f"{unit}.json", t4_file(results, timeunit=unit)))
        ok = by_x(rec)[1]
        assert ok.time_ms == pytest.approx(2.0 * scale), unit
        assert ok.times_ms == pytest.approx([5.0 * scale]), unit
        assert ok.compile_s == pytest.approx(3.0 * scale / 1e3), unit
        assert ok.bench_s == pytest.approx(4.0 * scale / 1e3), unit
        assert by_x(rec)[2].compile_s == pytest.approx(3.0 * scale / 1e3), unit


@pytest.mark.parametrize("where,needle", [("measurement", "furlongs"), ("metadata", "fortnights"),
                                          ("missing", "None")])
def test_t4_unknown_unit_is_one_line_error(tmp_path, where, needle):
    result = t4_result({"x": 1}, value=1.0, unit="furlongs" if where == "measurement" else "ms")
    if where == "missing":
        del result["measurements"][0]["unit"]
    data = t4_file([result], timeunit="fortnights" if where == "metadata" else "milliseconds")
    refused(write(tmp_path / "t4.json", data), needle, "unit")


def test_t4_without_timeunit_is_in_seconds_and_the_schema_spelling_of_compile_time_is_read(tmp_path):
    """No ``metadata.timeunit``: seconds, as the autotuning methodology (which reads T4 spaces) assumes."""
    result = t4_result({"x": 1}, value=2.0, benchmark=0.25, runtimes=[0.002])
    result["times"]["compilation_time"] = result["times"].pop("compilation") / 1000
    rec = load_recording(write(tmp_path / "t4.json", t4_file([result], timeunit=None)))
    t = by_x(rec)[1]
    assert (t.time_ms, t.compile_s, t.bench_s) == (2.0, 0.5, 0.25) and t.times_ms == pytest.approx([2.0])
    assert rec.meta["timeunit"].startswith("seconds")
    result["times"]["compilation"] = 500.0
    refused(write(tmp_path / "both.json", t4_file([result])), "compilation_time")


def test_t4_invalidity_outside_the_schema_is_one_line_error(tmp_path):
    results = [t4_result({"x": 1}, value=1.0), {**t4_result({"x": 2}, "compile"), "invalidity": "exploded"}]
    refused(write(tmp_path / "t4.json", t4_file(results)), "result 2", "exploded")


# ------------------------------------------------------------------ 4. a cache key given twice
DUPLICATE = ('{"device_name": "X", "kernel_name": "k", "problem_size": 1, "tune_params_keys": ["x", "y"],'
             ' "tune_params": {"x": [1, 2], "y": [1, 2]}, "objective": "time", "cache": {\n'
             '"1,1": {"x": 1, "y": 1, "time": 1.0},\n"1,2": {"x": 1, "y": 2, "time": 2.0},\n'
             '"2,1": {"x": 2, "y": 1, "time": 3.0},\n"1,1": {"x": 1, "y": 1, "time": 5.0},')


def test_cache_with_one_key_twice_is_refused(tmp_path):
    """``json.loads`` keeps the last "1,1" (5.0 ms): the optimum (1.0 ms) vanished unseen."""
    refused(write(tmp_path / "dup.json", DUPLICATE[:-1] + "}}"), "'1,1'", "recorded twice")


def test_truncated_cache_with_one_key_twice_is_refused(tmp_path):
    refused(write(tmp_path / "dup_open.json", DUPLICATE), "'1,1'", "recorded twice")


def test_same_config_under_two_keys_is_refused(tmp_path):
    data = kt_cache({"x": [1, 2], "y": [1]}, {"1,1": {"x": 1, "y": 1, "time": 1.0},
                                              "1, 1": {"x": 1, "y": 1, "time": 2.0}})
    refused(write(tmp_path / "twice.json", data), "recorded twice")


# ------------------------------------------------------------------ 5. 1, 1.0 and true are three values
def test_kernel_tuner_mixed_values_stay_distinct(tmp_path):
    """Kernel Tuner's test/strategies/test_cache_file.json declares ``test_mixed: ["test", 1, true, 2.45]``;
    Kernel Tuner keys them "test", "1", "True", "2.45".  ``1 == True`` once merged two of them."""
    data = kt_cache({"test_mixed": ["test", 1, True, 2.45]}, {
        "test": {"test_mixed": "test", "time": 3.0}, "1": {"test_mixed": 1, "time": 2.0},
        "True": {"test_mixed": True, "time": 1.0}, "2.45": {"test_mixed": 2.45, "time": 4.0}})
    rec = load_recording(write(tmp_path / "mixed.json", data))
    assert rec.space.count() == 4 and "only the 4 recorded" in rec.space.constraints[0].text
    configs = list(rec.space.enumerate())
    assert sorted(json.dumps(c["test_mixed"]) for c in configs) == ['"test"', "1", "2.45", "true"]
    got = {json.dumps(c["test_mixed"]): t for c, t in zip(configs, ReplayEvaluator(rec).evaluate(configs))}
    assert {k: (t.status, t.time_ms) for k, t in got.items()} == {
        '"test"': (Status.OK, 3.0), "1": (Status.OK, 2.0), "true": (Status.OK, 1.0), "2.45": (Status.OK, 4.0)}
    assert rec.optimum.config == {"test_mixed": True}


def test_int_and_float_spellings_are_two_configs_as_in_kernel_tuner(tmp_path):
    """Kernel Tuner keys 1 and 1.0 as "1" and "1.0" (and a kernel sees ``1`` or ``1.0``): two configs,
    as ``Space.key`` files them; the recorded set once held 2 of the 3 trials."""
    data = kt_cache({"x": [1, 2], "y": [1]}, {"1,1": {"x": 1, "y": 1, "time": 1.0},
                                              "1.0,1": {"x": 1.0, "y": 1, "time": 9.0},
                                              "2,1": {"x": 2, "y": 1, "time": 3.0}})
    rec = load_recording(write(tmp_path / "mix.json", data))
    assert len(rec.trials) == rec.space.count() == 3
    assert sorted(rec.space.key(c) for c in rec.space.enumerate()) == sorted(rec.trials)


def test_t4_true_and_1_are_two_configs(tmp_path):
    results = [t4_result({"x": 1}, value=2.0), t4_result({"x": True}, value=1.0)]
    rec = load_recording(write(tmp_path / "t4.json", t4_file(results)))
    assert rec.space.count() == 2 and rec.optimum.config == {"x": True}
    assert [t.status for t in ReplayEvaluator(rec).evaluate(list(rec.space.enumerate()))] == [Status.OK] * 2


def test_ktt_true_and_1_are_two_configs_not_a_profiling_rerun(tmp_path):
    def result(value, duration):
        return {"KernelName": "k", "Status": "Ok", "TotalDuration": duration, "TotalOverhead": 10,
                "Configuration": [{"Name": "x", "Value": value}], "ComputationResults": [{"Duration": duration}]}
    data = {"Metadata": {"TimeUnit": "Microseconds", "Device": "GPU"}, "Results": [result(1, 2000), result(True, 1000)]}
    rec = load_recording(write(tmp_path / "ktt.json", data))
    assert len(rec.trials) == rec.space.count() == 2 and rec.meta["repeated_results_dropped"] == 0


# ------------------------------------------------------------------ 6. objective, string times
def test_other_objective_is_said_and_time_still_ranks(tmp_path):
    data = kt_cache({"x": [1, 2, 3]}, {"1": {"x": 1, "time": 1.0, "GFLOP/s": 10},
                                       "2": {"x": 2, "time": 2.0, "GFLOP/s": 100},
                                       "3": {"x": 3, "time": 3.0, "GFLOP/s": 5}}, objective="GFLOP/s")
    rec = load_recording(write(tmp_path / "gflops.json", data))
    assert rec.meta["note"] == "ranked by time; the file's objective is GFLOP/s" == rec.summary()["note"]
    assert rec.optimum.config == {"x": 1}
    plain = load_recording(write(tmp_path / "time.json", {**data, "objective": "time"}))
    assert "note" not in plain.meta and "note" not in plain.summary()


def test_string_time_is_one_line_error_not_a_failure(tmp_path):
    """Kernel Tuner writes times as numbers: "2.0" once became a failed config, unseen."""
    data = kt_cache({"x": [1, 2, 3]}, {"1": {"x": 1, "time": 1.0, "times": [1, 1.1]},
                                       "2": {"x": 2, "time": 1.05, "times": [1.05]}, "3": {"x": 3, "time": "2.0"}})
    refused(write(tmp_path / "strtime.json", data), "cache entry '3'", "'2.0'")
