"""Recorded spaces: Kernel Tuner caches (whole, truncated, gzipped), T4 results,
kerntune tables, the replay evaluator, and the errors for unreadable files."""

from __future__ import annotations

import gzip
import itertools
import json
import random
from pathlib import Path

import pytest

from kerntune.errors import FormatError, KerntuneError
from kerntune.evaluate import ReplayEvaluator, Status, Trial, load_recording, table_dict
from kerntune.space import Boolean, IntRange, ListParam, PowerOfTwo, Space

CONV = Path(__file__).resolve().parent.parent / "examples" / "spaces" / "convolution_A100.json.gz"
CONV_NAMES = ["block_size_x", "block_size_y", "tile_size_x", "tile_size_y", "read_only", "use_padding",
              "use_shmem", "use_cmem", "filter_height", "filter_width"]


@pytest.fixture(scope="module")
def conv_raw() -> dict:
    """The convolution cache as plain JSON, read without kerntune."""
    return json.loads(gzip.decompress(CONV.read_bytes()))


# ---------------------------------------------------------------------------------------- helpers
KT_HEADER = {"device_name": "Test GPU", "kernel_name": "toy_kernel", "problem_size": [1024],
             "tune_params_keys": ["bx", "tile"], "tune_params": {"bx": [32, 64, 128], "tile": [1, 2]},
             "objective": "time", "cache": {}}


def kt_entry(bx: int, tile: int, time) -> dict:
    return {"bx": bx, "tile": tile, "time": time, "times": [1.25, 1.5, 1.75], "compile_time": 850.5,
            "verification_time": 12.0, "benchmark_time": 150.25, "GFLOP/s": 1000.0 / bx}


TOY_ENTRIES = [kt_entry(32, 1, 1.5), kt_entry(32, 2, 1.25), kt_entry(64, 1, 0.875), kt_entry(64, 2, 2.0625)]


def kt_cache_text(entries: list[dict], closed: bool = False) -> str:
    """A cache file written as Kernel Tuner writes one: the header up to '"cache": {',
    then one '\\n"key": {...},' line per measured config, and '}}' only when tuning ended."""
    text = json.dumps(KT_HEADER)[:-2]
    assert text.endswith('"cache": {')
    for e in entries:
        key = f"{e['bx']},{e['tile']}"
        text += "\n" + json.dumps({key: e})[1:-1] + ","
    if closed:
        text = text[:-1] + "\n}}"
    return text


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _r(x):
    return None if x is None else round(x, 9)


def keys_and_times(rec) -> dict[tuple, tuple]:
    """(bx, tile) -> (status, time_ms, compile_s, bench_s), floats rounded for comparison."""
    return {(t.config["bx"], t.config["tile"]): (t.status, _r(t.time_ms), _r(t.compile_s), _r(t.bench_s))
            for t in rec.trials.values()}


def expected_toy(entries) -> dict[tuple, tuple]:
    return {(e["bx"], e["tile"]): (Status.OK, _r(e["time"]), _r(e["compile_time"] / 1000),
                                   _r((e["benchmark_time"] + e["verification_time"]) / 1000)) for e in entries}


def one_line_format_error(path: Path) -> FormatError:
    with pytest.raises(FormatError) as info:
        load_recording(path)
    assert isinstance(info.value, KerntuneError)
    message = str(info.value)
    assert message and "\n" not in message, message
    return info.value


# ---------------------------------------------------------------------------------------- the shipped recording
def test_convolution_recording_counts_optimum_and_statuses(conv_path):
    rec = load_recording(conv_path)
    summary = rec.summary()
    assert summary["recorded"] == len(rec.trials) == 4362
    assert summary["params"] == 10 and rec.space.names == CONV_NAMES
    assert summary["status_counts"] == {"ok": 4201, "runtime_error": 155, "compile_error": 6}
    assert summary["ok"] == 4201
    assert summary["optimum_ms"] == pytest.approx(0.5536)
    assert rec.optimum.time_ms == pytest.approx(0.5536)
    assert rec.optimum.config == {"block_size_x": 32, "block_size_y": 4, "tile_size_x": 1, "tile_size_y": 3,
                                  "read_only": 1, "use_padding": 0, "use_shmem": 1, "use_cmem": 1,
                                  "filter_height": 15, "filter_width": 15}
    assert summary["kernel"] == "convolution_kernel" and summary["device"] == "NVIDIA A100-PCIE-40GB"
    assert summary["format"] == "kernel_tuner_cache"
    assert rec.space.cartesian_size == 16 * 5 * 4 * 4 * 2 * 2 * 2


