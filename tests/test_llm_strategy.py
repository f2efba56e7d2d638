"""The LLM round search with a scripted (deterministic, in-process) model."""

from __future__ import annotations

import json
import sqlite3

import pytest

from kerntune.errors import KerntuneError
from kerntune.llm import LLMClient
from kerntune.run.search import RunOptions, run_search
from kerntune.store import Store
from kerntune.strategies import Budget
from scripted import ScriptedProvider, answer, failing, synthetic_evaluator

BEST = {"BM": 64, "W": 4, "bs": [32, 32]}


def _client(script) -> tuple[LLMClient, ScriptedProvider]:
    provider = ScriptedProvider(script)
    return LLMClient(provider, retries=0, backoff_base=0.0), provider


def test_scripted_stops_after_patience_rounds_without_gain(tmp_path) -> None:
    ev = synthetic_evaluator(tmp_path)

    def script(n, messages):
        if n == 1:
            return answer({"BM": 32}, BEST, {"W": 4})
        # Later rounds: only slow configs, never better than round 1.
        return answer({"BM": 16, "bs": [64, 64], "W": [2, 8][n % 2]}, {"BM": 16, "bs": [16, 64], "W": 8 if n % 2 else 2})

    client, provider = _client(script)
    res = run_search(ev, "llm", Budget(max_evals=200), seed=0,
                     run=RunOptions(llm=client, strategy_options={"initial": 3, "refine": 2, "patience": 2,
                                                                  "max_rounds": 10, "fallback": "random"}))
    assert res.stop_reason == "no improvement for 2 rounds"
    assert len(provider.prompts) == 3


def test_scripted_round_two_prompt_shows_round_one_best_and_its_time(tmp_path) -> None:
    ev = synthetic_evaluator(tmp_path)
    client, provider = _client(lambda n, m: answer(BEST, {"BM": 32}) if n == 1 else answer({"W": 8}))
    run_search(ev, "llm", Budget(max_evals=100), seed=0,
               run=RunOptions(llm=client, strategy_options={"initial": 2, "refine": 1, "max_rounds": 2}))
    round2 = provider.prompts[1][-1].content
    assert '"BM": 64, "W": 4, "bs": [32, 32]' in round2
    assert "Best so far: 1 ms" in round2            # synthetic_time(BEST) == 1.0
    assert "Anchor 1 (best)" in round2 and "Patterns shared by the top" in round2
    round1 = provider.prompts[0][-1].content
    assert "NVIDIA H100" in round1 and "Streaming multiprocessors (SMs): 132" in round1
    assert "bs: list of 2 x (power of two in [16, 64])" in round1


def test_scripted_outage_with_fallback_random_carries_on(tmp_path) -> None:
    ev = synthetic_evaluator(tmp_path)
    client, _ = _client(failing)
    res = run_search(ev, "llm", Budget(max_evals=30), seed=1,
                     run=RunOptions(llm=client, strategy_options={"initial": 8, "refine": 6, "fallback": "random",
                                                                  "max_rounds": 3, "patience": 5}))
    assert len(res.history) == 3 + 8 + 6 + 6       # warm-up, then three fallback rounds
    assert any("model failed" in n for n in res.notes)
    assert all(ex["error"] for ex in res.llm_exchanges)


def test_scripted_outage_with_fallback_error_stops_with_one_clear_line(tmp_path) -> None:
    """... and the stored run says it failed and why (not 'running', as a killed run would), and
    resumes: with the model back, the measured trials are read from the store, none measured again."""
    ev = synthetic_evaluator(tmp_path)
    client, _ = _client(failing)
    store = Store(tmp_path / "k.db")
    with pytest.raises(KerntuneError, match=r"^the model failed in round 1: .*scripted outage$"):
        run_search(ev, "llm", Budget(max_evals=30), seed=1,
                   run=RunOptions(llm=client, store=store, strategy_options={"fallback": "error", "initial": 2,
                                                                             "refine": 2}))
    (run,) = store.list_runs()
    assert run.status == "failed" and "scripted outage" in run.summary["error"]
    measured = len(list(store.trials(run.id)))
    fresh = [{"BM": bm, "W": w, "bs": [x, 64]} for bm in (32, 64, 128) for w in (4, 8) for x in (16, 64)]
    good, _ = _client(lambda n, m: answer(*fresh[2 * (n - 1): 2 * n]))
    res = run_search(ev, "llm", Budget(max_evals=30), seed=1,
                     run=RunOptions(llm=good, store=store, run_id=run.id,
                                    strategy_options={"fallback": "error", "initial": 2, "refine": 2}))
    assert res.resumed_trials == measured > 0
    assert store.get_run(run.id).status == "done"
    exchanges = store.llm_exchanges(run.id)
    assert exchanges and not any(ex["error"] for ex in exchanges)  # the failure that ended it was asked again
    # a later resume replays the stored answers (the model is down again) and measures nothing new
    again = run_search(ev, "llm", Budget(max_evals=30), seed=1,
                       run=RunOptions(llm=client, store=store, run_id=run.id,
                                      strategy_options={"fallback": "error", "initial": 2, "refine": 2}))
    assert again.resumed_trials == len(res.history) and len(again.history) == len(res.history)


