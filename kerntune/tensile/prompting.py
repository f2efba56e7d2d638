"""The prompt for editing a Tensile config, and the model's answer as edits."""

from __future__ import annotations

import json
import time
from typing import Any

from kerntune.hardware import KNOWN_GPUS, describe_device, device_facts
from kerntune.llm.types import LLMError, Message
from kerntune.strategies.llm.prompting import template
from kerntune.tensile.config import TensileConfig, TensileError
from kerntune.tensile.edits import OPS, VALID, TensileEdit

AMD_TABLE = ("MI210", "MI250X", "MI300X", "MI325X")


def gpu_table() -> str:
    rows = ["| GPU | arch | CUs | memory GB | bandwidth GB/s | fp16 TFLOP/s | LDS/CU KB |", "|---|---|---|---|---|---|---|"]
    for name, f in KNOWN_GPUS:
        if name in AMD_TABLE:
            rows.append(f"| {name} | {f['arch']} | {f['cus']} | {f['memory_gb']} | {f['bandwidth_gbs']} | "
                        f"{f.get('peak_fp16_tflops', '?')} | {f['lds_per_cu_kb']} |")
    return "\n".join(rows)


def _steps(config: TensileConfig) -> str:
    """One line per benchmark step.  Multi-valued BenchmarkCommonParameters fork and count too, so
    they are listed (marked as such): unlisted, the model saw fewer factors than the kernel count."""
    out = []
    for s in config.steps():
        forks = "; ".join(f"{k}: {json.dumps(v)}" for k, v in s.fork_params().items())
        common = "; ".join(f"{k}: {json.dumps(v)}" for k, v in s.common_forks().items())
        groups = " x ".join(str(len(g)) for g in s.groups())
        out.append(f"- problem {s.problem} step {s.step}: {s.kernel_count()} kernels. Forks: {forks}"
                   + (f". Forks in BenchmarkCommonParameters: {common}" if common else "")
                   + (f". Groups sizes: {groups}; alternatives: {json.dumps(s.groups())}" if groups else ""))
    return "\n".join(out)


def messages(config: TensileConfig, gpu: str, results: str = "", goal: str = "", evidence: str = "") -> list[Message]:
    """The prompt; ``results`` are this config's benchmark results (a later iteration), ``evidence``
    what an earlier tuning's library logic file says won (``logic.evidence``)."""
    problems = [json.dumps({str(k): v for k, v in config.problem_type(i).items()}, default=str)
                for i in range(len(config.problem_types()))]
    user = template("tensile.md").substitute(
        goal=goal, hardware=describe_device(device_facts(gpu)), gpu_table=gpu_table(),
        problem="\n".join(f"- problem {i}: {p}" for i, p in enumerate(problems)), steps=_steps(config),
        results=f"\n## Benchmark results\n\n{results.strip()}\n" if results else "",
        evidence=f"\n{evidence.strip()}\n" if evidence else "")
    return [Message("system", template("prune_system.md").substitute()), Message("user", user)]


def schema(config: TensileConfig) -> dict[str, Any]:
    """At least one edit (a grammar-constrained model otherwise answers an empty list), naming a
    fork parameter of the config (multi-valued common ones included) or one the table of valid values knows."""
    names = sorted({k for s in config.steps() for k in [*s.fork_params(), *s.common_forks()]} | set(VALID))
    return {"type": "object", "required": ["edits"], "properties": {"edits": {
        "type": "array", "minItems": 1, "maxItems": 40, "items": {
        "type": "object", "required": ["op", "param"],
        "properties": {"op": {"type": "string", "enum": list(OPS)}, "param": {"type": "string", "enum": names},
                       "problem": {"type": "integer"}, "step": {"type": "integer"}, "value": {},
                       "values": {"type": "array"}, "reason": {"type": "string", "maxLength": 200}}}}}}


def ask(client: Any, config: TensileConfig, gpu: str, results: str = "",
        evidence: str = "") -> tuple[list[TensileEdit], list[str], float]:
    """The model's edits, the reasons items were dropped, and the seconds the call took."""
    t0 = time.perf_counter()
    try:
        resp = client.complete(messages(config, gpu, results, evidence=evidence), schema=schema(config),
                               temperature=0.3, max_tokens=3000)
    except LLMError as exc:
        raise TensileError(f"the model failed: {exc}") from None
    items = resp.parsed.get("edits") if isinstance(resp.parsed, dict) else None
    edits, dropped = [], []
    for item in items if isinstance(items, list) else []:
        try:
            edits.append(TensileEdit.from_dict(item))
        except (TensileError, TypeError, ValueError, KeyError, AttributeError, ArithmeticError) as exc:
            # A malformed item is dropped with its reason; the other edits still count.
            dropped.append(str(exc) or type(exc).__name__)
    return edits, dropped, time.perf_counter() - t0