def test_convolution_space_holds_exactly_the_recorded_configs(conv_evaluator):
    space = conv_evaluator.space
    assert space.count() == 4362
    assert {space.key(c) for c in space.enumerate()} == set(conv_evaluator.recording.trials)


def test_replay_returns_every_recorded_time_status_and_cost(conv_evaluator, conv_raw):
    entries = list(conv_raw["cache"].values())
    configs = [{n: e[n] for n in CONV_NAMES} for e in entries]
    trials = conv_evaluator.evaluate(configs)
    assert len(trials) == len(entries)
    failures = {"CompilationFailedConfig": Status.COMPILE_ERROR, "RuntimeFailedConfig": Status.RUNTIME_ERROR}
    for entry, trial in zip(entries, trials):
        assert trial.config == {n: entry[n] for n in CONV_NAMES}
        expected_cost = (entry["compile_time"] + entry["benchmark_time"] + entry["verification_time"]) / 1000
        assert trial.cost_s == pytest.approx(expected_cost)
        assert trial.compile_s == pytest.approx(entry["compile_time"] / 1000)
        if isinstance(entry["time"], str):
            assert trial.status is failures[entry["time"]]
            assert trial.time_ms is None and not trial.ok
        else:
            assert trial.status is Status.OK and trial.time_ms == entry["time"]


def test_replay_of_the_optimum(conv_evaluator):
    cfg = {"block_size_x": 32, "block_size_y": 4, "tile_size_x": 1, "tile_size_y": 3, "read_only": 1,
           "use_padding": 0, "use_shmem": 1, "use_cmem": 1, "filter_height": 15, "filter_width": 15}
    trial, = conv_evaluator.evaluate([cfg])
    assert trial.ok and trial.time_ms == pytest.approx(0.5536)
    assert trial.cost_s == pytest.approx(1.277398924 + 0.019924737)
    assert conv_evaluator.simulated_clock


def test_replay_unrecorded_config_is_unmeasured_not_fast(conv_evaluator):
    space = conv_evaluator.space
    recorded = set(conv_evaluator.recording.trials)
    missing = next(dict(zip(space.names, combo))
                   for combo in itertools.product(*(p.values() for p in space.params))
                   if space.key(dict(zip(space.names, combo))) not in recorded)
    out_of_range = {**missing, "block_size_x": 17}
    incomplete = {k: v for k, v in missing.items() if k != "use_cmem"}
    trials = conv_evaluator.evaluate([missing, out_of_range, incomplete])
    for trial in trials:
        assert trial.status is Status.UNMEASURED
        assert trial.time_ms is None and not trial.ok
    assert not space.is_valid(missing)


def test_replay_stream_matches_evaluate(conv_evaluator):
    configs = [t.config for t in list(conv_evaluator.recording.trials.values())[:20]]
    streamed = list(conv_evaluator.stream(configs))
    assert [i for i, _ in streamed] == list(range(20))
    assert [t.to_dict() for _, t in streamed] == [t.to_dict() for t in conv_evaluator.evaluate(configs)]


def test_replay_returns_copies_not_the_recording(conv_evaluator):
    cfg = conv_evaluator.recording.optimum.config
    trial, = conv_evaluator.evaluate([cfg])
    trial.times_ms.append(99.0)
    trial.extra["x"] = 1
    again, = conv_evaluator.evaluate([cfg])
    assert 99.0 not in again.times_ms and "x" not in again.extra


def test_plain_json_loads_the_same_as_gzip(tmp_path, conv_evaluator):
    path = tmp_path / "convolution_A100.json"
    path.write_bytes(gzip.decompress(CONV.read_bytes()))
    plain = load_recording(path)
    gz = conv_evaluator.recording
    assert plain.summary() == gz.summary()
    assert set(plain.trials) == set(gz.trials)
    assert all(plain.trials[k].to_dict() == gz.trials[k].to_dict() for k in gz.trials)


