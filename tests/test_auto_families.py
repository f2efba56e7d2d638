"""The nineteenth pass's family bandit (``family_share``, off by default; ``kerntune/strategies/families.py``)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from kerntune.evaluate import ReplayEvaluator, Status, Trial, table_dict
from kerntune.run.search import RunOptions, run_search
from kerntune.space import Boolean, Choice, PowerOfTwo, Space
from kerntune.strategies import Budget
from kerntune.strategies.families import FamilyBandit, family_fields


def _space() -> Space:
    return Space([PowerOfTwo("BM", low=16, high=256), Choice("W", options=(1, 2, 4, 8)),
                  Choice("unroll", options=(1, 2, 4)), Boolean("shmem"), Choice("mode", options=("a", "b")),
                  Choice("fixed", options=(7,))], name="families")


def _time(cfg: dict) -> float:
    # The optimum sits in the family (shmem off, mode "b"), which is poor almost everywhere else.
    t = 1.0 + 0.1 * abs(cfg["BM"] - 64) / 16 + 0.05 * abs(cfg["W"] - 4)
    if not cfg["shmem"] and cfg["mode"] == "b":
        return 0.5 * t if (cfg["BM"], cfg["W"]) == (32, 8) else 3.0 * t
    return t * (0.9 if cfg["shmem"] else 1.2)


def _evaluator(tmp_path: Path) -> ReplayEvaluator:
    space = _space()
    trials = [Trial(c, Status.OK, _time(c), compile_s=0.1, bench_s=0.1) for c in space.enumerate()]
    path = tmp_path / "families.json"
    path.write_text(json.dumps(table_dict(space, trials, {"kernel_name": "families", "device_name": "NVIDIA H100"})))
    return ReplayEvaluator.from_file(path)


def test_family_fields_come_from_value_counts_only() -> None:
    params = _space().params
    # two-valued fields only (a one-valued field is no switch), declaration order
    assert family_fields(params) == ["shmem", "mode"]
    # with three-valued fields allowed, fewest values first, and dropped while families exceed the cap
    assert family_fields(params, max_card=3, max_fields=3, max_families=12) == ["unroll", "shmem", "mode"]
    assert family_fields(params, max_card=3, max_fields=3, max_families=8) == ["shmem", "mode"]
    assert family_fields(params, max_fields=1) == ["shmem"]
    # renaming the fields changes nothing but the names
    renamed = Space([PowerOfTwo("x", low=16, high=256), Choice("y", options=(1, 2, 4, 8)), Choice("z", options=(1, 2, 4)),
                     Boolean("p"), Choice("q", options=("a", "b"))])
    assert family_fields(renamed.params) == ["p", "q"]
    assert family_fields(Space([PowerOfTwo("x", low=16, high=256)]).params) == []


def test_bandit_visits_every_family_the_minimum_before_ucb() -> None:
    fams = [(0,), (1,), (2,)]
    b = FamilyBandit(["f"], fams, min_visits=2, c=0.0)
    rng = random.Random(0)
    ys, yf = [], []
    chosen = []
    for _ in range(6):
        f = b.choose(ys, yf, rng)
        chosen.append(f)
        b.observe({"f": f[0]})
        ys.append({(0,): 0.0, (1,): -1.0, (2,): 1.0}[f])
        yf.append(f)
    assert sorted(chosen) == sorted(fams * 2), chosen  # each family twice before any UCB choice
    assert b.choose(ys, yf, rng) == (1,)  # then (c = 0) the family with the lowest best target
    # a family closed to this step is not chosen
    assert b.choose(ys, yf, rng, open_families={(0,), (2,)}) == (0,)
    assert b.choose(ys, yf, rng, open_families={(2,)}) is None


def test_family_share_off_changes_nothing_and_on_visits_each_family(tmp_path: Path) -> None:
    ev = _evaluator(tmp_path)
    base = run_search(ev, "auto", Budget(max_evals=60), seed=5)
    off = run_search(ev, "auto", Budget(max_evals=60), seed=5, run=RunOptions(strategy_options={"family_share": 0.0}))
    assert [t.config for t in base.history] == [t.config for t in off.history]
    opts = {"family_share": 1.0, "family_min": 12}
    on = run_search(ev, "auto", Budget(max_evals=60), seed=5, run=RunOptions(strategy_options=opts))
    again = run_search(ev, "auto", Budget(max_evals=60), seed=5, run=RunOptions(strategy_options=opts))
    assert [t.config for t in on.history] == [t.config for t in again.history]
    assert [t.config for t in on.history] != [t.config for t in base.history]

    def counts(history: list) -> dict[tuple, int]:
        out: dict[tuple, int] = {}
        for t in history:
            k = (t.config["shmem"], t.config["mode"])
            out[k] = out.get(k, 0) + 1
        return out

    # every family measured at least family_min times (at this seed the default leaves one at 8)
    assert min(counts(base.history).values()) < 12, counts(base.history)
    assert len(counts(on.history)) == 4 and min(counts(on.history).values()) >= 12, counts(on.history)


def test_family_restart_moves_only_a_restarts_first_point(tmp_path: Path) -> None:
    ev = _evaluator(tmp_path)
    base = run_search(ev, "auto", Budget(max_evals=80), seed=2, run=RunOptions(strategy_options={"stall": 8}))
    on = run_search(ev, "auto", Budget(max_evals=80), seed=2,
                    run=RunOptions(strategy_options={"stall": 8, "family_restart": True, "family_c": 3.0}))
    assert any("restart" in n for n in base.notes)
    b, o = [t.config for t in base.history], [t.config for t in on.history]
    # the same run until the first restart (which needs the startup and ``stall`` evaluations), then not
    first = next(i for i, (x, y) in enumerate(zip(b, o)) if x != y)
    assert first >= 5 + 8, first
