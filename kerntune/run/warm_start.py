"""Warm starts: the winners of past runs of the same kernel on nearby shapes.

A config that won on 4096x4096x4096 is a good first guess for 8192x8192x512
(on the recorded H100 matmuls, the 4096^3 top five hold 8192x8192x512's
optimum) and a fair one for a skinny 256x8192x8192 (0.7-0.8 of its optimum).
Measuring those first and letting the strategy build on them replaces a
random start.  Shapes are compared by ``shape_distance``: the sum over
dimensions of |log2(a) - log2(b)|, so doubling one dimension costs 1.

What is found here reaches a run through ``kerntune.run.search.RunOptions``
(``warm_start``, ``transfer``, ``past_winners``); ``kerntune.run.shapes`` finds
it for every shape of ``tune --shapes``.
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from kerntune.space import Config, Space
from kerntune.store import Store


def shape_distance(a: Sequence[float], b: Sequence[float]) -> float:
    """Distance between two problem shapes on log2 sizes (inf when their ranks differ)."""
    if len(a) != len(b) or not a:
        return math.inf
    return sum(abs(math.log2(max(x, 1)) - math.log2(max(y, 1))) for x, y in zip(a, b))


class PastRun(dict):  # type: ignore[type-arg]
    """What one past run measured: config key -> log(time / that run's best), inf where the config
    failed; a dict, so that anything taking ``ctx.transfer`` as plain dicts still works, plus how far
    the run's shape is from the new one (``shape_distance``), which the GP's prior weighs runs by."""

    def __init__(self, measured: dict[str, float], distance: float = 0.0, problem_size: Sequence[Any] = ()) -> None:
        super().__init__(measured)
        self.distance = float(distance)
        self.problem_size = list(problem_size)


@dataclass
class PastWinner:
    config: Config
    time_ms: float
    problem_size: list[Any]
    device: str
    run_id: str
    distance: float


def _numbers(size: Any) -> list[float] | None:
    """A problem size as numbers, or None where it is not a sequence of numbers (Helion's runs store
    ``"512x512, 512x512"``, Kernel Tuner transform runs ``"4096x4096"``: no shape distance to them)."""
    if isinstance(size, (str, bytes)) or not isinstance(size, Sequence) or not size:
        return None
    if not all(isinstance(x, numbers.Real) and not isinstance(x, bool) for x in size):
        return None
    return [float(x) for x in size]


def _same_kernel(ident: Mapping[str, Any], evaluator: Mapping[str, Any] | None) -> bool:
    """Whether a stored run's evaluator identity (``kerntune.run.search.evaluator_identity``) is of the
    same kind as ``evaluator`` (the new run's ``describe()``), and of the same kernel source where both
    carry its hash: a kernel of the same name from another evaluator, or edited since, is not this one."""
    if evaluator is None:
        return True
    if ident.get("evaluator") != evaluator.get("evaluator"):
        return False
    ours, theirs = evaluator.get("source_hash"), ident.get("source_hash")
    return not (ours and theirs and ours != theirs)


def nearby_runs(store: Store, kernel_name: str, problem_size: Sequence[Any], device: str,
                evaluator: Mapping[str, Any] | None = None) -> list[tuple[bool, float, str, str, list[Any]]]:
    """Finished runs of ``kernel_name`` on other shapes: (other device, distance, id, device, size),
    same device and nearest shape first.  ``past_winners`` and ``transfer_data`` take its result
    so that a caller wanting both (``tune --shapes``) scans the runs table once.  With ``evaluator``
    (the new run's evaluator's ``describe()``), only runs of the same evaluator type count, and of
    the same kernel source hash where both carry one.  Sizes that are not sequences of numbers (the
    runs', or ``problem_size``) have no distance and are left out."""
    ours = _numbers(problem_size)
    if ours is None:
        return []
    rows = store.conn.execute("SELECT id, evaluator_json, device FROM runs WHERE evaluator_json IS NOT NULL "
                              "AND status = 'done'").fetchall()
    runs = []
    for row in rows:
        try:
            ident = json.loads(row["evaluator_json"] or "{}")
        except ValueError:
            continue
        if not isinstance(ident, dict) or ident.get("kernel_name") != kernel_name or not _same_kernel(ident, evaluator):
            continue
        size = ident.get("problem_size")
        theirs = _numbers(size)
        if theirs is None or theirs == ours:
            continue
        dist = shape_distance(theirs, ours)
        if math.isfinite(dist):
            same_device = not device or row["device"] == device
            runs.append((not same_device, dist, row["id"], row["device"] or "", list(size)))
    return sorted(runs)


def transfer_data(store: Store, kernel_name: str, problem_size: Sequence[Any], space: Space, device: str = "",
                  max_runs: int = 3, runs: Sequence[tuple[bool, float, str, str, list[Any]]] | None = None,
                  evaluator: Mapping[str, Any] | None = None) -> list[PastRun]:
    """Everything the nearest past runs measured, one ``PastRun`` per run (nearest first):
    config key -> log(time / that run's best), inf for a config that failed there.

    Why all of it and not only the winners: on the recorded H100 matmuls the ranking of configs
    carries across shapes (Spearman 0.86-0.97 between the three shapes) while single winners do
    not (a shape's optimum ranks 3rd to 123rd on another), so a model that learns from the whole
    ranking, and how far to trust it, finds a new shape's optimum sooner than one that starts
    from a few winners.
    """
    out: list[PastRun] = []
    if runs is None:
        runs = nearby_runs(store, kernel_name, problem_size, device, evaluator)
    for _, dist, run_id, _dev, size in runs[:max_runs]:
        rows = store.conn.execute("SELECT config_json, status, time_ms FROM trials WHERE run_id=?",
                                  (run_id,)).fetchall()
        ok = [r["time_ms"] for r in rows if r["status"] == "ok" and r["time_ms"]]
        if not ok:
            continue
        best = min(ok)
        run: dict[str, float] = {}
        for r in rows:
            cfg = space.canonical(json.loads(r["config_json"]))
            if set(cfg) != set(space.names) or not space.is_valid(cfg) or r["status"] == "invalid":
                continue
            ok_trial = r["status"] == "ok" and r["time_ms"]
            run[space.key(cfg)] = math.log(r["time_ms"] / best) if ok_trial else math.inf
        out.append(PastRun(run, dist, size))
    return out


def past_winners(store: Store, kernel_name: str, problem_size: Sequence[Any], space: Space, device: str = "",
                 per_run: int = 3, max_runs: int = 3,
                 runs: Sequence[tuple[bool, float, str, str, list[Any]]] | None = None,
                 evaluator: Mapping[str, Any] | None = None) -> list[PastWinner]:
    """The best ``per_run`` configs of up to ``max_runs`` past runs of ``kernel_name`` on other
    shapes, nearest shape first; configs that are not valid in ``space`` are left out (``evaluator``:
    as ``nearby_runs`` takes it)."""
    if runs is None:
        runs = nearby_runs(store, kernel_name, problem_size, device, evaluator)
    out: list[PastWinner] = []
    seen: set[str] = set()
    for _, dist, run_id, dev, size in runs[:max_runs]:
        best = store.conn.execute("SELECT config_json, time_ms FROM trials WHERE run_id=? AND status='ok' "
                                  "ORDER BY time_ms LIMIT ?", (run_id, per_run * 4)).fetchall()
        taken = 0
        for r in best:
            cfg = space.canonical(json.loads(r["config_json"]))
            key = space.key(cfg) if set(cfg) == set(space.names) else ""
            if not key or key in seen or not space.is_valid(cfg):
                continue
            seen.add(key)
            out.append(PastWinner(cfg, r["time_ms"], size, dev, run_id, dist))
            taken += 1
            if taken >= per_run:
                break
    return out
