"""What every code-level strategy shares: the current best kernel, the model and one step.

``TransformContext.rewrite`` is one step: the model rewrites the kernel and declares its
tunable parameters (JSON, validated, one repair round), the parameters are fixed against the
code, the model lists restrictions, the new space is searched with a kerntune strategy through
Kernel Tuner in a worker (every trial checked against the original kernel's outputs and stored),
and the kernel is accepted only if it is correct and at least ``performance_threshold`` percent
faster than the current best (where the two are re-timed side by side: the median of the per-round
ratios, and its 95% interval above 1x, verdict "faster" in the protocol of ``kerntune.evaluate.protocol``;
an inconclusive interval whose median would pass is re-timed once with more rounds).  Every
side-by-side turn is checked against the original's outputs too: a wrong result there rejects the step
(a race can pass the screening), so does the rewrite's own turn crashing or hanging, and only a timeout of
the other kernels' turns or a failing worker leaves it to the screening times (``kerntune.transform.judging``).
Strategies decide which steps to ask for; the context does the rest.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, field
from importlib import resources
from string import Template
from typing import Any, Callable, Mapping, Sequence

from kerntune.errors import KerntuneError
from kerntune.evaluate.protocol import Estimate, estimate, speedup, verdict
from kerntune.evaluate.trial import Status
from kerntune.llm.types import LLMError, Message
from kerntune.run.search import RunOptions, run_search
from kerntune.space import jsonable
from kerntune.strategies import Budget, BudgetExhausted
from kerntune.transform.judging import RoundFailure, failure_reason, settled_best, side_by_side_rounds
from kerntune.transform.kernel import AXES, KernelSpec, block_restriction, family
from kerntune.transform.kt_backend import KernelTunerEvaluator
from kerntune.transform.replies import (MAX_COMBINATIONS, SCHEMAS, check_schema, execute_problems, execute_schema,
                                        fix_params, restriction_problems, strip_fences, usable_restrictions)

log = logging.getLogger("kerntune.transform")

#: The fewest side-by-side rounds whose 95% interval has its coverage: with fewer, ``verdict`` never says
#: "faster", and one noisy round decided (a no-op rewrite was accepted at 1.12-3.25x in 4 of 4 runs of 3).
MIN_VERDICT_ROUNDS = 6

#: Steps that cannot be tuning, whatever the model thinks: nothing in the kernel's code changes.
NOT_TUNING = [
    (re.compile(r"\bprofil|nsight|nvprof|rocprof|vtune|\bperf\s+counters?", re.I), "profiling does not change the kernel"),
    (re.compile(r"compiler\s+(flag|option|switch)|compil\w*\s+(flag|option)|\B-O[0-3s]\b|fast[-_ ]?math|"
                r"-cl-[a-z]|maxrregcount|\bnvcc\s+-|--use_fast_math", re.I), "compiler flags are not kernel code"),
    (re.compile(r"\b(cublas|cudnn|clblast|clblas|cutlass|rocblas)\b", re.I),
     "calling a library replaces the kernel instead of tuning it"),
]


def template(name: str) -> Template:
    return Template(resources.files("kerntune.prompts").joinpath(name).read_text())


@dataclass
class KernelState:
    spec: KernelSpec
    config: dict[str, Any]
    time_ms: float
    step: str = "original"
    #: over the original, the median of per-round ratios where the two were timed side by side
    #: (None: the ratio of the two times)
    speedup: float | None = None
    #: that paired estimate (its interval and rounds); None where there is none
    over_original: Estimate | None = None


@dataclass
class StepRecord:
    """What happened to one step: ``accepted``, ``rejected`` (incorrect, slower, no compile, …),
    ``invalid`` (not a tuning step), ``skipped`` (judged useless, or a dependency brought no gain),
    ``failed`` (the model gave no usable answer) or ``split`` (broken into smaller steps)."""

    id: str
    description: str
    status: str
    reason: str = ""
    tune_params: dict[str, list[Any]] = field(default_factory=dict)
    restrictions: list[str] = field(default_factory=list)
    best_config: dict[str, Any] | None = None
    time_ms: float | None = None
    speedup: float | None = None          # over the kernel the step started from
    run_id: str | None = None
    evaluations: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    code: str | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {k: (jsonable(v) if k == "best_config" and v else v) for k, v in self.__dict__.items()}


class TransformContext:
    """The Kernel Tuner backend's context; a backend for other kernel files (``triton_context``)
    subclasses it and replaces the prompts (``TEMPLATES``), the reply schemas (``SCHEMA_KINDS``), the
    original's measurement, ``fields`` and ``rewrite``, and how a variant's space is searched
    (``variant_space`` and ``variant_evaluator``); the acceptance rule in ``_tune`` is shared."""

    #: prompt file -> the file this backend uses instead (the strategies name the Kernel Tuner ones)
    TEMPLATES: dict[str, str] = {}
    #: reply kind -> the schema this backend checks it against
    SCHEMA_KINDS: dict[str, str] = {}

    def template_name(self, name: str) -> str:
        return self.TEMPLATES.get(name, name)

    def __init__(self, original: KernelSpec, session: Any, llm: Any, *, search: str = "exhaustive",
                 budget: int | None = 40, budget_seconds: float | None = None, performance_threshold: float = 0.5,
                 search_options: Mapping[str, Any] | None = None, store: Any = None, seed: int = 0,
                 temperature: float = 0.2, max_tokens: int = 8192, arguments: str = "",
                 confirm_rounds: int = MIN_VERDICT_ROUNDS, on_event: Callable[[str], None] | None = None) -> None:
        if confirm_rounds < 0:
            raise KerntuneError(f"confirm_rounds must be at least 0, got {confirm_rounds}")
        if not 0 <= performance_threshold < 100:
            raise KerntuneError(f"performance_threshold is a percentage from 0 to under 100, got {performance_threshold:g}")
        self.original, self.session, self.llm = original, session, llm
        self.confirm_rounds = confirm_rounds
        self.search, self.budget, self.budget_seconds = search, budget, budget_seconds
        self.performance_threshold = performance_threshold
        self.search_options = dict(search_options or {})
        self.store, self.seed, self.temperature, self.arguments = store, seed, temperature, arguments
        self.max_tokens = max_tokens
        self.lang = session.lang
        self.records: list[StepRecord] = []
        self.accepted: list[str] = []
        self.original_state: KernelState | None = None
        self.current: KernelState | None = None
        self.on_event = on_event or (lambda msg: log.info(msg))
        self.llm_calls = 0
        self.llm_seconds = 0.0
        #: called with each accepted step's record once it is the current kernel (a caller's checkpoint)
        self.on_accept: Callable[[StepRecord], None] | None = None

    # -- the original kernel ---------------------------------------------------------------------
    def measure_original(self) -> KernelState:
        """Time the original kernel over its own configs; its first correct output is the reference (the
        output of its first config in the space's order that runs), and every further config is checked
        against it: the baseline is the fastest config that agrees with it, and a disagreement is said in
        one line.  Why: the configs were never compared, so a wrong one (an UNROLL that dropped the loop's
        remainder) could be the fastest, the baseline and the reported best configuration, and every
        correct rewrite was rejected as incorrect against its output."""
        space = self.original.space()
        evaluator = KernelTunerEvaluator(space, self.original, self.session, save_reference=True)
        res = run_search(evaluator, "exhaustive", Budget(max_evals=self.budget), self.seed,
                         RunOptions(store=self.store, label="transform original"))
        trials = res.history
        ok = [t for t in trials if t.ok]
        if not ok or self.session.reference_path is None:
            why = next((t.error for t in trials if t.error), "no result")
            raise KerntuneError(f"the original kernel does not run: {why}")
        best = min(ok, key=lambda t: t.time_ms)  # type: ignore[arg-type,return-value]
        wrong = [t for t in trials if t.status is Status.WRONG_RESULT]
        if wrong:
            why = " ".join((wrong[0].error or "").split())[:200]
            self.on_event(f"the original kernel's configs disagree: {len(wrong)} of {len(ok) + len(wrong)} differ"
                          f" from the first, {json.dumps(jsonable(ok[0].config))}, whose output is the reference"
                          f" every rewrite is checked against; the baseline is the fastest of the {len(ok)} that"
                          f" agree with it (differing: {json.dumps(jsonable(wrong[0].config))}: {why})")
        self.original_state = self.current = KernelState(self.original, dict(best.config), float(best.time_ms))  # type: ignore[arg-type]
        self.on_event(f"original kernel: {best.time_ms:.4g} ms at {json.dumps(jsonable(best.config))}")
        return self.current

    def speedup_over_original(self) -> float:
        """The current kernel's speedup over the original: paired by round where the two were last timed
        side by side, else the ratio of their times."""
        cur, orig = self.current, self.original_state
        if cur is None or orig is None:
            return 1.0
        return cur.speedup if cur.speedup is not None else orig.time_ms / cur.time_ms

    # -- talking to the model --------------------------------------------------------------------
    def fields(self, spec: KernelSpec | None = None) -> dict[str, str]:
        cur = self.current
        spec = spec or (cur.spec if cur else self.original)
        tag = {"OpenCL": "c", "CUDA": "cuda", "C": "c"}[family(self.lang)]
        speedup = self.speedup_over_original()
        return {
            "language": {"OpenCL": "OpenCL", "CUDA": "CUDA", "C": "C"}[family(self.lang)],
            "kernel_name": spec.name, "kernel_string": spec.source.strip(), "code_tag": tag,
            "problem_size": "x".join(map(str, self.session.problem_size)),
            "arguments": self.arguments or "as in the kernel's signature",
            "device": self.session.device_name, "tune_params": json.dumps(spec.tune_params) if spec.tune_params else "none",
            "restrictions": json.dumps(spec.restrictions) if spec.restrictions else "none",
            "grid_div": json.dumps(spec.grid_div) if spec.grid_div else "the block sizes (default)",
            "best_config": json.dumps(jsonable(cur.config)) if cur else "not measured",
            "best_time": f"{cur.time_ms:.4g} ms" if cur else "not measured", "speedup": f"{speedup:.2f}x",
            "history": self.history_text(),
        }

    def history_text(self) -> str:
        lines = []
        for r in self.records:
            extra = f", {r.speedup:.2f}x" if r.speedup else ""
            lines.append(f"- [{r.status}{extra}] {r.description}" + (f" — {r.reason}" if r.reason else ""))
        return "\n".join(lines) or "- (none yet)"

    def ask(self, kind: str, template_name: str, fields: Mapping[str, str],
            validate: Callable[[Any], list[str]] | None = None, schema: Mapping[str, Any] | None = None) -> Any:
        """One model call: the template filled, the reply's JSON checked against the schema of
        ``kind`` (or ``schema``) and ``validate``, one repair round; LLMError when nothing usable came back."""
        schema = dict(schema) if schema is not None else SCHEMAS[self.SCHEMA_KINDS.get(kind, kind)]
        system = template(self.template_name("transform_system.md")).safe_substitute(fields)
        user = template(self.template_name(template_name)).safe_substitute(fields)

        def check(value: Any) -> list[str]:
            problems = check_schema(value, schema)
            return problems if problems else (validate(value) if validate else [])

        t0 = time.perf_counter()
        exchanges: Any = None
        try:
            resp = self.llm.complete([Message("system", system), Message("user", user)], schema=schema,
                                     temperature=self.temperature, max_tokens=self.max_tokens, validate=check)
            exchanges = getattr(resp, "calls", None)
        except LLMError as exc:
            exchanges = getattr(exc, "calls", None)
            raise
        finally:
            # the provider exchanges (``LLMClient.complete``'s list: a repair round is a second one), not
            # the asks: "model calls" left repair rounds out and disagreed with the transcript
            self.llm_calls += len(exchanges) if isinstance(exchanges, list) and exchanges else 1
            self.llm_seconds += time.perf_counter() - t0
        problems = check(resp.parsed) if resp.parsed is not None else ["no JSON"]
        if problems:
            raise LLMError(f"{kind}: unusable answer: {problems[0]}")
        return resp.parsed

    # -- steps -------------------------------------------------------------------------------------
    def not_tuning(self, description: str) -> str:
        """Why a step is not tuning by rule (empty: the rules do not object)."""
        for pattern, why in NOT_TUNING:
            if pattern.search(description):
                return why
        return ""

    def record(self, rec: StepRecord) -> StepRecord:
        self.records.append(rec)
        speed = f" ({rec.speedup:.2f}x)" if rec.speedup else ""
        self.on_event(f"step {rec.id}: {rec.status}{speed}" + (f" — {rec.reason}" if rec.reason else ""))
        return rec

    def rewrite(self, step_id: str, instruction: str, *, template_name: str = "transform_execute.md",
                fixed: Mapping[str, Sequence[Any]] | None = None, kernel_in_instruction: bool = False,
                ask_restrictions: bool = True, description: str | None = None) -> StepRecord:
        """Apply one step end to end; the returned record says whether the kernel was accepted."""
        assert self.current is not None, "measure_original() first"
        t0 = time.perf_counter()
        cur = self.current
        rec = StepRecord(step_id, description or instruction.strip().splitlines()[0][:300], "failed")
        fields = self.fields()
        fields["step"] = instruction.strip()
        fields["kernel_section"] = "" if kernel_in_instruction else (
            f"## Current kernel (`{cur.spec.name}`)\n\n```{fields['code_tag']}\n{fields['kernel_string']}\n```\n")
        fields["fixed_params"] = ("- This step's parameters, with exactly these values: " + json.dumps(dict(fixed))
                                  + "\n") if fixed else ""
        try:
            answer = self.ask("execute", template_name, fields,
                              validate=lambda a: execute_problems(a, cur.spec.name, self.lang, fixed or {},
                                                                 cur.spec.tune_params),
                              schema=execute_schema(fixed or {}, cur.spec.tune_params))
        except LLMError as exc:
            rec.reason = f"the model gave no usable kernel: {exc}"
            return self._done(rec, t0)
        grid = {a: list(answer.get(f"grid_div_{a}") or []) for a in AXES if answer.get(f"grid_div_{a}")}
        fx = fix_params(strip_fences(answer["code"]), answer["tune_params"], previous=cur.spec.tune_params,
                        fixed=fixed or {}, grid_div=grid)
        rec.notes += fx.notes
        for axis, exprs in cur.spec.grid_div.items():  # the launch the model did not restate is kept ...
            if axis in fx.grid_div:
                continue
            names = {n for e in exprs for n in re.findall(r"[A-Za-z_]\w*", e)}
            if names <= set(fx.tune_params):
                fx.grid_div[axis] = list(exprs)
            else:  # ... unless the new code dropped its parameters
                rec.notes.append(f"grid_div_{axis} {exprs} dropped: the new kernel lacks its parameters")
        rec.code = fx.code
        restrictions, notes = usable_restrictions([fx.rename(r) for r in answer.get("restrictions") or []],
                                                  set(fx.tune_params))
        rec.notes += notes
        if ask_restrictions:
            restrictions += self._restrictions(fx.code, fx.tune_params, fx.grid_div, rec)
        restrictions = list(dict.fromkeys(restrictions))
        try:
            spec = KernelSpec(cur.spec.name, fx.code, fx.tune_params, restrictions, fx.grid_div,
                              description=rec.description)
        except KerntuneError as exc:
            rec.reason = f"unusable parameters: {exc}"
            return self._done(rec, t0)
        rec.tune_params, rec.restrictions = spec.tune_params, spec.restrictions
        self._tune(spec, rec)
        return self._done(rec, t0)

    def _restrictions(self, code: str, params: Mapping[str, list[Any]], grid: Mapping[str, list[str]],
                      rec: StepRecord) -> list[str]:
        if not params:
            return []
        probe = KernelSpec(self.current.spec.name, code, dict(params), [], {})  # type: ignore[union-attr]
        fields = self.fields(probe)
        fields["grid_div"] = json.dumps(dict(grid)) if grid else "the block sizes (default)"
        try:
            answer = self.ask("restrictions", "transform_restrictions.md", fields,
                              validate=lambda a: restriction_problems(a.get("restrictions") or [], set(params)))
        except LLMError as exc:
            rec.notes.append(f"no restrictions from the model ({exc}); every combination is tried")
            return []
        kept, notes = usable_restrictions(answer.get("restrictions") or [], set(params))
        rec.notes += notes
        return kept

    def _tune(self, spec: KernelSpec, rec: StepRecord) -> None:
        """Search the variant's space; accept it if correct and fast enough."""
        cur = self.current
        assert cur is not None
        try:
            space = self.variant_space(spec)
            if space.cartesian_size > MAX_COMBINATIONS:
                raise KerntuneError(f"{space.cartesian_size:,} combinations (at most {MAX_COMBINATIONS:,})")
            count = space.count()
        except KerntuneError as exc:
            rec.status, rec.reason = "rejected", f"unusable space: {exc}"
            return
        if count == 0:
            rec.status, rec.reason = "rejected", "the restrictions leave no valid configuration"
            return
        try:
            evaluator = self.variant_evaluator(spec, space)
        except KerntuneError as exc:
            rec.status, rec.reason = "rejected", f"could not be measured: {exc}"
            return

        def gate(ctx: Any) -> None:
            first = ctx.history[0] if len(ctx.history) == 1 else None
            if first is not None and first.status in (Status.WRONG_RESULT, Status.COMPILE_ERROR):
                raise BudgetExhausted(f"stopped after the first config: {first.status.value}")

        run_options = RunOptions(store=self.store, label=f"transform {rec.id}",
                                 strategy_options=self.search_options, warm_start=[space.default], progress=gate)
        try:
            res = run_search(evaluator, self.search, Budget(max_evals=self.budget, max_seconds=self.budget_seconds),
                             self.seed, run_options)
            best = settled_best(evaluator, res.history, res.best, rec.notes.append)
        finally:
            close = getattr(evaluator, "close", None)
            if callable(close):
                close()
        rec.run_id, rec.evaluations = res.run_id, len(res.history)
        for t in res.history:
            rec.statuses[t.status.value] = rec.statuses.get(t.status.value, 0) + 1
        wrong = [t for t in res.history if t.status is Status.WRONG_RESULT]
        if best is None or wrong:
            # a kernel that is wrong for some values of its parameters is wrong: whoever tunes it again
            # later could pick one of them
            rec.status, rec.reason = "rejected", failure_reason(res.history)
            if best is not None:
                rec.reason += (f" (at {json.dumps(jsonable(wrong[0].config))}; {len(wrong)} of {len(res.history)}"
                               f" measured configs wrong; its fastest correct config, "
                               f"{json.dumps(jsonable(best.config))}, ran {best.time_ms:.4g} ms against"
                               f" {cur.time_ms:.4g} ms)")
            return
        rec.best_config, rec.time_ms = dict(best.config), float(best.time_ms)  # type: ignore[arg-type]
        # Every correct rewrite is re-timed side by side, even one screened far slower: screening times
        # are minutes apart, and on a loaded machine the original once screened twice as fast as it ran
        # a minute later; a few rounds of the best config cost little next to the search.
        confirmed = self._confirm(spec, rec)
        if isinstance(confirmed, str):  # the re-run found it wrong (or failing): no speed makes up for that
            rec.status, rec.reason = "rejected", confirmed
            return
        paired, over_original = confirmed or (None, None)
        rec.speedup = paired.median if paired is not None else cur.time_ms / rec.time_ms
        if len(res.history) < space.count():
            rec.notes.append(f"{len(res.history)} of {space.count()} configs measured (budget): the others are"
                             " unchecked")
        needed = 1 / (1 - self.performance_threshold / 100.0)
        # paired rounds: the interval must say faster (a median alone accepted a no-op rewrite on noise)
        faster = (verdict(paired) == "faster" and paired.median >= needed) if paired is not None else (
            rec.speedup >= needed)
        if faster:
            rec.status = "accepted"
            # the figure the verdict used comes first: with paired rounds the median of per-round ratios,
            # which the medians of the two times need not agree with (a noisy round moves one median)
            rec.reason = (f"{rec.speedup:.3f}x faster, paired by round over {paired.n} rounds"
                          f" [{paired.lo:.3f}, {paired.hi:.3f}] (median times {rec.time_ms:.4g} ms against"
                          f" {cur.time_ms:.4g} ms)" if paired is not None else
                          f"{rec.speedup:.3f}x faster: {rec.time_ms:.4g} ms against {cur.time_ms:.4g} ms")
            self.current = KernelState(spec, dict(best.config), rec.time_ms, rec.id,
                                       over_original.median if over_original is not None else None, over_original)
            self.accepted.append(rec.id)
            self._accepted(spec, rec)
            if self.on_accept is not None:
                self.on_accept(rec)
        else:
            rec.status = "rejected"
            rec.reason = (f"not faster: {paired.median:.3f}x [{paired.lo:.3f}, {paired.hi:.3f}] paired by round over"
                          f" {paired.n} rounds, {verdict(paired)} (median times {rec.time_ms:.4g} ms against"
                          f" {cur.time_ms:.4g} ms)" if paired is not None else
                          f"not faster: {rec.time_ms:.4g} ms against {cur.time_ms:.4g} ms ({rec.speedup:.3f}x)")
            rec.reason += (f" (needs at least {self.performance_threshold:g}% less"
                           + (", its interval above 1x)" if paired is not None else ")"))

    def side_by_side(self, spec: KernelSpec, config: Mapping[str, Any],
                     rounds: int | None = None) -> dict[str, list[float]] | RoundFailure | None:
        """The original kernel, the current one and a candidate, each at its best config, timed in turns in
        the same worker for ``confirm_rounds`` rounds (or ``rounds``; the order rotating every round); each one's time in
        every round (ms), keyed ``original``, ``current`` (absent while the current kernel is the original)
        and ``candidate``.  None when off; a ``RoundFailure`` naming the turn that failed, whose status the
        verdict needs (a wrong result rejects the step, and so does the candidate's own timeout; the other
        kernels' timeouts do not).

        Why: screening times are taken minutes apart, and on a shared machine the load changes between
        two searches (a CI run once screened the PoCL test's faster tiled rewrite slower than the
        original); turns in one process see the same load, so a rewrite is judged on these, by the
        protocol the Triton judge uses (``kerntune.evaluate.protocol``): medians of the rounds, and a
        speedup that is the median of per-round ratios with its interval."""
        cur, orig = self.current, self.original_state
        if self.confirm_rounds == 0 or cur is None or orig is None:
            return None
        entrants = [("original", orig.spec, orig.config)]
        if cur is not orig:
            entrants.append(("current", cur.spec, cur.config))
        entrants.append(("candidate", spec, dict(config)))
        return side_by_side_rounds(self.session, entrants, rounds or self.confirm_rounds)

    def _confirm(self, spec: KernelSpec, rec: StepRecord) -> tuple[Estimate, Estimate] | str | None:
        """Replace the screening times the acceptance compares by side-by-side ones (``side_by_side``):
        the candidate's, the current kernel's and the original's all come from the same turns, so the
        step's speedup and the result's are ratios of times taken under the same load.  Returns the
        candidate's paired speedups over the current kernel and over the original; the reason to reject
        the step when a turn gave a wrong result (every turn is checked against the original's outputs:
        a rewrite wrong only sometimes, a race, can pass its screening) or the candidate failed to run or hung;
        None when judged on screening times (rounds off, or the original's or the current kernel's timeout, or
        an infrastructure failure)."""
        assert rec.best_config is not None and rec.time_ms is not None
        cur, orig = self.current, self.original_state
        assert cur is not None and orig is not None
        rounds = self.side_by_side(spec, rec.best_config)
        if rounds is None:
            return None
        if isinstance(rounds, RoundFailure):
            reason = rounds.rejection()
            if reason is not None:
                return reason
            rec.notes.append(rounds.fallback_note())
            return None
        cur_rounds = rounds.get("current", rounds["original"])
        paired = speedup(cur_rounds, rounds["candidate"])
        cand_ms, cur_ms = estimate(rounds["candidate"]).median, estimate(cur_rounds).median
        rec.notes.append(f"side by side ({self.confirm_rounds} rounds, one worker): {cand_ms:.4g} ms against"
                         f" {cur_ms:.4g} ms, {paired.median:.3f}x [{paired.lo:.3f}, {paired.hi:.3f}] paired by round"
                         f" (screened {rec.time_ms:.4g} ms against {cur.time_ms:.4g} ms)")
        more = self._more_rounds(paired)
        if more:  # inconclusive, though its median would pass: a verdict needs more rounds, not a coin toss
            extra = self.side_by_side(spec, rec.best_config, more)
            if isinstance(extra, RoundFailure):
                reason = extra.rejection()
                if reason is not None:
                    return reason
                what = extra.status.value if extra.status is not None else "no result"
                rec.notes.append(f"{more} more rounds failed ({what} of the {extra.entrant} in round"
                                 f" {extra.round + 1}): judged on the first {paired.n}")
            elif extra is not None:
                rounds = {k: v + extra[k] for k, v in rounds.items()}
                cur_rounds = rounds.get("current", rounds["original"])
                paired = speedup(cur_rounds, rounds["candidate"])
                cand_ms, cur_ms = estimate(rounds["candidate"]).median, estimate(cur_rounds).median
                rec.notes.append(f"re-timed {more} more rounds (inconclusive): {cand_ms:.4g} ms against {cur_ms:.4g}"
                                 f" ms, {paired.median:.3f}x [{paired.lo:.3f}, {paired.hi:.3f}] over {paired.n} rounds")
        orig.time_ms, cur.time_ms, rec.time_ms = estimate(rounds["original"]).median, cur_ms, cand_ms
        if "current" in rounds:  # the times were just replaced: the current kernel's speedup comes from the same rounds
            cur.over_original = speedup(rounds["original"], rounds["current"])
            cur.speedup = cur.over_original.median
        return paired, speedup(rounds["original"], rounds["candidate"])

    def _more_rounds(self, paired: Estimate) -> int:
        """Rounds to add when ``paired`` is inconclusive but its median clears the threshold (0: none): as many
        again, and at least up to ``MIN_VERDICT_ROUNDS`` in all."""
        needed = 1 / (1 - self.performance_threshold / 100.0)
        if verdict(paired) != "same within noise" or paired.median < needed:
            return 0
        return max(self.confirm_rounds, MIN_VERDICT_ROUNDS - self.confirm_rounds)

    def variant_space(self, spec: KernelSpec) -> Any:
        """The space a variant is searched in (Kernel Tuner: its tune_params, restrictions and the
        device's thread limit)."""
        return spec.space(block_restriction(self.session.max_threads, list(spec.tune_params)))

    def variant_evaluator(self, spec: KernelSpec, space: Any) -> Any:
        """The evaluator that measures a variant's configs (closed after its search when it has ``close``)."""
        return KernelTunerEvaluator(space, spec, self.session)

    def _accepted(self, spec: KernelSpec, rec: StepRecord) -> None:
        """Called when a variant becomes the current kernel (a backend may keep more about it)."""

    def _done(self, rec: StepRecord, t0: float) -> StepRecord:
        rec.seconds = time.perf_counter() - t0
        return self.record(rec)

