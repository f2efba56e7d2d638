"""Small real HTTP servers on 127.0.0.1 that speak the OpenAI chat-completions
and Anthropic Messages protocols, answering from a script of behaviours.

Tests drive them through the official SDKs, so the code paths are the ones
users run.  Each behaviour is consumed by one request:
  ("ok", text)                       a normal answer (usage included)
  ("status", code, headers, body)    an HTTP error
  ("hang", seconds)                  no answer for that long
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ScriptedServer:
    def __init__(self, protocol: str, script: list[tuple]) -> None:
        self.protocol = protocol
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with server.lock:
                    server.requests.append({"path": self.path, "body": body, "time": time.monotonic(),
                                            "headers": {k.lower(): v for k, v in self.headers.items()}})
                    step = server.script.pop(0) if server.script else ("ok", "{}")
                if step[0] == "hang":
                    time.sleep(step[1])
                    return
                if step[0] == "status":
                    _, code, headers, payload = step
                    self._reply(code, payload, headers)
                    return
                self._reply(200, server.answer(step[1], body))

            def _reply(self, code: int, payload: Any, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(code)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def answer(self, text: str, request: dict[str, Any]) -> dict[str, Any]:
        if self.protocol == "anthropic":
            return {"id": "msg_1", "type": "message", "role": "assistant", "model": request.get("model", "m"),
                    "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                    "stop_sequence": None, "usage": {"input_tokens": 11, "output_tokens": 7}}
        return {"id": "chatcmpl-1", "object": "chat.completion", "created": int(time.time()),
                "model": request.get("model", "m"),
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}" + ("/v1" if self.protocol == "openai" else "")

    def __enter__(self) -> "ScriptedServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
