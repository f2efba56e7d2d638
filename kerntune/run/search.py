"""One run: one strategy on one evaluator, storing every trial and resuming runs.

Resume works by replay: the strategy is deterministic under its seed, so it
is started again from scratch and every config the store already holds for
this run is answered from the store instead of being measured again.

``run_search`` takes what the search is (evaluator, strategy, budget, seed)
as arguments and everything about how the run is kept, watched and started
(store, run id, model, warm starts...) as one ``RunOptions``: callers build
that once and pass it on, instead of threading ten keywords through.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

from kerntune.evaluate.base import Evaluator
from kerntune.evaluate.trial import Trial
from kerntune.llm.secrets import redact
from kerntune.run.llm_resume import resumed_client
from kerntune.space import Config, Space, jsonable
from kerntune.store import Store
from kerntune.store.resume import check_device
from kerntune.strategies import Budget, BudgetExhausted, SearchContext, SearchStalled, get_strategy
from kerntune.strategies.base import check_seed
from kerntune.strategies.options import validate_options


@dataclass(frozen=True)
class RunOptions:
    """How a run is stored, watched and started; every field is optional.

    Frozen, so that one object can be built once and handed to several runs
    (``dataclasses.replace`` makes a variant, e.g. another label).
    """

    #: Where every trial is committed as it ends; None keeps the run in memory only.
    store: Store | None = None
    #: A run id: resumes that run if the store holds it, else names the new run.
    run_id: str | None = None
    #: The run this one is a child of: a comparison (stored as a ``compare-child`` run) or a
    #: ``tune --shapes`` parent (its shapes' runs are ``tune`` runs: ``kind``).
    parent_id: str | None = None
    #: The kind the new run is stored as (None: ``compare-child`` with a parent, else ``tune``).
    kind: str | None = None
    #: A name for the run in the store (``compare`` finds its children by it).
    label: str | None = None
    #: The strategy's own options (``kerntune options`` lists them), checked before the run starts.
    strategy_options: Mapping[str, Any] | None = None
    #: Called with the search context after every trial (progress lines; may raise BudgetExhausted to stop).
    progress: Callable[[SearchContext], None] | None = None
    #: Called with each note as the search makes it, and with what a long step waits for (a model).
    on_note: Callable[[str], None] | None = None
    on_status: Callable[[str], None] | None = None
    #: The model client (``kerntune.llm.LLMClient``) for strategies that ask one.
    llm: Any = None
    #: Configs measured first (winners of past runs on nearby shapes, see ``kerntune.run.warm_start``,
    #: or a package's own choice); every strategy then builds on them as on any earlier trial.  A config
    #: naming some fields is completed from the space's default; one outside the space is left out with a note.
    warm_start: Sequence[Config] = ()
    #: What past runs measured (``kerntune.run.warm_start.transfer_data``), for strategies whose
    #: model can start from it.
    transfer: Sequence[dict[str, float]] = ()
    #: Winners of past runs on nearby shapes (``kerntune.run.warm_start.PastWinner``), shown to a
    #: model in its first prompt.
    past_winners: Sequence[Any] = ()


#: The key of a run's stored options that keeps what decides its path besides the strategy, seed,
#: budget and options: the warm-start configs measured first (a package's own pick, which can change
#: between processes) and the parallelism batches are sized by (compile workers capped by free GPU
#: memory).  A resume uses the stored ones, so that it re-walks the stored path.
RESUME_PATH = "resume_path"

#: The key of a failed run's summary that says its last model call ended it (``-o fallback=error``: the
#: model failed or gave too few usable configs): the number of model calls stored then.  A resume asks
#: that call again instead of replaying it; every other stored call, failed ones included, was handled
#: (a fallback proposed its round) and is replayed.  Only such a call's exchange leaves the store.
MODEL_CALL_ENDED_IT = "model_call_ended_it"


@dataclass
class SearchResult:
    strategy: str
    seed: int
    best: Trial | None
    history: list[Trial]
    clocks: list[float]
    stop_reason: str
    run_id: str | None = None
    resumed_trials: int = 0
    llm_exchanges: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def best_so_far(self) -> list[float]:
        """Best time after each evaluation (inf until the first success)."""
        out, best = [], float("inf")
        for t in self.history:
            if t.ok and t.time_ms < best:  # type: ignore[operator]
                best = t.time_ms  # type: ignore[assignment]
            out.append(best)
        return out


def evaluator_identity(evaluator: Evaluator) -> dict[str, Any]:
    """What the store keeps of an evaluator: enough to re-create it, plus the kernel and
    problem size, so that later runs can find this one for a warm start (and ``tune --resume``
    can check that it is given the same one)."""
    workload = evaluator.workload()
    return {**evaluator.describe(), "kernel_name": workload.get("kernel_name"),
            "problem_size": workload.get("problem_size")}


def stored_options(budget: Budget, options: Mapping[str, Any], llm: Any) -> dict[str, Any]:
    """What a run's options are stored as, its resume path aside: the budget, the strategy's checked
    options and the model's spec (redacted: a cmd: line may hold a key; None: no model), so that a resume
    without --llm asks the same model, and the decorator finds its own unfinished run again by them."""
    spec = getattr(llm, "spec", "") if llm is not None else ""
    return {"budget": budget.to_dict(), **options, "llm": redact(spec) if spec else None}


def run_search(evaluator: Evaluator, strategy: str, budget: Budget, seed: int = 0,
               run: RunOptions | None = None) -> SearchResult:
    """Search with ``strategy``; with a store (``run.store``), every trial is committed as it ends.

    If ``run.run_id`` names a run already in the store, that run is resumed.  ``run.warm_start``
    configs are measured first; ``run.transfer`` and ``run.past_winners`` hand past runs'
    measurements and winners to the strategy (see ``RunOptions``).
    """
    run = run if run is not None else RunOptions()
    fn = get_strategy(strategy)
    options = validate_options(strategy, dict(run.strategy_options or {}), with_model=run.llm is not None)
    check_seed(seed)
    store, run_id = run.store, run.run_id
    prior: dict[str, tuple[Trial, float]] = {}
    warm, warm_notes = warm_start_configs(evaluator.space, run.warm_start)
    parallelism: int | None = None
    lock = None
    ended_by_model = 0
    if store is not None:
        existing = None
        if run_id is not None:
            try:
                existing = store.get_run(run_id)
            except Exception:
                existing = None
        if existing is not None:
            check_device(store, existing, evaluator.device().get("name"))  # before the run is held or touched
            if existing.status == "failed":  # (never an interrupted one: Ctrl-C during a call stores no exchange)
                ended_by_model = int((existing.summary or {}).get(MODEL_CALL_ENDED_IT) or 0)
            lock = store.lock_run(run_id)  # type: ignore[arg-type]
            for key, trial, clock in store.trials(run_id):  # type: ignore[arg-type]
                trial.config = evaluator.space.canonical(trial.config)
                prior[key] = (trial, clock)
            path = (existing.options or {}).get(RESUME_PATH)
            if isinstance(path, dict):  # (a run stored before the path was kept goes on with this process's)
                warm, warm_notes = warm_start_configs(evaluator.space, path.get("warm_start") or ())
                parallelism = path.get("parallelism")
        else:
            run_id = store.create_run(
                run.kind or ("compare-child" if run.parent_id else "tune"), parent_id=run.parent_id, label=run.label,
                strategy=strategy, seed=seed,
                options={**stored_options(budget, options, run.llm),
                         RESUME_PATH: {"warm_start": [{k: jsonable(v) for k, v in c.items()} for c in warm],
                                       "parallelism": evaluator.parallelism}},
                space=evaluator.space.to_dict(), evaluator=evaluator_identity(evaluator),
                device=evaluator.device().get("name"), run_id=run_id)
            lock = store.lock_run(run_id)
    try:
        with errors_end_the_run(store, run_id):
            return _search(fn, evaluator, strategy, budget, seed, run, run_id, prior, options, time.perf_counter(),
                           ended_by_model=ended_by_model, warm=warm, warm_notes=warm_notes,
                           parallelism=parallelism)
    finally:
        if lock is not None:
            lock.release()


def warm_start_configs(space: Space, configs: Sequence[Any]) -> tuple[list[Config], list[str]]:
    """The warm-start configs to measure, each completed from the space's default where it names only
    some fields, and a note for each left out and why.  A partial config raised a bare KeyError and one
    outside the space was skipped without a word."""
    out: list[Config] = []
    notes: list[str] = []
    seen: set[str] = set()
    for given in configs:
        try:
            cfg = space.normalize(given)
            errors = [str(e) for e in space.validate(cfg)]
        except Exception as exc:  # noqa: BLE001 - whatever is wrong with it, it is left out with the reason
            errors = [str(exc) or type(exc).__name__]
        if errors:
            shown = jsonable(dict(given)) if isinstance(given, Mapping) else given
            notes.append(f"warm start {shown} left out: {'; '.join(errors)}"[:500])
            continue
        cfg = space.canonical(cfg)
        key = space.key(cfg)
        if key not in seen:
            seen.add(key)
            out.append(cfg)
    return out, notes


@contextmanager
def errors_end_the_run(store: Store | None, run_id: str | None) -> Iterator[None]:
    """A run that an exception or Ctrl-C ends is stored as ``failed`` / ``interrupted`` with the error,
    instead of looking alive (``running`` is left only by a killed process); it resumes like a killed
    run (``--resume RUN_ID``).  ``compare`` wraps its parent run in it too."""
    try:
        yield
    except BaseException as exc:
        if store is not None and run_id is not None:
            status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
            try:
                summary: dict[str, Any] = {"error": redact(f"{type(exc).__name__}: {exc}")[:2000]}
                if getattr(exc, "retry_model_call", False):  # the model call just stored ended the run
                    calls = len(store.llm_exchanges(run_id))
                    if calls:
                        summary[MODEL_CALL_ENDED_IT] = calls
                store.finish_run(run_id, status, summary=summary)
            except Exception:  # noqa: BLE001 - a store that cannot write must not hide the error itself
                pass
        raise


def _forget_ending_call(store: Store, run_id: str) -> None:
    """Drop ``MODEL_CALL_ENDED_IT`` from a failed run's summary once a resume asks that call again."""
    summary = dict(store.get_run(run_id).summary or {})
    summary.pop(MODEL_CALL_ENDED_IT, None)
    store.finish_run(run_id, "failed", summary=summary)


