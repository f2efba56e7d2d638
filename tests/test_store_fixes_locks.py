"""Run locks are POSIX record locks (``lockf``): they belong to the process, and closing *any* of its
descriptors of the lock file drops *all* of them.  With a descriptor per lock, releasing one run (or a
refused acquire's close) silently freed every other run the process held in that store: two decorated
kernels tuning in two threads, one finishing, and another process could take up the other's run.

Real store files and a real second process (the lock is only visible from another process)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kerntune.errors import StoreError
from kerntune.store import Store
from cli_runs import PACKAGE_ROOT

#: a child interpreter's environment: this checkout's kerntune, nothing else of this process's
CHILD_ENV = {"PYTHONPATH": str(PACKAGE_ROOT), "PATH": "/usr/bin:/bin"}

CHILD = textwrap.dedent("""
    import sys
    from kerntune.errors import StoreError
    from kerntune.store import Store
    st = Store(sys.argv[1])
    try:
        st.lock_run(sys.argv[2]).release()
        print("free")
    except StoreError:
        print("held")
""")


def _from_another_process(db: Path, run_id: str) -> str:
    out = subprocess.run([sys.executable, "-c", CHILD, str(db), run_id], capture_output=True, text=True,
                         timeout=120, env=CHILD_ENV)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


def test_releasing_one_run_keeps_the_processes_other_runs_locked(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    st = Store(db)
    a, b = st.lock_run("run-a"), st.lock_run("run-b")
    a.release()
    assert _from_another_process(db, "run-a") == "free"
    assert _from_another_process(db, "run-b") == "held", "releasing run-a freed run-b"
    b.release()
    assert _from_another_process(db, "run-b") == "free"


def test_a_refused_acquire_keeps_the_processes_other_runs_locked(tmp_path: Path) -> None:
    """A run another process holds is refused here; the refusal's cleanup freed this process's own runs."""
    db = tmp_path / "k.db"
    st = Store(db)
    mine = st.lock_run("mine")
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, time
        from kerntune.store import Store
        lock = Store(sys.argv[1]).lock_run("theirs")
        print("ready", flush=True)
        sys.stdin.readline()
    """), str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env=CHILD_ENV)
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(StoreError, match="in use"):
            st.lock_run("theirs")
        assert _from_another_process(db, "mine") == "held", "the refused acquire freed this process's run"
    finally:
        holder.communicate("\n", timeout=60)
    mine.release()


def test_a_process_takes_its_own_run_twice_and_the_last_release_frees_it(tmp_path: Path) -> None:
    """As before: a process is never kept out of its own run (the decorator's look-up, then run_search)."""
    db = tmp_path / "k.db"
    st = Store(db)
    first, second = st.lock_run("r"), st.lock_run("r")
    first.release()
    assert _from_another_process(db, "r") == "held"
    second.release()
    assert _from_another_process(db, "r") == "free"
