"""The SQLite store: trials committed as they finish, resume, exports."""

from __future__ import annotations

import json
import sqlite3

import pytest

from kerntune.errors import StoreError
from kerntune.evaluate import ReplayEvaluator, load_recording
from kerntune.evaluate.trial import Status, Trial
from kerntune.run.search import RunOptions, run_search
from kerntune.store import Store
from kerntune.store.export import export_csv, export_kernel_tuner, export_table
from kerntune.strategies import Budget


class _Crash(Exception):
    pass


class _CrashingEvaluator(ReplayEvaluator):
    """A real replay evaluator that dies after ``limit`` measurements, like a killed process."""

    def __init__(self, base: ReplayEvaluator, limit: int) -> None:
        super().__init__(base.recording, base.source)
        self.limit = limit
        self.measured: list[str] = []

    def evaluate(self, configs):
        out = []
        for cfg in configs:
            if len(self.measured) >= self.limit:
                raise _Crash()
            self.measured.append(self.space.key(cfg))
            out.extend(super().evaluate([cfg]))
        return out


class _CountingEvaluator(ReplayEvaluator):
    def __init__(self, base: ReplayEvaluator) -> None:
        super().__init__(base.recording, base.source)
        self.measured: list[str] = []

    def evaluate(self, configs):
        self.measured.extend(self.space.key(c) for c in configs)
        return super().evaluate(configs)


def test_trials_are_in_the_file_as_soon_as_they_finish(tmp_path, conv_evaluator) -> None:
    db = tmp_path / "k.db"
    store = Store(db)
    crashing = _CrashingEvaluator(conv_evaluator, limit=23)
    with pytest.raises(_Crash):
        run_search(crashing, "genetic", Budget(max_evals=80), seed=1, run=RunOptions(store=store, run_id="r1"))
    # A second connection (another process would see the same) finds every finished trial.
    rows = sqlite3.connect(db).execute("SELECT COUNT(*) FROM trials WHERE run_id='r1'").fetchone()[0]
    assert rows == 23


@pytest.mark.parametrize("strategy", ["random", "pattern", "genetic", "bayes"])
def test_resume_measures_nothing_twice_and_loses_nothing(tmp_path, conv_evaluator, strategy) -> None:
    reference = run_search(conv_evaluator, strategy, Budget(max_evals=70), seed=5)
    store = Store(tmp_path / "k.db")
    with pytest.raises(_Crash):
        run_search(_CrashingEvaluator(conv_evaluator, limit=31), strategy, Budget(max_evals=70), seed=5,
                   run=RunOptions(store=store, run_id="run"))
    second = _CountingEvaluator(conv_evaluator)
    resumed = run_search(second, strategy, Budget(max_evals=70), seed=5, run=RunOptions(store=store, run_id="run"))
    stored = [conv_evaluator.space.key(t.config) for _, t, _ in store.trials("run")]
    assert len(stored) == len(set(stored)) == 70
    assert len(second.measured) == 70 - 31                      # only the missing ones were measured
    assert not set(second.measured) & set(stored[:31])
    assert [t.config for t in resumed.history] == [t.config for t in reference.history]
    assert resumed.best.time_ms == reference.best.time_ms
    assert store.get_run("run").status == "done"


def test_unique_constraint_rejects_a_double_measurement(tmp_path) -> None:
    store = Store(tmp_path / "k.db")
    run = store.create_run("tune")
    t = Trial({"a": 1}, Status.OK, 1.0)
    store.add_trial(run, 0, "[1]", t, 0.1)
    with pytest.raises(sqlite3.IntegrityError):
        store.add_trial(run, 1, "[1]", t, 0.2)


def test_best_configs_keep_the_fastest(tmp_path) -> None:
    store = Store(tmp_path / "k.db")
    store.put_best("h", "4096", "H100", "triton=3.6", {"BM": 64}, 2.0)
    store.put_best("h", "4096", "H100", "triton=3.6", {"BM": 128}, 1.5)
    store.put_best("h", "4096", "H100", "triton=3.6", {"BM": 32}, 3.0)
    assert store.get_best("h", "4096", "H100", "triton=3.6") == ({"BM": 128}, 1.5)
    assert store.get_best("h", "4096", "A100", "triton=3.6") is None


def test_llm_exchange_table_is_ready(tmp_path) -> None:
    store = Store(tmp_path / "k.db")
    run = store.create_run("tune")
    rid = store.add_llm_exchange(run, 1, "replay", "m", "prompt", "{}", accepted=[{"a": 1}],
                                 rejected=[{"config": {"a": 9}, "reason": "out of range"}], tokens_in=10)
    row = store.conn.execute("SELECT * FROM llm_exchanges WHERE id=?", (rid,)).fetchone()
    assert json.loads(row["rejected_json"])[0]["reason"] == "out of range"


def test_exports_roundtrip_through_the_replay_reader(tmp_path, conv_evaluator) -> None:
    store = Store(tmp_path / "k.db")
    res = run_search(conv_evaluator, "random", Budget(max_evals=40), seed=2, run=RunOptions(store=store))
    n_csv = export_csv(store, res.run_id, tmp_path / "t.csv")
    assert n_csv == 40
    lines = (tmp_path / "t.csv").read_text().splitlines()
    assert lines[0].startswith("block_size_x,") and len(lines) == 41
    export_kernel_tuner(store, res.run_id, tmp_path / "kt.json")
    rec = load_recording(tmp_path / "kt.json")
    assert len(rec.trials) == 40
    assert rec.optimum.time_ms == res.best.time_ms
    failures = {t.status for t in res.history if not t.ok}
    assert {t.status for t in rec.trials.values() if not t.ok} == failures
    export_table(store, res.run_id, tmp_path / "table.json")
    table = load_recording(tmp_path / "table.json")
    assert table.space.count() == 40          # only recorded configs are replayable
    assert table.optimum.time_ms == res.best.time_ms


def test_unopenable_store_gives_a_clear_error(tmp_path) -> None:
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(StoreError, match="cannot open store"):
        Store(tmp_path / "dir.db")


def test_unknown_run_is_a_store_error(tmp_path) -> None:
    with pytest.raises(StoreError, match="no run 'zzz'"):
        Store(tmp_path / "k.db").get_run("zzz")


def test_an_ambiguous_prefix_says_which_runs_are_a_comparisons_repeats(tmp_path) -> None:
    st = Store(tmp_path / "s.db")
    top = st.create_run("compare", run_id="abc000000001")
    st.create_run("tune", parent_id=top, label="gp#0", strategy="gp", run_id="abc000000002")
    with pytest.raises(StoreError, match="ambiguous") as exc:
        st.resolve_run_id("abc")
    assert "abc000000001, abc000000002 (gp#0 of abc000000001)" in str(exc.value)
    assert st.resolve_run_id("abc000000002") == "abc000000002"


def test_a_resume_refusal_says_when_the_run_had_no_such_option() -> None:
    from kerntune.store.resume import check_same

    with pytest.raises(StoreError, match="started without --budget, not with 100"):
        check_same("abc", "--budget", None, 100)
    with pytest.raises(StoreError, match="started with --budget 50, not 100"):
        check_same("abc", "--budget", 50, 100)
    check_same("abc", "--budget", None, None)
