"""The bad-input corpus of ``tests/test_bad_inputs.py``: files and command lines a hostile or
careless user gives kerntune (issue 22).  Each case names what must happen: ``error`` (one line
``kerntune: error: …`` and exit code 2) or ``ok`` (a finished run, exit code 0, that stored the
failure instead of stopping on it)."""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

NAMES = ["BX", "BY", "U"]
VALUES = {"BX": [16, 32, 64, 128], "BY": [1, 2, 4, 8], "U": [1, 2]}


@dataclass
class Case:
    id: str
    argv: list[str]
    expect: str = "error"            # error | ok
    needles: tuple[str, ...] = ()    # words the error line must hold
    env: dict[str, str] = field(default_factory=dict)


def kt_cache(mutate: Callable[[dict], None] | None = None, n: int | None = None) -> dict:
    """A small valid Kernel Tuner cache (32 configs), optionally broken by ``mutate``."""
    cache = {}
    for bx in VALUES["BX"]:
        for by in VALUES["BY"]:
            for u in VALUES["U"]:
                key = f"{bx},{by},{u}"
                cache[key] = {"BX": bx, "BY": by, "U": u, "time": 1.0 + (bx * by % 7) / 10 + u / 100,
                              "times": [1.0, 1.1], "compile_time": 120.0, "benchmark_time": 30.0}
    data = {"device_name": "TestGPU", "kernel_name": "toy", "problem_size": [64],
            "tune_params_keys": list(NAMES), "tune_params": {k: list(v) for k, v in VALUES.items()},
            "objective": "time", "cache": dict(list(cache.items())[:n]) if n else cache}
    if mutate:
        mutate(data)
    return data


def _entry(data: dict) -> dict:
    return next(iter(data["cache"].values()))


def _set_entry(key: str, value: object) -> Callable[[dict], None]:
    def f(data: dict) -> None:
        _entry(data)[key] = value
    return f


def t4(mutate: Callable[[dict], None] | None = None) -> dict:
    results = []
    for bx in VALUES["BX"]:
        results.append({"configuration": {"BX": bx}, "invalidity": "correct",
                        "times": {"compilation_time": 0.1, "runtimes": [1.0, 1.2]},
                        "measurements": [{"name": "time", "value": bx / 10, "unit": "ms"}]})
    data = {"schema_version": "1.0.0", "kernel_name": "toy_t4", "results": results}
    if mutate:
        mutate(data)
    return data


def table(mutate: Callable[[dict], None] | None = None) -> dict:
    space = {"params": [{"name": "BX", "kind": "choice", "options": [16, 32, 64]}]}
    trials = [{"config": {"BX": v}, "status": "ok", "time_ms": v / 10} for v in (16, 32, 64)]
    data = {"format": "kerntune-table", "version": 1, "meta": {}, "space": space, "trials": trials}
    if mutate:
        mutate(data)
    return data


def _deep(n: int) -> str:
    return "[" * n + "]" * n


