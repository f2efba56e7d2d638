"""The threads-per-block column of the GP's kernel (``gp_model.thread_block_column``; ``auto``'s
``gp_threads``): real GP fits on synthetic times, and real runs on a shipped recording."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

from kerntune.evaluate import ReplayEvaluator
from kerntune.run.search import RunOptions, run_search
from kerntune.space import Choice, PowerOfTwo, Space
from kerntune.strategies import Budget
from kerntune.strategies.gp_model import _GP, _encode, ordinal_steps, thread_block_column
from tests.scripted import synthetic_evaluator

BX = (16, 32, 48, 64, 128)


def _space() -> Space:
    return Space([Choice("block_size_x", options=BX), PowerOfTwo("block_size_y", low=1, high=8),
                  Choice("use_shmem", options=(0, 1))])


def test_the_column_is_the_thread_count_whatever_its_factors() -> None:
    space = _space()
    (col,) = thread_block_column(space)
    x = _encode(space, [{"block_size_x": 32, "block_size_y": 4, "use_shmem": 0},
                        {"block_size_x": 64, "block_size_y": 2, "use_shmem": 1},
                        {"block_size_x": 16, "block_size_y": 8, "use_shmem": 0},
                        {"block_size_x": 16, "block_size_y": 1, "use_shmem": 0},
                        {"block_size_x": 128, "block_size_y": 8, "use_shmem": 0}])
    v = col.column(x)
    assert v[0] == v[1] == v[2]
    assert v[3] == 0.0 and v[4] == 1.0  # 16 threads .. 1024 threads
    assert col.steps == np.log2(1024 / 16)


def test_no_column_unless_two_thread_block_fields_vary() -> None:
    one = Space([Choice("block_size_x", options=BX), Choice("block_size_y", options=(1,)), Choice("t", options=(1, 2))])
    other_names = Space([Choice("BLOCK_M", options=BX), PowerOfTwo("BLOCK_N", low=1, high=8)])
    assert thread_block_column(one) == [] and thread_block_column(other_names) == []


def test_the_gp_carries_a_thread_count_to_unmeasured_shapes() -> None:
    """Times that depend on the thread count only (best at 128 threads): with the column the GP
    predicts an unmeasured 128-thread shape faster than an unmeasured 512-thread one; the fields'
    own columns alone cannot tell them apart as well."""
    space = Space([Choice("block_size_x", options=BX), PowerOfTwo("block_size_y", low=1, high=8)])
    cfgs = [{"block_size_x": bx, "block_size_y": by} for bx, by in itertools.product(BX, (1, 2, 4, 8))]
    x = _encode(space, cfgs)
    y = np.array([abs(np.log2(c["block_size_x"] * c["block_size_y"] / 128)) for c in cfgs])
    probe_good = cfgs.index({"block_size_x": 32, "block_size_y": 4})
    probe_bad = cfgs.index({"block_size_x": 64, "block_size_y": 8})
    train = [i for i in range(len(cfgs)) if i not in (probe_good, probe_bad)
             and cfgs[i]["block_size_x"] * cfgs[i]["block_size_y"] in (16, 32, 128, 256, 1024, 64)][:10]
    gaps = {}
    for name, aux in (("threads", thread_block_column(space)), ("plain", None)):
        gp = _GP(2, 20, steps=ordinal_steps(space), alpha=1.0, adaptive=True, aux=aux)
        gp.add_pool(x)
        yn = (y[train] - y[train].mean()) / y[train].std()
        for i in train:
            gp.add_obs(x[i])
        gp.refit(yn, np.array([True, True]))
        mu, _ = gp.predict(yn)
        gaps[name] = mu[probe_bad] - mu[probe_good]
    assert gaps["threads"] > 0.5
    assert gaps["threads"] > gaps["plain"] + 0.3


CONV = Path(__file__).resolve().parent.parent / "examples" / "spaces" / "convolution_A4000.json.gz"


def test_gp_threads_runs_through_auto_on_a_recording() -> None:
    ev = ReplayEvaluator.from_file(str(CONV))
    assert thread_block_column(ev.space)  # block_size_x and block_size_y both vary
    res = run_search(ev, "auto", Budget(max_evals=40), seed=3, run=RunOptions(strategy_options={"gp_threads": True}))
    assert len(res.history) == 40 and res.best is not None


def test_gp_threads_changes_nothing_where_there_are_no_thread_block_fields(tmp_path: Path) -> None:
    for i in (0, 1):
        (tmp_path / str(i)).mkdir()
    runs = [run_search(synthetic_evaluator(tmp_path / str(i)), "auto", Budget(max_evals=30), seed=5,
                       run=RunOptions(strategy_options={"gp_threads": on})) for i, on in enumerate((False, True))]
    assert [t.config for t in runs[0].history] == [t.config for t in runs[1].history]
