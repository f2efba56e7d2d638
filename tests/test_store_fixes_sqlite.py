"""The SQLite store under two conditions a single process never meets: a store read from a directory
it cannot write while trials are still in its WAL, and two writers caching a winner for the same key.

Real stores in real processes: the writer is killed with SIGKILL (no close, no checkpoint), as a
killed ``tune`` leaves its store; a read-only directory is a 0o555 directory, or, for root (whom
permissions do not stop), a read-only bind mount in a private mount namespace (``unshare -m``).
"""

from __future__ import annotations

import csv
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from cli_runs import PACKAGE_ROOT, no_llm_env
from kerntune.store import Store

TRIALS = 30

WRITER = f"""
import os, signal, sys
from kerntune.store import Store
from kerntune.evaluate.trial import Status, Trial
st = Store(sys.argv[1])
rid = st.create_run("tune", strategy="random", seed=0, run_id="run1")
for k in range({TRIALS}):
    st.add_trial(rid, k, f"c{{k}}", Trial({{"a": k}}, Status.OK, time_ms=1.0 + k), 0.1 * k)
    if k == 9 and "--checkpoint" in sys.argv:
        st.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # what SQLite's autocheckpoint does now and then
os.kill(os.getpid(), signal.SIGKILL)
"""


def _env() -> dict[str, str]:
    return dict(no_llm_env(), PYTHONPATH=str(PACKAGE_ROOT))


