"""Distributed evaluation on a real local Ray cluster (2 CPUs, no dashboard, no usage
reports): actors holding replay evaluators, real actor processes killed mid-batch."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_DISABLE_USAGE_STATS", "1")
ray = pytest.importorskip("ray")

from kerntune.errors import KerntuneError  # noqa: E402
from kerntune.evaluate import ReplayEvaluator  # noqa: E402
from kerntune.evaluate.ray_backend import RayEvaluator, ReplayFactory, import_ray  # noqa: E402
from kerntune.run.search import RunOptions, run_search  # noqa: E402
from kerntune.store import Store  # noqa: E402
from kerntune.strategies import Budget  # noqa: E402

CONV = Path(__file__).resolve().parent.parent / "examples" / "spaces" / "convolution_A100.json.gz"


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _configs(n: int, skip: int = 0) -> list[dict]:
    plain = ReplayEvaluator.from_file(CONV)
    it = plain.space.enumerate()
    return [cfg for _, cfg in zip(range(skip + n), it)][skip:]


def test_a_batch_is_spread_over_the_actors_with_the_replays_answers(cluster) -> None:
    ev = RayEvaluator(ReplayFactory.of(CONV), num_actors=2)
    try:
        configs = _configs(40)
        trials = ev.evaluate(configs)
        expected = ReplayEvaluator.from_file(CONV).evaluate(configs)
        assert [t.to_dict() for t in trials] == [t.to_dict() for t in expected]
        assert ev.stats.results[0] > 0 and ev.stats.results[1] > 0
        assert ev.simulated_clock and ev.space.count() == ReplayEvaluator.from_file(CONV).space.count()
        assert ev.describe()["source"] == str(CONV) and ev.describe()["ray"]["actors"] == 2
        assert len(set(ev.actor_pids())) == 2 and os.getpid() not in ev.actor_pids()
    finally:
        ev.close()


def test_an_actor_killed_mid_batch_loses_no_config_and_gives_none_two_results(cluster) -> None:
    """Acceptance 2: SIGKILL one actor's process while it holds unfinished configs."""
    ev = RayEvaluator(ReplayFactory.of(CONV, delay_s=0.15), num_actors=2)
    try:
        configs = _configs(24)
        victim = ev.actor_pids()[0]
        got = []
        for i, trial in ev.stream(configs):
            got.append((i, trial))
            if len(got) == 3:
                assert ev.in_flight()[0] > 0  # the kill lands while actor 0 holds unfinished work
                os.kill(victim, signal.SIGKILL)
        assert sorted(i for i, _ in got) == list(range(24))  # every config once, none twice
        expected = ReplayEvaluator.from_file(CONV).evaluate(configs)
        assert {i: t.to_dict() for i, t in got} == {i: t.to_dict() for i, t in enumerate(expected)}
        assert ev.stats.restarts == 1 and ev.stats.requeued >= 1 and ev.stats.given_up == 0
        assert victim not in ev.actor_pids()  # replaced by a fresh actor, which took work after
        assert ev.stats.dispatched == 24 + ev.stats.requeued
    finally:
        ev.close()


def test_a_search_through_ray_stores_every_trial_once_and_resumes(cluster, tmp_path: Path) -> None:
    plain = run_search(ReplayEvaluator.from_file(CONV), "genetic", Budget(max_evals=40), seed=3)
    ev = RayEvaluator(ReplayFactory.of(CONV, delay_s=0.02), num_actors=2)
    killed = []

    def kill_once(ctx) -> None:  # noqa: ANN001 - called after each stored trial, mid-batch
        if ctx.evaluations == 10 and not killed:
            killed.append(ev.slots[1].actor)
            ray.kill(ev.slots[1].actor)

    try:
        with Store(tmp_path / "kt.db") as store:
            res = run_search(ev, "genetic", Budget(max_evals=40), seed=3,
                             run=RunOptions(store=store, progress=kill_once))
            rows = store.trials(res.run_id)
            assert len(rows) == 40 and len({k for k, _, _ in rows}) == 40
            # The strategy saw the same results in the same order: the same path, the same winner.
            assert {k for k, _, _ in rows} == {ev.space.key(t.config) for t in plain.history}
            assert res.best.time_ms == plain.best.time_ms
            assert ev.stats.restarts == 1
            again = run_search(ev, "genetic", Budget(max_evals=50), seed=3,
                               run=RunOptions(store=store, run_id=res.run_id))
            assert again.resumed_trials == 40 and len(store.trials(res.run_id)) == 50
            assert store.get_run(res.run_id).status == "done"
    finally:
        ev.close()


def test_tune_command_runs_on_ray(cluster, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from kerntune.cli import main

    db = tmp_path / "cli.db"
    with pytest.raises(SystemExit) as exit_info:
        main(["tune", "--replay", str(CONV), "--strategy", "random", "--budget", "12", "--store", str(db),
              "--ray-address", "auto", "--gpus", "2", "--no-report"])
    assert exit_info.value.code in (0, None)
    with Store(db) as store:
        run = store.list_runs()[0]
        assert len(store.trials(run.id)) == 12
        row = store.conn.execute("SELECT evaluator_json FROM runs WHERE id=?", (run.id,)).fetchone()
    assert '"actors": 2' in row[0]
    assert "best:" in capsys.readouterr().out


def test_without_ray_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what an environment without Ray looks like
    with pytest.raises(KerntuneError, match=r"pip install kerntune\[distributed\]"):
        import_ray()


def test_a_shipped_file_is_recreated_where_the_path_is_missing(tmp_path: Path) -> None:
    from kerntune.evaluate.ray_backend import ShippedFile

    src = tmp_path / "space.json.gz"
    src.write_bytes(CONV.read_bytes())
    shipped = ShippedFile.read(src)
    assert shipped.local() == str(src)  # the driver's own path where it holds the same bytes
    src.unlink()  # what a node without the driver's disk sees
    elsewhere = Path(shipped.local())
    assert elsewhere != src and elsewhere.name == src.name and elsewhere.read_bytes() == CONV.read_bytes()
    with pytest.raises(KerntuneError, match="not found"):
        ShippedFile.read(src)
