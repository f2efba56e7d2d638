"""``llm`` and ``llm-seeded`` under a time budget (``--seconds``) with a model far slower than it: the
model is waited for only while the budget has time (``llm.rounds.wait_within_budget``), the call is
then abandoned on its daemon thread, the stop reason and a note say so, and the best found so far
stands.  In round 1 random configs go on being measured while the model thinks (as ``auto`` does).

The models are scripted (in-process, sleeping) or a ``cmd:`` command that sleeps; the spaces are
recordings replayed on their simulated clock (``synthetic_evaluator``) or in wall time (``realtime``).
The wall-time bounds are generous (a loaded 2-core machine): before the fix each run waited the model's
whole sleep (30 s and more)."""

from __future__ import annotations

import time

import pytest

from kerntune.llm import LLMClient
from kerntune.run.search import RunOptions, run_search
from kerntune.store import Store
from kerntune.strategies import Budget
from cli_runs import run_cli
from scripted import ScriptedProvider, answer, synthetic_evaluator, wall_clock_evaluator

BEST = {"BM": 64, "W": 4, "bs": [32, 32]}
REASON = "time budget spent while the model was thinking"
SLOW_S = 30.0  # the slow model's sleep, far over every budget below
WALL_BOUND_S = 12.0  # budget + a few seconds, generous for a loaded machine; far under SLOW_S


def _client(script) -> LLMClient:
    return LLMClient(ScriptedProvider(script), retries=0, backoff_base=0.0)


def _slow(n, messages):
    time.sleep(SLOW_S)
    return answer(BEST)


def _sources(store: Store, run_id: str) -> list[str]:
    return [src for (src,) in store.conn.execute("SELECT source FROM trials WHERE run_id=? ORDER BY seq", (run_id,))]


def test_scripted_llm_slow_first_answer_ends_at_the_time_budget_on_a_recording(tmp_path) -> None:
    """Round 1: the warm-up (3 configs, 0.6 s each on the recording's clock) and then random configs up
    to the budget's end are measured while the model thinks; the 30 s call is given up at 4 s."""
    ev = synthetic_evaluator(tmp_path)
    store = Store(tmp_path / "k.db")
    t0 = time.perf_counter()
    res = run_search(ev, "llm", Budget(max_seconds=4.0), seed=0, run=RunOptions(llm=_client(_slow), store=store))
    wall = time.perf_counter() - t0
    assert wall < WALL_BOUND_S, wall
    assert res.stop_reason == REASON
    assert any("while the model was thinking" in n and "abandoned" in n for n in res.notes), res.notes
    assert res.best is not None
    sources = _sources(store, res.run_id)
    assert sources[:3] == ["llm:warmup"] * 3
    assert sources[3:] and set(sources[3:]) == {"llm:while-model"}  # the GPU did not idle while it thought
    assert res.clocks[-2] < 4.0 <= res.clocks[-1] + 1e-9  # measured up to the budget, not past it by a config
    assert not res.llm_exchanges  # the abandoned call is not stored: a resumed run asks again
    (run,) = store.list_runs()
    assert run.status == "done" and run.summary["stop_reason"] == REASON


def test_scripted_llm_slow_later_round_ends_at_the_time_budget(tmp_path) -> None:
    """Round 1 answers at once and is measured; round 2's call, made with 2 s of budget left, is given
    up after those 2 s (before the fix the blocking call waited its 30 s)."""
    ev = synthetic_evaluator(tmp_path)

    def script(n, messages):
        if n == 1:
            return answer({"BM": 32}, BEST)
        return _slow(n, messages)

    t0 = time.perf_counter()
    res = run_search(ev, "llm", Budget(max_seconds=5.0), seed=0,
                     run=RunOptions(llm=_client(script), strategy_options={"initial": 2, "refine": 2}))
    wall = time.perf_counter() - t0
    assert wall < WALL_BOUND_S, wall
    assert res.stop_reason == REASON
    assert any("round 2" in n and "while the model was thinking" in n for n in res.notes), res.notes
    assert len(res.history) == 3 + 2  # the warm-up and round 1's two configs
    assert res.best is not None and res.best.config == {"BM": 64, "W": 4, "bs": (32, 32)}
    assert len(res.llm_exchanges) == 1