def test_scripted_bad_proposals_are_rejected_with_stored_reasons(tmp_path) -> None:
    ev = synthetic_evaluator(tmp_path)
    store = Store(tmp_path / "k.db")
    bad = json.dumps({"configs": [
        {"reasoning": "ok", "config": BEST},
        {"reasoning": "dup", "config": BEST},
        {"reasoning": "unknown", "config": {"BLOCK": 64}},
        {"reasoning": "range", "config": {"BM": 256}},
        {"reasoning": "length", "config": {"bs": [32, 32, 32]}},
        {"reasoning": "already measured", "config": {}},       # the default, measured in warm-up
    ]})
    client, _ = _client(lambda n, m: bad if n == 1 else "{'configs': [{'config': {'W': 4}}]}")
    res = run_search(ev, "llm", Budget(max_evals=40), seed=0,
                     run=RunOptions(llm=client, store=store, run_id="r",
                                    strategy_options={"initial": 6, "refine": 4, "max_rounds": 2, "patience": 5,
                                                      "fallback": "pattern"}))
    rows = sqlite3.connect(tmp_path / "k.db").execute(
        "SELECT round, accepted_json, rejected_json, error FROM llm_exchanges WHERE run_id='r' ORDER BY id").fetchall()
    assert len(rows) == 2
    accepted = json.loads(rows[0][1])
    reasons = [r["reason"] for r in json.loads(rows[0][2])]
    assert [a["config"] for a in accepted] == [BEST]
    assert any("duplicate" in r for r in reasons)
    assert any("BLOCK: unknown parameter" in r for r in reasons)
    assert any("BM: 256 is not allowed" in r for r in reasons)
    assert any("expected 2 values, got 3" in r for r in reasons)
    assert sum("duplicate" in r for r in reasons) == 2   # the in-batch duplicate and the measured default
    assert "single-quoted" in rows[1][3]                  # Python syntax, even after the repair round
    assert any("topped up" in n for n in res.notes)      # under half of round 1 was usable
    assert res.best.config == {"BM": 64, "W": 4, "bs": (32, 32)}


def test_llm_seeded_continues_classically_under_the_shared_budget(tmp_path) -> None:
    ev = synthetic_evaluator(tmp_path)
    client, provider = _client(lambda n, m: answer({"BM": 32, "W": 4}, {"BM": 64, "W": 8}))
    res = run_search(ev, "llm-seeded", Budget(max_evals=25), seed=0,
                     run=RunOptions(llm=client, strategy_options={"initial": 2}))
    assert len(provider.prompts) == 1
    assert len(res.history) == 25
    sources_seen = {t.config["BM"] for t in res.history}
    assert len(sources_seen) > 1


def test_scripted_llm_seeded_measures_only_the_models_configs(tmp_path) -> None:
    """A weak model (one valid config of ten asked) costs one evaluation: no fallback top-up,
    and the classical phase keeps its own random start."""
    ev = synthetic_evaluator(tmp_path)
    store = Store(tmp_path / "k.db")
    client, _ = _client(lambda n, m: answer({"BM": 32, "W": 4}, {"BM": 7}, {"nope": 1}))
    res = run_search(ev, "llm-seeded", Budget(max_evals=20), seed=0,
                     run=RunOptions(llm=client, strategy_options={"initial": 10}, store=store))
    sources = [src for (src,) in store.conn.execute("SELECT source FROM trials WHERE run_id=? ORDER BY seq",
                                                    (res.run_id,))]
    assert sources.count("llm:round1") == 1
    assert not [s for s in sources if "fallback" in s]
    assert sources[sources.index("llm:round1") + 1].startswith("gp:startup")
    assert len(res.history) == 20


