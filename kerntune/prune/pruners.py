"""Pruners: from a measured profile of a space to a list of edits.

Two kinds behind one signature, ``(space, profile, workload, device) ->
(edits, seconds spent, note)``: the LLM pruner (the model reads the space,
hardware, problem and profile, and answers edit operations as JSON) and a
rule pruner (deterministic: drop values whose best profiled time is far from
the best), which is both the baseline and the scripted pruner of the tests.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Sequence

from kerntune.evaluate.trial import Trial
from kerntune.hardware import describe_device, device_facts
from kerntune.llm.types import LLMError, Message
from kerntune.prune.edits import Edit, edits_from_answer, edits_schema
from kerntune.space import Space, jsonable
from kerntune.strategies.llm.prompting import _workload, template

Pruner = Callable[[Space, Sequence[Trial], dict, dict], tuple[list[Edit], float, str]]


def profile_table(space: Space, profile: Sequence[Trial], limit: int = 40) -> str:
    ok = sorted((t for t in profile if t.ok), key=lambda t: t.time_ms)  # type: ignore[arg-type,return-value]
    failed = [t for t in profile if not t.ok]
    shown = ok if len(ok) <= limit else ok[: limit * 3 // 4] + ok[-(limit // 4):]
    lines = [f"{t.time_ms:.4g}  " + json.dumps({k: jsonable(v) for k, v in t.config.items()}, separators=(",", ":"))
             for t in shown]
    lines += [f"{t.status.value}  " + json.dumps({k: jsonable(v) for k, v in t.config.items()}, separators=(",", ":"))
              for t in failed[:10]]
    return "\n".join(lines) or "(nothing measured)"


def rule_pruner(tolerance: float = 0.25, min_seen: int = 2) -> Pruner:
    """Drop a value when it was profiled at least ``min_seen`` times and its best time is
    more than ``tolerance`` slower than the best overall; values never profiled stay."""
    def prune(space: Space, profile: Sequence[Trial], workload: dict, device: dict) -> tuple[list[Edit], float, str]:
        ok = [t for t in profile if t.ok]
        if not ok:
            return [], 0.0, "no successful profile measurement: nothing pruned"
        best = min(t.time_ms for t in ok)  # type: ignore[type-var]
        edits = []
        for p in space.params:
            for v in p.values():
                seen = [t.time_ms for t in ok if t.config.get(p.name) == v]
                if len(seen) >= min_seen and min(seen) > best * (1 + tolerance):  # type: ignore[type-var,operator]
                    edits.append(Edit("remove_value", p.name, v,
                                      reason=f"best of {len(seen)} profiled is {min(seen) / best:.2f}x the best"))
        return edits, 0.0, ""
    return prune


def llm_pruner(client: Any, temperature: float = 0.7, max_tokens: int = 3000) -> Pruner:
    def prune(space: Space, profile: Sequence[Trial], workload: dict, device: dict) -> tuple[list[Edit], float, str]:
        user = template("prune.md").substitute(
            workload=_workload(workload), hardware=describe_device(device_facts(device.get("name", "unknown"), device)),
            space=space.describe(), space_size=f"{space.count():,}", profile_size=len(profile),
            profile=profile_table(space, profile))
        messages = [Message("system", template("prune_system.md").substitute()), Message("user", user)]
        t0 = time.perf_counter()
        try:
            resp = client.complete(messages, schema=edits_schema(space), temperature=temperature, max_tokens=max_tokens)
        except LLMError as exc:
            return [], time.perf_counter() - t0, f"the model failed: {exc}"
        seconds = time.perf_counter() - t0
        edits, problems = edits_from_answer(resp.parsed)
        return edits, seconds, "; ".join(problems[:5])
    return prune
