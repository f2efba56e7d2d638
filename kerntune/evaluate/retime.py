"""The last step of a GPU run: settle the winner among the leaders, then re-time it beside the baseline.

Screening gives each config one window; the leaders of a search are close to each other, often
within the sustained state's noise (kerntune.evaluate.protocol).  Where the evaluator can (the Triton
benchmark worker), the leaders within 1.5x of the fastest screening time go through the runoff
(``kerntune.evaluate.runoff``: a screen round, interleaved rounds, windows for what stays unsettled),
the scheme that picked the package's config or one within the judge's noise on 22 of 24 real-kernel
pairs (benchmarks/real_kernels/README.md); windows of each config in turn, the rule before, picked a
config 1.3% slower than the best of a rewritten matmul (benchmarks/transform_triton/README.md).  The
winner and the baseline (the kernel's default: the package's shipped choice, or the kernel file's
default) are then timed again in interleaved rounds of windows in one worker, and the winner's speedup
over the baseline is the median of the per-round ratios with its confidence interval.  An evaluator
without a runoff re-times the leaders that way too, and the lowest median wins.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from kerntune.evaluate.protocol import Estimate, speedup, verdict
from kerntune.evaluate.runoff import SCREEN, screened
from kerntune.evaluate.trial import Trial
from kerntune.space import Config


@dataclass
class Confirmed:
    """What re-timing found: every re-timed trial, the winner, and the baseline's figures.

    ``speedup`` is the search's pick's over the baseline; ``pick`` names that pick where it is not the
    winner (it re-timed slower than the baseline beyond noise, and the baseline stands)."""

    retimed: list[Trial]
    winner: Trial | None
    baseline: Trial | None = None
    speedup: Estimate | None = None
    notes: list[str] = field(default_factory=list)
    runoff: dict[str, Any] | None = None  # the worker's runoff reply, where one chose the winner
    pick: Trial | None = None  # the search's pick that ``speedup`` measures, where the baseline beat it

    @property
    def verdict(self) -> str | None:
        return verdict(self.speedup) if self.speedup is not None else None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"retimed": [t.to_dict() for t in self.retimed],
                               "winner": self.winner.to_dict() if self.winner else None,
                               "baseline": self.baseline.to_dict() if self.baseline else None}
        if self.speedup is not None:
            s = self.speedup
            out["speedup"] = {"median": s.median, "lo": s.lo, "hi": s.hi, "rounds": s.n, "verdict": self.verdict}
        if self.runoff is not None:
            out["runoff"] = self.runoff
        if self.pick is not None:
            out["pick"] = self.pick.to_dict()
        return out


def leading(history: Sequence[Trial], n: int) -> list[Trial]:
    """The ``n`` fastest distinct successful configs of a search, as their trials.

    When the search ran on several GPUs (``extra["gpu"]``), each GPU's own ranking is drawn from
    in turn: screening times taken on different GPUs do not compare (two GPUs of one model differ
    by a few percent, and each sees its own load), so a GPU that runs faster would otherwise fill
    the leaders with the configs it happened to screen.  On 4 H200s the screening-best config of
    a 4-GPU run was 8% slower than the 1-GPU run's when both were re-timed on one GPU (issue 20).
    The leaders are then re-timed on one GPU, where they compare."""
    ranked = sorted((t for t in history if t.ok), key=lambda t: t.time_ms)  # type: ignore[arg-type,return-value]
    lists: dict[Any, list[Trial]] = {}
    for t in ranked:
        lists.setdefault(t.extra.get("gpu"), []).append(t)
    # one GPU (or trials that name none, e.g. from a store written before GPUs were recorded): one ranking
    queues = list(lists.values()) if len(set(lists) - {None}) > 1 else [ranked]
    seen, out = set(), []
    pos = [0] * len(queues)
    while len(out) < n and any(p < len(q) for p, q in zip(pos, queues)):
        for i, q in enumerate(queues):
            while pos[i] < len(q):
                t = q[pos[i]]
                pos[i] += 1
                key = tuple(sorted((k, repr(v)) for k, v in t.config.items()))
                if key not in seen:
                    seen.add(key)
                    out.append(t)
                    break
            if len(out) == n:
                break
    return out


def leaders(history: Sequence[Trial], n: int) -> list[Config]:
    """The configs of ``leading``."""
    return [t.config for t in leading(history, n)]


def settle_leaders(evaluator: Any, history: Sequence[Trial], n: int = SCREEN[1]) -> tuple[Trial | None, dict[str, Any] | None]:
    """The history's trial that the evaluator's runoff picks among the leaders (at most ``n``, each within
    ``SCREEN``'s factor of the fastest screening time), and the runoff's reply; (None, None) where the
    evaluator has no runoff or it failed, (the leader, None) where only one config qualifies."""
    runoff = getattr(evaluator, "runoff", None)
    ranked = leading(history, n)
    if not ranked or runoff is None:
        return None, None
    near = screened(ranked)
    if len(near) < 2:
        return near[0], None
    got = runoff([t.config for t in near], [t.time_ms for t in near])
    if got is None:
        return None, None
    return near[int(got["winner"])], got


def confirm(evaluator: Any, history: Sequence[Trial], n_leaders: int = 5, baseline: Config | None = None,
            rounds: int | None = None) -> Confirmed:
    """Settle the winner among the ``n_leaders`` best configs of ``history`` by the evaluator's runoff
    and re-time it beside ``baseline``; without a runoff, re-time the leaders and ``baseline`` together
    and take the lowest median.  A pick that re-times slower than the baseline beyond noise is no
    winner: the baseline is (the search can only improve on the package's own choice; the runoff's
    pick was printed as best and cached while its rounds read it 11% slower than the package's)."""
    picked, reply = settle_leaders(evaluator, history, n_leaders)
    configs = [picked.config] if picked is not None else leaders(history, n_leaders)
    base_index = None
    if baseline is not None:
        canon = evaluator.space.canonical(baseline)
        base_index = next((i for i, c in enumerate(configs) if evaluator.space.canonical(c) == canon), None)
        if base_index is None:
            configs.append(canon)
            base_index = len(configs) - 1
    if not configs:
        return Confirmed([], None)
    retimed = evaluator.retime(configs, rounds=rounds)
    ok = [t for t in retimed if t.ok]
    notes: list[str] = []
    if picked is not None and retimed[0].ok:  # the runoff's pick (unless the baseline beats it: below)
        winner = retimed[0]
    else:
        if picked is not None:  # the pick failed now: it is no winner, and its screening figure is no time
            notes.append(f"the runoff's pick failed when re-timed ({retimed[0].status.value}: {retimed[0].error})"
                         + ("; the fastest re-timed config stands" if ok else ""))
        winner = min(ok, key=lambda t: t.time_ms) if ok else None  # type: ignore[arg-type,return-value]
    if not ok:
        notes.append("every re-timed config failed: no re-timed winner")
    out = Confirmed(retimed, winner, notes=notes, runoff=reply)
    if base_index is not None:
        out.baseline = retimed[base_index]
        if not out.baseline.ok:
            out.notes.append(f"the baseline config failed when re-timed ({out.baseline.status.value}: "
                             f"{out.baseline.error})")
        elif winner is not None:
            b, w = out.baseline.extra.get("rounds_ms"), winner.extra.get("rounds_ms")
            if b and w and len(b) == len(w):
                try:
                    out.speedup = speedup(b, w)
                except ValueError as exc:  # no round timed both with a usable figure
                    out.notes.append(f"no speedup over the baseline: {exc}")
            est = out.speedup
            if est is not None and verdict(est) == "slower" and winner is not out.baseline:
                out.pick, out.winner = winner, out.baseline
                out.notes.append(f"the search's pick {_short(winner.config)} re-timed {est.median:.3f}x the baseline "
                                 f"[{est.lo:.3f}, {est.hi:.3f}], slower beyond noise: the baseline stays the winner")
    return out


def _short(config: Config) -> str:
    """A config as one line of JSON, for a note."""
    import json

    from kerntune.space import jsonable

    return json.dumps({k: jsonable(v) for k, v in config.items()})
