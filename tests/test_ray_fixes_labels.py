"""Ray across hosts: each GPU keeps its own label, and a replay on Ray keeps the recording.

A real two-node local Ray cluster (``ray.cluster_utils.Cluster``), one CPU and one fake GPU per
node, so Ray gives each node's actor ``CUDA_VISIBLE_DEVICES=0``, as on two real hosts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_DISABLE_USAGE_STATS", "1")
ray = pytest.importorskip("ray")

from ray.cluster_utils import Cluster  # noqa: E402

from kerntune.evaluate import ReplayEvaluator  # noqa: E402
from kerntune.evaluate.ray_backend import RayEvaluator, ReplayFactory  # noqa: E402
from kerntune.evaluate.retime import leading  # noqa: E402

CONV = Path(__file__).resolve().parent.parent / "examples" / "spaces" / "convolution_A100.json.gz"


@pytest.fixture(scope="module")
def two_hosts():  # noqa: ANN201
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 1})
    cluster.add_node(num_cpus=1, num_gpus=1)
    ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def _gpu_label_factory():  # noqa: ANN202
    """Evaluators over x in 0..9 that label each trial with their local ``CUDA_VISIBLE_DEVICES``
    (what a Triton evaluator's ``extra["gpu"]`` is) and time x as 1 + x, plus 1000 on the node whose
    id sorts last: every config of the first node screens faster.  Built in a function, so that Ray
    pickles the class by value."""
    from kerntune.evaluate.base import Evaluator
    from kerntune.evaluate.trial import Status, Trial
    from kerntune.space import Choice, Space

    class Labelled(Evaluator):
        name = "labelled"

        def __init__(self) -> None:
            super().__init__(Space([Choice("x", options=tuple(range(10)))]))
            me = ray.get_runtime_context().get_node_id()
            self.slow = 1000.0 * sorted(n["NodeID"] for n in ray.nodes() if n["Alive"]).index(me)

        def evaluate(self, configs):  # noqa: ANN001, ANN201
            return [t for _, t in self.stream(configs)]

        def stream(self, configs):  # noqa: ANN001, ANN201
            for j, cfg in enumerate(configs):
                t = 1.0 + cfg["x"] + self.slow
                yield j, Trial(dict(cfg), Status.OK, t, [t], extra={"gpu": os.environ["CUDA_VISIBLE_DEVICES"]})

        def describe(self):  # noqa: ANN201
            return {"evaluator": "labelled"}

    return lambda cpus: Labelled()


def test_gpus_of_two_hosts_with_the_same_local_label_keep_distinct_labels_and_separate_rankings(two_hosts) -> None:
    """Both hosts' actors see ``CUDA_VISIBLE_DEVICES=0``; their trials used to come back labelled
    "0" alike, so ``leading`` took one ranking and filled the leaders with the faster host's configs,
    though screening times of two GPUs do not compare."""
    ev = RayEvaluator(_gpu_label_factory(), num_actors=2, gpus_per_actor=1, wait_s=0.2)
    try:
        trials = ev.evaluate([{"x": k} for k in range(10)])
    finally:
        ev.close()
    assert ev.stats.results[0] >= 2 and ev.stats.results[1] >= 2  # the first round gives each actor a window of 2
    labels = {t.extra["gpu"] for t in trials}
    assert len(labels) == 2 and all(label.endswith(":0") for label in labels)
    fast = {t.extra["gpu"] for t in trials if t.time_ms < 1000}
    lead = [t.extra["gpu"] for t in leading(trials, 4)]
    assert lead[0] in fast and lead[0] == lead[2] and lead[1] == lead[3] and lead[0] != lead[1]  # in turn


def test_a_replay_on_ray_has_the_recording(two_hosts) -> None:
    """``tune --replay ... --ray-address`` used to end without the line comparing the winner with
    the recording's optimum: ``RayEvaluator`` had no ``recording``, which ``tune`` reads (the line itself:
    ``tests/test_ray.py::test_tune_command_runs_on_ray``)."""
    ev = RayEvaluator(ReplayFactory.of(CONV), num_actors=1)
    try:
        assert ev.recording.optimum.time_ms == ReplayEvaluator.from_file(CONV).recording.optimum.time_ms
    finally:
        ev.close()


def test_an_evaluator_that_is_not_a_replay_has_no_recording_on_ray(two_hosts) -> None:
    """Only a replay knows an optimum; other evaluators on Ray report none."""
    ev = RayEvaluator(_gpu_label_factory(), num_actors=1, gpus_per_actor=1, wait_s=0.2)
    try:
        assert ev.recording is None
    finally:
        ev.close()
