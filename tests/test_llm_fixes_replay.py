"""``replay:`` keeps each answer on the question it was recorded for: a failed call leaves an error
line that fails the same call again, and a question that differs from the recorded one is logged (once)."""

from __future__ import annotations

import json
import logging
import sys
import textwrap
from pathlib import Path

import pytest

from kerntune.llm import LLMClient, LLMError, Message, make_provider
from scripted import ScriptedProvider

ROUNDS = ["round 1", "round 2", "round 3"]


def _record(transcript: Path, fail_on: int = 2) -> list[str | None]:
    """Three rounds recorded into ``transcript``; call ``fail_on`` fails (an outage after retries)."""

    def script(n: int, messages: list[Message]) -> str:
        if n == fail_on:
            raise LLMError("outage")
        return f"answer to {messages[-1].content}"

    client = LLMClient(ScriptedProvider(script), transcript=transcript, retries=0)
    return [_ask(client, q) for q in ROUNDS]


def _ask(client: LLMClient, question: str) -> str | None:
    """The answer's text, or None where the call failed."""
    try:
        return client.complete([Message("user", question)]).text
    except LLMError:
        return None


def test_a_failed_call_keeps_the_later_answers_on_their_questions(tmp_path: Path) -> None:
    t = tmp_path / "t.jsonl"
    recorded = _record(t)
    assert recorded == ["answer to round 1", None, "answer to round 3"]
    lines = [json.loads(line) for line in t.read_text().splitlines()]
    assert len(lines) == 3 and "response" not in lines[1] and lines[1]["error"].endswith("outage")
    assert lines[1]["messages"] == [{"role": "user", "content": "round 2"}]
    replayed = LLMClient(make_provider(f"replay:{t}"), retries=0)
    assert [_ask(replayed, q) for q in ROUNDS] == recorded


def test_a_replayed_failure_is_copied_into_another_transcript_but_not_into_its_own(tmp_path: Path) -> None:
    t = tmp_path / "t.jsonl"
    recorded = _record(t)
    copy = tmp_path / "copy.jsonl"
    copier = LLMClient(make_provider(f"replay:{t}"), retries=0, transcript=copy)
    assert [_ask(copier, q) for q in ROUNDS] == recorded
    from_copy = LLMClient(make_provider(f"replay:{copy}"), retries=0)
    assert [_ask(from_copy, q) for q in ROUNDS] == recorded
    # chained into itself (a run spread over sessions): nothing replayed is appended again
    model = tmp_path / "model.py"
    model.write_text("import sys; sys.stdin.read(); print('answer from the live model')")
    itself = LLMClient(make_provider(f"replay:{t}|cmd:{sys.executable} {model}"), retries=0, transcript=t)
    assert [_ask(itself, q) for q in ROUNDS + ["round 4"]] == recorded + ["answer from the live model\n"]
    assert len(t.read_text().splitlines()) == 4


def test_a_replay_that_runs_out_adds_no_line_to_its_own_transcript(tmp_path: Path) -> None:
    t = tmp_path / "t.jsonl"
    _record(t)
    client = LLMClient(make_provider(f"replay:{t}"), retries=0, transcript=t)
    assert [_ask(client, q) for q in ROUNDS + ["round 4"]] == ["answer to round 1", None, "answer to round 3", None]
    assert len(t.read_text().splitlines()) == 3


def test_an_older_transcript_without_error_lines_replays_as_before(tmp_path: Path) -> None:
    t = tmp_path / "old.jsonl"
    t.write_text("".join(json.dumps({"provider": "scripted", "model": "m", "messages": [], "response": r}) + "\n"
                         for r in ["A", "B"]))
    replayed = LLMClient(make_provider(f"replay:{t}"), retries=0)
    assert [_ask(replayed, q) for q in ROUNDS] == ["A", "B", None]


def test_a_recorded_error_text_is_redacted(tmp_path: Path, monkeypatch) -> None:
    secret = "tok-Replay-0123456789abcdef"
    monkeypatch.setenv("MY_REPLAY_TOKEN", secret)
    t = tmp_path / "t.jsonl"

    def script(n: int, messages: list[Message]) -> str:
        raise LLMError(f"upstream refused token {secret}")

    with pytest.raises(LLMError):
        LLMClient(ScriptedProvider(script), transcript=t, retries=0).complete([Message("user", "q")])
    assert secret not in t.read_text() and "[REDACTED]" in t.read_text()


def test_a_question_that_differs_from_the_recorded_one_is_logged_once(tmp_path: Path, caplog) -> None:
    t = tmp_path / "t.jsonl"
    recorder = LLMClient(ScriptedProvider(lambda n, m: f"answer to: {m[-1].content}"), transcript=t)
    for q in ["Q1: tune the GEMM kernel", "Q2: tune the GEMM again", "Q3: once more"]:
        recorder.complete([Message("user", q)])
    same = LLMClient(make_provider(f"replay:{t}"))
    with caplog.at_level(logging.WARNING, logger="kerntune.llm"):
        for q in ["Q1: tune the GEMM kernel", "Q2: tune the GEMM again", "Q3: once more"]:
            same.complete([Message("user", q)])
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    other = LLMClient(make_provider(f"replay:{t}"))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kerntune.llm"):
        answers = [other.complete([Message("user", q)]).text
                   for q in ["Q1: tune the GEMM kernel", "Qy: tune the ATTENTION kernel", "Qz: else"]]
    # not refused: benchmark proxies replay answers on changed histories on purpose
    assert answers == ["answer to: Q1: tune the GEMM kernel", "answer to: Q2: tune the GEMM again",
                       "answer to: Q3: once more"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "#2" in warnings[0] and str(t) in warnings[0], warnings
    # a new run on the same provider (a comparison's next repeat) is told again
    caplog.clear()
    again = other.for_new_run()
    with caplog.at_level(logging.WARNING, logger="kerntune.llm"):
        again.complete([Message("user", "Qx: another kernel")])
    assert len([r for r in caplog.records if r.levelno == logging.WARNING and "#1" in r.getMessage()]) == 1


def test_a_hand_written_error_line_of_the_wrong_type_is_one_line(tmp_path: Path) -> None:
    from kerntune.errors import KerntuneError

    t = tmp_path / "t.jsonl"
    t.write_text(json.dumps({"error": {"code": 5}}) + "\n")
    with pytest.raises(KerntuneError, match="line 1"):
        make_provider(f"replay:{t}")


def test_a_failed_call_of_a_real_command_is_replayed_in_its_place(tmp_path: Path) -> None:
    """End to end with a ``cmd:`` model that fails its second call (exit 3)."""
    count = tmp_path / "count"
    count.write_text("0")
    model = tmp_path / "model.py"
    model.write_text(textwrap.dedent(f"""
        import pathlib, sys
        sys.stdin.read()
        p = pathlib.Path({str(count)!r}); n = int(p.read_text()) + 1; p.write_text(str(n))
        if n == 2:
            sys.stderr.write("model crashed\\n"); sys.exit(3)
        print("answer", n)
    """))
    t = tmp_path / "t.jsonl"
    live = LLMClient(make_provider(f"cmd:{sys.executable} {model}"), transcript=t, retries=0)
    recorded = [_ask(live, q) for q in ROUNDS]
    assert recorded == ["answer 1\n", None, "answer 3\n"]
    replayed = LLMClient(make_provider(f"replay:{t}"), retries=0)
    assert [_ask(replayed, q) for q in ROUNDS] == recorded
