"""kerntune's search strategies for Kernel Tuner users.

Kernel Tuner 1.5's ``tune_kernel(strategy=...)`` takes a strategy name or any object with a
``tune(searchspace, runner, tuning_options)`` method (its "user-defined strategy" hook);
``KerntuneStrategy`` is such an object::

    import kernel_tuner
    from kerntune.transform import KerntuneStrategy

    results, env = kernel_tuner.tune_kernel("matmul", src, (n, n), args, tune_params,
                                            strategy=KerntuneStrategy("bayes", max_evals=60))

Kernel Tuner builds the search space (its restrictions included) and measures through its own
runner, cache and observers; kerntune decides which configs to measure, with any kerntune strategy
(``bayes``, ``genetic``, ``pattern``, ``llm`` with ``llm=``, …), its budgets in evaluations and
seconds, and optionally its store.  ``strategy_options`` given to ``tune_kernel`` apply as usual
(``max_fevals`` and ``time_limit`` bound the search as Kernel Tuner's budget).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from kerntune.evaluate.base import Evaluator
from kerntune.evaluate.trial import Status, Trial
from kerntune.run.search import RunOptions, SearchResult, run_search
from kerntune.space import Config, Constraint, Space
from kerntune.space.params import infer_param
from kerntune.strategies import Budget, BudgetExhausted

_ERRORS = {"InvalidConfig": Status.INVALID, "CompilationFailedConfig": Status.COMPILE_ERROR,
           "RuntimeFailedConfig": Status.RUNTIME_ERROR}


class _RunnerEvaluator(Evaluator):
    """Configs measured by Kernel Tuner's runner; its result dicts are kept for Kernel Tuner."""

    name = "kernel_tuner_runner"

    def __init__(self, space: Space, names: Sequence[str], runner: Any, tuning_options: Any) -> None:
        super().__init__(space)
        self.names, self.runner, self.options = list(names), runner, tuning_options
        self.results: list[dict[str, Any]] = []
        objective = tuning_options.objective
        self.objective = objective[0] if isinstance(objective, (list, tuple)) else objective
        higher = tuning_options.objective_higher_is_better
        self.higher = bool(higher[0] if isinstance(higher, (list, tuple)) else higher)

    def evaluate(self, configs: Sequence[Config]) -> list[Trial]:
        tuples = [tuple(c[n] for n in self.names) for c in configs]
        raw = self.runner.run(tuples, self.options)
        trials = []
        for cfg, r in zip(configs, raw):
            if r is None:  # Kernel Tuner's own budget (time_limit, max_fevals) is spent
                raise BudgetExhausted("Kernel Tuner's budget is spent")
            self.results.append(r)
            err = r.get("__error__")
            value = r.get(self.objective)
            if err is not None:
                trials.append(Trial(dict(cfg), _ERRORS.get(type(err).__name__, Status.RUNTIME_ERROR),
                                    error=f"Kernel Tuner: {type(err).__name__}"))
            elif not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                trials.append(Trial(dict(cfg), Status.RUNTIME_ERROR, error=f"objective {self.objective}={value!r}"))
            else:
                # kerntune minimises a time; a higher-is-better objective (GFLOP/s) is inverted
                t = 1.0 / value if self.higher else float(value)
                trials.append(Trial(dict(cfg), Status.OK, time_ms=t, times_ms=[float(x) for x in r.get("times") or []],
                                    compile_s=float(r.get("compile_time") or 0) / 1000,
                                    bench_s=float(r.get("benchmark_time") or 0) / 1000,
                                    extra={self.objective: value} if self.higher else {}))
        return trials

    def describe(self) -> dict[str, Any]:
        return {"evaluator": self.name, "kernel_name": getattr(self.runner.kernel_options, "kernel_name", None)}

    def workload(self) -> dict[str, Any]:
        return {"kernel_name": getattr(self.runner.kernel_options, "kernel_name", None)}


class KerntuneStrategy:
    """A Kernel Tuner strategy object running a kerntune strategy (see the module docstring)."""

    def __init__(self, strategy: str = "bayes", max_evals: int | None = None, max_seconds: float | None = None,
                 seed: int = 0, store: Any = None, options: Mapping[str, Any] | None = None, llm: Any = None) -> None:
        from kerntune.strategies import get_strategy

        get_strategy(strategy)  # an unknown name fails here, not inside tune_kernel
        self.strategy, self.max_evals, self.max_seconds = strategy, max_evals, max_seconds
        self.seed, self.store, self.options, self.llm = seed, store, dict(options or {}), llm
        self.last: SearchResult | None = None

    def space_of(self, searchspace: Any) -> Space:
        """Kernel Tuner's own valid set as the space's members: a sparse one (7 parameters of 8 values
        whose restrictions leave 6 configs) is enumerated and sampled from the list Kernel Tuner built,
        never found by walking 2 million cartesian points (which gave up: "no valid configuration")."""
        names = list(searchspace.tune_params)
        valid = {tuple(c) for c in searchspace.list}
        params = [infer_param(n, list(v)) for n, v in searchspace.tune_params.items()]
        rule = Constraint(lambda cfg: tuple(cfg[n] for n in names) in valid,
                          description="Kernel Tuner's restrictions (its search space)")
        members = [dict(zip(names, c)) for c in searchspace.list]
        return Space(params, [rule], name="kernel_tuner", members=members or None)

    def tune(self, searchspace: Any, runner: Any, tuning_options: Any) -> list[dict[str, Any]]:
        space = self.space_of(searchspace)
        evaluator = _RunnerEvaluator(space, list(searchspace.tune_params), runner, tuning_options)
        kt_budget = tuning_options.budget
        max_evals = self.max_evals
        if kt_budget.max_fevals is not None:
            max_evals = min(max_evals or kt_budget.max_fevals, kt_budget.max_fevals)
        max_seconds = self.max_seconds
        if kt_budget.time_limit is not None:
            left = kt_budget.get_time_remaining().total_seconds()
            max_seconds = min(max_seconds or left, left)
        budget = Budget(max_evals=max(1, max_evals) if max_evals else None,
                        max_seconds=max_seconds if max_seconds and max_seconds > 0 else None)
        run_options = RunOptions(store=self.store, strategy_options=self.options, llm=self.llm,
                                 label="kernel_tuner strategy")
        self.last = run_search(evaluator, self.strategy, budget, self.seed, run_options)
        return evaluator.results
