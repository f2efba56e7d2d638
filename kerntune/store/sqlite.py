"""The SQLite store: every run, every trial, best configs and LLM exchanges.

Each trial is committed the moment it finishes (WAL journal), so a run that
is killed loses at most the trial in flight, and ``--resume`` can continue it
without measuring anything twice.  ``UNIQUE(run_id, config_key)`` makes a
double measurement impossible rather than merely unlikely.

A store that cannot be written (disk full, read-only file or directory) raises
StoreError with one line naming the file and the cause; SQLite has rolled the
failed statement back, so every trial committed before it is intact and the
run can be resumed once the cause is fixed.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from kerntune.errors import StoreError
from kerntune.evaluate.trial import Status, Trial
from kerntune.llm.secrets import redact
from kerntune.space.params import jsonable
from kerntune.store import schema
from kerntune.store.files import RunLock, file_size_limit_reached, free_bytes, readable_copy, wal_bytes, writable

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    parent_id TEXT REFERENCES runs(id),
    kind TEXT NOT NULL,                 -- tune | compare | compare-child
    label TEXT,
    strategy TEXT,
    seed INTEGER,
    status TEXT NOT NULL,               -- running | done | failed
    options_json TEXT NOT NULL DEFAULT '{}',
    space_json TEXT,
    evaluator_json TEXT,
    device TEXT,
    created REAL NOT NULL,
    finished REAL
);
CREATE TABLE IF NOT EXISTS trials (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(id),
    seq INTEGER NOT NULL,
    config_key TEXT NOT NULL,
    config_json TEXT NOT NULL,
    status TEXT NOT NULL,
    time_ms REAL,
    times_json TEXT,
    compile_s REAL,
    bench_s REAL,
    clock_s REAL,
    error TEXT,
    extra_json TEXT,
    source TEXT,                        -- which strategy / round proposed it
    created REAL NOT NULL,
    UNIQUE(run_id, config_key),
    UNIQUE(run_id, seq)
);
CREATE INDEX IF NOT EXISTS trials_run ON trials(run_id, seq);
CREATE TABLE IF NOT EXISTS best_configs (
    kernel_hash TEXT NOT NULL,
    problem_key TEXT NOT NULL,
    device TEXT NOT NULL,
    versions TEXT NOT NULL,
    config_json TEXT NOT NULL,
    time_ms REAL NOT NULL,
    run_id TEXT,
    updated REAL NOT NULL,
    PRIMARY KEY (kernel_hash, problem_key, device, versions)
);
CREATE TABLE IF NOT EXISTS llm_exchanges (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT REFERENCES runs(id),
    round INTEGER,
    provider TEXT,
    model TEXT,
    prompt TEXT,
    response TEXT,
    accepted_json TEXT,
    rejected_json TEXT,
    tokens_in INTEGER,
    tokens_out INTEGER,
    latency_s REAL,
    cost REAL,
    error TEXT,
    created REAL NOT NULL
);
"""


@dataclass
class RunRecord:
    id: str
    parent_id: str | None
    kind: str
    label: str | None
    strategy: str | None
    seed: int | None
    status: str
    options: dict[str, Any]
    created: float
    finished: float | None
    #: The space and evaluator identity the run was started with (what a resume must match).
    space: dict[str, Any] | None = None
    evaluator: dict[str, Any] | None = None
    #: What the finished search said of itself (stop reason, notes, strategy figures); None before.
    summary: dict[str, Any] | None = None


