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
    # "local": a cluster of its own, not one another test file (run side by side) has started
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
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
    out = capsys.readouterr().out
    # a replay on Ray ends, as without it, with the winner against the recording's optimum
    assert "best:" in out and "the recording's optimum:" in out


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


def _toy_factory(fail_on: int, how: str, delay_s: float = 0.05):  # noqa: ANN202
    """A factory of evaluators over x in 0..9 that measure x in ``delay_s`` and, for x ==
    ``fail_on``, hang (``how="hang"``) or raise (``how="raise"``); ``how="always"``: raise on every x.  Built in a function, so
    that Ray pickles the classes by value and the actors need no import of this file."""
    import time

    from kerntune.evaluate.base import Evaluator
    from kerntune.evaluate.trial import Status, Trial
    from kerntune.space import Choice, Space

    class Toy(Evaluator):
        name = "toy"

        def __init__(self) -> None:
            super().__init__(Space([Choice("x", options=tuple(range(10)))]))

        def evaluate(self, configs):  # noqa: ANN001, ANN201
            return [t for _, t in self.stream(configs)]

        def stream(self, configs):  # noqa: ANN001, ANN201
            for j, cfg in enumerate(configs):
                if how == "always":
                    raise RuntimeError("no GPU's benchmark worker could start: pid 4242 exited")
                if cfg["x"] == fail_on and how == "hang":
                    time.sleep(3600)
                if cfg["x"] == fail_on:
                    raise ValueError(f"boom on x={fail_on}")
                time.sleep(delay_s)
                yield j, Trial(dict(cfg), Status.OK, 1.0 + cfg["x"], [1.0 + cfg["x"]])

        def describe(self):  # noqa: ANN201
            return {"evaluator": "toy"}

    return lambda cpus: Toy()


def test_a_batch_no_larger_than_the_window_is_spread_round_robin(cluster) -> None:
    """A batch of at most ``window`` configs used to go wholly to actor 0."""
    ev = RayEvaluator(ReplayFactory.of(CONV), num_actors=2)
    try:
        assert ev.window >= 2
        configs = _configs(8)
        for k in range(0, 8, 2):  # batches of 2, the size of the default window of a replay
            ev.evaluate(configs[k:k + 2])
        assert dict(ev.stats.results) == {0: 4, 1: 4}
        ev.stats.results.clear()
        ev.window = 8
        trials = ev.evaluate(configs[:6])  # a window holds the whole batch: still one each in turn
        assert dict(ev.stats.results) == {0: 3, 1: 3}
        expected = ReplayEvaluator.from_file(CONV).evaluate(configs[:6])
        assert [t.to_dict() for t in trials] == [t.to_dict() for t in expected]
    finally:
        ev.close()


def test_a_hung_evaluator_is_a_lost_actor_and_a_config_that_hangs_every_actor_fails(cluster) -> None:
    """An actor answers every wait_s with nothing while its evaluator hangs: once it has held
    work for stall_s with no result it is replaced and its configs re-queued; the config that
    hangs again, alone, on the other actor fails, the one that only waited behind it does not."""
    import threading

    ev = RayEvaluator(_toy_factory(1, "hang"), num_actors=2, wait_s=0.2, stall_s=3.0, max_requeues=1)
    got: list = []
    configs = [{"x": k} for k in range(4)]  # round-robin: actor 0 gets x=0 and x=2, actor 1 x=1 and x=3
    runner = threading.Thread(target=lambda: got.extend(ev.stream(configs)), daemon=True)
    try:
        runner.start()
        runner.join(timeout=60)
        assert not runner.is_alive(), "the run hung with its actor"
        res = dict(got)
        assert sorted(res) == [0, 1, 2, 3]
        assert all(res[k].ok and res[k].time_ms == 1.0 + k for k in (0, 2, 3))  # x=3 waited behind x=1
        assert res[1].status.value == "runtime_error" and "no result for 3 s" in res[1].error
        assert ev.stats.stalls == 2 and ev.stats.given_up == 1 and ev.stats.restarts >= 2
    finally:
        ev.close()


