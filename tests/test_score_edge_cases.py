"""The methodology score on recordings at its edges: every successful config at one time, and at least
half of them tied at the optimum (the cutoff's own branch).

The recordings are Kernel Tuner caches written here; ``compare`` runs as a user runs it, in a subprocess
where its printed table, JSON and report are what must hold.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from kerntune.compare.harness import run_compare
from kerntune.compare.metrics import Reference, score_spread
from kerntune.evaluate import ReplayEvaluator
from kerntune.store import Store

UNDEFINED = "n/a (all successful configs tie)"


def _cache(path: Path, times: list[float | str]) -> Path:
    """A Kernel Tuner cache of one parameter ``x`` = 0..len(times)-1; a str time is a failure
    (e.g. ``CompilationFailedConfig``)."""
    cache = {str(x): {"x": x, "time": t} for x, t in enumerate(times)}
    doc = {"device_name": "hand-written", "kernel_name": "k", "problem_size": [1], "tune_params_keys": ["x"],
           "tune_params": {"x": list(range(len(times)))}, "objective": "time", "cache": cache}
    path.write_text(json.dumps(doc))
    return path


def _reference(path: Path) -> Reference:
    """The reference ``compare`` builds from a recording (harness.run_compare)."""
    rec = ReplayEvaluator.from_file(str(path)).recording
    return Reference.from_times(rec.ok_times, len(rec.trials) - len(rec.ok_times))


def test_compare_prints_no_score_where_all_successful_configs_tie(tmp_path: Path) -> None:
    """11 of 12 configs fail to compile and one runs in 5.0 ms: every strategy, random included, scored
    1.000 ± 0.000, because the floor of a usable gap scaled with worst - optimum (0 here) and the 1e-14
    rounding noise of random's expectation was divided by itself.  There is nothing to rank: the table
    and the report say the score is n/a and why, and the JSON holds null (not NaN, which is no JSON)."""
    space = _cache(tmp_path / "that.json", [5.0] + ["CompilationFailedConfig"] * 11)
    proc = subprocess.run([sys.executable, "-m", "kerntune", "compare", "--space", str(space),
                           "--strategies", "random,exhaustive,pattern", "--budget", "100", "--repeats", "4",
                           "--json", "c.json", "--report", "r.html"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "KERNTUNE_STORE": str(tmp_path / "s.db")})
    assert proc.returncode == 0, proc.stderr
    assert UNDEFINED in proc.stdout
    rows = [line for line in proc.stdout.splitlines() if line.lstrip("│ ").startswith(("random", "exhaustive",
                                                                                         "pattern"))]
    cells = [[c.strip() for c in row.split("│")][1:5] for row in rows]  # strategy, score, ± se, interval
    assert sorted(c[0] for c in cells) == ["exhaustive", "pattern", "random"], proc.stdout
    assert all(c[1:] == ["n/a", "n/a", "n/a"] for c in cells), proc.stdout  # they read 1.000, 0.000, 1.00..1.00
    text = (tmp_path / "c.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    for stats in json.loads(text)["strategies"].values():
        assert stats["score"] is None and stats["score_stderr"] is None and stats["score_ci95"] == [None, None]
    report = (tmp_path / "r.html").read_text()
    assert report.count(UNDEFINED) == 3 and ">nan<" not in report


def test_score_spread_of_an_all_tie_recording_is_undefined_and_null_in_json(tmp_path: Path) -> None:
    """The same recording through the functions the benchmarks call: the score was 1.0 for a curve at the
    optimum and for one at the worst time alike (both 5.0 ms), from rounding noise alone."""
    ref = _reference(_cache(tmp_path / "tie.json", [5.0] + ["CompilationFailedConfig"] * 11))
    spread = score_spread([np.full(5, 5.0), np.full(3, 5.0)], ref, 100)  # both at the optimum and the worst
    assert math.isnan(spread.score) and math.isnan(spread.stderr)
    assert spread.to_dict()["score"] is None and spread.to_dict()["ci95"] == [None, None]
    assert json.dumps(spread.to_dict()).count("null") == 4


def _expected_first_hit_rank(n: int, hits: int) -> float:
    """Mean rank of the first of ``hits`` values among ``n`` in a uniformly random order, by enumerating
    every set of positions the hits can take (the definition, not the closed form (n + 1) / (hits + 1))."""
    firsts = [min(pos) + 1 for pos in itertools.combinations(range(n), hits)]
    return sum(firsts) / len(firsts)


def test_cutoff_where_the_median_is_the_optimum_is_the_expected_rank_of_the_first_hit(tmp_path: Path) -> None:
    """With at least half the configs tied at the optimum the cutoff was ceil(i / (N + 1 - i)), the
    expected number of misses before the first hit, not the documented expected rank of that hit: 1 on
    every such recording without failures, so the score rested on the first evaluation alone (the default
    config for every strategy but random).  Six of ten at 1.0 ms gives rank 11/7 -> 2 (it was 1); four of
    six successes at 1.0 ms and four failures (counted as draws above the threshold) 11/5 -> 3 (it was 2)."""
    coarse = _cache(tmp_path / "coarse.json", [1.0] * 6 + [2.0, 3.0, 4.0, 5.0])
    failing = _cache(tmp_path / "failing.json", [1.0] * 4 + [2.0, 3.0] + ["RuntimeFailedConfig"] * 4)
    for path, hits, want in ((coarse, 6, 2), (failing, 4, 3)):
        ref = _reference(path)
        assert ref.median == ref.optimum  # the branch under test
        assert ref.cutoff(100) == math.ceil(_expected_first_hit_rank(len(ref.values), hits)) == want
        assert ref.cutoff(1) == 1  # still capped at the budget
    with Store(tmp_path / "s.db") as st:  # and the harness reports the cutoff it scored with
        assert run_compare(str(coarse), ["random"], 20, 1, 0, st).cutoff == 2
