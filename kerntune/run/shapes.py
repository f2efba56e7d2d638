"""Tuning many shapes of one kernel under one budget (``kerntune tune --shapes``).

Why an order and a shared budget: a kernel's config ranking carries across
nearby shapes (see ``kerntune.run.warm_start``), so each shape is tuned after the
tuned shape nearest to it, starting from what was learnt there; a shape
that converges early leaves its unused evaluations to the shapes after it.
Each winner goes to the store's ``best_configs`` like any single-shape result
(``kerntune.run.winner.store_winner``: where the table keeps another entry, the shape's notes say so):
that is the dispatch table (shape -> winner) that ``kerntune cache export``
writes and the decorator's ``dispatch=`` reads (``kerntune.run.dispatch``).

Kill and resume: with a parent run (``create_parent``; ``tune --shapes`` makes one), each shape's run
is its child, labelled by the shape, as a comparison's repeats are children of the comparison
(``kerntune.compare.harness``).  ``tune_shapes(parent_id=...)`` on a parent that holds children
reads back the shapes whose child finished (their evaluations charged to the shared budget),
resumes an interrupted child from its stored trials, and tunes the rest: nothing is measured twice.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Sequence

from kerntune.errors import KerntuneError
from kerntune.evaluate.base import Evaluator
from kerntune.run.dispatch import Shape
from kerntune.llm.secrets import redact
from kerntune.run.search import RunOptions, errors_end_the_run, run_search
from kerntune.run.warm_start import nearby_runs, past_winners, shape_distance, transfer_data
from kerntune.run.winner import WINNER, baseline_name, compiler_stack, confirmed_winner, store_winner
from kerntune.store import Store
from kerntune.store.resume import BASE_URL, SHAPES_PARENT_KIND, check_device, kept_base_url
from kerntune.strategies import Budget

#: Strategies whose model learns from all past measurements (``ctx.transfer``); the others get
#: the past winners measured first.
TRANSFER_STRATEGIES = ("bayes", "gp")

#: The leaders re-timed before a shape's winner is declared: ``tune``'s default (``--retime``).
DEFAULT_RETIME = 16

#: The key of a finished child's stored summary that keeps its ``ShapeResult`` once its winner is in
#: the dispatch table: a resume reads such a shape back instead of re-timing it.
SHAPE_RESULT = "shape_result"


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
    failure: str | None = None                            # where no config ran: the most common error
    baseline: dict[str, Any] | None = None                # the package's own choice, measured first
    speedup: list[float] | None = None                    # re-timed winner over the baseline: median, lo, hi
    retimed: bool = False                                 # the winner's time is its re-timed median
    notes: list[str] = field(default_factory=list)        # what re-timing said (a failed re-time, no speedup)
    earlier: bool = False                                 # read back from the store on a resume
    in_table: bool = True                                 # the winner is in the dispatch table (else a note)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ShapeResult":
        """A result as a child run's summary keeps it (keys this version does not know are left out)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


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
    return [shape for shape, _ in read_shape_lines(path)]


def read_shape_lines(path: str | Path) -> list[tuple[Shape, int]]:
    """``read_shapes`` with the line each shape is on, for messages that name it.  A UTF-8 byte-order
    mark (an editor on Windows writes one) is not part of the first line: it was refused as text."""
    p = Path(path)
    if not p.exists():
        raise KerntuneError(f"shapes file not found: {p}")
    try:
        lines = p.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError:
        raise KerntuneError(f"{p}: not a text file of shapes") from None
    except OSError as exc:
        raise KerntuneError(f"cannot read shapes file {p}: {exc.strerror or exc}") from None
    shapes: list[Shape] = []
    found_on: list[int] = []
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
                found_on.append(n)
    if not shapes:
        raise KerntuneError(f"{p}: no shapes")
    return list(zip(shapes, found_on))


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


