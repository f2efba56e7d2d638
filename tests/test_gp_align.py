"""The twenty-fourth design pass (``auto``'s ``gp_align``, ``kerntune/strategies/gp_model.py``): integer
fields whose values are not a run of powers of two get a power-of-two alignment column in the GP's
kernel, and the GP learns from it what the value order alone cannot express."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kerntune.evaluate import ReplayEvaluator
from kerntune.run.search import RunOptions, run_search
from kerntune.space import Choice, PowerOfTwo, Space
from kerntune.strategies import Budget
from kerntune.strategies.gp_model import _GP, _encode, alignment_columns, ordinal_steps
from tests.scripted import synthetic_evaluator


def test_alignment_columns_only_where_the_order_does_not_say_it() -> None:
    space = Space([PowerOfTwo("BLOCK_M", low=16, high=256), Choice("BX", options=(16, 32, 48, 64, 80, 96)),
                   Choice("LAYOUT", options=("row", "col", "tile")), Choice("T", options=(1, 2))])
    cols = alignment_columns(space)
    assert len(cols) == 1  # powers of two, strings and two values get none
    x = _encode(space, [{"BLOCK_M": 16, "BX": v, "LAYOUT": "row", "T": 1} for v in (16, 32, 48, 64, 80, 96)])
    levels = cols[0].column(x)
    # 16, 48 and 80 divide by 16 only; 32 and 96 by 32; 64 by 64
    assert levels[0] == levels[2] == levels[4] < levels[1] == levels[5] < levels[3] == 1.0


def test_the_gp_carries_what_it_learns_about_aligned_sizes_to_unmeasured_ones() -> None:
    """Times that depend on alignment only (a sawtooth along the value order): with the column, the
    GP predicts an unmeasured multiple of 32 faster than an unmeasured odd multiple of 16; without it
    it cannot tell them apart better than the order does."""
    values = tuple(range(16, 16 * 17, 16))  # 16 .. 256
    space = Space([Choice("BX", options=values)])
    cfgs = [{"BX": v} for v in values]
    x = _encode(space, cfgs)
    y = np.array([0.0 if v % 32 == 0 else 1.0 for v in values])
    train = [0, 1, 2, 3, 4, 5, 8, 9, 10, 11]  # 16 .. 96 and 144 .. 192 measured
    aligned_probe, odd_probe = values.index(224), values.index(208)
    preds = {}
    for name, aux in (("align", alignment_columns(space)), ("plain", None)):
        gp = _GP(1, 20, steps=ordinal_steps(space), alpha=1.0, adaptive=True, aux=aux)
        gp.add_pool(x)
        yn = (y[train] - y[train].mean()) / y[train].std()
        for i in train:
            gp.add_obs(x[i])
        gp.refit(yn, np.array([True]))
        mu, _ = gp.predict(yn)
        preds[name] = mu
    assert preds["align"][aligned_probe] < preds["align"][odd_probe] - 0.5
    assert abs(preds["plain"][aligned_probe] - preds["plain"][odd_probe]) < 0.5
    assert np.array_equal(_GP(1, 20, aux=None).expand(x), x)


CONV = Path(__file__).resolve().parent.parent / "examples" / "spaces" / "convolution_A4000.json.gz"


@pytest.mark.parametrize("opts", [{"gp_align": True}, {"gp_align": True, "gp_ordinal": 0.0}])
def test_gp_align_runs_through_auto_on_a_recording(opts: dict) -> None:
    assert alignment_columns(ReplayEvaluator.from_file(str(CONV)).space)  # block sizes in steps of 16
    res = run_search(ReplayEvaluator.from_file(str(CONV)), "auto", Budget(max_evals=40), seed=1,
                     run=RunOptions(strategy_options=opts))
    assert len(res.history) == 40 and res.best is not None


def test_gp_align_is_a_no_op_on_a_space_of_powers_of_two(tmp_path: Path) -> None:
    for i in (0, 1):
        (tmp_path / str(i)).mkdir()
    runs = [run_search(synthetic_evaluator(tmp_path / str(i)), "auto", Budget(max_evals=30), seed=3,
                       run=RunOptions(strategy_options={"gp_align": on})) for i, on in enumerate((False, True))]
    assert [t.config for t in runs[0].history] == [t.config for t in runs[1].history]
