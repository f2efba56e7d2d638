"""``kerntune store export`` puts a run's re-timed winner first.

Since the run keeps the winner its re-time settled (``kerntune.run.winner.WINNER``) and the report
names it first, export still wrote the trials in measurement order: a user exporting a run saw first
(CSV row, Kernel Tuner cache entry, kerntune table trial) whatever the search measured first, and a
reader ranking by time the screening's fastest, which the runoff had rejected.  None of the formats has
a "best" field, so the winner now comes first in each; its time stays the screening's.

The first test runs the real ``tune`` with a scripted evaluator (its runoff picks the screening's
second-fastest config, as in tests/test_report_fixes_winner.py) and the real ``kerntune store export``
in a subprocess; the others build real SQLite stores by hand.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any


from cli_runs import run_cli
from kerntune.evaluate import Status, Trial
from kerntune.store import Store
from kerntune.store.export import export_csv, export_kernel_tuner, export_table
from test_report_fixes_winner import PICK_MS, scripted_tune


def _export_all(tmp_path: Path, db: Path, run_id: str) -> tuple[list[dict[str, str]], dict[str, Any], dict[str, Any]]:
    """``kerntune store export RUN --csv --kernel-tuner --table`` in a real process: CSV rows, KT cache, table."""
    out = run_cli(tmp_path, "store", "export", run_id, "--store", str(db), "--csv", str(tmp_path / "t.csv"),
                  "--kernel-tuner", str(tmp_path / "kt.json"), "--table", str(tmp_path / "table.json"), timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    with open(tmp_path / "t.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return rows, json.loads((tmp_path / "kt.json").read_text()), json.loads((tmp_path / "table.json").read_text())


def _csv_config(row: dict[str, str]) -> dict[str, Any]:
    return {"BM": int(row["BM"]), "W": int(row["W"]), "bs": json.loads(row["bs"])}


def test_scripted_export_of_a_tuned_run_puts_the_re_timed_winner_first_with_its_screening_time(
        tmp_path: Path, monkeypatch) -> None:
    """The runoff picked the screening's second-fastest config; the CSV's first row, the Kernel Tuner
    cache's first entry and the table's first trial were the first config measured, not the winner."""
    ev, db, _, run_id = scripted_tune(tmp_path, monkeypatch)
    pick = ev.picked[0]
    with Store(db, readonly=True) as st:
        measured = [(t.config, t.time_ms) for _, t, _ in st.trials(run_id)]
    assert measured[0][0] != pick  # in measurement order the winner is not first
    screening_ms = next(ms for cfg, ms in measured if cfg == pick)
    fastest = min((m for m in measured if m[1] is not None), key=lambda m: m[1])[0]
    assert fastest != pick and screening_ms != PICK_MS

    rows, kt, table = _export_all(tmp_path, db, run_id)
    assert len(rows) == len(measured)
    assert _csv_config(rows[0]) == pick and float(rows[0]["time_ms"]) == screening_ms
    assert [_csv_config(r) for r in rows[1:]] == [c for c, _ in measured if c != pick]  # the rest as measured
    first = next(iter(kt["cache"].values()))
    assert {k: first[k] for k in ("BM", "W", "bs")} == pick and first["time"] == screening_ms
    assert table["trials"][0]["config"] == pick and table["trials"][0]["time_ms"] == screening_ms
    assert len(table["trials"]) == len(kt["cache"]) == len(measured)


def _trial(bm: int, ms: float | None) -> Trial:
    cfg = {"BM": bm, "W": 4}
    return Trial(cfg, Status.OK, ms, [ms]) if ms is not None else Trial(cfg, Status.RUNTIME_ERROR, error="boom")


def _store_with_repeats(db: Path, winners: dict[str, int | None]) -> str:
    """A parent run and one child per label in ``winners`` (label -> its winner's BM, None: no winner),
    each measuring BM 16, 32, 64, 128 in that order (128 fails)."""
    space = {"name": "s", "params": [{"name": "BM", "kind": "choice", "options": [16, 32, 64, 128]},
                                     {"name": "W", "kind": "choice", "options": [4]}]}
    with Store(db) as st:
        parent = st.create_run("compare", strategy="random", space=space)
        for n, (label, bm) in enumerate(winners.items()):
            child = st.create_run("compare-child", parent_id=parent, label=label, strategy="random", space=space)
            for seq, (b, ms) in enumerate(((16, 3.0), (32, 1.0), (64, 2.0), (128, None))):
                st.add_trial(child, seq, f"{b}", _trial(b, ms), clock_s=float(seq))
            summary = {} if bm is None else {"winner": {"config": {"BM": bm, "W": 4}, "time_ms": 0.5 + n,
                                                        "retimed": True}}
            st.finish_run(child, summary=summary)
        st.finish_run(parent)
    return parent


def test_each_repeats_csv_rows_start_with_its_own_winner_and_a_repeat_without_one_keeps_its_order(
        tmp_path: Path) -> None:
    """A comparison's (or ``--shapes``) repeats each keep their winner: the CSV lists each winner's row
    first (the fastest re-timed first), the rest in measurement order; the Kernel Tuner cache and the
    table, one entry per config, put the winners' configs first."""
    db = tmp_path / "c.db"
    parent = _store_with_repeats(db, {"a#0": 64, "b#0": 16, "c#0": None})
    with Store(db, readonly=True) as st:
        export_csv(st, parent, tmp_path / "c.csv")
        export_kernel_tuner(st, parent, tmp_path / "kt.json")
        export_table(st, parent, tmp_path / "t.json")
    with open(tmp_path / "c.csv", newline="") as fh:
        rows = [(r["repeat"], int(r["BM"]), r["time_ms"]) for r in csv.DictReader(fh)]
    assert rows[:2] == [("a#0", 64, "2.0"), ("b#0", 16, "3.0")]  # screening times kept
    assert rows[2:] == ([("a#0", b, ms) for b, ms in ((16, "3.0"), (32, "1.0"), (128, ""))]
                        + [("b#0", b, ms) for b, ms in ((32, "1.0"), (64, "2.0"), (128, ""))]
                        + [("c#0", b, ms) for b, ms in ((16, "3.0"), (32, "1.0"), (64, "2.0"), (128, ""))])
    kt = json.loads((tmp_path / "kt.json").read_text())
    assert [e["BM"] for e in kt["cache"].values()] == [64, 16, 32, 128]
    assert kt["cache"]["64,4"]["time"] == 2.0
    table = json.loads((tmp_path / "t.json").read_text())
    assert [t["config"]["BM"] for t in table["trials"]] == [64, 16, 32, 128]


def test_a_run_without_a_re_timed_winner_exports_in_measurement_order(tmp_path: Path) -> None:
    """No winner in the summary (a replay, a store written before): the order is the measurement's, as before."""
    db = tmp_path / "n.db"
    parent = _store_with_repeats(db, {"a#0": None})
    with Store(db, readonly=True) as st:
        export_csv(st, parent, tmp_path / "n.csv")
        export_kernel_tuner(st, parent, tmp_path / "kt.json")
    with open(tmp_path / "n.csv", newline="") as fh:
        assert [int(r["BM"]) for r in csv.DictReader(fh)] == [16, 32, 64, 128]
    assert [e["BM"] for e in json.loads((tmp_path / "kt.json").read_text())["cache"].values()] == [16, 32, 64, 128]
