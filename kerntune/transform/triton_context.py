"""``kerntune transform`` for Triton kernel files: the same strategies, a Triton backend underneath.

>>> from kerntune.transform.triton_context import TritonTransformer
>>> tt = TritonTransformer("examples/triton/matmul.py", (4096, 4096, 4096), strategy="explicit",
...                        llm="files:exchanges")
>>> result = tt.run()
>>> result.kernel_file, result.best_config, result.speedup, result.counts()

The strategies (one-prompt, explicit with the Triton step library, autonomous) call the same
``TransformContext`` methods as on the Kernel Tuner path; ``TritonTransformContext`` answers them with
Triton prompts, whole kernel files as the model's answers (the space is part of the file), the
``TritonSession`` checks and ``kerntune tune``'s evaluator and default search (``auto``) for every
variant.  The acceptance rule is shared: correct for every config measured, and faster by the threshold
in paired interleaved rounds against the current kernel (``side_by_side``: the evaluator's re-time in one
worker of a harness holding the files), the protocol of ``kerntune.evaluate.protocol``.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from kerntune.errors import KerntuneError
from kerntune.evaluate.protocol import estimate
from kerntune.evaluate.protocol import speedup as paired_speedup
from kerntune.llm.types import LLMError
from kerntune.run.search import RunOptions, run_search
from kerntune.space import Space, jsonable, space_from_dict
from kerntune.strategies import Budget
from kerntune.transform.context import MIN_VERDICT_ROUNDS, KernelState, StepRecord, TransformContext
from kerntune.transform.judging import RoundFailure, settled_best
from kerntune.transform.kernel import KernelSpec
from kerntune.transform.replies import strip_fences
from kerntune.transform.steps import triton_steps
from kerntune.transform.strategies import ExplicitTuningStrategy, TuningStrategy, make_strategy
from kerntune.transform.triton_backend import TritonSession, TritonVariant, variant_problems
from kerntune.transform.triton_rounds import claim_workdir, interleaved_rounds, write_atomically

_STAGES = {"load": "does not load", "space": "unusable space", "launch": "does not run", "compare": "incorrect",
           "timeout": "does not finish", "crash": "crashed its worker",
           "reference": "could not be checked (the original kernel file failed to give its reference)"}


def spec_of(variant: TritonVariant, name: str, description: str) -> KernelSpec:
    """A variant as the shared context keeps kernels: its file's text, its parameters' values and constraints."""
    space = space_from_dict(variant.space)
    return KernelSpec(name, variant.code, {p.name: [jsonable(v) for v in p.values()] for p in space.params},
                      [c.text for c in space.constraints], {}, description=description)


class TritonTransformContext(TransformContext):
    TEMPLATES = {"transform_system.md": "transform_triton_system.md",
                 "transform_execute.md": "transform_triton_execute.md",
                 "transform_one_prompt.md": "transform_triton_one_prompt.md",
                 "transform_plan.md": "transform_triton_plan.md",
                 "transform_replan.md": "transform_triton_replan.md",
                 "transform_validate.md": "transform_triton_validate.md"}
    SCHEMA_KINDS = {"execute": "triton_execute", "fix": "triton_execute"}
    #: rejections a model can fix from their message (a rewrite that is merely not faster is not retried)
    FIXABLE = ("incorrect", "does not load", "does not run", "crashed its worker", "does not finish",
               "unusable space", "does not compile", "no config ran", "the restrictions leave no valid")

    def __init__(self, session: TritonSession, llm: Any, fix_rounds: int = 1,
                 confirm_rounds: int = MIN_VERDICT_ROUNDS, **kwargs: Any) -> None:
        self.triton = session
        self.fix_rounds = fix_rounds
        #: every variant by its label (the step id): an answer identical to an earlier one is a variant of
        #: its own (keyed by code, a later copy once replaced an accepted variant and the run crashed at the end)
        self.variants: dict[str, TritonVariant] = {}
        self._of_spec: list[tuple[KernelSpec, TritonVariant]] = []
        #: the kernel state each accepted step made current (the final re-time falls back on them)
        self.states: dict[str, KernelState] = {}
        original = session.original_variant()
        spec = spec_of(original, session.name, "original")
        self._register(spec, original)
        # a correct variant is judged against the current kernel in paired interleaved rounds
        # (``side_by_side``: one worker of a harness holding both), as on the Kernel Tuner path: on its
        # screening time alone a no-op rewrite was accepted on noise
        super().__init__(spec, session, llm, confirm_rounds=confirm_rounds, **kwargs)
        self.evaluations = 0

    def _register(self, spec: KernelSpec, variant: TritonVariant) -> None:
        self.variants[variant.label] = variant
        self._of_spec.append((spec, variant))

    def variant_for(self, spec: KernelSpec) -> TritonVariant:
        """The kernel file a spec was made from (by identity: two answers may hold the same code)."""
        return next(v for s, v in reversed(self._of_spec) if s is spec)

    # -- the original kernel file -------------------------------------------------------------------
    def measure_original(self) -> KernelState:
        """Tune the original file with the same evaluator and search as every variant (its harness)."""
        variant = self.variant_for(self.original)
        space = self.triton.space_of(variant)
        evaluator = self.triton.evaluator(variant, space)
        if not self.triton.device_name.startswith("CPU"):
            self.triton.device_name = _device_text(evaluator.device())
        try:
            res = run_search(evaluator, self.search, Budget(max_evals=self.budget, max_seconds=self.budget_seconds),
                             self.seed, RunOptions(store=self.store, label="transform original",
                                                   strategy_options=self.search_options))
            best = settled_best(evaluator, res.history, res.best, self.on_event)
        finally:
            evaluator.close()
        self.evaluations += len(res.history)
        if best is None:
            why = next((t.error for t in res.history if t.error), "no result")
            raise KerntuneError(f"the original kernel file does not run: {why}")
        self.original_state = self.current = KernelState(self.original, dict(best.config), float(best.time_ms))  # type: ignore[arg-type]
        self.on_event(f"original kernel: {best.time_ms:.4g} ms at {json.dumps(jsonable(best.config))}"
                      f" ({len(res.history)} evaluations)")
        return self.current

    # -- prompts -----------------------------------------------------------------------------------------
    def fields(self, spec: KernelSpec | None = None) -> dict[str, str]:
        cur = self.current
        spec = spec or (cur.spec if cur else self.original)
        speedup = (self.original_state.time_ms / cur.time_ms) if cur and self.original_state else 1.0
        params = "; ".join(f"{n} in {json.dumps(v)}" for n, v in spec.tune_params.items()) or "none"
        return {
            "language": "Triton", "kernel_name": spec.name, "kernel_string": spec.source.strip(), "code_tag": "python",
            "problem_size": "x".join(map(str, self.triton.shape)),
            "arguments": self.triton.description or "see make_inputs", "device": self.triton.device_name,
            "tune_params": params, "restrictions": json.dumps(spec.restrictions) if spec.restrictions else "none",
            "grid_div": "set by launch", "best_config": json.dumps(jsonable(cur.config)) if cur else "not measured",
            "best_time": f"{cur.time_ms:.4g} ms" if cur else "not measured", "speedup": f"{speedup:.2f}x",
            "history": self.history_text(),
        }

    # -- one step -----------------------------------------------------------------------------------------
    def rewrite(self, step_id: str, instruction: str, *, template_name: str = "transform_execute.md",
                fixed: Any = None, kernel_in_instruction: bool = False, ask_restrictions: bool = True,
                description: str | None = None) -> StepRecord:
        """The model rewrites the kernel file; the variant is checked in a worker, then tuned and judged.

        A rewrite rejected for a reason the model can act on (wrong for some configs, does not load or
        compile, crashes) goes back to it with that reason, ``fix_rounds`` times at most, each fix a step
        of its own (``STEP.fix1``...): a strong model's first Hopper rewrite can be right for most of its
        space and wrong for a corner it could not test without the GPU."""
        assert self.current is not None, "measure_original() first"
        cur = self.current
        fields = self.fields()
        fields["step"] = instruction.strip()
        fields["kernel_section"] = "" if kernel_in_instruction else (
            f"## Current kernel file (`{cur.spec.name}`)\n\n```python\n{fields['kernel_string']}\n```\n")
        fields["fixed_params"] = ("- This step's parameters, with exactly these values: " + json.dumps(dict(fixed))
                                  + "\n") if fixed else ""
        title = description or instruction.strip().splitlines()[0][:300]
        rec = self._attempt(step_id, title, "execute", template_name, fields, fixed)
        for k in range(1, self.fix_rounds + 1):
            if rec.status != "rejected" or rec.code is None or not (rec.reason or "").startswith(self.FIXABLE):
                break
            fix = dict(self.fields(), rejected_code=rec.code, rejection=rec.reason, step=fields["step"],
                       fixed_params=fields["fixed_params"])
            rec = self._attempt(f"{step_id}.fix{k}", f"fix of {step_id}: {rec.reason[:200]}", "fix",
                                "transform_triton_fix.md", fix, fixed)
        return rec

    def _attempt(self, step_id: str, title: str, kind: str, template_name: str, fields: dict[str, str],
                 fixed: Any) -> StepRecord:
        """One model answer: the variant written, checked, tuned and judged, as one step record."""
        t0 = time.perf_counter()
        cur = self.current
        assert cur is not None
        rec = StepRecord(step_id, title, "failed")
        try:
            answer = self.ask(kind, template_name, fields,
                              validate=lambda a: variant_problems(strip_fences(a["code"])) if isinstance(
                                  a.get("code"), str) else [])
        except LLMError as exc:  # no usable file after the repair round
            rec.reason = f"the model gave no usable kernel file: {exc}"
            return self._done(rec, t0)
        code = strip_fences(answer["code"])
        if code == self.variant_for(cur.spec).code:  # nothing to tune, and nothing to judge but noise
            rec.code, rec.status = code, "rejected"
            rec.reason = "no change: the answer is the current kernel file, byte for byte"
            return self._done(rec, t0)
        label = step_id if step_id not in self.variants else f"{step_id}.{len(self.variants)}"
        variant = self.triton.write_variant(label, code)
        rec.code = variant.code
        verdict = self.triton.check(variant)
        if not verdict.get("ok"):
            what = _STAGES.get(str(verdict.get("stage")), "failed its check")
            rec.status, rec.reason = "rejected", f"{what}: {verdict.get('error') or 'no reason given'}"[:1500]
            return self._done(rec, t0)
        spec = spec_of(variant, cur.spec.name, rec.description)
        missing = [n for n in (fixed or {}) if n not in spec.tune_params]
        if missing:
            rec.notes.append(f"the step's parameter {missing[0]} is not in the new space")
        self._register(spec, variant)
        rec.tune_params, rec.restrictions = spec.tune_params, spec.restrictions
        self._tune(spec, rec)
        self.evaluations += rec.evaluations
        return self._done(rec, t0)

    def variant_space(self, spec: KernelSpec) -> Space:
        return self.triton.space_of(self.variant_for(spec))

    def variant_evaluator(self, spec: KernelSpec, space: Any) -> Any:
        return self.triton.evaluator(self.variant_for(spec), space)

    def side_by_side(self, spec: KernelSpec, config: Mapping[str, Any],
                     rounds: int | None = None) -> dict[str, list[float]] | RoundFailure | None:
        """The original, the current kernel (when it is not the original) and the candidate, each at its
        best config, timed in turns by the evaluator's re-time in one worker of a harness that holds all
        three files (``WORKDIR/variants/pair_STEP.py``), the order rotating every round; the shared
        acceptance (``TransformContext._confirm``) takes the paired verdict from these rounds."""
        cur, orig = self.current, self.original_state
        if self.confirm_rounds == 0 or cur is None or orig is None:
            return None
        states = [("original", orig.spec, orig.config)] + ([("current", cur.spec, cur.config)] if cur is not orig
                                                           else []) + [("candidate", spec, dict(config))]
        variants = [self.variant_for(s) for _, s, _ in states]
        labels = [v.label for v in variants]
        harness = self.triton.write_harness(f"pair_{re.sub(r'[^A-Za-z0-9_]', '_', labels[-1])}.py",
                                            [v.path for v in variants], labels)
        times, _ = interleaved_rounds(self.triton, harness, [v.space for v in variants], labels,
                                      [(name, i, cfg) for i, (name, _, cfg) in enumerate(states)],
                                      rounds or self.confirm_rounds)
        return times

    def _accepted(self, spec: KernelSpec, rec: StepRecord) -> None:
        assert self.current is not None
        self.states[rec.id] = self.current

    def fall_back(self, step_id: str, reason: str) -> None:
        """Take back the acceptance of ``step_id`` (the current kernel): its record says why, and the
        kernel accepted before it (or the original) is current again."""
        rec = next(r for r in self.records if r.id == step_id)
        rec.status, rec.reason = "rejected", reason
        self.accepted.remove(step_id)
        self.states.pop(step_id, None)
        self.current = self.states[self.accepted[-1]] if self.accepted else self.original_state
        self.on_event(f"step {step_id}: rejected — {reason}")


@dataclass
class TritonTransformResult:
    """The winner (a kernel file), how it compares with the original, and what it took (acceptance 4).

    ``speedup`` is the final re-time's (the winner and the original in turns in one worker: the median of
    per-round ratios, its 95% interval ``speedup_lo``/``speedup_hi`` over ``speedup_rounds`` rounds), else
    the last paired verdict's over the original, else (no rounds) the ratio of the two times."""

    kernel_name: str
    kernel_file: str
    kernel_source: str
    space: dict[str, Any]
    best_config: dict[str, Any]
    best_time_ms: float
    original_time_ms: float
    speedup: float
    strategy: str
    device: str
    shape: list[int]
    steps: list[StepRecord] = field(default_factory=list)
    accepted: list[str] = field(default_factory=list)
    combined_file: str | None = None
    retimed: dict[str, Any] | None = None
    llm_calls: int = 0
    llm_seconds: float = 0.0
    evaluations: int = 0
    checks: int = 0
    wall_s: float = 0.0
    workdir: str = ""
    backend: str = "triton"
    speedup_lo: float | None = None
    speedup_hi: float | None = None
    speedup_rounds: int = 0
    #: False in a checkpoint written after an accepted step, while the run goes on
    finished: bool = True

    def counts(self) -> dict[str, Any]:
        rewrites = [s for s in self.steps if s.code is not None or s.status in ("accepted", "rejected")]
        return {"model_calls": self.llm_calls, "rewrites": len(rewrites),
                "accepted": sum(s.status == "accepted" for s in rewrites),
                "rejected": sum(s.status == "rejected" for s in rewrites),
                "evaluations": self.evaluations, "seconds": round(self.wall_s, 1),
                "model_seconds": round(self.llm_seconds, 1)}

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "steps"}
        out["best_config"] = jsonable(self.best_config)
        out["steps"] = [s.to_dict() for s in self.steps]
        out["counts"] = self.counts()
        return out

    def summary(self) -> str:
        c = self.counts()
        paired = (f" [{self.speedup_lo:.2f}, {self.speedup_hi:.2f}] paired by round over {self.speedup_rounds} rounds"
                  if self.speedup_rounds else "")
        lines = [f"speedup {self.speedup:.2f}x{paired}: {self.best_time_ms:.4g} ms against {self.original_time_ms:.4g}"
                 f" ms (strategy {self.strategy}, Triton on {self.device}, shape {'x'.join(map(str, self.shape))})",
                 f"it took {c['model_calls']} model calls, {c['rewrites']} rewrites ({c['accepted']} accepted,"
                 f" {c['rejected']} rejected), {c['evaluations']} evaluations and {c['seconds']:g} s",
                 f"kernel file: {self.kernel_file}", f"best configuration: {json.dumps(jsonable(self.best_config))}"]
        if self.retimed:
            lines.append(f"re-timed side by side ({self.retimed['rounds']} rounds, one worker):"
                         f" {self.retimed['speedup']:.3f}x")
        if self.combined_file:
            lines.append(f"all variants as one space (parameter `variant`): {self.combined_file}")
        for s in self.steps:
            speed = f" {s.speedup:.2f}x" if s.speedup else ""
            lines.append(f"  step {s.id} [{s.status}{speed}] {s.description[:90]}"
                         + (f" — {s.reason[:200]}" if s.reason else ""))
        return "\n".join(lines)


