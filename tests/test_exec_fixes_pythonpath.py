"""``kerntune exec`` says when its switch turned on, so that a command that dropped it is noticed.

The switch rides on PYTHONPATH (exec's ``sitecustomize`` heads it).  A launch script's own
``PYTHONPATH=. python train.py``, or ``python -E``/``-I``, drops it: the program ran untuned, exit 0,
with nothing said, though the README promises every ``@triton.autotune`` kernel of the program tuned.
Now a Python process whose switch turns on says one line on stderr (its Python children stay quiet),
and the README says that no line means nothing was retuned.  Real ``kerntune exec`` and real
interpreters; TRITON_INTERPRET=1, so no GPU is needed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINE = "kerntune exec: retuning triton.autotune kernels"

#: A program that starts a Python child of its own, as torchrun and DataLoader workers do.
PROGRAM = """\
import subprocess, sys
subprocess.run([sys.executable, "-c", "print('child')"], check=True)
print('parent')
"""


def _exec(tmp_path: Path, *command: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNTUNE_")}
    env.update(TRITON_INTERPRET="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    (tmp_path / "prog.py").write_text(PROGRAM)
    return subprocess.run([sys.executable, "-m", "kerntune", "exec", "--store", str(tmp_path / "kt.db"), "--",
                           *command], capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)


def test_exec_says_once_on_stderr_that_the_switch_turned_on(tmp_path: Path) -> None:
    """Before, a working switch and a dropped one looked the same: no line either way.  Now one line
    names the store, and the program's own Python child does not repeat it."""
    pytest.importorskip("triton")
    proc = _exec(tmp_path, sys.executable, "prog.py")
    assert proc.returncode == 0 and proc.stdout.split() == ["child", "parent"], (proc.stdout, proc.stderr)
    said = [line for line in proc.stderr.splitlines() if line.startswith(LINE)]
    assert said == [f"{LINE} (winners in {tmp_path / 'kt.db'})"], proc.stderr


def test_exec_says_nothing_where_the_program_drops_the_switch(tmp_path: Path) -> None:
    """Its own PYTHONPATH and ``python -E``: the switch is off in these processes, so no line is said (its
    absence is what the user is told to look for); the line is not said for them by anyone else either."""
    pytest.importorskip("triton")
    (tmp_path / "alone.py").write_text("print('ran')\n")
    script = f'PYTHONPATH="{ROOT}" "{sys.executable}" alone.py && "{sys.executable}" -E alone.py'
    proc = _exec(tmp_path, "bash", "-c", script)
    assert proc.returncode == 0 and proc.stdout.split() == ["ran", "ran"], (proc.stdout, proc.stderr)
    assert LINE not in proc.stderr, proc.stderr