def recording_files(d: Path) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Write every bad (and a few good-but-odd) recording; name -> (expect, needles)."""
    out: dict[str, tuple[str, tuple[str, ...]]] = {}

    def put(name: str, content: bytes | str | dict, expect: str = "error", *needles: str) -> None:
        path = d / name
        if isinstance(content, dict):
            content = json.dumps(content)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        out[name] = (expect, needles)

    put("empty.json", b"", "error", "not JSON")
    put("binary.json", bytes(range(256)) * 4, "error")
    put("prose.json", "this is not json", "error", "not JSON")
    put("list.json", "[1, 2, 3]", "error", "top level")
    put("number.json", "42", "error")
    put("unknown.json", {"hello": 1}, "error", "unknown recording format")
    put("tp_list.json", kt_cache(lambda d: d.update(tune_params=["BX", "BY"], tune_params_keys=None)), "error", "tune_params")
    put("tp_string.json", kt_cache(lambda d: d.update(tune_params="BX", tune_params_keys=None)), "error", "tune_params")
    put("tpk_string.json", kt_cache(lambda d: d.update(tune_params_keys="BX")), "error", "tune_params_keys")
    put("cache_list.json", kt_cache(lambda d: d.update(cache=[1, 2])), "error")
    put("cache_empty.json", kt_cache(lambda d: d.update(cache={})), "error")
    put("time_negative.json", kt_cache(_set_entry("time", -1.97)), "error", "not a time")
    put("time_true.json", kt_cache(_set_entry("time", True)), "error", "not a time")
    put("time_zero.json", kt_cache(_set_entry("time", 0)), "error", "not a time")
    put("time_list.json", kt_cache(_set_entry("time", [1.0])), "error", "not a time")
    put("time_object.json", kt_cache(_set_entry("time", {"a": 1})), "error", "not a time")
    marked = json.dumps(kt_cache(_set_entry("time", 123456.5)))
    put("time_bigint.json", marked.replace("123456.5", "9" * 5000), "error")
    put("compile_string.json", kt_cache(_set_entry("compile_time", "slow")), "error", "compile_time")
    put("compile_list.json", kt_cache(_set_entry("compile_time", [1, 2])), "error", "compile_time")
    put("compile_negative.json", kt_cache(_set_entry("compile_time", -5)), "error", "compile_time")
    put("times_int.json", kt_cache(_set_entry("times", 7)), "error", "times")
    put("times_string.json", kt_cache(_set_entry("times", "1,2")), "error", "times")
    put("key_disagrees.json", kt_cache(lambda d: d["cache"].update({"16,1,1": dict(_entry(d), BX=32)})), "error",
        "disagrees")
    put("deep_top.json", _deep(200_000), "error")
    put("deep_entry.json", json.dumps(kt_cache()).replace('"times": [1.0, 1.1]', '"times": ' + _deep(100_000), 1),
        "error")
    put("deep_object.json", '{"a":' * 100_000 + "1" + "}" * 100_000, "error")
    put("param_object.json", kt_cache(_set_entry("BX", {"x": 1})), "error")
    # Kernel Tuner's own failure marks: a run over them finishes and stores the failures.
    put("time_failure_name.json", kt_cache(_set_entry("time", "CompilationFailedConfig")), "ok")
    put("time_nan.json", marked.replace("123456.5", "NaN"), "ok")
    put("time_inf.json", marked.replace("123456.5", "Infinity"), "ok")
    put("time_1e20.json", kt_cache(_set_entry("time", 1e20)), "ok")
    put("truncated.json", json.dumps(kt_cache())[:-300], "ok")
    put("all_failed.json", kt_cache(lambda d: [e.update(time="RuntimeFailedConfig") for e in d["cache"].values()]),
        "ok")
    put("gz_corrupt.json.gz", b"\x1f\x8b\x08\x00" + b"\xff" * 200, "error", "gzip")
    put("gz_truncated.json.gz", gzip.compress(json.dumps(kt_cache()).encode())[:-40], "ok")
    put("gz_binary.json.gz", gzip.compress(bytes(range(256)) * 64), "error")
    put("gz_bomb.json.gz", gzip.compress(b" " * (3 * 2**20)), "error", "decompresses to over")
    # T4
    put("t4_results_dict.json", t4(lambda d: d.update(results={"a": 1})), "error", "T4")
    put("t4_results_empty.json", t4(lambda d: d.update(results=[])), "error", "T4")
    put("t4_result_string.json", t4(lambda d: d.update(results=["x"])), "error", "configuration")
    put("t4_no_config.json", t4(lambda d: d["results"][0].pop("configuration")), "error", "configuration")
    put("t4_times_string.json", t4(lambda d: d["results"][1].update(times="fast")), "error", "times")
    put("t4_measurements_dict.json", t4(lambda d: d["results"][1].update(measurements={"time": 1})), "error",
        "measurements")
    put("t4_negative.json", t4(lambda d: d["results"][1]["measurements"][0].update(value=-3)), "error", "not a time")
    put("t4_value_string.json", t4(lambda d: d["results"][1]["measurements"][0].update(value="1.5")), "error",
        "not a time")
    put("t4_runtimes_int.json", t4(lambda d: d["results"][1]["times"].update(runtimes=3)), "error", "runtimes")
    put("t4_duplicate.json", t4(lambda d: d["results"].append(d["results"][0])), "error", "recorded twice")
    # kerntune tables
    put("table_trials_string.json", table(lambda d: d.update(trials="abc")), "error")
    put("table_time_string.json", table(lambda d: d["trials"][0].update(time_ms="fast")), "error", "not a time")
    put("table_time_negative.json", table(lambda d: d["trials"][0].update(time_ms=-1)), "error", "not a time")
    put("table_status.json", table(lambda d: d["trials"][0].update(status="great")), "error", "bad trial row")
    put("table_no_params.json", table(lambda d: d.update(space={})), "error", "params")
    put("table_params_string.json", table(lambda d: d["space"].update(params="BX")), "error", "params")
    put("table_misfit.json", table(lambda d: d["trials"][0].update(config={"BX": 17})), "error", "does not fit")
    put("table_huge_int.json", table(lambda d: d.update(space={"params": [
        {"name": "BX", "kind": "int", "low": 0, "high": 10**12}]})), "error", "values")
    put("table_duplicate.json", table(lambda d: d["trials"].append(d["trials"][0])), "error", "recorded twice")
    put("table_compile_negative.json", table(lambda d: d["trials"][0].update(compile_s=-1)), "error", "durations")
    return out


SPACE_FILES = {
    "params_strings.yaml": ("params: [a, b]\n", ("malformed",)),
    "unknown_kind.yaml": ("params:\n  - {name: A, kind: wat, options: [1]}\n", ("unknown kind",)),
    "bad_yaml.yaml": ("params: [\n", ("not valid YAML",)),
    "top_list.yaml": ("- 1\n- 2\n", ("mapping",)),
    "empty.yaml": ("", ("mapping",)),
    "huge_int.yaml": ("params:\n  - {name: A, kind: int, low: 0, high: 1000000000000}\n", ("values",)),
    "bad_constraint.yaml": ("params:\n  - {name: A, kind: choice, options: [1, 2]}\nconstraints: ['A +* 2']\n", ()),
    "import_constraint.yaml": ("params:\n  - {name: A, kind: choice, options: [1, 2]}\n"
                               "constraints: ['__import__(\"os\").system(\"true\")']\n", ()),
    "bad_default.yaml": ("params:\n  - {name: A, kind: choice, options: [1, 2]}\ndefault: {A: 3}\n", ("default",)),
    "float_bounds.yaml": ("params:\n  - {name: A, kind: int, low: 0.5, high: 4}\n", ("integer",)),
    "list_huge.yaml": ("params:\n  - {name: A, kind: list, length: 40, element: {kind: choice, options: [1, 2, 3]}}\n",
                       ("lists",)),
    "no_valid.yaml": ("params:\n  - {name: A, kind: choice, options: [1, 2]}\nconstraints: ['A > 5']\n",
                      ("no valid",)),
    "binary.yaml": (bytes(range(256)).decode("latin-1"), ()),
}


def write_stores(d: Path, good_db: Path) -> dict[str, Path]:
    """Stores that kerntune must refuse (or read) with one line."""
    out = {}
    p = d / "newer.db"
    c = sqlite3.connect(p)
    c.execute("CREATE TABLE runs (id TEXT)")
    c.execute("PRAGMA user_version=99")
    c.commit()
    c.close()
    out["newer"] = p
    p = d / "foreign_runs.db"
    c = sqlite3.connect(p)
    c.execute("CREATE TABLE runs (id TEXT, name TEXT)")
    c.commit()
    c.close()
    out["foreign_runs"] = p
    p = d / "other_app.db"
    c = sqlite3.connect(p)
    c.execute("CREATE TABLE songs (title TEXT)")
    c.commit()
    c.close()
    out["other_app"] = p
    p = d / "text.db"
    p.write_text("not a database at all, just text that is long enough\n")
    out["text"] = p
    p = d / "short.db"
    p.write_bytes(b"SQLite")
    out["short"] = p
    p = d / "malformed.db"
    raw = bytearray(good_db.read_bytes())
    for i in range(4096, min(len(raw), 4096 * 6)):
        raw[i] = (raw[i] * 7 + 13) % 256
    p.write_bytes(bytes(raw))
    out["malformed"] = p
    p = d / "dir.db"
    p.mkdir()
    out["dir"] = p
    return out


def fifo(d: Path) -> Path:
    p = d / "fifo.json"
    os.mkfifo(p)
    return p
