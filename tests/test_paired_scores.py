"""``benchmarks/search_quality/paired.py``: a design pass's candidate and the default compared repeat by
repeat.  Checked on real replays (the forty-third pass's convolution rows, committed with their
per-repeat scores): pairing must use the repeats' order, so it narrows the standard error only when the
two runs of each repeat share their seed."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from tests.bench_scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks/results/search_quality/pass43"


def _paired():
    return load_script("paired")


def _rows(name: str) -> dict[str, dict]:
    return _paired().load(str(RESULTS / name))


def test_pairing_by_seed_narrows_the_error_and_a_shuffled_order_does_not() -> None:
    mod = _paired()
    default, candidate = _rows("paired_default_conv_s1000.json"), _rows("paired_le_conv_s1000.json")
    key = "auto:convolution_A100"
    r = mod.paired(default[key], candidate[key])
    assert r is not None
    # the mean of the per-repeat differences is the difference of the two scores
    assert math.isclose(r["difference"], candidate[key]["score"] - default[key]["score"], abs_tol=1e-5)
    assert r["correlation"] > 0.5 and r["paired_se"] < 0.6 * r["unpaired_se"]
    # the same scores in another order: the pairing no longer matches seeds, and the error widens again
    shuffled = dict(candidate[key], per_repeat=list(np.random.default_rng(0).permutation(candidate[key]["per_repeat"])))
    s = mod.paired(default[key], shuffled)
    assert s is not None and math.isclose(s["difference"], r["difference"], abs_tol=1e-9)
    assert s["paired_se"] > 1.5 * r["paired_se"]


def test_rows_of_other_seeds_or_without_per_repeat_scores_are_not_paired() -> None:
    mod = _paired()
    default, candidate = _rows("paired_default_conv_s1000.json"), _rows("paired_le_conv_s1000.json")
    key = "auto:convolution_A4000"
    assert mod.paired(default[key], dict(candidate[key], seed=2000)) is None
    assert mod.paired(default[key], {k: v for k, v in candidate[key].items() if k != "per_repeat"}) is None
    old = json.loads((ROOT / "benchmarks/results/search_quality/pass39/fb05_conv_s1000.json").read_text())["rows"][0]
    assert mod.paired({**old, "seed": 1000}, candidate["auto:" + old["space"]]) is None  # written before per_repeat
