"""TR, PR and WC of edited Tensile configs against the original, over every problem size.

For one run (an original benchmark K0 and an edited one K1, both Tensile output folders):
  PR per size = best GFLOPS of K1 / best GFLOPS of K0 (0 when K1 has no valid kernel or
                never benchmarked that size); the run's PR is the mean over sizes, PR_min the worst;
  winner kept per size = K1's winner is K0's winner (same solution name);
  TR          = (T(K0) - (T(K1) + model seconds)) / T(K0), T = Tensile's wall time.
Over M runs: TR and PR are means, and WC is the share of (run, size) pairs whose winner was
kept; ``WC_all`` is the stricter share of runs that kept the winner of every size.  The
confgen prototype read only the first CSV row; a config tuned for many sizes is judged here
on all of them.  A size where every original solution failed has no best to measure against:
it is left out of PR and WC and counted apart (``unmeasurable_sizes``); scored PR 1.0, it
inflated PR and WC whatever the edited run found there.  Original results with no size to measure
against are an error: they compared as "0 problem sizes" and validation passed.  Sizes the edited run
benchmarked and the original lacks (``only_here``: an original run that crashed part way) are named,
and validation fails on them: it passed "over 1 problem sizes" of 4.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from kerntune.tensile.config import TensileError
from kerntune.tensile.results import Results


@dataclass
class SizeComparison:
    benchmark: str
    size: list[int]  # the Size columns; ``label`` adds the strides where the size alone is ambiguous
    original_winner: str | None
    winner: str | None
    original_gflops: float | None
    gflops: float | None
    pr: float | None  # None: unmeasurable (no valid kernel in the original), out of PR and WC
    winner_kept: bool | None
    note: str = ""
    label: str = ""  # e.g. "size [1024, 1024, 1, 1024] LD [1024, 1024, 1056, 1024]"


@dataclass
class RunComparison:
    label: str
    sizes: list[SizeComparison]  # the sizes the original had a valid kernel for: PR and WC are over these
    t_original_s: float | None = None
    t_pruned_s: float | None = None
    llm_s: float = 0.0
    sizes_only_here: int = 0
    unmeasurable: list[SizeComparison] = field(default_factory=list)  # no valid kernel in the original
    original_skipped_rows: int = 0  # truncated CSV rows (a killed run) that could not be read
    skipped_rows: int = 0
    only_here: list[str] = field(default_factory=list)  # labels of the ``sizes_only_here``

    @property
    def pr(self) -> float:
        return statistics.mean(s.pr for s in self.sizes) if self.sizes else 0.0

    @property
    def pr_min(self) -> float:
        return min((s.pr for s in self.sizes), default=0.0)

    @property
    def winners_kept(self) -> float:
        return sum(s.winner_kept for s in self.sizes) / len(self.sizes) if self.sizes else 0.0

    @property
    def tr(self) -> float | None:
        if not self.t_original_s or self.t_pruned_s is None:
            return None
        return (self.t_original_s - (self.t_pruned_s + self.llm_s)) / self.t_original_s

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "TR": self.tr, "PR": self.pr, "PR_min": self.pr_min,
                "winners_kept": self.winners_kept, "t_original_s": self.t_original_s,
                "t_pruned_s": self.t_pruned_s, "llm_s": self.llm_s, "sizes_only_here": self.sizes_only_here,
                "only_here": self.only_here,
                "unmeasurable_sizes": len(self.unmeasurable), "original_skipped_rows": self.original_skipped_rows,
                "skipped_rows": self.skipped_rows, "sizes": [asdict(s) for s in self.sizes],
                "unmeasurable": [asdict(s) for s in self.unmeasurable]}


def check_original(original: Results) -> None:
    """TensileError unless the original (golden) results hold a size with a valid kernel: compared
    over none, a killed run's CSV (a header and a truncated row) validated and evaluated as a success."""
    if not original.sizes:
        raise TensileError(f"{original.source}: no complete problem-size row in its results ({original.skipped_rows}"
                           " truncated row(s) skipped); re-run Tensile there")
    if all(o.gflops is None for o in original.sizes.values()):
        raise TensileError(f"{original.source}: no valid kernel at any of its {len(original.sizes)} problem size(s);"
                           " nothing to compare against")


