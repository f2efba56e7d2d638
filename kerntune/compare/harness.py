"""The compare harness: several strategies, several seeded repeats, one
recorded space, the same numbers for each.

Every repeat is a child run in the store, so a killed comparison resumes
where it stopped: finished repeats are read back, the interrupted one is
re-walked from the store (see ``kerntune.run.search``), nothing is re-measured.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from kerntune.compare.metrics import (Reference, best_so_far, evals_to_within, median_or_none, score_defined,
                                      score_spread)
from kerntune.errors import KerntuneError
from kerntune.evaluate import ReplayEvaluator
from kerntune.evaluate.trial import Trial
from kerntune.llm.secrets import redact
from kerntune.run.search import RunOptions, errors_end_the_run, run_search
from kerntune.store import Store
from kerntune.store.resume import BASE_URL, absolute_spec, kept_base_url, resumed_base_url
from kerntune.strategies import LLM_STRATEGIES, MODEL_OPTIONAL, Budget, get_strategy
from kerntune.strategies.options import validate_options


@dataclass
class StrategyStats:
    name: str
    score: float
    best_over_opt: float
    evals_to_2pct: float | None
    evals_to_5pct: float | None
    found_optimum: float
    mean_curve: list[float]
    best_over_opt_spread: tuple[float, float]
    tuning_seconds: float            # mean simulated compile+benchmark time per repeat
    wall_seconds: float              # wall time kerntune spent on this strategy (a repeat read back on
                                     # --resume counts the wall its run recorded when it finished)
    repeats: int
    llm: dict[str, Any] | None = None   # calls, tokens, seconds, valid share per round
    score_stderr: float = float("nan")  # standard error of the score over repeats
    score_ci95: tuple[float, float] = (float("nan"), float("nan"))  # bootstrap interval over repeats
    extra: dict[str, Any] = field(default_factory=dict)  # strategy-specific figures (auto: model time hidden)
    #: repeats that found a successful config: what best/opt and its min..max are the mean and spread over
    found_config: int | None = None
    #: configs measured over all repeats (None: not counted): tells "none ran" from "all failed"
    evaluated: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "score": _finite(self.score), "score_stderr": _finite(self.score_stderr),
            "score_ci95": [_finite(x) for x in self.score_ci95], "best_over_opt": _finite(self.best_over_opt),
            "evals_to_2pct": self.evals_to_2pct, "evals_to_5pct": self.evals_to_5pct,
            "found_optimum_share": self.found_optimum,
            "best_over_opt_min_max": [_finite(x) for x in self.best_over_opt_spread],
            "repeats_found_config": self.repeats if self.found_config is None else self.found_config,
            "tuning_seconds": self.tuning_seconds,
            "wall_seconds": self.wall_seconds, "repeats": self.repeats, "mean_curve": self.mean_curve,
            **({"llm": self.llm} if self.llm is not None else {}), **self.extra,
        }


def _finite(x: float) -> float | None:
    """JSON has no inf nor NaN: an undefined spread (one repeat), an undefined score (NaN: every successful
    config ties), or best/optimum where a repeat ran no config, is written as null."""
    return float(x) if np.isfinite(x) else None


@dataclass
class CompareResult:
    run_id: str
    space: str
    budget: int
    repeats: int
    seed: int
    optimum_ms: float
    median_ms: float
    cutoff: int
    random_expectation: list[float]
    strategies: dict[str, StrategyStats] = field(default_factory=dict)
    #: configs the recording cannot tell from its optimum (``Recording.optimum_ties``; None without runs)
    optimum_ties: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "space": self.space, "budget": self.budget, "repeats": self.repeats,
            "seed": self.seed, "optimum_ms": self.optimum_ms, "median_ms": self.median_ms,
            "cutoff": self.cutoff, "random_expectation": self.random_expectation, "optimum_ties": self.optimum_ties,
            "strategies": {k: v.to_dict() for k, v in self.strategies.items()},
        }


Progress = Callable[[str, int, int], None]


def _resumed(store: Store, resume: str, llm_spec: str | None, source: str | None,
             device: str | None) -> tuple[str, dict[str, Any], str | None, str | None, str | None]:
    """The comparison ``resume`` names (``last`` or a unique prefix as every command takes them): its id,
    stored options, model spec (``resume.resumed_model``), source and device.  A model, source or device
    given again must be the run's own: another would mix two kinds of repeats in one comparison."""
    from kerntune.store.resume import check_kind, check_same, resumed_model

    run = store.get_run(store.resolve_run_id(resume))
    check_kind(run, "compare")
    opts = run.options
    asked = any(store.llm_exchanges(child.id) for child in store.child_runs(run.id))
    llm_spec = resumed_model(run, llm_spec, asked)
    if source is not None and _absolute(source) != opts.get("source"):
        check_same(run.id, "--source", opts.get("source"), source)
    check_same(run.id, "--device", opts.get("device"), device)
    return run.id, opts, llm_spec, opts.get("source"), opts.get("device")


