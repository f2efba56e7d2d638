"""Importing the real packages whose kernels the adapters cover (liger-kernel, fla-core, torchao)."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

#: `make test` sets it: there a missing package fails instead of skipping.
REQUIRE = os.environ.get("KERNTUNE_REQUIRE_PACKAGES") == "1"


def import_package(module: str, package: str) -> ModuleType:
    """``module``, or the test skipped when ``package`` is not installed (a failure under REQUIRE)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if REQUIRE:
            raise
        pytest.skip(f"{package} not installed ({exc})")
