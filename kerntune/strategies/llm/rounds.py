"""The ``llm`` strategy: the model proposes, everything proposed is measured,
each round learns from the last.

Round 1 asks for a diverse first batch while the default config and a few
random ones are measured (the first call overlaps with measurement; under a
budget that counts no evaluations, random configs go on being measured until
the answer is back, as ``auto`` does: an idle GPU only wastes the time).  Later
rounds show the ranked history, anchors and patterns.  Proposals are parsed,
validated, normalised and de-duplicated against the whole history; rejects
are kept with their reason.  When under half of a batch is usable the batch
is topped up by the fallback so that no round is wasted; when the model
fails, the fallback proposes the round (with ``fallback='error'`` the run
stops with one clear line instead, for a short round too).  The model is asked
for no more configs than can be measured (evaluations and unmeasured configs
left), and not at all when none can.  Convergence: no improvement for
``patience`` rounds, ``max_rounds``, a target time, or an improvement under
``min_improvement`` over the last two rounds — and the budget always wins (a
round it cuts stops the search with the budget's reason).

Under a time budget the model is not waited for past it: when the clock the call
will be charged to (the clock when it was made plus the wall seconds since, or
the measurements' clock where that is further) reaches ``max_seconds``, the call
is abandoned on its daemon thread (``call_in_background``), the user is told, the
stop reason says so and the best found so far stands (``wait_within_budget``).
"""

from __future__ import annotations

import json
import time
from concurrent.futures import Future, wait
from dataclasses import dataclass, field, replace
from typing import Any

from kerntune.errors import KerntuneError
from kerntune.llm.client import on_daemon_thread
from kerntune.llm.parsing import ParsedConfigs, configs_from_answer
from kerntune.llm.secrets import redact
from kerntune.llm.types import LLMError, Message
from kerntune.space import Config, jsonable
from kerntune.strategies.base import BudgetExhausted, SearchContext
from kerntune.strategies.llm.prompting import PromptOptions, first_round, refine_round

FALLBACKS = ("random", "pattern", "error")
#: The stop reason of a run whose time budget ended while a model call was out.
MODEL_OUT_OF_TIME = "time budget spent while the model was thinking"


class ModelRoundFailed(KerntuneError):
    """``fallback='error'``: the model failed or gave under half a round of usable configs, and the run
    stops.  The round's exchange is stored before this is raised; ``retry_model_call`` tells the run
    driver (``kerntune.run.search``) that this exchange ended the run, so a resume asks that call again
    instead of replaying it (and only that one: every other stored call was handled and is replayed)."""

    retry_model_call = True


def _unmeasured_left(ctx: SearchContext) -> int | None:
    """The valid configs not measured yet; None where the space is too large to count (plenty left).
    The prompt counts the same spaces (``prompting._common``), so the count is cached by then."""
    space = ctx.space
    if not (space.materialised or not space.constraints or space.cartesian_size <= 5_000_000):
        return None
    try:
        return max(space.count() - len(ctx.measured), 0)
    except Exception:  # noqa: BLE001 - a space that cannot be counted is taken as large
        return None


def askable(ctx: SearchContext, n: int, warm: int) -> tuple[int, str]:
    """How many configs to ask the model for: ``n``, at most the evaluations and the unmeasured configs
    left once the ``warm`` configs measured beside the call are counted; 0 with the reason where its
    answer could not be measured (a call is paid for and waited for, and a structured-output model is
    held by the schema's ``min_items`` to half of what it is asked for)."""
    room, left = ctx.remaining_evals, _unmeasured_left(ctx)
    if room is not None:
        if room - warm <= 0:
            return 0, "evaluation budget"
        n = min(n, room - warm)
    if left is not None:
        if left - warm <= 0:
            return 0, "space exhausted"
        n = min(n, left - warm)
    return n, ""


def _short_round(round_no: int, n: int, usable: int, parsed: ParsedConfigs) -> str:
    """The one line ``fallback='error'`` stops with when a round is short: the round and why the
    model's configs were refused."""
    reasons = list(dict.fromkeys(r.reason for r in parsed.rejected))
    why = "; ".join(reasons[:3]) + (f"; and {len(reasons) - 3} more" if len(reasons) > 3 else "")
    if not reasons:
        why = "no configs in the answer" if not parsed.accepted else "no other config in the answer"
    return redact(f"the model gave {usable} usable config(s) of the {n} asked for in round {round_no}"
                  f" (fallback=error): {why}")[:1000]


