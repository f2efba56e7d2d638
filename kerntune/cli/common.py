"""Pieces the CLI commands share: the store location and console output."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from rich.console import Console

from kerntune.store import Store

# Piped output (CI logs, files) gets a width that fits the compare table.
console = Console(width=None if sys.stdout.isatty() else 150)
err_console = Console(stderr=True)


def default_store_path() -> str:
    return os.environ.get("KERNTUNE_STORE", ".kerntune/kerntune.db")


def open_store(path: str | None) -> Store:
    return Store(Path(path or default_store_path()))
