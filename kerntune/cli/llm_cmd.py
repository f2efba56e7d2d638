"""``kerntune llm check``: which model answers, how fast, and whether its
answer fits a schema."""

from __future__ import annotations

import json
import time
from typing import Optional

import typer

from kerntune.cli.common import console
from kerntune.llm import LLMClient, LLMError, Message, make_provider, parse_configs, resolve_auto
from kerntune.space import Choice, PowerOfTwo, Space, jsonable

app = typer.Typer(no_args_is_help=True, help="The language model kerntune talks to.")

_CHECK_SPACE = Space([PowerOfTwo("BLOCK_M", low=16, high=256, description="rows of C per program"),
                      PowerOfTwo("BLOCK_N", low=16, high=256, description="columns of C per program"),
                      Choice("num_warps", options=(2, 4, 8))], ["BLOCK_M * BLOCK_N <= 32768"],
                     default={"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4})


@app.command("check")
def check(llm: str = typer.Option("auto", "--llm", envvar="KERNTUNE_LLM", help="Provider spec"),
          base_url: Optional[str] = typer.Option(None, "--llm-base-url", envvar="KERNTUNE_LLM_BASE_URL"),
          timeout: float = typer.Option(300.0, "--timeout")) -> None:
    """Load the model, ask for three configs of a small matmul space, report speed and validity."""
    if llm == "auto":
        choice = resolve_auto()
        console.print(f"auto: chose [bold]{choice.spec}[/bold] because {choice.why}")
        llm = choice.spec
    t0 = time.perf_counter()
    provider = make_provider(llm, base_url)
    load = getattr(provider, "load_seconds", time.perf_counter() - t0)
    console.print(f"provider: {provider.name}  model: {provider.model}  load: {load:.1f} s")
    client = LLMClient(provider, timeout=timeout, retries=1)
    prompt = [Message("system", "You are a GPU kernel tuning expert. Answer with JSON only."),
              Message("user", "Propose 3 different configs for a Triton fp16 matmul 4096x4096x4096 on an H100.\n"
                              f"Parameters:\n{_CHECK_SPACE.describe()}\n"
                              'Answer as {"configs":[{"reasoning":"...","config":{...}}]}.')]
    try:
        resp = client.complete(prompt, schema=_CHECK_SPACE.json_schema(), temperature=0.2, max_tokens=400)
    except LLMError as exc:
        console.print(f"[red]no usable answer[/red]: {exc}")
        raise typer.Exit(1)
    speed = resp.usage.output_tokens / resp.latency_s if resp.latency_s else 0.0
    parsed = parse_configs(resp.text, _CHECK_SPACE)
    console.print(f"answer: {resp.usage.output_tokens} tokens in {resp.latency_s:.1f} s ({speed:.1f} tokens/s)"
                  f"{', after one repair round' if resp.repaired else ''}")
    console.print(f"valid configs: {len(parsed.accepted)} of {len(parsed.accepted) + len(parsed.rejected)}")
    for cfg in parsed.accepted:
        console.print("  " + json.dumps({k: jsonable(v) for k, v in cfg.items()}))
    for rej in parsed.rejected:
        console.print(f"  rejected: {rej.reason}")
    if not parsed.accepted:
        raise typer.Exit(1)