def compare(original: Results, edited: Results, label: str = "", t_original_s: float | None = None,
            t_pruned_s: float | None = None, llm_s: float = 0.0) -> RunComparison:
    """Every size the original benchmarked, compared with the edited run's result for it; a
    TensileError when the original holds no size to compare against."""
    check_original(original)
    out, unmeasurable = [], []
    # matched by sizes and strides, not by key: a file whose run lost one of two problems sharing a size
    # keys the other by its size alone
    theirs = {(r.benchmark, r.size, r.strides): r for r in edited.sizes.values()}
    for _, o in sorted(original.sizes.items()):
        e = theirs.get((o.benchmark, o.size, o.strides))
        note = ""
        if e is None:
            note = "not benchmarked by the edited config"
        elif e.gflops is None:
            note = "no valid kernel in the edited config"
        if o.gflops is None:
            found = ("not benchmarked by the edited config" if e is None else "no valid kernel in the edited config "
                     "either" if e.gflops is None else f"the edited config found {e.winner} at {e.gflops:.1f} GFLOPS")
            unmeasurable.append(SizeComparison(o.benchmark, list(o.size), None, e.winner if e else None, None,
                                               e.gflops if e else None, None, None,
                                               f"no valid kernel in the original; {found}", o.label))
            continue
        g = e.gflops if e is not None and e.gflops is not None else None
        out.append(SizeComparison(o.benchmark, list(o.size), o.winner, e.winner if e else None, o.gflops, g,
                                  (g / o.gflops) if g else 0.0, e is not None and e.winner == o.winner, note,
                                  o.label))
    ours = {(r.benchmark, r.size, r.strides) for r in original.sizes.values()}
    extra = [f"{r.benchmark} {r.label}" for k, r in sorted(theirs.items()) if k not in ours]
    return RunComparison(label, out, t_original_s, t_pruned_s, llm_s, len(extra), unmeasurable,
                         original.skipped_rows, edited.skipped_rows, extra)


@dataclass
class Evaluation:
    runs: list[RunComparison] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        rs = self.runs
        pairs = [s.winner_kept for r in rs for s in r.sizes]
        trs = [r.tr for r in rs if r.tr is not None]
        return {"runs": len(rs), "sizes": len(rs[0].sizes) if rs else 0,
                "unmeasurable_sizes": len(rs[0].unmeasurable) if rs else 0,
                "TR": statistics.mean(trs) if len(trs) == len(rs) and rs else None,
                "PR": statistics.mean(r.pr for r in rs) if rs else 0.0,
                "PR_min": min((r.pr_min for r in rs), default=0.0),
                "WC": sum(pairs) / len(pairs) if pairs else 0.0,
                "WC_all": sum(r.winners_kept == 1.0 for r in rs) / len(rs) if rs else 0.0,
                "llm_s": statistics.mean(r.llm_s for r in rs) if rs else 0.0}

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary(), "runs": [r.to_dict() for r in self.runs]}


def validate(golden: Results, results: Results, tolerance: float = 0.02) -> list[str]:
    """Problems found comparing a run with a golden (full) run: per size, the winner must be the
    golden winner or its GFLOPS within ``tolerance`` of the golden best.  Empty: it passes (sizes
    the golden lacks are :func:`not_in_golden`'s)."""
    problems = []
    run = compare(golden, results)
    for s in run.sizes:
        where = f"{s.benchmark} {s.label or f'size {s.size}'}"
        if s.note and s.original_gflops is not None:
            problems.append(f"{where}: {s.note}")
        elif not s.winner_kept and s.original_gflops is not None and s.pr < 1 - tolerance:
            problems.append(f"{where}: winner {s.winner} at {s.gflops:.1f} GFLOPS is {1 - s.pr:.1%} below the golden "
                            f"{s.original_winner} at {s.original_gflops:.1f}")
    return problems


def not_in_golden(run: RunComparison, golden: Results) -> list[str]:
    """Validation problems for the sizes the run benchmarked and the golden run lacks: nothing
    validates them, and a crashed golden run's subset otherwise "passed" over 1 size of 4."""
    return [f"{where}: not in the golden results ({golden.source}), nothing to validate against"
            for where in run.only_here]
