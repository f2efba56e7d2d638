"""Prompt building from the template files in ``kerntune/prompts/``.

Templates hold the words; this module only fills ``$placeholders`` with
facts about the workload, hardware, space and history, so the prompts can be
read and edited without touching control flow.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from string import Template
from typing import Any, Sequence

from kerntune.evaluate.trial import Trial
from kerntune.hardware import describe_device, device_facts
from kerntune.llm.types import Message
from kerntune.space import Space, jsonable
from kerntune.strategies.llm import feedback


@dataclass
class PromptOptions:
    include_source: bool = True
    include_hardware: bool = True
    include_hints: bool = True
    results_cap: int = 30


def template(name: str) -> Template:
    return Template(resources.files("kerntune.prompts").joinpath(name).read_text())


def _workload(workload: dict[str, Any]) -> str:
    lines = []
    for key, label in (("kernel_name", "Kernel"), ("problem_size", "Problem size"), ("dtypes", "Data types"),
                       ("description", "Description"), ("flops", "FLOPs"), ("bytes", "Bytes moved")):
        if workload.get(key) not in (None, "", []):
            lines.append(f"- {label}: {workload[key]}")
    return "\n".join(lines) or "- (no workload description)"


def _common(space: Space, workload: dict[str, Any], device: dict[str, Any], opts: PromptOptions) -> dict[str, str]:
    facts = device_facts(device.get("name", "unknown"), device) if opts.include_hardware else {"name": "(not given)"}
    return {
        "workload": _workload(workload),
        "hardware": describe_device(facts),
        "space": space.describe(),
        "space_size": f"{space.count():,}" if space.cartesian_size <= 5_000_000 or space.materialised else f"up to {space.cartesian_size:,}",
        "default": json.dumps({k: jsonable(v) for k, v in space.default.items()}, separators=(",", ":")),
    }


def _past(past: Sequence[Any]) -> str:
    """Winners of past runs on nearby shapes (``kerntune.run.warm_start.PastWinner``)."""
    if not past:
        return ""
    lines = ["", "## Past runs of this kernel on other shapes", ""]
    for w in past:
        size = "x".join(map(str, w.problem_size)) if isinstance(w.problem_size, (list, tuple)) else w.problem_size
        cfg = json.dumps({k: jsonable(v) for k, v in w.config.items()}, separators=(",", ":"))
        lines.append(f"- on {size}{f' ({w.device})' if w.device else ''} the best was {cfg}: {w.time_ms:.4g} ms")
    lines.append("\nThey are measured on this shape too; use them as starting points, not as answers.")
    return "\n".join(lines) + "\n"


def _kernel_parts(workload: dict[str, Any], opts: PromptOptions, past: Sequence[Any]) -> dict[str, str]:
    """The kernel's source, the hints (Helion's parameter guide among them) and past runs' winners, as
    every round shows them (``include_source`` / ``include_hints`` leave the first two out).  Rounds
    after the first once had none of them: the model refined configs of a kernel it no longer saw."""
    source = workload.get("source") if opts.include_source else None
    hints = workload.get("hints") if opts.include_hints else None
    return {"source": f"\n```\n{source.strip()}\n```\n" if source else "",
            "hints": f"\n## Hints\n\n{hints.strip()}\n" if hints else "", "past": _past(past)}


def first_round(space: Space, workload: dict[str, Any], device: dict[str, Any], n: int,
                opts: PromptOptions | None = None, past: Sequence[Any] = ()) -> list[Message]:
    opts = opts or PromptOptions()
    # before _common: where the paths walk a constrained space, that walk counts it too (one walk, not two)
    paths = feedback.first_round_paths(space, n)
    user = template("first_round.md").substitute(
        **_common(space, workload, device, opts), n=n, paths=paths, **_kernel_parts(workload, opts, past))
    return [Message("system", template("system.md").substitute()), Message("user", user)]


def refine_round(space: Space, workload: dict[str, Any], device: dict[str, Any], history: Sequence[Trial],
                 n: int, round_done: int, stuck: bool, opts: PromptOptions | None = None,
                 past: Sequence[Any] = ()) -> list[Message]:
    opts = opts or PromptOptions()
    user = template("refine.md").substitute(
        **_common(space, workload, device, opts), n=n, round_done=round_done,
        **_kernel_parts(workload, opts, past),
        state=feedback.search_state(space, history),
        anchors=feedback.anchors(space, history),
        results=feedback.results_table(space, history, opts.results_cap),
        top_patterns=feedback.top_patterns(space, history),
        failure_patterns=feedback.failure_patterns(space, history),
        code_paths=feedback.code_paths(space, history),
        rules=feedback.next_step_rules(n, stuck),
    )
    return [Message("system", template("system.md").substitute()), Message("user", user)]
