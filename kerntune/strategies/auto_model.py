"""``auto`` with a model: the model and the surrogate engine share one budget.

Why this shape.  A strong model's first round can land in the optimum's basin at once,
where a surrogate needs 100+ evaluations; on finely interacting spaces the model stalls a
few percent off while a GP keeps improving (DESIGN.md).  So:

* the model opens (round 1: kernel, GPU, space) while the surrogate measures its start;
* every model call runs in a background thread while the surrogate keeps measuring its
  own proposals: the GPU never idles while the model thinks, and the clock is charged only
  the model time that measurements did not hide (``ctx.extra['model_seconds']`` and
  ``['model_hidden_seconds']`` say how much);
* the model is asked again when the surrogate stalls (a restart) or when the history shows
  a new region (a new best several fields away from the last one the model saw); its
  prompt is the ranked history, which holds what the surrogate found;
* the model's first answer is measured in the order of the surrogate's lower bound; from
  round 2 on its proposals are screened by that bound: the most promising ``screen_keep``
  share is measured, the rest costs nothing;
* the model's configs teach the surrogate but move its search region only when they beat the
  best of all (``SurrogateSearch.tell``), so a restart is not pulled back into the model's family;
* the model is asked for no more configs than the budget can measure once the surrogate's
  measurements beside the call are counted (the overlap cap under an evaluation count), and not
  at all where none could be (``_Cooperation.ask_size``);
* the search never stops while budget remains: after the model's last call the surrogate
  goes on alone.

On a recording (simulated clock) measuring costs no wall time, so overlap is simulated
deterministically: when the model's answer is back after L seconds, the surrogate first
measures configs whose recorded cost adds up to L (what a GPU would have measured while
the model thought), then the answer is used.  On a real evaluator the surrogate measures
until the answer is back (or the overlap cap); the answer is waited for within the time budget
only (``rounds.wait_within_budget``).
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from typing import NoReturn

from kerntune.evaluate.trial import Status
from kerntune.llm.parsing import ParsedConfigs
from kerntune.llm.types import Message
from kerntune.space import Config
from kerntune.strategies.base import BudgetExhausted, SearchContext
from kerntune.strategies.llm.prompting import PromptOptions, first_round, refine_round
from kerntune.strategies.llm.rounds import (MODEL_OUT_OF_TIME, Answer, accept, askable, call_in_background,
                                            wait_within_budget)
from kerntune.strategies.surrogate import SurrogateOptions, SurrogateSearch


class _Cooperation:
    """The loop: one model call in flight at most, the surrogate measuring meanwhile."""

    def __init__(self, ctx: SearchContext, engine: SurrogateSearch, batch_size: int, *, initial: int, refine: int,
                 max_calls: int, screen_keep: float, temperature: float, max_tokens: int, opts: PromptOptions,
                 new_region_fields: int, model_clock_s: float | None, overlap_first: int,
                 overlap_later: int | None) -> None:
        self.ctx, self.engine, self.batch_size = ctx, engine, batch_size
        self.initial, self.refine, self.max_calls = initial, refine, max_calls
        self.screen_keep, self.temperature, self.max_tokens, self.opts = screen_keep, temperature, max_tokens, opts
        self.new_region_fields = new_region_fields
        self.model_clock_s = model_clock_s
        self.overlap_first = overlap_first
        self.overlap_later = refine if overlap_later is None else overlap_later
        self.workload, self.device = ctx.evaluator.workload(), ctx.evaluator.device()
        self.calls = 0
        self.model_s = 0.0
        self.hidden_s = 0.0
        self.seen_best: Config | None = None
        self.no_gain_calls = 0
        self.asking = True  # False once an answer could not be measured (``not_asked``)

    # -- measuring ------------------------------------------------------------------------
    def surrogate_step(self, source: str = "auto:surrogate") -> bool:
        """One batch from the surrogate; False when the space is exhausted."""
        batch = self.engine.propose(self.batch_size)
        if not batch:
            return False
        self.engine.tell(batch, self.ctx.evaluate(batch, source=source))
        return True

    def startup_batch(self) -> list[Config]:
        """The engine's start, drawn before the first call so that the call is asked only for what the
        budget can measure beside it (``ask_size``); the draw is the one it always was (the prompt
        draws nothing)."""
        first = self.engine.startup_batch()
        if self.ctx.remaining_evals is not None:  # the start counts against overlap_first (``wait``)
            first = first[: self.overlap_first]
        return first

    def startup(self, first: list[Config]) -> None:
        if first:
            self.engine.tell(first, self.ctx.evaluate(first, source="auto:startup"))

    # -- the model ------------------------------------------------------------------------
    def ask_size(self, round_no: int, start: int = 0) -> tuple[int, int, str]:
        """(configs to ask round ``round_no`` for, evaluations the surrogate spends before its answer is
        used, why none where 0: ``askable``).  Under an evaluation count the surrogate measures up to
        the overlap cap while the model thinks (round 1: ``start``, the start still to come, counts
        against it), bounded by the evaluations left; under time alone the start at least.  With 0 for
        that count a budget of 12 asked the model for 12 configs, the surrogate measured 10 and 2 of
        the answer were measured (of 5: none, the call paid for all the same)."""
        ctx = self.ctx
        if ctx.remaining_evals is not None:
            cap = self.overlap_first if round_no == 1 else self.overlap_later
            warm = min(max(cap, start), ctx.remaining_evals)
        else:
            warm = start
        n, why = askable(ctx, self.initial if round_no == 1 else self.refine, warm)
        return n, warm, why

    def not_asked(self, round_no: int, warm: int, why: str) -> None:
        """No call where nothing of its answer could be measured: the surrogate finishes alone."""
        self.asking = False
        ctx = self.ctx
        room = "no evaluation" if why == "evaluation budget" else "no unmeasured config"
        ctx.note(f"auto: the model is not asked (round {round_no}): {room} would be left for its answer once "
                 f"the surrogate's {warm} measurement(s) beside the call are made ({why}); the surrogate goes on alone")

    def submit(self, round_no: int, n: int) -> tuple[Future, list[Message], int]:
        """Call the model in the background for ``n`` configs (``ask_size``: never more than could be
        measured)."""
        ctx = self.ctx
        if round_no == 1:
            messages = first_round(ctx.space, self.workload, self.device, n, self.opts, past=ctx.past_winners)
        else:
            messages = refine_round(ctx.space, self.workload, self.device, ctx.history, n, round_no - 1,
                                    self.no_gain_calls > 0, self.opts, past=ctx.past_winners)
        self.calls += 1
        ctx.charge(0.0)  # a real evaluator's clock catches up with the wall: the call starts now
        self.clock_at_submit = ctx.clock_s
        self.wall_at_submit = time.perf_counter()
        self.evals_at_submit = ctx.evaluations
        fut = call_in_background(ctx, messages, self.temperature, self.max_tokens, set(ctx.measured), n)
        return fut, messages, n

    def wait(self, fut: Future, source: str, cap: int, round_no: int,
             messages: list[Message]) -> tuple[Answer, ParsedConfigs | None]:
        """Measure surrogate proposals while the model thinks, at most ``cap`` evaluations since the
        call began when the budget counts evaluations (none under a budget of time alone: there an
        idle GPU only wastes the budget, and the answer is used whenever it comes); charge only the
        unhidden time.  The answer is parsed and its exchange stored (``accept``) as soon as it is back:
        on a recording, the surrogate's measurements for the model's time came first, and a run killed
        among them had the answer in its transcript but not in the store, so its resume asked again."""
        ctx = self.ctx
        clock0 = self.clock_at_submit  # measurements since the call began (round 1: the start too)
        last = self.evals_at_submit + cap if ctx.remaining_evals is not None else None

        def more() -> bool:
            return not ctx.done and (last is None or ctx.evaluations < last)

        if ctx.evaluator.simulated_clock:
            if self.model_clock_s is not None:
                answer = fut.result()
                answer.seconds = self.model_clock_s  # the call as a hosted model would take it
            else:  # charged its wall seconds: not waited for past a time budget (llm's rule)
                waited = wait_within_budget(ctx, fut, clock0, self.wall_at_submit)
                if waited is None:
                    while more() and self.surrogate_step(source):  # what a GPU measured meanwhile
                        pass
                    self.abandoned(clock0)
                    ctx.charge(max(0.0, time.perf_counter() - self.wall_at_submit - (ctx.clock_s - clock0)))
                    self.out_of_time(ctx._why_done() if ctx.done else MODEL_OUT_OF_TIME)
                answer = waited
            parsed = accept(ctx, round_no, messages, answer)
            while more() and ctx.clock_s - clock0 < answer.seconds and self.surrogate_step(source):
                pass
            measured_to = ctx.clock_s
        else:
            while not fut.done() and more() and self.surrogate_step(source):
                pass
            if ctx.done and not fut.done():
                # the budget ended while the model thinks: no answer could be measured, so none is
                # waited for (the call runs on a daemon thread, rounds.call_in_background)
                self.abandoned(clock0)
                ctx.note(f"auto: the budget ended while model call {self.calls} was out; its answer is not used")
                ctx.stop_reason = ctx._why_done()
                raise BudgetExhausted(ctx.stop_reason)
            # Measuring stopped at the overlap cap or on an exhausted space with the budget's time left:
            # the answer is waited for within that time only (it once blocked the run up to --llm-timeout
            # past a 2 s budget).  The wait moves the clock to the wall; the hidden share is measured to here.
            measured_to = ctx.clock_s
            waited = wait_within_budget(ctx, fut, clock0, self.wall_at_submit)
            if waited is None:
                self.abandoned(clock0, measured_to)
                self.out_of_time(MODEL_OUT_OF_TIME)
            answer = waited
            parsed = accept(ctx, round_no, messages, answer)
        seconds = answer.seconds
        # The clock as of the last measurement's end: on a real evaluator, waiting for the model
        # after measuring stopped is not hidden (the charge below brings the clock to the wall).
        hidden = min(seconds, max(measured_to - clock0, 0.0))
        self.model_s += seconds
        self.hidden_s += hidden
        ctx.charge(seconds - hidden)
        return answer, parsed

    def abandoned(self, clock0: float, measured_to: float | None = None) -> None:
        """Count a call given up at the budget's end: its wall seconds so far as model time, hidden as far
        as measurements since it began overlapped them (the clock as of the last one's end, before any
        charge: ``measured_to`` where a wait has moved the clock since).  The report once said "0.0 s of
        model time, 100% hidden" for a run whose end went waiting for the model."""
        seconds = time.perf_counter() - self.wall_at_submit
        end = self.ctx.clock_s if measured_to is None else measured_to
        hidden = min(seconds, max(end - clock0, 0.0))
        self.model_s += seconds
        self.hidden_s += hidden

    def out_of_time(self, reason: str) -> NoReturn:
        """End the search on a call given up when the time budget was spent while it was out (its
        answer not used; the call goes on, on its daemon thread)."""
        ctx = self.ctx
        ctx.note(f"auto: the time budget was spent while model call {self.calls} was out; its answer is not used")
        ctx.stop_reason = reason
        raise BudgetExhausted(reason)

    def use(self, round_no: int, n: int, answer: Answer, parsed: ParsedConfigs | None) -> None:
        """Measure the model's configs (``parsed``, ``accept``'s: None where the call failed)."""
        ctx = self.ctx
        if parsed is None:
            ctx.note(f"auto: model call {round_no} failed ({answer.error}); the surrogate goes on")
            return
        batch = ctx.unmeasured(parsed.accepted)[:n]
        given = len(batch)  # duplicates, configs measured meanwhile and refused ones are not among them
        screened = 0
        if round_no == 1 and batch and self.engine.ys:
            # the whole first answer is measured, most promising first by the surrogate's bound
            # (fitted on the start and what it measured while the model thought): the curve
            # rises sooner where the model ranked its best proposals late
            scores = self.engine.screen(batch)
            batch = [batch[i] for i in sorted(range(len(batch)), key=lambda i: scores[i])]
        if round_no > 1 and batch and self.engine.ys:
            keep = max(3, int(round(self.screen_keep * len(batch))))
            scores = self.engine.screen(batch)
            order = sorted(range(len(batch)), key=lambda i: scores[i])
            screened = len(batch) - min(keep, len(batch))
            batch = [batch[i] for i in order[:keep]]
            if screened:
                ctx.note(f"auto: round {round_no}: the surrogate screened out {screened} of the model's configs")
        if not batch:
            ctx.note(f"auto: round {round_no}: no valid new config from the model")
            return
        before = ctx.value(ctx.best) if ctx.best is not None else float("inf")
        if ctx.done:  # the budget ended as the answer came (evaluate raises): none of it is measured
            self.short(round_no, n, given, screened, 0)
        trials = ctx.evaluate(batch, source=f"auto:model{round_no}")
        self.engine.tell(batch, trials, own=False)
        after = ctx.value(ctx.best) if ctx.best is not None else float("inf")
        self.no_gain_calls = 0 if after < before else self.no_gain_calls + 1
        self.short(round_no, n, given, screened, sum(t.status != Status.UNMEASURED for t in trials))

    def short(self, round_no: int, n: int, given: int, screened: int, measured: int) -> None:
        """Say so where fewer of an answer's configs were measured than asked for, and why: they were
        once dropped silently (duplicates, configs measured while the model thought, the budget's end)."""
        if given >= n and measured >= given - screened:
            return
        why = []
        if given < n:
            why.append(f"{given} new valid in the answer")
        if screened:
            why.append(f"{screened} screened out")
        if measured < given - screened:
            why.append(f"{given - screened - measured} cut by the budget")
        self.ctx.note(f"auto: round {round_no}: {measured} of the {n} configs asked for measured ({'; '.join(why)})")

    def mark_seen(self) -> None:
        self.seen_best = dict(self.ctx.best.config) if self.ctx.best is not None else None

    def new_region(self) -> bool:
        """The best moved to a config several fields away from the one the model last saw."""
        best, seen = self.ctx.best, self.seen_best
        if best is None or seen is None:
            return False
        differ = sum(1 for k in self.ctx.space.names if best.config.get(k) != seen.get(k))
        return differ >= self.new_region_fields

    def run(self) -> None:
        ctx = self.ctx
        try:
            first = self.startup_batch()
            n, warm, why = self.ask_size(1, len(first))
            if n:
                fut, messages, n = self.submit(1, n)
                self.startup(first)
                self.use(1, n, *self.wait(fut, "auto:while-model", self.overlap_first, 1, messages))
                self.mark_seen()
            else:
                self.not_asked(1, warm, why)
                self.startup(first)
            round_no = 1
            while True:
                room = ctx.remaining_evals is None or ctx.remaining_evals >= self.refine + self.batch_size
                if self.asking and room and round_no < self.max_calls and (self.engine.stalled or self.new_region()):
                    n, warm, why = self.ask_size(round_no + 1)
                    if not n:
                        self.not_asked(round_no + 1, warm, why)
                        continue
                    round_no += 1
                    reason = "the surrogate stalled" if self.engine.stalled else "a new region"
                    ctx.note(f"auto: model asked again (round {round_no}) after {ctx.evaluations} evaluations: {reason}")
                    fut, messages, n = self.submit(round_no, n)
                    self.use(round_no, n, *self.wait(fut, "auto:while-model", self.overlap_later, round_no, messages))
                    self.mark_seen()
                    continue
                if not self.surrogate_step("auto:restart" if self.engine.stalled else "auto:surrogate"):
                    ctx.stop_reason = "space exhausted"
                    return
        finally:  # a call still out is left to its daemon thread (rounds.call_in_background)
            # no model time, no share (None, "n/a"): it once read 100%
            share = self.hidden_s / self.model_s if self.model_s > 0 else None
            ctx.extra.update({"model_calls": self.calls, "model_seconds": self.model_s,
                              "model_hidden_seconds": self.hidden_s, "model_hidden_share": share,
                              "surrogate_restarts": self.engine.restarts})
            shown = f"{share:.0%}" if share is not None else "n/a"
            ctx.note(f"auto: {self.calls} model call(s), {self.model_s:.1f} s of model time, "
                     f"{self.hidden_s:.1f} s ({shown}) hidden behind measurements")


