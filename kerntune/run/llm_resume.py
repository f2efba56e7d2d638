"""A resumed run's model calls, answered from its stored exchanges before the live model.

Why: a model at temperature > 0 would answer differently the second time, and the strategy
would leave the path whose trials the store holds; replaying the stored answers keeps the
resumed run on it.  ``kerntune.run.search.run_search`` wraps the run's client with
``resumed_client`` when the store holds exchanges for the run it resumes.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from kerntune.errors import KerntuneError
from kerntune.llm.providers.base import Provider
from kerntune.llm.providers.local import ReplayProvider
from kerntune.llm.types import LLMError, Message, RawReply, Usage


class ResumeProvider(Provider):
    """Answers a resumed run's first calls from its stored exchanges, then the live model.

    Every call is replayed, repair calls included (``calls`` of each exchange), in the order
    they were made: a round whose repair still failed must not take the next round's answer
    as its repair.  A live ``replay:`` transcript goes on past the calls replayed here (it began
    again at answer #1).  ``held``: how many of the stored calls the run's transcript holds already;
    the client copies the others into it, so that it alone replays the whole run.
    """

    def __init__(self, live: Provider, exchanges: list[dict[str, Any]], held: int = 0) -> None:
        super().__init__(live.model)
        # (call, seconds, whether the transcript holds it): an exchange's stored seconds ride on its first call
        calls = [(call, float(ex.get("latency_s") or 0.0) if i == 0 else 0.0)
                 for ex in exchanges for i, call in enumerate(_calls_of(ex))]
        self.pending = [(call, seconds, n < held) for n, (call, seconds) in enumerate(calls)]
        if isinstance(live, ReplayProvider):
            live = live.after(len(self.pending))
        self.name, self.structured, self.live = live.name, live.structured, live
        #: Whether the last answer is in the client's transcript already (``LLMClient._in_transcript_already``
        #: reads it with ``transcript_path``): a stored call the transcript holds, or the live replay's say
        self.last_replayed = False
        self.transcript_path: Path | None = None
        self.replayed_s: float | None = None  # stored seconds of the calls replayed since the last take

    def send(self, messages: list[Message], schema: dict[str, Any] | None, temperature: float, max_tokens: int,
             timeout: float) -> RawReply:
        self.last_replayed, self.transcript_path = False, None
        if not self.pending:
            try:
                return self.live.send(messages, schema, temperature, max_tokens, timeout)
            finally:
                self.last_replayed = bool(getattr(self.live, "last_replayed", False))
                self.transcript_path = getattr(self.live, "transcript_path", None)
        call, seconds, held = self.pending.pop(0)
        self.last_replayed = held
        self.replayed_s = (self.replayed_s or 0.0) + seconds
        if call.get("error"):
            raise LLMError(call["error"])
        return RawReply(call.get("text") or "", Usage(call.get("tokens_in") or 0, call.get("tokens_out") or 0),
                        call.get("model") or "")

    def take_replayed_seconds(self) -> float | None:
        """The seconds the replayed calls took when they were made (None: none was replayed): the
        round charges them, so that a search whose steps depend on the model's time (``auto``
        measuring while the model thinks, on a recording's clock) re-walks its stored path."""
        seconds, self.replayed_s = self.replayed_s, None
        return seconds


def _calls_of(exchange: dict[str, Any]) -> list[dict[str, Any]]:
    """The calls of one stored exchange; a store written before calls were kept has one per exchange."""
    if exchange.get("calls") is not None:
        return list(exchange["calls"])
    if exchange.get("error"):
        return [{"error": exchange["error"]}]
    return [{"text": exchange["response"], "model": exchange["model"], "tokens_in": exchange.get("tokens_in"),
             "tokens_out": exchange.get("tokens_out")}]


def _answers_in(transcript: Path | str | None) -> int:
    """The calls a transcript holds (its answer and failure lines, what ``replay:`` reads); 0 for none or
    a file that cannot be read.  The run's calls are its first ones: it is the run's own transcript,
    appended to from its start, or a new file."""
    if transcript is None:
        return 0
    try:
        with open(transcript, encoding="utf-8", errors="replace") as fh:
            return sum(1 for line in fh if _is_call(line))
    except OSError:
        return 0


def _is_call(line: str) -> bool:
    try:
        entry = json.loads(line)
    except ValueError:
        return False
    return isinstance(entry, dict) and ("response" in entry or "error" in entry)


def check_new_transcript(transcript: Path | str | None, spec: str | None, flag: str = "--llm-transcript") -> None:
    """A new run's transcript must hold no model calls yet; refused before anything is measured.  Why: a
    new run appended its calls to another run's, and ``replay:`` of the file then gave the second run the
    first run's answers.  A resume appends to its run's own (``resumed_transcript``), and a run that
    replays this very file (``replay:FILE``, ``replay:FILE|SPEC``) answers its first calls from it and
    appends only the new ones: the README's run spread over several sessions."""
    held = _answers_in(transcript)
    if not held or _replays(spec, transcript):
        return
    raise KerntuneError(f"{flag} {transcript} already holds {held} model calls of another run: give a new path"
                        " or delete it (only a resumed run appends to its own transcript)")


def _replays(spec: str | None, transcript: Path | str | None) -> bool:
    """Whether ``spec`` replays ``transcript`` from its first answer (``replay:FILE`` or ``replay:FILE|SPEC``)."""
    kind, _, arg = (spec or "").partition(":")
    path = arg.partition("|")[0]
    return kind == "replay" and bool(path) and transcript is not None and \
        Path(path).resolve() == Path(transcript).resolve()


def resumed_client(client: Any, exchanges: list[dict[str, Any]]) -> Any:
    """A copy of ``client`` (an ``LLMClient``) whose first calls are answered from ``exchanges``.
    Those its transcript lacks (a resume given a new ``--llm-transcript``) are copied into it."""
    clone = copy.copy(client)
    clone.provider = ResumeProvider(client.provider, exchanges, held=_answers_in(client.transcript))
    clone.cache = False  # every stored call is replayed from the store, none from a cache
    return clone
