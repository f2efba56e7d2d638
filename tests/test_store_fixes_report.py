"""A report's yardsticks and figures: read against the recording the run replayed (not whatever the file
holds now), and the same best/optimum convention as ``compare`` where some repeats found no config.

Real runs of ``python -m kerntune`` on small generated Kernel Tuner cache files.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from pathlib import Path

from cli_runs import run_cli

VALUES = {"a": list(range(8)), "b": list(range(8))}


def _cache(path: Path, fail_share: float, seed: int = 5, leave_out: tuple[str, ...] = ()) -> dict:
    """A Kernel Tuner cache of 64 configs, ``fail_share`` of them failing at run time."""
    rng = random.Random(seed)
    cache = {}
    for a, b in itertools.product(VALUES["a"], VALUES["b"]):
        failed = rng.random() < fail_share
        t = round(rng.uniform(1, 5), 3)
        if f"{a},{b}" not in leave_out:
            cache[f"{a},{b}"] = {"a": a, "b": b, "compile_time": 100.0, "benchmark_time": 10.0,
                                 "time": "RuntimeFailedConfig" if failed else t}
    doc = {"device_name": "X", "kernel_name": "k", "problem_size": [1], "tune_params_keys": list(VALUES),
           "tune_params": VALUES, "objective": "time", "cache": cache}
    path.write_text(json.dumps(doc))
    return doc


def _run_id(proc) -> str:  # noqa: ANN001 - CompletedProcess
    assert proc.returncode == 0, proc.stderr[-2000:]
    return next(line for line in proc.stdout.splitlines() if line.startswith("run id: ")).split()[2]


def _report(tmp: Path, run_id: str, name: str) -> str:
    proc = run_cli(tmp, "report", run_id, "--md", name)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return (tmp / name).read_text()


def test_a_report_does_not_score_a_run_against_a_recording_that_changed_since(tmp_path: Path) -> None:
    """Kernel Tuner appends to its cache in place.  A config measured after the run (faster than any the
    run could find) once became the report's optimum: a finished run read as far from it, with a score
    it never had.  The recording's digest is stored with the run; another one means no yardsticks."""
    rec = tmp_path / "rec.json"
    doc = _cache(rec, 0.2, leave_out=("7,7",))
    tune_id = _run_id(run_cli(tmp_path, "tune", "--replay", str(rec), "--strategy", "random", "--budget", "15",
                              "--no-report"))
    cmp_id = _run_id(run_cli(tmp_path, "compare", "--space", str(rec), "--strategies", "random", "--budget", "10",
                             "--repeats", "2", "--no-report"))
    for run_id in (tune_id, cmp_id):
        before = _report(tmp_path, run_id, f"{run_id}-before.md")
        assert "**optimum**" in before and "changed since the run" not in before
    # the cache gains the missing config, the fastest of all, as a later tuning session appends it
    doc["cache"]["7,7"] = {"a": 7, "b": 7, "compile_time": 100.0, "benchmark_time": 10.0, "time": 0.1}
    rec.write_text(json.dumps(doc))
    for run_id in (tune_id, cmp_id):
        after = _report(tmp_path, run_id, f"{run_id}-after.md")
        notes = [line for line in after.splitlines() if line.startswith("> ")]
        assert any("the recording changed since the run" in n for n in notes), notes
        assert "**optimum**" not in after and "0.1 ms" not in after and "| score |" not in after


def test_report_and_compare_agree_where_some_repeats_found_no_config(tmp_path: Path) -> None:
    """60% of the configs fail and each repeat has one evaluation: some repeats find nothing.  The report
    averaged best/optimum over the repeats that found a config while ``compare`` printed "none ran" (its
    mean was infinite); now both give the same mean over those repeats and say how many they are."""
    rec = tmp_path / "half.json"
    _cache(rec, 0.6)
    proc = run_cli(tmp_path, "compare", "--space", str(rec), "--strategies", "random", "--budget", "1",
                   "--repeats", "6", "--json", "c.json", "--no-report", env={"COLUMNS": "250"})
    run_id = _run_id(proc)
    stats = json.loads((tmp_path / "c.json").read_text())["strategies"]["random"]
    assert stats["best_over_opt"] is not None, "compare's best/opt counted repeats that found nothing"
    k = stats["repeats_found_config"]
    assert 0 < k < 6, k                                   # the recording and seeds make this so
    low, high = stats["best_over_opt_min_max"]
    assert 1.0 <= low <= stats["best_over_opt"] <= high
    assert f"{stats['best_over_opt']:.3f} ({k} of 6)" in proc.stdout, proc.stdout
    assert f"{k} of 6 for random" in proc.stdout
    md = _report(tmp_path, run_id, "r.md")
    row = next(line for line in md.splitlines() if line.startswith("| random"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    header = [c.strip() for c in next(line for line in md.splitlines() if line.startswith("| strategy")).strip("|")
              .split("|")]
    by = dict(zip(header, cells))
    assert by["best/opt"] == f"{stats['best_over_opt']:.3f} ({k} of 6 repeats found one)", by
    assert by["found optimum"] == f"{stats['found_optimum_share']:.0%}"
    assert re.search(rf"\({k} of 6 repeats found one\)", by["best (mean)"]), by