def _absolute(path: str | None) -> str | None:
    return str(Path(path).resolve()) if path else path


def run_compare(space_path: str | None, strategies: list[str], budget: int, repeats: int, seed: int,
                store: Store, resume: str | None = None, progress: Progress | None = None,
                llm_spec: str | None = None, llm_base_url: str | None = None,
                llm_timeout: float = 300.0,
                strategy_options: dict[str, dict[str, Any]] | None = None,
                kernel_source_path: str | None = None, device: str | None = None) -> CompareResult:
    """``strategy_options`` maps a strategy name to the options its runs get (``-o name.key=value``)."""
    if resume:
        resume, opts, llm_spec, kernel_source_path, device = _resumed(store, resume, llm_spec, kernel_source_path,
                                                                      device)
        llm_base_url = resumed_base_url(store.get_run(resume), llm_base_url)  # its own endpoint, unless given
        space_path, strategies = opts["space"], opts["strategies"]
        budget, repeats, seed = opts["budget"], opts["repeats"], opts["seed"]
        strategy_options = opts.get("strategy_options") or {}
    strategy_options = strategy_options or {}
    unknown = sorted(set(strategy_options) - set(strategies))
    if unknown:
        raise KerntuneError(f"options given for {', '.join(unknown)}, which is not among the strategies compared")
    if space_path is None:
        raise KerntuneError("--space is required (or --resume RUN_ID)")
    if repeats < 1:
        raise KerntuneError(f"repeats must be at least 1, got {repeats}")
    for name in strategies:
        get_strategy(name)
        validate_options(name, strategy_options.get(name), with_model=bool(llm_spec))
    client = None
    if set(strategies) & LLM_STRATEGIES and not llm_spec:
        raise KerntuneError("strategies llm and llm-seeded need a model: pass --llm SPEC")
    if set(strategies) & (LLM_STRATEGIES | MODEL_OPTIONAL) and llm_spec:
        from kerntune.llm import LLMClient

        client = LLMClient.from_spec(llm_spec, llm_base_url, timeout=llm_timeout)
        client.spec = absolute_spec(llm_spec) or ""  # its paths absolute, as each repeat stores it
    budget_obj = Budget(max_evals=budget)
    from kerntune.evaluate.replay import replay_extras

    kernel_source, device_info = replay_extras(kernel_source_path, device)
    evaluator = ReplayEvaluator.from_file(space_path, kernel_source=kernel_source, device_info=device_info)
    rec = evaluator.recording
    if resume:
        from kerntune.store.resume import check_evaluator

        check_evaluator(store.get_run(resume), evaluator.describe(), None)
    ok = rec.ok_times
    if not ok:
        raise KerntuneError(f"{space_path}: the recording has no successful measurement")
    ref = Reference.from_times(ok, len(rec.trials) - len(ok))
    # Paths absolute, so that --resume works from another directory; the model's spec redacted (a cmd:
    # line may hold a key; resumed_model then asks for --llm again), its base URL without credentials
    options = {"space": _absolute(space_path), "strategies": strategies, "budget": budget, "repeats": repeats,
               "seed": seed, "llm": redact(client.spec) if client is not None and llm_spec else None,
               BASE_URL: kept_base_url(llm_base_url) if client is not None else None,
               "strategy_options": strategy_options, "source": _absolute(kernel_source_path), "device": device}
    run_id = resume or store.create_run("compare", options=options, space=None, evaluator=evaluator.describe(),
                                        device=evaluator.device().get("name"))
    cutoff = min(ref.cutoff(budget), budget)
    result = CompareResult(run_id, str(space_path), budget, repeats, seed, ref.optimum, ref.median, cutoff,
                           [float(x) for x in ref.random_expectation(budget)], optimum_ties=rec.optimum_ties())
    with errors_end_the_run(store, run_id):  # a failed or interrupted comparison says so in the store
        total, done = len(strategies) * repeats, 0
        for name in strategies:
            curves, found, wall, tuning, exchanges, extras = [], [], 0.0, [], [], []
            evaluated = 0
            for r in range(repeats):
                label = f"{name}#{r}"
                child = store.find_child(run_id, label)
                t0 = time.perf_counter()
                if child is not None and child.status == "done":
                    history = [t for _, t, _ in store.trials(child.id)]
                    clock = [c for _, _, c in store.trials(child.id)]
                    exchanges.extend(store.llm_exchanges(child.id))
                    summary = child.summary or {}
                    extras.append(summary.get("extra") or {})
                    t0 -= float(summary.get("wall_s") or 0.0)  # the wall time it took when it ran
                else:
                    asks = name in LLM_STRATEGIES | MODEL_OPTIONAL
                    run_options = RunOptions(store=store, run_id=child.id if child else None, parent_id=run_id,
                                             label=label, llm=client.for_new_run() if asks and client else None,
                                             strategy_options=strategy_options.get(name))
                    res = run_search(evaluator, name, budget_obj, seed + r, run_options)
                    history, clock = res.history, res.clocks
                    exchanges.extend(res.llm_exchanges)
                    extras.append(res.extra)
                wall += time.perf_counter() - t0
                evaluated += len(history)
                curves.append(_curve(history, ref.worst))  # the methodology's curve (see metrics)
                found.append(_curve(history, math.inf))    # what the run found: inf until a config ran
                tuning.append(clock[-1] if clock else 0.0)
                done += 1
                if progress:
                    progress(label, done, total)
            spread = score_spread(curves, ref, budget, seed=seed)
            # The score counts a run's start as the worst successful time (the methodology's rule); the
            # figures of what a run found do not: a run where no config ran found nothing (inf), not the
            # worst config, which on a recording of near-equal times would read as "within 2%"
            ratios = [float(c[-1]) / ref.optimum if len(c) else math.inf for c in found]
            # best/optimum is the mean over the repeats that found a config, said beside how many did
            # (``found_config``), as the report shows it; "found the optimum" is a share of all repeats.
            ran = [r for r in ratios if math.isfinite(r)]
            result.strategies[name] = StrategyStats(
                name=name, score=spread.score, best_over_opt=float(np.mean(ran)) if ran else math.inf,
                evals_to_2pct=median_or_none([evals_to_within(c, ref.optimum, 2) for c in found]),
                evals_to_5pct=median_or_none([evals_to_within(c, ref.optimum, 5) for c in found]),
                found_optimum=float(np.mean([r <= 1.0 + 1e-9 for r in ratios])),
                mean_curve=[float(x) for x in np.mean([_pad(c, budget) for c in curves], axis=0)],
                best_over_opt_spread=(float(min(ran)), float(max(ran))) if ran else (math.inf, math.inf),
                tuning_seconds=float(np.mean(tuning)), wall_seconds=wall, repeats=repeats,
                llm=_llm_stats(exchanges, repeats) if exchanges or name in LLM_STRATEGIES else None,
                score_stderr=spread.stderr, score_ci95=(spread.ci_low, spread.ci_high),
                extra=_model_time(extras), found_config=len(ran), evaluated=evaluated,
            )
    store.finish_run(run_id)
    return result


