"""``kerntune.tune`` and ``kerntune.compare`` from Python, checked against the store.

Recorded spaces (examples/spaces), a real SQLite file per test; the model of
the ``llm`` case is a strong model's committed transcript replayed through
``replay:`` (benchmarks/llm/transcripts), not a live one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import kerntune
from kerntune.errors import KerntuneError
from kerntune.store import Store

ROOT = Path(__file__).resolve().parent.parent
SPACE = ROOT / "examples/spaces/matmul_256x8192x8192_h100.json.gz"
TRANSCRIPT = ROOT / "benchmarks/llm/transcripts/matmul_256x8192x8192_h100.llm.jsonl"


def test_tune_returns_the_stored_winner_and_trials(tmp_path: Path) -> None:
    started: list[str] = []
    store = tmp_path / "k.db"

    def on_start(run_id: str, path: Path) -> None:  # before any evaluation: nothing stored yet
        with Store(path, readonly=True) as st:
            assert not any(r.id == run_id for r in st.list_runs())
        started.append(run_id)

    res = kerntune.tune(SPACE, strategy="random", budget=40, seed=3, store=store, on_start=on_start)
    assert isinstance(res, kerntune.TuneResult)
    assert started == [res.run_id] and res.store == store
    with Store(store, readonly=True) as st:
        run = st.get_run(res.run_id)
        trials = [t for _, t, _ in st.trials(res.run_id)]
    assert run.kind == "tune" and run.strategy == "random" and run.seed == 3 and run.status == "done"
    assert res.trials == len(trials) == 40
    best = min((t for t in trials if t.ok), key=lambda t: t.time_ms)
    assert res.time_ms == best.time_ms
    assert res.winner == {k: (list(v) if isinstance(v, tuple) else v) for k, v in best.config.items()}
    assert res.report is not None and res.report.is_file() and res.run_id in res.report.read_text()


def test_tune_with_a_replayed_strong_model_transcript_finds_the_optimum(tmp_path: Path) -> None:
    res = kerntune.tune(space=SPACE, strategy="llm", llm=f"replay:{TRANSCRIPT}", budget=100, seed=0,
                        options={"initial": 25, "refine": 15, "max_rounds": 5}, store=tmp_path / "k.db", report=False)
    assert res.report is None
    with Store(tmp_path / "k.db", readonly=True) as st:
        assert len(st.llm_exchanges(res.run_id)) >= 1
        trials = [t for _, t, _ in st.trials(res.run_id)]
        times = [t.time_ms for t in trials if t.ok]
    assert res.trials == len(trials) < 100  # the model stopped early, as recorded
    assert res.time_ms == pytest.approx(0.06454399973154068) == min(times)  # the recorded optimum


def test_compare_scores_match_the_stored_repeats(tmp_path: Path) -> None:
    store = tmp_path / "k.db"
    started: list[str] = []
    res = kerntune.compare(SPACE, strategies=["random", "pattern"], budget=30, repeats=3, seed=1, store=store,
                           on_start=lambda run_id, path: started.append(run_id))
    assert isinstance(res, kerntune.ComparisonResult)
    assert started == [res.run_id]
    assert list(res.scores) == ["random", "pattern"] and res.best in res.scores
    with Store(store, readonly=True) as st:
        assert st.get_run(res.run_id).kind == "compare"
        children = st.child_runs(res.run_id)
        assert sorted(c.label for c in children) == ["pattern#0", "pattern#1", "pattern#2",
                                                     "random#0", "random#1", "random#2"]
        finals = {c.label: min(t.time_ms for _, t, _ in st.trials(c.id) if t.ok) for c in children}
        assert all(len(st.trials(c.id)) == 30 for c in children)
    for name, s in res.scores.items():
        ratios = [finals[f"{name}#{r}"] / res.optimum_ms for r in range(3)]
        assert s.repeats == 3
        assert s.best_over_opt == pytest.approx(sum(ratios) / 3)
        assert s.best_over_opt_range == pytest.approx((min(ratios), max(ratios)))
        assert s.score_stderr is not None and s.score_ci95[0] is not None
    assert res.report is not None and res.report.is_file()


def test_kerntune_compare_is_still_the_harness_package() -> None:
    from kerntune.compare import run_compare

    assert kerntune.compare.run_compare is run_compare and callable(kerntune.compare)


def test_tune_budget_defaults_to_100_evaluations_or_none_under_a_time_budget(tmp_path: Path) -> None:
    store = tmp_path / "api.db"
    assert kerntune.tune(SPACE, strategy="random", store=store, report=False).trials == 100
    timed = kerntune.tune(SPACE, strategy="random", seconds=400, store=store, report=False)
    assert timed.trials > 100 and timed.stop_reason in ("time budget", "space exhausted")
    # budget=None, given, is no cap (the whole space), as before the time-budget rule
    assert kerntune.tune(SPACE, strategy="exhaustive", budget=None, store=store, report=False).trials == 1056
    with pytest.raises(KerntuneError, match="nothing to tune"):
        kerntune.tune(store=store)


def test_compare_takes_one_strategy_name_or_comma_separated_names_as_a_string(tmp_path: Path) -> None:
    # list("random") is its letters: this once failed as "unknown strategy 'r'"
    one = kerntune.compare(SPACE, strategies="random", budget=10, repeats=1, store=tmp_path / "k.db", report=False)
    assert list(one.scores) == ["random"]
    two = kerntune.compare(SPACE, strategies="random, pattern", budget=10, repeats=1, store=tmp_path / "k.db",
                           report=False)
    assert list(two.scores) == ["random", "pattern"]


BAD_CALLS = {  # each once ended in a raw TypeError from deep inside (or, for strategies, a letter's name)
    "compare(strategies=5)": (lambda db: kerntune.compare(SPACE, strategies=5, store=db), "strategies must be"),
    "compare(strategies={'random'})": (lambda db: kerntune.compare(SPACE, strategies={"random"}, store=db),
                                       "strategies must be"),
    "compare(strategies=[])": (lambda db: kerntune.compare(SPACE, strategies=[], store=db), "strategies is empty"),
    "compare(budget=0)": (lambda db: kerntune.compare(SPACE, strategies=["random"], budget=0, store=db),
                          "budget must be an integer"),
    "compare(options=flat)": (lambda db: kerntune.compare(SPACE, strategies=["random"], options={"initial": 25},
                                                          store=db), "nest them under the strategy"),
    "compare(repeats='2')": (lambda db: kerntune.compare(SPACE, strategies=["random"], repeats="2", store=db),
                             "repeats must be an integer"),
    "compare(repeats=True)": (lambda db: kerntune.compare(SPACE, strategies=["random"], repeats=True, store=db),
                              "repeats must be an integer"),
    "tune(budget=2.5)": (lambda db: kerntune.tune(SPACE, strategy="random", budget=2.5, store=db),
                         "budget must be an integer"),
    "tune(budget='10')": (lambda db: kerntune.tune(SPACE, strategy="random", budget="10", store=db),
                          "budget must be an integer"),
    "tune(budget=True)": (lambda db: kerntune.tune(SPACE, strategy="random", budget=True, store=db),
                          "budget must be an integer"),
    "tune(options=[1])": (lambda db: kerntune.tune(SPACE, strategy="random", options=[1], store=db),
                          "options must be a dict"),
    "tune(seconds='5')": (lambda db: kerntune.tune(SPACE, strategy="random", seconds="5", store=db),
                          "seconds must be a number"),
    "tune(strategy=['gp'])": (lambda db: kerntune.tune(SPACE, strategy=["gp"], store=db), "strategy must be"),
    "tune(resume='')": (lambda db: kerntune.tune(SPACE, strategy="random", resume="", store=db),
                        "resume needs a run id"),
}


@pytest.mark.parametrize("call", list(BAD_CALLS))
def test_bad_arguments_are_one_kerntune_error_before_the_store_is_opened(tmp_path: Path, call: str) -> None:
    fn, message = BAD_CALLS[call]
    with pytest.raises(KerntuneError, match=message) as caught:
        fn(tmp_path / "k.db")
    assert len(str(caught.value).splitlines()) == 1
    assert not (tmp_path / "k.db").exists()  # refused at the boundary: nothing opened, measured or stored


def test_a_report_path_that_cannot_be_written_is_refused_before_the_search(tmp_path: Path) -> None:
    # report=<a directory> raised IsADirectoryError only after the whole search had run and been stored
    for call in (lambda: kerntune.tune(SPACE, strategy="random", budget=10, store=tmp_path / "k.db", report=tmp_path),
                 lambda: kerntune.compare(SPACE, strategies="random", budget=10, repeats=1, store=tmp_path / "k.db",
                                          report=tmp_path)):
        with pytest.raises(KerntuneError, match="report .*: is a directory"):
            call()
    assert not (tmp_path / "k.db").exists()


def test_tune_resume_refuses_a_strategy_budget_option_or_recording_the_run_was_not_started_with(tmp_path: Path) -> None:
    store = tmp_path / "k.db"
    first = kerntune.tune(SPACE, strategy="random", budget=20, seed=3, store=store, report=False)
    other = ROOT / "examples/spaces/matmul_4096_h100.json.gz"
    refused = {  # each was silently ignored: the run went on with its own strategy, budget, options or recording
        "strategy": dict(strategy="gp"), "budget": dict(budget=50), "seed": dict(seed=0), "budget 20, not None":
        dict(budget=None), "seconds": dict(seconds=5), "options\\['initial'\\]": dict(options={"initial": 5}),
        "recording_hash": dict(space=other)}
    for what, given in refused.items():
        with pytest.raises(KerntuneError, match=f"cannot resume {first.run_id}: .*{what}"):
            kerntune.tune(**{"space": SPACE, **given}, resume=first.run_id, store=store, report=False)
    # what the run was started with may be given again (or left out)
    again = kerntune.tune(SPACE, strategy="random", budget=20, seed=3, resume=first.run_id, store=store, report=False)
    assert (again.run_id, again.strategy, again.seed, again.trials) == (first.run_id, "random", 3, 20)
    with Store(store, readonly=True) as st:
        assert len(st.trials(first.run_id)) == 20 and st.get_run(first.run_id).status == "done"


def test_compare_resume_refuses_settings_the_comparison_was_not_started_with(tmp_path: Path) -> None:
    """As ``compare --resume``: leaving a setting out keeps the comparison's own; giving another
    budget, seed, strategy list or option is one line (it was silently ignored)."""
    import pytest

    from kerntune.errors import KerntuneError

    rec = Path(__file__).resolve().parent.parent / "examples/spaces/dedispersion_A4000.json.gz"
    db = tmp_path / "s.db"
    first = kerntune.compare(rec, strategies="random", budget=12, repeats=2, store=db, report=False)
    again = kerntune.compare(resume=first.run_id, store=db, report=False)
    assert again.scores["random"].score == first.scores["random"].score and again.budget == 12
    kerntune.compare(resume=first.run_id, budget=12, repeats=2, store=db, report=False)  # the same: fine
    for bad, said in (({"budget": 50}, "budget 12"), ({"seed": 3}, "seed 0"), ({"strategies": "gp"}, "strategies"),
                      ({"options": {"random": {"batch_size": 2}}}, "options['random']['batch_size']")):
        with pytest.raises(KerntuneError, match="cannot resume") as err:
            kerntune.compare(resume=first.run_id, store=db, report=False, **bad)
        assert said in str(err.value)
