"""What every strategy sees: the SearchContext.

A strategy is one function ``search(ctx, **options)``.  It proposes batches
through ``ctx.evaluate`` and never tracks budgets, de-duplication, the store or
resume itself: the context does, so every strategy gets them right for free.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from kerntune.errors import KerntuneError
from kerntune.evaluate.base import Evaluator
from kerntune.evaluate.trial import Status, Trial
from kerntune.space import Config, Space


#: More evaluations than any run could make; a larger number is a typo, not a budget.
MAX_EVALS = 10_000_000
#: Seeds are stored as SQLite integers (64-bit signed) and fed to NumPy (non-negative).
MAX_SEED = 2**63 - 1


def check_seed(seed: int, repeats: int = 1) -> None:
    """Refuse a seed that NumPy or the store cannot take (``seed + repeats - 1`` is used too)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0 or seed + repeats - 1 > MAX_SEED:
        raise KerntuneError(f"--seed must be an integer from 0 to {MAX_SEED - repeats + 1}, got {seed}")


class BudgetExhausted(Exception):
    """Raised by ``ctx.evaluate`` once nothing more may be measured."""


class SearchStalled(Exception):
    """A strategy kept proposing only configs it had already measured."""


@dataclass
class Budget:
    """Stop after ``max_evals`` evaluations and/or ``max_seconds`` on the
    evaluator's clock, or as soon as a config reaches ``target_ms``."""

    max_evals: int | None = None
    max_seconds: float | None = None
    target_ms: float | None = None

    def __post_init__(self) -> None:
        # NaN passes every `<= 0` test, and inf would never stop: both are refused by name.
        if self.max_evals is not None and not (1 <= self.max_evals <= MAX_EVALS):
            raise KerntuneError(f"budget must be 1 to {MAX_EVALS:,} evaluations, got {self.max_evals}")
        if self.max_seconds is not None and not (math.isfinite(self.max_seconds) and self.max_seconds > 0):
            raise KerntuneError(f"time budget (--seconds) must be a positive number of seconds, got {self.max_seconds}")
        if self.target_ms is not None and not (math.isfinite(self.target_ms) and self.target_ms > 0):
            raise KerntuneError(f"target time (--target-ms) must be a positive number, got {self.target_ms}")

    def to_dict(self) -> dict[str, Any]:
        return {"max_evals": self.max_evals, "max_seconds": self.max_seconds, "target_ms": self.target_ms}


TrialHook = Callable[[int, str, Trial, float, str], None]


