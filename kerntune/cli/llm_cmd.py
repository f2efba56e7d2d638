"""``kerntune llm check``: which model answers, how fast, and whether its
answer fits a schema."""

from __future__ import annotations

import json
import time
from typing import Any, Optional

import typer
from rich.markup import escape

from kerntune.cli.common import LLM_BASE_URL_HELP, check_number, console
from kerntune.llm import LLMClient, LLMError, Message, make_provider, parse_configs, resolve_auto
from kerntune.llm.parsing import extract_json
from kerntune.llm.secrets import redact
from kerntune.space import Choice, PowerOfTwo, Space, jsonable

app = typer.Typer(no_args_is_help=True, help="The language model kerntune talks to.")

_CHECK_SPACE = Space([PowerOfTwo("BLOCK_M", low=16, high=256, description="rows of C per program"),
                      PowerOfTwo("BLOCK_N", low=16, high=256, description="columns of C per program"),
                      Choice("num_warps", options=(2, 4, 8))], ["BLOCK_M * BLOCK_N <= 32768"],
                     default={"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4})

ASKED = 3  # configs the check asks for


@app.command("check")
def check(llm: str = typer.Option("auto", "--llm", envvar="KERNTUNE_LLM", help="Provider spec"),
          base_url: Optional[str] = typer.Option(None, "--llm-base-url", envvar="KERNTUNE_LLM_BASE_URL",
                                                 help=LLM_BASE_URL_HELP),
          timeout: float = typer.Option(300.0, "--timeout", help="Seconds to wait for the model's answer")) -> None:
    """Load the model, ask for three configs of a small matmul space, report speed and validity."""
    check_number("--timeout", timeout, 0, 86400)  # -5 or nan was blamed on the model ("no usable answer")
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
              Message("user", f"Propose {ASKED} different configs for a Triton fp16 matmul 4096x4096x4096 on an H100.\n"
                              f"Parameters:\n{_CHECK_SPACE.describe()}\n"
                              'Answer as {"configs":[{"reasoning":"...","config":{...}}]}.')]
    try:
        resp = client.complete(prompt, schema=_CHECK_SPACE.json_schema(), temperature=0.2, max_tokens=400)
    except LLMError as exc:
        # redacted (a command's stderr or a server's error may quote a key) and escaped: the text is
        # the model's or the server's, and "[...]" in it would be read as console markup
        console.print(f"[red]no usable answer[/red]: {escape(redact(str(exc)))}")
        raise typer.Exit(1)
    parsed = parse_configs(resp.text, _CHECK_SPACE)
    console.print(f"answer: {_speed(resp, provider)}{', after one repair round' if resp.repaired else ''}")
    empty = _empty_configs(resp.text)
    held = len(parsed.accepted) + len(parsed.rejected)
    console.print(f"valid configs: {len(parsed.accepted)} of {ASKED} asked"
                  + (f" (the answer held {held}{f', {len(parsed.rejected)} rejected' if parsed.rejected else ''})"
                     if held != ASKED or parsed.rejected else "")
                  + (f"; {empty} {'was' if empty == 1 else 'were'} empty, which means the space's default config"
                     if empty else ""))
    for cfg in parsed.accepted:
        console.print("  " + json.dumps({k: jsonable(v) for k, v in cfg.items()}))
    for rej in parsed.rejected:
        console.print(f"  rejected: {rej.reason}")
    if not parsed.accepted:
        raise typer.Exit(1)


def _speed(resp: Any, provider: Any) -> str:
    """The answer's size and time, named for what they are: the call's latency includes the
    prompt's processing, so output tokens over it is no generation rate.  A provider that times
    its first token (the embedded model) gives the generation rate apart."""
    tokens = resp.usage.output_tokens
    if not tokens:
        return f"{len(resp.text):,} characters in {resp.latency_s:.1f} s (the provider reports no token counts)"
    text = f"{tokens} tokens in {resp.latency_s:.1f} s, prompt processing included"
    timing = getattr(provider, "last_timing", None)
    if timing and not resp.cached and timing["tokens"] > 1 and timing["generation_s"] > 0:
        rate = (timing["tokens"] - 1) / timing["generation_s"]
        text += (f" ({'its last call: ' if resp.repaired else ''}{timing['prompt_s']:.1f} s to the first token,"
                 f" then {rate:.1f} tokens/s)")
    return text


def _empty_configs(text: str) -> int:
    """How many of the answer's configs are empty objects (each is filled in as the default)."""
    try:
        value = extract_json(text)
    except Exception:  # noqa: BLE001 - parse_configs has already said what is wrong with the text
        return 0
    items = value.get("configs") if isinstance(value, dict) else value
    if not isinstance(items, list):
        return 0
    return sum(1 for it in items
               if (it.get("config") if isinstance(it, dict) and "config" in it else it) == {})
