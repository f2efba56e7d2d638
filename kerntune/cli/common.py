"""Pieces the CLI commands share: the store location and console output."""

from __future__ import annotations

import errno
import json
import math
import os
import shlex
import sys
from pathlib import Path
from typing import Any, Iterable

from rich.console import Console

from kerntune.errors import KerntuneError, StoreError
from kerntune.store import Store

# Piped output (CI logs, files) gets a width that fits the compare table.
console = Console(width=None if sys.stdout.isatty() else 150)
# Piped stderr (logs) keeps each note and progress line whole, so that grep finds it.
err_console = Console(stderr=True, soft_wrap=not sys.stderr.isatty())


def print_unwrapped(text: str) -> None:
    """One line, as is: a config's JSON is copied into the next command, so it is never wrapped at
    the console's width nor read as rich markup (``[1, 2]`` is a list, not a style)."""
    console.print(text, soft_wrap=True, markup=False, highlight=False)


def default_store_path() -> str:
    return os.environ.get("KERNTUNE_STORE") or ".kerntune/kerntune.db"  # an empty KERNTUNE_STORE= is unset


def open_store(path: str | None, readonly: bool = False) -> Store:
    """The store at ``path`` (or the default); ``readonly`` for commands that only read it, so a
    mistyped path is reported instead of created and a read-only store can still be read.

    A store file this process may not write is refused here for a command that writes: SQLite
    opens it and fails only at the first write, after ``tune`` had printed a run id that was
    never stored.  (Checked here, not in ``Store``: the decorator and ``kerntune exec`` read
    winners from a store that may be read-only.)"""
    target = Path(path or default_store_path())
    if not readonly:
        check_store_writable(path)
    return Store(target, readonly=readonly)


def check_store_writable(path: str | None) -> None:
    """Refuse a store file this process may not write, without opening (or creating) it: ``tune``
    says so before it starts an evaluator or a model, and opens the store only after every check."""
    target = Path(path or default_store_path())
    if target.is_file() and not os.access(target, os.W_OK):
        raise StoreError(f"cannot open store {target}: the store is read-only: check the permissions of {target}"
                         " and its directory (no write permission on the file)")


def check_store_exists(path: str | None, flag: str = "--resume") -> None:
    """Refuse a store that is not there for a command that continues a run stored in it: opening it
    writable would create an empty store (``--store typo.db``) before saying the run is not in it."""
    target = Path(path or default_store_path())
    if not target.exists():
        raise StoreError(f"no store at {target} ({flag} continues a run stored there; --store or KERNTUNE_STORE"
                         " names the store)")


def store_flag(path: str | None) -> str:
    """`` --store PATH`` for a hint's command line when the store is not the one a command opens by
    default, else "": a hint without it, run as printed, looks in (and creates) the default store."""
    if path is None or Path(path).resolve() == Path(default_store_path()).resolve():
        return ""
    return f" --store {shlex.quote(path)}"


