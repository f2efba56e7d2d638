"""The provider interface: one request, one raw reply, errors classified.

Providers do no retries, caching or parsing — the client does those once for
all of them — so a provider is only the translation to one wire protocol.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from kerntune.llm.types import Message, RawReply


class Provider(ABC):
    name: str = "provider"
    #: True when the provider enforces a JSON schema itself (structured output).
    structured: bool = False
    #: The server it talks to (a base URL), "" for none: part of the response cache's key, since two
    #: servers can serve models of the same name.
    endpoint: str = ""

    def __init__(self, model: str) -> None:
        self.model = model

    @abstractmethod
    def send(self, messages: list[Message], schema: dict[str, Any] | None, temperature: float,
             max_tokens: int, timeout: float) -> RawReply:
        ...

    @property
    def spec(self) -> str:
        return f"{self.name}:{self.model}"

    def fresh(self) -> "Provider":
        """The provider for another run: itself, unless it keeps a run's state (``replay:`` its
        position in the transcript), which a new run must not inherit."""
        return self

    def close(self) -> None:
        """Release connections or a loaded model."""