def _killed_writer(folder: Path, checkpoint: bool = False) -> Path:
    """A store whose writer was SIGKILLed after committing TRIALS trials, most or all of them in the WAL;
    its -shm removed, as a copy of the store made with ``cp store.db store.db-wal`` has none."""
    db = folder / "store.db"
    proc = subprocess.run([sys.executable, "-c", WRITER, str(db), *(["--checkpoint"] if checkpoint else [])],
                          env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert Path(f"{db}-wal").stat().st_size > 0
    Path(f"{db}-shm").unlink(missing_ok=True)
    return db


def _read_only(folder: Path, *cmd: str) -> subprocess.CompletedProcess:
    """``cmd`` run while ``folder`` cannot be written."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            return subprocess.run(list(cmd), env=_env(), capture_output=True, text=True, timeout=120)
        finally:
            folder.chmod(0o755)
    unshare = shutil.which("unshare")
    probe = subprocess.run([unshare or "unshare", "-m", "sh", "-c", f"mount --bind '{folder}' '{folder}' && mount -o"
                            f" remount,bind,ro '{folder}' && ! touch '{folder}/probe' 2>/dev/null"],
                           capture_output=True, text=True) if unshare else None
    if probe is None or probe.returncode != 0:
        pytest.skip("running as root, and no read-only bind mount can be made here (unshare -m)")
    script = f"mount --bind '{folder}' '{folder}' && mount -o remount,bind,ro '{folder}' && exec \"$@\""
    return subprocess.run([unshare, "-m", "sh", "-c", script, "sh", *cmd], env=_env(), capture_output=True,
                          text=True, timeout=120)


def _export(tmp_path: Path, db: Path) -> subprocess.CompletedProcess:
    out = tmp_path / "out.csv"
    return _read_only(db.parent, sys.executable, "-m", "kerntune", "store", "export", "run1", "--csv", str(out),
                      "--store", str(db))


@pytest.mark.parametrize("checkpoint", [False, True], ids=["all-in-wal", "some-in-wal"])
def test_a_read_only_store_with_trials_in_its_wal_reads_them_all(tmp_path: Path, checkpoint: bool) -> None:
    """``immutable=1`` (the fallback for a directory that cannot hold the -shm) ignores the WAL: every trial
    after the last checkpoint was silently missing (all of them: "holds no kerntune runs yet").  Now the
    store and its WAL are read from a copy, which one log line says."""
    folder = tmp_path / "ro"
    folder.mkdir()
    db = _killed_writer(folder, checkpoint)
    before = sorted(p.name for p in folder.iterdir())
    proc = _export(tmp_path, db)
    assert proc.returncode == 0, proc.stderr[-2000:]
    with (tmp_path / "out.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == TRIALS, f"{len(rows)} of {TRIALS} trials read"
    notes = [line for line in proc.stderr.splitlines() if "reading a copy" in line]
    assert len(notes) == 1 and "store.db-wal" in notes[0], proc.stderr
    assert sorted(p.name for p in folder.iterdir()) == before  # nothing written beside the store
    assert not [p for p in Path(tempfile.gettempdir()).glob("kerntune-store-*") if str(p) in notes[0]]


def test_a_read_only_store_with_an_empty_wal_is_read_in_place(tmp_path: Path) -> None:
    """No trial in the WAL: the file is read as it is (``immutable=1``), with no copy and no note."""
    folder = tmp_path / "ro"
    folder.mkdir()
    db = _killed_writer(folder)
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()  # the last connection: SQLite removes the WAL
    Path(f"{db}-wal").unlink(missing_ok=True)
    Path(f"{db}-shm").unlink(missing_ok=True)
    proc = _export(tmp_path, db)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "reading a copy" not in proc.stderr
    with (tmp_path / "out.csv").open() as fh:
        assert len(list(csv.DictReader(fh))) == TRIALS


def test_a_store_opened_for_reading_removes_its_copy_on_close(tmp_path: Path) -> None:
    """In this process (where a directory can be made read-only): the copy lives while the store is open."""
    folder = tmp_path / "ro"
    folder.mkdir()
    db = _killed_writer(folder)
    code = ("import sys, tempfile; from pathlib import Path; from kerntune.store import Store\n"
            "st = Store(sys.argv[1], readonly=True); n = len(st.trials('run1'))\n"
            "copy = st._copy.name if st._copy is not None else None; st.close()\n"
            "print(n, copy is not None and not Path(copy).exists())")
    proc = _read_only(folder, sys.executable, "-c", code, str(db))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == [str(TRIALS), "True"], proc.stdout + proc.stderr


def _race_writer(path: str, who: int, n: int, barrier) -> None:  # noqa: ANN001 - multiprocessing.Barrier
    st = Store(path)
    for it in range(n):
        barrier.wait()  # both at the same key at the same moment, as two runs ending together are
        # writer 0 found 1.0 ms, writer 1 found 2.0 ms, for the same kernel, shape, device and versions
        st.put_best("kern", f"shape{it}", "H200", "v", {"who": who}, 1.0 + who, None)
    st.close()


def test_two_writers_caching_one_key_keep_the_faster_config(tmp_path: Path) -> None:
    """``put_best`` read the cached time and then wrote: two processes finishing together could both see
    no faster entry and the slower one write last (5 to 40 keys in 1000 kept 2.0 ms here).  One upsert now."""
    import multiprocessing

    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("needs fork: the writers share a barrier")
    ctx = multiprocessing.get_context("fork")
    db, n = tmp_path / "race.db", 2000
    Store(db).close()
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_race_writer, args=(str(db), who, n, barrier)) for who in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
        assert p.exitcode == 0
    with Store(db, readonly=True) as st:
        best = st.iter_best()
    slower = [e for e in best if e["time_ms"] != 1.0]
    assert len(best) == n and not slower, f"{len(slower)} of {n} keys keep the slower config"
    assert all(e["config"] == {"who": 0} for e in best)


def test_put_best_replaces_only_a_slower_entry(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as st:
        st.put_best("k", "p", "d", "v", {"c": 1}, 2.0, "r1")
        st.put_best("k", "p", "d", "v", {"c": 2}, 3.0, "r2")     # slower: kept out
        st.put_best("k", "p", "d", "v", {"c": 3}, 2.0, "r3")     # as fast: the first stays
        assert st.get_best("k", "p", "d", "v") == ({"c": 1}, 2.0)
        st.put_best("k", "p", "d", "v", {"c": 4}, 1.5, "r4")     # faster: replaces it
        assert st.get_best("k", "p", "d", "v") == ({"c": 4}, 1.5)
        assert [e["run_id"] for e in st.iter_best()] == ["r4"]
        st.put_best("k", "p", "d", "other", {"c": 5}, 9.0, "r5")  # another key: its own entry
        assert len(st.iter_best("k")) == 2