def parse_options(items: Iterable[str], flag: str = "--option") -> dict[str, Any]:
    """``NAME=VALUE`` strategy options; a value is JSON where it parses, else the plain string
    (so ``-o surrogate=tpe`` needs no quotes)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise KerntuneError(f"{flag} {item!r}: expected NAME=VALUE")
        if key in out:  # the last value silently won (compare and own_options refuse a key given twice)
            raise KerntuneError(f"{flag} {key!r} is given twice")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def check_number(flag: str, value: float | None, low: float = 0.0, high: float = float("inf"),
                 low_open: bool = True) -> None:
    """Refuse NaN, inf and out-of-range numbers for a numeric option, in one line.

    ``--llm-timeout nan`` or ``-1`` once meant "never time out" or "fail at once" silently.
    """
    if value is None:
        return
    ok = math.isfinite(value) and (value > low if low_open else value >= low) and value <= high
    if not ok:
        lo = f"above {low:g}" if low_open else f"at least {low:g}"
        hi = f" and at most {high:g}" if math.isfinite(high) else ""
        raise KerntuneError(f"{flag} must be a number {lo}{hi}, got {value}")


def check_output(flag: str, path: Path | None, suffixes: tuple[str, ...] = ()) -> None:
    """Refuse an output path that cannot be written, before a run spends time: a directory, a
    path under a file, an unknown image type.  (A full disk is only known when writing: see
    :func:`write_output`.)"""
    if path is None:
        return
    if path.is_dir():
        raise KerntuneError(f"{flag} {path}: is a directory; give a file name")
    if suffixes and path.suffix.lower() not in suffixes:
        raise KerntuneError(f"{flag} {path}: unknown file type {path.suffix or '(none)'!r} (use {', '.join(suffixes)})")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise KerntuneError(f"{flag} {path}: {parent} is a file, not a directory")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise KerntuneError(f"{flag} {path}: cannot create files in {parent} (permission denied)")
            break


def write_output(flag: str, path: Path, write: Any) -> Any:
    """Run ``write()`` (which writes ``path``), turning an OSError (disk full, a read-only or
    special file system such as /proc) into one line that names the file and the real cause."""
    check_output(flag, path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return write()
    except OSError as exc:
        cause = exc.strerror or str(exc)
        if exc.errno == errno.ENOSPC:
            cause = "disk full"
        raise KerntuneError(f"cannot write {flag} {path}: {cause}") from None


def check_folder(flag: str, path: Path | None) -> None:
    """Refuse an output folder that cannot be made, before the work: an existing file, a path under
    a file, a parent this process may not write (``mkdir`` raised a traceback for each)."""
    if path is None:
        return
    if path.exists() and not path.is_dir():
        raise KerntuneError(f"{flag} {path}: is a file, not a directory; give a folder")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise KerntuneError(f"{flag} {path}: {parent} is a file, not a directory")
            if not path.exists() and not os.access(parent, os.W_OK | os.X_OK):
                raise KerntuneError(f"{flag} {path}: cannot create folders in {parent} (permission denied)")
            break


def make_folder(flag: str, path: Path) -> None:
    """Create an output folder (and its parents); an OSError is one line naming the folder."""
    check_folder(flag, path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise KerntuneError(f"cannot create {flag} {path}: {exc.strerror or exc}") from None


def tie_note(ties: int) -> str:
    """One line on how many configs the recording cannot tell from its optimum."""
    if ties <= 1:
        return "optimum: no other config within two standard errors of its runs (it stands clear of measurement noise)"
    return (f"optimum: {ties - 1} other config(s) within two standard errors of its runs: the recording cannot "
            "tell them apart, so near the top a score measures which one the noise favoured")


#: Help texts that several commands share, in the same words everywhere.
STORE_HELP = "SQLite store (default $KERNTUNE_STORE, else .kerntune/kerntune.db)"
LLM_BASE_URL_HELP = "Base URL of an OpenAI-compatible server (vLLM, Ollama's /v1, llama.cpp, LM Studio, OpenRouter)"


def known_gpu(name: Any) -> str | None:
    """The entry of ``kerntune.hardware.KNOWN_GPUS`` a device name matches (None: none does)."""
    from kerntune.hardware import KNOWN_GPUS

    if not isinstance(name, str) or not name.strip():
        return None
    return next((fragment for fragment, _ in KNOWN_GPUS if fragment.lower() in name.lower()), None)


def other_device_note(recorded: Any, device_info: dict[str, Any], what: str) -> str | None:
    """The note for a ``--device`` that names a known GPU other than the one a recording names (None:
    the same GPU, no name given, or a recording without a name, where --device is how one is given).
    Not refused: a recording's device name may be wrong; but the figures or prompts then describe
    another GPU than the one that measured the times, which is said."""
    given = device_info.get("name")
    known = known_gpu(given)
    if known is None or not isinstance(recorded, str) or recorded.strip().lower() in ("", "unknown", "unknown gpu"):
        return None
    if known_gpu(recorded) == known:
        return None
    return f"the recording was measured on {recorded.strip()}; {what} now describe --device {str(given).strip()}"
