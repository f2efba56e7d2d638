"""Fixes to the ``llm`` strategy, ``llm-seeded`` and ``auto``'s model accounting.

* a resumed run replays every model call whose failure was handled (a fallback proposed its round);
  only the call that ended a ``fallback=error`` run is asked again;
* ``fallback=error`` stops on a round the model left short instead of topping it up at random;
* later rounds show the kernel's source, the hints and past runs' winners, as round 1 does;
* the option ``target_ms`` stops the measurements on the trial that meets it, in both phases of
  ``llm-seeded``;
* the model is asked for no more configs than can be measured, and not at all when none can;
* ``auto`` counts a call abandoned at the budget's end as model time, and no model time as no share;
* a round the budget cut stops ``llm`` with the budget's reason, not a convergence rule's;
* the pattern fallback proposes each config once per batch.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kerntune.errors import KerntuneError
from kerntune.evaluate import ReplayEvaluator, Status, Trial, table_dict
from kerntune.llm import LLMClient
from kerntune.llm.types import Message
from kerntune.run.search import MODEL_CALL_ENDED_IT, RunOptions, run_search
from kerntune.run.warm_start import PastWinner
from kerntune.space import Choice, Space
from kerntune.store import Store
from kerntune.strategies import Budget
from kerntune.strategies.base import SearchContext
from kerntune.strategies.llm.rounds import _fallback_batch
from scripted import ScriptedProvider, answer, synthetic_evaluator, wall_clock_evaluator

ROOT = Path(__file__).resolve().parent.parent
KERNTUNE = [sys.executable, "-m", "kerntune"]
BEST = {"BM": 64, "W": 4, "bs": [32, 32]}
SLOW = [{"BM": 16, "W": 8, "bs": [64, 64]}, {"BM": 16, "W": 2, "bs": [64, 16]}, {"BM": 16, "W": 8, "bs": [16, 64]},
        {"BM": 16, "W": 2, "bs": [16, 64]}, {"BM": 16, "W": 8, "bs": [64, 16]}, {"BM": 32, "W": 8, "bs": [64, 64]}]

#: A ``cmd:`` model: logs each prompt to $MODEL_LOG/NNN.txt; $MODEL_MODE picks what it does.
#: good: as many valid configs as asked for (drawn from the call's number); crash1: call 1 exits 3,
#: the others are good after $MODEL_SLEEP seconds (60: until the run is stopped); fail2: call 2 exits 3.
MODEL = """
import json, os, random, re, sys, time
prompt = sys.stdin.read()
log = os.environ["MODEL_LOG"]
os.makedirs(log, exist_ok=True)
n = len(os.listdir(log)) + 1
with open(os.path.join(log, f"{n:03d}.txt"), "w") as f:
    f.write(prompt)
mode = os.environ.get("MODEL_MODE", "good")
if (mode == "crash1" and n == 1) or (mode == "fail2" and n == 2):
    sys.exit(3)
time.sleep(float(os.environ.get("MODEL_SLEEP", "0")) if mode == "crash1" else 0)
m = re.search(r"Propose (\\d+) UNIQUE|Suggest up to (\\d+) NEW", prompt)
k = int(next(g for g in m.groups() if g))
rng = random.Random(n)
print(json.dumps({"configs": [{"reasoning": "r", "config": {"BM": rng.choice([16, 32, 64, 128]), "W": rng.choice([2, 4, 8]),
                  "bs": [rng.choice([16, 32, 64]), rng.choice([16, 32, 64])]}} for _ in range(k)]}))