def run_with_model(ctx: SearchContext, engine_opts: SurrogateOptions, batch_size: int | None = None,
                   initial: int = 25, refine: int = 15, max_calls: int = 6, screen_keep: float = 0.6,
                   temperature: float = 0.7, max_tokens: int = 6000, include_source: bool = True,
                   include_hardware: bool = True, include_hints: bool = True, new_region_fields: int = 2,
                   model_clock_s: float | None = None, overlap_first: int = 10,
                   overlap_later: int | None = None) -> None:
    """``max_calls`` bounds the model calls (round 1 included); ``screen_keep`` is the share of a
    later round's proposals that the surrogate lets through to measurement (1.0: all).
    ``model_clock_s``: on a recording, charge and overlap each model call as this many seconds
    instead of its wall time — for answers written by hand or by an agent (``files:``), which
    take minutes where a hosted model takes 10-60 s; without it such a run would let the
    surrogate spend most of the budget while one answer is being written.
    ``overlap_first`` / ``overlap_later``: the most evaluations the surrogate spends while the
    first / a later call is out (the start included: an ``overlap_first`` under ``startup`` cuts the
    start; default 10 and ``refine``), under a budget
    that counts evaluations; under a budget of time alone it measures until the answer is back.  Without a
    cap, a kernel whose configs measure in 0.1 s would spend a 200-evaluation budget during one
    30 s call and the model's answer would never be measured (seen on two H100 matmul
    recordings); with it the model opens and keeps its share, and the GPU waits only once the
    surrogate has had as many evaluations as the model is asked for."""
    if batch_size is None:
        batch_size = 1 if ctx.evaluator.simulated_clock else max(1, min(8, ctx.batch_parallelism))
    engine = SurrogateSearch(ctx, engine_opts)
    earlier = list(ctx.history)
    engine.tell([t.config for t in earlier], earlier)
    _Cooperation(ctx, engine, batch_size, initial=initial, refine=refine, max_calls=max_calls,
                 screen_keep=screen_keep, temperature=temperature, max_tokens=max_tokens,
                 opts=PromptOptions(include_source, include_hardware, include_hints),
                 new_region_fields=new_region_fields, model_clock_s=model_clock_s,
                 overlap_first=overlap_first, overlap_later=overlap_later).run()