# ---------------------------------------------------------------------------------------- Kernel Tuner cache files
def test_closed_kernel_tuner_cache_loads(tmp_path):
    rec = load_recording(write(tmp_path / "toy.json", kt_cache_text(TOY_ENTRIES, closed=True)))
    assert keys_and_times(rec) == expected_toy(TOY_ENTRIES)
    trial = rec.trials[rec.space.key({"bx": 32, "tile": 1})]
    assert trial.times_ms == [1.25, 1.5, 1.75]
    assert trial.extra == {"GFLOP/s": pytest.approx(1000 / 32)}
    assert rec.meta["device_name"] == "Test GPU" and rec.meta["kernel_name"] == "toy_kernel"
    # declared values that were never measured are kept in the parameter
    assert rec.space.by_name["bx"].values() == (32, 64, 128)
    assert rec.space.count() == 4


def test_truncated_cache_after_complete_entry_without_closing_braces(tmp_path):
    text = kt_cache_text(TOY_ENTRIES, closed=True)
    assert text.endswith("}\n}}")
    rec = load_recording(write(tmp_path / "a.json", text[:-3]))
    assert keys_and_times(rec) == expected_toy(TOY_ENTRIES)


def test_truncated_cache_after_trailing_comma(tmp_path):
    text = kt_cache_text(TOY_ENTRIES)
    assert text.endswith("},")
    rec = load_recording(write(tmp_path / "c.json", text))
    assert keys_and_times(rec) == expected_toy(TOY_ENTRIES)


@pytest.mark.parametrize("marker", ['"bx": 64, "ti', '"compile_ti', '"benchmark_time": '])
def test_truncated_cache_in_the_middle_of_an_entry_keeps_complete_entries(tmp_path, marker):
    text = kt_cache_text(TOY_ENTRIES)
    last = text.rindex("\n")
    cut = text.index(marker, last) + len(marker)
    rec = load_recording(write(tmp_path / "b.json", text[:cut]))
    assert keys_and_times(rec) == expected_toy(TOY_ENTRIES[:3])


def test_truncated_cache_at_every_position_inside_last_entry_keeps_complete_entries(tmp_path):
    text = kt_cache_text(TOY_ENTRIES)
    last = text.rindex("\n")
    wrong = []
    for cut in range(last + 1, len(text) - 1):   # up to, not including, the entry's closing brace
        rec = load_recording(write(tmp_path / "cut.json", text[:cut]))
        if keys_and_times(rec) != expected_toy(TOY_ENTRIES[:3]):
            wrong.append(text[last + 1:cut][-30:])
    assert wrong == []


def test_truncated_cache_inside_time_value_does_not_invent_a_time(tmp_path):
    text = kt_cache_text(TOY_ENTRIES)
    cut = text.rindex('"time": 2.0625') + len('"time": 2.06')
    rec = load_recording(write(tmp_path / "t.json", text[:cut]))
    assert keys_and_times(rec) == expected_toy(TOY_ENTRIES[:3])


def test_header_only_cache_is_format_error(tmp_path):
    err = one_line_format_error(write(tmp_path / "h.json", kt_cache_text([])))
    assert "no entries" in str(err)


def test_gzip_of_truncated_cache(tmp_path):
    text = kt_cache_text(TOY_ENTRIES)
    cut = text.index('"compile_ti', text.rindex("\n")) + len('"compile_ti')
    path = tmp_path / "cut.json.gz"
    path.write_bytes(gzip.compress(text[:cut].encode(), mtime=0))
    rec = load_recording(path)
    assert keys_and_times(rec) == expected_toy(TOY_ENTRIES[:3])


