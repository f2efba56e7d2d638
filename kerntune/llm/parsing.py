"""Turning model text into validated configs — never by evaluating it.

Models wrap JSON in code fences, add prose, pretty-print or minify, and
sometimes answer in Python syntax.  The text is searched for JSON values with
``json.JSONDecoder.raw_decode``; Python literals (single quotes, True/None,
list multiplication) are recognised and rejected with a message the repair
round can send back.  Every config is then normalised against the Space and
validated; rejects keep their reason so the store can show them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from kerntune.errors import SpaceError
from kerntune.space import Config, Space

MAX_RESPONSE_CHARS = 1_000_000
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_PYTHON_HINTS = (
    (re.compile(r"\{\s*'[^']*'\s*:"), "single-quoted keys (Python dict syntax); use double quotes"),
    (re.compile(r":\s*(True|False|None)\b"), "Python literals True/False/None; use true/false/null"),
    (re.compile(r"\]\s*\*\s*\d+"), "list multiplication ([x] * n); write the list out"),
)


class ParseError(ValueError):
    """The text holds no usable JSON; the message says why, for the repair round."""


@dataclass
class Rejected:
    item: Any
    reason: str


@dataclass
class ParsedConfigs:
    accepted: list[Config] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)

    @property
    def valid_share(self) -> float:
        total = len(self.accepted) + len(self.rejected)
        return len(self.accepted) / total if total else 0.0


def extract_json(text: str) -> Any:
    """The first JSON object or array in ``text`` (fenced blocks first)."""
    if not isinstance(text, str):
        raise ParseError(f"expected text, got {type(text).__name__}")
    if len(text) > MAX_RESPONSE_CHARS:
        raise ParseError(f"response too long ({len(text):,} characters)")
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    hint = next((why for pattern, why in _PYTHON_HINTS if pattern.search(text)), None)
    if hint is not None:
        # Python syntax: only a JSON value starting at the first bracket counts, so a
        # fragment inside the Python literal (e.g. "[16]" of "[16] * 2") is never taken.
        for chunk in candidates:
            first = min((i for i in (chunk.find("{"), chunk.find("[")) if i >= 0), default=-1)
            if first < 0:
                continue
            try:
                value, _ = decoder.raw_decode(chunk, first)
            except (json.JSONDecodeError, RecursionError):
                continue
            if isinstance(value, (dict, list)):
                return value
        raise ParseError(f"not JSON: {hint}")
    for chunk in candidates:
        for start in (i for i, ch in enumerate(chunk) if ch in "{["):
            try:
                value, _ = decoder.raw_decode(chunk, start)
            except json.JSONDecodeError:
                continue
            except RecursionError:
                raise ParseError("JSON nested too deeply") from None
            if isinstance(value, (dict, list)):
                return value
    raise ParseError("no JSON object or array found in the response")


def configs_from_answer(value: Any, space: Space, exclude: set[str] | None = None) -> ParsedConfigs:
    """Validate an answer ``{"configs":[{"reasoning","config"}]}`` (or a bare list).

    Sparse configs are filled from the default; duplicates within the answer
    and configs whose key is in ``exclude`` (already measured) are rejected.
    """
    items: Any = value.get("configs") if isinstance(value, dict) else value
    out = ParsedConfigs()
    if not isinstance(items, list):
        out.rejected.append(Rejected(value, "expected {\"configs\": [...]} or a list of configs"))
        return out
    seen = set(exclude or ())
    for item in items:
        reasoning = ""
        cfg = item
        if isinstance(item, dict) and "config" in item:
            cfg, reasoning = item["config"], str(item.get("reasoning", ""))[:500]
        if not isinstance(cfg, dict):
            out.rejected.append(Rejected(item, "a config must be an object of parameter values"))
            continue
        try:
            full = space.normalize(cfg)
        except SpaceError as exc:
            out.rejected.append(Rejected(item, str(exc)))
            continue
        errors = space.validate(full)
        if errors:
            out.rejected.append(Rejected(item, "; ".join(map(str, errors))))
            continue
        key = space.key(full)
        if key in seen:
            out.rejected.append(Rejected(item, "duplicate of a config already proposed or measured"))
            continue
        seen.add(key)
        out.accepted.append(full)
        out.reasons.append(reasoning)
    return out


def parse_configs(text: str, space: Space, exclude: set[str] | None = None) -> ParsedConfigs:
    """``extract_json`` then ``configs_from_answer``; raises ParseError only for unusable text."""
    return configs_from_answer(extract_json(text), space, exclude)
