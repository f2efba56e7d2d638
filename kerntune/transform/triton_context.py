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
variant.  The acceptance rule (correct for every config measured, faster by the threshold) is shared.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from kerntune.errors import KerntuneError
from kerntune.evaluate.protocol import speedup as paired_speedup
from kerntune.llm.types import LLMError
from kerntune.run.search import RunOptions, run_search
from kerntune.space import Space, jsonable, space_from_dict
from kerntune.strategies import Budget
from kerntune.transform.context import KernelState, StepRecord, TransformContext
from kerntune.transform.judging import settled_best
from kerntune.transform.kernel import KernelSpec
from kerntune.transform.replies import strip_fences
from kerntune.transform.steps import triton_steps
from kerntune.transform.strategies import ExplicitTuningStrategy, TuningStrategy, make_strategy
from kerntune.transform.triton_backend import TritonSession, TritonVariant, variant_problems

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

    def __init__(self, session: TritonSession, llm: Any, fix_rounds: int = 1, **kwargs: Any) -> None:
        self.triton = session
        self.fix_rounds = fix_rounds
        self.variants: dict[str, TritonVariant] = {}
        original = session.original_variant()
        spec = spec_of(original, session.name, "original")
        self.variants[spec.hash] = original
        # a Triton variant is its own harness process: variants are judged on the protocol's screening
        # (with its runoff of close leaders), and the winner is re-timed against the original at the end
        # (TritonTransformer.retime_rounds), so the base class's side-by-side turns are off
        super().__init__(spec, session, llm, confirm_rounds=0, **kwargs)
        self.evaluations = 0

    # -- the original kernel file -------------------------------------------------------------------
    def measure_original(self) -> KernelState:
        """Tune the original file with the same evaluator and search as every variant (its harness)."""
        variant = self.variants[self.original.hash]
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
        variant = self.triton.write_variant(step_id, strip_fences(answer["code"]))
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
        self.variants[spec.hash] = variant
        rec.tune_params, rec.restrictions = spec.tune_params, spec.restrictions
        self._tune(spec, rec)
        self.evaluations += rec.evaluations
        return self._done(rec, t0)

    def variant_space(self, spec: KernelSpec) -> Space:
        return self.triton.space_of(self.variants[spec.hash])

    def variant_evaluator(self, spec: KernelSpec, space: Any) -> Any:
        return self.triton.evaluator(self.variants[spec.hash], space)


def combined_config(spaces: Sequence[Space], combined: Space, i: int, config: dict[str, Any]) -> dict[str, Any]:
    """Variant ``i``'s config as a config of the combined space (its missing parameters pinned)."""
    out = dict(combined.default)
    for p in combined.params:
        if p.name != "variant" and p.name not in spaces[i].names:
            out[p.name] = p.values()[0]
    out.update(config)
    out["variant"] = i
    return combined.canonical(out)


