"""Keeping API keys out of logs, transcripts and the store.

Keys are read only from the environment.  Everything kerntune writes about an
exchange goes through ``redact``, which replaces the value of every
environment variable whose name looks like a secret.
"""

from __future__ import annotations

import os
import re

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)
_KEY_SHAPES = re.compile(r"\b(sk-[A-Za-z0-9_\-]{16,}|sk-ant-[A-Za-z0-9_\-]{16,})\b")
MASK = "[REDACTED]"


def secret_values() -> list[str]:
    vals = [v for k, v in os.environ.items() if _SECRET_NAME.search(k) and len(v) >= 8]
    return sorted(set(vals), key=len, reverse=True)


def redact(text: str) -> str:
    if not text:
        return text
    for value in secret_values():
        text = text.replace(value, MASK)
    return _KEY_SHAPES.sub(MASK, text)
