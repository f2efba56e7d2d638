"""Turning model text into validated configs — never by evaluating it.

Models wrap JSON in code fences, add prose, pretty-print or minify, and
sometimes answer in Python syntax.  The text is searched for JSON values with
``json.JSONDecoder.raw_decode``; Python literals (single quotes, True/None,
list multiplication) are recognised and rejected with a message the repair
round can send back.  Every config is then normalised against the Space and
validated; rejects keep their reason so the store can show them.

Everything here is fed hostile text by the fuzz tests (tests/test_fuzz_replies.py):
whatever a model answers, ``extract_json`` raises only ParseError and
``configs_from_answer`` raises nothing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from kerntune.errors import SpaceError
from kerntune.space import Config, Space
from kerntune.space.kinds import ListParam, Permutation
from kerntune.space.params import IntRange, Param, canonical

MAX_RESPONSE_CHARS = 1_000_000
#: An answer is {"configs": [{"config": {"name": [values]}}]}: five levels.  Deeper JSON is
#: refused, so nothing downstream (json.dumps into the store, repr in messages) can recurse
#: past Python's limit on it.
MAX_DEPTH = 32
#: The model's reasons and the rejection messages are kept short: they go into the store and
#: into the repair prompt, and a rejected value may be a megabyte long.
MAX_REASON_CHARS = 300
MAX_REJECTION_CHARS = 1000
#: Every '{' and '[' of a reply is a candidate start, and a failed attempt scans up to where
#: it broke: a megabyte of unclosed brackets would cost minutes.  Past this many characters
#: scanned by failed attempts (about half a second; real replies need a thousandth of it)
#: the reply is refused.
MAX_SCAN_CHARS = 20_000_000
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_PYTHON_HINTS = (
    (re.compile(r"\{\s*'[^']*'\s*:"), "single-quoted keys (Python dict syntax); use double quotes"),
    (re.compile(r":\s*(True|False|None)\b"), "Python literals True/False/None; use true/false/null"),
    (re.compile(r"\]\s*\*\s*\d+"), "list multiplication ([x] * n); write the list out"),
)


class ParseError(ValueError):
    """The text holds no usable JSON; the message says why, for the repair round."""


def _decode(decoder: json.JSONDecoder, chunk: str, start: int, scanned: list[int] | None = None) -> Any:
    """One JSON value at ``start``, or None; ParseError when it cannot be one safely.

    ``ValueError`` is caught as a whole, not only JSONDecodeError: Python refuses integers
    of more than 4,300 digits with a plain ValueError (CVE-2020-10735), and a model can
    write one.  ``scanned`` accumulates the characters failed attempts went through.
    """
    try:
        value, _ = decoder.raw_decode(chunk, start)
    except RecursionError:
        raise ParseError("JSON nested too deeply") from None
    except ValueError as exc:
        if scanned is not None:
            scanned[0] += max(getattr(exc, "pos", 0) - start, 1)
            if scanned[0] > MAX_SCAN_CHARS:
                raise ParseError("no JSON object or array found in the response (too many broken brackets)") from None
        return None
    if isinstance(value, (dict, list)) and _depth(value) > MAX_DEPTH:
        raise ParseError(f"JSON nested too deeply (over {MAX_DEPTH} levels)")
    return value


def _depth(value: Any) -> int:
    """Nesting depth of a decoded JSON value, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            deepest = max(deepest, d)
            if d <= MAX_DEPTH:  # no need to look further down once it is too deep
                stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def _short(text: str, limit: int = MAX_REJECTION_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
    """The answer in ``text``: a ``{"configs": ...}`` object that decodes, wherever it is (fenced
    blocks first), else the first JSON object or array.

    Why the answer object comes first, before the Python-syntax hints: the hints are patterns
    over the whole reply, prose included ("Note: None of these...", "split_k: True" inside a JSON
    string), and a reply they matched was read from its first bracket only, so a bracket in the
    prose before the answer ("BM in [32, 128]") was taken and a valid answer lost to a repair call.
    The hints count only when no such object decodes.
    """
    if not isinstance(text, str):
        raise ParseError(f"expected text, got {type(text).__name__}")
    if len(text) > MAX_RESPONSE_CHARS:
        raise ParseError(f"response too long ({len(text):,} characters)")
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    hint = next((why for pattern, why in _PYTHON_HINTS if pattern.search(text)), None)
    scanned = [0]
    first: Any = None
    try:
        for chunk in candidates:
            for start in (i for i, ch in enumerate(chunk) if ch in "{["):
                value = _decode(decoder, chunk, start, scanned)
                if isinstance(value, dict) and "configs" in value:
                    return value     # the answer, past a bracketed list in prose before it ("BS in [32, 64]")
                if isinstance(value, (dict, list)) and first is None:
                    first = value
    except ParseError:
        if hint is None:
            raise
    if hint is not None:   # Python syntax the repair round can name, rather than "nested too deeply"
        return _first_bracket(candidates, decoder, hint)
    salvaged = _salvage(text, decoder)   # an answer that names "configs" but did not decode whole
    if salvaged is not None:
        return salvaged
    if first is not None:
        return first
    raise ParseError("no JSON object or array found in the response")


def _first_bracket(candidates: list[str], decoder: json.JSONDecoder, hint: str) -> Any:
    """A reply with Python syntax and no answer object: only a JSON value starting at a chunk's first
    bracket counts, so a fragment inside the Python literal (e.g. "[16]" of "[16] * 2") is never taken."""
    for chunk in candidates:
        first = min((i for i in (chunk.find("{"), chunk.find("[")) if i >= 0), default=-1)
        if first < 0:
            continue
        try:
            value = _decode(decoder, chunk, first)
        except ParseError:
            continue
        if isinstance(value, (dict, list)):
            return value
    raise ParseError(f"not JSON: {hint}")


_COMMENT_OR_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|//[^\n]*|/\*.*?\*/', re.S)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


def _salvage(text: str, decoder: json.JSONDecoder) -> dict[str, Any] | None:
    """``{"configs": [...]}`` from an answer that is almost JSON: ``//`` or ``/* */`` comments, trailing
    commas, or cut off after some whole items (a model that ran into its token cap).  Why: such an
    answer lost every config it did hold, and its repair round was told "expected {"configs": [...]}".
    Only whole items are kept; nothing is evaluated."""
    at = text.find('"configs"')
    if at < 0:
        return None
    body = _COMMENT_OR_STRING.sub(lambda m: m.group(0) if m.group(0).startswith('"') else "", text[at:])
    body = _TRAILING_COMMA.sub(r"\1", body)
    open_at = body.find("[")
    if open_at < 0:
        return None
    items, pos = [], open_at + 1
    while True:
        while pos < len(body) and body[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(body) or body[pos] == "]" or len(items) >= 10_000:
            break
        try:
            item, pos = decoder.raw_decode(body, pos)
        except (ValueError, RecursionError):
            break        # the cut-off item, or something that is no JSON at all
        if isinstance(item, (dict, list)) and _depth(item) > MAX_DEPTH:
            break
        items.append(item)
    return {"configs": items} if items else None


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
            cfg, reasoning = item["config"], _reasoning(item.get("reasoning"))
        if not isinstance(cfg, dict):
            out.rejected.append(Rejected(item, "a config must be an object of parameter values"))
            continue
        try:
            full = space.normalize(cfg)
            errors = space.validate(full, check_constraints=False)
            if not errors:  # the space's own values first: a recording's membership is by key, so 64.0
                full = {p.name: _own_value(p, full[p.name]) for p in space.params}  # failed where 64 passed
                errors = space.validate(full)
        except SpaceError as exc:
            out.rejected.append(Rejected(item, _short(str(exc))))
            continue
        except (ArithmeticError, TypeError, ValueError, RecursionError) as exc:
            # A value the parameter kinds cannot even compare (an integer too large for a
            # float, say) is a bad proposal like any other, not a crash of the run.
            out.rejected.append(Rejected(item, _short(f"unusable value ({type(exc).__name__}: {exc})")))
            continue
        if errors:
            out.rejected.append(Rejected(item, _short("; ".join(map(str, errors)))))
            continue
        key = space.key(full)
        if key in seen:
            out.rejected.append(Rejected(item, "duplicate of a config already proposed or measured"))
            continue
        seen.add(key)
        out.accepted.append(full)
        out.reasons.append(reasoning)
    return out


def _own_value(param: Param, value: Any) -> Any:
    """The space's own value equal to an allowed ``value``: 64 for a model's 64.0.

    Parameter kinds compare 64.0 equal to 64, so the float validates; kept as a float it
    would get another store key than the 64 already measured (measured twice) and reach the
    kernel as a float block size.
    """
    if isinstance(param, ListParam):
        return tuple(_own_value(param.element, v) for v in canonical(value))
    if isinstance(param, Permutation):  # items are matched by repr: already the space's own
        return canonical(value)
    if isinstance(param, IntRange):
        return int(value)
    index = param.index(value)
    return param.values()[index] if index is not None else value


def _reasoning(value: Any) -> str:
    """The model's one-line reason, as plain text: kept, shown, never interpreted.

    Only strings and numbers count (``str()`` of a huge nested value would be costly and
    meaningless); lone surrogates, which JSON escapes can produce but UTF-8 cannot hold,
    are replaced so the reason can be stored.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return ""
    try:
        text = value if isinstance(value, str) else repr(value)
    except ValueError:  # an int of over 4,300 digits has no repr
        return ""
    text = text[: MAX_REASON_CHARS * 2].encode("utf-8", "replace").decode("utf-8")
    return _short(text, MAX_REASON_CHARS)


def parse_configs(text: str, space: Space, exclude: set[str] | None = None) -> ParsedConfigs:
    """``extract_json`` then ``configs_from_answer``; raises ParseError only for unusable text."""
    return configs_from_answer(extract_json(text), space, exclude)