def _failure(history: Sequence[Any]) -> str | None:
    """Why no config of a shape ran, as ``tune`` says it: its one error, or the most common of several."""
    if not history:
        return "no config was measured"
    errors = Counter(_error_line(t) for t in history if not t.ok)
    if not errors:
        return None
    (text, n), = errors.most_common(1)
    if len(errors) == 1:
        return f"every config failed with: {text}"
    return f"{len(errors)} different errors, the most common ({n} of {len(history)}): {text}"


def _error_line(t: Any) -> str:
    """A failed trial's error as one line (its last: Python's exception line), else its status."""
    error = (t.error or "").strip()
    return error.splitlines()[-1] if error else t.status.value


def create_parent(store: Store, kernel_file: str, ident: dict[str, Any], shapes: Sequence[Shape], strategy: str,
                  seed: int, total_evals: int, options: dict[str, Any] | None = None, llm: Any = None,
                  shapes_file: str | None = None, retime: int = DEFAULT_RETIME, base_url: str | None = None) -> str:
    """The parent run of a ``tune --shapes`` run: what a resume must find again (the kernel file or
    adapter spec, its source hash in ``ident``, the shapes, the total budget, strategy, seed, options,
    ``--retime`` and the model's spec, transcript and ``base_url``), so that ``tune --resume ID`` alone
    continues it.  Why: each shape was a run of its own, so a killed run could not be resumed and a rerun
    measured every finished shape again; ``retime`` was not kept, so a resume's table mixed re-timed and
    screening-only winners."""
    spec = getattr(llm, "spec", "") if llm is not None else ""
    transcript = getattr(llm, "transcript", None)
    opts = {"kernel_file": kernel_file, "shapes": [list(s) for s in shapes], "shapes_file": shapes_file,
            "budget": total_evals, "retime": retime, "strategy_options": dict(options or {}),
            "llm": redact(spec) if spec else None,
            "llm_transcript": str(Path(transcript).resolve()) if transcript else None,
            BASE_URL: kept_base_url(base_url) if llm is not None else None}
    return store.create_run(SHAPES_PARENT_KIND, strategy=strategy, seed=seed, options=opts, evaluator=ident)


def tune_shapes(make_evaluator: Callable[[Shape], Evaluator], shapes: Sequence[Shape], strategy: str,
                total_evals: int, store: Store, *, seed: int = 0, options: dict[str, Any] | None = None,
                llm: Any = None, warm: bool = True, versions: str = "",
                on_shape: Callable[[ShapeResult], None] | None = None, parent_id: str | None = None,
                retime: int = DEFAULT_RETIME) -> list[ShapeResult]:
    """Tune every shape (nearest-first order) under ``total_evals`` evaluations in all, each
    starting from the shapes tuned before it (``warm``), and write each winner to the store's
    dispatch table (``best_configs``, keyed by kernel source hash, ``MxNxK``, device, and the
    torch/triton versions the evaluator reports, else ``versions``).

    As ``tune`` does for one shape, a package kernel's own choice (``evaluator.baseline()``) is
    measured first, so the search can only improve on it, and where the evaluator can re-time
    (a GPU's benchmark worker) the ``retime`` leaders are settled and re-timed before the winner
    is written (0: not).  Why: ``--shapes`` did neither, and wrote a screening time's winner that
    could be slower than the package's own choice.

    ``parent_id``: the parent run (``create_parent``) whose children the shapes' runs are; a parent
    that holds children already is resumed (see the module's docstring) and is finished here.  It is
    held by this process throughout (``Store.lock_run``): two processes on one parent each tuned every
    shape left (twice the budget, duplicate children), and the second, refused a child, marked the
    parent failed while the first still ran; the second is now refused before it touches anything."""
    if total_evals < len(shapes):
        raise KerntuneError(f"a budget of {total_evals} evaluations cannot cover {len(shapes)} shapes")
    lock = store.lock_run(parent_id) if parent_id is not None else None  # refused here: the parent untouched
    try:
        return _tune_shapes(make_evaluator, shapes, strategy, total_evals, store, seed, options, llm, warm,
                            versions, on_shape, parent_id, retime)
    finally:
        if lock is not None:
            lock.release()


