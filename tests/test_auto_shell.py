"""The twentieth pass's shell steps (``shell_share``, off by default; ``SurrogateSearch._shell_score``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kerntune.evaluate import ReplayEvaluator, Status, Trial, table_dict
from kerntune.run.search import RunOptions, run_search
from kerntune.space import Boolean, Choice, PowerOfTwo, Space
from kerntune.strategies import Budget
from kerntune.strategies.surrogate import SurrogateSearch


def _space() -> Space:
    return Space([PowerOfTwo("BM", low=16, high=256), Choice("W", options=(1, 2, 4, 8)),
                  Choice("unroll", options=(1, 2, 4)), Boolean("shmem"), Choice("mode", options=("a", "b"))],
                 name="shell")


def _time(cfg: dict) -> float:
    # An optimum isolated in two ordered fields: each single move towards it from the runner-up is slower.
    t = 1.0 + 0.1 * abs(cfg["BM"] - 128) / 16 + 0.05 * abs(cfg["W"] - 2) + 0.02 * cfg["unroll"]
    if (cfg["BM"], cfg["W"]) == (32, 8):
        t *= 0.5
    return t * (0.9 if cfg["shmem"] else 1.0) * (1.1 if cfg["mode"] == "a" else 1.0)


def _evaluator(tmp_path: Path) -> ReplayEvaluator:
    space = _space()
    trials = [Trial(c, Status.OK, _time(c), compile_s=0.1, bench_s=0.1) for c in space.enumerate()]
    path = tmp_path / "shell.json"
    path.write_text(json.dumps(table_dict(space, trials, {"kernel_name": "shell", "device_name": "NVIDIA H100"})))
    return ReplayEvaluator.from_file(path)


def _configs(res) -> list[dict]:
    return [t.config for t in res.history]


def test_shell_share_off_changes_nothing(tmp_path: Path) -> None:
    ev = _evaluator(tmp_path)
    base = run_search(ev, "auto", Budget(max_evals=60), seed=5)
    off = {"shell_share": 0.0, "shell_warp": "log", "shell_fit": True, "shell_stall": 3, "shell_family": True, "shell_lo": 1}
    again = run_search(ev, "auto", Budget(max_evals=60), seed=5, run=RunOptions(strategy_options=off))
    assert _configs(base) == _configs(again)


@pytest.mark.parametrize("opts", [{"shell_share": 1.0},
                                  {"shell_share": 1.0, "shell_warp": "log", "shell_fit": True},
                                  {"shell_share": 1.0, "shell_warp": "log", "shell_family": True, "shell_hi": 3},
                                  {"shell_local": True, "shell_lo": 1, "shell_hi": 2, "local_share": 0.6},
                                  {"shell_local": True, "shell_lo": 1, "shell_hi": 2, "shell_warp": "log", "shell_fit": True,
                                   "local_share": 0.6}])
def test_shell_steps_stay_in_the_shell_and_change_the_proposals(tmp_path: Path, monkeypatch, opts: dict) -> None:
    ev = _evaluator(tmp_path)
    names = [p.name for p in ev.space.params]
    two_valued = {p.name for p in ev.space.params if len(p.values()) == 2}
    lo, hi = opts.get("shell_lo", 2), opts.get("shell_hi", 2)
    picks: list[tuple[dict, dict]] = []
    real = SurrogateSearch._shell_score

    def spy(self, centre, mask, yn):
        out = real(self, centre, mask, yn)
        if out is not None:
            assert (self.smodel is not None) == bool(opts.get("shell_fit"))
            open_ = np.flatnonzero(np.isfinite(out))
            assert len(open_) and not mask[open_].any()
            for i in open_:  # every config a shell step may take is lo..hi fields from the incumbent
                c = self.configs[i]
                assert lo <= sum(c[n] != centre[n] for n in names) <= hi
                if opts.get("shell_family"):
                    assert all(c[n] == centre[n] for n in two_valued)
            picks.append((dict(centre), dict(self.configs[int(np.argmin(out))])))
        return out

    monkeypatch.setattr(SurrogateSearch, "_shell_score", spy)
    base = run_search(ev, "auto", Budget(max_evals=60), seed=5)
    assert not picks  # off by default
    on = run_search(ev, "auto", Budget(max_evals=60), seed=5, run=RunOptions(strategy_options=opts))
    assert len(picks) >= 5, "too few shell steps"
    assert _configs(base) != _configs(on)
    measured = [t.config for t in on.history]
    assert sum(p in measured for _, p in picks) >= len(picks) - 1  # the shell's pick is what gets measured


def test_shell_option_checks() -> None:
    from kerntune.errors import KerntuneError
    from kerntune.strategies.surrogate_options import SurrogateOptions

    with pytest.raises(KerntuneError):
        SurrogateOptions(shell_share=0.5, shell_lo=3, shell_hi=2)
    with pytest.raises(KerntuneError):
        SurrogateOptions(shell_fit=True, model="rf")
