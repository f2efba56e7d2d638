"""Model providers against a hostile side (issue 22, items 1, 2, 5-9, 11): real files swapped
under the `files:` provider by a second process, real `cmd:` programs that print bytes, print
forever or leave grandchildren, and real loopback HTTP servers that stall or echo the key."""

from __future__ import annotations

import base64
import json
import os
import resource
import subprocess
import sys
import textwrap
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any, Iterator

import pytest

from kerntune.llm import LLMClient, LLMError, Message, make_provider
from kerntune.llm.providers.http_sdk import OllamaProvider
from llm_servers import ScriptedServer
from scripted import synthetic_evaluator

ROOT = Path(__file__).resolve().parent.parent
MSGS = [Message("user", "Propose configs")]
SCHEMA = {"type": "object", "properties": {"configs": {"type": "array"}}, "required": ["configs"]}
ANSWER = {"configs": [{"config": {"BM": 64}}]}
SECRET = "the-contents-of-a-private-file-3b9f"


def _helper(*parts: str) -> subprocess.Popen:
    """A second process acting on the exchange folder (a person, an agent, an attacker)."""
    return subprocess.Popen([sys.executable, "-c", "\n".join(textwrap.dedent(p) for p in parts)])


def _wait_prompt(d: Path, n: str = "0001") -> str:
    return f"""
        import json, os, pathlib, time
        d = pathlib.Path({str(d)!r})
        deadline = time.time() + 30
        while not (d / "{n}.prompt.md").exists() and time.time() < deadline:
            time.sleep(0.01)
    """


# -- item 1: files: reads nothing outside its folder ----------------------------------------------------------
@pytest.mark.parametrize("swap", ["symlink", "hardlink"])
def test_files_response_swapped_for_a_link_after_it_appeared_is_never_read(tmp_path: Path, swap: str) -> None:
    """The attacker writes a harmless answer between two polls of the provider (every 0.2 s from
    the moment the prompt was written), then swaps it for a link after the next poll has seen it:
    inside the window a reader that checks a name and reads the name later leaves open.  Poll
    times drift a little, so the symbolic link is tried four times."""
    secret = tmp_path / "private.txt"
    secret.write_text(SECRET)
    for attempt in range(4 if swap == "symlink" else 1):
        exchange = tmp_path / f"exchange{attempt}"
        exchange.mkdir()
        link = "os.symlink(secret, tmp)" if swap == "symlink" else "os.link(secret, tmp)"
        attacker = _helper(_wait_prompt(exchange), f"""
            secret = {str(secret)!r}
            t0 = (d / "0001.prompt.md").stat().st_mtime
            time.sleep(max(t0 + 0.25 - time.time(), 0))
            (d / "0001.response.txt").write_text("no json here, please repair")   # harmless when checked
            time.sleep(max(t0 + 0.5 - time.time(), 0))
            tmp = str(d / "swap.tmp")
            {link}
            os.replace(tmp, d / "0001.response.txt")                              # then a link
        """)
        try:
            with pytest.raises(LLMError):
                LLMClient(make_provider(f"files:{exchange}"), retries=0, timeout=2).complete(MSGS, schema=SCHEMA)
        finally:
            attacker.wait(30)
        for p in exchange.iterdir():
            if p.is_file() and not p.is_symlink() and p.name != "0001.response.txt":
                assert SECRET not in p.read_text(), f"{p.name} holds the private file's contents"
    assert secret.read_text() == SECRET


# -- item 9: files: takes complete answers, keeps the pending request, ignores stale ones -----------------------
def test_files_response_created_empty_and_filled_later_is_read_once_complete(tmp_path: Path) -> None:
    exchange = tmp_path / "exchange"
    person = _helper(_wait_prompt(exchange), f"""
        p = d / "0001.response.json"
        p.write_text("")                          # the editor creates the file
        time.sleep(0.6)
        p.write_text('{{"configs": [')             # half typed, saved
        time.sleep(0.6)
        p.write_text(json.dumps({ANSWER!r}))       # done
    """)
    try:
        resp = LLMClient(make_provider(f"files:{exchange}"), retries=0, timeout=20).complete(MSGS, schema=SCHEMA)
    finally:
        person.wait(30)
    assert resp.parsed == ANSWER and not resp.repaired
    assert not (exchange / "0002.prompt.md").exists(), "a partial answer was taken and sent back for repair"


