"""``auto``: the default strategy, with and without a model.

The model here is scripted (deterministic, in-process: see tests/scripted.py); the evaluator
replays a small synthetic recording, and in the overlap test it takes each config's recorded
time in wall time (``realtime``) while the scripted model really sleeps.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from kerntune.evaluate import ReplayEvaluator, Status, Trial, table_dict
from kerntune.llm import LLMClient
from kerntune.run.search import RunOptions, run_search
from kerntune.store import Store
from kerntune.strategies import DEFAULT_STRATEGY, Budget
from tests.scripted import ScriptedProvider, answer, failing, synthetic_evaluator, synthetic_space, synthetic_time

OPT = {"BM": 64, "W": 4, "bs": (32, 32)}


def _client(script) -> LLMClient:  # noqa: ANN001
    return LLMClient(ScriptedProvider(script))


def test_default_strategy_is_auto() -> None:
    assert DEFAULT_STRATEGY == "auto"


def test_auto_without_model_spends_the_budget_and_is_deterministic(tmp_path: Path) -> None:
    ev = synthetic_evaluator(tmp_path)
    a = run_search(ev, "auto", Budget(max_evals=60), seed=3)
    b = run_search(ev, "auto", Budget(max_evals=60), seed=3)
    assert len(a.history) == 60 and a.stop_reason == "evaluation budget"
    assert [t.config for t in a.history] == [t.config for t in b.history]
    assert a.best is not None and a.best.config == OPT


def test_auto_restarts_when_stalled(tmp_path: Path) -> None:
    ev = synthetic_evaluator(tmp_path)
    res = run_search(ev, "auto", Budget(max_evals=100), seed=0, run=RunOptions(strategy_options={"stall": 8}))
    assert any("restart" in n for n in res.notes), res.notes
    assert len(res.history) == 100


def test_auto_with_scripted_model_opens_with_the_model_and_keeps_going(tmp_path: Path) -> None:
    ev = synthetic_evaluator(tmp_path)
    client = _client(lambda n, m: answer(OPT, {"BM": 32, "W": 4}) if n == 1 else answer({"BM": 64, "W": 8}))
    res = run_search(ev, "auto", Budget(max_evals=50), seed=0, run=RunOptions(llm=client))
    first_opt = next(i for i, t in enumerate(res.history) if t.config == OPT)
    assert first_opt < 10, "the model's first answer is measured right after the start"
    assert len(res.history) == 50, "the search does not stop while budget remains"
    assert res.llm_exchanges and res.extra["model_calls"] >= 1
    assert any(t.ok for t in res.history)


def test_auto_survives_a_failing_model(tmp_path: Path) -> None:
    ev = synthetic_evaluator(tmp_path)
    res = run_search(ev, "auto", Budget(max_evals=40), seed=0, run=RunOptions(llm=_client(failing)))
    assert len(res.history) == 40
    assert any("failed" in n for n in res.notes)


def test_auto_asks_the_model_again_when_the_surrogate_stalls(tmp_path: Path) -> None:
    ev = synthetic_evaluator(tmp_path)
    calls: list[int] = []

    def script(n: int, messages) -> str:  # noqa: ANN001
        calls.append(n)
        return answer({"BM": 16, "W": 8, "bs": [64, 64]}, {"BM": 128, "W": 8, "bs": [16, 64]},
                      {"BM": 32, "W": 2, "bs": [64, 16]}, {"BM": 16, "W": 4, "bs": [16, 64]})

    res = run_search(ev, "auto", Budget(max_evals=100), seed=1,
                     run=RunOptions(llm=_client(script), strategy_options={"stall": 6}))
    assert len(calls) >= 2, res.notes
    assert any("asked again" in n for n in res.notes)
    later = [ex for ex in res.llm_exchanges if ex["round"] > 1]
    assert later and "Results" in later[0]["prompt"] or "result" in later[0]["prompt"].lower()


def _fast_recording(tmp_path: Path, cost: float) -> Path:
    space = synthetic_space()
    trials = []
    for cfg in space.enumerate():
        t = synthetic_time(cfg)
        trials.append(Trial(cfg, Status.OK, t, compile_s=cost / 2, bench_s=cost / 2) if t is not None else
                      Trial(cfg, Status.RUNTIME_ERROR, compile_s=cost, error="out of resources"))
    path = tmp_path / "fast.json"
    path.write_text(json.dumps(table_dict(space, trials, {"kernel_name": "synthetic", "device_name": "NVIDIA H100"})))
    return path


def test_model_time_is_hidden_behind_measurements_in_real_time(tmp_path: Path) -> None:
    """A model that really waits 0.3 s a call, configs that really take 0.05 s: the surrogate
    measures while the model thinks, so nearly all model time is hidden and the wall clock
    is about the measuring time, not measuring + model."""
    ev = ReplayEvaluator.from_file(_fast_recording(tmp_path, 0.05), realtime=True)

    fresh = [OPT, {"BM": 16, "W": 8, "bs": (64, 64)}, {"BM": 128, "W": 8, "bs": (16, 64)}, {"BM": 32, "W": 2}]

    def slow(n: int, messages) -> str:  # noqa: ANN001
        time.sleep(0.3)
        return answer(fresh[(n - 1) % len(fresh)])

    t0 = time.perf_counter()
    res = run_search(ev, "auto", Budget(max_evals=60), seed=0,
                     run=RunOptions(llm=_client(slow), strategy_options={"stall": 6}))
    wall = time.perf_counter() - t0
    extra = res.extra
    assert extra["model_calls"] >= 2 and extra["model_seconds"] >= 0.3 * extra["model_calls"]
    assert extra["model_hidden_share"] >= 0.8, extra
    assert any("hidden" in n for n in res.notes)
    assert wall < 60 * 0.05 + 0.2 * extra["model_seconds"] + 1.0


def test_under_a_time_budget_alone_the_surrogate_measures_until_the_answer_is_back(tmp_path: Path) -> None:
    """A model that really waits 2 s, configs that really take 0.03 s: under an evaluation budget the
    surrogate measures ``overlap_first`` (10) configs, the start included, and then waits for the answer;
    under a budget of seconds alone nothing caps it, so it measures until the answer is back (read from
    the sources the store keeps for each trial)."""
    ev = ReplayEvaluator.from_file(_fast_recording(tmp_path, 0.03), realtime=True)
    everything = list(synthetic_space().enumerate())

    def slow(n: int, messages) -> str:  # noqa: ANN001
        time.sleep(2.0)
        return answer(*everything)  # the whole space: some of it is still unmeasured when the answer comes

    def before_the_answer(budget: Budget, name: str) -> int:
        store = Store(tmp_path / f"{name}.db")
        res = run_search(ev, "auto", budget, seed=0,
                         run=RunOptions(llm=_client(slow), store=store, strategy_options={"max_calls": 1}))
        sources = [r["source"] for r in store.iter_trial_rows([res.run_id])]
        store.close()
        assert "auto:model1" in sources, sources
        return sources.index("auto:model1")

    assert before_the_answer(Budget(max_evals=40), "by_count") <= 10
    assert before_the_answer(Budget(max_seconds=5.0), "by_time") > 10


def test_model_time_overlap_on_a_simulated_clock_is_charged_only_when_unhidden(tmp_path: Path) -> None:
    ev = synthetic_evaluator(tmp_path)  # recorded cost 0.6 s a config, on a simulated clock

    def slow(n: int, messages) -> str:  # noqa: ANN001
        time.sleep(0.3)
        return answer(OPT)

    res = run_search(ev, "auto", Budget(max_evals=30), seed=0, run=RunOptions(llm=_client(slow)))
    assert res.extra["model_hidden_share"] >= 0.99
    assert res.clocks[-1] == sum(t.cost_s for t in res.history) + (res.extra["model_seconds"] - res.extra["model_hidden_seconds"])


def test_llm_tells_the_user_when_it_stops_with_budget_left(tmp_path: Path) -> None:
    ev = synthetic_evaluator(tmp_path)
    client = _client(lambda n, m: answer(OPT) if n == 1 else answer({"BM": 16, "W": 8}))
    res = run_search(ev, "llm", Budget(max_evals=100), seed=0,
                     run=RunOptions(llm=client, strategy_options={"initial": 4, "refine": 2, "patience": 1}))
    assert len(res.history) < 100
    assert any("unspent" in n for n in res.notes), res.notes
    # Under a time budget alone (no evaluation count) the note says the seconds left.
    client = _client(lambda n, m: answer(OPT) if n == 1 else answer({"BM": 16, "W": 8}))
    res = run_search(ev, "llm", Budget(max_seconds=10_000), seed=0,
                     run=RunOptions(llm=client, strategy_options={"initial": 4, "refine": 2, "patience": 1}))
    assert any("s unspent" in n and "of 10000 s" in n for n in res.notes), res.notes


def test_auto_refuses_unknown_options_in_one_line(tmp_path: Path) -> None:
    import pytest

    from kerntune.errors import KerntuneError

    ev = synthetic_evaluator(tmp_path)
    with pytest.raises(KerntuneError, match="needs --llm"):  # a model option, no model: refused before the run
        run_search(ev, "auto", Budget(max_evals=5),
                   run=RunOptions(strategy_options={"initial": 3}))
    with pytest.raises(KerntuneError, match="unknown option"):
        run_search(ev, "auto", Budget(max_evals=5), run=RunOptions(llm=_client(failing), strategy_options={"bogus": 1}))


def test_compare_reports_model_time_hidden(tmp_path: Path) -> None:
    """``compare`` with ``auto`` and a model (a recorded transcript, replayed) shows the share of
    model time hidden, in its table output and its JSON."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "c.json"
    proc = subprocess.run([sys.executable, "-m", "kerntune", "compare", "--space",
                           str(root / "examples/spaces/matmul_4096_h100.json.gz"), "--strategies", "auto",
                           "--budget", "40", "--repeats", "1", "--llm",
                           f"replay:{root / 'benchmarks/llm/transcripts/matmul_4096_h100.llm.jsonl'}",
                           "--store", str(tmp_path / "s.db"), "--json", str(out), "--no-report"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "hidden behind measurements" in proc.stdout
    data = json.loads(out.read_text())["strategies"]["auto"]
    assert data["model_time"]["repeats"] == 1 and 0.0 <= data["model_time"]["hidden_share"] <= 1.0
    assert data["score_stderr"] is None and data["repeats"] == 1  # one repeat has no spread


def test_the_reports_show_how_much_model_time_was_hidden(tmp_path: Path) -> None:
    """The stored run keeps what the search said of itself, and both reports show the hidden share."""
    from kerntune.report import write_report
    from kerntune.store import Store

    ev = synthetic_evaluator(tmp_path)

    def slow(n: int, messages) -> str:  # noqa: ANN001
        time.sleep(0.2)
        return answer(OPT)

    with Store(tmp_path / "s.db") as st:
        run_id = st.create_run("tune", strategy="auto", seed=0, options={})
        res = run_search(ev, "auto", Budget(max_evals=20), seed=0,
                         run=RunOptions(store=st, run_id=run_id, llm=_client(slow)))
        summary = st.get_run(run_id).summary
        assert summary is not None and summary["stop_reason"] == res.stop_reason
        assert summary["extra"]["model_calls"] == res.extra["model_calls"] >= 1
        files = write_report(st, run_id, html=tmp_path / "r.html", markdown=tmp_path / "r.md")
    share = f"({res.extra['model_hidden_share']:.0%}) hidden behind measurements"
    assert share in files.html.read_text() and share in files.markdown.read_text()


def test_a_models_configs_move_the_engines_region_only_when_they_beat_the_best(tmp_path: Path) -> None:
    """After a restart the engine's region is fresh: a model answer worse than the best of all
    teaches the GP but neither becomes the region's incumbent nor runs its stall clock; one that
    beats the best of all moves the region (``SurrogateSearch.tell(own=False)``)."""
    from kerntune.strategies.base import SearchContext
    from kerntune.strategies.surrogate import SurrogateSearch

    ev = synthetic_evaluator(tmp_path)
    ctx = SearchContext(ev.space, ev, Budget(max_evals=100), seed=0)
    engine = SurrogateSearch(ctx)
    ranked = sorted((c for c in ev.space.enumerate() if synthetic_time(c) is not None), key=synthetic_time)
    best, middle, worst = ranked[1], ranked[len(ranked) // 2], ranked[-1]
    engine.tell([middle], ctx.evaluate([middle]))          # the engine's own: it becomes the region's best
    assert engine.region.best_config == middle
    engine._restart()                                        # a stall: fresh region, nothing in it yet
    engine.tell([worst], ctx.evaluate([worst]), own=False)   # the model's, worse than the best of all
    assert engine.region.best_config is None and engine.region.since_gain == 0
    assert engine.model.n == 2                               # ... but the GP learned it
    engine.tell([best], ctx.evaluate([best]), own=False)     # the model's, better than everything
    assert engine.region.best_config == best and engine.region.since_gain == 0


def test_the_elite_archive_is_diverse_and_the_climber_moves_on_to_an_unvisited_elite(tmp_path: Path) -> None:
    """The engine keeps good configs pairwise ``elite_distance`` fields apart, best first; a
    climber with nothing left around its point climbs on from the best elite it has not stood on
    (the escape from a poor family that the fifth design pass measured), not from a random point."""
    from kerntune.strategies.base import SearchContext
    from kerntune.strategies.surrogate import SurrogateOptions, SurrogateSearch

    ev = synthetic_evaluator(tmp_path)
    ctx = SearchContext(ev.space, ev, Budget(max_evals=400), seed=0)
    engine = SurrogateSearch(ctx, SurrogateOptions(elites=3, elite_distance=2))
    ranked = sorted((c for c in ev.space.enumerate() if synthetic_time(c) is not None), key=synthetic_time)
    sample = ranked[:40:3]
    engine.tell(sample, ctx.evaluate(sample))
    elites = engine.elites()
    names = [p.name for p in ev.space.params]
    assert elites[0] == ctx.best.config and 1 < len(elites) <= 3
    assert all(sum(a[n] != b[n] for n in names) >= 2 for i, a in enumerate(elites) for b in elites[i + 1:])
    times = [synthetic_time(e) for e in elites]
    assert times == sorted(times)
    # the climber stands on the best config with every neighbour measured: its next point is the
    # next elite, and the config it proposes is that elite's neighbour
    climber = engine.climber
    climber._move_to(elites[0], ctx.value(ctx.best))
    climber.queue = []
    cand = climber.propose(set())
    assert climber.cur == ev.space.canonical(elites[1])
    assert cand is not None and sum(cand[n] != elites[1][n] for n in names) == 1


def test_a_resumed_run_replays_the_models_stored_seconds_and_keeps_its_path(tmp_path: Path) -> None:
    """On a recording's clock ``auto`` measures while the model thinks for as long as the model took;
    a resumed run's stored answers came back at once, so it measured fewer configs "meanwhile" and left
    its stored path (a review found 63 trials stored for a budget of 60).  Now a replayed answer is
    charged the seconds it took when it was made.  The scripted model sleeps 0.9 s a call; the first run
    is stopped by an error after 30 trials and resumed."""
    ev = synthetic_evaluator(tmp_path)  # 0.6 s a config on the recording's clock

    everything = list(synthetic_space().enumerate())

    def slow(n: int, messages) -> str:  # noqa: ANN001 - three configs that depend on the prompt alone
        import hashlib

        time.sleep(0.9)  # 0.3 s from either edge of (0.6, 1.2]: two 0.6-s configs measured meanwhile either way
        h = int(hashlib.sha256(messages[-1].content.encode()).hexdigest(), 16)
        return answer(*everything[h % len(everything):][:3])

    opts = {"stall": 6, "initial": 3, "refine": 3}
    whole = run_search(ev, "auto", Budget(max_evals=60), seed=2, run=RunOptions(llm=_client(slow),
                                                                                   strategy_options=opts))
    assert whole.extra["model_calls"] >= 2

    class Stop(Exception):
        pass

    def stop_at_30(ctx) -> None:  # noqa: ANN001
        if ctx.evaluations == 30:
            raise Stop

    store = Store(tmp_path / "s.db")
    import pytest

    with pytest.raises(Stop):
        run_search(ev, "auto", Budget(max_evals=60), seed=2,
                   run=RunOptions(llm=_client(slow), store=store, strategy_options=opts, progress=stop_at_30))
    (run,) = store.list_runs()
    assert run.status == "failed"
    resumed = run_search(ev, "auto", Budget(max_evals=60), seed=2,
                         run=RunOptions(llm=_client(slow), store=store, run_id=run.id, strategy_options=opts))
    assert [t.config for t in resumed.history] == [t.config for t in whole.history]
    assert len(list(store.trials(run.id))) == 60
