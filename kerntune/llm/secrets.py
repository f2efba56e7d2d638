"""API keys: where they come from, and keeping them out of logs, transcripts and the store.

Keys are read from the environment (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``) or,
when the variable is unset, from the system keyring (``keyring set kerntune
OPENAI_API_KEY``) — never from a file kerntune writes, a command-line option (which
``ps`` shows to every user) or the store.  Everything kerntune writes about an
exchange goes through ``redact``, which replaces the value of every environment
variable whose name looks like a secret, every key read from the keyring, and
anything shaped like an OpenAI or Anthropic key.
"""

from __future__ import annotations

import base64
import functools
import logging
import os
import re
import urllib.parse

from kerntune.errors import KerntuneError
from kerntune.llm.types import LLMError

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)
_KEY_SHAPES = re.compile(r"\b(sk-[A-Za-z0-9_\-]{16,}|sk-ant-[A-Za-z0-9_\-]{16,})\b")
MASK = "[REDACTED]"
#: The keyring service name: ``keyring set kerntune OPENAI_API_KEY`` stores a key for kerntune.
KEYRING_SERVICE = "kerntune"

log = logging.getLogger("kerntune.llm")


class MissingAPIKey(LLMError, KerntuneError):
    """No key in the environment or the keyring: an LLM failure to the code that handles those,
    and a user error to the CLI (one line, exit code 2, no traceback)."""


# Keys read from the keyring are not in the environment, so redact() must be told them.
_registered: set[str] = set()


def api_key(name: str) -> str | None:
    """The key named ``name`` (e.g. ``OPENAI_API_KEY``): the environment first, then the keyring.

    A keyring that is missing, locked or broken counts as holding no key (the caller then
    says which variable to set): a key lookup must never be what stops a tuning run.
    """
    value = os.environ.get(name)
    if value:
        return value
    value = _from_keyring(name)
    if value:
        register_secret(value)
    return value or None


def _from_keyring(name: str) -> str | None:
    try:
        import keyring
    except ImportError:
        return None
    try:
        return keyring.get_password(KEYRING_SERVICE, name)
    except Exception as exc:  # noqa: BLE001 - every backend raises its own errors (no backend, locked, D-Bus)
        log.debug("keyring lookup of %s failed: %s", name, type(exc).__name__)
        return None


def register_secret(value: str) -> None:
    """Redact ``value`` from everything written from now on (keys that are not in the environment)."""
    if value and len(value) >= 8:
        _registered.add(value)


def secret_values() -> list[str]:
    vals = [v for k, v in os.environ.items() if _SECRET_NAME.search(k) and len(v) >= 8]
    return sorted(set(vals) | _registered, key=len, reverse=True)


def _variants(value: str) -> list[str]:
    """Spellings of a key a server or model may echo: as is (matched in any letter case),
    URL-encoded, and base64 (alone, or inside a longer base64 text at any of the three
    byte alignments, e.g. HTTP Basic credentials).  Cheap to compute, so always covered."""
    raw = value.encode("utf-8", "replace")
    out = {value, urllib.parse.quote(value, safe=""), urllib.parse.quote_plus(value)}
    for pad in range(3):
        for enc in (base64.b64encode, base64.urlsafe_b64encode):
            text = enc(b"\0" * pad + raw).decode().rstrip("=")
            # Characters that mix bits of the key with its neighbours depend on the neighbours.
            core = text[(pad * 8 + 5) // 6: len(text) - (1 if (pad + len(raw)) % 3 else 0)]
            if len(core) >= 8:
                out.add(core)
    return sorted(out, key=len, reverse=True)


@functools.lru_cache(maxsize=16)
def _pattern(values: tuple[str, ...]) -> re.Pattern[str] | None:
    spellings = sorted({v for value in values for v in _variants(value)}, key=len, reverse=True)
    return re.compile("|".join(map(re.escape, spellings)), re.IGNORECASE) if spellings else None


def redact(text: str) -> str:
    """``text`` with every known key, in every cheap spelling, and every key-shaped token masked."""
    if not text:
        return text
    if not isinstance(text, str):
        text = str(text)
    pattern = _pattern(tuple(secret_values()))
    if pattern is not None:
        text = pattern.sub(MASK, text)
    return _KEY_SHAPES.sub(MASK, text)