def test_an_evaluator_that_raises_is_a_lost_actor_and_its_config_fails_with_the_error(cluster) -> None:
    """A RayTaskError used to end the whole search."""
    ev = RayEvaluator(_toy_factory(1, "raise"), num_actors=1, wait_s=0.2, max_requeues=1)
    try:
        res = dict(ev.stream([{"x": 0}, {"x": 1}, {"x": 2}]))
        assert sorted(res) == [0, 1, 2]
        assert res[0].ok and res[2].ok and res[2].time_ms == 3.0
        assert res[1].status.value == "runtime_error" and "ValueError: boom on x=1" in res[1].error
        assert "boom on x=1" in ev.last_loss
        assert ev.stats.errors == 2 and ev.stats.restarts == 2 and ev.stats.given_up == 1
        assert ev.stats.results[0] == 2  # x=0, measured before the failure, was not measured again
    finally:
        ev.close()


@pytest.mark.parametrize("actors", [1, 2])
def test_an_evaluator_that_always_raises_the_same_error_fails_the_run_at_once(cluster, actors: int) -> None:
    """Every actor (and its replacements) failing alike used to be replaced max_restarts times and
    its configs re-sent max_requeues times, to end in runtime_error trials or "every Ray actor was
    lost"; the same error on actors that held different configs is the evaluator's: fail with it."""
    import time

    ev = RayEvaluator(_toy_factory(-1, "always"), num_actors=actors, wait_s=0.2)
    got: list = []
    try:
        start = time.monotonic()
        with pytest.raises(KerntuneError, match="no GPU's benchmark worker could start: pid 4242 exited"):
            got.extend(ev.stream([{"x": k} for k in range(6)]))
        assert time.monotonic() - start < 10
        assert got == []  # no config is charged with the evaluator's failure
        assert ev.stats.errors == (3 if actors == 1 else 2)  # 1 actor: the first config alone, then another
        assert ev.stats.restarts == ev.stats.errors - 1 and ev.stats.given_up <= 1
    finally:
        ev.close()


def test_an_adapter_name_travels_as_a_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import kerntune.evaluate.triton_backend.evaluator as triton_evaluator
    from kerntune.evaluate.ray_backend import ShippedFile, TritonFactory

    built = []
    monkeypatch.setattr(triton_evaluator, "TritonEvaluator", lambda path, shape, **kw: built.append((path, shape)))
    factory = TritonFactory.of("liger.rms_norm", (64, 256))  # used to say "file not found: liger.rms_norm"
    assert factory.kernel == "liger.rms_norm" and factory.local_describe() == {"kernel_file": "liger.rms_norm"}
    factory(4)
    assert built == [("liger.rms_norm", (64, 256))]
    kernel = tmp_path / "k.py"
    kernel.write_text("space = {}\n")
    assert isinstance(TritonFactory.of(kernel, (8,)).kernel, ShippedFile)  # a file still travels as its bytes
    with pytest.raises(KerntuneError, match="not found"):
        TritonFactory.of(tmp_path / "missing.py", (8,))


def test_tune_on_ray_takes_an_adapter_name(cluster, capsys: pytest.CaptureFixture) -> None:
    from kerntune.cli import main

    with pytest.raises(SystemExit) as exit_info:  # this cluster has no GPU: the next thing to say
        main(["tune", "liger.rms_norm", "--shape", "64x256", "--ray-address", "auto", "--no-report"])
    assert exit_info.value.code not in (0, None)
    err = capsys.readouterr().err
    assert "no GPU" in err and "not found" not in err


def test_a_local_address_starts_a_private_cluster_where_another_is_recorded_as_current() -> None:
    """``--ray-address local`` promises a private one-machine cluster, but ``ray.init()`` without an
    address joins the cluster the last ``ray start`` recorded in ``ray_current_cluster`` (here a dead
    address, as another test file's or a user's cluster would be): the run tried that one instead."""
    import subprocess
    import tempfile

    tmp = tempfile.mkdtemp(prefix="ktray", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    try:
        os.mkdir(os.path.join(tmp, "ray"))
        with open(os.path.join(tmp, "ray", "ray_current_cluster"), "w") as f:
            f.write("127.0.0.1:9")
        code = ("import ray; from kerntune.evaluate.ray_backend import _connect; _connect(ray, 'local'); "
                "print('cpus', ray.cluster_resources().get('CPU')); ray.shutdown()")
        env = dict(os.environ, RAY_TMPDIR=tmp, RAY_USAGE_STATS_ENABLED="0")
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0 and "cpus" in done.stdout, done.stdout + done.stderr[-2000:]
    finally:
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
