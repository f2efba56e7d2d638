"""Tuning many shapes of one kernel under one budget (``kerntune tune --shapes``).

Why an order and a shared budget: a kernel's config ranking carries across
nearby shapes (see ``kerntune.run.warm_start``), so each shape is tuned after the
tuned shape nearest to it, starting from what was learnt there; a shape
that converges early leaves its unused evaluations to the shapes after it.
Each winner goes to the store's ``best_configs`` like any single-shape result:
that is the dispatch table (shape -> winner) that ``kerntune cache export``
writes and the decorator's ``dispatch=`` reads (``kerntune.run.dispatch``).
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from kerntune.errors import KerntuneError
from kerntune.evaluate.base import Evaluator
from kerntune.run.dispatch import Shape
from kerntune.run.search import RunOptions, run_search
from kerntune.run.warm_start import nearby_runs, past_winners, shape_distance, transfer_data
from kerntune.store import Store
from kerntune.strategies import Budget

#: Strategies whose model learns from all past measurements (``ctx.transfer``); the others get
#: the past winners measured first.
TRANSFER_STRATEGIES = ("bayes", "gp")


@dataclass
class ShapeResult:
    shape: list[int]
    run_id: str | None
    best_config: dict[str, Any] | None
    best_ms: float | None
    evaluations: int
    budget: int
    warm_from: list[str] = field(default_factory=list)  # shapes whose results this one started from
    warm_configs: int = 0                                 # past winners measured first
    evals_to_best: int | None = None                      # evaluations until within 2% of this run's best


def _line_shapes(text: str) -> list[Shape] | None:
    """The shapes one line names, or None when it is not shapes.  ``4096x4096x4096``, ``4096 x 4096``,
    ``4096X4096`` and ``4096,4096,4096`` are one shape; a line of ``x`` shapes separated by commas or
    semicolons or spaces (``4096x4096, 2048x2048``, ``4096x4096 2048x2048``) lists several.  Why: such
    a list was once read as one shape of all the numbers (4096x4096x2048x2048), silently."""
    text = re.sub(r"\s*x\s*", "x", text.replace("\u00d7", "x").lower()).strip()
    items = [text]
    if "x" in text and re.search(r"[,;\s]", text):  # "4096x4096, 2048x2048" or "4096x4096 2048x2048"
        items = [i for i in re.split(r"[,;\s]+", text) if i.strip()]
        if not all("x" in i for i in items):
            return None   # "4096,4096x4096": which numbers form a shape is unknowable
    shapes = []
    for item in items:
        parts = [x for x in re.split(r"[x,;\s]+", item) if x]
        # ASCII digits only: "\u00b2".isdigit() is true and int() of it raised a traceback
        if not parts or not all(re.fullmatch(r"[0-9]+", x) and int(x) > 0 for x in parts):
            return None
        shapes.append(tuple(int(x) for x in parts))
    return shapes


def read_shapes(path: str | Path) -> list[Shape]:
    """One shape per line (``4096x4096x4096``, ``4096,4096,4096`` or ``4096 4096 4096``), or several ``x``
    shapes on a line separated by commas, semicolons or spaces; ``#`` starts a comment."""
    p = Path(path)
    if not p.exists():
        raise KerntuneError(f"shapes file not found: {p}")
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise KerntuneError(f"{p}: not a text file of shapes") from None
    except OSError as exc:
        raise KerntuneError(f"cannot read shapes file {p}: {exc.strerror or exc}") from None
    shapes: list[Shape] = []
    for n, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        found = _line_shapes(text)
        if not found:
            raise KerntuneError(f"{p}:{n}: expected a shape such as 4096x4096x4096, got {line.strip()!r}")
        for shape in found:
            if shapes and len(shape) != len(shapes[0]):
                raise KerntuneError(f"{p}:{n}: {len(shape)} dimensions, the first shape has {len(shapes[0])}")
            if shape not in shapes:
                shapes.append(shape)
    if not shapes:
        raise KerntuneError(f"{p}: no shapes")
    return shapes


def tuning_order(shapes: Sequence[Shape]) -> list[Shape]:
    """The most central shape first, then always the untuned shape nearest to a tuned one."""
    left = list(shapes)
    first = min(left, key=lambda s: sum(shape_distance(s, o) for o in left))
    order = [first]
    left.remove(first)
    while left:
        nxt = min(left, key=lambda s: min(shape_distance(s, t) for t in order))
        order.append(nxt)
        left.remove(nxt)
    return order


def _evals_to_best(history: Sequence[Any], within: float = 0.02) -> int | None:
    ok = [t.time_ms for t in history if t.ok]
    if not ok:
        return None
    target, best = min(ok) * (1 + within), math.inf
    for i, t in enumerate(history, 1):
        if t.ok and t.time_ms < best:
            best = t.time_ms
        if best <= target:
            return i
    return None


def tune_shapes(make_evaluator: Callable[[Shape], Evaluator], shapes: Sequence[Shape], strategy: str,
                total_evals: int, store: Store, *, seed: int = 0, options: dict[str, Any] | None = None,
                llm: Any = None, warm: bool = True, versions: str = "",
                on_shape: Callable[[ShapeResult], None] | None = None) -> list[ShapeResult]:
    """Tune every shape (nearest-first order) under ``total_evals`` evaluations in all, each
    starting from the shapes tuned before it (``warm``), and write each winner to the store's
    dispatch table (``best_configs``, keyed by kernel source hash, ``MxNxK``, device, and the
    torch/triton versions the evaluator reports, else ``versions``)."""
    if total_evals < len(shapes):
        raise KerntuneError(f"a budget of {total_evals} evaluations cannot cover {len(shapes)} shapes")
    results: list[ShapeResult] = []
    order = tuning_order(shapes)
    left = total_evals
    for i, shape in enumerate(order):
        per = left // (len(order) - i)
        ev = make_evaluator(shape)
        try:
            work = ev.workload()
            name, size = work.get("kernel_name"), work.get("problem_size") or list(shape)
            dev = ev.device()
            device = dev.get("name", "") or ""
            stack = f"torch={dev.get('torch')},triton={dev.get('triton')}" if dev.get("triton") else versions
            near = nearby_runs(store, name, size, device, evaluator=ev.describe()) if warm else []  # one scan for both uses
            winners = past_winners(store, name, size, ev.space, device, runs=near) if warm else []
            use_transfer = warm and strategy in TRANSFER_STRATEGIES
            transfer = transfer_data(store, name, size, ev.space, device, runs=near) if use_transfer else []
            run_options = RunOptions(store=store, strategy_options=options, llm=llm,
                                     label=f"shapes {'x'.join(map(str, shape))}",
                                     warm_start=[] if use_transfer else [w.config for w in winners],
                                     transfer=transfer, past_winners=winners)
            res = run_search(ev, strategy, Budget(max_evals=per), seed, run_options)
            best = res.best
            if best is not None:
                ident = ev.describe()
                store.put_best(ident.get("source_hash") or name or "kernel", "x".join(map(str, shape)), device,
                               stack, best.config, best.time_ms, res.run_id)
        finally:
            ev.close()
        left -= len(res.history)
        out = ShapeResult(list(shape), res.run_id, best.config if best else None, best.time_ms if best else None,
                          len(res.history), per, sorted({"x".join(map(str, w.problem_size)) for w in winners}),
                          0 if use_transfer else len(winners), _evals_to_best(res.history))
        results.append(out)
        if on_shape is not None:
            on_shape(out)
    return results


def as_dicts(results: Sequence[ShapeResult]) -> list[dict[str, Any]]:
    return [asdict(r) for r in results]