def test_files_late_answer_to_a_timed_out_request_is_still_taken(tmp_path: Path) -> None:
    exchange = tmp_path / "exchange"
    person = _helper(_wait_prompt(exchange), f"""
        time.sleep(1.2)                            # after the first timeout (0.5 s)
        (d / "x.tmp").write_text(json.dumps({ANSWER!r}))
        os.replace(d / "x.tmp", d / "0001.response.json")
    """)
    try:
        client = LLMClient(make_provider(f"files:{exchange}"), retries=5, timeout=0.5, backoff_base=0.05)
        resp = client.complete(MSGS, schema=SCHEMA)
    finally:
        person.wait(30)
    assert resp.parsed == ANSWER
    assert sorted(p.name for p in exchange.iterdir()) == ["0001.prompt.md", "0001.response.json",
                                                          "0001.schema.json"], "the same question was re-numbered"


def test_files_response_under_the_number_before_it_was_asked_is_ignored(tmp_path: Path) -> None:
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    (exchange / "0001.response.json").write_text(json.dumps({"configs": [{"config": {"BM": 16}}]}))  # stale
    person = _helper(_wait_prompt(exchange), f"""
        time.sleep(0.5)
        (d / "x.tmp").write_text(json.dumps({ANSWER!r}))
        os.replace(d / "x.tmp", d / "0001.response.json")
    """)
    try:
        resp = LLMClient(make_provider(f"files:{exchange}"), retries=0, timeout=20).complete(MSGS, schema=SCHEMA)
    finally:
        person.wait(30)
    assert resp.parsed == ANSWER


