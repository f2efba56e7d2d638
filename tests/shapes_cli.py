"""What the ``tune --shapes`` tests share: a CPU kernel file (a plain Python launcher the measuring workers
run), a shapes file, read-only queries of the store, and a ``kerntune tune`` process started in the
background with the run id it prints first."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from cli_runs import PACKAGE_ROOT, no_llm_env

SUM = '''
import time
from kerntune.space import Choice, Space
name = "{name}"
description = "sum of a vector"
space = Space([Choice("work", options=(1, 2, 3, 4, 5, 6, 7, 8)), Choice("unroll", options=(1, 2, 3, 4))],
              default={{"work": 8, "unroll": 1}})
def make_inputs(shape):
    return ([float(i % 7) for i in range(shape[0])],)
def reference(inputs):
    return [sum(inputs[0])]
def launch(config, inputs):
    time.sleep({sleep})
    total = 0.0
    for _ in range(config["work"] + config["unroll"] - 1):
        total = sum(inputs[0])
    return [total]
'''


def kernel_file(tmp: Path, name: str, sleep: float = 0.0, extra: str = "") -> Path:
    path = tmp / f"{name}.py"
    path.write_text(SUM.format(name=name, sleep=sleep) + extra)
    return path


def shapes_file(tmp: Path, text: str, name: str = "shapes.txt") -> Path:
    path = tmp / name
    path.write_text(text)
    return path


def rows(db: Path, sql: str, args: tuple = ()) -> list[tuple]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def start(tmp: Path, *args: str) -> tuple[subprocess.Popen, str]:
    """``kerntune tune ARGS`` started in ``tmp`` (store ``tmp/store.db``), and the run id it prints first."""
    env = dict(no_llm_env(), PYTHONPATH=str(PACKAGE_ROOT), KERNTUNE_STORE=str(tmp / "store.db"))
    proc = subprocess.Popen([sys.executable, "-m", "kerntune", "tune", *args], cwd=tmp, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    first = proc.stdout.readline()
    if not first.startswith("run id: "):
        proc.kill()
        raise AssertionError(first + proc.communicate()[1][-2000:])
    return proc, first.split()[2]


def wait_for(proc: subprocess.Popen, db: Path, parent: str, done: int, trials: int) -> None:
    """Until ``done`` children of ``parent`` are finished and the next one has ``trials`` trials stored."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        states = rows(db, "SELECT status, (SELECT count(*) FROM trials t WHERE t.run_id=runs.id) FROM runs"
                      " WHERE parent_id=? ORDER BY created", (parent,)) if db.exists() else []
        if len(states) == done + 1 and all(s == "done" for s, _ in states[:done]) and states[done][1] >= trials:
            return
        time.sleep(0.05)
    raise AssertionError(f"the run ended or stalled first (exit code {proc.poll()})")