"""
OPTIONS = {"initial": 6, "refine": 4, "warmup": 2, "max_rounds": 3, "patience": 10, "min_improvement": 0.0}


def _client(script: Any) -> tuple[LLMClient, ScriptedProvider]:
    provider = ScriptedProvider(script)
    return LLMClient(provider, retries=0, backoff_base=0.0), provider


def _model(tmp_path: Path) -> str:
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    return f"cmd:{sys.executable} {path}"


def _prompts(log: Path) -> list[str]:
    return [p.read_text() for p in sorted(log.glob("*.txt"))] if log.exists() else []


def _exchanges(db: Path) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT id, round, error FROM llm_exchanges ORDER BY id").fetchall()
    finally:
        con.close()


# -- 1. resume ------------------------------------------------------------------------------------------

def test_scripted_cmd_model_resume_of_an_interrupted_run_replays_the_failure_its_fallback_handled(
        tmp_path: Path) -> None:
    """Round 1's model call failed and the pattern fallback proposed the round; the run was stopped
    (SIGTERM, taken as Ctrl-C) while round 2's call was out.  The resume re-asked round 1, stored a
    second round 1 beside the fallback's 6 trials and deleted the stored failure."""
    synthetic_evaluator(tmp_path)
    db, log = tmp_path / "k.db", tmp_path / "log"
    args = KERNTUNE + ["tune", "--replay", str(tmp_path / "synthetic.json"), "--strategy", "llm",
                       "--llm", _model(tmp_path), "--store", str(db), "--no-report"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MODEL_LOG": str(log), "MODEL_MODE": "crash1", "MODEL_SLEEP": "60"}
    opts = [x for k, v in OPTIONS.items() for x in ("-o", f"{k}={v}")]
    proc = subprocess.Popen(args + ["--budget", "40", *opts], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env)
    try:
        deadline = time.monotonic() + 60
        while proc.poll() is None and len(_prompts(log)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)  # round 2's call is out
        time.sleep(0.3)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0, err.decode()[-2000:]
    run_id, status = sqlite3.connect(db).execute("SELECT id, status FROM runs").fetchone()
    assert status == "interrupted"
    failure = _exchanges(db)
    assert len(failure) == 1 and failure[0][2]  # round 1's failure; round 2's call stored nothing

    env.update(MODEL_MODE="good", MODEL_SLEEP="0")
    done = subprocess.run(args + ["--resume", run_id], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    resumed = _prompts(log)[2:]
    assert resumed and all("## Search state (after round" in p for p in resumed), "round 1 was asked again"
    exchanges = _exchanges(db)
    assert exchanges[0] == failure[0]  # kept: a later resume replays it too
    assert [r for _, r, _ in exchanges] == [1, 2, 3]
    con = sqlite3.connect(db)
    sources = dict(con.execute("SELECT source, COUNT(*) FROM trials GROUP BY source").fetchall())
    keys = [k for (k,) in con.execute("SELECT config_key FROM trials")]
    assert sources["llm:fallback-pattern"] == 6 and "llm:round1" not in sources, sources
    assert len(keys) == len(set(keys))


def test_scripted_cmd_model_resume_of_a_run_failed_after_a_handled_model_failure_replays_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run whose model failed in round 1 (the fallback proposed the round) and which then failed for
    another reason (here its progress display) is resumed: the handled failure is replayed, not asked
    again and deleted (every trailing failed exchange of a failed run was)."""
    ev = synthetic_evaluator(tmp_path)
    store, log = Store(tmp_path / "k.db"), tmp_path / "log"
    for key, value in (("MODEL_LOG", str(log)), ("MODEL_MODE", "crash1"), ("MODEL_SLEEP", "0")):
        monkeypatch.setenv(key, value)

    def broken_display(ctx: SearchContext) -> None:
        if ctx.evaluations == 8:  # after round 1's fallback batch
            raise RuntimeError("display gone")

    with pytest.raises(RuntimeError, match="display gone"):
        run_search(ev, "llm", Budget(max_evals=30), seed=0,
                   run=RunOptions(llm=LLMClient.from_spec(_model(tmp_path)), store=store, run_id="r",
                                  strategy_options=OPTIONS, progress=broken_display))
    assert store.get_run("r").status == "failed"
    res = run_search(ev, "llm", Budget(max_evals=30), seed=0,
                     run=RunOptions(llm=LLMClient.from_spec(_model(tmp_path)), store=store, run_id="r",
                                    strategy_options=OPTIONS))
    prompts = _prompts(log)
    assert len(prompts) == 1 + 2  # round 1 once; rounds 2 and 3 on resume
    assert all("## Search state" in p for p in prompts[1:])
    assert res.resumed_trials == 8 and store.llm_exchanges("r")[0]["error"]


def test_scripted_fallback_error_resume_asks_the_ending_call_again_and_only_once(tmp_path: Path) -> None:
    """The call that ended a ``fallback=error`` run is asked again on resume, and the mark that says so
    is gone from the run while the resume goes on: a resume SIGKILLed once the new answer is stored
    (the run's row left as it is then) must replay that answer, not take it out as well."""
    ev = synthetic_evaluator(tmp_path)
    store = Store(tmp_path / "k.db")
    opts = {**OPTIONS, "fallback": "error", "initial": 2, "refine": 2}
    client, _ = _client(lambda n, m: answer(BEST, SLOW[0]) if n == 1 else answer({"BM": 512}))
    with pytest.raises(KerntuneError, match="round 2"):
        run_search(ev, "llm", Budget(max_evals=30), seed=0,
                   run=RunOptions(llm=client, store=store, run_id="r", strategy_options=opts))
    assert store.get_run("r").summary[MODEL_CALL_ENDED_IT] == 2

    rows_during: list[Any] = []

    def interrupted(ctx: SearchContext) -> None:
        if len(store.llm_exchanges("r")) == 2 and ctx.evaluations == 6:  # round 2's new answer measured
            record = store.get_run("r")
            rows_during.append((record.status, record.summary))
            raise KeyboardInterrupt

    good, asked = _client(lambda n, m: answer(*SLOW[1:3]))
    with pytest.raises(KeyboardInterrupt):
        run_search(ev, "llm", Budget(max_evals=30), seed=0,
                   run=RunOptions(llm=good, store=store, run_id="r", strategy_options=opts, progress=interrupted))
    assert len(asked.prompts) == 1 and "(after round 1)" in asked.prompts[0][-1].content  # round 2, asked again
    (status, summary), = rows_during
    assert status == "failed" and MODEL_CALL_ENDED_IT not in summary  # what a SIGKILL would leave
    stored = store.llm_exchanges("r")
    assert len(stored) == 2 and stored[1]["accepted"]
    store.finish_run("r", status, summary=summary)  # as the SIGKILL would have left it
    again, asked_again = _client(lambda n, m: answer(*SLOW[3:5]))
    run_search(ev, "llm", Budget(max_evals=30), seed=0,
               run=RunOptions(llm=again, store=store, run_id="r", strategy_options=opts))
    assert store.llm_exchanges("r")[1] == stored[1]  # replayed, not asked again
    assert asked_again.prompts and all("(after round 2)" in p[-1].content for p in asked_again.prompts)


# -- 2. fallback=error on a short round ------------------------------------------------------------------

def test_scripted_fallback_error_stops_on_a_round_without_a_usable_config_naming_why(tmp_path: Path) -> None:
    """``-o fallback=error`` promises one line when the model gives nothing usable; the round was
    topped up with random configs and the run went on as if ``fallback=random``."""
    ev = synthetic_evaluator(tmp_path)
    store = Store(tmp_path / "k.db")
    client, _ = _client(lambda n, m: answer({"BM": 512}, {"NOPE": 1}))
    with pytest.raises(KerntuneError) as err:
        run_search(ev, "llm", Budget(max_evals=30), seed=0,
                   run=RunOptions(llm=client, store=store, run_id="r",
                                  strategy_options={"fallback": "error", "initial": 6}))
    line = str(err.value)
    assert "\n" not in line and "round 1" in line and "0 usable config(s) of the 6" in line, line
    assert "BM: 512" in line and "NOPE" in line, line
    assert [src for _, _, _, src in _sources(tmp_path / "k.db")] == ["llm:warmup"] * 3
    assert store.get_run("r").status == "failed"


def _sources(db: Path) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT seq, config_key, status, source FROM trials ORDER BY seq").fetchall()
    finally:
        con.close()


# -- 3. later rounds' prompts ----------------------------------------------------------------------------

class HintedReplay(ReplayEvaluator):
    """A recording whose workload carries hints, as Helion's evaluator gives its parameter guide."""

    def workload(self) -> dict[str, Any]:
        return {**super().workload(), "hints": "HINT: BM above 64 spills registers."}


def test_scripted_later_rounds_show_the_source_hints_and_past_winners(tmp_path: Path) -> None:
    """Round 2 on left out the kernel's source, the hints and past winners (include_source and
    include_hints acted on round 1 only)."""
    synthetic_evaluator(tmp_path)
    past = [PastWinner({"BM": 32, "W": 4, "bs": (32, 32)}, 1.5, [2048], "NVIDIA H100", "old", 1.0)]
    rounds = {}
    for include in (True, False):
        ev = HintedReplay.from_file(tmp_path / "synthetic.json", kernel_source="def KERNEL_SOURCE(): pass")
        client, provider = _client(lambda n, m: answer(*SLOW[n: n + 2]))
        run_search(ev, "llm", Budget(max_evals=30), seed=0,
                   run=RunOptions(llm=client, past_winners=past,
                                  strategy_options={**OPTIONS, "include_source": include, "include_hints": include}))
        rounds[include] = [p[-1].content for p in provider.prompts]
    later = rounds[True][1:]
    assert len(later) == 2
    for prompt in later:
        assert "KERNEL_SOURCE" in prompt and "HINT: BM above 64" in prompt and "Past runs of this kernel" in prompt
        assert prompt.index("KERNEL_SOURCE") < prompt.index("## GPU hardware") < prompt.index("HINT") \
            < prompt.index("## Search state")
    for prompt in rounds[False]:
        assert "KERNEL_SOURCE" not in prompt and "HINT" not in prompt and "Past runs of this kernel" in prompt


# -- 4. target_ms ----------------------------------------------------------------------------------------

def test_scripted_target_ms_stops_on_the_trial_that_meets_it_in_both_phases(tmp_path: Path) -> None:
    """``llm`` measured the rest of the round after the target was met; ``llm-seeded``'s classical phase
    ignored the option and spent the whole budget."""
    ev = synthetic_evaluator(tmp_path)
    client, _ = _client(lambda n, m: answer(SLOW[0], BEST, SLOW[1], SLOW[2]))
    res = run_search(ev, "llm", Budget(max_evals=40), seed=0,
                     run=RunOptions(llm=client, strategy_options={"initial": 4, "target_ms": 1.0}))
    assert res.history[-1].time_ms == 1.0 and len(res.history) == 3 + 2, [t.time_ms for t in res.history]
    assert res.stop_reason == "target reached"

    # llm-seeded: the model's configs miss the target; the classical phase stops on the trial meeting it
    client, _ = _client(lambda n, m: answer(*SLOW[:3]))
    res = run_search(ev, "llm-seeded", Budget(max_evals=100), seed=0,
                     run=RunOptions(llm=client, strategy_options={"initial": 3, "then": "random",
                                                                  "target_ms": 1.4}))
    times = [t.time_ms for t in res.history]
    assert times[-1] <= 1.4 and all(t is None or t > 1.4 for t in times[:-1]), times
    assert len(times) < 100 and res.stop_reason == "target reached"
    # a budget's own target still ends the search where it is the easier one to meet
    near = {"BM": 64, "W": 8, "bs": [64, 64]}  # 2.9 ms: met by the budget's target, not the option's
    client, _ = _client(lambda n, m: answer(SLOW[5], near, BEST))
    res = run_search(ev, "llm", Budget(max_evals=40, target_ms=3.0), seed=0,
                     run=RunOptions(llm=client, strategy_options={"initial": 3, "target_ms": 1.0}))
    times = [t.time_ms for t in res.history]
    assert times[-1] <= 3.0 and all(t is None or t > 3.0 for t in times[:-1]), times
    assert 1.0 not in times and res.stop_reason == "target reached"


# -- 5. no call whose answer could not be measured -------------------------------------------------------

def _tiny_evaluator(tmp_path: Path) -> ReplayEvaluator:
    space = Space([Choice("bx", options=(16, 32)), Choice("by", options=(1, 2))], default={"bx": 16, "by": 1})
    trials = [Trial(c, Status.OK, 1.0 + c["bx"] / 100 + c["by"] / 10, compile_s=0.5, bench_s=0.1)
              for c in space.enumerate()]
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(table_dict(space, trials, {"kernel_name": "tiny", "device_name": "NVIDIA H100"})))
    return ReplayEvaluator.from_file(path)


def test_scripted_the_model_is_asked_for_no_more_than_can_be_measured(tmp_path: Path) -> None:
    """The model was asked for 25 configs with 7 evaluations left, was asked (and waited for) with no
    evaluation left after the warm-up, and again once every config of the space was measured."""
    ev = synthetic_evaluator(tmp_path)
    client, provider = _client(lambda n, m: answer(*SLOW))
    run_search(ev, "llm", Budget(max_evals=10), seed=0, run=RunOptions(llm=client))
    assert "Propose 7 UNIQUE" in provider.prompts[0][-1].content

    client, provider = _client(lambda n, m: answer(*SLOW))
    res = run_search(ev, "llm", Budget(max_evals=3), seed=0, run=RunOptions(llm=client))
    assert provider.prompts == [] and len(res.history) == 3 and res.stop_reason == "evaluation budget"

    tiny = _tiny_evaluator(tmp_path)  # 4 configs: 3 measured in the warm-up
    everything = [{"bx": bx, "by": by} for bx in (16, 32) for by in (1, 2)]
    client, provider = _client(lambda n, m: answer(*everything))
    res = run_search(tiny, "llm", Budget(max_evals=50), seed=0, run=RunOptions(llm=client))
    assert len(provider.prompts) == 1 and "Propose 1 UNIQUE" in provider.prompts[0][-1].content
    assert len(res.history) == 4 and res.stop_reason == "space exhausted"


def test_scripted_auto_asks_its_first_call_for_no_more_than_the_budget_or_the_space_holds(tmp_path: Path) -> None:
    """``auto`` asked its first call for 25 configs whatever the budget: 12 evaluations, 25 asked for.
    (No overlap here: what the surrogate measures while the model thinks is subtracted too, which
    tests/test_auto_model_fixes.py checks.)"""
    client, provider = _client(lambda n, m: answer(*SLOW))
    run_search(synthetic_evaluator(tmp_path), "auto", Budget(max_evals=12), seed=0,
               run=RunOptions(llm=client, strategy_options={"overlap_first": 0}))
    assert "Propose 12 UNIQUE" in provider.prompts[0][-1].content

    client, provider = _client(lambda n, m: answer(*SLOW))  # the tiny space: 4 configs
    run_search(_tiny_evaluator(tmp_path), "auto", Budget(max_evals=50), seed=0,
               run=RunOptions(llm=client, strategy_options={"overlap_first": 0}))
    assert "Propose 4 UNIQUE" in provider.prompts[0][-1].content


# -- 6. auto's model time --------------------------------------------------------------------------------

def test_scripted_auto_counts_a_call_abandoned_at_the_budgets_end_as_model_time(tmp_path: Path) -> None:
    """The budget ended while the only call was out: the report said "0.0 s of model time, 0.0 s (100%)
    hidden", as if no time had gone to the model."""
    def slow(n: int, messages: list[Message]) -> str:
        time.sleep(3.0)
        return answer(BEST)

    client, _ = _client(slow)
    res = run_search(wall_clock_evaluator(tmp_path), "auto", Budget(max_seconds=0.6), seed=0,
                     run=RunOptions(llm=client))
    extra = res.extra
    assert extra["model_calls"] == 1 and 0.3 <= extra["model_seconds"] < 3.0, extra
    assert 0.0 < extra["model_hidden_seconds"] <= extra["model_seconds"], extra
    assert extra["model_hidden_share"] == pytest.approx(extra["model_hidden_seconds"] / extra["model_seconds"])
    assert not any("0.0 s of model time" in n for n in res.notes), res.notes


class StoredZeroSeconds(ScriptedProvider):
    """Answers as a resumed run's stored call would, with the seconds it was stored with: none."""

    def take_replayed_seconds(self) -> float:
        return 0.0


def test_scripted_auto_with_no_model_time_reports_no_hidden_share(tmp_path: Path) -> None:
    """With no model time there is no share to report: it read 1.0 and "(100%) hidden"."""
    client = LLMClient(StoredZeroSeconds(lambda n, m: answer(BEST)), retries=0, backoff_base=0.0)
    res = run_search(synthetic_evaluator(tmp_path), "auto", Budget(max_evals=20), seed=0,
                     run=RunOptions(llm=client, strategy_options={"max_calls": 1}))
    assert res.extra["model_seconds"] == 0.0 and res.extra["model_hidden_share"] is None
    assert any("(n/a) hidden" in n for n in res.notes) and not any("100%" in n for n in res.notes), res.notes



def test_compare_with_no_model_time_reports_no_hidden_share() -> None:
    """``compare``'s model-time figure over repeats with no model time read a share of 1.0 ("100% hidden")."""
    from kerntune.compare.harness import _model_time

    none = _model_time([{"model_seconds": 0.0, "model_hidden_seconds": 0.0, "model_calls": 1}])
    assert none["model_time"]["hidden_share"] is None
    some = _model_time([{"model_seconds": 4.0, "model_hidden_seconds": 3.0, "model_calls": 1}])
    assert some["model_time"]["hidden_share"] == pytest.approx(0.75)

# -- 7. stop reason --------------------------------------------------------------------------------------

def test_scripted_a_round_the_budget_ends_stops_with_the_budgets_reason(tmp_path: Path) -> None:
    """Round 2 brought no gain and spent the last evaluations: the stop reason said "no improvement
    for 1 rounds", as if the model had converged."""
    ev = synthetic_evaluator(tmp_path)
    later = [{"BM": 16, "W": 4, "bs": [64, 64]}, {"BM": 16, "W": 4, "bs": [16, 16]},
             {"BM": 32, "W": 2, "bs": [64, 64]}, {"BM": 32, "W": 2, "bs": [16, 64]}]
    client, _ = _client(lambda n, m: answer(BEST, *SLOW[:5]) if n == 1 else answer(*later))
    res = run_search(ev, "llm", Budget(max_evals=13), seed=0,
                     run=RunOptions(llm=client, strategy_options={"initial": 6, "refine": 4, "patience": 1}))
    assert len(res.history) == 13 and res.stop_reason == "evaluation budget"


# -- 8. the pattern fallback -----------------------------------------------------------------------------

def test_the_pattern_fallback_proposes_each_config_once_per_batch() -> None:
    """The neighbours of the two best configs were joined with duplicates removed per list only: a
    config near both took two places in the batch (one of them then went unmeasured)."""
    ev = ReplayEvaluator.from_file(ROOT / "examples" / "spaces" / "convolution_A100.json.gz")
    for seed in (1, 19, 21, 29):
        ctx = SearchContext(ev.space, ev, Budget(max_evals=1000), seed=seed)
        ctx.evaluate(ctx.startup(20))
        for _ in range(3):
            batch = _fallback_batch(ctx, "pattern", 15, set())
            keys = [ev.space.key(c) for c in batch]
            assert len(keys) == 15 and len(set(keys)) == 15, f"seed {seed}: {len(keys) - len(set(keys))} repeated"
            ctx.evaluate(batch)