def _model_time(extras: list[dict[str, Any]]) -> dict[str, Any]:
    """How much model time measurements hid (``auto`` with a model), over the repeats that say (those run
    here, and those read back on ``--resume`` from their stored summary)."""
    runs = [e for e in extras if "model_seconds" in e]
    if not runs:
        return {}
    total = sum(e["model_seconds"] for e in runs)
    hidden = sum(e["model_hidden_seconds"] for e in runs)
    return {"model_time": {"repeats": len(runs), "calls_per_repeat": sum(e["model_calls"] for e in runs) / len(runs),
                           "seconds_per_repeat": total / len(runs), "hidden_seconds_per_repeat": hidden / len(runs),
                           # no model time, no share (as auto's own summary says): it read 100%
                           "hidden_share": hidden / total if total > 0 else None}}


def _llm_stats(exchanges: list[dict[str, Any]], repeats: int) -> dict[str, Any]:
    """Per repeat means of calls, tokens and seconds, and the valid share of each round.  Calls and failed
    calls are given per repeat and in total, each key saying which.  Why: ``failed_calls`` was a total among
    per-repeat means and read as one of them (results files written before still have that key)."""
    failed = sum(1 for ex in exchanges if ex.get("error"))
    by_round: dict[int, list[int]] = {}
    for ex in exchanges:
        acc, rej = len(ex.get("accepted") or []), len(ex.get("rejected") or [])
        tot = by_round.setdefault(int(ex["round"]), [0, 0])
        tot[0] += acc
        tot[1] += acc + rej
    return {
        "calls_per_repeat": len(exchanges) / repeats,
        "calls_total": len(exchanges),
        "failed_calls_per_repeat": failed / repeats,
        "failed_calls_total": failed,
        "tokens_in_per_repeat": sum(ex.get("tokens_in") or 0 for ex in exchanges) / repeats,
        "tokens_out_per_repeat": sum(ex.get("tokens_out") or 0 for ex in exchanges) / repeats,
        "llm_seconds_per_repeat": sum(ex.get("latency_s") or 0.0 for ex in exchanges) / repeats,
        "valid_share_by_round": {r: (a / t if t else 0.0) for r, (a, t) in sorted(by_round.items())},
    }