def _fallback_batch(ctx: SearchContext, kind: str, n: int, taken: set[str]) -> list[Config]:
    """Configs from the classical fallback: neighbours of the best, else random."""
    out: list[Config] = []
    if kind == "pattern" and ctx.best is not None:
        # de-duplicated across the two bases too: a config near both once filled two of the batch's places
        seen = set(taken)
        for base in [t.config for t in ctx.ranked()[:2]]:
            near = ctx.unmeasured(ctx.space.neighbours(base, "adjacent") + ctx.space.neighbours(base, "hamming"))
            ctx.rng.shuffle(near)
            for c in near:
                key = ctx.space.key(c)
                if key not in seen:
                    seen.add(key)
                    out.append(c)
    out = out[:n]
    keys = taken | {ctx.space.key(c) for c in out}
    if len(out) < n:
        out.extend(c for c in ctx.sample_unmeasured(n - len(out) + len(keys)) if ctx.space.key(c) not in keys)
    return out[:n]


@dataclass
class Answer:
    """What one round's model call gave: the response (or, when it failed, the last answer it
    did give, if any), the error, the seconds spent, and every call made (repairs included)."""

    resp: Any
    error: str
    seconds: float
    calls: list[dict[str, Any]] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(self.error)


def call_model(ctx: SearchContext, messages: list[Message], temperature: float, max_tokens: int,
               exclude: set[str], n: int) -> Answer:
    """One model call (thread-safe: touches nothing in ``ctx`` but the client and its status line)."""
    space = ctx.space

    def problems(value: Any) -> list[str]:
        parsed = configs_from_answer(value, space, exclude=exclude)
        if parsed.accepted:
            return []
        return [r.reason for r in parsed.rejected[:10]] or ["no configs in the answer"]

    # An answer needs about a full config plus a short reason per item; a cap near that
    # keeps a looping small model from generating for many minutes.
    per_item = len(json.dumps({k: jsonable(v) for k, v in space.default.items()})) // 3 + 40
    max_tokens = min(max_tokens, 200 + int(1.5 * n * per_item))
    t0 = time.perf_counter()
    ctx.status(f"model asked for {n} configs ({len(messages[-1].content):,} characters of prompt)")
    try:
        # Ask for at least half the batch: fewer would leave the round to the fallback.
        schema = space.json_schema(min_items=max(1, n // 2), max_items=n)
        resp = ctx.llm.complete(messages, schema=schema, temperature=temperature,
                                max_tokens=max_tokens, validate=problems)
    except LLMError as exc:
        return Answer(exc.response, str(exc) or type(exc).__name__, _seconds(ctx, t0), list(exc.calls or []))
    return Answer(resp, "", _seconds(ctx, t0), list(getattr(resp, "calls", None) or []))


def call_in_background(ctx: SearchContext, messages: list[Message], temperature: float, max_tokens: int,
                       exclude: set[str], n: int) -> Future:
    """``call_model`` on a daemon thread (``kerntune.llm.client.on_daemon_thread`` says why), for a
    search that measures while the model thinks."""
    return on_daemon_thread(call_model, ctx, messages, temperature, max_tokens, exclude, n)


def _time_left(ctx: SearchContext, clock0: float, t0: float) -> float | None:
    """The time budget's seconds left while a call made at ``clock0`` on the search's clock (``t0`` on
    the wall) is out, None without one.  The clock the call will be charged to is ``clock0`` plus the
    wall seconds since, or the measurements' clock where that is further (what ``_await_answer``
    charges); on a real evaluator that is the wall itself."""
    if ctx.budget.max_seconds is None:
        return None
    ctx.charge(0.0)  # a real evaluator's clock catches up with the wall
    return ctx.budget.max_seconds - max(ctx.clock_s, clock0 + time.perf_counter() - t0)


def wait_within_budget(ctx: SearchContext, future: Future, clock0: float, t0: float) -> Answer | None:
    """The answer of a call made in the background (``call_in_background``) at ``clock0`` / ``t0``
    (``_time_left``), or None once a time budget is spent while it is out; without one, the answer
    whenever it comes.  A call given up goes on, on its daemon thread: neither the run nor the
    process's exit waits for it, and a ``cmd:`` model's process group is ended at exit by its provider
    (``auto`` leaves a call out at the budget's end the same way, ``auto_model._Cooperation.wait``)."""
    while not future.done():
        left = _time_left(ctx, clock0, t0)
        if left is None:
            return future.result()
        if left <= 0:
            return None
        wait([future], timeout=left)
    return future.result()


def _await_answer(ctx: SearchContext, future: Future, clock0: float, t0: float, round_no: int,
                  measure: bool) -> Answer:
    """Round ``round_no``'s answer, the clock charged only the model time that measuring did not hide.

    ``measure`` (round 1): under a budget that counts no evaluations, random configs are measured
    while the model thinks, as ``auto`` does (``auto_model._Cooperation.wait``; under a count the
    warm-up alone, or the model's batch would find the budget spent).  On a real evaluator they are
    measured until the answer is back or the time is spent; on a recording (simulated clock, where
    measuring costs no wall time) once the wait is over, as many as their recorded cost fits in the
    seconds the model took, or in the time left when it was given up.

    When the time budget is spent while the model thinks, the call is abandoned
    (``wait_within_budget``): the user is told, the stop reason is ``MODEL_OUT_OF_TIME`` and
    BudgetExhausted ends the search (``llm-seeded`` then has no time left for its classical phase)."""
    measure = measure and ctx.remaining_evals is None
    size = 1 if ctx.evaluator.simulated_clock else max(1, min(8, ctx.batch_parallelism))

    def measure_more() -> bool:
        """One batch of random configs; False when the budget or the space is spent."""
        ctx.charge(0.0)  # a real evaluator's clock catches up with the wall
        batch = [] if ctx.done else ctx.sample_unmeasured(size)
        if batch:
            ctx.evaluate(batch, source="llm:while-model")
        return bool(batch)

    if measure and not ctx.evaluator.simulated_clock:
        while not future.done() and measure_more():
            pass
    answer = wait_within_budget(ctx, future, clock0, t0)
    if measure and ctx.evaluator.simulated_clock:
        thought = answer.seconds if answer is not None else float("inf")
        while ctx.clock_s - clock0 < thought and measure_more():
            pass
    if answer is None:
        waited = time.perf_counter() - t0
        ctx.charge(waited - (ctx.clock_s - clock0))  # on a recording: the wall spent waiting, unhidden
        ctx.note(f"llm: the time budget ({ctx.budget.max_seconds:g} s) was spent while the model was thinking "
                 f"(round {round_no}, {waited:.0f} s waited); the call is abandoned, its answer not used, "
                 "and the best config found so far stands")
        ctx.stop_reason = MODEL_OUT_OF_TIME
        raise BudgetExhausted(MODEL_OUT_OF_TIME)
    ctx.charge(answer.seconds - (ctx.clock_s - clock0))  # only the part not hidden by measuring
    return answer


def _seconds(ctx: SearchContext, t0: float) -> float:
    """The call's seconds: the wall since ``t0``, or, for an answer a resumed run replays from its
    store, the seconds it took when it was made (``kerntune.run.llm_resume``)."""
    take = getattr(getattr(ctx.llm, "provider", None), "take_replayed_seconds", None)
    replayed = take() if take is not None else None
    return replayed if replayed is not None else time.perf_counter() - t0


def accept(ctx: SearchContext, round_no: int, messages: list[Message], answer: Answer) -> ParsedConfigs | None:
    """Parse and validate an answer against everything measured so far; store the exchange.

    A failed call is stored with the text the model did answer (a rejected answer is an
    exchange too) and returns None."""
    resp = answer.resp
    parsed = None
    if resp is not None:
        parsed = configs_from_answer(resp.parsed, ctx.space, exclude=set(ctx.measured)) \
            if resp.parsed is not None else ParsedConfigs()
    if resp is None:
        _record(ctx, round_no, messages, "", None, answer, error=answer.error, latency=answer.seconds)
    else:
        # latency: the round's seconds (its repair call included), what a resume replays into its clock
        _record(ctx, round_no, messages, resp.text, parsed, answer, error=answer.error or None,
                usage=(resp.usage.input_tokens, resp.usage.output_tokens), latency=answer.seconds, cost=resp.cost,
                provider=resp.provider, model=resp.model)
    return None if answer.failed else parsed


def _record(ctx: SearchContext, round_no: int, messages: list[Message], text: str, parsed: ParsedConfigs | None,
            answer: Answer, error: str | None = None, usage: tuple[int, int] = (0, 0), latency: float = 0.0,
            cost: float = 0.0, provider: str = "", model: str = "") -> None:
    if ctx.on_llm_exchange is None:
        return
    if not provider and ctx.llm is not None:  # no answer at all: still say whom we asked
        provider = getattr(getattr(ctx.llm, "provider", None), "name", "") or ""
        model = getattr(getattr(ctx.llm, "provider", None), "model", "") or ""
    ctx.on_llm_exchange({
        "round": round_no, "provider": provider, "model": model,
        "prompt": "\n\n".join(f"## {m.role}\n{m.content}" for m in messages), "response": text,
        "accepted": [{"config": {k: jsonable(v) for k, v in c.items()}, "reasoning": r}
                     for c, r in zip(parsed.accepted, parsed.reasons)] if parsed else [],
        "rejected": [{"item": r.item, "reason": r.reason} for r in parsed.rejected] if parsed else [],
        "tokens_in": usage[0], "tokens_out": usage[1], "latency_s": latency, "cost": cost, "error": error,
        "calls": answer.calls,
    })


def search(ctx: SearchContext, *args: Any, tell_unspent: bool = True, **kwargs: Any) -> None:
    """The rounds (``_rounds``); when they converge with evaluations left the user is told
    so (``auto`` hands such a remainder to its surrogate; ``llm`` keeps its own rules)."""
    _rounds(ctx, *args, **kwargs)
    left = ctx.remaining_evals
    if not tell_unspent or ctx.done or ctx.stop_reason == "space exhausted":
        return
    if left:
        ctx.note(f"llm stopped ({ctx.stop_reason}) with {left} of {ctx.budget.max_evals} evaluations unspent; "
                 "strategy auto would hand them to its surrogate")
    elif left is None and ctx.budget.max_seconds is not None:  # a time budget alone: say the time left
        spare = ctx.budget.max_seconds - ctx.clock_s
        if spare > 0:
            ctx.note(f"llm stopped ({ctx.stop_reason}) with {spare:.0f} of {ctx.budget.max_seconds:g} s unspent; "
                     "strategy auto would hand them to its surrogate")


def _rounds(ctx: SearchContext, initial: int = 25, refine: int = 15, max_rounds: int = 5, patience: int = 2,
           min_improvement: float = 0.01, target_ms: float | None = None, temperature: float = 0.7,
           include_source: bool = True, include_hardware: bool = True, include_hints: bool = True,
           fallback: str = "pattern", warmup: int = 3, max_tokens: int = 6000, top_up: bool = True) -> None:
    """``top_up=False`` (llm-seeded) measures only what the model proposed: a failed or thin
    round is not filled by the fallback, so a weak model costs few evaluations and the
    classical phase that follows keeps its own random start.

    ``target_ms`` is folded into the budget's target at the start (the larger of the two: either
    one met ends the search), so that the measurement stream stops on the trial that meets it, here
    and in llm-seeded's classical phase; it once let the rest of the round be measured, and the
    classical phase ignored it."""
    if fallback not in FALLBACKS:
        raise KerntuneError(f"unknown fallback {fallback!r} (known: {', '.join(FALLBACKS)})")
    if ctx.llm is None:
        raise KerntuneError("the llm strategy needs a model: pass --llm SPEC")
    if target_ms is not None:
        given = ctx.budget.target_ms
        ctx.budget = replace(ctx.budget, target_ms=target_ms if given is None else max(given, target_ms))
    opts = PromptOptions(include_source, include_hardware, include_hints)
    workload, device = ctx.evaluator.workload(), ctx.evaluator.device()
    bests: list[float] = []
    no_gain = 0
    for round_no in range(1, max_rounds + 1):
        ctx.charge(0.0)  # a real evaluator's clock catches up with the wall
        why = ctx._why_done()
        if why:  # no model call (paid for, and slow) for a round that could measure nothing
            ctx.stop_reason = why
            raise BudgetExhausted(why)
        if round_no == 1:
            # Measure the default and a few random configs while the model thinks (_await_answer: more,
            # under a budget that counts no evaluations).
            default = ctx.unmeasured([ctx.space.default])
            warm = (default + ctx.sample_unmeasured(max(warmup - 1, 0), besides=default))[:warmup]
            exclude = {ctx.space.key(c) for c in warm} | set(ctx.measured)
        else:
            warm, exclude = [], set(ctx.measured)
        n, why = askable(ctx, initial if round_no == 1 else refine, len(warm))
        if not n:  # the answer could not be measured: the model is not asked
            if warm:
                ctx.evaluate(warm, source="llm:warmup")
            if why == "space exhausted":
                ctx.stop_reason = why
                return
            ctx.stop_reason = ctx._why_done() or why
            raise BudgetExhausted(ctx.stop_reason)
        if round_no == 1:
            messages = first_round(ctx.space, workload, device, n, opts, past=ctx.past_winners)
        else:
            messages = refine_round(ctx.space, workload, device, ctx.history, n, round_no - 1, no_gain > 0, opts,
                                    past=ctx.past_winners)
        ctx.charge(0.0)  # a real evaluator's clock catches up with the wall: the call starts now
        clock0, t0 = ctx.clock_s, time.perf_counter()
        future = call_in_background(ctx, messages, temperature, max_tokens, exclude, n)
        if round_no == 1:
            ctx.evaluate(warm, source="llm:warmup")
        # the model is waited for within the time budget only (a slow model once kept a 60 s run going for minutes)
        answer = _await_answer(ctx, future, clock0, t0, round_no, measure=round_no == 1)
        parsed = accept(ctx, round_no, messages, answer)
        error = answer.error
        sources: list[str] | None = None
        if parsed is None:
            if fallback == "error":
                raise ModelRoundFailed(redact(f"the model failed in round {round_no}: {error}"))
            if not top_up:
                ctx.note(f"round {round_no}: the model failed ({error}); the LLM phase ends")
                ctx.stop_reason = "the model failed"
                return
            ctx.note(f"round {round_no}: the model failed ({error}); {fallback} proposes this round")
            batch = _fallback_batch(ctx, fallback, n, set())
            source = f"llm:fallback-{fallback}"
        else:
            batch = ctx.unmeasured(parsed.accepted)[:n]
            source = f"llm:round{round_no}"
            if not batch and not top_up:
                ctx.note(f"round {round_no}: no valid new config from the model; the LLM phase ends")
                ctx.stop_reason = "no valid config from the model"
                return
            if len(batch) < n / 2 and top_up:
                if fallback == "error":  # no config the model did not propose is measured
                    raise ModelRoundFailed(_short_round(round_no, n, len(batch), parsed))
                ctx.note(f"round {round_no}: only {len(batch)} valid new configs of the {n} asked for"
                         f" ({len(parsed.accepted)} valid in the answer, {len(parsed.rejected)} refused);"
                         f" topped up by {fallback}")
                extra = _fallback_batch(ctx, fallback, n - len(batch), {ctx.space.key(c) for c in batch})
                # The store and the report credit each config to whoever proposed it.
                sources = [source] * len(batch) + [f"llm:fallback-{fallback}"] * len(extra)
                batch += extra
        if not batch:
            ctx.stop_reason = "space exhausted"
            return
        before = ctx.best.time_ms if ctx.best else float("inf")
        ctx.evaluate(batch, source=source, sources=sources)
        if ctx.done:  # the budget (or the target) ended the round: its reason, not a convergence rule's
            ctx.stop_reason = ctx._why_done()
            raise BudgetExhausted(ctx.stop_reason)
        best = ctx.best.time_ms if ctx.best else float("inf")
        bests.append(best)
        no_gain = no_gain + 1 if not best < before else 0
        if no_gain >= patience:
            ctx.stop_reason = f"no improvement for {patience} rounds"
            return
        if len(bests) >= 3 and bests[-3] != float("inf") and (bests[-3] - best) / bests[-3] < min_improvement:
            ctx.stop_reason = f"improvement under {min_improvement:.0%} over the last two rounds"
            return
    ctx.stop_reason = f"{max_rounds} rounds"
