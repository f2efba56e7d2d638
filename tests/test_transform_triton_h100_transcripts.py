"""The strong model's committed answers behind the H100 Triton transform figures
(benchmarks/results/transform_triton/h100/): each transcript holds one exchange whose answer is the
kernel file committed beside it as best.py, and that answer still passes kerntune's static checks on a
model-written Triton file (so a stricter rule that would reject it shows up here, not on a GPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "transform_triton" / "h100"
RUNS = sorted(p.parent for p in RESULTS.glob("*/transcript.jsonl"))


@pytest.mark.parametrize("run", RUNS, ids=[r.name for r in RUNS])
def test_committed_answer_is_the_winning_file_and_passes_the_static_checks(run: Path) -> None:
    """One exchange per model call (a one-prompt rewrite, and its fix where the rewrite was rejected as
    wrong); the accepted step's answer is the committed best.py (where none was accepted, every rewrite was
    correct but not faster)."""
    from kerntune.transform.triton_backend import variant_problems

    exchanges = [json.loads(line) for line in (run / "transcript.jsonl").read_text().splitlines() if line.strip()]
    result = json.loads((run / "result.json").read_text())
    assert 1 <= len(exchanges) == result["llm_calls"] and all(e["provider"] == "files" for e in exchanges)
    answers = [json.loads(e["response"])["code"] for e in exchanges]
    for e, code in zip(exchanges, answers):
        prompt = "\n".join(m["content"] for m in e["messages"])
        assert "Triton" in prompt and "kernel file" in prompt
        assert variant_problems(code) == []
    steps = {s["id"]: s for s in result["steps"]}
    if not result["accepted"]:  # a correct rewrite that was not faster: the start's file stays the winner
        assert all(s["status"] == "rejected" and s["reason"].startswith("not faster") for s in steps.values())
        assert (run / "best.py").read_text() != answers[-1]
        return
    assert result["accepted"] == [list(steps)[len(exchanges) - 1]]  # the last answer is the one accepted
    if len(exchanges) > 1:  # the fix: its prompt quotes the rejected file and the reason
        assert steps["one-prompt"]["status"] == "rejected" and result["accepted"] == ["one-prompt.fix1"]
        fix_prompt = exchanges[1]["messages"][1]["content"]
        assert "kerntune-transform: fix" in fix_prompt and answers[0].strip() in fix_prompt
    assert (run / "best.py").read_text() == answers[-1]


def test_there_are_committed_runs() -> None:
    assert {r.name for r in RUNS} >= {"matmul_4096", "matmul_8192x8192x512", "attention_d64", "attention_d128"}
