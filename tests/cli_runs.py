"""``python -m kerntune`` as a user runs it, for the CLI tests: a real process on the kerntune the test
imports, with a store of its own, and the check that an error is one line on stderr with exit code 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import kerntune

#: The kerntune under test (its parent folder), for the child's PYTHONPATH.
PACKAGE_ROOT = Path(kerntune.__file__).resolve().parent.parent


def no_llm_env() -> dict[str, str]:
    """This environment without a model of its own (a developer's $KERNTUNE_LLM is not the test's)."""
    return {k: v for k, v in os.environ.items() if k not in ("KERNTUNE_LLM", "KERNTUNE_LLM_BASE_URL")}


def run_cli(tmp: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120,
            root: Path = PACKAGE_ROOT) -> subprocess.CompletedProcess:
    """``kerntune ARGS`` in ``tmp`` with the store ``tmp/store.db``, no model from the environment
    (``no_llm_env``), ``env`` added over it."""
    full = dict(no_llm_env(), PYTHONPATH=str(root), KERNTUNE_STORE=str(tmp / "store.db"), **(env or {}))
    return subprocess.run([sys.executable, "-m", "kerntune", *args], cwd=tmp, capture_output=True, text=True,
                          timeout=timeout, env=full)


def one_line(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """The error line of a refused command (exit code 2, one line, no traceback), holding each needle."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]
