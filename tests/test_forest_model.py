"""The eleventh design pass's random-forest surrogate (``kerntune/strategies/forest_model.py``,
``auto``'s ``model="rf"``): off by default, deterministic for a seed, and it finds a planted
optimum of a replayed space far larger than its budget."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kerntune.errors import KerntuneError
from kerntune.evaluate import ReplayEvaluator, Status, Trial, table_dict
from kerntune.run.search import RunOptions, run_search
from kerntune.space import PowerOfTwo, Space
from kerntune.strategies import Budget
from kerntune.strategies.surrogate_options import SurrogateOptions
from tests.packages import import_package

NAMES = ("a", "b", "c", "d", "e", "f")
OPT = {"a": 8, "b": 2, "c": 16, "d": 4, "e": 1, "f": 32}   # 6 fields of 6 values: 46,656 configs


def _time(cfg: dict) -> float:
    """A separable bowl around OPT (one field off costs 3-30%) with one interaction (a with b)."""
    t = 1.0
    for i, n in enumerate(NAMES):
        t *= 1.0 + (0.03 + 0.02 * i) * abs(np.log2(cfg[n]) - np.log2(OPT[n]))
    return t * (1.0 + 0.05 * abs(np.log2(cfg["a"]) - np.log2(cfg["b"]) - 2))


@pytest.fixture(scope="module")
def bowl6(tmp_path_factory: pytest.TempPathFactory) -> ReplayEvaluator:
    """The bowl as a replayed recording, built once for the file (writing and reading back 46,656
    configs costs seconds); a replay holds no state between runs."""
    space = Space([PowerOfTwo(n, low=1, high=32) for n in NAMES], name="bowl6")
    trials = [Trial(c, Status.OK, _time(c), compile_s=0.1, bench_s=0.1) for c in space.enumerate()]
    path = tmp_path_factory.mktemp("bowl6") / "bowl6.json"
    path.write_text(json.dumps(table_dict(space, trials, {"kernel_name": "bowl6", "device_name": "NVIDIA H100"})))
    return ReplayEvaluator.from_file(path)


def test_the_gp_stays_the_default_model() -> None:
    assert SurrogateOptions().model == "gp"
    with pytest.raises(KerntuneError, match="model"):
        SurrogateOptions(model="svm")
    with pytest.raises(KerntuneError, match="rf_spread"):
        SurrogateOptions(model="rf", rf_spread="wide")


def test_the_forest_predicts_its_targets_and_is_unsure_away_from_them() -> None:
    import_package("sklearn", "scikit-learn (the [forest] extra)")
    from kerntune.strategies.forest_model import Forest

    rng = np.random.default_rng(0)
    pool = rng.integers(0, 6, size=(400, 4)) / 5.0
    y = pool[:, 0] * 2 + pool[:, 1]
    f = Forest(4, 500, seed=1)
    f.add_pool(pool)
    for x in pool[:200]:
        f.add_obs(x)
    mu, sd = f.predict(y[:200])
    assert mu.shape == sd.shape == (400,) and np.all(sd > 0)
    assert np.corrcoef(mu[200:], y[200:])[0, 1] > 0.9      # it generalises to the unmeasured configs
    f.add_obs(pool[0])
    f.drop_last(1)                                         # a fantasy, forgotten
    assert np.allclose(f.predict(y[:200])[0], mu)


def test_auto_with_the_forest_finds_a_planted_optimum_deterministically(bowl6: ReplayEvaluator) -> None:
    """With the climber off, the forest's own LCB steps find the optimum of 46,656 configs in 100
    evaluations (a forest whose predictions are shuffled ends 1.26-1.69x off at seeds 0-4)."""
    import_package("sklearn", "scikit-learn (the [forest] extra)")
    opts = RunOptions(strategy_options={"model": "rf", "climb_share": 0})
    a = run_search(bowl6, "auto", Budget(max_evals=100), seed=2, run=opts)
    b = run_search(bowl6, "auto", Budget(max_evals=100), seed=2, run=opts)
    assert len(a.history) == 100
    assert [t.config for t in a.history] == [t.config for t in b.history]
    assert a.best is not None and a.best.config == OPT, a.best
    # The forest, not the GP, was the model: the GP engine at the same seed proposes other configs.
    gp = run_search(bowl6, "auto", Budget(max_evals=40), seed=2, run=RunOptions(strategy_options={"climb_share": 0}))
    assert [t.config for t in gp.history] != [t.config for t in a.history[:40]]


@pytest.mark.parametrize("opts", [{"model": "et", "rf_trees": 8}, {"model": "rf", "rf_spread": "total", "rf_trees": 8}])
def test_the_full_engine_runs_with_each_forest_option(bowl6: ReplayEvaluator, opts: dict) -> None:
    import_package("sklearn", "scikit-learn (the [forest] extra)")
    res = run_search(bowl6, "auto", Budget(max_evals=60), seed=0, run=RunOptions(strategy_options=opts))
    assert len(res.history) == 60 and res.best is not None and res.best.time_ms < 1.3


@pytest.mark.parametrize("model", ["rf", "et"])
def test_a_missing_scikit_learn_is_said_before_a_run_is_stored(tmp_path: Path, model: str) -> None:
    """Without scikit-learn (its import blocked in a child process), ``tune -o model=et`` stops with one
    line naming the model asked for, and the store holds no run left 'running' (it once held one per try)."""
    import subprocess
    import sys

    from kerntune.store import Store

    root = Path(__file__).resolve().parent.parent
    db = tmp_path / "s.db"
    code = ("import sys; sys.modules['sklearn'] = None\n"
            "from kerntune.cli import main\n"
            "sys.argv = ['kerntune'] + sys.argv[1:]\n"
            "main()\n")
    proc = subprocess.run([sys.executable, "-c", code, "tune", "--replay",
                           str(root / "examples/spaces/dedispersion_A4000.json.gz"), "--budget", "10",
                           "-o", f"model={model}", "--store", str(db), "--no-report"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert f'model="{model}" needs scikit-learn' in proc.stderr
    assert "Traceback" not in proc.stderr
    if db.exists():
        with Store(db) as st:
            assert st.list_runs() == []
