"""Kill and resume, a full disk and a read-only store, with the real command line.

* A replay run is SIGKILLed at seeded random points, six times, and resumed each
  time (by its id alone, or with the recording given again): three kills a random number of new trials in (plus a random few
  milliseconds, so mid-commit too), three blind and early (start-up, or the replay
  of the stored trials by a resumed run).  Every trial committed before each kill is still there with
  the same seq, status and time; no config is stored twice; the finished run is the
  same search as an uninterrupted one.
* A full disk: SQLite's real SQLITE_FULL (``PRAGMA max_page_count``), a file size
  limit (RLIMIT_FSIZE, unprivileged) and, where this process may mount one, a full
  tmpfs (real ENOSPC).  Each gives exit code 2 and one line naming the store and
  "disk full"; the store passes ``integrity_check`` and holds exactly the trials
  committed before, and the run resumes once there is room.
* A read-only store: tests and CI run as root, which chmod does not stop, so the CLI
  runs with CAP_DAC_OVERRIDE (and its relatives) dropped from its capability
  bounding set; it gets one clear line naming the store, and the file is unchanged.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import random
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from kerntune.errors import StoreError
from kerntune.evaluate import ReplayEvaluator
from kerntune.run.search import RunOptions, run_search
from kerntune.store import Store
from kerntune.strategies import Budget

ROOT = Path(__file__).resolve().parent.parent
CONV = ROOT / "examples" / "spaces" / "convolution_A100.json.gz"
KERNTUNE = [sys.executable, "-m", "kerntune"]
BUDGET = 2000
# No HTML report after a finished run: it took longer than the 2,000 replayed trials, and these tests are
# about the store.
TUNE = ["tune", "--replay", str(CONV), "--strategy", "genetic", "--budget", str(BUDGET), "--seed", "3", "--no-report"]

Row = tuple[int, str, str, Any]  # seq, config_key, status, time_ms


def _rows(db: Path) -> list[Row]:
    """The trials of the store's one tune run, read by a second connection (as a user would)."""
    if not db.exists():
        return []
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        if not con.execute("SELECT name FROM sqlite_master WHERE name='trials'").fetchone():
            return []
        return con.execute("SELECT seq, config_key, status, time_ms FROM trials ORDER BY seq").fetchall()
    except sqlite3.OperationalError:  # the file exists but its schema is not written yet
        return []
    finally:
        con.close()


def _run_id(db: Path) -> str | None:
    con = sqlite3.connect(db)
    try:
        row = con.execute("SELECT id FROM runs WHERE kind='tune'").fetchone()
        return row[0] if row else None
    finally:
        con.close()


def _integrity(db: Path) -> str:
    con = sqlite3.connect(db)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


def _resume(run_id: str, *args: str) -> list[str]:
    """``tune --resume RUN_ID ARGS``, without a report (as TUNE)."""
    return ["tune", *args, "--resume", run_id, "--no-report"]


