"""The response cache: what it keeps (no key in plain text), what it is keyed by (the server and
max_tokens too), and what happens when it cannot be written (a warning, never a lost answer).

Real OpenAI-compatible servers on 127.0.0.1 (``http.server``), driven through the official SDK."""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("openai")

from kerntune.llm import LLMClient, Message  # noqa: E402
from kerntune.llm.providers.http_sdk import OpenAIProvider  # noqa: E402
from llm_servers import ScriptedServer  # noqa: E402

KEY = "sk-fixes-Cache-0123456789abcdefXYZ"
MSGS = [Message("user", "Propose configs for matmul.")]


class _EchoKey(BaseHTTPRequestHandler):
    """Answers every chat completion with the Authorization header it was sent (a proxy that echoes it)."""

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server API
        self.rfile.read(int(self.headers.get("content-length") or 0))
        text = f"sent {self.headers.get('Authorization')} " + '{"configs": []}'
        data = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": text}}],
                           "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def echo_server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _EchoKey)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_an_echoed_key_is_not_written_to_the_cache_in_plain_text(tmp_path: Path, echo_server: str) -> None:
    cache = tmp_path / "cache"
    client = LLMClient(OpenAIProvider("m", base_url=echo_server, api_key=KEY), cache_dir=cache)
    first = client.complete(MSGS, temperature=0)
    assert KEY in first.text  # the server did echo it: the test is meaningful
    files = list(cache.glob("*.json"))
    assert files, "nothing was cached"
    for f in files:
        assert KEY not in f.read_text() and KEY[3:] not in f.read_text(), f"{f.name} holds the key"
    again = LLMClient(OpenAIProvider("m", base_url=echo_server, api_key=KEY), cache_dir=cache)
    hit = again.complete(MSGS, temperature=0)
    assert hit.cached and KEY not in hit.text and "[REDACTED]" in hit.text


def test_two_servers_serving_a_model_of_the_same_name_do_not_share_cache_entries(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with ScriptedServer("openai", [("ok", "answer from server A")] * 3) as a, \
            ScriptedServer("openai", [("ok", "answer from server B")] * 3) as b:
        on_a = LLMClient(OpenAIProvider("llama3", base_url=a.url, api_key="k"), cache_dir=cache)
        on_b = LLMClient(OpenAIProvider("llama3", base_url=b.url, api_key="k"), cache_dir=cache)
        assert on_a.complete(MSGS, temperature=0).text == "answer from server A"
        from_b = on_b.complete(MSGS, temperature=0)
        assert from_b.text == "answer from server B" and not from_b.cached
        assert len(b.requests) == 1
        # the same server, the same question: a hit
        assert on_a.complete(MSGS, temperature=0).cached and len(a.requests) == 1


def test_max_tokens_is_part_of_the_cache_key(tmp_path: Path) -> None:
    with ScriptedServer("openai", [("ok", "a long answer"), ("ok", "a cut answer")]) as srv:
        client = LLMClient(OpenAIProvider("m", base_url=srv.url, api_key="k"), cache_dir=tmp_path / "cache")
        assert client.complete(MSGS, temperature=0, max_tokens=4096).text == "a long answer"
        short = client.complete(MSGS, temperature=0, max_tokens=5)
        assert short.text == "a cut answer" and not short.cached and len(srv.requests) == 2
        assert srv.requests[1]["body"]["max_tokens"] == 5
        assert client.complete(MSGS, temperature=0, max_tokens=4096).cached


def test_a_cache_folder_that_cannot_be_written_costs_a_warning_not_the_answer(tmp_path: Path, caplog) -> None:
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the cache folder should be")
    with ScriptedServer("openai", [("ok", '{"configs": []}')]) as srv:
        client = LLMClient(OpenAIProvider("m", base_url=srv.url, api_key="k"), cache_dir=blocked)
        with caplog.at_level(logging.WARNING, logger="kerntune.llm"):
            resp = client.complete(MSGS, temperature=0)
    assert resp.text == '{"configs": []}' and client.calls == 1
    assert any("cache" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert blocked.read_text() == "a file where the cache folder should be"


def test_a_cache_file_that_cannot_be_written_into_its_folder_costs_a_warning(tmp_path: Path, caplog) -> None:
    """The folder is there, but the file's place is taken by a folder: os.replace fails."""
    cache = tmp_path / "cache"
    with ScriptedServer("openai", [("ok", "first"), ("ok", "second")]) as srv:
        client = LLMClient(OpenAIProvider("m", base_url=srv.url, api_key="k"), cache_dir=cache)
        assert client.complete(MSGS, temperature=0).text == "first"
        (entry,) = cache.glob("*.json")
        entry.unlink()
        entry.mkdir()
        (entry / "x").write_text("keeps the folder non-empty")
        other = LLMClient(OpenAIProvider("m", base_url=srv.url, api_key="k"), cache_dir=cache)
        with caplog.at_level(logging.WARNING, logger="kerntune.llm"):
            assert other.complete(MSGS, temperature=0).text == "second"
    assert not list(cache.glob("*.part")), "a half-written cache file was left behind"
    assert any("cache" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
