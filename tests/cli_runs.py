"""``python -m kerntune`` as a user runs it, for the CLI tests: a real process on the kerntune the test
imports, with a store of its own, and the check that an error is one line on stderr with exit code 2."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

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


def run_main(tmp: Path, *args: str, env: dict[str, str | None] | None = None,
             store: Path | None = None) -> subprocess.CompletedProcess:
    """``kerntune ARGS`` as ``run_cli`` runs it (in ``tmp``, the store ``store`` or ``tmp/store.db``, no model
    from the environment, ``env`` over it: None unsets a variable), but in this process: ``kerntune.cli.main``,
    what ``python -m kerntune`` runs, without the second of imports a process costs.  Its exit code, stdout
    and stderr as a process's; an exception other than SystemExit propagates (the test fails on it, as on a
    traceback).  For commands whose subject is not the process (kills, signals and resumes need ``run_cli``).
    main() turns SIGTERM into an interrupt: the test process gets its own handler back."""
    from kerntune.cli import main

    out, err = io.StringIO(), io.StringIO()
    code: object = 0
    sigterm = signal.getsignal(signal.SIGTERM)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp)
        for name in ("KERNTUNE_LLM", "KERNTUNE_LLM_BASE_URL"):
            mp.delenv(name, raising=False)
        for name, value in {"KERNTUNE_STORE": str(store or tmp / "store.db"), **(env or {})}.items():
            if value is None:
                mp.delenv(name, raising=False)
            else:
                mp.setenv(name, value)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                main(list(args))
        except SystemExit as exc:
            code = exc.code
        finally:
            signal.signal(signal.SIGTERM, sigterm)
    if not isinstance(code, int):  # sys.exit(None) is 0; sys.exit("message") prints it and is 1
        err.write("" if code is None else f"{code}\n")
        code = 0 if code is None else 1
    return subprocess.CompletedProcess(["kerntune", *args], code, out.getvalue(), err.getvalue())


def one_line(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """The error line of a refused command (exit code 2, one line, no traceback), holding each needle."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def interrupt(tmp: Path, *args: str, progress: int = 2) -> tuple[str, str, int]:
    """Start ``kerntune ARGS``, wait for its run id and ``progress`` progress lines (else a second), send
    SIGINT; (run id, stderr, exit code)."""
    env = dict(no_llm_env(), PYTHONPATH=str(PACKAGE_ROOT), KERNTUNE_STORE=str(tmp / "store.db"))
    proc = subprocess.Popen([sys.executable, "-m", "kerntune", *args], cwd=tmp, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        rid, progress_lines = None, 0
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            if line.startswith("run id: ") and rid is None:
                rid = line.split()[2]
                if not progress:
                    time.sleep(1.0)  # into its evaluations
                    break
            elif line.startswith("progress:"):
                progress_lines += 1
                if progress_lines >= progress:
                    break
        assert rid is not None and progress_lines >= progress and proc.poll() is None, "the run ended first"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return rid, err, proc.returncode