def test_scripted_resume_replays_stored_answers_instead_of_asking_again(tmp_path) -> None:
    """A killed LLM run resumes on the same path: the stored answers are replayed."""
    ev = synthetic_evaluator(tmp_path)
    store = Store(tmp_path / "k.db")
    calls = []

    def varying(n, m):  # a model that never answers the same twice
        calls.append(n)
        picks = [{"BM": 32, "W": 4}, {"BM": 64, "W": 8}, {"BM": 64, "bs": [32, 64]}, {"W": 8, "bs": [64, 32]}]
        return answer(picks[(len(calls) - 1) % 4], picks[len(calls) % 4])

    opts = {"initial": 2, "refine": 2, "max_rounds": 3, "patience": 5}
    reference_client, _ = _client(varying)
    ref = run_search(ev, "llm", Budget(max_evals=40), seed=0,
                     run=RunOptions(llm=reference_client, strategy_options=opts))
    calls.clear()

    class Killed(Exception):
        pass

    class Dying(type(ev)):
        def evaluate(self, configs):
            if len(store.trials("r")) >= 6:
                raise Killed()
            return super().evaluate(configs)

    dying = Dying(ev.recording, ev.source)
    client, provider = _client(varying)
    with pytest.raises(Killed):
        run_search(dying, "llm", Budget(max_evals=40), seed=0,
                   run=RunOptions(llm=client, store=store, run_id="r", strategy_options=opts))
    asked_before = len(provider.prompts)
    calls.clear()
    calls.extend(range(asked_before))        # the live model continues where it was
    client2, provider2 = _client(varying)
    res = run_search(ev, "llm", Budget(max_evals=40), seed=0,
                     run=RunOptions(llm=client2, store=store, run_id="r", strategy_options=opts))
    assert len(provider2.prompts) == len(ref.llm_exchanges) - asked_before
    assert [t.config for t in res.history] == [t.config for t in ref.history]


def _sources(ev, strategy: str, script, budget: int, options: dict) -> tuple[list[str], object]:
    from kerntune.strategies import get_strategy
    from kerntune.strategies.base import BudgetExhausted, SearchContext

    sources: list[str] = []
    client, _ = _client(script)
    ctx = SearchContext(ev.space, ev, Budget(max_evals=budget), seed=0, llm=client,
                        on_trial=lambda _i, _k, _t, _c, src: sources.append(src))
    try:
        get_strategy(strategy)(ctx, **options)
    except BudgetExhausted:
        pass
    return sources, ctx


def test_llm_seeded_refuses_tell_unspent_and_lists_neither_option_it_sets(tmp_path) -> None:
    """llm-seeded sets max_rounds (from rounds) and tell_unspent itself: given, each is one line (a
    given tell_unspent once passed the check and ended in a TypeError), and neither is listed."""
    from kerntune.strategies.options import describe_options, validate_options

    ev = synthetic_evaluator(tmp_path)
    client, _ = _client(lambda n, m: answer(BEST))
    for opts, needle in (({"tell_unspent": True}, "tell_unspent is llm's option"),
                         ({"tell_unspent": False}, "tell_unspent"), ({"max_rounds": 2}, "give rounds instead")):
        with pytest.raises(KerntuneError, match=needle) as info:
            run_search(ev, "llm-seeded", Budget(max_evals=10), seed=0,
                       run=RunOptions(llm=client, strategy_options=opts))
        assert "\n" not in str(info.value)
    listed = [row[0] for row in describe_options("llm-seeded")]
    assert "rounds" in listed and "max_rounds" not in listed and "tell_unspent" not in listed
    assert "tell_unspent" in [row[0] for row in describe_options("llm")]
    with pytest.raises(KerntuneError) as info:
        validate_options("llm-seeded", {"nope": 1})
    assert "max_rounds" not in str(info.value) and "tell_unspent" not in str(info.value)


def test_llm_seeded_stops_when_its_llm_phase_reaches_target_ms(tmp_path) -> None:
    ev = synthetic_evaluator(tmp_path)
    for then in ("bayes", "random"):
        sources, ctx = _sources(ev, "llm-seeded", lambda n, m: answer(BEST, {"BM": 32}), 40,
                                {"initial": 2, "target_ms": 1.5, "then": then})
        assert ctx.stop_reason == "target reached"  # type: ignore[attr-defined]
        assert sources == ["llm:warmup"] * 3 + ["llm:round1"]  # BEST met it: nothing after it


def test_warmup_zero_measures_nothing_before_the_models_answer(tmp_path) -> None:
    ev = synthetic_evaluator(tmp_path)
    for warmup, expected in ((0, 0), (1, 1), (3, 3)):
        sources, _ = _sources(ev, "llm", lambda n, m: answer(BEST, {"BM": 32}), 40,
                              {"initial": 2, "max_rounds": 1, "warmup": warmup})
        assert sources.count("llm:warmup") == expected, (warmup, sources)
        assert sources[expected:] == ["llm:round1"] * 2
