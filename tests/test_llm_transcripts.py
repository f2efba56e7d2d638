"""Recorded model transcripts re-run deterministically through ``replay:``.

The transcripts in benchmarks/llm/transcripts/ were answered through the
``files:`` provider by a strong model (an agent answering from the prompts
alone); replaying them must reproduce the recorded search exactly.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kerntune.evaluate import ReplayEvaluator
from kerntune.llm import LLMClient
from kerntune.run.search import RunOptions, run_search
from kerntune.strategies import Budget

ROOT = Path(__file__).resolve().parent.parent
CASES = [
    ("examples/spaces/convolution_A100.json.gz", "benchmarks/llm/transcripts/convolution_A100.llm.jsonl"),
    ("examples/spaces/matmul_4096_h100.json.gz", "benchmarks/llm/transcripts/matmul_4096_h100.llm.jsonl"),
    ("examples/spaces/matmul_8192x8192x512_h100.json.gz", "benchmarks/llm/transcripts/matmul_8192x8192x512_h100.llm.jsonl"),
    ("examples/spaces/matmul_256x8192x8192_h100.json.gz", "benchmarks/llm/transcripts/matmul_256x8192x8192_h100.llm.jsonl"),
]


@pytest.mark.parametrize("space, transcript", CASES)
def test_replayed_transcript_reproduces_the_recorded_search(space: str, transcript: str) -> None:
    path = ROOT / transcript
    if not path.exists():
        pytest.skip(f"{transcript} not recorded yet")
    entries = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    ev = ReplayEvaluator.from_file(ROOT / space)
    res = run_search(ev, "llm", Budget(max_evals=100), seed=0,
                     run=RunOptions(llm=LLMClient.from_spec(f"replay:{path}"),
                                    strategy_options={"initial": 25, "refine": 15, "max_rounds": 5}))
    assert len(res.llm_exchanges) == len(entries)
    # Every round's accepted configs are exactly the ones the transcript's answer proposed and were new.
    for ex, entry in zip(res.llm_exchanges, entries):
        assert ex["response"] == entry["response"]
        assert not ex["error"]
    assert res.best is not None
    # Every config the model proposed and kerntune accepted was measured (top-ups come from the fallback).
    measured = [{k: list(v) if isinstance(v, tuple) else v for k, v in t.config.items()} for t in res.history]
    proposed = [a["config"] for ex in res.llm_exchanges for a in ex["accepted"]]
    assert all(cfg in measured for cfg in proposed)
    # And the replay is deterministic: a second run walks the same path.
    again = run_search(ev, "llm", Budget(max_evals=100), seed=0,
                       run=RunOptions(llm=LLMClient.from_spec(f"replay:{path}"),
                                      strategy_options={"initial": 25, "refine": 15, "max_rounds": 5}))
    assert [t.config for t in again.history] == [t.config for t in res.history]
