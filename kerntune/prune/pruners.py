"""Pruners and expanders: from a measured profile of a space to a list of edits.

Pruners share one signature, ``(space, profile, workload, device, feedback="")
-> (edits, seconds spent, note)``: the LLM pruner (the model reads the space,
hardware, problem and profile, and answers edit operations as JSON) and a rule
pruner (deterministic: drop values whose best profiled time is far from the
best), which is both the baseline and the scripted pruner of the tests.
``feedback`` is what the previous iteration measured (``iterate.py``).

The expander (``llm_expander``) is an ``Editor`` of the iteration loop: it sees
the whole ``SpaceState`` because it must know what may be added (rules,
extensible parameters, groups), not only what is there.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Sequence

from kerntune.evaluate.trial import Status, Trial
from kerntune.hardware import describe_device, device_facts
from kerntune.llm.types import LLMError, Message
from kerntune.prune.edits import Edit, SpaceState, edits_from_answer, edits_schema, expand_schema
from kerntune.prune.iterate import Editor
from kerntune.space import Space, jsonable
from kerntune.strategies.llm.prompting import _workload, template

Pruner = Callable[..., tuple[list[Edit], float, str]]


def measured(profile: Sequence[Trial]) -> list[Trial]:
    """What was measured (a config the recording could not answer is shown by the iteration's feedback)."""
    return [t for t in profile if t.status is not Status.UNMEASURED]


def profile_table(space: Space, profile: Sequence[Trial], limit: int = 40) -> str:
    profile = measured(profile)
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
    def prune(space: Space, profile: Sequence[Trial], workload: dict, device: dict,
              feedback: str = "") -> tuple[list[Edit], float, str]:
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


def _ask(client: Any, messages: list[Message], schema: dict, temperature: float,
         max_tokens: int) -> tuple[list[Edit], float, str]:
    t0 = time.perf_counter()
    try:
        resp = client.complete(messages, schema=schema, temperature=temperature, max_tokens=max_tokens)
    except LLMError as exc:
        return [], time.perf_counter() - t0, f"the model failed: {exc}"
    seconds = time.perf_counter() - t0
    edits, problems = edits_from_answer(resp.parsed)
    return edits, seconds, "; ".join(problems[:5])


def _hardware(device: dict) -> str:
    return describe_device(device_facts(device.get("name", "unknown"), device))


def llm_pruner(client: Any, temperature: float = 0.7, max_tokens: int = 3000) -> Pruner:
    def prune(space: Space, profile: Sequence[Trial], workload: dict, device: dict,
              feedback: str = "") -> tuple[list[Edit], float, str]:
        user = template("prune.md").substitute(
            workload=_workload(workload), hardware=_hardware(device),
            space=space.describe(), space_size=f"{space.count():,}", profile_size=len(measured(profile)),
            profile=profile_table(space, profile), feedback=f"\n{feedback.strip()}\n" if feedback else "")
        messages = [Message("system", template("prune_system.md").substitute()), Message("user", user)]
        return _ask(client, messages, edits_schema(space), temperature, max_tokens)
    return prune


def additions_text(state: SpaceState) -> str:
    """Per parameter, what a model may add; then the parameters it may add."""
    lines = [f"- {p.name}: {state.rule(p.name).text()}; now {p.allowed_text()}" for p in state.base.params]
    for p in state.extensible.values():
        lines.append(f"- new parameter {p.name} (the kernel reads it): {p.allowed_text()}; while it is not "
                     f"searched the kernel uses {jsonable(p.default_value)!r}"
                     + (f" — {p.description}" if p.description else ""))
    for name in state.allow_new:
        if name not in state.base.by_name and name not in state.extensible:
            lines.append(f"- new parameter {name} (allowed by the user): give its values and optionally its "
                         "kind and default")
    return "\n".join(lines)


def groups_text(state: SpaceState) -> str:
    if not state.groups:
        return ""
    return "\nAdditive groups (at most one parameter of a group leaves its default at a time): " + \
        "; ".join("(" + ", ".join(g) + ")" for g in state.groups) + "\n"


def llm_expander(client: Any, workload: dict, device: dict, temperature: float = 0.7,
                 max_tokens: int = 3000) -> Editor:
    def expand(state: SpaceState, profile: Sequence[Trial], feedback: str = "") -> tuple[list[Edit], float, str]:
        space = state.space
        user = template("expand.md").substitute(
            workload=_workload(workload), hardware=_hardware(device), space=space.describe(),
            space_size=f"{space.count():,}", groups=groups_text(state), additions=additions_text(state),
            profile_size=len(measured(profile)), profile=profile_table(space, profile),
            feedback=f"\n{feedback.strip()}\n" if feedback else "")
        messages = [Message("system", template("expand_system.md").substitute()), Message("user", user)]
        return _ask(client, messages, expand_schema(state), temperature, max_tokens)
    return expand


def as_editor(pruner: Pruner, workload: dict, device: dict) -> Editor:
    """A pruner as an iteration-loop editor."""
    return lambda state, profile, feedback: pruner(state.space, profile, workload, device, feedback=feedback)


def edits_file_editor(edits: list[Edit]) -> Editor:
    """A fixed list of edits (from ``--edits FILE``): applied in the first iteration, none after."""
    calls = {"n": 0}

    def editor(state: SpaceState, profile: Sequence[Trial], feedback: str = "") -> tuple[list[Edit], float, str]:
        calls["n"] += 1
        return (list(edits) if calls["n"] == 1 else []), 0.0, ""
    return editor