def _tune_shapes(make_evaluator: Callable[[Shape], Evaluator], shapes: Sequence[Shape], strategy: str,
                 total_evals: int, store: Store, seed: int, options: dict[str, Any] | None, llm: Any, warm: bool,
                 versions: str, on_shape: Callable[[ShapeResult], None] | None, parent_id: str | None,
                 retime: int) -> list[ShapeResult]:
    """``tune_shapes`` once the parent is held."""
    results: list[ShapeResult] = []
    made: dict[Shape, Evaluator] = {}  # a resume's first shape left: made to check its GPU first
    with errors_end_the_run(store, parent_id):  # a killed or interrupted parent says so in the store
        order = tuning_order(shapes)
        left = total_evals
        refused = _other_gpu(make_evaluator, order, store, parent_id, made)
        for i, shape in enumerate(order if refused is None else ()):
            child, stored = _finished(store, parent_id, shape)
            if stored is not None:  # finished, and its winner written: read back, nothing measured
                out = ShapeResult.from_dict({**stored, "earlier": True})
            else:
                per = left // (len(order) - i)
                if child is not None:  # the budget the child was started with: its stored path
                    per = int(((child.options or {}).get("budget") or {}).get("max_evals") or per)
                out = _tune_one(made.pop(shape, None) or make_evaluator(shape), shape, strategy, per, store, seed,
                                options, llm, warm, versions, parent_id, child.id if child is not None else None,
                                retime)
            left -= out.evaluations
            results.append(out)
            if on_shape is not None:
                on_shape(out)
    if refused is not None:  # raised here: the parent is left as it was, as `tune --resume` leaves a run
        raise refused
    if parent_id is not None:
        store.finish_run(parent_id, "done", summary={"evaluations": total_evals - left,
                                                     "shapes": [_plain(r) for r in as_dicts(results)]})
    return results


def _finished(store: Store, parent_id: str | None, shape: Shape) -> tuple[Any, dict[str, Any] | None]:
    """A shape's child run (None: none yet) and, where it finished with its winner written, its stored result."""
    child = store.find_child(parent_id, _label(shape)) if parent_id is not None else None
    stored = (child.summary or {}).get(SHAPE_RESULT) if child is not None and child.status == "done" else None
    return child, stored if isinstance(stored, dict) else None


def _other_gpu(make_evaluator: Callable[[Shape], Evaluator], order: Sequence[Shape], store: Store,
               parent_id: str | None, made: dict[Shape, Evaluator]) -> KerntuneError | None:
    """A resumed parent's refusal where its shapes were measured on another GPU (None: the same, a name
    unknown, or nothing left to tune), checked on the evaluator of the first shape left (kept in ``made``)
    before any shape is read back or measured.  Why: a resume between two shapes made the next shapes' runs
    on this GPU without a word, one dispatch table from two GPUs, while ``tune --resume`` refuses one run's."""
    if parent_id is None or not store.child_runs(parent_id):
        return None
    shape = next((s for s in order if _finished(store, parent_id, s)[1] is None), None)
    if shape is None:
        return None
    ev = made[shape] = make_evaluator(shape)
    try:
        check_device(store, store.get_run(parent_id), ev.device().get("name"))
    except BaseException as exc:  # the evaluator is not used: its workers end now
        made.pop(shape).close()
        if isinstance(exc, KerntuneError):
            return exc
        raise
    return None


def _label(shape: Shape) -> str:
    """A shape's run's label: how its parent finds it again on a resume."""
    return f"shapes {'x'.join(map(str, shape))}"


