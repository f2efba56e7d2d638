"""Many shapes under one budget (issue 12): the nearest-first order, the shared budget, warm starts
from the shapes tuned before, the dispatch table and its exports, and the decorator using a shipped
table.  Shapes are the project's three recorded H100 matmul spaces (real measurements, replayed)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kerntune
from kerntune.errors import KerntuneError
from kerntune.evaluate import ReplayEvaluator
from kerntune.run.dispatch import dispatch_table, load_dispatch
from kerntune.run.shapes import read_shapes, tune_shapes, tuning_order
from kerntune.run.warm_start import PastWinner
from kerntune.store import Store
from kerntune.strategies.llm.prompting import first_round

ROOT = Path(__file__).resolve().parent.parent
FILES = {(4096, 4096, 4096): "matmul_4096_h100", (8192, 8192, 512): "matmul_8192x8192x512_h100",
         (256, 8192, 8192): "matmul_256x8192x8192_h100"}


def _evaluator(shape):
    return ReplayEvaluator.from_file(ROOT / "examples" / "spaces" / f"{FILES[shape]}.json.gz")


def test_the_most_central_shape_goes_first_then_nearest() -> None:
    shapes = [(256, 8192, 8192), (8192, 8192, 512), (4096, 4096, 4096), (4096, 4096, 2048)]
    order = tuning_order(shapes)
    assert order[0] == (4096, 4096, 4096)
    assert order[1] == (4096, 4096, 2048)  # distance 1 from the first
    assert sorted(order) == sorted(shapes)


def test_read_shapes_accepts_comments_and_refuses_bad_lines(tmp_path) -> None:
    good = tmp_path / "s.txt"
    good.write_text("# M x N x K\n4096x4096x4096\n8192,8192,512  # skinny K\n\n4096x4096x4096\n")
    assert read_shapes(good) == [(4096, 4096, 4096), (8192, 8192, 512)]
    bad = tmp_path / "b.txt"
    bad.write_text("4096x4096x4096\n4096xfoo\n")
    with pytest.raises(KerntuneError, match="b.txt:2"):
        read_shapes(bad)
    mixed = tmp_path / "m.txt"
    mixed.write_text("4096x4096x4096\n64x64\n")
    with pytest.raises(KerntuneError, match="2 dimensions"):
        read_shapes(mixed)


def test_three_shapes_share_one_budget_and_later_shapes_start_from_earlier_ones(tmp_path) -> None:
    store = Store(tmp_path / "kt.db")
    results = tune_shapes(_evaluator, list(FILES), "pattern", 90, store, seed=0)
    assert [tuple(r.shape) for r in results][0] == (4096, 4096, 4096)
    assert sum(r.evaluations for r in results) <= 90
    assert all(r.best_ms is not None for r in results)
    assert results[0].warm_from == [] and results[0].warm_configs == 0
    assert results[1].warm_from and results[1].warm_configs > 0   # winners of the first shape measured first
    assert len(results[2].warm_from) == 2
    # Each shape's winner is its run's best, and it is in the dispatch table.
    entries = store.iter_best()
    assert sorted(e["problem_key"] for e in entries) == sorted("x".join(map(str, s)) for s in FILES)
    for r in results:
        trials = [t for _, t, _ in store.trials(r.run_id) if t.ok]
        assert r.best_ms == pytest.approx(min(t.time_ms for t in trials))
    table = dispatch_table(entries)
    assert {tuple(s) for s, _, _ in load_dispatch(table)} == set(FILES)


def test_bayes_learns_from_all_past_measurements_not_only_winners(tmp_path) -> None:
    store = Store(tmp_path / "kt.db")
    results = tune_shapes(_evaluator, list(FILES), "bayes", 120, store, seed=1)
    assert results[0].warm_configs == 0
    # The GP takes the past runs as a second task instead of re-measuring their winners.
    assert results[1].warm_configs == 0 and results[1].warm_from
    notes = [r for r in store.conn.execute("SELECT source FROM trials WHERE run_id=?", (results[1].run_id,))]
    assert not any(n["source"] == "warm-start" for n in notes)


def test_cache_export_json_and_triton_lookup(tmp_path) -> None:
    db = tmp_path / "kt.db"
    tune_shapes(_evaluator, list(FILES), "random", 30, Store(db), seed=0)
    run = lambda *a: subprocess.run([sys.executable, "-m", "kerntune", "cache", "export", *a, "--store", str(db)],
                                    capture_output=True, text=True, timeout=120)
    out = run("--json")
    assert out.returncode == 0, out.stderr
    table = json.loads(out.stdout)
    assert len(load_dispatch(table)) == 3
    py = run("--triton")
    assert py.returncode == 0, py.stderr
    tree = ast.parse(py.stdout)
    assert "DISPATCH = {" in py.stdout and "def config_for(*shape):" in py.stdout
    # Run the lookup with a stand-in for triton.Config (no triton on CI machines).
    fake = type(sys)("triton")
    fake.Config = lambda meta, **launch: {**meta, **launch}
    sys.modules.setdefault("triton", fake)
    if sys.modules["triton"] is fake:
        try:
            ns: dict = {}
            exec(compile(tree, "export", "exec"), ns)  # our own generated source, not model output
            assert ns["config_for"](4096, 4096, 4096) == ns["DISPATCH"][(4096, 4096, 4096)]
            assert ns["config_for"](4096, 4096, 1024) == ns["DISPATCH"][(4096, 4096, 4096)]
            assert ns["config_for"](128, 8192, 8192) == ns["DISPATCH"][(256, 8192, 8192)]
        finally:
            del sys.modules["triton"]
    kt = run("--kernel-tuner", str(tmp_path / "kt_cache"))
    assert kt.returncode == 0, kt.stderr
    files = sorted((tmp_path / "kt_cache").glob("*.json"))
    assert len(files) == 3 and all(json.loads(f.read_text())["cache"] for f in files)
    both = run("--json", "--triton")
    assert both.returncode == 2 and "one export format" in both.stderr


class TableKernel:
    """A CPU stand-in for a ``triton.jit`` function keyed by (M, N): records the BLOCK it launched with."""

    arg_names = ["x", "M", "N", "BLOCK"]
    src = "def table_kernel(x, M, N, BLOCK): ..."

    def __init__(self) -> None:
        self.launched: list[int] = []

    def __getitem__(self, grid):
        def launch(x, M, N, BLOCK, num_warps):
            self.launched.append(BLOCK)
        return launch


def test_the_decorator_uses_a_shipped_dispatch_table_and_the_nearest_shape(tmp_path) -> None:
    space = {"params": [{"name": "BLOCK", "kind": "choice", "options": [16, 32, 64, 128]},
                        {"name": "num_warps", "kind": "choice", "options": [2, 4]}],
             "default": {"BLOCK": 16, "num_warps": 2}}
    table = {"format": "kerntune-dispatch/1", "kernel": "table_kernel", "entries": [
        {"shape": [1024, 1024], "config": {"BLOCK": 64, "num_warps": 4}, "time_ms": 1.0},
        {"shape": [64, 8192], "config": {"BLOCK": 32, "num_warps": 4}, "time_ms": 2.0},
        {"shape": [8192, 64], "config": {"BLOCK": 128, "num_warps": 4}, "time_ms": 2.0}]}
    path = tmp_path / "dispatch.json"
    path.write_text(json.dumps(table))
    k = kerntune.autotune(space=space, key=["M", "N"], store=str(tmp_path / "k.db"), on_miss="nearest",
                          dispatch=path)(TableKernel())
    x = np.zeros(4)
    k[(1,)](x, 1024, 1024)   # in the table
    k[(1,)](x, 128, 8192)    # unseen: nearest is 64x8192 (distance 1)
    k[(1,)](x, 4096, 128)    # unseen: nearest is 8192x64 (distance 2)
    assert k.fn.launched == [64, 32, 128]
    assert k.tuned_keys == [] and k.queued == ['{"(dtypes)": {"x": "float64"}, "M": 128, "N": 8192}',
                                          '{"(dtypes)": {"x": "float64"}, "M": 4096, "N": 128}']
    # later launches of the same keys are served from memory: the store is not asked again
    asked: list[str] = []
    store = k.store
    best_entry, iter_best = store.best_entry, store.iter_best
    store.best_entry = lambda *a, **kw: (asked.append("best_entry"), best_entry(*a, **kw))[1]  # type: ignore[method-assign]
    store.iter_best = lambda *a, **kw: (asked.append("iter_best"), iter_best(*a, **kw))[1]  # type: ignore[method-assign]
    for _ in range(3):
        k[(1,)](x, 1024, 1024)
        k[(1,)](x, 128, 8192)
        k[(1,)](x, 4096, 128)
    assert k.fn.launched[3:] == [64, 32, 128] * 3 and asked == []
    k[(1,)](x, 2048, 2048)   # a new key still consults the store (and the table's nearest shape)
    assert "best_entry" in asked and k.fn.launched[-1] == 64
    with pytest.raises(KerntuneError, match="not a kerntune-dispatch/1"):
        kerntune.autotune(space=space, key=["M", "N"], dispatch={"entries": []})(TableKernel())


def test_the_first_prompt_shows_past_winners() -> None:
    ev = _evaluator((8192, 8192, 512))
    past = [PastWinner({"BLOCK_M": 128, "BLOCK_N": 256}, 0.2062, [4096, 4096, 4096], "NVIDIA H100", "r1", 5.0)]
    text = first_round(ev.space, ev.workload(), ev.device(), 10, past=past)[1].content
    assert "on 4096x4096x4096 (NVIDIA H100) the best was" in text and "0.2062 ms" in text
    assert "Past runs" not in first_round(ev.space, ev.workload(), ev.device(), 10)[1].content


def test_many_past_runs_still_leave_the_gp_room_to_refit(tmp_path) -> None:
    """Past measurements are capped so that refits (up to 300 observations) go on: with three
    large past runs the GP must still fit its length-scales, not keep a flat kernel."""
    from kerntune.strategies.gp import _FIT_UNTIL, _past_observations

    ev = _evaluator((4096, 4096, 4096))
    keys = [ev.space.key(c) for c in ev.space.valid_configs()]
    runs = [{k: 0.01 * i for i, k in enumerate(keys[j::3])} for j in range(3)]
    past = _past_observations(ev.space, runs)
    assert len(past) <= _FIT_UNTIL * 2 // 3 and {t for t, _, _ in past} == {1, 2, 3}