def _curve(history: list[Trial], worst: float) -> np.ndarray:
    return best_so_far([t.time_ms if t.ok else None for t in history], worst)


def _pad(curve: np.ndarray, n: int) -> np.ndarray:
    if len(curve) >= n:
        return curve[:n]
    return np.concatenate([curve, np.full(n - len(curve), curve[-1] if len(curve) else np.nan)])


def plot_compare(result: CompareResult, path: str | Path) -> None:
    """Best-so-far (mean over repeats) against evaluations, with random's expectation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    x = np.arange(1, result.budget + 1)
    ax.plot(x[: len(result.random_expectation)], result.random_expectation, "k--", lw=1.2,
            label="random search (expected)")
    for name, stats in result.strategies.items():
        score = f"{stats.score:.2f}" if score_defined(stats.score) else "n/a"  # not "nan" where all configs tie
        ax.plot(x[: len(stats.mean_curve)], stats.mean_curve, lw=1.6, label=f"{name} (score {score})")
    ax.axhline(result.optimum_ms, color="green", lw=0.8, ls=":", label=f"optimum {result.optimum_ms:.4g} ms")
    ax.axvline(result.cutoff, color="grey", lw=0.6, ls=":")
    ax.set_xlabel("evaluations")
    ax.set_ylabel("best time so far (ms, mean over repeats)")
    ax.set_title(f"{Path(result.space).name}: best-so-far, {result.repeats} repeats")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
