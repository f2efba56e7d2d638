"""What crosses the LLM boundary: messages in, a Response out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Message:
    role: str          # system | user | assistant
    content: str

    def to_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass
class RawReply:
    """What a provider returns before kerntune parses anything."""

    text: str
    usage: Usage = field(default_factory=Usage)
    model: str = ""


@dataclass
class Response:
    text: str
    parsed: Any = None
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    cost: float = 0.0
    provider: str = ""
    model: str = ""
    cached: bool = False
    attempts: int = 1
    repaired: bool = False
    #: Every answer this response took, repair calls included, in order: one dict per call,
    #: ``{"text", "model", "tokens_in", "tokens_out"}`` or ``{"error"}``.  The store keeps them
    #: so that a resumed run replays each call, not only the last.
    calls: list[dict[str, Any]] = field(default_factory=list)


class LLMError(Exception):
    """The model could not be reached or did not answer usably (after retries).

    ``calls`` (as ``Response.calls``) and ``response`` (the last answer, when there was one)
    say what the model did answer before the call failed, so it can be stored.
    """

    calls: list[dict[str, Any]] | None = None
    response: "Response | None" = None


class TransientError(LLMError):
    """Worth retrying: rate limits, 5xx, timeouts, dropped connections."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