def _search(fn: Callable[..., None], evaluator: Evaluator, strategy: str, budget: Budget, seed: int,
            run: RunOptions, run_id: str | None, prior: dict[str, tuple[Trial, float]],
            options: dict[str, Any], started: float, ended_by_model: int = 0,
            warm: Sequence[Config] = (), warm_notes: Sequence[str] = (),
            parallelism: int | None = None) -> SearchResult:
    store, progress, llm = run.store, run.progress, run.llm
    # A resumed run that leaves its stored path (a live model answering differently after the
    # stored calls ran out) numbers its new trials after every stored one instead of on top of them.
    next_seq = [len(prior)]

    def on_trial(seq: int, key: str, trial: Trial, clock: float, source: str) -> None:
        if store is not None:
            seq = max(seq, next_seq[0])
            next_seq[0] = seq + 1
            store.add_trial(run_id, seq, key, trial, clock, source)  # type: ignore[arg-type]
        if progress is not None:
            progress(ctx)

    def on_exchange(ex: dict[str, Any]) -> None:
        if replayed[0] > 0:  # the re-walk of a round the store holds already: not stored twice
            replayed[0] -= 1
        elif store is not None:
            store.add_llm_exchange(run_id, ex["round"], ex["provider"], ex["model"], redact(ex["prompt"]),
                                   redact(ex["response"]), ex["accepted"], ex["rejected"], ex["tokens_in"],
                                   ex["tokens_out"], ex["latency_s"], ex["cost"], ex["error"], calls=ex.get("calls"))
        llm_log.append(ex)

    llm_log: list[dict[str, Any]] = []
    replayed = [0]
    stored = store.llm_exchanges(run_id) if llm is not None and store is not None else []  # type: ignore[arg-type]
    if ended_by_model and len(stored) == ended_by_model:
        # the model call that ended the run (MODEL_CALL_ENDED_IT) is asked again, not replayed, and leaves
        # the store, so that a later resume replays the new answer in its place.  The mark goes first: a
        # resume killed after the new answer is stored must not take that one out as well.
        _forget_ending_call(store, run_id)  # type: ignore[arg-type]
        stored.pop()
        store.keep_llm_exchanges(run_id, len(stored))  # type: ignore[union-attr, arg-type]
    if stored:  # a resumed run (possibly killed before its first trial was stored)
        replayed[0] = len(stored)
        llm = resumed_client(llm, stored)
    ctx = SearchContext(evaluator.space, evaluator, budget, seed, on_trial=on_trial, prior=prior, llm=llm,
                        on_llm_exchange=on_exchange, transfer=list(run.transfer),
                        past_winners=list(run.past_winners), on_note=run.on_note, on_status=run.on_status,
                        parallelism=parallelism)
    for note in warm_notes:
        ctx.note(note)
    try:
        if warm:
            ctx.evaluate(list(warm), source="warm-start")
        fn(ctx, **options)
        if not ctx.stop_reason:
            ctx.stop_reason = "strategy finished"
    except BudgetExhausted as exc:
        ctx.stop_reason = str(exc)
    except SearchStalled as exc:
        ctx.stop_reason = str(exc)
    if store is not None and run_id is not None:
        # wall_s: this call's wall time, what ``compare`` counts for a repeat it later reads from the
        # store (a resumed run's is its resumed part: a killed process leaves no figure behind)
        store.finish_run(run_id, "done", summary={"stop_reason": ctx.stop_reason, "notes": list(ctx.notes),
                                                  "extra": dict(ctx.extra),
                                                  "wall_s": time.perf_counter() - started})
    return SearchResult(strategy, seed, ctx.best, ctx.history, ctx.clocks, ctx.stop_reason, run_id,
                        resumed_trials=len(prior), llm_exchanges=llm_log, notes=list(ctx.notes), extra=dict(ctx.extra))
