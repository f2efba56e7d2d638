"""Which stores this kerntune can read, and bringing older ones up to date.

The schema version lives in SQLite's own ``PRAGMA user_version``: 0 is a store made
before versioning (its tables are version 1's), 1 is today's.  A store is checked
before anything is read or written:

* a newer version (written by a later kerntune) is refused: its meaning may differ;
* a database of someone else (no kerntune tables, or a ``runs`` table of another
  layout) is refused, never written into;
* a file that is no SQLite database, or a corrupt one, is refused;
* an older known version is migrated in place.

Columns added later (``ALTER TABLE … ADD COLUMN``) are additive: a store keeps its version
number for them, and code that adds one checks ``PRAGMA table_info`` first.  A change that
is not additive bumps ``CURRENT`` and adds a step to ``MIGRATIONS``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Callable

from kerntune.errors import StoreError

#: The schema version this kerntune writes.
CURRENT = 1

#: Columns each kerntune table has had since version 1: a table of that name without them is foreign.
REQUIRED: dict[str, set[str]] = {
    "runs": {"id", "parent_id", "kind", "label", "strategy", "seed", "status", "options_json", "space_json",
             "evaluator_json", "device", "created", "finished"},
    "trials": {"id", "run_id", "seq", "config_key", "config_json", "status", "time_ms", "times_json", "compile_s",
               "bench_s", "clock_s", "error", "extra_json", "source", "created"},
    "best_configs": {"kernel_hash", "problem_key", "device", "versions", "config_json", "time_ms", "run_id",
                     "updated"},
    "llm_exchanges": {"id", "run_id", "round", "provider", "model", "prompt", "response", "accepted_json",
                      "rejected_json", "tokens_in", "tokens_out", "latency_s", "cost", "error", "created"},
}

#: version -> the step that brings a store of that version to the next one.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    0: lambda conn: None,   # before versioning: the tables already are version 1's
}

SQLITE_MAGIC = b"SQLite format 3\x00"


def check_file(path: Path) -> None:
    """Refuse a file that is no SQLite database before SQLite is asked to open it."""
    try:
        with path.open("rb") as fh:
            head = fh.read(16)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreError(f"cannot open store {path}: {exc.strerror}") from None
    if head and head != SQLITE_MAGIC[: len(head)] or 0 < len(head) < 16:
        raise StoreError(f"{path} is not a kerntune store (not an SQLite database); give another --store")


def inspect(conn: sqlite3.Connection, path: Path) -> tuple[int, set[str]]:
    """(version, kerntune tables present), refusing newer, foreign and corrupt stores."""
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        columns = {t: {r[1] for r in conn.execute(f"PRAGMA table_info({t})")} for t in tables & set(REQUIRED)}
    except sqlite3.OperationalError:
        raise   # locked, read-only, unopenable: the caller names the cause
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"cannot read store {path}: it is corrupt or not a kerntune store ({exc})") from None
    if version > CURRENT:
        raise StoreError(f"store {path} has schema version {version}, newer than this kerntune reads ({CURRENT}):"
                         " upgrade kerntune, or give another --store")
    ours = tables & set(REQUIRED)
    user = {t for t in tables if not t.startswith("sqlite_")}
    if user and not ours:
        listed = ", ".join(sorted(user))
        raise StoreError(f"{path} is an SQLite database but not a kerntune store (its tables: {listed[:80]});"
                         " give another --store")
    for table in sorted(ours):
        missing = REQUIRED[table] - columns[table]
        if missing:
            raise StoreError(f"{path} is not a kerntune store of a known version: its table {table!r} lacks"
                             f" {', '.join(sorted(missing))}; give another --store")
    return version, ours


def prepare(conn: sqlite3.Connection, path: Path, schema: str) -> None:
    """Check a store opened for writing, create what is missing and migrate it to ``CURRENT``."""
    version, _ = inspect(conn, path)
    conn.executescript(schema)
    while version < CURRENT:
        MIGRATIONS[version](conn)
        version += 1
        conn.execute(f"PRAGMA user_version={version}")
