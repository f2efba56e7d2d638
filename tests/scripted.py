"""A scripted LLM provider (deterministic, in-process) and a small synthetic
recorded space, for strategy tests that must not depend on a real model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from kerntune.evaluate import ReplayEvaluator, Status, Trial, table_dict
from kerntune.llm.providers.base import Provider
from kerntune.llm.types import LLMError, Message, RawReply, Usage
from kerntune.space import Choice, ListParam, PowerOfTwo, Space

Script = Callable[[int, list[Message]], str]


class ScriptedProvider(Provider):
    """Answers call n with ``script(n, messages)``; raising LLMError simulates an outage."""

    name = "scripted"

    def __init__(self, script: Script) -> None:
        super().__init__("scripted-model")
        self.script = script
        self.prompts: list[list[Message]] = []

    def send(self, messages: list[Message], schema: dict[str, Any] | None, temperature: float, max_tokens: int,
             timeout: float) -> RawReply:
        self.prompts.append(messages)
        return RawReply(self.script(len(self.prompts), messages), Usage(100, 50), self.model)


def failing(n: int, messages: list[Message]) -> str:
    raise LLMError("scripted outage")


def answer(*configs: dict[str, Any]) -> str:
    return json.dumps({"configs": [{"reasoning": f"pick {i}", "config": c} for i, c in enumerate(configs)]})


def synthetic_time(cfg: dict[str, Any]) -> float | None:
    """A smooth bowl with its optimum at BM=64, W=4, bs=(32, 32); BM=128 with W=2 fails."""
    if cfg["BM"] == 128 and cfg["W"] == 2:
        return None
    bm = {16: 3, 32: 1.5, 64: 0, 128: 1}[cfg["BM"]]
    w = {2: 0.8, 4: 0, 8: 0.5}[cfg["W"]]
    bs = sum({16: 0.4, 32: 0, 64: 0.7}[x] for x in cfg["bs"])
    return 1.0 + bm + w + bs


def synthetic_space() -> Space:
    return Space([PowerOfTwo("BM", low=16, high=128, description="rows per program"),
                  Choice("W", options=(2, 4, 8), description="warps"),
                  ListParam("bs", element=PowerOfTwo("x", low=16, high=64), length=2, description="block sizes")],
                 default={"BM": 16, "W": 2, "bs": [16, 16]}, name="synthetic")


def synthetic_evaluator(tmp_path: Path) -> ReplayEvaluator:
    space = synthetic_space()
    trials = []
    for cfg in space.enumerate():
        t = synthetic_time(cfg)
        trials.append(Trial(cfg, Status.OK, t, compile_s=0.5, bench_s=0.1) if t is not None else
                      Trial(cfg, Status.RUNTIME_ERROR, compile_s=0.5, error="out of resources"))
    path = tmp_path / "synthetic.json"
    path.write_text(json.dumps(table_dict(space, trials, {"kernel_name": "synthetic", "device_name": "NVIDIA H100"})))
    return ReplayEvaluator.from_file(path)


def wall_clock_evaluator(tmp_path: Path) -> ReplayEvaluator:
    """The synthetic space measured on the wall clock (``realtime``), 20 ms a config: for time budgets
    a model's real latency has to meet."""
    space = synthetic_space()
    trials = [Trial(c, Status.OK, synthetic_time(c), compile_s=0.01, bench_s=0.01) if synthetic_time(c) else
              Trial(c, Status.RUNTIME_ERROR, compile_s=0.01, error="out of resources") for c in space.enumerate()]
    path = tmp_path / "wall.json"
    path.write_text(json.dumps(table_dict(space, trials, {"kernel_name": "synthetic", "device_name": "NVIDIA H100"})))
    return ReplayEvaluator.from_file(path, realtime=True)