def test_gzip_stream_cut_short_keeps_complete_entries(tmp_path):
    # random hex notes keep the entries poorly compressible, so a cut stream still holds several
    entries = [dict(kt_entry(bx, tile, 0.5 + i / 7), note=f"{random.Random(i).getrandbits(2000):0500x}")
               for i, (bx, tile) in enumerate(itertools.product((32, 64, 128), (1, 2)))]
    full = gzip.compress(kt_cache_text(entries, closed=True).encode(), mtime=0)
    path = tmp_path / "short.json.gz"
    path.write_bytes(full[: len(full) * 2 // 3])
    rec = load_recording(path)
    got = keys_and_times(rec)
    assert 0 < len(got) < len(entries)
    assert got == {k: v for k, v in expected_toy(entries).items() if k in got}


def test_kernel_tuner_failure_strings_map_to_statuses(tmp_path):
    entries = [kt_entry(32, 1, "InvalidConfig"), kt_entry(32, 2, "CompilationFailedConfig"),
               kt_entry(64, 1, "RuntimeFailedConfig"), kt_entry(64, 2, 1.0)]
    rec = load_recording(write(tmp_path / "f.json", kt_cache_text(entries, closed=True)))
    by_config = {(t.config["bx"], t.config["tile"]): t for t in rec.trials.values()}
    assert by_config[(32, 1)].status is Status.INVALID
    assert by_config[(32, 2)].status is Status.COMPILE_ERROR
    assert by_config[(64, 1)].status is Status.RUNTIME_ERROR
    assert by_config[(64, 2)].status is Status.OK
    for key, name in [((32, 1), "InvalidConfig"), ((32, 2), "CompilationFailedConfig"),
                      ((64, 1), "RuntimeFailedConfig")]:
        assert by_config[key].time_ms is None and by_config[key].error == name
        assert by_config[key].cost_s == pytest.approx((850.5 + 150.25 + 12.0) / 1000)
    assert rec.optimum.config == {"bx": 64, "tile": 2}


# ---------------------------------------------------------------------------------------- T4
def t4_result(bx: int, tile: int, invalidity: str, value=None, unit="ms", validation=2.0, benchmark=40.0) -> dict:
    """One result as Kernel Tuner's ``get_t4_results`` writes it: ``times`` in the file's timeunit (ms)."""
    times = {"compilation": 750.0, "benchmark": benchmark, "framework": 10.0, "search_algorithm": 1.0,
             "validation": validation, "runtimes": [1.0, 2.0, 3.0] if invalidity == "correct" else []}
    return {"timestamp": "2024-01-01T00:00:00Z", "configuration": {"bx": bx, "tile": tile},
            "times": {k: v for k, v in times.items() if v is not None}, "invalidity": invalidity, "correctness": 1,
            "measurements": [] if value is None else [{"name": "time", "value": value, "unit": unit}],
            "objectives": ["time"]}


def test_t4_results_statuses_and_times(tmp_path):
    data = {"schema_version": "1.0.0", "kernel_name": "toy_t4", "device_name": "T4 GPU",
            "metadata": {"timeunit": "milliseconds"}, "results": [
                t4_result(32, 1, "correct", 1.5), t4_result(32, 2, "compile"), t4_result(64, 1, "runtime"),
                t4_result(64, 2, "correctness"), t4_result(128, 1, "constraints"),
                t4_result(128, 2, "correct", 1200.0, unit="us", validation=0, benchmark=None)]}
    rec = load_recording(write(tmp_path / "t4.json", json.dumps(data)))
    t = {(x.config["bx"], x.config["tile"]): x for x in rec.trials.values()}
    assert len(t) == 6 and rec.meta["format"] == "t4" and rec.meta["device_name"] == "T4 GPU"
    assert {k: v.status for k, v in t.items()} == {
        (32, 1): Status.OK, (32, 2): Status.COMPILE_ERROR, (64, 1): Status.RUNTIME_ERROR,
        (64, 2): Status.WRONG_RESULT, (128, 1): Status.INVALID, (128, 2): Status.OK}
    assert t[(32, 1)].time_ms == 1.5 and t[(32, 1)].times_ms == [1.0, 2.0, 3.0]
    assert t[(32, 1)].compile_s == pytest.approx(0.75) and t[(32, 1)].bench_s == pytest.approx(0.042)
    # the measurement's unit (us) scales the time only; without "benchmark" the runtimes are the cost
    assert t[(128, 2)].time_ms == pytest.approx(1.2)
    assert t[(128, 2)].times_ms == pytest.approx([1.0, 2.0, 3.0])
    assert t[(128, 2)].bench_s == pytest.approx(6e-3)
    for key in [(32, 2), (64, 1), (64, 2), (128, 1)]:
        assert t[key].time_ms is None and not t[key].ok and t[key].compile_s == pytest.approx(0.75)
    assert rec.optimum.config == {"bx": 128, "tile": 2}
    assert rec.space.count() == 6


def test_t4_correct_result_without_time_measurement_is_not_ok(tmp_path):
    data = {"schema_version": "1.0.0", "results": [t4_result(32, 1, "correct"), t4_result(64, 1, "correct", 2.0)]}
    rec = load_recording(write(tmp_path / "t4.json", json.dumps(data)))
    t = {x.config["bx"]: x for x in rec.trials.values()}
    assert t[32].status is Status.RUNTIME_ERROR and t[32].time_ms is None
    assert t[64].ok and t[64].time_ms == 2.0


def test_t4_without_results_is_format_error(tmp_path):
    err = one_line_format_error(write(tmp_path / "t4.json", json.dumps({"schema_version": "1.0.0",
                                                                        "results": []})))
    assert "T4" in str(err)


# ---------------------------------------------------------------------------------------- kerntune table
def table_space() -> Space:
    return Space([PowerOfTwo("bx", low=16, high=128), IntRange("unroll", low=1, high=4), Boolean("flag"),
                  ListParam("tile", element=PowerOfTwo("t", low=1, high=4), length=2)],
                 ["bx * unroll <= 256"], name="toy_table")


def table_trials(space: Space) -> list[Trial]:
    configs = list(space.enumerate())[::7][:12]
    trials = [Trial(dict(c), Status.OK, time_ms=1.0 + i / 8, times_ms=[1.0, 1.5], compile_s=0.5 + i,
                    bench_s=0.125, extra={"GB/s": 10.0 * i}) for i, c in enumerate(configs)]
    trials[3] = Trial(dict(configs[3]), Status.COMPILE_ERROR, compile_s=2.0, error="ptxas error")
    return trials


def test_table_roundtrip_keeps_trials(tmp_path):
    space = table_space()
    trials = table_trials(space)
    data = table_dict(space, trials, {"kernel_name": "toy", "device_name": "Toy GPU"})
    path = write(tmp_path / "table.json", json.dumps(data))
    rec = load_recording(path)
    assert rec.meta["format"] == "kerntune-table" and rec.meta["kernel_name"] == "toy"
    assert rec.space.names == space.names and rec.space.name == "toy_table"
    assert len(rec.trials) == len(trials)
    for t in trials:
        got = rec.trials[rec.space.key(t.config)]
        assert got.to_dict() == t.to_dict()
        assert isinstance(got.config["tile"], tuple)
    evaluator = ReplayEvaluator(rec)
    replayed = evaluator.evaluate([t.config for t in trials])
    assert [r.to_dict() for r in replayed] == [t.to_dict() for t in trials]


def test_table_space_excludes_configs_not_in_the_table(tmp_path):
    space = table_space()
    trials = table_trials(space)
    rec = load_recording(write(tmp_path / "table.json", json.dumps(table_dict(space, trials, {}))))
    recorded = {space.key(t.config) for t in trials}
    assert rec.space.count() == len(trials)
    assert {rec.space.key(c) for c in rec.space.enumerate()} == recorded
    assert rec.space.key(rec.space.default) in recorded
    outside = next(c for c in space.enumerate() if space.key(c) not in recorded)
    assert space.is_valid(outside) and not rec.space.is_valid(outside)
    trial, = ReplayEvaluator(rec).evaluate([outside])
    assert trial.status is Status.UNMEASURED and trial.time_ms is None
    # the declared constraint still holds in the replay space
    assert any(c.text == "bx * unroll <= 256" for c in rec.space.constraints)


def test_table_with_config_outside_its_space_is_format_error(tmp_path):
    space = table_space()
    data = table_dict(space, [Trial({**space.default, "bx": 3}, Status.OK, time_ms=1.0)], {})
    err = one_line_format_error(write(tmp_path / "table.json", json.dumps(data)))
    assert "does not fit" in str(err)


def test_table_with_bad_status_is_format_error(tmp_path):
    space = table_space()
    data = table_dict(space, [Trial(dict(space.default), Status.OK, time_ms=1.0)], {})
    data["trials"][0]["status"] = "fast"
    err = one_line_format_error(write(tmp_path / "table.json", json.dumps(data)))
    assert "bad trial row" in str(err)


def test_empty_table_is_format_error(tmp_path):
    err = one_line_format_error(write(tmp_path / "table.json", json.dumps(table_dict(table_space(), [], {}))))
    assert "no trials" in str(err)


# ---------------------------------------------------------------------------------------- unreadable files
def test_missing_file_is_format_error(tmp_path):
    err = one_line_format_error(tmp_path / "nope.json.gz")
    assert "not found" in str(err) and "nope.json.gz" in str(err)


def test_directory_is_format_error(tmp_path):
    err = one_line_format_error(tmp_path)
    assert "directory" in str(err)


@pytest.mark.parametrize("text", ["hello, this is not JSON\nsecond line\n", "", "{not json at all\n}\n",
                                  "block_size_x,time\n32,1.5\n"])
def test_non_json_text_is_format_error(tmp_path, text):
    err = one_line_format_error(write(tmp_path / "notes.json", text))
    assert "JSON" in str(err)


def test_binary_file_is_format_error(tmp_path):
    path = tmp_path / "blob.json"
    path.write_bytes(bytes(range(256)) * 4)
    err = one_line_format_error(path)
    assert "not a text file" in str(err)


def test_gzip_of_binary_is_format_error(tmp_path):
    path = tmp_path / "blob.json.gz"
    path.write_bytes(gzip.compress(bytes(range(128, 256)) * 4))
    err = one_line_format_error(path)
    assert "not a text file" in str(err)


@pytest.mark.parametrize("payload", [b"\x1f\x8b" + b"\x00" * 64,
                                     gzip.compress(b'{"cache": {}}', mtime=0)[:10] + b"\xff" * 40],
                         ids=["bad-method", "bad-deflate-block"])
def test_corrupt_gzip_is_format_error(tmp_path, payload):
    path = tmp_path / "corrupt.json.gz"
    path.write_bytes(payload)
    one_line_format_error(path)


@pytest.mark.parametrize("data", [[1, 2], {"a": 1}, None, 5, "text",
                                  {"cache": {}, "tune_params_keys": []},
                                  {"schema_version": "1.0.0"}])
def test_json_of_unknown_shape_is_format_error(tmp_path, data):
    err = one_line_format_error(write(tmp_path / "odd.json", json.dumps(data)))
    assert "odd.json" in str(err)


def test_unknown_shape_message_names_the_expected_formats(tmp_path):
    err = one_line_format_error(write(tmp_path / "odd.json", json.dumps({"a": 1})))
    assert "unknown recording format" in str(err) and "Kernel Tuner" in str(err) and "T4" in str(err)
    err = one_line_format_error(write(tmp_path / "list.json", "[1, 2]"))
    assert "not an object" in str(err)


# ---------------------------------------------------------------------------------------- KTT
def ktt_result(bx: int, ro: int, status: str = "Ok", duration: float = 0.0, profiled: bool = False) -> dict:
    """One entry of KTT's JSON results, as its serializer writes it (Configuration as Name/Value pairs)."""
    runs = [] if status != "Ok" else [{"KernelFunction": "conv", "Duration": duration, "Overhead": 20000.0,
                                       "GlobalSize": {"X": 1, "Y": 1, "Z": 1}, "LocalSize": {"X": bx, "Y": 1, "Z": 1},
                                       **({"ProfilingData": {"Counters": [], "RemainingProfilingRuns": 0}} if profiled else {})}]
    return {"KernelName": "conv", "Status": status, "TotalDuration": duration, "TotalOverhead": 20000.0,
            "ExtraDuration": 0.0, "ExtraOverhead": 0.0, "ComputationResults": runs,
            "Configuration": [{"Name": "BLOCK_SIZE_X", "IsDouble": False, "Value": bx},
                              {"Name": "READ_ONLY", "IsDouble": False, "Value": ro}]}


def ktt_file(results: list, unit: str = "Microseconds") -> str:
    return json.dumps({"Metadata": {"ComputeApi": "CUDA", "Device": "NVIDIA GeForce RTX 3090", "KttVersion": "2.1.0",
                                    "Platform": "NVIDIA CUDA", "GlobalSizeType": "CUDA", "Timestamp": "t",
                                    "TimeUnit": unit}, "Results": results})


def test_ktt_results_statuses_times_and_profiling_reruns(tmp_path):
    rec = load_recording(write(tmp_path / "ktt.json", ktt_file([
        ktt_result(32, 0, duration=800.0),
        ktt_result(32, 1, duration=650.0),
        ktt_result(64, 0, "ComputationFailed"),
        ktt_result(64, 1, "ValidationFailed"),
        ktt_result(128, 0, "CompilationFailed"),
        ktt_result(32, 1, duration=900.0, profiled=True),   # a rerun for profiling counters: dropped
    ])))
    t = {(x.config["BLOCK_SIZE_X"], x.config["READ_ONLY"]): x for x in rec.trials.values()}
    assert rec.meta["format"] == "ktt" and rec.meta["device_name"] == "NVIDIA GeForce RTX 3090"
    assert rec.meta["repeated_results_dropped"] == 1 and len(t) == 5
    assert {k: v.status for k, v in t.items()} == {
        (32, 0): Status.OK, (32, 1): Status.OK, (64, 0): Status.RUNTIME_ERROR, (64, 1): Status.WRONG_RESULT,
        (128, 0): Status.COMPILE_ERROR}
    assert t[(32, 1)].time_ms == pytest.approx(0.65) and rec.optimum.config == {"BLOCK_SIZE_X": 32, "READ_ONLY": 1}
    assert t[(32, 0)].bench_s == pytest.approx(0.02 + 0.0008)   # the tuner's overhead plus the kernel, in seconds


def test_ktt_profiled_run_is_kept_only_when_it_is_the_only_one(tmp_path):
    rec = load_recording(write(tmp_path / "ktt.json", ktt_file([
        ktt_result(32, 0, duration=2.0, profiled=True), ktt_result(32, 1, duration=1.0)], unit="Milliseconds")))
    assert sorted(x.time_ms for x in rec.trials.values()) == [1.0, 2.0]


def test_ktt_bad_files_are_one_line_errors(tmp_path):
    err = one_line_format_error(write(tmp_path / "a.json", ktt_file([ktt_result(32, 0, duration=1.0)], unit="Fortnights")))
    assert "TimeUnit" in str(err)
    other = ktt_result(64, 0, duration=1.0)
    other["Configuration"] = other["Configuration"][:1]
    err = one_line_format_error(write(tmp_path / "b.json", ktt_file([ktt_result(32, 0, duration=1.0), other])))
    assert "differ from the first result's" in str(err)


def test_table_rows_its_own_constraints_exclude_are_left_out_with_a_note(tmp_path):
    """A table restricted by a constraint added to its space (``num_warps <= 4``) kept the rows it
    excludes: the optimum and median were taken over configs no search could propose, so a strategy
    that measured every reachable config scored "never within 5%" of an unreachable optimum."""
    space = table_space()
    configs = [space.default, {**space.default, "flag": True}, {**space.default, "unroll": 2, "flag": True},
               {**space.default, "unroll": 2}, {**space.default, "bx": 32}]
    rows = [Trial(c, Status.OK, time_ms=t) for c, t in zip(configs, (3.0, 1.0, 1.5, 2.0, 2.5))]  # flag: fastest
    data = table_dict(space, rows, {})
    data["space"]["constraints"].append("not flag")
    rec = load_recording(write(tmp_path / "table.json", json.dumps(data)))
    kept = [t for t in rows if not t.config["flag"]]
    assert len(rec.trials) == len(kept) < len(rows)
    assert rec.summary()["optimum_ms"] == min(t.time_ms for t in kept)
    assert all(rec.space.is_valid(t.config) for t in rec.trials.values())
    assert f"{len(rows) - len(kept)} recorded config(s) outside the table's constraints" in rec.summary()["note"]
