"""Secrets and sandboxing.

* API keys come from the environment or, when the variable is unset, from the system
  keyring (``keyring set kerntune OPENAI_API_KEY``).  The keyring here is a real keyring
  backend (a KeyringBackend subclass keeping passwords in a JSON file), selected the way
  users select one: ``keyring.set_keyring`` in process, ``PYTHON_KEYRING_BACKEND`` for
  the CLI.  The key must reach the server's Authorization header and nothing else:
  not the store, the transcript, the report, stdout or stderr — even when the server
  quotes it back in an error and the model echoes it in its reasons.
* Model output is never evaluated: Python, shell and template injections in reasons and
  config values leave a sentinel file uncreated.
* The ``files:`` provider never writes or reads outside its directory, whatever links
  a person or an agent plants in it.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Iterator

import pytest

pytest.importorskip("openai")
keyring = pytest.importorskip("keyring")

from keyring.backend import KeyringBackend  # noqa: E402

from kerntune.llm import LLMClient, LLMError, Message, make_provider  # noqa: E402
from kerntune.llm.providers import resolve_auto  # noqa: E402
from kerntune.llm.providers.http_sdk import AnthropicProvider, OpenAIProvider  # noqa: E402
from kerntune.llm.secrets import MASK, api_key, redact  # noqa: E402
from kerntune.run.search import RunOptions, run_search  # noqa: E402
from kerntune.store import Store  # noqa: E402
from kerntune.strategies import Budget  # noqa: E402
from llm_servers import ScriptedServer  # noqa: E402
from scripted import answer, synthetic_evaluator  # noqa: E402

TESTS = Path(__file__).resolve().parent
# Not shaped like an OpenAI key, so only the keyring path can redact it.
KEY = "kr-keyring-only-" + "3f9a" * 10
SCHEMA = {"type": "object", "properties": {"configs": {"type": "array"}}, "required": ["configs"]}


class FileKeyring(KeyringBackend):
    """A keyring backend that keeps passwords in the JSON file named by $KERNTUNE_TEST_KEYRING
    (a real backend for machines with no desktop keyring; for tests only)."""

    priority = 1  # type: ignore[assignment]

    def _load(self) -> dict[str, str]:
        path = Path(os.environ["KERNTUNE_TEST_KEYRING"])
        return json.loads(path.read_text()) if path.exists() else {}

    def get_password(self, service: str, username: str) -> str | None:
        return self._load().get(f"{service}/{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        data = self._load()
        data[f"{service}/{username}"] = password
        Path(os.environ["KERNTUNE_TEST_KEYRING"]).write_text(json.dumps(data))

    def delete_password(self, service: str, username: str) -> None:
        data = self._load()
        data.pop(f"{service}/{username}", None)
        Path(os.environ["KERNTUNE_TEST_KEYRING"]).write_text(json.dumps(data))


class BrokenKeyring(KeyringBackend):
    """A keyring that is there but fails (locked, D-Bus gone)."""

    priority = 1  # type: ignore[assignment]

    def get_password(self, service: str, username: str) -> str | None:
        raise keyring.errors.KeyringLocked("the keyring is locked")

    def set_password(self, service: str, username: str, password: str) -> None:
        raise keyring.errors.PasswordSetError("locked")

    def delete_password(self, service: str, username: str) -> None:
        raise keyring.errors.PasswordDeleteError("locked")


@pytest.fixture
def file_keyring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "KERNTUNE_LLM"):
        monkeypatch.delenv(var, raising=False)
    path = tmp_path / "keyring.json"
    monkeypatch.setenv("KERNTUNE_TEST_KEYRING", str(path))
    previous = keyring.get_keyring()
    keyring.set_keyring(FileKeyring())
    keyring.set_password("kerntune", "OPENAI_API_KEY", KEY)
    yield path
    keyring.set_keyring(previous)


def _files(root: Path) -> Iterator[Path]:
    return (p for p in root.rglob("*") if p.is_file())


# -- keys from the keyring ----------------------------------------------------------------------------
def test_a_key_in_the_keyring_is_sent_and_kept_out_of_store_transcript_and_logs(
        file_keyring: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert "OPENAI_API_KEY" not in os.environ and api_key("OPENAI_API_KEY") == KEY
    caplog.set_level(logging.DEBUG)
    store = Store(tmp_path / "k.db")
    run = store.create_run("tune")
    err = ("status", 503, {}, {"error": {"message": f"overloaded, key {KEY}", "type": "server_error"}})
    leaky = json.dumps({"configs": [{"reasoning": f"the key is {KEY}", "config": {"BM": 64}}]})
    with ScriptedServer("openai", [err, ("ok", leaky)]) as srv:
        provider = OpenAIProvider("test-model", base_url=srv.url)      # no api_key: the keyring's
        client = LLMClient(provider, backoff_base=0.01, transcript=tmp_path / "t.jsonl", store=store, run_id=run)
        resp = client.complete([Message("user", "Propose configs.")], schema=SCHEMA)
    assert [r["headers"].get("authorization") for r in srv.requests] == [f"Bearer {KEY}"] * 2
    assert KEY in resp.text                       # what the model said, in memory only
    store.close()
    for path in _files(tmp_path):
        if path != file_keyring:
            assert KEY.encode() not in path.read_bytes(), path
    assert "retry 1/" in caplog.text and KEY not in caplog.text   # every logger, the SDKs' debug output too
    assert MASK in (tmp_path / "t.jsonl").read_text()
    assert redact(f"x {KEY} y") == f"x {MASK} y"


def test_the_environment_wins_over_the_keyring(file_keyring: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "env-key-" + "7" * 20)
    with ScriptedServer("openai", [("ok", "{}")]) as srv:
        LLMClient(OpenAIProvider("test-model", base_url=srv.url)).complete([Message("user", "hi")])
    assert srv.requests[0]["headers"]["authorization"] == "Bearer env-key-" + "7" * 20


def test_anthropic_and_auto_find_keys_in_the_keyring(file_keyring: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kerntune.llm.providers._ollama_answers", lambda *a, **k: False)
    choice = resolve_auto()
    assert choice.spec.startswith("openai:") and "keyring" in choice.why
    keyring.delete_password("kerntune", "OPENAI_API_KEY")
    assert resolve_auto().spec == "local:"
    keyring.set_password("kerntune", "ANTHROPIC_API_KEY", KEY)
    assert resolve_auto().spec.startswith("anthropic:")
    with ScriptedServer("anthropic", [("ok", "{}")]) as srv:
        LLMClient(AnthropicProvider("test-model", base_url=srv.url)).complete([Message("user", "hi")])
    headers = srv.requests[0]["headers"]
    assert KEY in (headers.get("x-api-key"), headers.get("authorization", "").removeprefix("Bearer "))


def test_no_key_anywhere_and_a_broken_keyring_give_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "KERNTUNE_LLM_BASE_URL",
                "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    previous = keyring.get_keyring()
    keyring.set_keyring(BrokenKeyring())
    try:
        assert api_key("OPENAI_API_KEY") is None
        with pytest.raises(LLMError, match="set OPENAI_API_KEY, or `keyring set kerntune OPENAI_API_KEY`"):
            OpenAIProvider("gpt-4.1-mini")
        with pytest.raises(LLMError, match="keyring set kerntune ANTHROPIC_API_KEY"):
            AnthropicProvider("claude-sonnet-4-5")
    finally:
        keyring.set_keyring(previous)


def test_the_cli_without_any_key_says_where_to_put_one(tmp_path: Path) -> None:
    """One line and exit code 2 (it was a traceback); the null keyring backend is the
    documented way to turn the keyring lookup off."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "KERNTUNE_LLM_BASE_URL", "KERNTUNE_LLM")}
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.null.Keyring"
    synthetic_evaluator(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "kerntune", "tune", "--replay", str(tmp_path / "synthetic.json"),
                           "--strategy", "llm", "--llm", "openai:gpt-4.1-mini", "--store", str(tmp_path / "k.db")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == [
        "kerntune: error: openai: no API key (set OPENAI_API_KEY, or `keyring set kerntune OPENAI_API_KEY`)"
        " and no --llm-base-url"]


def test_a_server_quoting_the_key_in_a_4xx_error_does_not_leak_it(file_keyring: Path, tmp_path: Path) -> None:
    """OpenAI's 401 says "Incorrect API key provided: ..."; that message becomes the round's
    error, which is stored and printed as a note."""
    store = Store(tmp_path / "k.db")
    reject = ("status", 401, {}, {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "auth"}})
    with ScriptedServer("openai", [reject] * 10) as srv:
        client = LLMClient(OpenAIProvider("test-model", base_url=srv.url), retries=0)
        res = run_search(synthetic_evaluator(tmp_path), "llm", Budget(max_evals=12), seed=0,
                         run=RunOptions(llm=client, store=store,
                                        strategy_options={"initial": 4, "refine": 4, "max_rounds": 2,
                                                          "fallback": "random"}))
    assert srv.requests and all(ex["error"] for ex in res.llm_exchanges)
    assert all(KEY not in n for n in res.notes) and any("401" in n for n in res.notes)
    store.close()
    for path in _files(tmp_path):
        if path != file_keyring:
            assert KEY.encode() not in path.read_bytes(), path


