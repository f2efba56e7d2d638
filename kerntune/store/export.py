"""Exporting a run's trials: CSV for spreadsheets, a Kernel Tuner cache file
for Kernel Tuner users (and for kerntune's own replay), and kerntune's table.

None of the three formats has a "best" field: a reader takes the order, or the fastest time.  So a run's
re-timed winner (``kerntune.run.winner.WINNER``, what ``tune`` printed and the report names first) comes
first in each, and the rest keep their order; every time stays the screening's.  Why: in trial order, a
reader saw first (or fastest) the screening's pick that the runoff had rejected.  A winner the search
never screened (the baseline, re-timed beside the pick) has no row to put first."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Callable

from kerntune.errors import StoreError
from kerntune.evaluate.recorded import table_dict
from kerntune.evaluate.trial import Status, Trial
from kerntune.run.winner import WINNER, config_text
from kerntune.space import space_from_dict
from kerntune.store.sqlite import Store

_KT_FAILURE = {
    Status.INVALID: "InvalidConfig",
    Status.COMPILE_ERROR: "CompilationFailedConfig",
    Status.COMPILE_TIMEOUT: "CompilationFailedConfig",
}


def _run_trials(store: Store, run_id: str, owners: list[str] | None = None,
                sources: list[str] | None = None) -> tuple[list[Trial], list[float]]:
    """The run's trials (a comparison's: all its repeats'); ``owners`` gets each trial's repeat label,
    ``sources`` the id of the run that measured it."""
    children = store.child_runs(run_id)
    runs = [(run_id, "")] + [(c.id, c.label or c.id) for c in children]
    trials, clocks = [], []
    for rid, label in runs:
        for _, t, clock in store.trials(rid):
            trials.append(t)
            clocks.append(clock)
            if owners is not None:
                owners.append(label)
            if sources is not None:
                sources.append(rid)
    if not trials:
        raise StoreError(f"run {run_id} has no trials")
    return trials, clocks


def _winners(store: Store, run_id: str) -> dict[tuple[str, str], int]:
    """(run id, config key) of each re-timed winner of the run and its repeats or shapes -> its place,
    the fastest re-timed first.  A summary's winner that is not a config and a positive time is ignored."""
    found = []
    for run in [store.get_run(run_id), *store.child_runs(run_id)]:
        w = (run.summary or {}).get(WINNER)
        ms = w.get("time_ms") if isinstance(w, dict) else None
        if (isinstance(w, dict) and isinstance(w.get("config"), dict) and isinstance(ms, (int, float))
                and not isinstance(ms, bool) and ms > 0):
            found.append((float(ms), run.id, config_text(w["config"])))
    return {(rid, key): place for place, (_, rid, key) in enumerate(sorted(found, key=lambda f: f[0]))}


def _winner_first(items: list[Any], place: Callable[[Any], int | None]) -> list[Any]:
    """``items`` with those that are a winner (``place``: its place, None: not one) first, by place;
    the rest in their order."""
    ranked = [(place(it), i) for i, it in enumerate(items)]
    return [items[i] for _, i in sorted(ranked, key=lambda r: (r[0] is None, r[0] or 0, r[1]))]


def _any_winner(winners: dict[tuple[str, str], int], config: dict[str, Any]) -> int | None:
    """The best place of ``config`` among any run's winners (a file keyed by config: one entry for all runs)."""
    key = config_text(config)
    return min((p for (_, k), p in winners.items() if k == key), default=None)


def export_csv(store: Store, run_id: str, path: str | Path) -> int:
    """One row per trial; a comparison's rows start with the repeat they belong to (its label,
    ``strategy#index``), since each repeat measures the same configs again.  The rows of a run's
    re-timed winner (that run's trials of its config) come first, then the rest in trial order."""
    owners: list[str] = []
    sources: list[str] = []
    trials, clocks = _run_trials(store, run_id, owners, sources)
    winners = _winners(store, run_id)
    rows = _winner_first(list(zip(trials, clocks, owners, sources)),
                         lambda r: winners.get((r[3], config_text(r[0].config))))
    names = list(trials[0].config)
    lead = [("kerntune_repeat" if "repeat" in names else "repeat")] if any(owners) else []
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(lead + names + ["status", "time_ms", "compile_s", "bench_s", "clock_s", "error"])
        for t, c, o, _ in rows:
            w.writerow(([o] if lead else [])
                       + [json.dumps(t.config[n]) if isinstance(t.config[n], list) else t.config[n] for n in names]
                       + [t.status.value, t.time_ms, t.compile_s, t.bench_s, c, t.error or ""])
    return len(trials)


