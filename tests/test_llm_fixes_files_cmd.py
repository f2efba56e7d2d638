"""``files:`` takes only whole answers (a paused writer of a .md answer too) and never a finished run's
used answer; ``cmd:`` takes the answer of a command whose background child keeps stdout open, and its
command dies with a tuner killed by SIGKILL.

Real files written by a helper thread or process, real subprocesses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from kerntune.llm import LLMClient, LLMError, Message, make_provider

SCHEMA = {"type": "object", "properties": {"configs": {"type": "array"}}, "required": ["configs"]}
MSGS = [Message("system", "You tune kernels."), Message("user", "Propose configs for matmul.")]
FULL = ('```json\n{"configs": [\n {"reasoning": "a", "config": {"BM": 64}},\n'
        ' {"reasoning": "b", "config": {"BM": 128}},\n {"reasoning": "c", "config": {"BM": 256}}\n]}\n```\n')


def _wait_for(path: Path, limit: float = 20.0, line: bool = False) -> None:
    """Until ``path`` exists (``line``: and holds a whole line: a shell's ``echo > file`` creates the file
    before it writes, and a read in between got '')."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if path.exists() and (not line or path.read_text().endswith("\n")):
            return
        time.sleep(0.02)


def _streaming_writer(exchange: Path, ext: str) -> threading.Thread:
    """Writes the answer as a streaming tool redirected into the file does: part, a 1-s pause, the rest."""
    cut = FULL.index('{"reasoning": "b"') + len('{"reasoning": "b", "config": {"BM": 128}},')

    def write() -> None:
        _wait_for(exchange / "0001.prompt.md")
        with open(exchange / f"0001.response.{ext}", "w") as fh:
            fh.write(FULL[:cut])
            fh.flush()
            time.sleep(1.0)
            fh.write(FULL[cut:])

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_a_markdown_answer_written_with_a_pause_is_taken_whole(tmp_path: Path) -> None:
    exchange = tmp_path / "ex"
    for ext in ("md", "txt"):
        writer = _streaming_writer(exchange / ext, ext)
        resp = LLMClient(make_provider(f"files:{exchange / ext}"), timeout=15, retries=0).complete(MSGS, schema=SCHEMA)
        writer.join(5)
        assert len(resp.parsed["configs"]) == 3 and not resp.repaired, (ext, resp.parsed)


def test_a_markdown_answer_is_taken_once_it_settled(tmp_path: Path) -> None:
    """Not waited on forever: a whole answer is taken ``settle_s`` after its last change."""
    exchange = tmp_path / "ex"

    def write() -> None:
        _wait_for(exchange / "0001.prompt.md")
        (exchange / "0001.response.md").write_text(FULL)

    threading.Thread(target=write, daemon=True).start()
    provider = make_provider(f"files:{exchange}")
    provider.settle_s = 0.5  # type: ignore[attr-defined]
    t0 = time.monotonic()
    resp = LLMClient(provider, timeout=15, retries=0).complete(MSGS, schema=SCHEMA)
    assert len(resp.parsed["configs"]) == 3 and time.monotonic() - t0 < 5


def test_a_new_run_asking_what_a_finished_run_asked_last_gets_a_new_answer(tmp_path: Path) -> None:
    exchange = tmp_path / "ex"
    old = {"configs": [{"config": {"BM": 16}}]}
    new = {"configs": [{"config": {"BM": 32}}]}

    def answer(number: str, value: dict) -> threading.Thread:
        def write() -> None:
            _wait_for(exchange / f"{number}.prompt.md")
            tmp = exchange / f"{number}.tmp"
            tmp.write_text(json.dumps(value))
            os.replace(tmp, exchange / f"{number}.response.json")

        thread = threading.Thread(target=write, daemon=True)
        thread.start()
        return thread

    answer("0001", old)
    first = LLMClient(make_provider(f"files:{exchange}"), timeout=15, retries=0).complete(MSGS, schema=SCHEMA)
    assert first.parsed == old
    time.sleep(0.05)
    # a later run, the same question: it is asked again and the new answer is the one taken
    answer("0002", new)
    second = LLMClient(make_provider(f"files:{exchange}"), timeout=15, retries=0).complete(MSGS, schema=SCHEMA)
    assert second.parsed == new
    assert (exchange / "0002.prompt.md").read_text() == (exchange / "0001.prompt.md").read_text()


def test_a_finished_runs_used_answer_is_not_taken_even_without_a_new_one(tmp_path: Path) -> None:
    exchange = tmp_path / "ex"

    def write() -> None:
        _wait_for(exchange / "0001.prompt.md")
        (exchange / "x.tmp").write_text(json.dumps({"configs": []}))
        os.replace(exchange / "x.tmp", exchange / "0001.response.json")

    threading.Thread(target=write, daemon=True).start()
    LLMClient(make_provider(f"files:{exchange}"), timeout=15, retries=0).complete(MSGS, schema=SCHEMA)
    t0 = time.monotonic()
    try:
        LLMClient(make_provider(f"files:{exchange}"), timeout=1, retries=0).complete(MSGS, schema=SCHEMA)
    except LLMError as exc:
        assert "0002.response" in str(exc)
    else:
        raise AssertionError("the finished run's answer was taken again")
    assert time.monotonic() - t0 >= 0.9


def test_a_cmd_whose_background_child_keeps_stdout_open_answers(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    spec = f"cmd:sh -c '(sleep 30 & echo $! > {pidfile}) ; echo answer'"
    t0 = time.monotonic()
    resp = LLMClient(make_provider(spec), timeout=10, retries=0).complete(MSGS)
    took = time.monotonic() - t0
    assert resp.text.strip() == "answer" and took < 5, took
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the background child outlived the call"


def test_a_cmd_that_exits_with_an_error_while_a_child_holds_stdout_still_fails(tmp_path: Path) -> None:
    spec = "cmd:sh -c '(sleep 30 &) ; echo half ; exit 4'"
    t0 = time.monotonic()
    try:
        LLMClient(make_provider(spec), timeout=10, retries=0).complete(MSGS)
    except LLMError as exc:
        assert "exited with 4" in str(exc)
    else:
        raise AssertionError("a failing command's output was taken")
    assert time.monotonic() - t0 < 5


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def test_a_cmd_model_dies_with_a_sigkilled_tuner(tmp_path: Path) -> None:
    """The command runs in a session of its own (so Ctrl-C reaches the tuner alone): a tuner killed
    with SIGKILL left it running, a model stuck on a network call for as long as the call took."""
    pidfile = tmp_path / "model.pid"
    tuner = subprocess.Popen([sys.executable, "-c", (
        "from kerntune.llm import LLMClient, Message, make_provider\n"
        f"spec = 'cmd:sh -c \\'echo $$ > {pidfile}; exec sleep 300\\''\n"
        "LLMClient(make_provider(spec), timeout=600, retries=0).complete([Message('user', 'configs?')])\n")])
    try:
        _wait_for(pidfile, line=True)
        model = int(pidfile.read_text())
        assert _alive(model)
    finally:
        tuner.send_signal(signal.SIGKILL)
        tuner.wait()
    deadline = time.monotonic() + 10
    while _alive(model) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(model), "the cmd: model outlived its SIGKILLed tuner"
