"""The Python API: ``kerntune.tune(...)`` and ``kerntune.compare(...)``.

Why: a notebook or a script should not shell out to the CLI and parse its
tables.  These calls take what ``kerntune tune`` / ``kerntune compare`` take
and return typed results (dataclasses) instead of printing.  They are thin on
purpose: the search is :func:`kerntune.run.search.run_search` and the comparison
is :func:`kerntune.compare.harness.run_compare`, the very functions the CLI
calls, so a run started here is stored, resumed and reported exactly like
one started from the command line (same store, same run ids).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from kerntune.budget_default import UNSET, Unset, default_evals
from kerntune.errors import KerntuneError
from kerntune.store import Store
from kerntune.store.sqlite import new_run_id

PathLike = str | os.PathLike[str]
#: ``on_start(run_id, store_path)``: called once the run id exists, before any evaluation.
OnStart = Callable[[str, Path], None]


@dataclass
class TuneResult:
    """One search: the winner, its time, how many trials it took, and where it is stored."""

    run_id: str
    store: Path
    strategy: str
    seed: int
    winner: dict[str, Any] | None   # the best config found (None: no config ran successfully)
    time_ms: float | None           # its time (re-timed when ``retime`` confirmed it on real hardware)
    trials: int                     # evaluations made (stored trials of the run)
    stop_reason: str
    report: Path | None = None      # the HTML report, when one was written
    speedup: float | None = None    # over the default / the package's choice, when re-timed
    notes: list[str] = field(default_factory=list)


@dataclass
class StrategyScore:
    """One strategy of a comparison: its methodology score with the spread over repeats."""

    name: str
    score: float
    score_stderr: float | None            # None with one repeat
    score_ci95: tuple[float | None, float | None]
    best_over_opt: float                  # mean final best / recorded optimum
    best_over_opt_range: tuple[float, float]
    found_optimum: float                  # share of repeats that found the optimum
    evals_to_2pct: float | None
    evals_to_5pct: float | None
    repeats: int


@dataclass
class ComparisonResult:
    """Several strategies on one recorded space; ``details`` is the harness's full result
    (mean curves, LLM call counts), the same numbers ``compare --json`` writes."""

    run_id: str
    store: Path
    space: str
    budget: int
    repeats: int
    seed: int
    optimum_ms: float
    scores: dict[str, StrategyScore]
    report: Path | None = None
    details: Any = None

    @property
    def best(self) -> str:
        """The strategy with the highest score."""
        return max(self.scores.values(), key=lambda s: s.score).name


def _open_store(store: PathLike | None) -> Store:
    return Store(Path(store) if store is not None else Path(os.environ.get("KERNTUNE_STORE", ".kerntune/kerntune.db")))


def _report(st: Store, run_id: str, report: bool | PathLike) -> Path | None:
    if report is False:
        return None
    from kerntune.report import default_report_path, write_report

    target = default_report_path(st, run_id) if report is True else Path(report)
    target.parent.mkdir(parents=True, exist_ok=True)
    return Path(write_report(st, run_id, html=target).html)


def _evaluator(space: PathLike | None, kernel: PathLike | None, shape: str | tuple[int, ...] | None,
               compile_timeout: float, gpus: int | None, source: PathLike | None, device: str | None) -> Any:
    """A recorded space (replayed, no GPU) or a Triton kernel file at one shape (measured)."""
    if space is None and kernel is None:
        raise KerntuneError("nothing to tune: give a recorded space (space=...) or a kernel file (kernel=..., shape=...)")
    if space is not None and kernel is not None:
        raise KerntuneError("give a recorded space (space=...) or a kernel file (kernel=..., shape=...), not both")
    if space is not None:
        from kerntune.evaluate import ReplayEvaluator
        from kerntune.evaluate.replay import replay_extras

        if not Path(space).exists():
            raise KerntuneError(f"file not found: {space}")
        kernel_source, device_info = replay_extras(source, device)
        return ReplayEvaluator.from_file(space, kernel_source=kernel_source, device_info=device_info)
    if source is not None or device is not None:
        raise KerntuneError("source and device describe a replayed space: use them with space=...")
    if shape is None:
        raise KerntuneError("a kernel file needs a shape, e.g. shape='4096x4096x4096'")
    from kerntune.evaluate.triton_backend.evaluator import TritonEvaluator
    from kerntune.evaluate.triton_backend.kernel_file import parse_shape

    dims = parse_shape(shape) if isinstance(shape, str) else tuple(shape)
    return TritonEvaluator(Path(kernel), dims, compile_timeout=compile_timeout, gpus=gpus)  # type: ignore[arg-type]


def _client(spec: str | None, base_url: str | None, timeout: float, transcript: PathLike | None = None) -> Any:
    from kerntune.llm import LLMClient

    return LLMClient.from_spec(spec, base_url, timeout=timeout,
                               **({"transcript": Path(transcript)} if transcript is not None else {}))


def tune(space: PathLike | None = None, *, kernel: PathLike | None = None, shape: str | tuple[int, ...] | None = None,
         strategy: str | None = None, budget: int | None | Unset = UNSET, seconds: float | None = None,
         target_ms: float | None = None, seed: int = 0, store: PathLike | None = None, llm: str | None = None,
         llm_base_url: str | None = None, llm_timeout: float = 300.0, llm_transcript: PathLike | None = None,
         options: Mapping[str, Any] | None = None, retime: int = 16, compile_timeout: float = 60.0,
         gpus: int | None = None, source: PathLike | None = None, device: str | None = None,
         resume: str | None = None, report: bool | PathLike = True, on_start: OnStart | None = None,
         progress: Callable[[Any], None] | None = None) -> TuneResult:
    """Search one kernel's space with one strategy, like ``kerntune tune``.

    ``space`` is a recorded space (Kernel Tuner cache, T4 or kerntune table); or give
    ``kernel`` (a Triton kernel file) and ``shape``.  ``options`` are the strategy's
    ``-o`` options; ``llm`` a model spec (``replay:FILE``, ``openai:M``, ``local:``...).
    ``source`` / ``device`` describe a replayed space's kernel and GPU to a model, as
    ``--source`` / ``--device`` do.  ``strategy`` defaults to the CLI's default.  ``resume``
    continues a killed run by its id (with the same arguments).  ``budget`` defaults to 100
    evaluations, or to no cap when ``seconds`` is given; ``budget=None`` is no cap.
    """
    from kerntune.run.search import RunOptions, run_search
    from kerntune.strategies import DEFAULT_STRATEGY, LLM_STRATEGIES, MODEL_OPTIONAL, Budget, get_strategy
    from kerntune.strategies.base import check_seed
    from kerntune.strategies.options import validate_options

    st = _open_store(store)
    try:
        b = Budget(max_evals=default_evals(budget, seconds), max_seconds=seconds, target_ms=target_ms)
        if resume:  # the stored run's strategy, seed, budget and options, as `tune --resume` uses them
            from kerntune.store.resume import check_kind

            run = st.get_run(resume)
            check_kind(run, "tune")
            strategy, seed = run.strategy or DEFAULT_STRATEGY, run.seed if run.seed is not None else 0
            stored = dict(run.options)
            b = Budget(**stored.pop("budget")) if stored.get("budget") else b
            options = stored
        strategy = strategy or DEFAULT_STRATEGY
        get_strategy(strategy)
        opts = validate_options(strategy, dict(options or {}))
        check_seed(seed)
        client = None
        if strategy in LLM_STRATEGIES and not llm:
            raise KerntuneError(f"strategy {strategy} needs a model: pass llm='SPEC'")
        if llm and strategy in LLM_STRATEGIES | MODEL_OPTIONAL:
            client = _client(llm, llm_base_url, llm_timeout, llm_transcript)
        evaluator = _evaluator(space, kernel, shape, compile_timeout, gpus, source, device)
        run_id = resume or new_run_id()
        if on_start is not None:
            on_start(run_id, st.path)
        try:
            shipped = evaluator.baseline()[0] if hasattr(evaluator, "baseline") else None
            run_options = RunOptions(store=st, run_id=run_id, progress=progress, llm=client,
                                     strategy_options=opts, warm_start=[shipped] if shipped else ())
            res = run_search(evaluator, strategy, b, seed, run_options)
            best, speedup = res.best, None
            if best is not None and retime > 0 and getattr(evaluator, "can_retime", hasattr(evaluator, "retime")):
                from kerntune.evaluate.retime import confirm

                found = confirm(evaluator, res.history, n_leaders=retime, baseline=shipped or evaluator.space.default)
                best = found.winner or best
                speedup = found.speedup.median if found.speedup is not None else None
            if best is not None and kernel is not None:  # what the decorator and `tune` look up later
                dev, ident = evaluator.device(), evaluator.describe()
                st.put_best(ident["source_hash"], "x".join(map(str, ident["shape"])), dev.get("name", ""),
                            f"torch={dev.get('torch')},triton={dev.get('triton')}", best.config, best.time_ms,
                            res.run_id)
        finally:
            evaluator.close()  # worker processes end even when the search raised
        from kerntune.space import jsonable

        return TuneResult(
            run_id=res.run_id or run_id, store=st.path, strategy=strategy, seed=seed,
            winner={k: jsonable(v) for k, v in best.config.items()} if best is not None else None,
            time_ms=best.time_ms if best is not None else None, trials=len(res.history),
            stop_reason=res.stop_reason, report=_report(st, run_id, report), speedup=speedup, notes=list(res.notes))
    finally:
        st.close()


def compare(space: PathLike | None = None, *, strategies: list[str] | tuple[str, ...] = ("auto", "gp", "genetic", "random"),
            budget: int = 100, repeats: int = 10, seed: int = 0, store: PathLike | None = None,
            llm: str | None = None, llm_base_url: str | None = None, llm_timeout: float = 300.0,
            options: Mapping[str, Mapping[str, Any]] | None = None, source: PathLike | None = None,
            device: str | None = None, resume: str | None = None, report: bool | PathLike = True,
            on_start: OnStart | None = None, progress: Callable[[str, int, int], None] | None = None) -> ComparisonResult:
    """Compare strategies on a recorded space, like ``kerntune compare``.

    ``options`` maps a strategy name to its options (``{"llm": {"initial": 25}}``).
    ``progress(label, done, total)`` is called after each repeat; ``resume`` continues a
    killed comparison by its id (its stored settings are used).
    """
    from kerntune.compare.harness import run_compare
    from kerntune.strategies.base import check_seed

    names = list(strategies)
    if not names:
        raise KerntuneError("strategies is empty")
    if not resume:
        check_seed(seed, repeats)
    st = _open_store(store)
    try:
        if on_start is not None:
            if resume:
                on_start(resume, st.path)
            else:
                st.on_run_created = lambda rid, kind, parent: (on_start(rid, st.path)
                                                               if kind == "compare" and parent is None else None)
        res = run_compare(str(space) if space is not None else None, names, budget, repeats, seed, st, resume=resume,
                          progress=progress, llm_spec=llm, llm_base_url=llm_base_url, llm_timeout=llm_timeout,
                          strategy_options={k: dict(v) for k, v in (options or {}).items()},
                          kernel_source_path=str(source) if source is not None else None, device=device)
        scores = {name: StrategyScore(
            name=name, score=s.score, score_stderr=_finite(s.score_stderr),
            score_ci95=(_finite(s.score_ci95[0]), _finite(s.score_ci95[1])), best_over_opt=s.best_over_opt,
            best_over_opt_range=s.best_over_opt_spread, found_optimum=s.found_optimum,
            evals_to_2pct=s.evals_to_2pct, evals_to_5pct=s.evals_to_5pct, repeats=s.repeats)
            for name, s in res.strategies.items()}
        return ComparisonResult(run_id=res.run_id, store=st.path, space=res.space, budget=res.budget,
                                repeats=res.repeats, seed=res.seed, optimum_ms=res.optimum_ms, scores=scores,
                                report=_report(st, res.run_id, report), details=res)
    finally:
        st.on_run_created = None
        st.close()


def _finite(x: float) -> float | None:
    import math

    return float(x) if math.isfinite(x) else None
