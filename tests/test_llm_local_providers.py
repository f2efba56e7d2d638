"""cmd:, files: and replay: providers with real subprocesses and real files."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kerntune.errors import KerntuneError
from kerntune.llm import LLMClient, LLMError, Message, make_provider
from kerntune.llm.providers import resolve_auto

SCHEMA = {"type": "object", "properties": {"configs": {"type": "array"}}, "required": ["configs"]}
ANSWER = {"configs": [{"reasoning": "wider tiles", "config": {"BM": 128}}]}
MSGS = [Message("system", "You tune kernels."), Message("user", "Propose configs for matmul.")]


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "model.py"
    path.write_text(textwrap.dedent(body))
    return f"{sys.executable} {path}"


def _counting_model(tmp_path: Path) -> tuple[str, Path]:
    """A ``cmd:`` model whose n-th answer proposes BM = 16 n; the file it returns counts its calls."""
    answers = tmp_path / "answers.txt"
    answers.write_text("0")
    cmd = _script(tmp_path, f"""
        import sys, json, pathlib
        sys.stdin.read()
        p = pathlib.Path({str(answers)!r}); n = int(p.read_text()) + 1; p.write_text(str(n))
        print(json.dumps({{"configs": [{{"config": {{"BM": 16 * n}}}}]}}))
    """)
    return cmd, answers


def test_cmd_sends_the_prompt_on_stdin_and_reads_stdout(tmp_path) -> None:
    cmd = _script(tmp_path, f"""
        import sys, json, pathlib
        pathlib.Path({str(tmp_path / 'seen.md')!r}).write_text(sys.stdin.read())
        print("Here you go:\\n```json\\n" + json.dumps({ANSWER!r}) + "\\n```")
    """)
    resp = LLMClient(make_provider(f"cmd:{cmd}")).complete(MSGS, schema=SCHEMA)
    assert resp.parsed == ANSWER
    seen = (tmp_path / "seen.md").read_text()
    assert "Propose configs for matmul." in seen and '"required"' in seen


def test_cmd_timeout_and_failure_are_clear(tmp_path) -> None:
    slow = _script(tmp_path, "import time; time.sleep(5)")
    client = LLMClient(make_provider(f"cmd:{slow}"), retries=1, timeout=0.5, backoff_base=0.01)
    with pytest.raises(LLMError, match="gave up after 2 attempts.*no answer within 0.5 s"):
        client.complete(MSGS)
    failing = _script(tmp_path, "import sys; print('quota exceeded', file=sys.stderr); sys.exit(3)")
    with pytest.raises(LLMError, match="exited with 3: quota exceeded"):
        LLMClient(make_provider(f"cmd:{failing}")).complete(MSGS)


def test_files_provider_is_answered_by_a_second_process(tmp_path) -> None:
    exchange = tmp_path / "exchange"
    answerer = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import json, pathlib, time
        d = pathlib.Path({str(exchange)!r})
        deadline = time.time() + 30
        while time.time() < deadline:
            p = d / "0001.prompt.md"
            if p.exists() and (d / "0001.schema.json").exists():
                assert "Propose configs" in p.read_text()
                tmp = d / "0001.tmp"
                tmp.write_text(json.dumps({ANSWER!r}))
                tmp.rename(d / "0001.response.json")
                break
            time.sleep(0.05)
    """)])
    try:
        resp = LLMClient(make_provider(f"files:{exchange}"), timeout=30).complete(MSGS, schema=SCHEMA)
    finally:
        answerer.wait(timeout=30)
    assert answerer.returncode == 0
    assert resp.parsed == ANSWER
    assert sorted(p.name for p in exchange.iterdir()) == ["0001.prompt.md", "0001.response.json",
                                                          "0001.schema.json"]


def test_files_provider_refuses_a_response_that_leads_outside_its_directory(tmp_path) -> None:
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read me")
    (exchange / "0001.response.md").symlink_to(secret)
    with pytest.raises(LLMError, match="outside"):
        LLMClient(make_provider(f"files:{exchange}"), retries=0, timeout=2).complete(MSGS)


