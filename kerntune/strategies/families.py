"""The nineteenth pass's family bandit (CoCaBO-style; off by default: ``family_share`` 0).

A *family* is one combination of the values of the space's lowest-cardinality fields (the
boolean and small categorical switches of a kernel: shared memory on or off, a read-only cache,
padding, a grouping flag).  The rule reads only the parameters' value counts: fields with 2 to
``family_card`` values, fewest values first (ties: declaration order), at most ``family_fields``
of them, and while the product of their value counts exceeds ``family_max`` the last is dropped.
A space with no such field has one family and the bandit does nothing.

With chance ``family_share`` a global GP step is restricted to one family, chosen by UCB on the
family's best measured target (the GP's standardised targets, lower is better): a family with
fewer than ``family_min`` measurements is chosen first (fewest first, ties at random), otherwise
the lowest ``best_f - family_c * sqrt(ln N / n_f)``.  The GP's acquisition (its LCB) then picks
within that family.  Why: on a recording where the optimum's family is measured rarely and its
good configs are few (an isolated optimum), the GP's global steps may never go there; on one with
a deceptive basin the basin is usually a different family from the optimum's.
"""

from __future__ import annotations

import math
import random
from typing import Hashable, Sequence

from kerntune.space import Config


def family_fields(params: Sequence, max_card: int = 2, max_fields: int = 3, max_families: int = 8) -> list[str]:
    """Names of the fields whose value combinations define the families (possibly empty)."""
    cands = [(len(p.values()), i, p.name) for i, p in enumerate(params) if 2 <= len(p.values()) <= max_card]
    chosen = sorted(cands)[:max_fields]
    while chosen and math.prod(c for c, _, _ in chosen) > max_families:
        chosen.pop()
    return [name for _, _, name in sorted(chosen, key=lambda c: c[1])]


class FamilyBandit:
    """Per-family counts and best targets; ``choose`` returns the family a restricted step takes."""

    def __init__(self, fields: Sequence[str], families: Sequence[Hashable], min_visits: int = 3, c: float = 1.0) -> None:
        self.fields = list(fields)
        self.families = list(dict.fromkeys(families))  # those present in the pool, first-seen order
        self.min_visits, self.c = min_visits, c
        self.tries: dict[Hashable, int] = {f: 0 for f in self.families}
        self.picks: dict[Hashable, int] = {f: 0 for f in self.families}

    def key(self, cfg: Config) -> tuple:
        return tuple(cfg.get(n) for n in self.fields)

    def observe(self, cfg: Config) -> None:
        """A measured config (success or failure) counts as a visit of its family."""
        k = self.key(cfg)
        self.tries[k] = self.tries.get(k, 0) + 1

    def choose(self, targets: Sequence[float], target_families: Sequence[Hashable], rng: random.Random,
               open_families: set | None = None) -> Hashable | None:
        """The family for the next restricted step, among ``open_families`` (None: all)."""
        fams = [f for f in self.families if open_families is None or f in open_families]
        if len(fams) < 2:
            return None
        under = [f for f in fams if self.tries.get(f, 0) < self.min_visits]
        if under:
            low = min(self.tries.get(f, 0) for f in under)
            pick = rng.choice([f for f in under if self.tries.get(f, 0) == low])
        else:
            best: dict[Hashable, float] = {}
            for y, f in zip(targets, target_families):
                best[f] = min(best.get(f, math.inf), y)
            worst = max(targets) if len(targets) else 0.0
            n = sum(self.tries.get(f, 0) for f in fams)
            index = {f: best.get(f, worst) - self.c * math.sqrt(math.log(max(n, 2)) / self.tries[f]) for f in fams}
            pick = min(fams, key=lambda f: index[f])
        self.picks[pick] = self.picks.get(pick, 0) + 1
        return pick
