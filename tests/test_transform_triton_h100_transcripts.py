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
    from kerntune.transform.triton_backend import variant_problems

    exchanges = [json.loads(line) for line in (run / "transcript.jsonl").read_text().splitlines() if line.strip()]
    assert len(exchanges) == 1 and exchanges[0]["provider"] == "files"
    prompt = "\n".join(m["content"] for m in exchanges[0]["messages"])
    assert "Triton" in prompt and "kernel file" in prompt
    answer = json.loads(exchanges[0]["response"])
    assert variant_problems(answer["code"]) == []
    result = json.loads((run / "result.json").read_text())
    assert result["accepted"] == ["one-prompt"] and result["llm_calls"] == 1
    assert (run / "best.py").read_text() == answer["code"]


def test_there_are_committed_runs() -> None:
    assert {r.name for r in RUNS} >= {"matmul_4096", "matmul_8192x8192x512", "attention_d64", "attention_d128"}
