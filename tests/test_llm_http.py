"""LLM providers over real HTTP on 127.0.0.1, through the official SDKs."""

from __future__ import annotations

import json
import logging
import time

import pytest

pytest.importorskip("openai")
pytest.importorskip("anthropic")

from kerntune.llm import LLMClient, LLMError, Message  # noqa: E402
from kerntune.llm.providers.http_sdk import AnthropicProvider, OpenAIProvider  # noqa: E402
from kerntune.store import Store  # noqa: E402
from llm_servers import ScriptedServer  # noqa: E402

SCHEMA = {"type": "object", "properties": {"configs": {"type": "array"}}, "required": ["configs"]}
GOOD = json.dumps({"configs": [{"reasoning": "r", "config": {"BM": 64}}]})
MSGS = [Message("system", "You tune kernels."), Message("user", "Propose configs.")]


def _client(server: ScriptedServer, protocol: str = "openai", **kw) -> LLMClient:
    provider = (OpenAIProvider("test-model", base_url=server.url, api_key="k") if protocol == "openai"
                else AnthropicProvider("test-model", base_url=server.url, api_key="k"))
    kw.setdefault("backoff_base", 0.05)
    return LLMClient(provider, **kw)


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_429_with_retry_after_is_honoured(protocol: str) -> None:
    script = [("status", 429, {"retry-after": "1"}, {"error": {"message": "slow down", "type": "rate_limit"}}),
              ("ok", GOOD)]
    with ScriptedServer(protocol, script) as srv:
        resp = _client(srv, protocol).complete(MSGS, schema=SCHEMA)
        gap = srv.requests[1]["time"] - srv.requests[0]["time"]
    assert resp.parsed["configs"][0]["config"] == {"BM": 64}
    assert len(srv.requests) == 2 and gap >= 0.95
    assert resp.attempts == 2


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_three_500s_then_success(protocol: str) -> None:
    err = ("status", 500, {}, {"error": {"message": "boom", "type": "server_error"}})
    with ScriptedServer(protocol, [err, err, err, ("ok", GOOD)]) as srv:
        resp = _client(srv, protocol, retries=3).complete(MSGS, schema=SCHEMA)
    assert len(srv.requests) == 4 and resp.attempts == 4
    assert resp.usage.input_tokens == 11 and resp.usage.output_tokens == 7
    assert resp.latency_s > 0


def test_hung_server_times_out_after_the_configured_retries() -> None:
    with ScriptedServer("openai", [("hang", 3.0)] * 3) as srv:
        client = _client(srv, retries=2, timeout=0.4)
        t0 = time.monotonic()
        with pytest.raises(LLMError, match="gave up after 3 attempts"):
            client.complete(MSGS)
        elapsed = time.monotonic() - t0
    assert len(srv.requests) == 3
    assert elapsed < 5.0


def test_malformed_json_triggers_exactly_one_repair_round() -> None:
    with ScriptedServer("openai", [("ok", "Sure: {'configs': [}"), ("ok", GOOD), ("ok", GOOD)]) as srv:
        resp = _client(srv).complete(MSGS, schema=SCHEMA)
    assert len(srv.requests) == 2
    assert resp.repaired and resp.parsed["configs"]
    repair_msgs = srv.requests[1]["body"]["messages"]
    assert "could not be used" in repair_msgs[-1]["content"]
    assert resp.usage.input_tokens == 22  # both calls counted


def test_validation_problems_also_use_the_single_repair_round() -> None:
    with ScriptedServer("openai", [("ok", GOOD), ("ok", GOOD)]) as srv:
        resp = _client(srv).complete(MSGS, schema=SCHEMA, validate=lambda v: ["BM: 64 is not allowed"])
    assert len(srv.requests) == 2
    assert "BM: 64 is not allowed" in srv.requests[1]["body"]["messages"][-1]["content"]
    assert resp.repaired


def test_structured_output_schema_is_sent_to_openai_compatible_servers() -> None:
    with ScriptedServer("openai", [("ok", GOOD)]) as srv:
        _client(srv).complete(MSGS, schema=SCHEMA)
    fmt = srv.requests[0]["body"]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"] == SCHEMA


def test_cache_answers_a_repeated_temperature_zero_call_without_a_request(tmp_path) -> None:
    with ScriptedServer("openai", [("ok", GOOD), ("ok", "different")]) as srv:
        client = _client(srv, cache_dir=tmp_path / "cache")
        a = client.complete(MSGS, schema=SCHEMA, temperature=0)
        b = client.complete(MSGS, schema=SCHEMA, temperature=0)
        c = client.complete(MSGS, schema=None, temperature=0.7)
    assert len(srv.requests) == 2
    assert b.cached and b.text == a.text and c.text == "different"


