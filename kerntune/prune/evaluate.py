"""TR, PR and WC of a pruner on a recorded space (DESIGN.md, "Metrics").

One run: measure a random profile of the full space K0, let the pruner edit
the space (with ``iterations`` > 1: edit, measure a sample of the edited
space, show it to the pruner, edit again), "tune" the pruned space K1
exhaustively on the recording.
  TR = (T(K0) - (T(K1 u measured) + LLM seconds)) / T(K0): the profile's and the
       samples' measurements are reused, so only configs outside them cost again,
       and the model's wall time over every iteration is charged;
  PR = best time in K0 / best time found (K1 and the profile);
  WC = share of runs whose winner is K0's winner.
T is the recorded compile + benchmark time of every config measured.  A recording without
those times (a Kernel Tuner cache that kept only kernel times) has T(K0) = 0: TR is then
unavailable (None, with a note), as the Tensile TR is without Tensile's wall times.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from kerntune.evaluate.replay import ReplayEvaluator
from kerntune.prune.edits import EditOutcome, SpaceState
from kerntune.prune.iterate import iterate
from kerntune.prune.pruners import Pruner, as_editor


#: Why a run has no TR.
NO_COST = ("TR unavailable: the recording holds no compile or benchmark times (a cache with kernel times only),"
           " so what pruning saves cannot be measured")


@dataclass
class PruneRun:
    seed: int
    edits: list[dict[str, Any]]
    refused: list[str]
    configs_before: int
    configs_after: int
    tr: float | None          # None: the recording holds no compile or benchmark times
    pr: float
    winner_kept: bool
    llm_s: float
    note: str = ""
    t_full_s: float = 0.0     # T(K0): the recorded cost of every config of the full space
    t_pruned_s: float = 0.0   # T(K1): profile, samples and the pruned space's other configs
    iterations: int = 1


@dataclass
class PruneSummary:
    runs: list[PruneRun] = field(default_factory=list)

    def table(self) -> dict[str, float]:
        rs = self.runs
        trs = [r.tr for r in rs if r.tr is not None]
        return {"runs": len(rs), "TR": statistics.mean(trs) if trs and len(trs) == len(rs) else None,
                "PR": statistics.mean(r.pr for r in rs),
                "WC": sum(r.winner_kept for r in rs) / len(rs),
                "kept": statistics.mean(r.configs_after / r.configs_before for r in rs),
                "llm_s": statistics.mean(r.llm_s for r in rs), "PR_min": min(r.pr for r in rs)}

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.table(), "runs": [asdict(r) for r in self.runs]}


def profile(evaluator: ReplayEvaluator, size: int, seed: int) -> list:
    space = evaluator.space
    return evaluator.evaluate(space.sample(random.Random(seed), size))


def prune_once(evaluator: ReplayEvaluator, pruner: Pruner, profile_size: int, seed: int, iterations: int = 1,
               sample: int = 20) -> tuple[EditOutcome, PruneRun]:
    rec = evaluator.recording
    space = evaluator.space
    prof = profile(evaluator, profile_size, seed)
    result = iterate(SpaceState.of(space), as_editor(pruner, evaluator.workload(), evaluator.device()), prof,
                     iterations, evaluator, sample, seed)
    llm_s = result.llm_s
    note = "; ".join(i.note for i in result.iterations if i.note)
    refused = [r for i in result.iterations for r in i.refused]
    outcome = result.outcome
    full_cost = sum(t.cost_s for t in rec.trials.values())
    seen = {space.key(t.config) for t in result.measured}
    kept = [space.key(c) for c in outcome.space.enumerate()]
    cost = sum(t.cost_s for t in result.measured) + \
        sum(rec.trials[k].cost_s for k in kept if k not in seen and k in rec.trials)
    found = [rec.trials[k] for k in set(kept) | seen if k in rec.trials and rec.trials[k].ok]
    opt = rec.optimum
    best = min(found, key=lambda t: t.time_ms) if found else None  # type: ignore[arg-type,return-value]
    tr = (full_cost - (cost + llm_s)) / full_cost if full_cost > 0 else None
    if tr is None:
        note = "; ".join(filter(None, [note, NO_COST]))
    run = PruneRun(seed, [e.to_dict() for e in outcome.applied], refused,
                   outcome.before, outcome.after, tr,
                   (opt.time_ms / best.time_ms) if best else 0.0,  # type: ignore[operator]
                   best is not None and space.key(best.config) == space.key(opt.config), llm_s, note,
                   full_cost, cost, len(result.iterations))
    return outcome, run


def evaluate_pruner(evaluator: ReplayEvaluator, pruner: Pruner, runs: int, profile_size: int = 40,
                    seed: int = 0, iterations: int = 1, sample: int = 20) -> PruneSummary:
    summary = PruneSummary()
    for r in range(runs):
        summary.runs.append(prune_once(evaluator, pruner, profile_size, seed + r, iterations, sample)[1])
    return summary
