"""A batch left unfinished on Ray (the consumer stops reading and closes the stream, as a search
does when its budget ends) must not keep its actors busy: the configs it had queued on them
used to go on being measured, so the next batch waited behind work nobody read (and, past
``stall_s``, was blamed for it).  A real local cluster (2 CPUs), one actor, a toy evaluator
whose configs sleep."""

from __future__ import annotations

import os
import time

import pytest

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_DISABLE_USAGE_STATS", "1")
ray = pytest.importorskip("ray")

from kerntune.evaluate.ray_backend import RayEvaluator  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    # "local": a cluster of its own, not one another test file (run side by side) has started
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _sleepy_factory(delays: dict[int, float], default_s: float = 0.05):  # noqa: ANN202
    """Evaluators over x in 0..11 that measure x in ``delays[x]`` seconds (else ``default_s``),
    with time 1 + x.  Built in a function, so that Ray pickles the class by value."""
    from kerntune.evaluate.base import Evaluator
    from kerntune.evaluate.trial import Status, Trial
    from kerntune.space import Choice, Space

    class Sleepy(Evaluator):
        name = "sleepy"

        def __init__(self) -> None:
            super().__init__(Space([Choice("x", options=tuple(range(12)))]))

        def evaluate(self, configs):  # noqa: ANN001, ANN201
            return [t for _, t in self.stream(configs)]

        def stream(self, configs):  # noqa: ANN001, ANN201
            for j, cfg in enumerate(configs):
                time.sleep(delays.get(cfg["x"], default_s))
                yield j, Trial(dict(cfg), Status.OK, 1.0 + cfg["x"], [1.0 + cfg["x"]])

        def describe(self):  # noqa: ANN201
            return {"evaluator": "sleepy"}

    return lambda cpus: Sleepy()


def _abandon_then_run(ev: RayEvaluator, first: list[dict], second: list[dict],
                      close: bool = True) -> tuple[float, dict]:
    """Read one result of ``first`` and close its stream (``close=False``: leave it open, unread,
    and close it only after ``second``), then stream ``second`` at once: the seconds from its start
    to its first result, and its results."""
    stream = ev.stream(first)
    i, trial = next(stream)
    assert trial.config == first[i]
    if close:
        stream.close()
    t0 = time.monotonic()
    first_s, got = None, {}
    for i, trial in ev.stream(second):
        if first_s is None:
            first_s = time.monotonic() - t0
        assert i not in got  # one result per config
        got[i] = trial
    stream.close()  # left open: closed late, it must not disturb the actors of later batches
    return first_s, got


def _own(second: list[dict], got: dict) -> bool:
    """Each result is its config's, none an abandoned batch's."""
    return sorted(got) == list(range(len(second))) and all(
        got[i].ok and got[i].config == second[i] and got[i].time_ms == 1.0 + second[i]["x"] for i in got)


def test_an_actor_stuck_in_an_abandoned_config_is_replaced_and_the_next_batch_starts_at_once(cluster) -> None:
    """The actor is 8 s into a config when its batch is abandoned: past abandon_s it is replaced,
    so the next batch starts in about an actor's start, and no stall is charged to it."""
    ev = RayEvaluator(_sleepy_factory({1: 8.0}), num_actors=1, wait_s=0.2, stall_s=5.0)
    ev.abandon_s = 0.5  # set after start, so that the same test runs (and fails) on code without it
    try:
        ev.window = 4
        first = [{"x": k} for k in range(4)]  # x=0 answers, x=1 holds the actor, x=2, x=3 queue behind it
        second = [{"x": k} for k in (8, 9, 10)]
        first_s, got = _abandon_then_run(ev, first, second)
        assert _own(second, got)
        assert first_s < 4.5, f"the next batch waited {first_s:.1f} s behind the abandoned one"
        assert ev.stats.stalls == 0 and ev.stats.requeued == 0  # nothing charged to the new configs
        assert ev.stats.recycled == 1 and ev.stats.restarts == 0
    finally:
        ev.close()


@pytest.mark.parametrize("close", [True, False], ids=["closed", "left-open"])
def test_configs_queued_behind_an_abandoned_one_are_dropped_and_a_free_actor_is_kept(cluster, close: bool) -> None:
    """The config being measured ends within abandon_s: the actor is kept, and the configs of the
    abandoned batch queued behind it (3 s of them) are never measured.  A stream left open, not
    closed, is abandoned alike once the next one starts."""
    ev = RayEvaluator(_sleepy_factory({1: 1.0, **{k: 0.5 for k in range(2, 8)}}), num_actors=1, wait_s=0.2)
    try:
        ev.window = 8
        pid = ev.actor_pids()
        first = [{"x": k} for k in range(8)]
        second = [{"x": k} for k in (8, 9)]
        first_s, got = _abandon_then_run(ev, first, second, close)
        assert _own(second, got)
        assert first_s < 3.0, f"the next batch waited {first_s:.1f} s behind the abandoned one"
        assert ev.actor_pids() == pid and ev.stats.restarts == 0 and ev.stats.recycled == 0
        # A batch read to its end abandons nothing: the next one finds its actor free at once.
        assert _own(second, dict(ev.stream(second))) and ev.stats.abandoned == 1
    finally:
        ev.close()