def _cli(args: list[str], cwd: Path, db: Path, preexec: Callable[[], None] | None = None,
         timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(KERNTUNE + args + ["--store", str(db)], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, preexec_fn=preexec)


def _assert_error_line(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """Exit code 2 and one ``kerntune: error:`` line, the last on stderr; no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("kerntune: error:")]
    assert len(errors) == 1 and proc.stderr.strip().splitlines()[-1] == errors[0], proc.stderr[-2000:]
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> list[Row]:
    """The uninterrupted run every interrupted one must end up equal to."""
    d = tmp_path_factory.mktemp("reference")
    proc = _cli(TUNE, d, d / "store.db")
    assert proc.returncode == 0, proc.stderr
    rows = _rows(d / "store.db")
    assert len(rows) == BUDGET
    return rows


# -- SIGKILL at random points ---------------------------------------------------------------------
def test_repeated_sigkill_and_resume_lose_and_repeat_nothing(tmp_path: Path, reference: list[Row]) -> None:
    rng = random.Random(20251121)
    db = tmp_path / "store.db"
    snapshots: list[list[Row]] = []
    kills = 0
    for k in range(6):
        run_id = _run_id(db) if db.exists() else None
        # resumed with the recording given again, or by the id alone (the store knows the recording)
        args = TUNE if run_id is None else _resume(run_id, "--replay", str(CONV)) if k % 2 else _resume(run_id)
        before = len(_rows(db))
        proc = subprocess.Popen(KERNTUNE + args + ["--store", str(db)], cwd=tmp_path, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            if k % 2 == 0:  # by trial count: somewhere in the next stretch of new trials
                target = before + rng.randint(30, 300)
                deadline = time.monotonic() + 120
                while proc.poll() is None and len(_rows(db)) < target and time.monotonic() < deadline:
                    time.sleep(0.002)
                time.sleep(rng.uniform(0, 0.005))
            else:           # blind and early: start-up, or the replay of the stored trials
                time.sleep(rng.uniform(0.05, 0.5))
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                kills += 1
            proc.wait()
        rows = _rows(db)
        assert rows == reference[: len(rows)], "a killed run stored something the search would not have"
        for snap in snapshots:
            assert rows[: len(snap)] == snap, "a trial committed before a kill was lost or changed"
        snapshots.append(rows)
        assert _integrity(db) == "ok"
    assert kills == 6, "the run finished before it could be killed six times"
    assert len(snapshots[-1]) < BUDGET

    done = _cli(_resume(_run_id(db)), tmp_path, db)  # type: ignore[arg-type]
    assert done.returncode == 0, done.stderr
    final = _rows(db)
    keys = [key for _, key, _, _ in final]
    assert len(keys) == len(set(keys)) == BUDGET, "a config was stored twice"
    assert [seq for seq, _, _, _ in final] == list(range(BUDGET))
    assert final == reference, "the resumed search is not the uninterrupted one"
    con = sqlite3.connect(db)
    assert con.execute("SELECT status FROM runs WHERE kind='tune'").fetchone()[0] == "done"
    con.close()


# -- a full disk ---------------------------------------------------------------------------------------
def test_sqlite_full_stops_the_run_with_a_clear_error_and_the_run_resumes(tmp_path: Path) -> None:
    """SQLITE_FULL as SQLite raises it on a full disk (``max_page_count`` caps the file)."""
    ev = ReplayEvaluator.from_file(CONV)
    ref = run_search(ev, "genetic", Budget(max_evals=300), seed=5)
    store = Store(tmp_path / "store.db")
    run_id = store.create_run("tune", strategy="genetic", seed=5)
    pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
    store.conn.execute(f"PRAGMA max_page_count={pages + 6}")
    with pytest.raises(StoreError) as info:
        run_search(ev, "genetic", Budget(max_evals=300), seed=5, run=RunOptions(store=store, run_id=run_id))
    message = str(info.value)
    assert str(tmp_path / "store.db") in message and "disk full" in message and "\n" not in message
    stored = store.trials(run_id)
    assert 0 < len(stored) < 300
    assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert [key for key, _, _ in stored] == [ev.space.key(t.config) for t in ref.history[: len(stored)]]
    assert [t.time_ms for _, t, _ in stored] == [t.time_ms for t in ref.history[: len(stored)]]
    store.close()

    with Store(tmp_path / "store.db") as again:   # room again: a new connection has no page cap
        res = run_search(ev, "genetic", Budget(max_evals=300), seed=5, run=RunOptions(store=again, run_id=run_id))
        assert res.resumed_trials == len(stored)
        assert [ev.space.key(t.config) for t in res.history] == [ev.space.key(t.config) for t in ref.history]
        assert len(again.trials(run_id)) == 300


def _fsize_limit(limit: int) -> Callable[[], None]:
    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))  # Python ignores SIGXFSZ: writes fail EFBIG
    return preexec


def test_a_file_size_limit_is_reported_as_disk_full_and_the_run_resumes(tmp_path: Path,
                                                                         reference: list[Row]) -> None:
    db = tmp_path / "store.db"
    proc = _cli(TUNE, tmp_path, db, preexec=_fsize_limit(300_000))
    _assert_error_line(proc, str(db), "disk full", "--resume")
    _assert_consistent_prefix(db, reference)
    done = _cli(_resume(_run_id(db)), tmp_path, db)  # type: ignore[arg-type]
    assert done.returncode == 0, done.stderr
    assert _rows(db) == reference


def _assert_consistent_prefix(db: Path, reference: list[Row]) -> None:
    assert _integrity(db) == "ok"
    rows = _rows(db)
    assert 0 < len(rows) < BUDGET
    assert rows == reference[: len(rows)]


def test_a_full_filesystem_is_reported_as_disk_full_and_the_run_resumes(tmp_path: Path,
                                                                        reference: list[Row]) -> None:
    """Real ENOSPC on a small tmpfs; skipped where this process may not mount one."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=320k", "tmpfs", str(mnt)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN)")
    try:
        db = mnt / "store.db"
        proc = _cli(TUNE, tmp_path, db)
        _assert_error_line(proc, str(db), "disk full")
        _assert_consistent_prefix(db, reference)
        subprocess.run(["mount", "-o", "remount,size=64m", str(mnt)], check=True)  # room again
        done = _cli(_resume(_run_id(db)), tmp_path, db)  # type: ignore[arg-type]
        assert done.returncode == 0, done.stderr
        assert _rows(db) == reference
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


# -- a read-only store ------------------------------------------------------------------------------------
_CAPS = {"dac_override": 1, "dac_read_search": 2, "fowner": 3}


def _unprivileged() -> None:
    """In the child: drop the capabilities that let root write where the mode bits say no."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in _CAPS.values():
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _read_only_preexec(probe_dir: Path) -> Callable[[], None] | None:
    """How to run the CLI so that mode bits bind: as is for a normal user; for root, with
    the capabilities dropped, provided that really stops a write (else skip)."""
    if os.geteuid() != 0:
        return None
    code = f"open({str(probe_dir / 'probe')!r}, 'w')"
    try:
        probe = subprocess.run([sys.executable, "-c", code], preexec_fn=_unprivileged, capture_output=True)
    except subprocess.SubprocessError:
        pytest.skip("cannot drop capabilities here (no CAP_SETPCAP)")
    if probe.returncode == 0:
        pytest.skip("dropping capabilities does not stop root's writes here")
    return _unprivileged


def _dump(db: Path) -> tuple[list, list, str]:
    con = sqlite3.connect(db)
    try:
        return (con.execute("SELECT * FROM runs ORDER BY id").fetchall(),
                con.execute("SELECT * FROM trials ORDER BY run_id, seq").fetchall(),
                con.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        con.close()


def test_a_read_only_store_gives_one_clear_line_and_stays_as_it_was() -> None:
    # Under /tmp, not pytest's tmp_path: the capability-less child must be able to search the path.
    base = Path(tempfile.mkdtemp(prefix="kerntune-ro-"))
    os.chmod(base, 0o755)
    store_dir = base / "store"
    store_dir.mkdir()
    db = store_dir / "store.db"
    try:
        small = ["tune", "--replay", str(CONV), "--strategy", "random", "--budget", "40", "--seed", "1"]
        assert _cli(small + ["--no-report"], base, db).returncode == 0
        run_id = _run_id(db)
        before = _dump(db)
        digest = hashlib.sha256(db.read_bytes()).hexdigest()
        leftovers = sorted(p.name for p in store_dir.iterdir())
        for p in store_dir.iterdir():
            if p.is_file():
                os.chmod(p, 0o444)
        os.chmod(store_dir, 0o555)
        preexec = _read_only_preexec(store_dir)
        for args in (small, ["tune", "--replay", str(CONV), "--resume", run_id]):
            proc = _cli(args, base, db, preexec=preexec)  # type: ignore[arg-type]
            _assert_error_line(proc, str(db), "read-only")
        # Reading needs no write access: a read-only store can still be listed (issue 22, item 18).
        listed = _cli(["store", "runs"], base, db, preexec=preexec)  # type: ignore[arg-type]
        assert listed.returncode == 0 and run_id in listed.stdout, listed.stderr
        os.chmod(store_dir, 0o755)
        for p in store_dir.iterdir():
            if p.is_file():
                os.chmod(p, 0o644)
        assert sorted(p.name for p in store_dir.iterdir()) == leftovers
        assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
        assert _dump(db) == before and before[2] == "ok"
    finally:
        os.chmod(store_dir, 0o755)
        shutil.rmtree(base, ignore_errors=True)
