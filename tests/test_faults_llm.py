"""LLM-side faults in the round search, over real HTTP on 127.0.0.1 through the
official SDKs: the provider goes down mid-run, answers too slowly, or answers
garbage (prose, a megabyte of text, configs that do not fit, a body that is no
chat completion at all).  In every case the run completes its whole budget:
failed rounds are proposed by the fallback, thin rounds are topped up, and each
exchange is stored with its error or its rejections.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")
pytest.importorskip("anthropic")

from kerntune.llm import LLMClient  # noqa: E402
from kerntune.llm.providers.http_sdk import AnthropicProvider, OpenAIProvider  # noqa: E402
from kerntune.run.search import RunOptions, SearchResult, run_search  # noqa: E402
from kerntune.store import Store  # noqa: E402
from kerntune.strategies import Budget  # noqa: E402
from llm_servers import ScriptedServer  # noqa: E402
from scripted import answer, synthetic_evaluator  # noqa: E402

ROUND1 = answer({"BM": 64, "W": 4, "bs": [32, 32]}, {"BM": 32, "W": 4}, {"BM": 64, "W": 8}, {"BM": 32, "bs": [32, 32]},
                {"BM": 64, "bs": [16, 32]}, {"BM": 128, "W": 4}, {"W": 8, "bs": [32, 16]}, {"BM": 32, "W": 8})
# Warm-up 3, round 1 of 8, then rounds of 6 until the budget: 3 + 8 + 6 * 5 = 41 > 40.
OPTIONS = {"initial": 8, "refine": 6, "warmup": 3, "max_rounds": 10, "patience": 10, "min_improvement": 0.0,
           "fallback": "pattern"}
BUDGET = 40


def _client(server: ScriptedServer, protocol: str, **kw: Any) -> LLMClient:
    cls = OpenAIProvider if protocol == "openai" else AnthropicProvider
    kw.setdefault("retries", 1)
    kw.setdefault("backoff_base", 0.01)
    kw.setdefault("timeout", 5.0)
    return LLMClient(cls("test-model", base_url=server.url, api_key="k"), **kw)


def _sources(db: Path, run_id: str) -> list[str]:
    con = sqlite3.connect(db)
    try:
        return [s for (s,) in con.execute("SELECT source FROM trials WHERE run_id=? ORDER BY seq", (run_id,))]
    finally:
        con.close()


def _run(tmp_path: Path, client: LLMClient, **kw: Any) -> tuple[SearchResult, Store]:
    store = Store(tmp_path / "k.db")
    res = run_search(synthetic_evaluator(tmp_path), "llm", Budget(max_evals=BUDGET), seed=0,
                     run=RunOptions(llm=client, store=store, strategy_options=dict(OPTIONS), **kw))
    return res, store


def _assert_complete(res: SearchResult, tmp_path: Path) -> list[str]:
    assert len(res.history) == BUDGET, res.stop_reason
    assert res.stop_reason == "evaluation budget"
    assert res.best is not None
    sources = _sources(tmp_path / "k.db", res.run_id)
    assert len(sources) == BUDGET and sources[:3] == ["llm:warmup"] * 3
    keys = [json.dumps(t.config, sort_keys=True, default=list) for t in res.history]
    assert len(set(keys)) == BUDGET            # nothing measured twice
    return sources


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_provider_down_after_round_one_the_fallback_finishes_the_run(tmp_path: Path, protocol: str) -> None:
    with ScriptedServer(protocol, [("ok", ROUND1)]) as srv:
        client = _client(srv, protocol)
        stopped: list[float] = []

        def progress(ctx: Any) -> None:
            if not stopped and ctx.evaluations > 3:   # round 1's answer is being measured: the server goes away
                srv.httpd.shutdown()
                srv.httpd.server_close()
                stopped.append(time.monotonic())

        t0 = time.monotonic()
        res, store = _run(tmp_path, client, progress=progress)
        elapsed = time.monotonic() - t0
    assert stopped and len(srv.requests) == 1
    sources = _assert_complete(res, tmp_path)
    exchanges = store.llm_exchanges(res.run_id)
    used = len(exchanges[0]["accepted"])   # 8 proposed, less any that a random warm-up config took
    assert exchanges[0]["error"] is None and used >= 7
    assert sources[3:3 + used] == ["llm:round1"] * used                 # the model's round was used
    assert set(sources[3 + used:]) == {"llm:fallback-pattern"}          # then the fallback carried on
    assert any("round 2: the model failed" in n and "APIConnectionError" in n for n in res.notes)
    assert len(exchanges) >= 6 and all("APIConnectionError" in (ex["error"] or "") for ex in exchanges[1:])
    assert elapsed < 60


def test_slow_provider_times_out_and_the_fallback_proposes(tmp_path: Path) -> None:
    with ScriptedServer("openai", [("hang", 4.0)] * 30) as srv:
        client = _client(srv, "openai", retries=0, timeout=0.5)
        t0 = time.monotonic()
        res, store = _run(tmp_path, client)
        elapsed = time.monotonic() - t0
    sources = _assert_complete(res, tmp_path)
    assert set(sources[3:]) == {"llm:fallback-pattern"}
    exchanges = store.llm_exchanges(res.run_id)
    assert exchanges and all("APITimeoutError" in (ex["error"] or "") for ex in exchanges)
    assert len(exchanges) == len(srv.requests)     # one call per round, no retries asked for
    assert elapsed < 0.5 * len(exchanges) + 20    # each round waited about the timeout, not the 4 s hang


def test_a_slow_answer_is_retried_and_the_second_attempt_is_used(tmp_path: Path) -> None:
    with ScriptedServer("openai", [("hang", 3.0), ("ok", ROUND1)] + [("ok", ROUND1)] * 20) as srv:
        client = _client(srv, "openai", retries=1, timeout=0.5)
        res, _ = _run(tmp_path, client)
    sources = _assert_complete(res, tmp_path)
    assert sources[3:10] == ["llm:round1"] * 7
    assert srv.requests[1]["time"] - srv.requests[0]["time"] < 2.0   # the retry did not wait out the hang


GARBAGE = {
    "prose": ("ok", "I would try bigger blocks and fewer warps; that usually helps on this GPU."),
    "python": ("ok", "{'configs': [{'config': {'BM': 64, 'W': 4}}]}"),
    "megabyte": ("ok", json.dumps({"configs": [{"reasoning": "z" * 1_100_000, "config": {"BM": 64}}]})),
    "not_a_completion": ("status", 200, {}, "just a string"),
    "empty_object": ("status", 200, {}, {"garbage": True}),
    "null_message": ("status", 200, {}, {"choices": [{"message": None}], "content": None}),
}


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
@pytest.mark.parametrize("kind", sorted(GARBAGE))
def test_garbage_answers_are_stored_failures_and_the_fallback_proposes(tmp_path: Path, protocol: str,
                                                                       kind: str) -> None:
    with ScriptedServer(protocol, [GARBAGE[kind]] * 40) as srv:
        res, store = _run(tmp_path, _client(srv, protocol))
    sources = _assert_complete(res, tmp_path)
    assert set(sources[3:]) == {"llm:fallback-pattern"}
    exchanges = store.llm_exchanges(res.run_id)
    assert exchanges and all(ex["error"] for ex in exchanges)
    if GARBAGE[kind][0] == "ok":
        # Text that holds no usable JSON gets exactly one repair round per call.
        assert len(srv.requests) == 2 * len(exchanges)
        assert all(ex["error"].find("no usable JSON after one repair round") >= 0 for ex in exchanges)
        repair = srv.requests[1]["body"]["messages"][-1]["content"]
        assert "could not be used" in repair


def test_answers_with_no_usable_config_are_rejected_with_reasons_and_topped_up(tmp_path: Path) -> None:
    bad = json.dumps({"configs": [{"reasoning": "huge tiles", "config": {"BM": 512}},
                                  {"reasoning": "made up", "config": {"BLOCK": 64}},
                                  {"reasoning": "__import__('os').system('echo pwned')", "config": {"BM": "64*2"}},
                                  {"reasoning": "not a config", "config": "BM=64"}, 7, None]})
    with ScriptedServer("openai", [("ok", bad)] * 40) as srv:
        res, store = _run(tmp_path, _client(srv, "openai"))
    sources = _assert_complete(res, tmp_path)
    assert sources[3:11] == ["llm:fallback-pattern"] * 8  # a full batch, all of it from (and credited to) the fallback
    assert any("only 0 valid new configs of the 8 asked for" in n and "topped up" in n for n in res.notes)
    ex = store.llm_exchanges(res.run_id)[0]
    assert ex["error"] is None and ex["accepted"] == []
    reasons = [r["reason"] for r in ex["rejected"]]
    assert len(reasons) == 6
    assert "BM: 512 is not allowed" in reasons[0] and "BLOCK: unknown parameter" in reasons[1]
    assert 'BM: "64*2" is not allowed' in reasons[2]       # a string, never evaluated to 128
    assert all("must be an object" in r for r in reasons[3:])
    assert len(srv.requests) == 2 * len(store.llm_exchanges(res.run_id))  # one repair round each
