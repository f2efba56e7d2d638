"""A recording says how many configs it cannot tell from its optimum (``Recording.optimum_ties``).

The cache below is a Kernel Tuner cache written by hand: four configs with their individual runs,
two of them inside each other's noise, one clearly slower, one failed.  ``space info`` and
``compare`` say so; a recording without individual runs (the shipped copies) says nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kerntune.evaluate import load_recording

ROOT = Path(__file__).resolve().parent.parent


def _entry(x: int, y: int, times: list[float] | None, time: float | str | None = None) -> dict:
    entry: dict = {"x": x, "y": y, "time": time if time is not None else sum(times) / len(times)}
    if times is not None:
        entry["times"] = times
    return entry


def _cache(tmp_path: Path, noisy: bool) -> Path:
    best = [1.000, 1.010, 0.990, 1.005, 0.995, 1.000]                     # mean 1.000, se ~0.003
    close = [1.004, 1.020, 0.985, 1.010, 0.998, 1.007] if noisy else [1.020, 1.021, 1.019, 1.020, 1.021, 1.019]
    slow = [1.50, 1.51, 1.49, 1.50, 1.50, 1.50]
    cache = {"1,1": _entry(1, 1, best), "1,2": _entry(1, 2, close), "2,1": _entry(2, 1, slow),
             "2,2": _entry(2, 2, None, "RuntimeFailedConfig")}
    doc = {"device_name": "hand-written", "kernel_name": "k", "problem_size": [1], "tune_params_keys": ["x", "y"],
           "tune_params": {"x": [1, 2], "y": [1, 2]}, "objective": "time", "cache": cache}
    path = tmp_path / ("noisy.json" if noisy else "clear.json")
    path.write_text(json.dumps(doc))
    return path


def _kerntune(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "kerntune", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "KERNTUNE_STORE": str(cwd / "s.db")})
    assert proc.returncode == 0, proc.stderr
    return proc


def test_ties_count_the_configs_inside_the_optimums_noise(tmp_path: Path) -> None:
    assert load_recording(_cache(tmp_path, noisy=True)).optimum_ties() == 2
    # the same close config measured tightly: 2% slower is 2% slower
    assert load_recording(_cache(tmp_path, noisy=False)).optimum_ties() == 1


def test_a_recording_without_runs_has_no_tie_count(tmp_path: Path) -> None:
    shipped = load_recording(ROOT / "examples" / "spaces" / "convolution_A100.json.gz")
    assert shipped.optimum_ties() is None
    proc = _kerntune(["space", "info", str(ROOT / "examples" / "spaces" / "convolution_A100.json.gz")], tmp_path)
    assert "standard errors" not in proc.stdout


def test_space_info_and_compare_say_when_the_optimum_is_not_unique(tmp_path: Path) -> None:
    noisy = _cache(tmp_path, noisy=True)
    assert "1 other config(s) within two standard errors" in _kerntune(["space", "info", str(noisy)], tmp_path).stdout
    proc = _kerntune(["compare", "--space", str(noisy), "--strategies", "random", "--budget", "3", "--repeats", "2",
                      "--json", "c.json", "--report", "r.html"], tmp_path)
    assert "1 other config(s) within two standard errors" in proc.stdout
    assert json.loads((tmp_path / "c.json").read_text())["optimum_ties"] == 2
    assert "1 other config(s) within two standard errors" in (tmp_path / "r.html").read_text()
    clear = _cache(tmp_path, noisy=False)
    assert "stands clear of measurement noise" in _kerntune(["space", "info", str(clear)], tmp_path).stdout
    proc = _kerntune(["compare", "--space", str(clear), "--strategies", "random", "--budget", "3", "--repeats", "2"],
                     tmp_path)
    assert "standard errors" not in proc.stdout