# -- items 5-7: cmd: ---------------------------------------------------------------------------------------
def _cmd(tmp_path: Path, body: str, name: str = "model.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return f"cmd:{sys.executable} {path}"


def test_cmd_output_that_is_not_utf8_is_decoded_not_fatal(tmp_path: Path) -> None:
    spec = _cmd(tmp_path, f"""
        import json, sys
        sys.stdin.read()
        sys.stdout.buffer.write(b"\\xff\\xfe\\x80 noise " + json.dumps({ANSWER!r}).encode() + b" \\xc3")
    """)
    resp = LLMClient(make_provider(spec), retries=0, timeout=30).complete(MSGS, schema=SCHEMA)
    assert resp.parsed == ANSWER and "\ufffd" in resp.text


def test_cmd_printing_forever_is_cut_at_the_answer_cap_in_bounded_memory(tmp_path: Path) -> None:
    spec = _cmd(tmp_path, """
        import sys
        sys.stdin.read()
        block = "x" * 65536
        while True:
            sys.stdout.write(block)
    """)
    # The client runs in a child under a 1 GiB address-space limit: reading the output whole
    # (about 1 GB/s from a pipe) would end it with MemoryError long before the 20 s timeout.
    code = textwrap.dedent(f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        from kerntune.llm import LLMClient, LLMError, Message, make_provider
        try:
            LLMClient(make_provider({spec!r}), retries=0, timeout=20).complete([Message("user", "hi")])
        except LLMError as exc:
            print("LLMError:", exc)
    """)
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert "output over 1,000,000 characters" in out.stdout
    assert time.monotonic() - t0 < 15


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def test_cmd_timeout_ends_the_whole_process_group_grandchildren_too(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = tmp_path / "model.sh"
    script.write_text(f"for i in 1 2 3 4 5; do sleep 300 & echo $! >> {pids}; done\nsleep 300\n")
    with pytest.raises(LLMError, match="no answer within 1 s"):
        LLMClient(make_provider(f"cmd:bash {script}"), retries=0, timeout=1).complete(MSGS)
    children = [int(x) for x in pids.read_text().split()]
    assert len(children) == 5
    deadline = time.monotonic() + 5
    while any(map(_alive, children)) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [p for p in children if _alive(p)]
    for p in left:  # clean up after a failing run
        os.kill(p, 9)
    assert not left, f"{len(left)} grandchildren outlived the timeout"


# -- item 8: ollama: honours the timeout ------------------------------------------------------------------------
def test_ollama_gives_up_on_a_silent_server_at_the_timeout() -> None:
    with ScriptedServer("openai", [("hang", 20)] * 3) as srv:
        host = srv.url.removesuffix("/v1")
        client = LLMClient(OllamaProvider("qwen", base_url=host), retries=0, timeout=1.0)
        t0 = time.monotonic()
        with pytest.raises(LLMError, match="gave up"):
            client.complete(MSGS)
        assert time.monotonic() - t0 < 8
        assert srv.requests and srv.requests[0]["path"] == "/api/chat"


# -- item 2: a key echoed by a server in any field or spelling stays out of everything written -----------------
KEY = "kt-live-Key-0123456789abcdefXYZ"
SPELLINGS = [KEY, KEY.lower(), KEY.upper(), base64.b64encode(KEY.encode()).decode().rstrip("="),
             base64.b64encode(f"user:{KEY}".encode()).decode().rstrip("="), urllib.parse.quote(f"k={KEY}/")]


class _EchoHandler(BaseHTTPRequestHandler):
    """An OpenAI-compatible server that echoes the Authorization header in every field it can."""

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server API
        self.rfile.read(int(self.headers.get("content-length") or 0))
        auth = self.headers.get("authorization", "")
        token = auth.split(" ", 1)[-1]
        echo = " ".join([auth, token.lower(), token.upper(), base64.b64encode(token.encode()).decode(),
                         base64.b64encode(f"user:{token}".encode()).decode(), urllib.parse.quote(f"k={token}/")])
        answer = {"configs": [{"reasoning": f"as you asked, {echo}", "config": {"BM": 64, "W": 4, "bs": [32, 32]}}]}
        body = json.dumps({"id": echo, "object": "chat.completion", "created": 1, "model": f"echo {echo}",
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": json.dumps(answer)}}],
                           "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def echo_server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _EchoHandler)
    thread = Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()


def test_a_key_echoed_in_the_model_field_in_any_spelling_is_written_nowhere(tmp_path: Path, echo_server: str) -> None:
    synthetic_evaluator(tmp_path)
    db, transcript = tmp_path / "store.db", tmp_path / "t.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": KEY}
    proc = subprocess.run([sys.executable, "-m", "kerntune", "tune", "--replay", str(tmp_path / "synthetic.json"),
                           "--strategy", "llm", "--llm", "openai:m", "--llm-base-url", echo_server, "--budget", "10",
                           "--store", str(db), "--llm-transcript", str(transcript), "-o", "max_rounds=2"],
                          capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_id = proc.stdout.split("run id: ")[1].split()[0]
    md = subprocess.run([sys.executable, "-m", "kerntune", "report", run_id, "--store", str(db), "--md",
                         str(tmp_path / "r.md")], capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert md.returncode == 0, md.stderr[-3000:]
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".py"]
    assert transcript in written and any(p.suffix == ".html" for p in written)
    assert "[REDACTED]" in transcript.read_text()
    for p in written + [None]:
        text = (p.read_bytes().decode("utf-8", "replace") if p else proc.stdout + proc.stderr + md.stdout + md.stderr)
        for spelling in SPELLINGS:
            assert spelling not in text, f"{p or 'the output'} holds the key ({spelling[:12]}...)"


# -- item 11: the on-disk cache is what the README says it is -------------------------------------------------
def test_the_response_cache_is_the_python_apis_and_the_readme_says_so(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    sentence = readme[readme.index("Every call goes through one client"):][:900]
    assert "cache_dir" in sentence and "the CLI keeps no cache" in sentence
    count = tmp_path / "calls"
    spec = _cmd(tmp_path, f"""
        import json, pathlib, sys
        sys.stdin.read()
        p = pathlib.Path({str(count)!r}); p.write_text(str(int(p.read_text() if p.exists() else 0) + 1))
        print(json.dumps({ANSWER!r}))
    """)
    client = LLMClient(make_provider(spec), cache_dir=tmp_path / "cache")
    first = client.complete(MSGS, schema=SCHEMA, temperature=0)
    again = client.complete(MSGS, schema=SCHEMA, temperature=0)
    assert first.parsed == again.parsed == ANSWER and again.cached and count.read_text() == "1"
    client.complete(MSGS, schema=SCHEMA, temperature=0.7)          # only temperature-0 calls are cached
    assert count.read_text() == "2"