@dataclass
class SearchContext:
    """Budget, history and de-duplication around an evaluator.

    ``prior`` maps config keys to trials already stored for this run: when a
    killed run is resumed, the (deterministic) strategy re-walks its path and
    those configs are answered from the store instead of being re-measured.
    """

    space: Space
    evaluator: Evaluator
    budget: Budget
    seed: int = 0
    on_trial: TrialHook | None = None
    prior: dict[str, tuple[Trial, float]] = field(default_factory=dict)
    history: list[Trial] = field(default_factory=list)
    clocks: list[float] = field(default_factory=list)
    measured: dict[str, Trial] = field(default_factory=dict)
    clock_s: float = 0.0
    best: Trial | None = None
    stop_reason: str = ""
    #: An ``kerntune.llm.LLMClient`` for LLM strategies; classical ones ignore it.
    llm: Any = None
    #: Called with one dict per LLM exchange (prompt, response, accepted, rejected, …).
    on_llm_exchange: Callable[[dict[str, Any]], None] | None = None
    notes: list[str] = field(default_factory=list)
    #: Called with each note as it is made (a command line prints it then, not after the run).
    on_note: Callable[[str], None] | None = None
    #: Called with a line on what a long step is waiting for (a model's answer); not stored.
    on_status: Callable[[str], None] | None = None
    #: Strategy-specific figures for reports (``auto``: model seconds and how many were hidden).
    extra: dict[str, Any] = field(default_factory=dict)
    #: What past runs of this kernel on nearby shapes measured (``kerntune.run.warm_start.transfer_data``),
    #: one dict per run, nearest first: config key -> log(time / that run's best), inf where the
    #: config failed there.  Models that can learn from them (the GP of ``bayes``) do; others ignore it.
    transfer: list[dict[str, float]] = field(default_factory=list)
    #: Winners of past runs on nearby shapes (``kerntune.run.warm_start.PastWinner``), shown to the model.
    past_winners: list[Any] = field(default_factory=list)
    #: The configs measured at once that the strategies size their batches by; None: the evaluator's.
    #: A resumed run keeps the one it was started with (``run_search``): a resume with fewer compile
    #: workers (less free GPU memory) took another path and dropped the stored trials off it.
    parallelism: int | None = None

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.np_rng = np.random.default_rng(self.seed)
        self._wall0 = time.perf_counter()
        self._wall_offset = 0.0  # wall seconds of a resumed run before this process
        self._stale_calls = 0
        self._measure_s = 0.0  # wall seconds spent measuring fresh configs in this process
        self._measured_n = 0
        self._replayed = 0  # stored trials (``prior``) taken into the history so far

    @property
    def batch_parallelism(self) -> int:
        """How many configs the strategies propose at once on a real evaluator: the run's own
        (``parallelism``), else the evaluator's."""
        return self.parallelism if self.parallelism is not None else self.evaluator.parallelism

    # -- budget ----------------------------------------------------------------------------
    @property
    def evaluations(self) -> int:
        return len(self.history)

    @property
    def remaining_evals(self) -> int | None:
        if self.budget.max_evals is None:
            return None
        return max(self.budget.max_evals - self.evaluations, 0)

    @property
    def done(self) -> bool:
        return bool(self._why_done())

    def _why_done(self) -> str:
        b = self.budget
        if b.max_evals is not None and self.evaluations >= b.max_evals:
            return "evaluation budget"
        if b.max_seconds is not None and self.clock_s >= b.max_seconds:
            return "time budget"
        if self._target_met():
            return "target reached"
        return ""

    def charge(self, seconds: float) -> None:
        """Advance the clock by time spent outside measurements (LLM calls).

        On a real evaluator the clock is the wall clock, which has counted that time already.
        """
        if self.evaluator.simulated_clock:
            self.clock_s += max(seconds, 0.0)
        else:
            self.clock_s = max(self.clock_s, self._wall_offset + time.perf_counter() - self._wall0)

    def _clock_after(self, trial: Trial) -> float:
        """A recording's clock adds each trial's recorded cost; a real evaluator compiles in
        parallel, so summing costs would overstate the time: there the clock is the wall."""
        if self.evaluator.simulated_clock:
            return self.clock_s + trial.cost_s
        return max(self.clock_s, self._wall_offset + time.perf_counter() - self._wall0)

    def note(self, message: str) -> None:
        """A warning for the user (e.g. 'under half of the LLM batch was valid').  Redacted: a note may
        quote a model's error, and a ``cmd:`` model's stderr once carried a token into the terminal
        and the store's run summary."""
        from kerntune.llm.secrets import redact

        message = redact(message)
        self.notes.append(message)
        if self.on_note is not None:
            self.on_note(message)

    def status(self, message: str) -> None:
        """What the search is waiting for, for a user watching a long step (``on_status``).  Called
        from a model call's thread in ``auto``; a failing display (a closed pipe) must not end the run."""
        if self.on_status is not None:
            try:
                self.on_status(message)
            except Exception:  # noqa: BLE001 - a status line is never worth a run
                pass

    # -- measuring -------------------------------------------------------------------------
    def is_measured(self, config: Config) -> bool:
        return self.space.key(config) in self.measured

    def evaluate(self, configs: Sequence[Config], source: str = "",
                 sources: Sequence[str] | None = None) -> list[Trial]:
        """Measure the new configs of a batch; return a Trial for every config.

        Configs measured before are answered from history (free); invalid ones
        get an ``invalid`` trial that is not charged; the batch is cut to the
        remaining evaluation budget.  Raises BudgetExhausted when called after
        the budget is spent.  ``sources`` (one per config) overrides ``source`` where a
        batch mixes proposers (an LLM round topped up by its fallback).
        """
        why = self._why_done()
        if why:
            self.stop_reason = why
            raise BudgetExhausted(why)
        results: list[Trial | None] = [None] * len(configs)
        new: list[tuple[int, str, Config]] = []
        first_of: dict[str, int] = {}  # key -> index of its first copy in this batch
        copies: list[tuple[int, int]] = []  # (index of a later copy, index of the first)
        for i, cfg in enumerate(configs):
            errors = self.space.validate(cfg)
            if errors:
                results[i] = Trial(dict(cfg), Status.INVALID, error="; ".join(map(str, errors)))
                continue
            cfg = self.space.canonical(cfg)
            key = self.space.key(cfg)
            if key in self.measured:
                results[i] = self.measured[key]
            elif key in first_of:
                copies.append((i, first_of[key]))
            else:
                first_of[key] = i
                new.append((i, key, cfg))
        if self._left_stored_path(new):
            self._replay_all_stored()
            for i, key, _ in new:
                if key in self.measured:
                    results[i] = self.measured[key]
            new = [(i, key, cfg) for i, key, cfg in new if key not in self.measured]
        if self.remaining_evals is not None:
            new = new[: self.remaining_evals]
        if not new:
            self._stale_calls += 1
            if self._stale_calls > 1000:
                raise SearchStalled("strategy proposed only measured configs 1000 times in a row")
        else:
            self._stale_calls = 0
        while new and not self._why_done():  # (done only where stored trials were just taken in)
            # Under a wall-clock budget with no cost estimate yet, one parallel round goes first; the
            # rest of the batch follows within this call once it is estimated (not cut as "over budget").
            # Each part is sized to the time left, so the loop goes on only while time is left (an
            # estimate made from a first round of cold compiles and worker start-up is pessimistic).
            k = self._fits_in_time(len(new))
            self._measure_part(new[:k], results, source, sources)
            new = new[k:]
            if self._why_done():
                break
        # A later copy of a config in the same batch gets the trial of its first copy: it was reported
        # "over budget" (unmeasured) with budget left, and the strategy lost it from its sample.
        for i, first in copies:
            results[i] = results[first]
        # Configs cut by the budget stay None: report them as unmeasured to the caller.
        return [r if r is not None else Trial(dict(configs[i]), Status.UNMEASURED, error="over budget")
                for i, r in enumerate(results)]

    # -- resume ------------------------------------------------------------------------------
    def _left_stored_path(self, new: list[tuple[int, str, Config]]) -> bool:
        """Whether this batch leaves a resumed run's stored path: it holds a config the store does not,
        while stored trials that this batch does not hold are still unreplayed.  (A batch that a kill
        cut short holds its stored trials beside the fresh ones: that is still the path.)"""
        if self._replayed >= len(self.prior) or all(key in self.prior for _, key, _ in new):
            return False
        in_batch = {key for _, key, _ in new}
        return any(key not in self.measured and key not in in_batch for key in self.prior)

    def _replay_all_stored(self) -> None:
        """Take every stored trial not replayed yet into the history, the budget and the best, in
        stored order, before anything new is measured.  A resume that left its stored path (another
        warm start, another batch size, a timing-dependent step) once dropped them: the budget was
        overspent and the reported best could be slower than one the store held."""
        left = [key for key in self.prior if key not in self.measured]
        clock = self.clock_s
        for key in left:
            trial, stored_clock = self.prior[key]
            clock = max(clock, stored_clock)  # the clock never runs back
            self._record(key, trial, clock, "resumed", store=False)
        self._replayed += len(left)
        self._wall_offset, self._wall0 = clock, time.perf_counter()  # resumed: the wall goes on from here
        self.note(f"the resumed run left its stored path: its {len(left)} stored trial(s) not re-walked are "
                  "counted as stored, before anything new is measured")

    def _measure_part(self, part: list[tuple[int, str, Config]], results: list[Trial | None], source: str,
                      sources: Sequence[str] | None) -> None:
        for i, key, _ in part:
            if key in self.prior:
                trial, clock = self.prior[key]
                self._record(key, trial, clock, sources[i] if sources else source, store=False)
                self._replayed += 1
                self._wall_offset, self._wall0 = clock, time.perf_counter()  # resumed: the wall goes on from here
                results[i] = trial
        fresh = [(i, k, c) for i, k, c in part if k not in self.prior]
        if fresh:
            t0 = time.perf_counter()
            for j, trial in self._stream([c for _, _, c in fresh]):
                i, key, _ = fresh[j]
                self._record(key, trial, self._clock_after(trial), sources[i] if sources else source,
                             store=True)
                results[i] = trial
            self._measure_s += time.perf_counter() - t0
            self._measured_n += len(fresh)

    def _stream(self, configs: list[Config]) -> Iterable[tuple[int, Trial]]:
        """The evaluator's stream; on a simulated clock under ``max_seconds``, one config at a time
        and none once the clock has reached it (``tune --replay --seconds 20`` ended at 36-50 s when
        whole batches were measured): the configs not started stay unmeasured and uncharged.  Under
        ``target_ms`` the stream is left as soon as a config meets it (the run went on measuring up to
        a whole batch after the target was met); the rest stay unmeasured."""
        b = self.budget
        if b.max_seconds is not None and self.evaluator.simulated_clock:
            for j, cfg in enumerate(configs):
                if self.clock_s >= b.max_seconds or self._target_met():
                    return
                for _, trial in self.evaluator.stream([cfg]):
                    yield j, trial
            return
        if b.target_ms is None:
            yield from self.evaluator.stream(configs)
            return
        it = iter(self.evaluator.stream(configs))
        try:
            for j, trial in it:
                yield j, trial  # recorded by the caller before the stream is asked for the next
                if self._target_met():
                    return
        finally:
            close = getattr(it, "close", None)
            if close is not None:  # a parallel evaluator's stream stops its workers (configs in flight)
                close()

    def _target_met(self) -> bool:
        b = self.budget
        return b.target_ms is not None and self.best is not None and self.best.time_ms <= b.target_ms  # type: ignore[operator]

    def _fits_in_time(self, n: int) -> int:
        """How many of ``n`` new configs to start so that a wall-clock budget is not overshot by a
        whole batch: a batch in flight is always finished, so near the end of ``max_seconds`` a
        batch of 16 slow compiles could run far past it (seen with Helion: 25 s budget, 44 s
        spent).  The wall seconds per measured config so far (parallel compiles included; LLM
        calls and strategy time left out, or a slow first LLM call would shrink the model's
        first batch to one config) estimate the cost; at least one config is always started so
        the search makes progress.  Before the first measurement there is no estimate: at most
        ``evaluator.parallelism`` configs start, one parallel round that measures the cost.
        Recordings (simulated clocks) stop between configs instead (``_stream``)."""
        b = self.budget
        if b.max_seconds is None or self.evaluator.simulated_clock or n <= 1:
            return n
        if not self._measured_n:
            return min(n, max(1, self.evaluator.parallelism))
        self.charge(0.0)  # bring the clock up to the wall
        per_config = self._measure_s / self._measured_n
        if per_config <= 0:
            return n
        return max(1, min(n, int((b.max_seconds - self.clock_s) / per_config)))

    def _record(self, key: str, trial: Trial, clock: float, source: str, store: bool) -> None:
        self.clock_s = clock
        self.history.append(trial)
        self.clocks.append(clock)
        self.measured[key] = trial
        if trial.ok and (self.best is None or trial.time_ms < self.best.time_ms):  # type: ignore[operator]
            self.best = trial
        if store and self.on_trial is not None:
            self.on_trial(len(self.history) - 1, key, trial, clock, source)

    # -- helpers strategies share ------------------------------------------------------------
    def sample_unmeasured(self, n: int, besides: Iterable[Config] = ()) -> list[Config]:
        """Up to ``n`` random unmeasured configs, none of them one of ``besides`` (the configs already
        in the batch being built: the default drawn again was measured once and its copy came back
        "over budget").  Drawn as before, and a config of ``besides`` drawn is replaced by a further
        draw: a sample that holds none of them is the one it always was (the same search path)."""
        out = self.space.sample(self.rng, n, exclude=self.measured.keys())
        avoid = {self.space.key(c) for c in besides}
        kept = [c for c in out if self.space.key(c) not in avoid]
        if len(kept) < len(out):
            taken = set(self.measured) | avoid | {self.space.key(c) for c in kept}
            kept += self.space.sample(self.rng, len(out) - len(kept), exclude=taken)
        return kept

    def startup(self, n: int) -> list[Config]:
        """The default config (unless measured), then random unmeasured configs: ``n`` in all."""
        first = self.unmeasured([self.space.default])[: max(n, 0)]
        return first + self.sample_unmeasured(max(n - len(first), 0), besides=first)

    def unmeasured(self, configs: Iterable[Config]) -> list[Config]:
        seen: set[str] = set()
        out = []
        for c in configs:
            k = self.space.key(c)
            if k not in self.measured and k not in seen:
                seen.add(k)
                out.append(c)
        return out

    def value(self, trial: Trial) -> float:
        """Objective for ranking: failures rank after every measured config."""
        return trial.time_ms if trial.ok else float("inf")  # type: ignore[return-value]

    def ranked(self) -> list[Trial]:
        return sorted((t for t in self.history if t.ok), key=lambda t: t.time_ms)  # type: ignore[arg-type,return-value]


Strategy = Callable[..., None]
