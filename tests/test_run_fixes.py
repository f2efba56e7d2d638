"""Fixes to the run loop (``kerntune.run.search``, ``SearchContext``) and the strategies' starts:
resumes that leave their stored path, null options of llm-seeded, ``target_ms`` within a batch,
the default drawn twice into a startup sample, partial or foreign warm-start configs, and a model
round asked for after the budget was spent.  Real recordings and real SQLite stores; a scripted
model where one is asked (tests named so)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kerntune.evaluate import ReplayEvaluator, Status, Trial, table_dict
from kerntune.llm import LLMClient
from kerntune.run.search import RunOptions, run_search
from kerntune.space import IntRange, Space
from kerntune.store import Store
from kerntune.strategies import Budget
from kerntune.strategies.base import SearchContext
from scripted import ScriptedProvider, answer, failing, synthetic_evaluator

CONV = Path(__file__).resolve().parent.parent / "examples" / "spaces" / "convolution_A100.json.gz"
LEFT_PATH = "the resumed run left its stored path"


def _gpu_like(parallelism: int) -> ReplayEvaluator:
    """The convolution recording on the wall clock with ``parallelism`` compile workers, as a GPU
    evaluator whose free memory caps its workers differently in two processes."""
    ev = ReplayEvaluator.from_file(CONV)
    ev.simulated_clock = False
    ev.parallelism = parallelism
    return ev


def _stop_after(n: int):  # noqa: ANN202 - a progress callback
    def progress(ctx: SearchContext) -> None:
        if ctx.evaluations >= n:
            raise KeyboardInterrupt

    return progress


def _killed_run(store: Store, run_id: str, ev: ReplayEvaluator, strategy: str, budget: int, after: int,
                warm_start: list[dict] | None = None) -> None:
    with pytest.raises(KeyboardInterrupt):
        run_search(ev, strategy, Budget(max_evals=budget), 0,
                   RunOptions(store=store, run_id=run_id, progress=_stop_after(after), warm_start=warm_start or ()))
    assert len(store.trials(run_id)) == after


def _forget_resume_path(store: Store, run_id: str) -> None:
    """The run as a store written before the path was kept holds it (or any resume whose path
    differs for a reason nothing records)."""
    options = json.loads(store.conn.execute("SELECT options_json FROM runs WHERE id=?", (run_id,)).fetchone()[0])
    options.pop("resume_path", None)
    store.conn.execute("UPDATE runs SET options_json=? WHERE id=?", (json.dumps(options), run_id))
    store.conn.commit()


# -- 1. resume -----------------------------------------------------------------------------------
@pytest.mark.parametrize("strategy", ["gp", "auto"])
def test_resume_that_leaves_its_stored_path_counts_every_stored_trial_once(tmp_path, strategy) -> None:
    """A resume whose batch size differs (3 compile workers, not 4) proposes other configs: the stored
    trials it did not re-walk were left out of the history, the budget and the best (gp: 81 trials
    stored under a budget of 60, and a best slower than one the store held)."""
    store = Store(tmp_path / "store.db")
    _killed_run(store, "r", _gpu_like(4), strategy, 60, 30)
    _forget_resume_path(store, "r")
    stored_before = {key: trial for key, trial, _ in store.trials("r")}
    res = run_search(_gpu_like(3), strategy, Budget(max_evals=60), 0, RunOptions(store=store, run_id="r"))
    trials = store.trials("r")
    assert len(res.history) == 60 and len(trials) == 60, (len(res.history), len(trials))
    assert len({key for key, _, _ in trials}) == 60
    assert res.best is not None
    assert res.best.time_ms == min(t.time_ms for _, t, _ in trials if t.ok)
    assert res.best.time_ms <= min(t.time_ms for t in stored_before.values() if t.ok)
    assert any(note.startswith(LEFT_PATH) for note in res.notes), res.notes


def test_resume_takes_the_stored_trials_in_before_measuring_anything_new(tmp_path) -> None:
    """The stored trials not re-walked come first, in stored order, and the new ones follow: a
    resume with another warm start (a package's pick that changed) took the budget's rest anew."""
    store = Store(tmp_path / "store.db")
    ev = ReplayEvaluator.from_file(CONV)
    configs = list(ev.space.enumerate())
    _killed_run(store, "r", ev, "random", 40, 20, warm_start=[configs[10]])
    _forget_resume_path(store, "r")
    stored = [key for key, _, _ in store.trials("r")]
    res = run_search(ev, "random", Budget(max_evals=40), 0,
                     RunOptions(store=store, run_id="r", warm_start=[configs[500]]))
    keys = [ev.space.key(t.config) for t in res.history]
    assert keys[:20] == stored  # the first warm start differs: nothing was re-walked before it
    assert keys[20] == ev.space.key(configs[500]) and len(keys) == 40
    assert [key for key, _, _ in store.trials("r")] == keys


@pytest.mark.parametrize("strategy", ["gp", "auto"])
def test_resume_keeps_the_warm_start_and_parallelism_the_run_was_started_with(tmp_path, strategy) -> None:
    """What decides the path besides strategy, seed and options is stored with the run: a resume with
    another package pick and fewer compile workers re-walks the first process's path and ends where
    an uninterrupted run ends (it took another path before)."""
    configs = list(ReplayEvaluator.from_file(CONV).space.enumerate())
    first, later = configs[10], configs[500]
    whole = run_search(_gpu_like(4), strategy, Budget(max_evals=60), 0, RunOptions(warm_start=[first]))
    store = Store(tmp_path / "store.db")
    _killed_run(store, "r", _gpu_like(4), strategy, 60, 30, warm_start=[first])
    res = run_search(_gpu_like(3), strategy, Budget(max_evals=60), 0,
                     RunOptions(store=store, run_id="r", warm_start=[later]))
    space = ReplayEvaluator.from_file(CONV).space
    assert [space.key(t.config) for t in res.history] == [space.key(t.config) for t in whole.history]
    assert [key for key, _, _ in store.trials("r")] == [space.key(t.config) for t in whole.history]
    assert not any(note.startswith(LEFT_PATH) for note in res.notes)


# -- 2. llm-seeded's null options ------------------------------------------------------------------
def test_scripted_llm_seeded_null_patience_and_top_up_mean_their_defaults(tmp_path) -> None:
    """``-o patience=null`` passed validation and crashed with a TypeError after the first round was
    measured (None >= int): an option given as null means its documented default (patience rounds + 1,
    top_up false: the one config the model gave is not topped up by the fallback)."""
    ev = synthetic_evaluator(tmp_path)
    store = Store(tmp_path / "store.db")
    client = LLMClient(ScriptedProvider(lambda n, m: answer({"BM": 64, "W": 4, "bs": [32, 32]})), retries=0,
                       backoff_base=0.0)
    res = run_search(ev, "llm-seeded", Budget(max_evals=20), seed=0,
                     run=RunOptions(store=store, llm=client, strategy_options={"patience": None, "top_up": None,
                                                                               "then": "random"}))
    assert len(res.history) == 20 and res.stop_reason == "evaluation budget"
    sources = [s for (s,) in store.conn.execute("SELECT source FROM trials ORDER BY seq")]
    assert sources.count("llm:round1") == 1 and not any("fallback" in s for s in sources), sources


# -- 3. target_ms within a batch --------------------------------------------------------------------
@pytest.mark.parametrize("strategy", ["exhaustive", "random", "genetic", "auto"])
def test_target_ms_stops_the_run_at_the_config_that_meets_it(conv_evaluator, strategy) -> None:
    """The target stopped the run only between batches: exhaustive measured 15 configs past the one
    that met it (a batch of 32), the others up to a whole batch."""
    target = conv_evaluator.recording.summary()["median_ms"]
    res = run_search(conv_evaluator, strategy, Budget(max_evals=500, target_ms=target), seed=0)
    hit = next(i for i, t in enumerate(res.history, 1) if t.ok and t.time_ms <= target)
    assert len(res.history) == hit and res.stop_reason == "target reached"


# -- 4. the default drawn twice ---------------------------------------------------------------------
def _line(tmp_path: Path) -> ReplayEvaluator:
    """Twelve configs (a = 0..11, default 0): a random sample of four draws the default often."""
    space = Space([IntRange("a", low=0, high=11)])
    trials = [Trial(c, Status.OK, 1.0 + c["a"], compile_s=0.5, bench_s=0.1) for c in space.enumerate()]
    path = tmp_path / "line.json"
    path.write_text(json.dumps(table_dict(space, trials, {"kernel_name": "line", "device_name": "NVIDIA H100"})))
    return ReplayEvaluator.from_file(path)


@pytest.mark.parametrize("strategy, options, source", [
    ("genetic", {"population": 5}, "genetic:init"), ("auto", {"startup": 5}, "auto:startup"),
    ("tpe", {"startup": 5}, "bayes:startup"), ("pattern", {"initial": 5}, "pattern:sample"),
    ("gp", {"startup": 5}, "gp:startup")])
@pytest.mark.parametrize("seed", [0, 2])
def test_startup_sample_measures_as_many_distinct_configs_as_asked(tmp_path, strategy, options, source,
                                                                   seed) -> None:
    """The default and a random sample that drew the default again: its copy came back "over
    budget" with budget left and the strategy started from one config fewer (seeds 0 and 2 draw it)."""
    store = Store(tmp_path / "store.db")
    run_search(_line(tmp_path), strategy, Budget(max_evals=10), seed=seed,
               run=RunOptions(store=store, strategy_options=options))
    n = store.conn.execute("SELECT COUNT(*) FROM trials WHERE source=?", (source,)).fetchone()[0]
    assert n == 5


@pytest.mark.parametrize("seed", [0, 2])
def test_scripted_llm_warmup_measures_as_many_distinct_configs_as_asked(tmp_path, seed) -> None:
    """The llm strategy's warm-up (the default and random configs) drew the default twice too."""
    store = Store(tmp_path / "store.db")
    client = LLMClient(ScriptedProvider(failing), retries=0, backoff_base=0.0)
    run_search(_line(tmp_path), "llm", Budget(max_evals=10), seed=seed,
               run=RunOptions(store=store, llm=client, strategy_options={"warmup": 5, "fallback": "random"}))
    n = store.conn.execute("SELECT COUNT(*) FROM trials WHERE source='llm:warmup'").fetchone()[0]
    assert n == 5


def test_a_config_twice_in_one_batch_gets_the_trial_of_its_first_copy(tmp_path) -> None:
    """The second copy was answered UNMEASURED "over budget" with nine evaluations left."""
    ev = _line(tmp_path)
    ctx = SearchContext(ev.space, ev, Budget(max_evals=10))
    trials = ctx.evaluate([{"a": 3}, {"a": 3}, {"a": 3.0}])
    assert [t.status for t in trials] == [Status.OK] * 3 and trials[1] is trials[0] and trials[2] is trials[0]
    assert ctx.evaluations == 1


def test_sample_without_the_batch_is_the_same_sample_where_it_drew_none_of_it(tmp_path) -> None:
    """Excluding the batch's configs changes a sample only where it drew one of them: every other
    search path stays as it was."""
    ev = _line(tmp_path)
    for seed in range(20):
        plain = SearchContext(ev.space, ev, Budget(max_evals=10), seed=seed).sample_unmeasured(4)
        keyed = SearchContext(ev.space, ev, Budget(max_evals=10), seed=seed).sample_unmeasured(4, besides=[{"a": 0}])
        if {"a": 0} not in plain:
            assert keyed == plain
        else:
            assert {"a": 0} not in keyed and len(keyed) == 4
            assert [c for c in plain if c != {"a": 0}] == keyed[:3]


# -- 5. warm-start configs ------------------------------------------------------------------------
def test_partial_warm_start_config_is_completed_from_the_default(tmp_path) -> None:
    """A warm-start config naming some fields raised a bare KeyError."""
    ev = synthetic_evaluator(tmp_path)
    res = run_search(ev, "random", Budget(max_evals=5), seed=0, run=RunOptions(warm_start=[{"BM": 64}]))
    assert res.history[0].config == ev.space.normalize({"BM": 64})
    assert res.history[0].ok and not res.notes


def test_warm_start_config_outside_the_space_is_left_out_with_a_note(tmp_path) -> None:
    """A config outside the space was skipped without a word."""
    ev = synthetic_evaluator(tmp_path)
    res = run_search(ev, "random", Budget(max_evals=5), seed=0,
                     run=RunOptions(warm_start=[{"BM": 1000}, {"nope": 1}, {"BM": 64}]))
    assert res.history[0].config == ev.space.normalize({"BM": 64})
    left = [n for n in res.notes if n.startswith("warm start")]
    assert len(left) == 2 and "1000" in left[0] and "left out" in left[0] and "nope" in left[1], res.notes


# -- 6. no model round once the budget is spent -------------------------------------------------------
def test_scripted_llm_asks_no_model_once_the_budget_is_spent(tmp_path) -> None:
    """Round 1 (warm-up and the fallback's top-up) spent all 20 evaluations, and round 2 was still
    asked (a paid call whose answer nothing could measure)."""
    ev = synthetic_evaluator(tmp_path)
    provider = ScriptedProvider(lambda n, m: json.dumps({"configs": []}))
    client = LLMClient(provider, retries=0, backoff_base=0.0)
    res = run_search(ev, "llm", Budget(max_evals=20), seed=0, run=RunOptions(llm=client))
    assert len(res.history) == 20 and res.stop_reason == "evaluation budget"
    assert {ex["round"] for ex in res.llm_exchanges} == {1}
