"""The evaluator kerntune's strategies measure through when kerntune is Helion's autotuner
(``kerntune.helion.tuner``): each batch of kerntune configs becomes Helion configs measured by
Helion's own ``benchmark_population`` (its precompile, compile timeout, benchmark subprocess and
accuracy check), and each Helion outcome a kerntune Trial.  Apart from the search class so that what
a measurement is, and how Helion's failures map onto kerntune's statuses, reads in one place."""

from __future__ import annotations

import contextlib
import math
import os
import time
import traceback
from collections.abc import Iterator, Sequence
from typing import Any

from kerntune.evaluate.base import Evaluator
from kerntune.evaluate.trial import Status, Trial
from kerntune.helion.space import HelionLayout
from kerntune.space import Config

#: The stop reason of a search that Helion's own ``autotune_budget_seconds`` ended.
HELION_BUDGET = "Helion's autotune_budget_seconds"


def _raised_by_codegen(error: BaseException) -> bool:
    """Whether ``error`` is the one Helion 1.4.0's compile loop re-raises when no config of a batch
    compiled (``benchmark_provider.benchmark``: ``if not compiled and i == len(all_configs) - 1:
    raise``): raised in ``compile_config`` called from the provider's ``benchmark``.  Helion skips a
    config whose codegen fails when another config of its batch compiles, so this one error is a
    failure of configs, not of the search; every other error from the batch is Helion's to raise."""
    frames = [(f.f_code.co_name, f.f_code.co_filename) for f, _ in traceback.walk_tb(error.__traceback__)]
    return any(name == "benchmark" and file.endswith("benchmark_provider.py") and inner == "compile_config"
               for (name, file), (inner, _) in zip(frames, frames[1:]))


