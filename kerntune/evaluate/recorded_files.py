"""Reading a recording file safely: size limits (a gzip bomb stops at a set size), regular files
only, gzip or plain text, and JSON that Kernel Tuner wrote while a run was killed (a truncated file is
closed; duplicate keys are refused).  Apart from ``kerntune.evaluate.recorded``, which turns the data
into a Recording, so that what may be read and how is in one place."""

from __future__ import annotations

import json
import os
import re
import stat
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

from kerntune.errors import FormatError

#: Largest recording text kerntune reads (after decompression): a gzip bomb stops here, not at 2 GB.
MAX_TEXT_BYTES = 512 * 2**20


def _max_text_bytes() -> int:
    env = os.environ.get("KERNTUNE_MAX_RECORDING_MB")
    return int(float(env) * 2**20) if env else MAX_TEXT_BYTES


def _read_bytes(path: Path) -> bytes:
    """The file's bytes, refusing what is not a regular file: a FIFO would block forever,
    a device would never end.  Opened non-blocking and checked on the descriptor itself."""
    if not path.exists():
        raise FormatError(f"file not found: {path}")
    if path.is_dir():
        raise FormatError(f"{path} is a directory, not a recorded space file")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise FormatError(f"cannot read {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FormatError(f"{path} is not a regular file (a pipe, socket or device); give a recording file")
        if st.st_size > _max_text_bytes():
            raise FormatError(f"{path}: {st.st_size:,} bytes, over the {_max_text_bytes():,}-byte limit for a recording")
        try:
            return fh.read()
        except OSError as exc:
            raise FormatError(f"cannot read {path}: {exc.strerror}") from None


def _gunzip(raw: bytes, path: Path) -> tuple[bytes, bool]:
    """Decompress every gzip member, stopping at the size limit; (bytes, truncated)."""
    cap, out, data = _max_text_bytes(), bytearray(), raw
    try:
        while data:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out += d.decompress(data, cap + 1 - len(out))
            while d.unconsumed_tail and len(out) <= cap:
                out += d.decompress(d.unconsumed_tail, cap + 1 - len(out))
            if len(out) > cap:
                raise FormatError(f"{path}: decompresses to over {cap:,} bytes (the limit for a recording;"
                                  " KERNTUNE_MAX_RECORDING_MB raises it)")
            if not d.eof:
                return bytes(out), True   # a truncated stream: keep what decompressed
            data = d.unused_data.lstrip(b"\0")
    except zlib.error as exc:
        raise FormatError(f"{path}: corrupt gzip file ({exc})") from None
    return bytes(out), False


def _read_text(path: Path) -> str:
    raw = _read_bytes(path)
    truncated = False
    if raw[:2] == b"\x1f\x8b":
        raw, truncated = _gunzip(raw, path)
    if truncated:
        return raw.decode("utf-8", errors="ignore")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise FormatError(f"{path}: not a text file (not JSON)") from None


# A JSON string (also one cut off at the end of the text) or a bracket outside strings.
_JSON_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[{}\[\]]', re.DOTALL)
_CLOSING = {"{": "}", "[": "]"}


def _close_truncated(text: str) -> str | None:
    """``text`` cut back to its last complete entry, with the open brackets closed.

    An entry is a value inside the top-level object's ``cache`` (or ``results``),
    i.e. at nesting depth 2.  Cutting only where such a value, or a header value,
    has just closed (or the ``cache`` object has just opened) drops a partly
    written last entry entirely: closing it instead would keep e.g. ``time``
    2.06 from a cut inside 2.0625, or an entry without its compile time.
    None when the text is not an unclosed object (then it is not truncated).
    """
    stack: list[str] = []
    cut: tuple[int, str] | None = None
    for match in _JSON_TOKENS.finditer(text):
        token = match.group()
        if token in _CLOSING:
            stack.append(_CLOSING[token])
        elif token in ("}", "]"):
            if not stack or stack.pop() != token:
                return None
        else:
            continue   # a string
        if 0 < len(stack) <= 2:
            cut = (match.end(), "".join(reversed(stack)))
    if not stack or cut is None:
        return None
    return text[: cut[0]] + cut[1]


def _parse(text: str, path: Path) -> Any:
    """``json.loads`` refusing a key given twice in one object (a FormatError, which the truncation
    repair does not catch).  Why: it keeps the last silently, so a cache holding config "1,1" twice
    lost one of its measurements (once the optimum) unseen."""
    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) < len(pairs):
            key = next(k for k, n in Counter(k for k, _ in pairs).items() if n > 1)
            raise FormatError(f"{path}: key {key[:60]!r} is recorded twice in one JSON object; which of its"
                              " values is right is unknowable (a JSON reader would keep the last)")
        return obj
    return json.loads(text, object_pairs_hook=unique)


def _loads_lenient(text: str, path: Path) -> Any:
    """Parse JSON, closing what Kernel Tuner left open when a run was cut off."""
    try:
        return _parse(text, path)
    except RecursionError:
        raise FormatError(f"{path}: JSON nested too deeply to be a recording") from None
    except json.JSONDecodeError as first_error:
        if not text.lstrip().startswith("{"):
            raise FormatError(f"{path}: not JSON ({first_error.msg} at line {first_error.lineno})") from None
    except ValueError as exc:  # e.g. an integer of over 4300 digits
        raise FormatError(f"{path}: not a usable JSON file ({exc})".splitlines()[0]) from None
    repaired = _close_truncated(text)
    if repaired is not None:
        try:
            return _parse(repaired, path)
        except (ValueError, RecursionError):
            pass
    raise FormatError(f"{path}: not JSON, and not a truncated Kernel Tuner cache file either")