def test_scripted_llm_on_a_real_clock_measures_while_the_model_thinks_and_stops_at_the_budget(tmp_path) -> None:
    """On a wall-clock evaluator the GPU keeps measuring random configs while the model thinks, until the
    budget's end; then the call is abandoned (``auto``'s rule, ``auto_model._Cooperation.wait``)."""
    ev = wall_clock_evaluator(tmp_path)
    store = Store(tmp_path / "k.db")
    t0 = time.perf_counter()
    res = run_search(ev, "llm", Budget(max_seconds=1.0), seed=0, run=RunOptions(llm=_client(_slow), store=store))
    wall = time.perf_counter() - t0
    assert wall < WALL_BOUND_S, wall
    assert res.stop_reason == REASON
    assert res.best is not None
    sources = _sources(store, res.run_id)
    assert sources.count("llm:warmup") == 3 and sources.count("llm:while-model") >= 3, sources


def test_scripted_llm_under_an_evaluation_count_and_time_measures_only_the_warmup_and_stops(tmp_path) -> None:
    """With a count of evaluations as well (no extra configs meanwhile: the model's batch needs them), the
    wait is still bounded by the time."""
    ev = synthetic_evaluator(tmp_path)
    t0 = time.perf_counter()
    res = run_search(ev, "llm", Budget(max_evals=50, max_seconds=4.0), seed=0, run=RunOptions(llm=_client(_slow)))
    wall = time.perf_counter() - t0
    assert wall < WALL_BOUND_S, wall
    assert res.stop_reason == REASON and len(res.history) == 3


def test_scripted_llm_seeded_with_a_slow_model_ends_cleanly_at_the_time_budget(tmp_path) -> None:
    ev = synthetic_evaluator(tmp_path)
    t0 = time.perf_counter()
    res = run_search(ev, "llm-seeded", Budget(max_seconds=4.0), seed=0, run=RunOptions(llm=_client(_slow)))
    wall = time.perf_counter() - t0
    assert wall < WALL_BOUND_S, wall
    assert res.stop_reason == REASON
    assert res.history and res.best is not None


def test_scripted_llm_seeded_hands_the_time_left_to_its_classical_phase(tmp_path) -> None:
    """A model that answers within the budget: the classical phase gets the rest of the time."""
    ev = synthetic_evaluator(tmp_path)
    store = Store(tmp_path / "k.db")

    def quick(n, messages):
        time.sleep(0.2)
        return answer({"BM": 32, "W": 4}, BEST)

    res = run_search(ev, "llm-seeded", Budget(max_seconds=15.0), seed=0,
                     run=RunOptions(llm=_client(quick), store=store, strategy_options={"initial": 2}))
    assert res.stop_reason == "time budget"
    sources = _sources(store, res.run_id)
    assert "llm:round1" in sources and any(s.startswith("gp") for s in sources), sources


@pytest.mark.parametrize("strategy", ["llm", "llm-seeded"])
def test_cmd_llm_that_sleeps_does_not_hold_the_cli_past_its_seconds(tmp_path, strategy: str) -> None:
    """The whole command as a user runs it: a ``cmd:`` model that sleeps 45 s under ``--seconds 3``; the
    process ends (its abandoned call's daemon thread and the command's process group do not hold its exit)."""
    ev = synthetic_evaluator(tmp_path)
    assert ev.source is not None
    t0 = time.perf_counter()
    proc = run_cli(tmp_path, "tune", "--replay", ev.source, "--strategy", strategy, "--llm", "cmd:sleep 45",
                   "--seconds", "3", timeout=40)
    wall = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert wall < 30, wall  # interpreter start and imports included, on a loaded machine
    assert "while the model was thinking" in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-2000:]


def test_scripted_auto_slow_model_ends_at_the_time_budget_on_a_recording(tmp_path) -> None:
    """``auto`` on a recording's clock, charged the model's wall seconds (no ``model_clock_s``): the 30 s
    call is given up at the 4 s budget instead of waited for, the surrogate having measured up to it."""
    ev = synthetic_evaluator(tmp_path)
    store = Store(tmp_path / "k.db")
    t0 = time.perf_counter()
    res = run_search(ev, "auto", Budget(max_seconds=4.0), seed=0, run=RunOptions(llm=_client(_slow), store=store))
    wall = time.perf_counter() - t0
    assert wall < WALL_BOUND_S, wall
    assert any("time budget was spent while model call 1 was out" in n for n in res.notes), res.notes
    assert res.best is not None and res.clocks[-1] >= 4.0 - 1e-9
    assert not res.llm_exchanges
