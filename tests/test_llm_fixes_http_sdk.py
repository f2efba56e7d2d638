"""The openai: and ollama: providers against a real HTTP server on 127.0.0.1: OpenAI's reasoning models'
parameter rules, and network errors of an Ollama server that are no transport failure."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

pytest.importorskip("openai")
pytest.importorskip("ollama")

from kerntune.llm import LLMClient, LLMError, Message  # noqa: E402
from kerntune.llm.providers.http_sdk import OllamaProvider, OpenAIProvider  # noqa: E402

GOOD = json.dumps({"configs": [{"reasoning": "r", "config": {"BM": 64}}]})
SCHEMA = {"type": "object", "properties": {"configs": {"type": "array"}}, "required": ["configs"]}
MSGS = [Message("system", "You tune kernels."), Message("user", "Propose configs.")]


class Server:
    """A server whose first path segment picks a behaviour:
    /reasoning  an OpenAI reasoning model: 400 for max_tokens, and for a temperature other than 1
    /schema     400 for anything (a bad request that no parameter change cures)
    /gz         an Ollama answer whose header says gzip and whose body is not
    /redir      a redirect to itself, for ever
    Requests are recorded (path and JSON body)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                body = json.loads(raw or b"{}")
                server.requests.append({"path": self.path, "body": body})
                mode = self.path.split("//", 1)[-1].split("/", 2)[1] if "://" in self.path \
                    else self.path.strip("/").split("/")[0]
                if mode == "redir":
                    self._send(307, b"", [("location", self.path)])
                elif mode == "gz":
                    self._send(200, b"this is not gzip!!!!", [("content-encoding", "gzip")])
                elif mode == "schema":
                    self._error("Invalid schema for response_format 'answer'.", "response_format", "invalid_value")
                elif "max_tokens" in body:
                    self._error("Unsupported parameter: 'max_tokens' is not supported with this model. "
                                "Use 'max_completion_tokens' instead.", "max_tokens", "unsupported_parameter")
                elif body.get("temperature", 1) != 1:
                    self._error(f"Unsupported value: 'temperature' does not support {body['temperature']} with"
                                " this model. Only the default (1) value is supported.", "temperature",
                                "unsupported_value")
                else:
                    answer = {"id": "c", "object": "chat.completion", "created": 1, "model": "o3-mini",
                              "choices": [{"index": 0, "finish_reason": "stop",
                                           "message": {"role": "assistant", "content": GOOD}}],
                              "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}
                    self._send(200, json.dumps(answer).encode())

            def _error(self, message: str, param: str, code: str) -> None:
                error = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
                self._send(400, json.dumps({"error": error}).encode())

            def _send(self, status: int, data: bytes, headers: list[tuple[str, str]] = ()) -> None:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for key, value in headers:
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()


def _openai(url: str) -> LLMClient:
    return LLMClient(OpenAIProvider("o3-mini", base_url=url, api_key="k"), retries=2, backoff_base=0.01)


def test_a_reasoning_model_refusing_max_tokens_and_temperature_answers_and_the_change_is_kept(server: Server) -> None:
    """OpenAI's reasoning models (o1/o3/o4-mini/gpt-5) refuse max_tokens and a temperature of 0.7 with a
    400: every call failed and the whole llm run was fallback.  Now the refused parameter is changed
    (max_completion_tokens; the model's default temperature), the call sent again, and later calls
    start from the changed request."""
    client = _openai(server.url + "/reasoning/v1")
    first = client.complete(MSGS, schema=SCHEMA, temperature=0.7, max_tokens=300)
    assert first.parsed["configs"][0]["config"] == {"BM": 64}
    bodies = [r["body"] for r in server.requests]
    assert len(bodies) == 3
    # another OpenAI-compatible server (vLLM, llama.cpp) is sent max_tokens first: it may know no other
    assert bodies[0]["max_tokens"] == 300 and "max_completion_tokens" not in bodies[0]
    assert bodies[1]["max_completion_tokens"] == 300 and bodies[1]["temperature"] == 0.7
    assert "temperature" not in bodies[2] and "max_tokens" not in bodies[2]
    second = client.complete(MSGS, schema=SCHEMA, temperature=0.7, max_tokens=200)
    assert second.parsed["configs"] and second.attempts == 1
    assert len(server.requests) == 4
    assert server.requests[3]["body"].get("max_completion_tokens") == 200
    assert "temperature" not in server.requests[3]["body"] and "max_tokens" not in server.requests[3]["body"]


def test_openais_own_api_is_sent_max_completion_tokens_from_the_first_call(server: Server, monkeypatch) -> None:
    """max_tokens is deprecated on api.openai.com (and refused by its reasoning models): a call to
    OpenAI's own API uses max_completion_tokens at once.  The request reaches the local server as an
    HTTP proxy, so the SDK really addresses api.openai.com."""
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "https_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", server.url)
    client = LLMClient(OpenAIProvider("o3-mini", base_url="http://api.openai.com/v1", api_key="k"), retries=0)
    resp = client.complete(MSGS, schema=SCHEMA, temperature=1, max_tokens=100)
    assert resp.parsed["configs"] and len(server.requests) == 1
    assert server.requests[0]["path"].startswith("http://api.openai.com/")
    assert server.requests[0]["body"]["max_completion_tokens"] == 100 and "max_tokens" not in server.requests[0]["body"]


def test_a_400_that_names_no_refused_parameter_fails_the_call_at_once(server: Server) -> None:
    """Only a 400 that names max_tokens or temperature as unsupported is sent again; any other bad
    request fails as before, after one request."""
    with pytest.raises(LLMError, match="rejected with 400"):
        _openai(server.url + "/schema/v1").complete(MSGS)
    assert len(server.requests) == 1


def test_an_ollama_body_that_is_not_the_gzip_it_claims_fails_the_call_not_the_run(server: Server) -> None:
    """Content-Encoding: gzip over a body that is not: httpx.DecodingError, outside the errors caught,
    ended the whole run with a traceback.  Now the call fails (the round falls back), not retried:
    the server would answer the same."""
    client = LLMClient(OllamaProvider("qwen", base_url=server.url + "/gz"), retries=2, backoff_base=0.01)
    with pytest.raises(LLMError, match="DecodingError"):
        client.complete(MSGS)
    assert len(server.requests) == 1


def test_an_ollama_redirect_loop_fails_the_call_not_the_run(server: Server) -> None:
    """A redirect loop: httpx.TooManyRedirects ended the run with a traceback (`llm check` too).  Now
    the call fails, without the retries that would follow the same loop again."""
    client = LLMClient(OllamaProvider("qwen", base_url=server.url + "/redir"), retries=2, backoff_base=0.01)
    t0 = time.monotonic()
    with pytest.raises(LLMError, match="TooManyRedirects"):
        client.complete(MSGS)
    assert time.monotonic() - t0 < 10
    assert 1 < len(server.requests) <= 25  # one call's redirects (httpx follows 20), not three calls'
