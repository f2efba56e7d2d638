"""A Triton kernel written to a file of its own and imported as a module, for the decorator tests
(Triton reads a kernel's source from its file, so a kernel defined in a string must live in one)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def kernel_module(path: Path, name: str, text: str) -> ModuleType:
    """Write ``text`` to ``path`` and import it as module ``name`` (registered in ``sys.modules``, as
    Triton's interpreter looks a kernel's globals up there)."""
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod
