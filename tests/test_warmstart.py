"""Warm starts from past runs in a real store, on the recorded H100 matmul shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from kerntune.evaluate import ReplayEvaluator
from kerntune.run.search import RunOptions, run_search
from kerntune.run.warm_start import past_winners, shape_distance
from kerntune.store import Store
from kerntune.strategies import Budget

SPACES = Path(__file__).resolve().parent.parent / "examples" / "spaces"


def test_shape_distance_is_on_log2_sizes() -> None:
    assert shape_distance([4096, 4096, 4096], [8192, 4096, 4096]) == pytest.approx(1.0)
    assert shape_distance([256, 8192, 8192], [4096, 4096, 4096]) == pytest.approx(4 + 1 + 1)
    assert shape_distance([1, 2], [1, 2, 3]) == float("inf")


def test_past_winners_nearest_shape_first_and_measured_first(tmp_path) -> None:
    evs = {n: ReplayEvaluator.from_file(SPACES / f"matmul_{n}_h100.json.gz")
           for n in ("4096", "8192x8192x512", "256x8192x8192")}
    store = Store(tmp_path / "kt.db")
    for name in ("4096", "256x8192x8192"):
        run_search(evs[name], "random", Budget(max_evals=40), seed=1, run=RunOptions(store=store))
    target = evs["8192x8192x512"]
    w = target.workload()
    winners = past_winners(store, w["kernel_name"], w["problem_size"], target.space, per_run=2)
    assert [x.problem_size for x in winners] == [[4096, 4096, 4096]] * 2 + [[256, 8192, 8192]] * 2
    first = store.trials(store.list_runs()[-1].id)  # the 4096 run: its two best configs come first
    best_4096 = sorted((t for _, t, _ in first if t.ok), key=lambda t: t.time_ms)[:2]
    assert [x.config for x in winners[:2]] == [target.space.canonical(t.config) for t in best_4096]
    assert past_winners(store, "another_kernel", w["problem_size"], target.space) == []
    res = run_search(target, "bayes", Budget(max_evals=12), seed=0,
                     run=RunOptions(warm_start=[x.config for x in winners]))
    assert [t.config for t in res.history[:4]] == [x.config for x in winners]