def _text(value: Any) -> Any:
    """A string SQLite can store: lone surrogates (which a JSON escape like "\\ud800" in a
    model's answer produces) cannot be encoded as UTF-8 and would abort the insert."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def new_run_id() -> str:
    """A fresh run id; a caller that must print the id before the run starts makes it here."""
    return uuid.uuid4().hex[:12]


class Store:
    """A thin, explicit layer over one SQLite file."""

    #: Called with (run_id, kind, parent_id) right after a run is created, and with (run_id, trial)
    #: after each trial is committed.  Why hooks here: the run id of a comparison is made deep in
    #: the harness, and a caller (the CLI, the Python API) must name it before the run ends, so
    #: that a killed run can be resumed from what a log file shows.
    on_run_created: Callable[[str, str, str | None], None] | None = None
    on_trial_added: Callable[[str, Trial], None] | None = None
    #: The temporary copy a read-only store is read from while its WAL holds trials (``readable_copy``).
    _copy: tempfile.TemporaryDirectory | None = None

    def __init__(self, path: str | Path, readonly: bool = False) -> None:
        """``readonly`` opens an existing store for reading only (``store runs``, ``export``,
        ``report``): a store on a read-only disk can still be listed, and a mistyped path is
        reported rather than created."""
        self.path = Path(path)
        self.readonly = readonly
        if self.path.is_dir():
            raise StoreError(f"cannot open store {self.path}: it is a directory (give the store's file)")
        schema.check_file(self.path)
        if readonly:
            self._open_readonly()
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None)
            self.conn.row_factory = sqlite3.Row
            schema.inspect(self.conn, self.path)   # before any write: a foreign or newer file stays untouched
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.execute("PRAGMA foreign_keys=ON")
            schema.prepare(self.conn, self.path, SCHEMA)
            self._add_missing_columns()
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError):
                raise StoreError(f"cannot open store {self.path}: {self._cause(exc)}") from None
            raise StoreError(f"cannot open store {self.path}: it is corrupt or not a kerntune store ({exc})") from None
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open store {self.path}: {self._cause(exc)}") from None

    def _open_readonly(self) -> None:
        if not self.path.exists():
            raise StoreError(f"no store at {self.path} (a run creates it; --store or KERNTUNE_STORE names another)")
        try:
            self._connect_readonly(self.path.resolve().as_uri() + "?mode=ro")
            return
        except sqlite3.OperationalError:
            pass
        # mode=ro needs the WAL's shared-memory file, which a read-only directory cannot hold once the
        # writer is gone.  immutable=1 reads the database file as it is, ignoring the WAL: right only
        # when the WAL holds nothing; else the trials still in it are read from a copy (``readable_copy``).
        if wal_bytes(self.path) > 0:
            self._copy, target = readable_copy(self.path)
            query = target.resolve().as_uri() + "?mode=ro"
        else:
            query = self.path.resolve().as_uri() + "?mode=ro&immutable=1"
        try:
            self._connect_readonly(query)
        except sqlite3.OperationalError as exc:
            self.close()
            raise StoreError(f"cannot open store {self.path} for reading: {exc}") from None

    def _connect_readonly(self, uri: str) -> None:
        self.conn = sqlite3.connect(uri, uri=True, timeout=30.0, isolation_level=None)
        self.conn.row_factory = sqlite3.Row
        try:
            _, ours = schema.inspect(self.conn, self.path)
        except BaseException:
            self.conn.close()
            raise
        if not ours:
            self.close()
            raise StoreError(f"{self.path} holds no kerntune runs yet (an empty database)")

    def _read(self, sql: str, args: tuple = ()) -> list[sqlite3.Row]:
        """A query whose failure (a corrupt page, a file changed under us) is one line, not a traceback."""
        try:
            return self.conn.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot read store {self.path}: it is corrupt or unreadable ({exc})") from None

    def _add_missing_columns(self) -> None:
        """Columns added after a store was made: ``calls_json`` holds every call of an exchange
        (repair calls too), which a resumed LLM run replays in order; ``runs.summary_json`` what a
        finished search said of itself (stop reason, notes, a strategy's figures such as the model
        time it hid), for reports."""
        for table, column in (("llm_exchanges", "calls_json"), ("runs", "summary_json")):
            have = {r["name"] for r in self.conn.execute(f"PRAGMA table_info({table})")}
            if column not in have:
                try:
                    self.conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} TEXT")
                except sqlite3.OperationalError as exc:
                    if "duplicate column" not in str(exc):  # another process added it just now
                        raise

    def lock_run(self, run_id: str) -> RunLock:
        """Hold ``run_id`` for this process until the lock is released (or the process dies).

        Two processes continuing one run would both re-walk it and write the same trial
        numbers; the second is refused with one line instead.  The lock is an ``fcntl`` lock
        on one byte of ``STORE-runs.lock``, so the kernel releases it when a holder is killed.
        """
        return RunLock.acquire(Path(f"{self.path}-runs.lock"), run_id)

    def _cause(self, exc: BaseException) -> str:
        """Why a store operation failed, in the user's words first and SQLite's after.

        SQLite reports a full disk as SQLITE_FULL but a read-only directory as anything
        from SQLITE_READONLY_DIRECTORY to SQLITE_CANTOPEN, and a file size limit (``ulimit
        -f``) as a write I/O error; the file system is asked directly where SQLite is vague.
        """
        name = getattr(exc, "sqlite_errorname", "") or ""
        text = str(exc) if not isinstance(exc, OSError) else (exc.strerror or str(exc))
        if name.startswith("SQLITE_FULL") or "disk is full" in text:
            return f"disk full ({text})"
        if name.startswith("SQLITE_READONLY") or not writable(self.path):
            return f"the store is read-only: check the permissions of {self.path} and its directory ({text})"
        free = free_bytes(self.path.parent)
        if free is not None and free < 1 << 20:
            return f"disk full ({free} bytes left; {text})"
        limit = file_size_limit_reached(self.path) if name.startswith("SQLITE_IOERR") else None
        if limit is not None:
            return f"disk full for this process: the file size limit (ulimit -f, {limit} bytes) is reached ({text})"
        return text

    def close(self) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None:
            conn.close()
        if self._copy is not None:  # the copy a read-only store with a WAL was read from
            self._copy.cleanup()
            self._copy = None

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self, sql: str, args: tuple = ()) -> sqlite3.Cursor:
        try:
            return self.conn.execute(sql, tuple(_text(a) for a in args))
        except sqlite3.IntegrityError:
            raise
        except sqlite3.Error as exc:
            # Disk full, read-only file: the transaction is rolled back by SQLite,
            # so the store stays consistent; the user gets one clear line.
            raise StoreError(f"cannot write to store {self.path}: {self._cause(exc)}; the trials committed"
                             " before are kept (continue with --resume once it is fixed)") from None

    # -- runs --------------------------------------------------------------------------------
    def create_run(self, kind: str, *, parent_id: str | None = None, label: str | None = None,
                   strategy: str | None = None, seed: int | None = None, options: Mapping[str, Any] | None = None,
                   space: Mapping[str, Any] | None = None, evaluator: Mapping[str, Any] | None = None,
                   device: str | None = None, run_id: str | None = None) -> str:
        """A new run, ``running``.  A ``tune`` run or a comparison's repeat whose ``options`` name no model
        (``"llm"``: the spec of the one it asks) is stored with ``"llm": null``: that it asked none is then
        on record, and ``--resume`` refuses a model given later (``resume.resumed_model``); a run stored
        before this key was kept cannot tell "no model" from "a model whose spec was not kept"."""
        run_id = run_id or new_run_id()
        options = dict(options or {})
        if kind in ("tune", "compare-child"):
            options.setdefault("llm", None)
        self._write(
            "INSERT INTO runs (id, parent_id, kind, label, strategy, seed, status, options_json, space_json,"
            " evaluator_json, device, created) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (run_id, parent_id, kind, label, strategy, seed, "running", json.dumps(options),
             json.dumps(space) if space is not None else None,
             json.dumps(evaluator) if evaluator is not None else None, device, time.time()),
        )
        if self.on_run_created is not None:
            self.on_run_created(run_id, kind, parent_id)
        return run_id

    def finish_run(self, run_id: str, status: str = "done", summary: dict[str, Any] | None = None) -> None:
        """Mark a run ended; ``summary`` (JSON-able) is what the search said of itself."""
        text = None if summary is None else json.dumps(summary, default=str)
        self._write("UPDATE runs SET status=?, finished=?, summary_json=COALESCE(?, summary_json) WHERE id=?",
                    (status, time.time(), text, run_id))

    def get_run(self, run_id: str) -> RunRecord:
        rows = self._read("SELECT * FROM runs WHERE id=?", (run_id,))
        if not rows:
            raise StoreError(f"no run {run_id!r} in {self.path}")
        return self._run(rows[0])

    def resolve_run_id(self, run: str) -> str:
        """``last`` is the newest top-level run; a unique prefix of an id is accepted too,
        because ids are printed in full but typed by hand (every command that reads a run)."""
        if run == "last":
            runs = self.list_runs(1)
            if not runs:
                raise StoreError(f"the store {self.path} holds no run")
            return runs[0].id
        if not run.strip():
            raise StoreError("an empty run id (`kerntune store runs` lists them)")
        if self._read("SELECT id FROM runs WHERE id=?", (run,)):
            return run
        rows = self._read("SELECT id, parent_id, label FROM runs WHERE substr(id, 1, length(?1)) = ?1 "
                          "ORDER BY parent_id IS NOT NULL, created LIMIT 3", (run,))
        if len(rows) == 1:
            return str(rows[0]["id"])
        if len(rows) > 1:
            # A comparison's repeats are runs too, though `store runs` lists only top-level ones: say which is which.
            shown = [r["id"] if r["parent_id"] is None else f"{r['id']} ({r['label'] or 'a repeat'} of {r['parent_id']})"
                     for r in rows]
            raise StoreError(f"run id {run!r} is ambiguous in {self.path}: " + ", ".join(shown))
        raise StoreError(f"no run {run!r} in {self.path} (see `kerntune store runs`)")

    def child_runs(self, parent_id: str) -> list[RunRecord]:
        rows = self._read("SELECT * FROM runs WHERE parent_id=? ORDER BY created, id", (parent_id,))
        return [self._run(r) for r in rows]

    def find_child(self, parent_id: str, label: str) -> RunRecord | None:
        rows = self._read("SELECT * FROM runs WHERE parent_id=? AND label=?", (parent_id, label))
        return self._run(rows[0]) if rows else None

    def list_runs(self, limit: int = 50) -> list[RunRecord]:
        rows = self._read("SELECT * FROM runs WHERE parent_id IS NULL ORDER BY created DESC LIMIT ?", (limit,))
        return [self._run(r) for r in rows]

    def _run(self, row: sqlite3.Row) -> RunRecord:
        try:
            return self._run_record(row)
        except (ValueError, TypeError) as exc:
            raise StoreError(f"store {self.path}: run {row['id']!r} is damaged ({exc})") from None

    @staticmethod
    def _run_record(row: sqlite3.Row) -> RunRecord:
        return RunRecord(row["id"], row["parent_id"], row["kind"], row["label"], row["strategy"], row["seed"],
                         row["status"], json.loads(row["options_json"] or "{}"), row["created"], row["finished"],
                         json.loads(row["space_json"]) if row["space_json"] else None,
                         json.loads(row["evaluator_json"]) if row["evaluator_json"] else None,
                         json.loads(row["summary_json"]) if "summary_json" in row.keys() and row["summary_json"]
                         else None)

    # -- trials ------------------------------------------------------------------------------
    def add_trial(self, run_id: str, seq: int, key: str, trial: Trial, clock_s: float, source: str = "") -> None:
        """Commit one trial now (autocommit mode: one statement, one transaction)."""
        self._write(
            "INSERT INTO trials (run_id, seq, config_key, config_json, status, time_ms, times_json, compile_s,"
            " bench_s, clock_s, error, extra_json, source, created) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (run_id, seq, key, json.dumps({k: jsonable(v) for k, v in trial.config.items()}), trial.status.value,
             trial.time_ms, json.dumps(trial.times_ms), trial.compile_s, trial.bench_s, clock_s, trial.error,
             json.dumps(trial.extra), source, time.time()),
        )
        if self.on_trial_added is not None:
            self.on_trial_added(run_id, trial)

    def trials(self, run_id: str) -> list[tuple[str, Trial, float]]:
        """(config_key, trial, clock_s) in measurement order."""
        rows = self._read("SELECT * FROM trials WHERE run_id=? ORDER BY seq", (run_id,))
        try:
            return [(r["config_key"], self._trial(r), r["clock_s"] or 0.0) for r in rows]
        except (ValueError, TypeError, KeyError) as exc:
            raise StoreError(f"store {self.path}: a trial of run {run_id!r} is damaged ({exc})") from None

    def iter_trial_rows(self, run_ids: list[str]) -> Iterator[sqlite3.Row]:
        for rid in run_ids:
            yield from self._read("SELECT * FROM trials WHERE run_id=? ORDER BY seq", (rid,))

    @staticmethod
    def _trial(row: sqlite3.Row) -> Trial:
        return Trial(json.loads(row["config_json"]), Status(row["status"]), row["time_ms"],
                     json.loads(row["times_json"] or "[]"), row["compile_s"] or 0.0, row["bench_s"] or 0.0,
                     row["error"], json.loads(row["extra_json"] or "{}"))

    # -- best configs (the persistent tuning cache) -----------------------------------------
    def put_best(self, kernel_hash: str, problem_key: str, device: str, versions: str,
                 config: Mapping[str, Any], time_ms: float, run_id: str | None = None,
                 replace: bool = False) -> None:
        """Cache ``config`` unless the entry already holds one at least as fast (``replace``: whatever
        the entry holds, for a winner of a wider search than the entry's or of a run that measured the
        entry's config itself (``kerntune.run.winner.store_winner``), whose times were taken in another
        process and need not be comparable).

        One statement, so that the comparison and the write are one transaction: as a read and then
        a write, two processes finishing the same kernel at once could both read "no faster entry"
        and the slower one write last, leaving its config cached (SQLite >= 3.24 for the upsert)."""
        # By column name: a column added later (a new store version) must not shift the values.
        args = (kernel_hash, problem_key, device, versions, json.dumps({k: jsonable(v) for k, v in config.items()}),
                time_ms, run_id, time.time())
        insert = ("INSERT INTO best_configs (kernel_hash, problem_key, device, versions, config_json, time_ms,"
                  " run_id, updated) VALUES (?,?,?,?,?,?,?,?)")
        if sqlite3.sqlite_version_info >= (3, 24, 0):
            self._write(insert + " ON CONFLICT(kernel_hash, problem_key, device, versions) DO UPDATE SET"
                        " config_json=excluded.config_json, time_ms=excluded.time_ms, run_id=excluded.run_id,"
                        " updated=excluded.updated" + ("" if replace else " WHERE excluded.time_ms < best_configs.time_ms"),
                        args)
            return
        self._write("BEGIN IMMEDIATE")  # an older SQLite: the read and the write under one write lock
        try:
            rows = self._read("SELECT time_ms FROM best_configs WHERE kernel_hash=? AND problem_key=? AND device=?"
                              " AND versions=?", args[:4])
            if not rows or replace or rows[0]["time_ms"] > time_ms:
                self._write(insert.replace("INSERT", "INSERT OR REPLACE", 1), args)
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise
        self._write("COMMIT")

    def get_best(self, kernel_hash: str, problem_key: str, device: str, versions: str) -> tuple[dict, float] | None:
        entry = self.best_entry(kernel_hash, problem_key, device, versions)
        return (entry["config"], entry["time_ms"]) if entry is not None else None

    def best_entry(self, kernel_hash: str, problem_key: str, device: str, versions: str) -> dict[str, Any] | None:
        """The cached winner with the run that found it (``run_id``) and the evaluation budget that run
        was given (``run_max_evals``: None when the run is not in this store or had no cap): what a
        caller asking for a wider search now compares with."""
        rows = self._read(
            "SELECT b.config_json, b.time_ms, b.run_id, r.options_json FROM best_configs b LEFT JOIN runs r"
            " ON r.id = b.run_id WHERE b.kernel_hash=? AND b.problem_key=? AND b.device=? AND b.versions=?",
            (kernel_hash, problem_key, device, versions))
        if not rows:
            return None
        r = rows[0]
        try:
            budget = (json.loads(r["options_json"] or "{}").get("budget") or {}).get("max_evals")
        except (ValueError, AttributeError):  # a run written by another tool: no budget known
            budget = None
        return {"config": json.loads(r["config_json"]), "time_ms": r["time_ms"], "run_id": r["run_id"],
                "run_max_evals": budget if isinstance(budget, int) and not isinstance(budget, bool) else None}

    def iter_best(self, kernel_hash: str | None = None) -> list[dict[str, Any]]:
        """Every cached winner (optionally of one kernel), newest first."""
        sql = "SELECT * FROM best_configs"
        rows = self._read(sql + (" WHERE kernel_hash=?" if kernel_hash else "") + " ORDER BY updated DESC",
                          (kernel_hash,) if kernel_hash else ())
        return [{"kernel_hash": r["kernel_hash"], "problem_key": r["problem_key"], "device": r["device"],
                 "versions": r["versions"], "config": json.loads(r["config_json"]), "time_ms": r["time_ms"],
                 "run_id": r["run_id"], "updated": r["updated"]} for r in rows]

    def llm_exchanges(self, run_id: str) -> list[dict[str, Any]]:
        rows = self._read("SELECT * FROM llm_exchanges WHERE run_id=? ORDER BY id", (run_id,))
        return [{"round": r["round"], "provider": r["provider"], "model": r["model"], "prompt": r["prompt"],
                 "response": r["response"], "accepted": json.loads(r["accepted_json"] or "null") or [],
                 "rejected": json.loads(r["rejected_json"] or "null") or [], "tokens_in": r["tokens_in"],
                 "tokens_out": r["tokens_out"], "latency_s": r["latency_s"], "cost": r["cost"], "error": r["error"],
                 "calls": json.loads(r["calls_json"]) if "calls_json" in r.keys() and r["calls_json"] else None}
                for r in rows]

    # -- LLM exchanges ------------------------------------------------------------------------
    def add_llm_exchange(self, run_id: str | None, round_no: int, provider: str, model: str, prompt: str,
                         response: str, accepted: Any = None, rejected: Any = None, tokens_in: int = 0,
                         tokens_out: int = 0, latency_s: float = 0.0, cost: float = 0.0,
                         error: str | None = None, calls: list[dict[str, Any]] | None = None) -> int:
        """Every text field is redacted here, whoever the caller: a model (or a server's error
        message, or a proxy's ``model`` field) that echoes an API key must not put it in the store."""
        cur = self._write(
            "INSERT INTO llm_exchanges (run_id, round, provider, model, prompt, response, accepted_json,"
            " rejected_json, tokens_in, tokens_out, latency_s, cost, error, created, calls_json)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (run_id, round_no, redact(provider), redact(model), redact(prompt), redact(response),
             redact(json.dumps(accepted)), redact(json.dumps(rejected)), tokens_in, tokens_out, latency_s, cost,
             redact(error) if error else error, time.time(),
             redact(json.dumps(calls)) if calls is not None else None),
        )
        return int(cur.lastrowid or 0)

    def keep_llm_exchanges(self, run_id: str, keep: int) -> None:
        """Drop the run's exchanges after its first ``keep``: the failed calls that ended a run, once a
        resume asks them again (a later resume must replay the new answer, not the old failure)."""
        self._write("DELETE FROM llm_exchanges WHERE run_id=? AND id NOT IN"
                    " (SELECT id FROM llm_exchanges WHERE run_id=? ORDER BY id LIMIT ?)", (run_id, run_id, keep))
