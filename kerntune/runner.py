"""Runs one strategy on one evaluator, storing every trial and resuming runs.

Resume works by replay: the strategy is deterministic under its seed, so it
is started again from scratch and every config the store already holds for
this run is answered from the store instead of being measured again.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from kerntune.evaluate.base import Evaluator
from kerntune.evaluate.trial import Trial
from kerntune.llm.providers.base import Provider
from kerntune.llm.secrets import redact
from kerntune.llm.types import LLMError, Message, RawReply, Usage
from kerntune.space import Config
from kerntune.store import Store
from kerntune.strategies import Budget, BudgetExhausted, SearchContext, SearchStalled, get_strategy
from kerntune.strategies.base import check_seed
from kerntune.strategies.options import validate_options


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


class _ResumeProvider(Provider):
    """Answers a resumed run's first calls from its stored exchanges, then the live model.

    A model at temperature > 0 would answer differently the second time, and
    the strategy would leave the path whose trials the store holds; replaying
    the stored answers keeps the resumed run on it.  Every call is replayed, repair
    calls included (``calls`` of each exchange), in the order they were made: a round
    whose repair still failed must not take the next round's answer as its repair.
    """

    def __init__(self, live: Provider, exchanges: list[dict[str, Any]]) -> None:
        super().__init__(live.model)
        self.name, self.structured, self.live = live.name, live.structured, live
        self.pending = [call for ex in exchanges for call in _calls_of(ex)]
        #: Whether the last answer came from the store (the client then writes no transcript line:
        #: the transcript holds it already).
        self.last_replayed = False

    def send(self, messages: list[Message], schema: dict[str, Any] | None, temperature: float, max_tokens: int,
             timeout: float) -> RawReply:
        self.last_replayed = bool(self.pending)
        if not self.pending:
            return self.live.send(messages, schema, temperature, max_tokens, timeout)
        call = self.pending.pop(0)
        if call.get("error"):
            raise LLMError(call["error"])
        return RawReply(call.get("text") or "", Usage(call.get("tokens_in") or 0, call.get("tokens_out") or 0),
                        call.get("model") or "")


def _calls_of(exchange: dict[str, Any]) -> list[dict[str, Any]]:
    """The calls of one stored exchange; a store written before calls were kept has one per exchange."""
    if exchange.get("calls") is not None:
        return list(exchange["calls"])
    if exchange.get("error"):
        return [{"error": exchange["error"]}]
    return [{"text": exchange["response"], "model": exchange["model"], "tokens_in": exchange.get("tokens_in"),
             "tokens_out": exchange.get("tokens_out")}]


def _resumed_client(client: Any, exchanges: list[dict[str, Any]]) -> Any:
    clone = copy.copy(client)
    clone.provider = _ResumeProvider(client.provider, exchanges)
    clone.cache = False  # every stored call is replayed from the store, none from a cache
    return clone


def _identity(evaluator: Evaluator) -> dict[str, Any]:
    """What the store keeps of an evaluator: enough to re-create it, plus the kernel and
    problem size, so that later runs can find this one for a warm start."""
    workload = evaluator.workload()
    return {**evaluator.describe(), "kernel_name": workload.get("kernel_name"),
            "problem_size": workload.get("problem_size")}


def run_search(evaluator: Evaluator, strategy: str, budget: Budget, seed: int = 0, *,
               store: Store | None = None, run_id: str | None = None, parent_id: str | None = None,
               label: str | None = None, options: dict[str, Any] | None = None,
               progress: Callable[[SearchContext], None] | None = None, llm: Any = None,
               warm_start: Sequence[Config] = (), transfer: Sequence[dict[str, float]] = (), past_winners: Sequence[Any] = ()) -> SearchResult:
    """Search with ``strategy``; with a store, every trial is committed as it ends.

    If ``run_id`` names a run already in the store, that run is resumed.  ``warm_start``
    configs (winners of past runs on nearby shapes, see ``kerntune.warmstart``) are
    measured first; every strategy then builds on them as on any earlier trial.  ``transfer``
    (``kerntune.warmstart.transfer_data``) hands the past runs' measurements to strategies
    whose model can start from them; ``past_winners`` are shown to a model in its first prompt.
    """
    fn = get_strategy(strategy)
    options = validate_options(strategy, options)
    check_seed(seed)
    prior: dict[str, tuple[Trial, float]] = {}
    lock = None
    if store is not None:
        existing = None
        if run_id is not None:
            try:
                existing = store.get_run(run_id)
            except Exception:
                existing = None
        if existing is not None:
            lock = store.lock_run(run_id)  # type: ignore[arg-type]
            for key, trial, clock in store.trials(run_id):  # type: ignore[arg-type]
                trial.config = evaluator.space.canonical(trial.config)
                prior[key] = (trial, clock)
        else:
            run_id = store.create_run(
                "compare-child" if parent_id else "tune", parent_id=parent_id, label=label, strategy=strategy,
                seed=seed, options={"budget": budget.to_dict(), **options}, space=evaluator.space.to_dict(),
                evaluator=_identity(evaluator), device=evaluator.device().get("name"), run_id=run_id)
            lock = store.lock_run(run_id)
    try:
        return _search(fn, evaluator, strategy, budget, seed, store, run_id, prior, options, progress, llm,
                       warm_start, transfer, past_winners)
    finally:
        if lock is not None:
            lock.release()


def _search(fn: Callable[..., None], evaluator: Evaluator, strategy: str, budget: Budget, seed: int,
            store: Store | None, run_id: str | None, prior: dict[str, tuple[Trial, float]], options: dict[str, Any],
            progress: Callable[[SearchContext], None] | None, llm: Any, warm_start: Sequence[Config],
            transfer: Sequence[dict[str, float]], past_winners: Sequence[Any]) -> SearchResult:
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
    if stored:  # a resumed run (possibly killed before its first trial was stored)
        replayed[0] = len(stored)
        llm = _resumed_client(llm, stored)
    ctx = SearchContext(evaluator.space, evaluator, budget, seed, on_trial=on_trial, prior=prior, llm=llm,
                        on_llm_exchange=on_exchange, transfer=list(transfer),
                        past_winners=list(past_winners))
    try:
        warm = [c for c in ctx.unmeasured(warm_start) if evaluator.space.is_valid(c)]
        if warm:
            ctx.evaluate(warm, source="warm-start")
        fn(ctx, **options)
        if not ctx.stop_reason:
            ctx.stop_reason = "strategy finished"
    except BudgetExhausted as exc:
        ctx.stop_reason = str(exc)
    except SearchStalled as exc:
        ctx.stop_reason = str(exc)
    if store is not None and run_id is not None:
        store.finish_run(run_id, "done")
    return SearchResult(strategy, seed, ctx.best, ctx.history, ctx.clocks, ctx.stop_reason, run_id,
                        resumed_trials=len(prior), llm_exchanges=llm_log, notes=list(ctx.notes), extra=dict(ctx.extra))