def test_api_key_never_reaches_store_transcript_or_logs(tmp_path, monkeypatch, caplog) -> None:
    key = "sk-kerntune-test-" + "Z9" * 20
    monkeypatch.setenv("OPENAI_API_KEY", key)
    store = Store(tmp_path / "k.db")
    run = store.create_run("tune")
    err = ("status", 503, {}, {"error": {"message": f"bad key {key}", "type": "server_error"}})
    leaky = json.dumps({"configs": [{"reasoning": f"I saw {key} in the prompt", "config": {"BM": 64}}]})
    caplog.set_level(logging.DEBUG)
    with ScriptedServer("openai", [err, ("ok", leaky)]) as srv:
        client = LLMClient(OpenAIProvider("test-model", base_url=srv.url), backoff_base=0.01,
                           transcript=tmp_path / "t.jsonl", store=store, run_id=run)
        client.complete([Message("user", f"my key is {key}")], schema=SCHEMA)
    assert srv.requests[0]["headers"].get("authorization") == f"Bearer {key}"  # it was really used
    store.close()
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path
    assert key not in caplog.text
    assert "[REDACTED]" in (tmp_path / "t.jsonl").read_text()


@pytest.mark.parametrize("value", ["-1", "nan", "1e400"])
def test_a_retry_after_that_is_no_usable_wait_falls_back_to_the_backoff(value: str) -> None:
    """A server's Retry-After of -1, nan or 1e400 once ended the run (ValueError / OverflowError from
    time.sleep, outside the errors a round survives)."""
    script = [("status", 429, {"retry-after": value}, {"error": {"message": "slow down", "type": "rate_limit"}}),
              ("ok", GOOD)]
    with ScriptedServer("openai", script) as srv:
        t0 = time.monotonic()
        resp = _client(srv).complete(MSGS, schema=SCHEMA)
    assert resp.parsed["configs"] and time.monotonic() - t0 < 5


def test_a_retry_after_longer_than_the_timeout_waits_the_timeout_at_most() -> None:
    """Retry-After: 86400 slept a day per attempt; a wait is bounded by the request's own timeout."""
    script = [("status", 429, {"retry-after": "86400"}, {"error": {"message": "come back tomorrow"}}), ("ok", GOOD)]
    with ScriptedServer("openai", script) as srv:
        t0 = time.monotonic()
        resp = _client(srv, timeout=0.5).complete(MSGS, schema=SCHEMA)
    assert resp.parsed["configs"] and time.monotonic() - t0 < 5


def test_a_lone_surrogate_in_an_answer_does_not_end_the_call() -> None:
    """An answer holding "\\ud800" (valid JSON escape, not UTF-8) that needs a repair: the repair request
    quotes it, and the SDK's UTF-8 encoding of it once raised outside LLMError, ending the run."""
    with ScriptedServer("openai", [("ok", "not json \ud800 {"), ("ok", GOOD)]) as srv:
        resp = _client(srv).complete(MSGS, schema=SCHEMA)
    assert resp.repaired and resp.parsed["configs"]


def test_a_dated_model_name_is_priced_by_its_longest_prefix() -> None:
    """OpenAI reports "gpt-4o-mini-2024-07-18": it was priced as gpt-4o (16.7x too high)."""
    from kerntune.llm.types import RawReply, Usage

    client = LLMClient(OpenAIProvider("gpt-4o-mini", base_url="http://127.0.0.1:9/v1", api_key="k"))
    cost = client._price(RawReply("{}", Usage(1_000_000, 1_000_000), "gpt-4o-mini-2024-07-18"))
    assert cost == pytest.approx(0.15 + 0.6)


def test_a_damaged_cache_file_is_a_miss(tmp_path) -> None:
    """A cache file cut short (a killed run) made every later call with that prompt raise JSONDecodeError."""
    with ScriptedServer("openai", [("ok", GOOD), ("ok", GOOD)]) as srv:
        client = _client(srv, cache_dir=tmp_path, cache=True)
        client.complete(MSGS, schema=SCHEMA)
        (cached,) = list(tmp_path.glob("*.json"))
        cached.write_text('{"text": "abc')
        resp = client.complete(MSGS, schema=SCHEMA)
    assert resp.parsed["configs"] and not resp.cached and len(srv.requests) == 2


def test_a_server_that_trickles_its_answer_is_cut_at_the_timeout() -> None:
    """The SDKs' timeout is per read: a server sending its answer a piece a second was waited for in full
    (12 s for a 3-s timeout); a request is now given up at the timeout (plus a grace) and retried."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    body = json.dumps({"id": "c", "object": "chat.completion", "created": 1, "model": "m",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": GOOD}}],
                       "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()

    class Trickle(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # noqa: ANN002
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server API
            self.rfile.read(int(self.headers["content-length"]))
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            step = max(1, len(body) // 12)
            for i in range(0, len(body), step):
                try:
                    self.wfile.write(body[i:i + step])
                    self.wfile.flush()
                except OSError:
                    return
                # a piece every 0.5 s: each read well inside the SDK's own 1-s read timeout (a 1-s gap raced
                # it on a loaded machine and the SDK's timeout answered first), the whole 6 s past the deadline
                time.sleep(0.5)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = LLMClient(OpenAIProvider("m", base_url=f"http://127.0.0.1:{server.server_address[1]}/v1",
                                          api_key="k"), retries=0)
        t0 = time.monotonic()
        with pytest.raises(LLMError, match="no whole answer within 1 s"):
            client.complete(MSGS, timeout=1.0)
        assert time.monotonic() - t0 < 6
    finally:
        server.shutdown()
