"""Pieces the CLI commands share: the store location and console output."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Iterable

from rich.console import Console

from kerntune.errors import KerntuneError
from kerntune.store import Store

# Piped output (CI logs, files) gets a width that fits the compare table.
console = Console(width=None if sys.stdout.isatty() else 150)
err_console = Console(stderr=True)


def default_store_path() -> str:
    return os.environ.get("KERNTUNE_STORE", ".kerntune/kerntune.db")


def open_store(path: str | None) -> Store:
    return Store(Path(path or default_store_path()))


def parse_options(items: Iterable[str], flag: str = "--option") -> dict[str, Any]:
    """``NAME=VALUE`` strategy options; a value is JSON where it parses, else the plain string
    (so ``-o surrogate=tpe`` needs no quotes)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise KerntuneError(f"{flag} {item!r}: expected NAME=VALUE")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out
