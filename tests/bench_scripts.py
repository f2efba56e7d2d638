"""Importing a script of ``benchmarks/search_quality/`` (not a package) by its file, for the tests
of its functions."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(name: str) -> ModuleType:
    """``benchmarks/search_quality/NAME.py`` as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks/search_quality" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod
