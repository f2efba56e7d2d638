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


class LLMError(Exception):
    """The model could not be reached or did not answer usably (after retries)."""


class TransientError(LLMError):
    """Worth retrying: rate limits, 5xx, timeouts, dropped connections."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
