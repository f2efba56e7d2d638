"""Kernel Tuner caches: numbers given as strings on one side of the file, and failures written under
the objective's key (Kernel Tuner before 1.0), read as Kernel Tuner reads them."""

from __future__ import annotations

import json

from kerntune.evaluate.recorded import load_recording
from kerntune.evaluate.replay import ReplayEvaluator
from kerntune.evaluate.trial import Status


def cache(tune_params: dict, entries: dict, objective: str = "time") -> dict:
    return {"device_name": "A100", "kernel_name": "k", "problem_size": [1024], "objective": objective,
            "tune_params_keys": list(tune_params), "tune_params": tune_params, "cache": entries}


def write(path, data) -> str:
    path.write_text(json.dumps(data))
    return str(path)


def test_entry_values_given_as_strings_are_the_declared_numbers(tmp_path) -> None:
    rec = load_recording(write(tmp_path / "c.json", cache({"bx": [16, 32], "tx": [1, 2]}, {
        "16,1": {"bx": "16", "tx": "1", "time": 1.0}, "32,2": {"bx": "32", "tx": "2", "time": 0.5}})))
    assert rec.space.cartesian_size == 4
    assert rec.optimum.config == {"bx": 32, "tx": 2}
    assert ReplayEvaluator(rec).evaluate([{"bx": 16, "tx": 1}])[0].time_ms == 1.0


def test_declared_values_given_as_strings_are_the_recorded_numbers(tmp_path) -> None:
    rec = load_recording(write(tmp_path / "c.json", cache({"bx": ["16", "32"], "name": ["a", "b"]}, {
        "16,a": {"bx": 16, "name": "a", "time": 1.0}, "32,b": {"bx": 32, "name": "b", "time": 0.5}})))
    assert rec.space.cartesian_size == 4
    assert rec.optimum.config == {"bx": 32, "name": "b"}


def test_failure_under_the_objective_key_keeps_its_kind(tmp_path) -> None:
    rec = load_recording(write(tmp_path / "c.json", cache({"bx": [16, 32, 64]}, {
        "16": {"bx": 16, "time": 1.0, "GFLOP/s": 10.0},
        "32": {"bx": 32, "GFLOP/s": "CompilationFailedConfig"},
        "64": {"bx": 64, "GFLOP/s": "InvalidConfig"}}, objective="GFLOP/s")))
    status = {t.config["bx"]: t.status for t in rec.trials.values()}
    assert status == {16: Status.OK, 32: Status.COMPILE_ERROR, 64: Status.INVALID}
    assert rec.ok_times == [1.0]