def _tune_one(ev: Evaluator, shape: Shape, strategy: str, per: int, store: Store, seed: int,
              options: dict[str, Any] | None, llm: Any, warm: bool, versions: str, parent_id: str | None,
              run_id: str | None, retime: int) -> ShapeResult:
    """One shape: its run (``run_id``: a child run to resume), the leaders re-timed, the winner written."""
    try:
        work = ev.workload()
        name, size = work.get("kernel_name"), work.get("problem_size") or list(shape)
        dev = ev.device()
        device = dev.get("name", "") or ""
        stack = compiler_stack(dev) if dev.get("triton") or not versions else versions
        near = nearby_runs(store, name, size, device, evaluator=ev.describe()) if warm else []  # one scan for both uses
        winners = past_winners(store, name, size, ev.space, device, runs=near) if warm else []
        use_transfer = warm and strategy in TRANSFER_STRATEGIES
        transfer = transfer_data(store, name, size, ev.space, device, runs=near) if use_transfer else []
        # a package kernel's own choice first (as `tune` measures it): the search can only improve on it
        shipped = ev.baseline()[0] if hasattr(ev, "baseline") else None
        first = ([shipped] if shipped else []) + ([] if use_transfer else [w.config for w in winners])
        run_options = RunOptions(store=store, run_id=run_id, parent_id=parent_id, kind="tune", strategy_options=options,
                                 llm=llm, label=_label(shape), warm_start=first, transfer=transfer,
                                 past_winners=winners)
        res = run_search(ev, strategy, Budget(max_evals=per), seed, run_options)
        best, found, winner = res.best, None, None
        if best is not None and retime > 0 and getattr(ev, "can_retime", hasattr(ev, "retime")):
            from kerntune.evaluate.retime import confirm

            found = confirm(ev, res.history, n_leaders=retime, baseline=shipped or ev.space.default)
            best = found.winner or best
            winner = confirmed_winner(found, baseline_name(shipped))
        kept = None  # the note where the dispatch table keeps another entry (``store_winner``)
        if best is not None:
            ident = ev.describe()
            kept = store_winner(store, ident.get("source_hash") or name or "kernel", "x".join(map(str, shape)),
                                device, stack, best.config, best.time_ms, res.run_id, res.history)
    finally:
        ev.close()
    # the winner's speedup over the baseline; none where the baseline stayed the winner (the search's
    # pick re-timed slower: ``found.pick``, its figure in the notes), which would print the pick's figure
    speedup = found.speedup if found is not None and found.pick is None else None
    out = ShapeResult(list(shape), res.run_id, best.config if best else None, best.time_ms if best else None,
                      len(res.history), per, sorted({"x".join(map(str, w.problem_size)) for w in winners}),
                      0 if use_transfer else len(winners), _evals_to_best(res.history),
                      failure=_failure(res.history) if best is None else None,
                      baseline=dict(shipped) if shipped else None,
                      speedup=[speedup.median, speedup.lo, speedup.hi] if speedup is not None else None,
                      retimed=found is not None and found.winner is not None,
                      notes=(list(found.notes) if found is not None else []) + ([kept] if kept else []),
                      in_table=best is not None and kept is None)
    if res.run_id is not None:  # the winner is in the dispatch table: a resume reads this shape back
        run = store.get_run(res.run_id)
        store.finish_run(res.run_id, run.status, summary={**(run.summary or {}), SHAPE_RESULT: _plain(asdict(out)),
                                                          **({WINNER: winner} if winner else {})})
    return out


def _plain(data: dict[str, Any]) -> dict[str, Any]:
    """A result's dict as JSON keeps it (a config's values as ``jsonable`` writes them)."""
    from kerntune.space import jsonable

    return {k: ({ck: jsonable(cv) for ck, cv in v.items()} if k in ("best_config", "baseline") and v else v)
            for k, v in data.items()}


def as_dicts(results: Sequence[ShapeResult]) -> list[dict[str, Any]]:
    return [asdict(r) for r in results]