def test_replay_answers_from_a_recorded_transcript_in_order(tmp_path) -> None:
    cmd, _ = _counting_model(tmp_path)
    transcript = tmp_path / "t.jsonl"
    live = LLMClient(make_provider(f"cmd:{cmd}"), transcript=transcript)
    first = [live.complete(MSGS, schema=SCHEMA).parsed for _ in range(3)]
    replay = LLMClient(make_provider(f"replay:{transcript}"))
    again = [replay.complete(MSGS, schema=SCHEMA).parsed for _ in range(3)]
    assert again == first and first[0] != first[1]
    with pytest.raises(LLMError, match="no answer #4"):
        replay.complete(MSGS)


def test_replay_then_a_live_provider_resumes_where_the_transcript_ends(tmp_path) -> None:
    """``replay:FILE|SPEC``: the recorded answers first, in order, then the live provider, whose
    answers the new transcript records after the replayed ones (so the next resume replays all)."""
    cmd, answers = _counting_model(tmp_path)
    first = tmp_path / "first.jsonl"
    live = LLMClient(make_provider(f"cmd:{cmd}"), transcript=first)
    recorded = [live.complete(MSGS, schema=SCHEMA).parsed for _ in range(2)]
    assert answers.read_text() == "2"
    second = tmp_path / "second.jsonl"
    resumed = LLMClient(make_provider(f"replay:{first}|cmd:{cmd}"), transcript=second)
    got = [resumed.complete(MSGS, schema=SCHEMA).parsed for _ in range(3)]
    assert got[:2] == recorded and answers.read_text() == "3"  # only the third question was asked
    assert got[2] == {"configs": [{"config": {"BM": 48}}]}
    again = LLMClient(make_provider(f"replay:{second}"))
    assert [again.complete(MSGS, schema=SCHEMA).parsed for _ in range(3)] == got
    with pytest.raises(KerntuneError, match="unknown LLM provider"):
        make_provider(f"replay:{first}|nosuch:thing")


def test_auto_prefers_the_environment_in_the_documented_order(monkeypatch) -> None:
    for var in ("KERNTUNE_LLM", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr("kerntune.llm.providers._ollama_answers", lambda *a, **k: False)
    assert resolve_auto().spec == "local:"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "x" * 20)
    assert resolve_auto().spec.startswith("anthropic:")
    monkeypatch.setenv("OPENAI_API_KEY", "y" * 20)
    assert resolve_auto().spec.startswith("openai:")
    monkeypatch.setenv("KERNTUNE_LLM", "replay:/tmp/t.jsonl")
    choice = resolve_auto()
    assert choice.spec == "replay:/tmp/t.jsonl" and "KERNTUNE_LLM" in choice.why


def test_bad_specs_are_user_errors() -> None:
    with pytest.raises(KerntuneError, match="unknown LLM provider 'gpt'"):
        make_provider("gpt:4")
    with pytest.raises(KerntuneError, match="bad --llm spec"):
        make_provider("openai")


def test_replay_chained_into_its_own_transcript_appends_only_the_new_answers(tmp_path) -> None:
    """``replay:T|SPEC`` with the transcript going to T itself (a run spread over sessions): the
    replayed answers were appended to T again, and the next session replayed round 1's answer in
    round 5."""
    cmd, answers = _counting_model(tmp_path)
    t = tmp_path / "t.jsonl"
    first = LLMClient(make_provider(f"cmd:{cmd}"), transcript=t)
    recorded = [first.complete(MSGS, schema=SCHEMA).parsed for _ in range(2)]
    again = LLMClient(make_provider(f"replay:{t}|cmd:{cmd}"), transcript=t)
    got = [again.complete(MSGS, schema=SCHEMA).parsed for _ in range(3)]
    assert got[:2] == recorded and answers.read_text() == "3"
    assert len(t.read_text().splitlines()) == 3
    third = LLMClient(make_provider(f"replay:{t}"))
    assert [third.complete(MSGS, schema=SCHEMA).parsed for _ in range(3)] == got


