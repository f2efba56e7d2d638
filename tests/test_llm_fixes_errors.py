"""Failed calls: their messages carry no secret (a ``cmd:`` model's stderr, ``kerntune llm check``'s
output), an out-of-quota 429 is not retried and says why, and a Retry-After given as a date is waited.

Real subprocesses for ``cmd:`` and the CLI; real HTTP servers on 127.0.0.1 through the OpenAI SDK."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import time
from email.utils import formatdate
from pathlib import Path

import pytest

import kerntune
from kerntune.llm import LLMClient, LLMError, Message, make_provider
from kerntune.llm.providers.base import Provider
from kerntune.llm.types import RawReply
from llm_servers import ScriptedServer

TOKEN = "tok-Fixes-Err-0123456789abcdefXYZ"   # not key-shaped: only the environment says it is secret
MSGS = [Message("user", "Propose configs for matmul.")]
CODE_ROOT = str(Path(kerntune.__file__).resolve().parent.parent)  # the kerntune under test, for subprocesses


def _leaky_model(tmp_path: Path) -> str:
    """A ``cmd:`` model that fails like curl does, quoting the header it sent on stderr."""
    script = tmp_path / "leak.py"
    script.write_text(textwrap.dedent("""
        import os, sys
        sys.stdin.read()
        sys.stderr.write("curl: (22) The requested URL returned error: 401 (sent Authorization: Bearer "
                         + os.environ["MY_LLM_TOKEN"] + ")\\n")
        sys.exit(22)
    """))
    return f"cmd:{sys.executable} {script}"


def test_a_cmd_models_stderr_puts_no_secret_into_the_error(tmp_path: Path, monkeypatch, caplog) -> None:
    monkeypatch.setenv("MY_LLM_TOKEN", TOKEN)
    transcript = tmp_path / "t.jsonl"
    client = LLMClient(make_provider(_leaky_model(tmp_path)), retries=0, transcript=transcript)
    with caplog.at_level(logging.DEBUG, logger="kerntune"), pytest.raises(LLMError) as info:
        client.complete(MSGS)
    assert "exited with 22" in str(info.value) and "Bearer" in str(info.value)
    assert TOKEN not in str(info.value) and "[REDACTED]" in str(info.value)
    assert TOKEN not in json.dumps(info.value.calls)
    assert TOKEN not in caplog.text
    assert TOKEN not in (transcript.read_text() if transcript.exists() else "")


class _Blurts(Provider):
    """A provider whose failure quotes a secret (an SDK's or a plugin's error text)."""

    name = "blurts"

    def send(self, messages, schema, temperature, max_tokens, timeout) -> RawReply:  # type: ignore[no-untyped-def]
        raise LLMError(f"blurts: upstream said: bad token {os.environ['MY_LLM_TOKEN']}")


def test_the_client_redacts_a_providers_error_before_raising_it(monkeypatch) -> None:
    monkeypatch.setenv("MY_LLM_TOKEN", TOKEN)
    with pytest.raises(LLMError) as info:
        LLMClient(_Blurts("m"), retries=0).complete(MSGS)
    assert TOKEN not in str(info.value) and "bad token [REDACTED]" in str(info.value)
    assert TOKEN not in json.dumps(info.value.calls)


def test_llm_check_prints_no_secret_from_a_failed_call(tmp_path: Path) -> None:
    env = {**os.environ, "MY_LLM_TOKEN": TOKEN, "PYTHONPATH": CODE_ROOT, "COLUMNS": "300"}
    env.pop("KERNTUNE_LLM", None)
    proc = subprocess.run([sys.executable, "-m", "kerntune", "llm", "check", "--llm", _leaky_model(tmp_path),
                           "--timeout", "30"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "no usable answer" in proc.stdout and "exited with 22" in proc.stdout, proc.stdout
    assert TOKEN not in proc.stdout and TOKEN not in proc.stderr
    assert "[REDACTED]" in proc.stdout  # printed as text, not swallowed as console markup


QUOTA = {"error": {"message": "You exceeded your current quota, please check your plan and billing details.",
                   "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}}


def test_an_out_of_quota_429_is_not_retried_and_says_why() -> None:
    pytest.importorskip("openai")
    from kerntune.llm.providers.http_sdk import OpenAIProvider

    with ScriptedServer("openai", [("status", 429, {}, QUOTA)] * 6) as srv:
        client = LLMClient(OpenAIProvider("m", base_url=srv.url, api_key="k"), backoff_base=0.01, timeout=10)
        with pytest.raises(LLMError) as info:
            client.complete(MSGS)
    assert len(srv.requests) == 1, "a permanent 429 was retried"
    assert "exceeded your current quota" in str(info.value) and "insufficient_quota" in str(info.value)


def test_an_ordinary_429_is_still_retried() -> None:
    pytest.importorskip("openai")
    from kerntune.llm.providers.http_sdk import OpenAIProvider

    slow = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}
    with ScriptedServer("openai", [("status", 429, {}, slow), ("ok", "fine")]) as srv:
        client = LLMClient(OpenAIProvider("m", base_url=srv.url, api_key="k"), backoff_base=0.01, timeout=10)
        assert client.complete(MSGS).text == "fine" and len(srv.requests) == 2


def test_a_retry_after_given_as_an_http_date_is_waited() -> None:
    pytest.importorskip("openai")
    from kerntune.llm.providers.http_sdk import OpenAIProvider

    slow = {"error": {"message": "slow down", "type": "requests"}}
    when = formatdate(time.time() + 3, usegmt=True)   # whole seconds: 2 to 3 s from now
    with ScriptedServer("openai", [("status", 429, {"retry-after": when}, slow), ("ok", "fine")]) as srv:
        client = LLMClient(OpenAIProvider("m", base_url=srv.url, api_key="k"), backoff_base=0.01, timeout=30)
        assert client.complete(MSGS).text == "fine"
        gap = srv.requests[1]["time"] - srv.requests[0]["time"]
    assert gap >= 1.5, f"retried after {gap:.2f} s, before the server's date"


def test_a_far_retry_after_date_is_capped_at_the_timeout() -> None:
    pytest.importorskip("openai")
    from kerntune.llm.providers.http_sdk import OpenAIProvider

    slow = {"error": {"message": "slow down", "type": "requests"}}
    when = formatdate(time.time() + 86400, usegmt=True)
    with ScriptedServer("openai", [("status", 429, {"retry-after": when}, slow), ("ok", "fine")]) as srv:
        client = LLMClient(OpenAIProvider("m", base_url=srv.url, api_key="k"), backoff_base=0.01, timeout=2)
        t0 = time.monotonic()
        assert client.complete(MSGS).text == "fine"
        gap = srv.requests[1]["time"] - srv.requests[0]["time"]
    assert 1.5 <= gap and time.monotonic() - t0 < 10
