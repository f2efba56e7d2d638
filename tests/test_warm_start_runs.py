"""Which past runs feed a warm start (kerntune.run.warm_start.nearby_runs): runs whose problem size is
not a sequence of numbers (Helion's "512x512, 512x512", Kernel Tuner transform runs' "4096x4096") are
left out rather than crash ``tune --shapes``; and, given the new run's evaluator, only runs of the same
evaluator type, and of the same kernel source hash where both carry one, count."""

from __future__ import annotations

from pathlib import Path

from kerntune.evaluate.trial import Status, Trial
from kerntune.run.warm_start import nearby_runs, past_winners, transfer_data
from kerntune.space import Choice, Space
from kerntune.store import Store

SPACE = Space([Choice("B", options=(16, 32, 64))])


def _run(store: Store, evaluator: dict, best_b: int = 32) -> str:
    rid = store.create_run("tune", strategy="random", seed=0, options={}, space=SPACE.to_dict(),
                           evaluator={"kernel_name": "matmul", **evaluator}, device="NVIDIA H100")
    for seq, b in enumerate((16, 32, 64)):
        trial = Trial({"B": b}, Status.OK, 1.0 if b == best_b else 2.0 + seq, [1.0])
        store.add_trial(rid, seq, SPACE.key({"B": b}), trial, float(seq))
    store.finish_run(rid, "done", summary={})
    return rid


def test_runs_whose_size_is_not_a_list_of_numbers_are_left_out(tmp_path: Path) -> None:
    store = Store(tmp_path / "kt.db")
    _run(store, {"evaluator": "helion", "problem_size": "512x512, 512x512"})
    _run(store, {"evaluator": "kt", "problem_size": "4096x4096"})
    _run(store, {"evaluator": "triton", "problem_size": [512, None, 512]})
    good = _run(store, {"evaluator": "triton", "problem_size": [1024, 512, 512]}, best_b=64)
    runs = nearby_runs(store, "matmul", [512, 512, 512], "NVIDIA H100")
    assert [r[2] for r in runs] == [good]
    winners = past_winners(store, "matmul", [512, 512, 512], SPACE, "NVIDIA H100", per_run=1)
    assert [w.config for w in winners] == [{"B": 64}]
    assert [r.problem_size for r in transfer_data(store, "matmul", [512, 512, 512], SPACE, "NVIDIA H100")] == [
        [1024, 512, 512]]
    # a new run whose own size is a string has no distance to any run: none, and no crash
    assert nearby_runs(store, "matmul", "512x512", "NVIDIA H100") == []


def test_runs_of_another_evaluator_or_kernel_source_are_left_out(tmp_path: Path) -> None:
    store = Store(tmp_path / "kt.db")
    same = _run(store, {"evaluator": "triton", "source_hash": "aaaa", "problem_size": [1024, 512, 512]})
    edited = _run(store, {"evaluator": "triton", "source_hash": "bbbb", "problem_size": [512, 512, 256]})
    unhashed = _run(store, {"evaluator": "triton", "problem_size": [2048, 512, 512]}, best_b=64)
    other = _run(store, {"evaluator": "replay", "problem_size": [512, 512, 1024]})
    everything = {r[2] for r in nearby_runs(store, "matmul", [512, 512, 512], "NVIDIA H100")}
    assert everything == {same, edited, unhashed, other}  # without the evaluator: by name, as before
    ours = {"evaluator": "triton", "source_hash": "aaaa", "kernel_file": "matmul.py"}
    runs = nearby_runs(store, "matmul", [512, 512, 512], "NVIDIA H100", evaluator=ours)
    assert [r[2] for r in runs] == [same, unhashed]  # nearest first
    winners = past_winners(store, "matmul", [512, 512, 512], SPACE, "NVIDIA H100", per_run=1, evaluator=ours)
    assert [(w.run_id, w.config) for w in winners] == [(same, {"B": 32}), (unhashed, {"B": 64})]
    transfer = transfer_data(store, "matmul", [512, 512, 512], SPACE, "NVIDIA H100", evaluator=ours)
    assert [r.problem_size for r in transfer] == [[1024, 512, 512], [2048, 512, 512]]
    replay = nearby_runs(store, "matmul", [512, 512, 512], "NVIDIA H100", evaluator={"evaluator": "replay"})
    assert [r[2] for r in replay] == [other]
