"""The GP's prior from past runs (kerntune.strategies.gp_prior) on a real recorded space.

The evaluator replays the recorded H100 matmul 4096^3 space (examples/spaces/); the past runs are
built from the same recording so that what they say is known: one run ranks configs as the
recording does, the other in reverse.  Which of the two the prior follows must depend on how far
each run's shape is, and the first config the GP measures is the prior's best.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from kerntune.evaluate import ReplayEvaluator
from kerntune.run.search import RunOptions, run_search
from kerntune.run.warm_start import PastRun
from kerntune.strategies import Budget
from kerntune.strategies.gp import _encode
from kerntune.strategies.gp_prior import PastPrior

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def ev() -> ReplayEvaluator:
    return ReplayEvaluator.from_file(ROOT / "examples" / "spaces" / "matmul_4096_h100.json.gz")


def runs(ev: ReplayEvaluator, near_is_right: bool) -> tuple[list[PastRun], str, str]:
    """Two past runs over the same 80 configs (the recording's best 40 and 40 others): one with the
    recorded log-ratios, one with them reversed; the one ``near_is_right`` says is 1 away, the other 9."""
    rec = ev.recording
    ok = sorted((t.time_ms, k) for k, t in rec.trials.items() if t.ok)
    chosen = ok[:40] + ok[200:240]
    best = chosen[0][0]
    right = {k: math.log(t / best) for t, k in chosen}
    top = max(right.values())
    wrong = {k: top - v for k, v in right.items()}
    near, far = (right, wrong) if near_is_right else (wrong, right)
    return [PastRun(near, 1.0, [4096, 4096, 2048]), PastRun(far, 9.0, [512, 512, 512])], \
        min(right, key=right.get), min(wrong, key=wrong.get)


@pytest.mark.parametrize("near_is_right", [True, False])
def test_prior_follows_the_nearer_run_and_its_best_is_measured_first(ev, near_is_right):
    transfer, right_best, wrong_best = runs(ev, near_is_right)
    res = run_search(ev, "bayes", Budget(max_evals=1), 0, RunOptions(transfer=transfer))
    assert any("prior mean from 2 past run(s)" in n for n in res.notes)
    first = ev.space.key(res.history[0].config)
    assert first == (right_best if near_is_right else wrong_best)


def test_prior_trusts_a_run_only_near_what_it_measured(ev):
    """Far from a run's measurements its prediction is pulled to the run's neutral quantile: the
    prior ranks an unmeasured config no worse than that neutral value, although the run's own GP,
    having seen only slow configs, predicts it slow."""
    rec = ev.recording
    ok = sorted((t.time_ms, k) for k, t in rec.trials.items() if t.ok)
    slow = ok[-60:]  # a run that only ever measured the slowest configs
    best = slow[0][0]
    run = PastRun({k: math.log(t / best) for t, k in slow}, 0.0)
    pool = ev.space.valid_configs()
    feats = _encode(ev.space, pool)
    live = np.ptp(feats, axis=0) > 0
    prior = PastPrior(ev.space, [run], live)
    values = prior.predict(feats)
    neutral = prior.neutral[0]
    measured = {k for _, k in slow}
    far = np.array([ev.space.key(c) not in measured for c in pool])
    raw_mu, _ = prior._opinions(feats)
    assert np.all(values <= np.maximum(raw_mu[0], neutral) + 1e-9)
    assert np.median(values[far]) < np.median(raw_mu[0][far])  # pulled towards neutral where unmeasured
    assert abs(np.median(values[far]) - neutral) < abs(np.median(raw_mu[0][far]) - neutral)


def test_prior_with_batches_measures_distinct_configs(ev):
    """On a GPU the GP picks batches (kriging believer, in the residual's units with a prior): every
    config of a batch is new and the search uses its whole budget."""
    transfer, right_best, _ = runs(ev, True)
    res = run_search(ev, "bayes", Budget(max_evals=24), 1,
                     RunOptions(transfer=transfer, strategy_options={"batch_size": 4}))
    keys = [ev.space.key(t.config) for t in res.history]
    assert len(keys) == 24 == len(set(keys))
    assert keys[0] == right_best
