"""``tune --resume`` and the device the run measured on, with the real command line and a real store.

A run killed on one GPU and resumed on another answered its stored configs with the first GPU's
timings and measured the rest on the second: one winner from two GPUs, exit 0, nothing said.  The
decorator's own resume compared the device already; ``run_search`` (``tune --resume``,
``kerntune.tune(resume=...)``) did not.  A run started on another machine is made here as the reviewer
made it: the stored run's device rewritten in SQLite, its last trials dropped as a kill leaves it.
The recording's device is "NVIDIA H100" (tests/scripted.py), so a replay's resume is checked too.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from scripted import synthetic_evaluator

ROOT = Path(__file__).resolve().parents[1]


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNTUNE_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-m", "kerntune", *args], capture_output=True, text=True, env=env,
                          timeout=600, cwd=cwd)


def _killed_run(tmp_path: Path, device: str | None) -> tuple[Path, str]:
    """A replay run of 10 evaluations left as a kill after 4 trials leaves it, stored as measured on ``device``."""
    synthetic_evaluator(tmp_path)  # writes the recording
    rec = tmp_path / "synthetic.json"
    store = tmp_path / "s.db"
    proc = _cli(tmp_path, "tune", "--replay", str(rec), "--budget", "10", "--store", str(store))
    assert proc.returncode == 0, proc.stderr[-3000:]
    with sqlite3.connect(store) as db:
        (run_id,) = db.execute("SELECT id FROM runs").fetchone()
        db.execute("DELETE FROM trials WHERE run_id=? AND seq >= 4", (run_id,))
        db.execute("UPDATE runs SET status='running', finished=NULL, summary_json=NULL, device=? WHERE id=?",
                   (device, run_id))
    return store, run_id


def _state(store: Path, run_id: str) -> tuple[int, str]:
    with sqlite3.connect(store) as db:
        (n,) = db.execute("SELECT COUNT(*) FROM trials WHERE run_id=?", (run_id,)).fetchone()
        (status,) = db.execute("SELECT status FROM runs WHERE id=?", (run_id,)).fetchone()
    return n, status


def test_resume_refuses_a_run_measured_on_another_gpu_and_leaves_it_untouched(tmp_path: Path) -> None:
    """Before, the resume went on silently (exit 0) and measured 6 more trials beside 4 of another GPU."""
    store, run_id = _killed_run(tmp_path, "NVIDIA A100-SXM4-80GB")
    proc = _cli(tmp_path, "tune", "--resume", "last", "--store", str(store))
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"kerntune: error: cannot resume {run_id}"), proc.stderr
    assert "NVIDIA A100-SXM4-80GB" in lines[0] and "NVIDIA H100" in lines[0], lines
    assert _state(store, run_id) == (4, "running")  # nothing measured, not marked failed: it resumes where it began


@pytest.mark.parametrize("device", ["NVIDIA H100", None, "unknown GPU"])
def test_resume_goes_on_on_the_same_gpu_or_where_a_name_is_unknown(tmp_path: Path, device: str | None) -> None:
    """The check refuses only two known names that differ: a store without the name (an older one) or a
    failed GPU query (``unknown GPU``) cannot say the GPU changed, and such runs resumed before."""
    store, run_id = _killed_run(tmp_path, device)
    proc = _cli(tmp_path, "tune", "--resume", run_id, "--store", str(store))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _state(store, run_id) == (10, "done")
