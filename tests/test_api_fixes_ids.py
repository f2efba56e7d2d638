"""``kerntune.tune`` / ``kerntune.compare`` take a run as the CLI does (``last``, a unique prefix),
``report=None`` as no report, and a comparison with no defined score names no best strategy.

Recorded spaces (examples/spaces) and real SQLite files; the all-tie recording is a Kernel Tuner cache
written by the test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kerntune
from kerntune.errors import KerntuneError

ROOT = Path(__file__).resolve().parent.parent
SPACE = ROOT / "examples/spaces/matmul_256x8192x8192_h100.json.gz"


def test_resume_takes_last_and_a_unique_prefix_and_report_none_writes_no_report(tmp_path: Path) -> None:
    """``resume="last"`` or a prefix failed with "no run 'last'" in the API (the CLI takes both), and
    ``report=None`` raised a TypeError after the whole run had been measured."""
    db = tmp_path / "c.db"
    first = kerntune.compare(SPACE, strategies="random,gp", budget=8, repeats=2, store=db, report=None)
    assert first.report is None
    for given in ("last", first.run_id[:6]):
        again = kerntune.compare(resume=given, store=db, report=False)
        assert again.run_id == first.run_id and again.scores["gp"].score == first.scores["gp"].score
    tuned = kerntune.tune(SPACE, strategy="random", budget=5, store=tmp_path / "t.db", report=None)
    assert tuned.report is None
    resumed = kerntune.tune(SPACE, resume=tuned.run_id[:7], store=tmp_path / "t.db", report=False)
    assert resumed.run_id == tuned.run_id and resumed.trials == 5


def test_best_is_refused_where_no_strategy_has_a_score(tmp_path: Path) -> None:
    """Every successful config ties (one works, the rest fail to compile): the score is undefined
    (NaN) and ``best`` named whichever strategy came first; it now says there is none."""
    cache = {"{}".format(a): {"a": a, "time": 5.0 if a == 3 else "CompilationFailedConfig"} for a in range(12)}
    path = tmp_path / "tie.json"
    path.write_text(json.dumps({"device_name": "GPU", "kernel_name": "k", "problem_size": [1],
                                "tune_params_keys": ["a"], "tune_params": {"a": list(range(12))},
                                "objective": "time", "cache": cache}))
    res = kerntune.compare(path, strategies="random,exhaustive", budget=12, repeats=2, store=tmp_path / "s.db",
                           report=False)
    with pytest.raises(KerntuneError, match="no strategy has a score"):
        res.best