def export_kernel_tuner(store: Store, run_id: str, path: str | Path) -> int:
    """Write a Kernel Tuner cache file (times in ms, failures as its strings); a run's re-timed winner's
    entry first."""
    run = store.get_run(run_id)
    trials, _ = _run_trials(store, run_id)
    names = list(trials[0].config)
    tune_params: dict[str, list[Any]] = {n: [] for n in names}
    seen: dict[str, set[str]] = {n: set() for n in names}  # by JSON text: 1, 1.0 and true are three values
    cache: dict[str, Any] = {}
    configs: dict[str, dict[str, Any]] = {}  # cache key -> its config
    for t in trials:
        if t.status is Status.UNMEASURED:
            continue
        for n in names:
            ident = json.dumps(t.config[n], sort_keys=True, default=str)
            if ident not in seen[n]:
                seen[n].add(ident)
                tune_params[n].append(t.config[n])
        entry: dict[str, Any] = dict(t.config)
        entry["time"] = t.time_ms if t.ok else _KT_FAILURE.get(t.status, "RuntimeFailedConfig")
        entry.update({"times": t.times_ms, "compile_time": t.compile_s * 1000.0,
                      "benchmark_time": t.bench_s * 1000.0, "verification_time": 0, "strategy_time": 0,
                      "framework_time": 0, "timestamp": ""})
        entry.update(t.extra)
        key = ",".join(str(t.config[n]) for n in names)
        cache[key], configs[key] = entry, t.config
    winners = _winners(store, run_id)
    cache = {k: cache[k] for k in _winner_first(list(cache), lambda k: _any_winner(winners, configs[k]))}
    work = _workload(store, run_id)
    size = work["problem_size"]
    data = {"device_name": work["device_name"] or "unknown", "kernel_name": work["kernel_name"] or run.label or "kernel",
            "problem_size": _kt_size(size),
            "tune_params_keys": names, "tune_params": tune_params, "objective": "time",
            "cache": cache}
    Path(path).write_text(json.dumps(data))
    return len(cache)


def _kt_size(size: Any) -> list[Any]:
    """A problem size as Kernel Tuner's cache holds it, a list of numbers; anything else (a Helion run's
    "4096x4096, 4096x4096") as [], which Kernel Tuner's loader accepts for any size."""
    if isinstance(size, (int, float)) and not isinstance(size, bool):
        return [size]
    if isinstance(size, (list, tuple)) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in size):
        return list(size)
    return []


def check_table(store: Store, run_id: str) -> dict[str, Any]:
    """The run's stored space (a comparison's: its repeats', which share it), or a StoreError."""
    row = store.conn.execute("SELECT space_json FROM runs WHERE (id=? OR parent_id=?) AND space_json IS NOT NULL"
                             " ORDER BY parent_id IS NOT NULL LIMIT 1", (run_id, run_id)).fetchone()
    if row is None or not row["space_json"]:
        raise StoreError(f"run {run_id} has no stored space to export a table with")
    return dict(json.loads(row["space_json"]))


def export_table(store: Store, run_id: str, path: str | Path) -> int:
    """kerntune's table (replayable): one trial per config, a run's re-timed winner's first."""
    space = space_from_dict(check_table(store, run_id))
    trials, _ = _run_trials(store, run_id)
    unique = {space.key(t.config): t for t in trials}
    winners = _winners(store, run_id)
    rows = _winner_first(list(unique.values()), lambda t: _any_winner(winners, t.config))
    row = store.conn.execute("SELECT evaluator_json FROM runs WHERE id=?", (run_id,)).fetchone()
    described = json.loads(row["evaluator_json"] or "{}") if row else {}
    meta = {"run_id": run_id, **_workload(store, run_id), "recorded_with": described}
    Path(path).write_text(json.dumps(table_dict(space, rows, meta)))
    return len(unique)


def _workload(store: Store, run_id: str) -> dict[str, Any]:
    """The kernel's name, its problem size and the device the run measured on, as the store keeps
    them (a run's ``evaluator_json`` holds ``kernel_name`` and ``problem_size``; a Triton run's
    also ``shape``); a comparison's repeats are asked where the comparison itself lacks one."""
    rows = store.conn.execute("SELECT evaluator_json, device FROM runs WHERE id=? OR parent_id=?"
                              " ORDER BY parent_id IS NOT NULL", (run_id, run_id)).fetchall()
    out: dict[str, Any] = {"device_name": None, "kernel_name": None, "problem_size": None}
    for row in rows:
        try:
            described = json.loads(row["evaluator_json"] or "{}")
        except ValueError:
            described = {}
        if not isinstance(described, dict):
            described = {}
        found = {"device_name": row["device"], "kernel_name": described.get("kernel_name"),
                 "problem_size": described.get("problem_size") or described.get("shape")}
        for key, value in found.items():
            if out[key] is None and value not in (None, "", []):
                out[key] = value
    return out