def test_the_cli_takes_the_key_from_the_keyring_and_leaks_it_nowhere(tmp_path: Path) -> None:
    """The whole command: keyring backend chosen by PYTHON_KEYRING_BACKEND, the server first
    refusing (quoting the key), then overloaded (quoting it), then answering with the key
    in reasons, a config value and a rejected item, plus code that must not run."""
    sentinel = tmp_path / "pwned"
    synthetic_evaluator(tmp_path)                 # writes synthetic.json, the recording to replay
    keyfile = tmp_path / "keyring.json"
    keyfile.write_text(json.dumps({"kerntune/OPENAI_API_KEY": KEY}))
    evil = json.dumps({"configs": [
        {"reasoning": f"key {KEY}; __import__('os').system('touch {sentinel}')", "config": {"BM": 64, "W": 4}},
        {"reasoning": f"$(touch {sentinel})", "config": {"BM": 32, "bs": [32, 32]}},
        {"reasoning": "{{ cycler.__init__.__globals__.os.popen('id') }}", "config": {"BM": f"{KEY}"}},
        {"reasoning": "eval", "config": {"W": f"__import__('os').system('touch {sentinel}')"}},
    ]})
    script = [("status", 401, {}, {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "auth"}}),
              ("status", 503, {}, {"error": {"message": f"overloaded ({KEY})", "type": "server_error"}}),
              ("ok", evil)] + [("ok", answer({"BM": 128, "W": 4}, {"BM": 64, "W": 8}))] * 10
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "KERNTUNE_LLM", "OPENAI_BASE_URL")}
    env.update(PYTHON_KEYRING_BACKEND="test_secrets.FileKeyring", KERNTUNE_TEST_KEYRING=str(keyfile),
               PYTHONPATH=os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")]))
    with ScriptedServer("openai", script) as srv:
        proc = subprocess.run(
            [sys.executable, "-m", "kerntune", "tune", "--replay", str(tmp_path / "synthetic.json"), "--strategy",
             "llm", "--llm", "openai:test-model", "--llm-base-url", srv.url, "--llm-transcript",
             str(tmp_path / "t.jsonl"), "--store", str(tmp_path / "k.db"), "--budget", "24",
             "-o", "initial=4", "-o", "refine=4", "-o", "max_rounds=4", "-o", "patience=9", "-o", "fallback=random"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(srv.requests) >= 4
    assert {r["headers"].get("authorization") for r in srv.requests} == {f"Bearer {KEY}"}
    assert KEY not in proc.stdout + proc.stderr
    assert "401" in proc.stderr and MASK in proc.stderr            # the note and the retry warning, redacted
    for path in _files(tmp_path):
        if path != keyfile:
            assert KEY.encode() not in path.read_bytes(), path
    assert not sentinel.exists()


# -- model output is data -----------------------------------------------------------------------------------
def test_injected_code_in_a_full_llm_run_is_never_executed(tmp_path: Path) -> None:
    sentinel = tmp_path / "ran"
    payloads = [f"__import__('os').system('touch {sentinel}')", f"$(touch {sentinel})", f"`touch {sentinel}`",
                f"{{{{ ''.__class__.__mro__[1].__subclasses__() }}}} {{0.__class__}} %(x)s",
                f"eval(compile(\"open('{sentinel}', 'w')\", 'f', 'exec'))"]
    good = [{"reasoning": p, "config": {"BM": 16 * 2 ** (i % 4), "W": 4, "bs": [16, 16 * 2 ** (i % 3)]}}
            for i, p in enumerate(payloads)]
    reply = json.dumps({"configs": good + [{"reasoning": "value", "config": {"BM": p}} for p in payloads]})
    with ScriptedServer("openai", [("ok", reply)] * 20) as srv:
        client = LLMClient(OpenAIProvider("test-model", base_url=srv.url, api_key="k"), retries=0,
                           transcript=tmp_path / "t.jsonl")
        store = Store(tmp_path / "k.db")
        res = run_search(synthetic_evaluator(tmp_path), "llm", Budget(max_evals=30), seed=0,
                         run=RunOptions(llm=client, store=store,
                                        strategy_options={"initial": 10, "refine": 10, "max_rounds": 3, "patience": 9}))
    ex = store.llm_exchanges(res.run_id)[0]
    assert [a["reasoning"] for a in ex["accepted"]][:1] == payloads[:1]   # kept verbatim, as data
    assert sum("is not allowed" in r["reason"] for r in ex["rejected"]) == len(payloads)
    store.close()
    assert not sentinel.exists()


# -- the files: provider stays in its directory ---------------------------------------------------------------
def test_files_provider_replaces_planted_links_instead_of_writing_through_them(tmp_path: Path) -> None:
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (exchange / "0001.schema.json").symlink_to(victim)                # a link under the next schema name
    with pytest.raises(LLMError, match="no 0001.response"):
        LLMClient(make_provider(f"files:{exchange}"), retries=0, timeout=0.3).complete(
            [Message("user", "hi")], schema=SCHEMA)
    assert victim.read_text() == "precious"
    schema = exchange / "0001.schema.json"
    assert not schema.is_symlink() and json.loads(schema.read_text()) == SCHEMA
    assert sorted(p.name for p in exchange.iterdir()) == ["0001.prompt.md", "0001.schema.json"]


def test_files_provider_replaces_a_planted_hard_link(tmp_path: Path) -> None:
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    victim = exchange.parent / "victim.txt"
    victim.write_text("precious")
    os.link(victim, exchange / "0001.schema.json")     # same inode: writing through it would change the victim
    with pytest.raises(LLMError):
        LLMClient(make_provider(f"files:{exchange}"), retries=0, timeout=0.3).complete(
            [Message("user", "hi")], schema=SCHEMA)
    assert victim.read_text() == "precious"


def test_files_provider_refuses_a_response_that_is_not_a_regular_file(tmp_path: Path) -> None:
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    fifo = exchange / "0001.response.txt"
    os.mkfifo(fifo)                                     # reading it would block for ever
    done = threading.Event()

    def unblock() -> None:
        # Should a regression block on the FIFO, open its other end so that this test fails
        # instead of hanging CI.  Non-blocking: with no reader the open fails, and nothing waits.
        while not done.wait(0.1):
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                continue

    helper = threading.Thread(target=unblock, daemon=True)
    helper.start()
    try:
        with pytest.raises(LLMError, match="not a regular file"):
            LLMClient(make_provider(f"files:{exchange}"), retries=0, timeout=5).complete([Message("user", "hi")])
    finally:
        done.set()
        helper.join()


def test_cmd_provider_passes_the_prompt_as_data_not_through_a_shell(tmp_path: Path) -> None:
    """The command is split once (shlex) and run without a shell; the prompt, which holds model
    text from earlier rounds, goes to stdin only."""
    sentinel = tmp_path / "shell-ran"
    script = tmp_path / "model.py"
    script.write_text(textwrap.dedent("""
        import sys
        sys.stdin.read()
        print('{"configs": []}')
    """))
    provider = make_provider(f"cmd:{sys.executable} {script}")
    LLMClient(provider).complete([Message("user", f"$(touch {sentinel}); `touch {sentinel}`")])
    assert not sentinel.exists()


def test_a_cmd_models_error_that_quotes_a_token_is_redacted_in_notes_and_the_run_summary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `cmd:` model that prints a token on stderr and fails: the note the round makes (shown on the
    terminal and kept in the store's run summary) once carried the token verbatim."""
    from scripted import synthetic_evaluator

    token = "tokval98765432abcdef"
    monkeypatch.setenv("MYSERVICE_TOKEN", token)
    script = tmp_path / "leak.py"
    script.write_text("import os, sys\nsys.stdin.read()\n"
                      "print('auth failed for key ' + os.environ['MYSERVICE_TOKEN'], file=sys.stderr)\nsys.exit(3)\n")
    notes: list[str] = []
    store = Store(tmp_path / "s.db")
    res = run_search(synthetic_evaluator(tmp_path), "llm", Budget(max_evals=12), seed=0,
                     run=RunOptions(llm=LLMClient(make_provider(f"cmd:{sys.executable} {script}"), retries=0),
                                    store=store, on_note=notes.append))
    assert any("the model failed" in n for n in res.notes)
    summary = json.dumps(store.get_run(res.run_id).summary)
    assert token not in " ".join(notes) and token not in summary and token not in " ".join(res.notes)
    assert MASK in " ".join(notes)
