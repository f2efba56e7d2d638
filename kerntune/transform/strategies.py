"""Code-level strategies: which optimisation steps to ask the model for, in which order.

- ``OnePromptTuningStrategy``: one rewrite with everything in one prompt.
- ``ExplicitTuningStrategy``: a fixed list of ``TuningStep`` (the default library unless given);
  the model first judges whether a step makes sense (unless ``skip_evaluation``), and a step whose
  dependencies brought no gain is skipped.
- ``AutonomousTuningStrategy``: plan, take the next step, validate it (rules, then the model),
  optionally break it down, execute it, re-plan when the plan runs out.

A custom strategy subclasses ``TuningStrategy`` and implements ``run(ctx)`` with the
``TransformContext`` calls (``ctx.rewrite``, ``ctx.ask``, ``ctx.record``, ``ctx.current``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Sequence

from kerntune.errors import KerntuneError
from kerntune.llm.types import LLMError
from kerntune.transform.context import StepRecord, TransformContext
from kerntune.transform.steps import TuningStep, default_steps


class TuningStrategy(ABC):
    """A code-level strategy: ``run`` asks ``ctx`` for rewrites until it is done."""

    name = "custom"

    @abstractmethod
    def run(self, ctx: TransformContext) -> None:
        ...

    def describe(self) -> dict[str, Any]:
        return {"strategy": self.name}


class OnePromptTuningStrategy(TuningStrategy):
    name = "one-prompt"

    def run(self, ctx: TransformContext) -> None:
        ctx.rewrite("one-prompt", "Optimise the kernel in one rewrite and make its sizes tunable.",
                    template_name="transform_one_prompt.md", ask_restrictions=False,
                    description="one-prompt rewrite")


class ExplicitTuningStrategy(TuningStrategy):
    name = "explicit"

    def __init__(self, steps: Sequence[TuningStep] | None = None) -> None:
        self.steps = list(steps) if steps is not None else default_steps()
        ids = [s.id for s in self.steps]
        if len(set(ids)) != len(ids):
            raise KerntuneError("explicit strategy: step ids must be unique")

    def describe(self) -> dict[str, Any]:
        return {"strategy": self.name, "steps": [s.id for s in self.steps]}

    def run(self, ctx: TransformContext) -> None:
        for step in self.steps:
            title = step.title or step.text().splitlines()[0][:120]
            missing = [d for d in step.depends_on if d not in ctx.accepted]
            if missing:
                ctx.record(StepRecord(step.id, title, "skipped",
                                      f"depends on {missing[0]}, which brought no gain"))
                continue
            if not step.skip_evaluation:
                fields = ctx.fields()
                fields.update(step=step.text(), step_id=step.id)
                try:
                    verdict = ctx.ask("evaluate_step", "transform_evaluate_step.md", fields)
                except LLMError as exc:
                    verdict = {"apply": True, "reason": f"(no judgement: {exc}; applied)"}
                if not verdict["apply"]:
                    ctx.record(StepRecord(step.id, title, "skipped",
                                          f"the model judged it not worth doing: {verdict.get('reason', '')}"))
                    continue
            assert ctx.current is not None
            text, placed = step.render(ctx.current.spec.source.strip())
            ctx.rewrite(step.id, text, fixed=step.tune_params, kernel_in_instruction=placed, description=title)


class AutonomousTuningStrategy(TuningStrategy):
    """Plan-and-solve, one step per prompt (LLM Kernel Tuner's autonomous strategy).

    ``max_breakdowns`` bounds how many times a step (and the steps it was split into) may be split
    again; ``max_replanning`` how many times a new plan is asked for once the plan is used up;
    ``max_steps`` bounds the steps executed or judged in all.
    """

    name = "autonomous"

    def __init__(self, with_replanning: bool = True, breakdown_steps: bool = True, max_breakdowns: int = 2,
                 max_replanning: int = 3, max_steps: int = 20) -> None:
        self.with_replanning, self.breakdown_steps = with_replanning, breakdown_steps
        self.max_breakdowns, self.max_replanning, self.max_steps = max_breakdowns, max_replanning, max_steps

    def describe(self) -> dict[str, Any]:
        return {"strategy": self.name, "with_replanning": self.with_replanning,
                "breakdown_steps": self.breakdown_steps, "max_breakdowns": self.max_breakdowns,
                "max_replanning": self.max_replanning, "max_steps": self.max_steps}

    def _steps(self, ctx: TransformContext, kind: str, template: str, prefix: str) -> list[tuple[str, str, int]]:
        try:
            answer = ctx.ask(kind, template, ctx.fields())
        except LLMError as exc:
            ctx.record(StepRecord(prefix, kind, "failed", f"no usable {kind}: {exc}"))
            return []
        texts = [s.strip() for s in answer["steps"] if isinstance(s, str) and s.strip()]
        return [(f"{prefix}{i}", t, 0) for i, t in enumerate(texts, 1)]

    def run(self, ctx: TransformContext) -> None:
        queue = self._steps(ctx, "plan", "transform_plan.md", "s")
        ctx.on_event(f"plan: {len(queue)} step(s)")
        replans = done = 0
        while True:
            if not queue:
                if not self.with_replanning or replans >= self.max_replanning:
                    break
                replans += 1
                queue = self._steps(ctx, "replan", "transform_replan.md", f"r{replans}.")
                ctx.on_event(f"re-plan {replans}: {len(queue)} new step(s)")
                if not queue:
                    break
                continue
            if done >= self.max_steps:
                ctx.on_event(f"stopped after {done} steps (max_steps)")
                break
            sid, text, depth = queue.pop(0)
            done += 1
            if not self._valid(ctx, sid, text):
                continue
            if self.breakdown_steps and depth < self.max_breakdowns:
                parts = self._breakdown(ctx, text)
                if parts:
                    ctx.record(StepRecord(sid, text, "split", f"into {len(parts)} smaller steps"))
                    queue = [(f"{sid}.{i}", p, depth + 1) for i, p in enumerate(parts, 1)] + queue
                    continue
            ctx.rewrite(sid, text)

    def _valid(self, ctx: TransformContext, sid: str, text: str) -> bool:
        why = ctx.not_tuning(text)
        if why:
            ctx.record(StepRecord(sid, text, "invalid", f"not a tuning step: {why}"))
            return False
        fields = ctx.fields()
        fields["step"] = text
        try:
            verdict = ctx.ask("validate", "transform_validate.md", fields)
        except LLMError as exc:
            ctx.record(StepRecord(sid, text, "failed", f"no usable validation: {exc}"))
            return False
        if not verdict["valid"]:
            ctx.record(StepRecord(sid, text, "invalid", f"not a tuning step: {verdict.get('reason', '')}"))
            return False
        return True

    def _breakdown(self, ctx: TransformContext, text: str) -> list[str]:
        fields = ctx.fields()
        fields["step"] = text
        try:
            answer = ctx.ask("breakdown", "transform_breakdown.md", fields)
        except LLMError:
            return []
        parts = [s.strip() for s in answer.get("steps") or [] if isinstance(s, str) and s.strip()]
        return parts if answer.get("breakdown") and len(parts) > 1 else []


STRATEGIES = {"one-prompt": OnePromptTuningStrategy, "explicit": ExplicitTuningStrategy,
              "autonomous": AutonomousTuningStrategy}


def make_strategy(name: str | TuningStrategy, **options: Any) -> TuningStrategy:
    if isinstance(name, TuningStrategy):
        return name
    key = name.strip().lower().replace("_", "-")
    if key not in STRATEGIES:
        raise KerntuneError(f"unknown code-level strategy {name!r} (known: {', '.join(STRATEGIES)})")
    try:
        return STRATEGIES[key](**options)  # type: ignore[abstract]
    except TypeError as exc:
        raise KerntuneError(f"strategy {key}: {exc}") from None
