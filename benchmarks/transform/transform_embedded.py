"""The embedded model (``local:``, Gemma 3 270M) in ``benchmarks/transform/transform_gpu.py``, in phases.

The GPU machine cannot run the embedded model (its weights do not travel there), so its runs are
done in rounds:

1. GPU: ``transform_gpu.py --models embedded`` runs every (kernel, strategy) with ``RecordedModel``,
   a provider that answers each request from a recorded transcript
   (``benchmarks/transform/transcripts/embedded.jsonl``).  The first request that is not in the
   transcript is appended to a misses file and ends that run: ``AwaitingModelAnswer`` is raised,
   which is deliberately *not* an ``LLMError`` (the strategies catch ``LLMError`` and carry on down
   another path, as if the model had failed) nor a ``KerntuneError``, so it leaves
   ``KernelTransformer.run`` and the run is reported ``ok: False, awaiting_model: True``.
2. CPU: ``python benchmarks/transform/transform_embedded.py answer MISSES.jsonl`` asks the real embedded model
   every missing request (same messages, schema, temperature and max_tokens, through the local
   provider's ``send``) and appends the answers to the transcript.  It resumes: requests already in
   the transcript are skipped.
3. Repeat until no run has misses; the last GPU call's results are the embedded model's results.

Speculation (``transform_gpu.py --speculate``, CPU) cuts the rounds: before a GPU call it runs every
(kernel, strategy) with ``LiveRecorder`` (a miss is asked of the live model at once and recorded) and
the GPU stood in for by ``speculation()`` up to the first rewrite that must be compiled and measured,
so the requests that do not depend on a measurement (repairs of unusable answers, judgements, plans,
the next step after a rewrite the checks refused) are answered before the GPU call asks them.  It
decides nothing: the GPU run still looks every request up by its key.

The lookup key.  Prompts carry measured numbers (the original kernel's time, speedups, the times in
a rejected step's reason) that differ slightly from one GPU call to the next, so the key is a hash
of the request with those numbers masked: every decimal number (``\\d+\\.\\d+`` with an optional
exponent), every number in exponent notation (``1e-05``) and every integer directly followed by
``ms`` (``.4g`` writes 1234.5 ms as ``1234 ms``) become ``#``, in every message; the schema,
temperature and max_tokens are part of the key unmasked.  Everything else, integers included
(kernel sources, tunable parameter values, best configurations, counts), must match exactly: if a
best configuration or an accept/reject decision changes between GPU calls, the prompt is new and is
a miss, answered in the next round.  Each model call records whether the exact prompt text matched
the recorded one (``exact``) or only its masked form (``masked``); ``transform_gpu.py`` puts these
in each result (``model_calls``).

A model error is recorded too: when the local provider raises ``LLMError`` (a prompt longer than
its context window, say), the transcript entry holds ``error`` instead of ``response`` and the
replay raises the same ``LLMError``, so the strategy takes the path it would take with the live
model.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kerntune.llm.providers.base import Provider  # noqa: E402
from kerntune.llm.types import LLMError, Message, RawReply, TransientError, Usage  # noqa: E402

TRANSCRIPT = ROOT / "benchmarks" / "transform" / "transcripts" / "embedded.jsonl"

#: decimals (with an optional exponent), exponent-notation numbers, integers right before "ms"
MEASURED = re.compile(r"\d+\.\d+(?:[eE][-+]?\d+)?|(?<![\w.])\d+[eE][-+]?\d+(?![\w.])|(?<![\w.])\d+(?=\s?ms\b)")
MARKER = re.compile(r"<!--\s*kerntune-transform:\s*([a-z\-]+)\s*-->")


class AwaitingModelAnswer(Exception):
    """A request the transcript has no answer for: the run stops here until the model answers it.

    An ``Exception`` but neither an ``LLMError`` (strategies swallow those as a failed model call) nor a
    ``KerntuneError``: nothing in kerntune's transform code catches it, so it ends ``KernelTransformer.run``.
    """

    def __init__(self, run: str, key: str, misses: Path) -> None:
        super().__init__(f"awaiting model answer for {run or 'a request'} (key {key[:12]}, written to {misses})")
        self.run, self.key, self.misses = run, key, misses


def mask(text: str) -> str:
    return MEASURED.sub("#", text)


def messages_of(messages: list[Message] | list[dict[str, str]]) -> list[dict[str, str]]:
    return [m.to_dict() if isinstance(m, Message) else {"role": m["role"], "content": m["content"]}
            for m in messages]


def request_key(messages: list[Message] | list[dict[str, str]], schema: Any, temperature: float,
                max_tokens: int) -> str:
    """sha256 of the messages with measured numbers masked, the schema, temperature and max_tokens."""
    blob = json.dumps({"messages": [[m["role"], mask(m["content"])] for m in messages_of(messages)],
                       "schema": schema, "temperature": float(temperature), "max_tokens": int(max_tokens)},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def kind_of(messages: list[dict[str, str]]) -> str:
    for m in reversed(messages):
        found = MARKER.search(m["content"])
        if found:
            return found.group(1) + ("+repair" if messages[-1]["role"] == "user" and len(messages) > 2 else "")
    return ""


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Entries of a JSONL file; a torn last line (a session that ended mid-write) is skipped."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                print(f"warning: {path}: skipping a line that is not JSON", file=sys.stderr)
    return out


def append_jsonl(path: Path, entry: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        fh.seek(0, os.SEEK_END)
        if fh.tell():  # after a torn line, start a new one
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                fh.write(b"\n")
        fh.write((json.dumps(entry) + "\n").encode())
        fh.flush()
        os.fsync(fh.fileno())


class RecordedModel(Provider):
    """Answers from a recorded transcript keyed by ``request_key``; a miss is written to ``misses``
    (once per key) and raises ``AwaitingModelAnswer``.  ``calls`` lists every answered call with
    ``match``: ``exact`` (the prompt text is the recorded one) or ``masked`` (equal only with the
    measured numbers masked)."""

    name = "recorded"
    structured = True  # as the embedded model: llama.cpp constrains its decoding to the schema

    def __init__(self, transcript: str | Path = TRANSCRIPT, misses: str | Path = "misses.jsonl", run: str = "",
                 model: str = "embedded") -> None:
        super().__init__(model)
        self.transcript, self.misses, self.run = Path(transcript), Path(misses), run
        self.entries: dict[str, dict[str, Any]] = {}
        for e in read_jsonl(self.transcript):
            if "key" in e and ("response" in e or "error" in e):
                self.entries.setdefault(e["key"], e)
        self.calls: list[dict[str, Any]] = []

    def send(self, messages: list[Message], schema: dict[str, Any] | None, temperature: float,
             max_tokens: int, timeout: float) -> RawReply:
        msgs = messages_of(messages)
        key = request_key(msgs, schema, temperature, max_tokens)
        entry = self.entries.get(key)
        if entry is None:
            if key not in {m.get("key") for m in read_jsonl(self.misses)}:
                append_jsonl(self.misses, {"key": key, "messages": msgs, "schema": schema,
                                           "temperature": temperature, "max_tokens": max_tokens, "run": self.run})
            self.calls.append({"kind": kind_of(msgs), "key": key[:12], "match": "miss"})
            raise AwaitingModelAnswer(self.run, key, self.misses)
        self.calls.append({"kind": kind_of(msgs), "key": key[:12],
                           "match": "exact" if entry.get("messages") == msgs else "masked"})
        if "error" in entry:
            raise LLMError(entry["error"])
        usage = entry.get("usage") or {}
        return RawReply(entry["response"], Usage(usage.get("input_tokens", 0), usage.get("output_tokens", 0)),
                        entry.get("model") or self.model)


# -- phase 2: the real model answers the misses -------------------------------------------------------
def ask_live(provider: Provider, m: dict[str, Any], transcript: Path, label: str = "") -> dict[str, Any] | None:
    """Ask the live model one recorded request ``m`` (messages, schema, temperature, max_tokens, key) and
    append the answer (or the model's ``LLMError``, replayed as such) to ``transcript``.  None on a
    transient error: not an answer, so nothing is recorded and the request stays open."""
    msgs = [Message(d["role"], d["content"]) for d in m["messages"]]
    entry: dict[str, Any] = {"key": m["key"], "messages": m["messages"], "schema": m.get("schema"),
                             "temperature": m["temperature"], "max_tokens": m["max_tokens"]}
    what = f"{label}{m.get('run', '')} {kind_of(m['messages'])}"
    t1 = time.perf_counter()
    try:
        raw = provider.send(msgs, m.get("schema"), m["temperature"], m["max_tokens"], 3600.0)
    except TransientError as exc:
        print(f"{what}: transient error, not recorded: {exc}", flush=True)
        return None
    except LLMError as exc:  # what the live model would have raised: replayed as such
        seconds = time.perf_counter() - t1
        entry.update(error=str(exc), model=provider.model, usage={"input_tokens": 0, "output_tokens": 0},
                     seconds=seconds, run=m.get("run", ""))
        append_jsonl(transcript, entry)
        print(f"{what}: model error in {seconds:.1f} s: {exc}", flush=True)
        return entry
    seconds = time.perf_counter() - t1
    entry.update(response=raw.text, model=raw.model or provider.model,
                 usage={"input_tokens": raw.usage.input_tokens, "output_tokens": raw.usage.output_tokens},
                 seconds=seconds, run=m.get("run", ""))
    append_jsonl(transcript, entry)
    out = raw.usage.output_tokens
    print(f"{what}: {raw.usage.input_tokens} in, {out} out tokens in {seconds:.1f} s"
          f" ({out / max(seconds, 1e-9):.1f} tokens/s)", flush=True)
    return entry


def answer(misses: Path, transcript: Path = TRANSCRIPT, spec: str = "local:", limit: int | None = None) -> int:
    """Ask the model (``spec``, default the embedded one) every missing request not yet in ``transcript``;
    append each answer at once, so an interrupted session resumes where it stopped.  Returns how many
    requests were answered now."""
    done = {e.get("key") for e in read_jsonl(transcript)}
    todo: list[dict[str, Any]] = []
    for m in read_jsonl(misses):
        m["key"] = request_key(m["messages"], m.get("schema"), m["temperature"], m["max_tokens"])
        if m["key"] not in done:
            done.add(m["key"])
            todo.append(m)
    if limit is not None:
        todo = todo[:limit]
    print(f"{len(todo)} request(s) to answer into {transcript}", flush=True)
    if not todo:
        return 0
    from kerntune.llm.providers import make_provider

    t0 = time.perf_counter()
    provider = make_provider(spec)
    print(f"model {provider.spec} loaded in {time.perf_counter() - t0:.1f} s", flush=True)
    answered = 0
    try:
        for i, m in enumerate(todo, 1):
            answered += ask_live(provider, m, transcript, label=f"[{i}/{len(todo)}] ") is not None
    finally:
        provider.close()
    return answered


# -- speculation: answer on the CPU, ahead of the GPU, what does not depend on a measurement -----------
class NeedsGPU(Exception):
    """A speculative run reached the point where a rewrite must be compiled and measured: what the model is
    asked next depends on that measurement, so the speculation of this run ends here."""


class LiveRecorder(RecordedModel):
    """A ``RecordedModel`` that asks the live model at once for a request the transcript lacks (and records
    the answer) instead of stopping the run: used by ``transform_gpu.py --speculate`` on the CPU."""

    def __init__(self, live: Provider, transcript: str | Path = TRANSCRIPT, run: str = "") -> None:
        super().__init__(transcript, misses=os.devnull, run=run)
        self.live = live

    def send(self, messages: list[Message], schema: dict[str, Any] | None, temperature: float,
             max_tokens: int, timeout: float) -> RawReply:
        msgs = messages_of(messages)
        key = request_key(msgs, schema, temperature, max_tokens)
        if key not in self.entries:
            entry = ask_live(self.live, {"key": key, "messages": msgs, "schema": schema, "temperature": temperature,
                                         "max_tokens": max_tokens, "run": self.run}, self.transcript, label="  live ")
            if entry is None:
                raise TransientError("the live model gave no answer (transient error)")
            self.entries[key] = entry
        return super().send(messages, schema, temperature, max_tokens, timeout)


@contextmanager
def speculation(device: str, max_threads: int) -> Iterator[None]:
    """Run ``KernelTransformer`` on a machine without the GPU, up to the first measurement that decides a prompt.

    Why this is sound: the GPU run is the only one whose results count, and it looks every request up by
    its key, so an answer made here is used only if the GPU run asks exactly the same request (measured
    numbers masked).  What stands in for the GPU here: the original kernel's time (a masked number in
    every prompt; 1 ms), its best configuration (the only one: the originals have one value per
    parameter), the device's name and its thread limit (as the GPU machine reports them).  A rewrite that
    must be compiled and tuned raises ``NeedsGPU``: what comes next depends on the measurement.
    """
    from unittest import mock

    from kerntune.transform.context import KernelState, TransformContext

    def measure_original(self: Any) -> Any:
        self.session.device_name, self.session.max_threads = device, max_threads
        self.original_state = self.current = KernelState(self.original, dict(self.original.space().default), 1.0)
        self.on_event("original kernel: not measured (CPU speculation)")
        return self.current

    def tune(self: Any, spec: Any, rec: Any) -> None:
        raise NeedsGPU(f"step {rec.id}: its rewrite must be compiled and measured on the GPU")

    with mock.patch.object(TransformContext, "measure_original", measure_original), \
            mock.patch.object(TransformContext, "_tune", tune):
        yield


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("answer", help="answer every missing request with the real model (CPU)")
    a.add_argument("misses", type=Path)
    a.add_argument("--transcript", type=Path, default=TRANSCRIPT)
    a.add_argument("--llm", default="local:", help="the model (default: the embedded one, local:)")
    a.add_argument("--limit", type=int, default=None, help="answer at most this many now")
    args = ap.parse_args(argv)
    if args.cmd == "answer":
        answer(args.misses, args.transcript, args.llm, args.limit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
