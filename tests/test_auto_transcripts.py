"""``auto`` re-running recorded strong-model transcripts through ``replay:`` (no live model).

benchmarks/llm/transcripts/auto/ holds the exchanges of ``auto`` runs whose model was a separate
answerer working from the ``files:`` prompts alone (benchmarks/search_quality/strong_auto.sh);
the older benchmarks/llm/transcripts/*.llm.jsonl were answered the same way for the ``llm``
strategy, and their first answer is a fair opening for ``auto`` too.  A replay must be
deterministic, must measure the model's first answer right after the start, and must spend
the whole budget (the surrogate carries on after the model's last call).  benchmarks/llm/transcripts/heldout/
holds the same for the held-out recordings (benchmarks/heldout/strong_auto.sh), heldout_h200/ for the
seven recorded on an H200."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kerntune.evaluate import ReplayEvaluator
from kerntune.llm import LLMClient
from kerntune.run.search import RunOptions, run_search
from kerntune.strategies import Budget

ROOT = Path(__file__).resolve().parent.parent
TRANSCRIPTS = ROOT / "benchmarks" / "llm" / "transcripts"
SHIPPED, HELD_OUT = ROOT / "examples" / "spaces", ROOT / "benchmarks" / "results" / "heldout" / "spaces"
HELD_OUT_H200 = ROOT / "benchmarks" / "results" / "heldout" / "spaces_h200"


def _cases(folder: str, spaces: Path) -> list[tuple[Path, Path]]:
    """(recording, transcript) for every non-empty transcript in TRANSCRIPTS/folder, named after its space."""
    return [(spaces / f"{p.name[: -len('.llm.jsonl')]}.json.gz", p)
            for p in sorted((TRANSCRIPTS / folder).glob("*.llm.jsonl")) if p.stat().st_size]


CASES = _cases("auto", SHIPPED) + _cases("heldout", HELD_OUT) + _cases("heldout_h200", HELD_OUT_H200)
CASES.append((SHIPPED / "convolution_A100.json.gz", TRANSCRIPTS / "convolution_A100.llm.jsonl"))
OPTIONS = {"model_clock_s": 30, "max_calls": 4}


def _run(space: Path, transcript: Path, budget: int):  # noqa: ANN202
    ev = ReplayEvaluator.from_file(space)
    return run_search(ev, "auto", Budget(max_evals=budget), seed=0,
                      run=RunOptions(llm=LLMClient.from_spec(f"replay:{transcript}"), strategy_options=OPTIONS))


@pytest.mark.parametrize("space, transcript", CASES,
                         ids=[f"{s.name[: -len('.json.gz')]}-{p.parent.name}" for s, p in CASES])
def test_auto_replays_a_strong_model_transcript(space: Path, transcript: Path) -> None:
    entries = [json.loads(line) for line in transcript.read_text().splitlines() if line.strip()]
    first = json.loads(entries[0]["response"])["configs"]
    res = _run(space, transcript, 60)
    # the whole budget, or the whole space where it is smaller (four H200 recordings hold 48-126 configs)
    assert len(res.history) == min(60, len(ReplayEvaluator.from_file(space).recording.trials)), res.stop_reason
    assert res.llm_exchanges and res.llm_exchanges[0]["response"] == entries[0]["response"]
    assert res.extra["model_calls"] >= 1
    # Every config of the first answer that kerntune accepted (valid and new) was measured.
    accepted = [a["config"] for a in res.llm_exchanges[0]["accepted"]]
    measured = [{k: list(v) if isinstance(v, tuple) else v for k, v in t.config.items()} for t in res.history]
    assert accepted and len(accepted) <= len(first)
    assert all(cfg in measured for cfg in accepted)
    again = _run(space, transcript, 60)
    assert [t.config for t in again.history] == [t.config for t in res.history]


@pytest.mark.parametrize("transcript", sorted((TRANSCRIPTS / "auto").glob("*.llm.jsonl")),
                         ids=lambda p: p.name[: -len(".llm.jsonl")])
def test_the_development_transcripts_answer_the_prompts_a_run_sends(transcript: Path, caplog: pytest.LogCaptureFixture,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Acceptance 2's figures replay these answers as answers to what a run asks now: every call's
    question, run as strong_auto.sh ran it (budget 200, the MI250X device named), is the one recorded.
    A prompt change that alters them leaves the figures standing on answers to other questions: the
    prompts must then be answered afresh (benchmarks/search_quality/strong_auto.sh).

    A transcript holding ``max_calls`` answers is checked up to its last call and the run stopped
    there (no later call can be made; the surrogate's remaining evaluations took most of a minute of
    CI); a shorter one runs to the end, so that a run asking once more than was recorded fails."""
    from kerntune.evaluate.replay import replay_extras
    from kerntune.llm.providers.local import ReplayProvider
    from kerntune.strategies.base import BudgetExhausted

    recorded = len([x for x in transcript.read_text().splitlines() if x.strip()])
    answered: list[int] = []
    send = ReplayProvider.send

    def counted(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        reply = send(self, *args, **kwargs)  # the question is compared with the recorded one in here
        answered.append(self.position)
        return reply

    def stop_after_the_last_call(_ctx) -> None:  # noqa: ANN001
        if recorded == OPTIONS["max_calls"] and len(answered) == recorded:
            raise BudgetExhausted("every recorded call was asked")

    monkeypatch.setattr(ReplayProvider, "send", counted)
    space = transcript.name[: -len(".llm.jsonl")]
    _, device = replay_extras(None, "AMD Instinct MI250X" if "MI250X" in space else None)
    ev = ReplayEvaluator.from_file(SHIPPED / f"{space}.json.gz", device_info=device)
    with caplog.at_level("WARNING"):
        res = run_search(ev, "auto", Budget(max_evals=200), seed=0,
                         run=RunOptions(llm=LLMClient.from_spec(f"replay:{transcript}"), strategy_options=OPTIONS,
                                        progress=stop_after_the_last_call))
    assert len(answered) == recorded, res.stop_reason
    assert not [r for r in caplog.records if "asks another question" in r.getMessage()]