@pytest.mark.parametrize("line", ['{"response": {"configs": []}}', '{"response": "{}", "model": 5}',
                                  '{"response": "{}", "usage": {"input_tokens": "12"}}'])
def test_a_transcript_line_of_the_wrong_types_is_one_line(tmp_path, line: str) -> None:
    t = tmp_path / "t.jsonl"
    t.write_text(line + "\n")
    with pytest.raises(KerntuneError, match="line 1"):   # make_provider says an unusable spec in one line
        make_provider(f"replay:{t}")


def test_a_files_request_a_killed_run_left_is_taken_up_with_its_answer(tmp_path) -> None:
    """kerntune killed while it waited on 0001; the person answered 0001 meanwhile; the resumed run asks
    the same: it takes that answer instead of writing the same question again as 0002 and waiting."""
    exchange = tmp_path / "ex"
    with pytest.raises(LLMError):
        LLMClient(make_provider(f"files:{exchange}"), retries=0, timeout=0.5).complete(MSGS, schema=SCHEMA)
    assert (exchange / "0001.prompt.md").exists()
    (exchange / "0001.response.json").write_text(json.dumps({"configs": [{"config": {"BM": 16}}]}))
    resp = LLMClient(make_provider(f"files:{exchange}"), retries=0, timeout=5).complete(MSGS, schema=SCHEMA)
    assert resp.parsed == {"configs": [{"config": {"BM": 16}}]}
    assert not (exchange / "0002.prompt.md").exists()
    other = [Message("user", "another question")]
    with pytest.raises(LLMError):   # a different question still gets a number of its own
        LLMClient(make_provider(f"files:{exchange}"), retries=0, timeout=0.5).complete(other)
    assert (exchange / "0002.prompt.md").exists()


def test_a_cmd_process_that_cannot_be_reaped_is_a_transient_did_not_exit(tmp_path, monkeypatch) -> None:
    """end_group gives up reaping a process stuck in the kernel (D state): its returncode stays None,
    which once read as "cmd: exited with None"."""
    from kerntune.llm.providers import local
    from kerntune.llm.types import TransientError

    ended: list[subprocess.Popen] = []
    monkeypatch.setattr(local, "end_group", lambda proc, timeout=5.0: ended.append(proc) or False)  # reaps nothing
    cmd = _script(tmp_path, f"import sys, json; sys.stdin.read(); print(json.dumps({ANSWER!r}))")
    try:
        with pytest.raises(TransientError, match="cmd: did not exit"):
            make_provider(f"cmd:{cmd}").send(MSGS, SCHEMA, 0.0, 100, 10.0)
    finally:
        for proc in ended:
            proc.wait(10)
    assert ended and ended[0].returncode == 0


def test_an_embedded_call_that_waited_for_an_abandoned_one_times_out_as_transient() -> None:
    """The embedded model runs one call at a time; a call that waited for an earlier, abandoned one and then
    ran out of its timeout said "no answer within N s on this machine's cores" (not retried): the wait was
    not the machine's speed.  A fake llama stands in for the model."""
    import threading
    import time

    from kerntune.llm import Message
    from kerntune.llm.providers.embedded import LocalModelProvider
    from kerntune.llm.types import TransientError

    class FakeLlama:
        n_tokens = 10

        def create_chat_completion(self, **kwargs):  # type: ignore[no-untyped-def]
            for _ in range(30):
                time.sleep(0.05)
                yield {"choices": [{"delta": {"content": "x"}, "finish_reason": None}]}

    provider = LocalModelProvider.__new__(LocalModelProvider)  # no model file: what __init__ sets
    provider.model, provider.llm = "fake", FakeLlama()
    provider._busy, provider._cancel = threading.Lock(), threading.Event()
    provider._busy.acquire()  # an earlier call still running
    threading.Timer(1.0, provider._busy.release).start()
    with pytest.raises(TransientError, match="waiting for an earlier call"):
        provider.send([Message("user", "hi")], None, 0.0, 30, 1.8)
