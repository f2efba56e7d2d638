"""Choosing a provider from a spec string (``--llm SPEC`` / ``$KERNTUNE_LLM``)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

from kerntune.errors import KerntuneError
from kerntune.llm.providers.base import Provider
from kerntune.llm.secrets import api_key
from kerntune.llm.types import LLMError

SPECS = ("openai:MODEL, anthropic:MODEL, ollama:MODEL, local:[PATH], cmd:COMMAND, files:DIR, replay:FILE, "
         "replay:FILE|SPEC (then SPEC), auto")


@dataclass
class Choice:
    spec: str
    why: str


def _ollama_answers(host: str = "127.0.0.1", port: int = 11434) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.3):
            return True
    except OSError:
        return False


def resolve_auto() -> Choice:
    """KERNTUNE_LLM, then OPENAI_API_KEY, then ANTHROPIC_API_KEY (each from the environment or
    the keyring), then a local Ollama server, then the embedded model."""
    env = os.environ.get("KERNTUNE_LLM", "").strip()
    if env and env != "auto":
        return Choice(env, "KERNTUNE_LLM is set")
    if api_key("OPENAI_API_KEY"):
        return Choice(f"openai:{os.environ.get('KERNTUNE_OPENAI_MODEL', 'gpt-4.1-mini')}",
                      "OPENAI_API_KEY is set (environment or keyring)")
    if api_key("ANTHROPIC_API_KEY"):
        return Choice(f"anthropic:{os.environ.get('KERNTUNE_ANTHROPIC_MODEL', 'claude-sonnet-4-5')}",
                      "ANTHROPIC_API_KEY is set (environment or keyring)")
    if _ollama_answers():
        return Choice(f"ollama:{os.environ.get('KERNTUNE_OLLAMA_MODEL', 'qwen2.5-coder:7b')}",
                      "an Ollama server answers on localhost:11434")
    return Choice("local:", "no API key and no Ollama server: using the embedded local model")


def make_provider(spec: str, base_url: str | None = None) -> Provider:
    """The provider a ``--llm`` spec names.  A spec that cannot work (an empty or unbalanced
    ``cmd:``, a missing or binary transcript, a model file that is not there, a ``files:``
    folder that cannot be written) is refused here, in one line, before anything is measured."""
    try:
        if spec.partition(":")[0] == "files":
            _check_folder(spec.partition(":")[2] or "llm-exchanges")
        return _make_provider(spec, base_url)
    except LLMError as exc:
        raise KerntuneError(str(exc)) from None
    except ValueError as exc:   # shlex: "No closing quotation"; a transcript that is not UTF-8
        raise KerntuneError(f"bad --llm spec {spec[:80]!r}: {exc}") from None
    except OSError as exc:
        raise KerntuneError(f"--llm {spec[:80]!r}: {exc.strerror or exc}") from None


def _check_folder(directory: str) -> None:
    """A ``files:`` folder must be a directory this process can write (or create)."""
    path = Path(directory)
    if path.exists() and not path.is_dir():
        raise KerntuneError(f"files: {directory} is not a directory")
    here = path if path.exists() else next((p for p in path.parents if p.exists()), Path("."))
    if not here.is_dir() or not os.access(here, os.W_OK | os.X_OK):
        raise KerntuneError(f"files: cannot write in {here} (permission denied); give a folder you can write")


def _make_provider(spec: str, base_url: str | None = None) -> Provider:
    from kerntune.llm.providers.http_sdk import AnthropicProvider, OllamaProvider, OpenAIProvider
    from kerntune.llm.providers.local import CommandProvider, FilesProvider, LocalModelProvider, ReplayProvider

    if spec == "auto":
        spec = resolve_auto().spec
    kind, sep, arg = spec.partition(":")
    if not sep and kind != "local":
        raise KerntuneError(f"bad --llm spec {spec!r} (expected one of: {SPECS})")
    if kind == "openai":
        return OpenAIProvider(arg or "gpt-4.1-mini", base_url=base_url)
    if kind == "anthropic":
        return AnthropicProvider(arg or "claude-sonnet-4-5", base_url=base_url)
    if kind == "ollama":
        return OllamaProvider(arg or "qwen2.5-coder:7b", base_url=base_url)
    if kind == "local":
        return LocalModelProvider(arg)
    if kind == "cmd":
        return CommandProvider(arg)
    if kind == "files":
        return FilesProvider(arg or "llm-exchanges")
    if kind == "replay":
        path, bar, then = arg.partition("|")
        return ReplayProvider(path, then=make_provider(then, base_url) if bar else None)
    raise KerntuneError(f"unknown LLM provider {kind!r} (expected one of: {SPECS})")


__all__ = ["Choice", "Provider", "SPECS", "make_provider", "resolve_auto"]