class TritonTransformer:
    """Rewrite a Triton kernel file with a code-level strategy; every rewrite is checked and tuned.

    ``search`` (default ``auto``, ``kerntune tune``'s default) searches each variant's space under ``budget``
    evaluations and ``budget_seconds``; a correct variant is then timed against the current kernel in
    ``confirm_rounds`` paired interleaved rounds (default: ``retime_rounds`` when given, else
    ``MIN_VERDICT_ROUNDS``; more when inconclusive) and accepted when they say "faster" by
    ``performance_threshold`` percent (0 rounds: on its screening time).  ``retime_rounds`` re-times the
    winner's best config against the original's in one worker at the end (the combined file; None: the
    protocol's rounds, 0: none): a winner that gives a wrong result there (or fails to run) is rejected and
    the kernel accepted before it is re-timed instead.  Everything lands in ``workdir`` (a fresh folder; a
    given one that holds another run's files gets a fresh subfolder); ``WORKDIR/result.json`` is written,
    and ``checkpoint`` called with the result so far, after every accepted step and at the end.
    """

    def __init__(self, kernel_file: str | Path, shape: Sequence[int], strategy: str | TuningStrategy = "autonomous",
                 llm: Any = None, *, search: str = "auto", search_options: dict[str, Any] | None = None,
                 budget: int | None = 40, budget_seconds: float | None = None, performance_threshold: float = 0.5,
                 timeout_s: float = 120.0, memory_mb: int | None = None, rep_ms: int | None = None,
                 retime_rounds: int | None = None, confirm_rounds: int | None = None, store: Any = None,
                 seed: int = 0, temperature: float = 0.2, max_tokens: int = 16384, workdir: str | Path | None = None,
                 strategy_options: dict[str, Any] | None = None, fix_rounds: int = 1,
                 on_event: Callable[[str], None] | None = None,
                 checkpoint: Callable[[TritonTransformResult], None] | None = None) -> None:
        from kerntune.transform.transformer import make_client

        if isinstance(strategy, str) and strategy.strip().lower() == "explicit" and not strategy_options:
            strategy = ExplicitTuningStrategy(triton_steps())
        self.strategy = make_strategy(strategy, **dict(strategy_options or {}))
        self.llm = make_client(llm)
        self.kernel_file, self.shape = Path(kernel_file), tuple(int(s) for s in shape)
        if not self.kernel_file.is_file():
            raise KerntuneError(f"kernel file not found: {kernel_file}")
        self.workdir: Path | None = Path(workdir) if workdir else None  # claimed by run()
        self.session_kwargs = dict(timeout_s=timeout_s, memory_mb=memory_mb, rep_ms=rep_ms)
        self.retime_rounds = retime_rounds
        if confirm_rounds is None:
            confirm_rounds = MIN_VERDICT_ROUNDS if retime_rounds is None else retime_rounds
        self.ctx_kwargs = dict(search=search, budget=budget, budget_seconds=budget_seconds,
                               performance_threshold=performance_threshold, search_options=search_options,
                               store=store, seed=seed, temperature=temperature, max_tokens=max_tokens,
                               on_event=on_event, fix_rounds=fix_rounds, confirm_rounds=confirm_rounds)
        self.on_event = on_event
        self.checkpoint = checkpoint
        self.ctx: TritonTransformContext | None = None

    def run(self) -> TritonTransformResult:
        t0 = time.perf_counter()
        self.workdir, note = claim_workdir(self.workdir, self.kernel_file.stem)
        if note and self.on_event is not None:
            self.on_event(note)
        session = TritonSession(self.kernel_file, self.shape, workdir=self.workdir, **self.session_kwargs)  # type: ignore[arg-type]
        ctx = self.ctx = TritonTransformContext(session, self.llm, **self.ctx_kwargs)  # type: ignore[arg-type]
        ctx.measure_original()
        ctx.on_accept = lambda rec: self._save(self._result(ctx, session, t0, finished=False, pending=rec))
        self.strategy.run(ctx)
        combined, retimed = self._combine(ctx, session)
        result = self._result(ctx, session, t0, combined, retimed)
        self._save(result)
        return result

    def _save(self, result: TritonTransformResult) -> None:
        """``WORKDIR/result.json`` (atomically) and the caller's checkpoint: a run killed after an accepted
        step used to lose it (written only at the end)."""
        write_atomically(Path(result.workdir) / "result.json", json.dumps(result.to_dict(), indent=1) + "\n")
        if self.checkpoint is not None:
            self.checkpoint(result)

    def _result(self, ctx: TritonTransformContext, session: TritonSession, t0: float, combined: Path | None = None,
                retimed: dict[str, Any] | None = None, finished: bool = True,
                pending: StepRecord | None = None) -> TritonTransformResult:
        """The result so far: the current kernel file, its best config and its speedup over the original
        (the final re-time's where there is one, else the last paired verdict's, with their intervals);
        ``pending``: the step just accepted, not yet among the records."""
        cur, orig = ctx.current, ctx.original_state
        assert cur is not None and orig is not None
        winner = ctx.variant_for(cur.spec)
        best_ms, orig_ms, speed, lo, hi, n = cur.time_ms, orig.time_ms, ctx.speedup_over_original(), None, None, 0
        if retimed:
            best_ms, orig_ms, speed = retimed["winner_ms"], retimed["original_ms"], retimed["speedup"]
            (lo, hi), n = retimed["speedup_ci"], retimed["rounds"]
        elif cur is not orig and cur.over_original is not None:
            est = cur.over_original
            lo, hi, n = est.lo, est.hi, est.n
        result = TritonTransformResult(
            kernel_name=cur.spec.name, kernel_file=str(winner.path), kernel_source=winner.code, space=winner.space,
            best_config=dict(cur.config), best_time_ms=best_ms, original_time_ms=orig_ms, speedup=speed,
            strategy=self.strategy.name, device=session.device_name, shape=list(self.shape),
            steps=list(ctx.records) + ([pending] if pending is not None and all(r is not pending for r in ctx.records) else []),
            accepted=list(ctx.accepted), combined_file=str(combined) if combined else None, retimed=retimed,
            llm_calls=ctx.llm_calls, llm_seconds=ctx.llm_seconds,
            evaluations=ctx.evaluations + (2 * retimed["rounds"] if retimed else 0), checks=session.checks,
            workdir=str(session.dir), speedup_lo=lo, speedup_hi=hi, speedup_rounds=n, finished=finished)
        result.wall_s = time.perf_counter() - t0
        return result

    def _combine(self, ctx: TritonTransformContext, session: TritonSession) -> tuple[Path | None, dict[str, Any] | None]:
        """The original and every accepted variant as one kernel file with a ``variant`` parameter, and the
        winner re-timed against the original's best in it (same worker, interleaved rounds).

        A winner whose re-time gives a wrong result (any turn: the two share a process) or fails to run is
        no winner: its step is rejected and the kernel accepted before it (or the original) is re-timed
        instead; so is a winner that hangs in its own turn (``RoundFailure.rejection``).  A re-time that
        failed otherwise (the original's timeout, the worker) is logged and leaves no re-time in the result,
        as before; a wrong one used to be only logged too, and a kernel that returned a cached output won at
        10341x."""
        while ctx.accepted:
            variants = [ctx.variant_for(ctx.original)] + [ctx.variant_for(ctx.states[sid].spec)
                                                          for sid in ctx.accepted]
            labels = [v.label for v in variants]
            path = session.write_harness("combined.py", [v.path for v in variants], labels)
            if self.retime_rounds == 0:
                return path, None
            cur, orig = ctx.current, ctx.original_state
            assert orig is not None and cur is not None
            win = labels.index(ctx.variant_for(cur.spec).label)
            times, configs = interleaved_rounds(session, path, [v.space for v in variants], labels,
                                                [("original", 0, orig.config), ("candidate", win, cur.config)],
                                                self.retime_rounds)
            if isinstance(times, RoundFailure):
                reason = times.rejection()
                if reason is None:
                    what = times.status.value if times.status is not None else "no result"
                    why = times.error or (times.trial.error if times.trial is not None else "") or ""
                    ctx.on_event(f"re-timing failed: {what} of the {times.entrant}: {why}"[:500])
                    return path, None
                ctx.fall_back(cur.step, f"rejected when re-timed against the original at the end: {reason}")
                path.unlink(missing_ok=True)  # written again without it while a variant is left
                continue
            s = paired_speedup(times["original"], times["candidate"])
            orig_ms, win_ms = estimate(times["original"]).median, estimate(times["candidate"]).median
            ctx.on_event(f"re-timed: original {orig_ms:.4g} ms, winner {win_ms:.4g} ms,"
                         f" {s.median:.3f}x [{s.lo:.3f}, {s.hi:.3f}] over {s.n} rounds")
            return path, {"rounds": s.n, "original_ms": orig_ms, "winner_ms": win_ms, "speedup": s.median,
                          "speedup_ci": [s.lo, s.hi], "configs": [jsonable(c) for c in configs]}
        return None, None


def _device_text(dev: dict[str, Any]) -> str:
    """The GPU as the prompts show it: its name and what persistent and pipelined kernels size themselves by."""
    facts = [f"{dev['sms']} SMs" if dev.get("sms") else "",
             f"{dev['max_smem_per_block_kb']} KB shared memory per block" if dev.get("max_smem_per_block_kb") else "",
             f"{dev['l2_mb']} MB L2" if dev.get("l2_mb") else "",
             f"Triton {dev['triton']}" if dev.get("triton") else ""]
    extra = ", ".join(f for f in facts if f)
    return f"{dev.get('name', 'unknown GPU')}" + (f" ({extra})" if extra else "")
