"""The one LLM call kerntune makes: ``LLMClient.complete``.

Retries (exponential backoff with jitter, Retry-After honoured), timeouts,
token and cost accounting, an on-disk response cache, transcripts, structured
output where the provider has it and tolerant JSON extraction plus one repair
round where it does not — all here, once, for every provider.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import random
import re
import threading
import time
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from kerntune.llm.parsing import ParseError, extract_json
from kerntune.llm.providers import Provider, make_provider
from kerntune.llm.secrets import redact
from kerntune.llm.types import LLMError, Message, RawReply, Response, TransientError

log = logging.getLogger("kerntune.llm")

#: USD per million tokens (input, output); override with ``prices=``.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4.1-nano": (0.1, 0.4), "gpt-4.1-mini": (0.4, 1.6), "gpt-4.1": (2.0, 8.0), "gpt-4o": (2.5, 10.0),
    "gpt-4o-mini": (0.15, 0.6),
    "claude-sonnet-4-5": (3.0, 15.0), "claude-haiku-4-5": (1.0, 5.0), "claude-opus-4-1": (15.0, 75.0),
}

#: What may follow a priced model's name in a served one: a date (-2025-04-14, -20250929, -0613, Vertex's
#: @20250929), perhaps with a version (-v1:0); anything else names another model.
_DATED = re.compile(r"[-@](\d{4}-\d{2}-\d{2}|\d{8}|\d{4})(-v\d+(:\d+)?)?")

Validator = Callable[[Any], list[str]]


@dataclass
class LLMClient:
    provider: Provider
    retries: int = 4
    timeout: float = 120.0
    backoff_base: float = 1.0
    backoff_max: float = 30.0
    cache_dir: Path | None = None
    cache: bool | None = None            # None: on when temperature == 0
    transcript: Path | None = None
    prices: dict[str, tuple[float, float]] = field(default_factory=lambda: dict(DEFAULT_PRICES))
    seed: int = 0
    store: Any = None                    # a kerntune Store: every exchange is kept, redacted
    run_id: str | None = None
    round_no: int = 0
    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    seconds: float = 0.0
    cost: float = 0.0
    #: for the spec "auto": which model it chose and why (``resolve_auto``), for the CLI to say
    chosen: str = ""
    #: the spec it was made from (``from_spec``): a stored run keeps it, so that ``--resume`` asks the same model
    spec: str = ""

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def for_new_run(self) -> "LLMClient":
        """A copy for another run (a comparison's next repeat): its own counters, and a provider that
        carries no state of the runs before (``Provider.fresh``: a ``replay:`` transcript from its start)."""
        return dataclasses.replace(self, provider=self.provider.fresh(), calls=0, tokens_in=0, tokens_out=0,
                                   seconds=0.0, cost=0.0)

    @classmethod
    def from_spec(cls, spec: str, base_url: str | None = None, **kwargs: Any) -> "LLMClient":
        if spec.strip() == "auto":
            from kerntune.llm.providers import resolve_auto

            choice = resolve_auto()
            return cls(make_provider(choice.spec, base_url), chosen=f"{choice.spec} ({choice.why})", spec=spec,
                       **kwargs)
        return cls(make_provider(spec, base_url), spec=spec, **kwargs)

    # -- the call ---------------------------------------------------------------------------
    def complete(self, messages: list[Message], schema: dict[str, Any] | None = None, temperature: float = 0.7,
                 max_tokens: int = 4096, timeout: float | None = None,
                 validate: Validator | None = None) -> Response:
        """Ask once (with retries); if a schema is given, parse JSON and repair once.

        ``validate`` returns a list of problems with the parsed value (e.g. the
        Space's field errors); problems trigger the same single repair round.
        """
        timeout = timeout or self.timeout
        calls: list[dict[str, Any]] = []
        resp = self._call(calls, messages, schema, temperature, max_tokens, timeout)
        if schema is None:
            return resp
        problems = self._parse(resp, validate)
        if not problems:
            return resp
        repair = list(messages) + [
            Message("assistant", _utf8(resp.text[:8000])),
            Message("user", "Your answer could not be used:\n- " + "\n- ".join(problems[:20])
                    + "\nAnswer again with one JSON value only, fixing these problems."),
        ]
        try:
            fixed = self._call(calls, repair, schema, temperature, max_tokens, timeout)
        except LLMError as exc:
            exc.response = resp  # the first answer is still worth storing
            raise
        fixed.repaired = True
        fixed.latency_s += resp.latency_s
        fixed.attempts += resp.attempts
        fixed.usage.input_tokens += resp.usage.input_tokens
        fixed.usage.output_tokens += resp.usage.output_tokens
        fixed.cost += resp.cost
        later = self._parse(fixed, validate)
        if later and fixed.parsed is None:
            exc = LLMError(redact(f"{self.provider.spec}: no usable JSON after one repair round: {later[0]}"))
            exc.calls, exc.response = calls, fixed
            raise exc
        return fixed

    def _call(self, calls: list[dict[str, Any]], messages: list[Message], schema: Any, temperature: float,
              max_tokens: int, timeout: float) -> Response:
        """One call, appended to ``calls`` whether it answered or failed."""
        try:
            resp = self._cached_or_send(messages, schema, temperature, max_tokens, timeout)
        except LLMError as exc:
            _redact_error(exc)
            calls.append({"error": str(exc)})
            exc.calls = calls
            self._log_error(messages, schema, exc)
            raise
        calls.append({"text": resp.text, "model": resp.model, "tokens_in": resp.usage.input_tokens,
                      "tokens_out": resp.usage.output_tokens})
        resp.calls = calls
        return resp

    def _parse(self, resp: Response, validate: Validator | None) -> list[str]:
        try:
            resp.parsed = extract_json(resp.text)
        except ParseError as exc:
            resp.parsed = None
            return [str(exc)]
        return list(validate(resp.parsed)) if validate else []

    # -- transport with retries and cache ---------------------------------------------------
    def _cache_key(self, messages: list[Message], schema: Any, temperature: float, max_tokens: int) -> str:
        """Everything the answer depends on.  The endpoint is part of it: two OpenAI-compatible servers
        serving models of the same name (a vLLM and an Ollama "llama3") once shared their answers; and
        max_tokens is: an answer cut at 400 tokens is no answer to a request that allowed 4096."""
        endpoint = str(getattr(self.provider, "endpoint", "") or "")
        blob = json.dumps([self.provider.name, self.provider.model, endpoint, [m.to_dict() for m in messages],
                           schema, temperature, max_tokens], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    def _cached_or_send(self, messages: list[Message], schema: Any, temperature: float, max_tokens: int,
                        timeout: float) -> Response:
        use_cache = self.cache if self.cache is not None else temperature == 0
        path = None
        if use_cache and self.cache_dir is not None:
            path = Path(self.cache_dir) / f"{self._cache_key(messages, schema, temperature, max_tokens)}.json"
            data = _cached(path)
            if data is not None:
                resp = Response(data["text"], provider=self.provider.name,
                                model=redact(str(data.get("model", ""))), cached=True)
                self._log(messages, schema, resp)
                return resp
        resp = self._send_with_retries(messages, schema, temperature, max_tokens, timeout)
        if path is not None:
            _write_cache(path, resp)
        self._log(messages, schema, resp)
        return resp

    def _send_with_retries(self, messages: list[Message], schema: Any, temperature: float, max_tokens: int,
                           timeout: float) -> Response:
        last: TransientError | None = None
        t0 = time.perf_counter()
        for attempt in range(1, self.retries + 2):
            try:
                raw: RawReply = _within(timeout, self.provider.spec, self.provider.send, messages, schema,
                                        temperature, max_tokens, timeout)
            except TransientError as exc:
                last = exc
                if attempt > self.retries:
                    break
                delay = min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1)) * (0.5 + self._rng.random() / 2)
                delay = _retry_after(exc.retry_after, delay, timeout)
                log.warning("%s: %s; retry %d/%d in %.1f s", self.provider.spec, redact(str(exc)), attempt,
                            self.retries, delay)
                time.sleep(delay)
                continue
            except LLMError:
                raise
            except (ValueError, TypeError, AttributeError, LookupError, ArithmeticError, OSError) as exc:
                # an SDK's or a provider's own failure (a lone surrogate it cannot encode, a malformed
                # body) ends the call, not the run; other exceptions (a caller's own signals) pass
                raise LLMError(f"{self.provider.spec}: {type(exc).__name__}: {redact(str(exc))[:300]}") from None
            latency = time.perf_counter() - t0
            cost = self._price(raw)
            self.calls += 1
            self.tokens_in += raw.usage.input_tokens
            self.tokens_out += raw.usage.output_tokens
            self.seconds += latency
            self.cost += cost
            # Every field a server sends is text from outside: a proxy that echoes the request's
            # Authorization header in ``model`` must not put the key into the store or a report.
            return Response(raw.text, usage=raw.usage, latency_s=latency, cost=cost, provider=self.provider.name,
                            model=redact(str(raw.model or self.provider.model)), attempts=attempt)
        raise LLMError(f"{self.provider.spec}: gave up after {self.retries + 1} attempts: {redact(str(last))}")

    def _price(self, raw: RawReply) -> float:
        """The call's cost, 0 where the model's price is unknown: its own name, or a priced name followed
        by a date or version only ("gpt-4o-mini-2024-07-18" is gpt-4o-mini's).  Any other prefix is another
        model: gpt-4.1-nano was priced as gpt-4.1 (20x)."""
        model = str(raw.model or self.provider.model)
        price = self.prices.get(model) or next((self.prices[k] for k in self.prices
                                                if model.startswith(k) and _DATED.fullmatch(model[len(k):])), None)
        if not price:
            return 0.0
        return (raw.usage.input_tokens * price[0] + raw.usage.output_tokens * price[1]) / 1e6

    def _in_transcript_already(self) -> bool:
        """The last answer was replayed from the file this client's transcript goes to (a resumed run's
        stored answer: always; ``replay:T``: when T is that file)."""
        if not getattr(self.provider, "last_replayed", False):
            return False
        source = getattr(self.provider, "transcript_path", None)
        return source is None or Path(source).resolve() == Path(self.transcript).resolve()  # type: ignore[arg-type]

    def _log_error(self, messages: list[Message], schema: Any, exc: LLMError) -> None:
        """A failed call's line in the transcript (``error`` where an answer has ``response``).  Why:
        ``replay:`` hands out answers by position, and a failed call that left no line shifted every
        later answer onto the question before it; replayed, the line fails the same call again.
        Readers that know only ``response`` lines (kerntune before this line existed) skip it."""
        if self.transcript is None or self._in_transcript_already():
            return
        entry = {"provider": self.provider.name, "model": redact(str(self.provider.model)), "time": time.time(),
                 "messages": [{"role": m.role, "content": redact(m.content)} for m in messages],
                 "schema": schema, "error": redact(str(exc))}
        self._append(entry)

    def _append(self, entry: dict[str, Any]) -> None:
        Path(self.transcript).parent.mkdir(parents=True, exist_ok=True)  # type: ignore[arg-type]
        with open(self.transcript, "a") as fh:  # type: ignore[arg-type]
            fh.write(json.dumps(entry) + "\n")

    def _log(self, messages: list[Message], schema: Any, resp: Response) -> None:
        if self.store is not None:
            prompt = "\n\n".join(f"## {m.role}\n{redact(m.content)}" for m in messages)
            self.store.add_llm_exchange(self.run_id, self.round_no, self.provider.name, redact(resp.model), prompt,
                                        redact(resp.text), tokens_in=resp.usage.input_tokens,
                                        tokens_out=resp.usage.output_tokens, latency_s=resp.latency_s,
                                        cost=resp.cost)
        if self.transcript is None or self._in_transcript_already():
            return
        entry = {"provider": self.provider.name, "model": redact(resp.model), "time": time.time(),
                 "messages": [{"role": m.role, "content": redact(m.content)} for m in messages],
                 "schema": schema, "response": redact(resp.text), "cached": resp.cached,
                 "usage": {"input_tokens": resp.usage.input_tokens, "output_tokens": resp.usage.output_tokens},
                 "latency_s": resp.latency_s}
        self._append(entry)


def _retry_after(given: float | None, backoff: float, timeout: float) -> float:
    """A server's Retry-After, if it is a usable wait: finite, not negative, and no longer than the
    request's own timeout (a header of -1, nan or 1e400 once ended the run; 86400 slept a day)."""
    if given is None or not math.isfinite(given) or given < 0:
        return backoff
    return min(given, timeout)


def _utf8(text: str) -> str:
    """Text an SDK can send: a lone surrogate in a model's answer (``\ud800``) made the repair
    request fail to encode, outside the errors a round survives."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _redact_error(exc: LLMError) -> None:
    """``exc`` with its message redacted, in place (its type and fields, e.g. ``retry_after``, kept).
    Why: a provider's error quotes what it was given (a ``cmd:`` model's stderr, a server's error
    body), and the message reaches logs, the store and ``kerntune llm check``'s output."""
    text = str(exc)
    clean = redact(text)
    if clean != text:
        exc.args = (clean,)


def _write_cache(path: Path, resp: Response) -> None:
    """Keep an answer in the cache: redacted like the transcript and the store (a server that echoes
    the key put it in plain text into the cache folder), and written whole or not at all (a killed run
    leaves no half file behind).  A cache that cannot be written (a file where its folder should be, a
    full disk) costs the next run a call, so it is a warning: the answer, already paid for, is kept."""
    part = path.with_suffix(f".{os.getpid()}.part")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        part.write_text(json.dumps({"text": redact(resp.text), "model": redact(resp.model)}))
        os.replace(part, path)
    except OSError as exc:
        log.warning("response cache %s not written: %s", path.parent, exc.strerror or exc)
        try:
            part.unlink(missing_ok=True)
        except OSError:
            pass


def _cached(path: Path) -> dict[str, Any] | None:
    """A cached answer, or None when there is none or the file is damaged (a miss, not a crash)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("text"), str) else None


def on_daemon_thread(fn: Callable[..., Any], *args: Any) -> Future:
    """``fn(*args)`` on a daemon thread, as a Future.  Why a daemon thread and not a ThreadPoolExecutor:
    Python joins an executor's threads at exit, so Ctrl-C (or an error) during a model call kept the
    process waiting for the call, up to ``--llm-timeout``; a daemon thread is left behind at exit (a
    ``cmd:`` model's process group is ended by its provider's exit handler)."""
    future: Future = Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on the future
            future.set_exception(exc)

    threading.Thread(target=run, name="kerntune-model-call", daemon=True).start()
    return future


def _within(timeout: float, spec: str, send: Callable[..., RawReply], *args: Any) -> RawReply:
    """``send(*args)``, given up (a TransientError, retried as a timeout) ``timeout`` seconds plus a
    grace after it began.  Why: the HTTP SDKs' timeout is per read, so a server that trickles its
    answer a few bytes a second was never cut at --llm-timeout (12 s for a 3-s timeout, measured);
    providers that keep their own deadline (cmd:, local:) answer before this one."""
    future = on_daemon_thread(send, *args)
    if not wait([future], timeout + 2.0).done:
        raise TransientError(f"{spec}: no whole answer within {timeout:g} s")
    return future.result()