@dataclass
class TritonTransformResult:
    """The winner (a kernel file), how it compares with the original, and what it took (acceptance 4)."""

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
        lines = [f"speedup {self.speedup:.2f}x: {self.best_time_ms:.4g} ms against {self.original_time_ms:.4g} ms"
                 f" (strategy {self.strategy}, Triton on {self.device}, shape {'x'.join(map(str, self.shape))})",
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
    evaluations and ``budget_seconds``; a variant is accepted when correct for every config measured and
    ``performance_threshold`` percent faster than the best so far.  ``retime_rounds`` re-times the original's
    best config against the winner's in one worker (the combined file), for the speedup that is reported
    beside the search's own times (0: no re-timing).  Everything lands in ``workdir``.
    """

    def __init__(self, kernel_file: str | Path, shape: Sequence[int], strategy: str | TuningStrategy = "autonomous",
                 llm: Any = None, *, search: str = "auto", search_options: dict[str, Any] | None = None,
                 budget: int | None = 40, budget_seconds: float | None = None, performance_threshold: float = 0.5,
                 timeout_s: float = 120.0, memory_mb: int | None = None, rep_ms: int | None = None,
                 retime_rounds: int | None = None, store: Any = None, seed: int = 0, temperature: float = 0.2,
                 max_tokens: int = 16384, workdir: str | Path | None = None,
                 strategy_options: dict[str, Any] | None = None, fix_rounds: int = 1,
                 on_event: Callable[[str], None] | None = None) -> None:
        from kerntune.transform.transformer import make_client

        if isinstance(strategy, str) and strategy.strip().lower() == "explicit" and not strategy_options:
            strategy = ExplicitTuningStrategy(triton_steps())
        self.strategy = make_strategy(strategy, **dict(strategy_options or {}))
        self.llm = make_client(llm)
        self.kernel_file, self.shape = Path(kernel_file), tuple(int(s) for s in shape)
        if not self.kernel_file.is_file():
            raise KerntuneError(f"kernel file not found: {kernel_file}")
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.workdir = Path(workdir) if workdir else Path(".kerntune") / "transform" / f"{self.kernel_file.stem}-{stamp}"
        self.session_kwargs = dict(timeout_s=timeout_s, memory_mb=memory_mb, rep_ms=rep_ms)
        self.retime_rounds = retime_rounds
        self.ctx_kwargs = dict(search=search, budget=budget, budget_seconds=budget_seconds,
                               performance_threshold=performance_threshold, search_options=search_options,
                               store=store, seed=seed, temperature=temperature, max_tokens=max_tokens,
                               on_event=on_event, fix_rounds=fix_rounds)
        self.ctx: TritonTransformContext | None = None

    def run(self) -> TritonTransformResult:
        t0 = time.perf_counter()
        session = TritonSession(self.kernel_file, self.shape, workdir=self.workdir, **self.session_kwargs)  # type: ignore[arg-type]
        ctx = self.ctx = TritonTransformContext(session, self.llm, **self.ctx_kwargs)  # type: ignore[arg-type]
        ctx.measure_original()
        self.strategy.run(ctx)
        cur, orig = ctx.current, ctx.original_state
        assert cur is not None and orig is not None
        winner = ctx.variants[cur.spec.hash]
        combined, retimed = self._combine(ctx, session)
        result = TritonTransformResult(
            kernel_name=cur.spec.name, kernel_file=str(winner.path), kernel_source=winner.code, space=winner.space,
            best_config=dict(cur.config), best_time_ms=cur.time_ms, original_time_ms=orig.time_ms,
            speedup=ctx.speedup_over_original(), strategy=self.strategy.name, device=session.device_name,
            shape=list(self.shape), steps=list(ctx.records), accepted=list(ctx.accepted),
            combined_file=str(combined) if combined else None, retimed=retimed, llm_calls=ctx.llm_calls,
            llm_seconds=ctx.llm_seconds, evaluations=ctx.evaluations + (2 * retimed["rounds"] if retimed else 0),
            checks=session.checks, workdir=str(session.dir))
        result.wall_s = time.perf_counter() - t0
        (session.dir / "result.json").write_text(json.dumps(result.to_dict(), indent=1) + "\n")
        return result

    def _combine(self, ctx: TritonTransformContext, session: TritonSession) -> tuple[Path | None, dict[str, Any] | None]:
        """The original and every accepted variant as one kernel file with a ``variant`` parameter, and the
        winner re-timed against the original's best in it (same worker, interleaved rounds)."""
        from kerntune.transform.triton_harness import combined_space

        if not ctx.accepted:
            return None, None
        by_label = {v.label: v for v in ctx.variants.values()}
        variants = [ctx.variants[ctx.original.hash]] + [by_label[sid] for sid in ctx.accepted]
        labels = [v.label for v in variants]
        path = session.write_harness("combined.py", [v.path for v in variants], labels)
        if self.retime_rounds == 0:
            return path, None
        spaces = [space_from_dict(v.space) for v in variants]
        space = combined_space(spaces, labels)
        assert ctx.original_state is not None and ctx.current is not None
        win = labels.index(ctx.variants[ctx.current.spec.hash].label)
        configs = [combined_config(spaces, space, 0, ctx.original_state.config),
                   combined_config(spaces, space, win, ctx.current.config)]
        combo = TritonVariant("combined", path.read_text(), path, path, space.to_dict())
        evaluator = session.evaluator(combo, space)
        try:
            trials = evaluator.retime(configs, rounds=self.retime_rounds)
        finally:
            evaluator.close()
        if not all(t.ok for t in trials):
            bad = next(t for t in trials if not t.ok)
            ctx.on_event(f"re-timing failed: {bad.status.value}: {bad.error}")
            return path, None
        s = paired_speedup(trials[0].extra["rounds_ms"], trials[1].extra["rounds_ms"])
        ctx.on_event(f"re-timed: original {trials[0].time_ms:.4g} ms, winner {trials[1].time_ms:.4g} ms,"
                     f" {s.median:.3f}x [{s.lo:.3f}, {s.hi:.3f}] over {s.n} rounds")
        return path, {"rounds": s.n, "original_ms": trials[0].time_ms, "winner_ms": trials[1].time_ms,
                      "speedup": s.median, "speedup_ci": [s.lo, s.hi], "configs": [jsonable(c) for c in configs]}


def _device_text(dev: dict[str, Any]) -> str:
    """The GPU as the prompts show it: its name and what persistent and pipelined kernels size themselves by."""
    facts = [f"{dev['sms']} SMs" if dev.get("sms") else "",
             f"{dev['max_smem_per_block_kb']} KB shared memory per block" if dev.get("max_smem_per_block_kb") else "",
             f"{dev['l2_mb']} MB L2" if dev.get("l2_mb") else "",
             f"Triton {dev['triton']}" if dev.get("triton") else ""]
    extra = ", ".join(f for f in facts if f)
    return f"{dev.get('name', 'unknown GPU')}" + (f" ({extra})" if extra else "")