class HelionEvaluator(Evaluator):
    """Measures kerntune configs through a Helion search object's own benchmark path.

    ``search`` is a Helion ``PopulationBasedSearch`` (the :func:`autotuner` object):
    each batch is unflattened by Helion's ConfigGeneration, compiled (Helion codegen,
    then Triton in parallel precompile processes), checked against the baseline output
    and timed by Helion's ``benchmark_population``.  Distinct kerntune configs that Helion
    normalises to one config (``pid_type`` flat drops ``num_sm_multiplier`` and ``maxnreg``)
    are measured once, for the whole search: a repeat is answered from the first trial.
    """

    name = "helion"

    def __init__(self, search: Any, layout: HelionLayout, workload: dict[str, Any] | None = None,
                 device: dict[str, Any] | None = None, keep: int = 8) -> None:
        super().__init__(layout.space)
        self.search = search
        self.layout = layout
        self._workload = workload or {}
        self._device = device
        self.keep = max(int(keep), 1)
        self.members: list[Any] = []  # the best ``keep`` measured PopulationMembers, distinct Helion configs
        #: perf_counter() time at which the search's wall budget ends (None: no time budget).
        self.deadline: float | None = None
        #: repr of a normalised Helion config -> (the trial that measured it, its kerntune config).
        self.seen: dict[str, tuple[Trial, Config]] = {}
        #: True once Helion's autotune_budget_seconds cut a batch short: the search ends there.
        self.helion_budget_out = False
        self._compile_timeout: float | None = None  # Helion's compile timeout during the last batch
        jobs = getattr(getattr(search, "benchmark_provider", None), "_jobs", None)
        self.parallelism = max(1, int(jobs or os.cpu_count() or 1))

    def stream(self, configs: Sequence[Config]) -> Iterator[tuple[int, Trial]]:
        """The batch's trials; then, if Helion's own budget cut the batch, BudgetExhausted ends the
        search (Helion compiles nothing more once its budget is spent)."""
        from kerntune.strategies.base import BudgetExhausted

        yield from enumerate(self.evaluate(configs))
        if self.helion_budget_out:
            raise BudgetExhausted(HELION_BUDGET)

    def evaluate(self, configs: Sequence[Config]) -> list[Trial]:
        from helion import exc as helion_exc

        trials: list[Trial | None] = [None] * len(configs)
        todo: list[tuple[int, str, Any]] = []
        first_in_batch: dict[str, int] = {}
        repeats: list[tuple[int, str]] = []
        for i, cfg in enumerate(configs):
            try:
                member = self.search.make_unbenchmarked(self.layout.to_flat(cfg))
            except (helion_exc.InvalidConfig, ValueError, TypeError, KeyError, AssertionError) as e:
                trials[i] = Trial(dict(cfg), Status.INVALID, error=f"Helion rejected the config: {e}"[:500])
                continue
            if member is None:
                trials[i] = Trial(dict(cfg), Status.INVALID, error="Helion rejected the config (InvalidConfig)")
                continue
            key = repr(member.config)
            if key in self.seen or key in first_in_batch:  # a Helion config measured (or in this batch) already
                repeats.append((i, key))
                continue
            first_in_batch[key] = i
            todo.append((i, key, member))
        t0 = time.perf_counter()
        members = [m for _, _, m in todo]
        cut = False
        if members:
            with self._compile_timeout_within_budget():
                cut = self._benchmark(members)
            self.helion_budget_out = self.helion_budget_out or cut
        wall = time.perf_counter() - t0
        share = wall / max(len(members), 1)
        for i, key, member in todo:
            trial = self._trial(configs[i], member, share, cut)
            trials[i] = trial
            if trial.status is not Status.UNMEASURED:
                self.seen[key] = (trial, configs[i])
        for i, key in repeats:
            trials[i] = self._repeat(configs[i], key, trials[first_in_batch[key]] if key in first_in_batch else None)
        return [t if t is not None else Trial(dict(c), Status.RUNTIME_ERROR, error="not measured")
                for t, c in zip(trials, configs)]

    def _repeat(self, cfg: Config, key: str, first_here: Trial | None) -> Trial:
        """The trial of a config whose Helion config was measured before: no new measurement."""
        if key not in self.seen:  # its first copy in this batch went unmeasured (Helion's budget)
            assert first_here is not None
            return Trial(dict(cfg), first_here.status, error=first_here.error, extra=dict(first_here.extra))
        t, first = self.seen[key]
        return Trial(dict(cfg), t.status, t.time_ms, list(t.times_ms), 0.0, 0.0, t.error,
                     {**t.extra, "same_helion_config_as": self.space.to_json(first)})

    def _benchmark(self, members: list[Any]) -> bool:
        """Benchmark ``members`` as Helion's searches do; True if Helion's ``autotune_budget_seconds``
        cut the batch short.  What Helion raises is raised (TritonUnrecoverableRuntimeError; a
        TritonError, which Helion does not raise under ``autotune_ignore_errors``): the search ends
        with Helion's message, as Helion's own searches do.  The one exception is the codegen error
        of a batch none of whose configs compiled: Helion skips a codegen failure beside a config
        that compiles, so each config of the batch (none was benchmarked) is tried alone."""
        provider = self.search.benchmark_provider
        hook = provider.budget_exceeded_fn
        cut: list[bool] = []

        def watched() -> bool:  # Helion's provider asks this before each compile and each benchmark
            cut.append(bool(hook()))
            return cut[-1]

        provider.budget_exceeded_fn = watched
        try:
            self.search.benchmark_population(members, desc="kerntune batch")
        except Exception as e:
            if not _raised_by_codegen(e):
                raise
            if len(members) > 1:
                for m in members:
                    self._benchmark([m])
            else:
                members[0].perfs.append(math.inf)
                members[0].status = "error"
                members[0].kt_codegen_error = f"{type(e).__name__}: {e}"
        finally:
            provider.budget_exceeded_fn = hook
        return any(cut)

    @contextlib.contextmanager
    def _compile_timeout_within_budget(self) -> Iterator[None]:
        """Cap Helion's per-config compile timeout (60 s by default) at the search's time left.

        kerntune finishes a batch in flight, so one config that compiles until Helion's timeout
        could carry the search a minute past its wall budget (softmax and layer_norm on an H100:
        40 s over a 77-102 s budget).  Helion's own LLM search caps the timeout the same way."""
        settings = getattr(self.search, "settings", None)
        original = getattr(settings, "autotune_compile_timeout", None)
        if self.deadline is None or original is None:
            self._compile_timeout = original
            yield
            return
        left = self.deadline - time.perf_counter()
        settings.autotune_compile_timeout = self._compile_timeout = int(max(5, min(original, left)))
        try:
            yield
        finally:
            settings.autotune_compile_timeout = original

    def _trial(self, cfg: Config, member: Any, share: float, cut: bool) -> Trial:
        """The Trial of a member as Helion left it, its status from what Helion reported."""
        from helion.autotuner.benchmark_provider import _unset_fn

        perf = member.perf if member.perfs else math.inf
        extra = {"helion_config": str(member.config), "helion_status": member.status}
        compile_s = float(member.compile_time or 0.0)
        bench_s = max(share - compile_s, 0.0)
        if math.isfinite(perf):
            self._keep(member)
            return Trial(dict(cfg), Status.OK, float(perf), [float(perf)], compile_s, bench_s, extra=extra)
        codegen = getattr(member, "kt_codegen_error", None)
        if codegen is not None:
            return Trial(dict(cfg), Status.COMPILE_ERROR, None, [], compile_s, bench_s,
                         f"Helion codegen failed: {codegen}"[:2000], extra)
        status, error = Status.RUNTIME_ERROR, (
            "Helion: failed to compile, crashed or failed the accuracy check against the baseline")
        if member.status == "filtered":
            status, error = Status.INVALID, "rejected by autotune_config_filter"
        elif member.status == "timeout":
            limit = self._compile_timeout
            # a precompile Helion stopped at its timeout ran at least that long; a benchmark timeout did not
            if member.compile_time is not None and limit is not None and member.compile_time >= limit:
                status, error = Status.COMPILE_TIMEOUT, f"Helion: compile timed out after {compile_s:.0f} s"
            else:
                status, error = Status.TIMEOUT, "Helion: timed out in its benchmark"
        elif member.status == "peer_compilation_fail":
            error = "Helion: another rank failed to compile it"
        elif member.fn is _unset_fn:  # Helion never compiled or benchmarked it
            if cut:
                status, error = Status.UNMEASURED, f"not measured: {HELION_BUDGET} ran out"
            else:
                status, error = Status.COMPILE_ERROR, "Helion codegen failed (its log has the error)"
        return Trial(dict(cfg), status, None, [], compile_s, bench_s, error, extra)

    def _keep(self, member: Any) -> None:
        self.members.append(member)
        self.members.sort(key=lambda m: m.perf)
        del self.members[self.keep:]

    def device(self) -> dict[str, Any]:
        if self._device is None:
            from kerntune.helion.tuner import device_facts  # (tuner imports this module)

            try:
                self._device = device_facts()
            except Exception:  # no CUDA device: a CPU/interpreted Helion
                self._device = {"name": "unknown"}
        return self._device

    def workload(self) -> dict[str, Any]:
        return dict(self._workload)

    def describe(self) -> dict[str, Any]:
        return {"evaluator": self.name, "kernel_name": self._workload.get("kernel_name"),
                "problem_size": self._workload.get("problem_size")}


def _nothing_passed(history: Sequence[Trial]) -> str:
    """Why a search ended without a config: the count per status and the first error."""
    counts: dict[str, int] = {}
    for t in history:
        counts[t.status.value] = counts.get(t.status.value, 0) + 1
    tally = ", ".join(f"{n} {status}" for status, n in counts.items()) or "none tried"
    first = next((t.error for t in history if t.error), None)
    return ("kerntune: no config compiled and passed Helion's checks (" + tally + ")"
            + (f"; first error: {first[:1000]}" if first else ""))


# -- the autotuner -------------------------------------------------------------------------------
