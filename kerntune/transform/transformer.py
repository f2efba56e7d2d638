"""``KernelTransformer``: a kernel in, a faster tunable kernel out.

>>> from kerntune.transform import KernelTransformer
>>> kt = KernelTransformer(open("matmul.cl").read(), strategy="autonomous", llm="openai:gpt-4.1",
...                        backend="opencl", problem_size=(256, 256), args_generator="make_args.py",
...                        tune_params={"block_size_x": [16], "block_size_y": [16]})
>>> result = kt.run()
>>> result.kernel_source, result.tune_params, result.restrictions, result.best_config, result.speedup
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from kerntune.errors import KerntuneError
from kerntune.llm.client import LLMClient
from kerntune.llm.providers.base import Provider
from kerntune.llm.types import LLMError
from kerntune.space import jsonable
from kerntune.transform.context import MIN_VERDICT_ROUNDS, StepRecord, TransformContext
from kerntune.transform.kernel import KernelSpec, kernel_names, parse_problem_size, tune_params_problem
from kerntune.transform.kt_backend import KernelTunerSession
from kerntune.transform.replies import strip_fences
from kerntune.transform.strategies import TuningStrategy, make_strategy


@dataclass
class TransformResult:
    kernel_name: str
    kernel_source: str
    tune_params: dict[str, list[Any]]
    restrictions: list[str]
    grid_div: dict[str, list[str]]
    best_config: dict[str, Any]
    best_time_ms: float
    original_time_ms: float
    speedup: float
    strategy: str
    backend: str
    device: str
    problem_size: list[int]
    steps: list[StepRecord] = field(default_factory=list)
    accepted: list[str] = field(default_factory=list)
    args_source: str = ""
    llm_calls: int = 0
    llm_seconds: float = 0.0
    wall_s: float = 0.0
    #: the paired estimate ``speedup`` is the median of: its 95% interval and rounds (None, 0: the ratio of
    #: the two times, without rounds side by side)
    speedup_lo: float | None = None
    speedup_hi: float | None = None
    speedup_rounds: int = 0
    #: False in a checkpoint written after an accepted step, while the run goes on
    finished: bool = True

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "steps"}
        out["best_config"] = jsonable(self.best_config)
        out["steps"] = [s.to_dict() for s in self.steps]
        return out

    def kernel_tuner_kwargs(self) -> dict[str, Any]:
        """What to pass to ``kernel_tuner.tune_kernel`` to tune the result again.

        Restrictions and grid divisors are the model's expression strings: Kernel Tuner
        evaluates strings with Python's ``eval``, so review them first (kerntune itself only ever
        interprets them with its safe expression evaluator).
        """
        kw: dict[str, Any] = {"kernel_name": self.kernel_name, "kernel_source": self.kernel_source,
                              "tune_params": dict(self.tune_params), "restrictions": list(self.restrictions)}
        for axis, exprs in self.grid_div.items():
            kw[f"grid_div_{axis}"] = list(exprs)
        return kw

    def summary(self) -> str:
        if self.speedup_rounds:  # the figure and its interval first; the times are the same rounds' medians
            head = (f"speedup {self.speedup:.2f}x [{self.speedup_lo:.2f}, {self.speedup_hi:.2f}] paired by round over"
                    f" {self.speedup_rounds} rounds (median times {self.best_time_ms:.4g} ms against"
                    f" {self.original_time_ms:.4g} ms)")
        else:
            head = f"speedup {self.speedup:.2f}x: {self.best_time_ms:.4g} ms against {self.original_time_ms:.4g} ms"
        lines = [f"{head} (strategy {self.strategy}, {self.backend} on {self.device})",
                 f"tunable parameters: {json.dumps(self.tune_params)}",
                 f"restrictions: {json.dumps(self.restrictions)}",
                 f"best configuration: {json.dumps(jsonable(self.best_config))}"]
        if self.grid_div:
            lines.append(f"grid divisors: {json.dumps(self.grid_div)}")
        for s in self.steps:
            speed = f" {s.speedup:.2f}x" if s.speedup else ""
            lines.append(f"  step {s.id} [{s.status}{speed}] {s.description[:90]}"
                         + (f" — {s.reason[:160]}" if s.reason else ""))
        return "\n".join(lines)


def make_client(llm: Any, **kwargs: Any) -> Any:
    """An LLMClient from a client, a Provider or a ``--llm`` spec string."""
    if isinstance(llm, str):
        return LLMClient.from_spec(llm, **kwargs)
    if isinstance(llm, Provider):
        return LLMClient(llm, **kwargs)
    if llm is None or not hasattr(llm, "complete"):
        raise KerntuneError("KernelTransformer needs a model: an LLMClient, a Provider or a spec such as 'local:'")
    return llm


class KernelTransformer:
    """Rewrite ``kernel_source`` with a code-level strategy, tuning every rewrite through Kernel Tuner.

    Inputs come from ``args`` (numpy arrays and numpy scalars), from ``args_generator`` (a Python file
    defining ``make_args(problem_size)``, run in the worker process) or, with neither, from a generator
    the model writes (also run only in the worker).  ``tune_params``/``restrictions``/``grid_div``
    describe how the original kernel is launched (Kernel Tuner's conventions).  Every rewrite's space is
    searched with the kerntune strategy ``search`` (default exhaustive) under ``budget`` evaluations
    and ``budget_seconds``; a rewrite is accepted when correct and ``performance_threshold`` percent
    faster than the best kernel so far, timed side by side with it (and the original) in turns for
    ``confirm_rounds`` rounds (0: on the screening times alone).  Trials go to ``store`` (a kerntune
    Store) when given.  ``checkpoint``, when given, is called with the result so far after every accepted
    step, so that a run killed later keeps what it had accepted.
    """

    def __init__(self, kernel_source: str, strategy: str | TuningStrategy = "autonomous", llm: Any = None,
                 backend: str = "opencl", *, problem_size: Sequence[int] | str | int = (1024,),
                 kernel_name: str | None = None, args: Sequence[Any] | None = None,
                 args_generator: str | Path | None = None, tune_params: Mapping[str, Sequence[Any]] | None = None,
                 restrictions: Sequence[str] = (), grid_div: Mapping[str, Sequence[str]] | None = None,
                 search: str = "exhaustive", search_options: Mapping[str, Any] | None = None,
                 budget: int | None = 40, budget_seconds: float | None = None, performance_threshold: float = 0.5,
                 iterations: int = 7, timeout_s: float = 60.0, memory_mb: int | None = None,
                 tolerances: Mapping[str, Sequence[float]] | None = None, store: Any = None, seed: int = 0,
                 temperature: float = 0.2, max_tokens: int = 8192, workdir: str | Path | None = None,
                 platform: int = 0, device: int = 0,
                 compiler_options: Sequence[str] = (), strategy_options: Mapping[str, Any] | None = None,
                 confirm_rounds: int = MIN_VERDICT_ROUNDS, on_event: Callable[[str], None] | None = None,
                 checkpoint: Callable[[TransformResult], None] | None = None) -> None:
        self.strategy = make_strategy(strategy, **dict(strategy_options or {}))
        self.llm = make_client(llm)
        self.session_kwargs = dict(workdir=workdir, iterations=iterations, timeout_s=timeout_s, memory_mb=memory_mb,
                                   platform=platform, device=device, compiler_options=compiler_options,
                                   tolerances=tolerances)
        self.backend = backend
        self.problem_size = parse_problem_size(problem_size)
        from kerntune.transform.kernel import lang_of

        lang = lang_of(backend)
        names = kernel_names(kernel_source, lang)
        if kernel_name is None:
            if not names:
                raise KerntuneError(f"no {lang} kernel found in the source; pass kernel_name")
            kernel_name = names[0]
        elif kernel_name not in names:
            raise KerntuneError(f"kernel {kernel_name!r} not found in the source (found: {', '.join(names) or 'none'})")
        # refused before anything runs: Kernel Tuner defines each parameter as its value's text, and a value it
        # cannot use was dropped from every rewrite's space (the original's and a step's fixed values are kept)
        problem = tune_params_problem(tune_params or {})
        if problem is not None:
            raise KerntuneError(f"tune_params: {problem}")
        for step in getattr(self.strategy, "steps", None) or []:
            problem = tune_params_problem(getattr(step, "tune_params", None) or {})
            if problem is not None:
                raise KerntuneError(f"step {step.id}: tune_params: {problem}")
        self.original = KernelSpec(kernel_name, kernel_source, dict(tune_params or {}), list(restrictions),
                                   {k: list(v) for k, v in (grid_div or {}).items()}, description="original")
        self.args, self.args_generator = args, args_generator
        if args_generator is not None and not Path(args_generator).is_file():
            raise KerntuneError(f"args generator not found: {args_generator}")
        self.ctx_kwargs = dict(search=search, budget=budget, budget_seconds=budget_seconds,
                               performance_threshold=performance_threshold, search_options=search_options,
                               store=store, seed=seed, temperature=temperature, max_tokens=max_tokens,
                               confirm_rounds=confirm_rounds, on_event=on_event)
        self.ctx: TransformContext | None = None
        self.checkpoint = checkpoint

    def run(self) -> TransformResult:
        t0 = time.perf_counter()
        session = KernelTunerSession(self.backend, self.problem_size, **self.session_kwargs)  # type: ignore[arg-type]
        try:
            ctx = self.ctx = TransformContext(self.original, session, self.llm, **self.ctx_kwargs)  # type: ignore[arg-type]
            source = self._inputs(ctx, session)
            ctx.measure_original()
            if self.checkpoint is not None:
                checkpoint = self.checkpoint
                ctx.on_accept = lambda rec: checkpoint(self._result(ctx, session, source, t0, finished=False))
            self.strategy.run(ctx)
        finally:
            session.close()
        return self._result(ctx, session, source, t0)

    def _result(self, ctx: TransformContext, session: KernelTunerSession, source: str, t0: float,
                finished: bool = True) -> TransformResult:
        """The result so far: the current kernel, its times and its paired speedup over the original."""
        cur, orig = ctx.current, ctx.original_state
        assert cur is not None and orig is not None
        est = cur.over_original if cur is not orig else None
        return TransformResult(
            kernel_name=cur.spec.name, kernel_source=cur.spec.source, tune_params=dict(cur.spec.tune_params),
            restrictions=list(cur.spec.restrictions), grid_div=dict(cur.spec.grid_div), best_config=dict(cur.config),
            best_time_ms=cur.time_ms, original_time_ms=orig.time_ms, speedup=ctx.speedup_over_original(),
            strategy=self.strategy.name, backend=self.backend, device=session.device_name,
            problem_size=list(self.problem_size), steps=list(ctx.records), accepted=list(ctx.accepted),
            args_source=source, llm_calls=ctx.llm_calls, llm_seconds=ctx.llm_seconds,
            wall_s=time.perf_counter() - t0, speedup_lo=est.lo if est is not None else None,
            speedup_hi=est.hi if est is not None else None, speedup_rounds=est.n if est is not None else 0,
            finished=finished)

    def _inputs(self, ctx: TransformContext, session: KernelTunerSession) -> str:
        if self.args is not None:
            manifest = session.set_args(self.args)
            source = "given"
        elif self.args_generator is not None:
            manifest = session.make_args(file=self.args_generator)
            source = f"generator {self.args_generator}"
        else:
            fields = ctx.fields()
            try:
                answer = ctx.ask("inputs", "transform_inputs.md", fields, validate=lambda a: [] if len(
                    a["code"]) <= 20_000 else ["code: longer than 20,000 characters"])
            except LLMError as exc:
                raise KerntuneError(f"no argument generator given and the model wrote none: {exc}") from None
            manifest = session.make_args(code=strip_fences(answer["code"]))
            source = "model-written generator"
        ctx.arguments = ", ".join(f"{m['dtype']}[{'x'.join(map(str, m['shape']))}]" if m["kind"] == "array"
                                  else f"{m['dtype']} scalar" for m in manifest)
        return source
