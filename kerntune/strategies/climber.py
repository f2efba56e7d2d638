"""A step-wise iterated local search: the second member of ``auto``'s portfolio.

``pattern`` as a generator that proposes one config at a time, so that it can share a
budget and a history with the GP (``kerntune.strategies.surrogate``).  It climbs from its
own current point (adjacent values first, then any other value of one field: kernel times
are often smooth along block sizes, which a Hamming-kernel GP does not see), moves on the
first improvement, and at a local optimum restarts from a few fields' perturbation of the
best config so far, or from a random config.  Configs measured by anyone are reused
without cost: the shared history is what it climbs on.

Why it is in ``auto``: on a recorded convolution space with a deceptive basin the GP
alone scored 0.05 and pattern search 0.53 (10 repeats, budget 200) — the climber's
perturbation restarts leave the basin where the GP's bound keeps pulling back to it.
"""

from __future__ import annotations

import math
from typing import Callable

from kerntune.space import Config, Param
from kerntune.strategies.base import SearchContext


class Climber:
    def __init__(self, ctx: SearchContext, perturb_fields: int = 3, random_restart_share: float = 0.2) -> None:
        """A new neighbourhood is visited adjacent values first, in random order, then the others."""
        self.ctx = ctx
        self.perturb_fields = perturb_fields
        self.random_restart_share = random_restart_share
        self.cur: Config | None = None
        self.cur_value = math.inf
        self.queue: list[Config] = []
        self.restarts = 0
        #: the engine's archive of diverse good configs, best first (``SurrogateSearch.elites``)
        self.elites: Callable[[], list[Config]] | None = None
        self.visited: set[str] = set()   # configs the climber has stood on
        self.cap = 0                     # with elites: fruitless neighbours before moving to the next elite
        self.fruitless = 0

    def _value(self, cfg: Config) -> float | None:
        t = self.ctx.measured.get(self.ctx.space.key(self.ctx.space.canonical(cfg)))
        return None if t is None else self.ctx.value(t)

    def _neighbours(self, cfg: Config) -> list[Config]:
        ctx = self.ctx
        near = ctx.space.neighbours(cfg, "adjacent")
        far = ctx.space.neighbours(cfg, "hamming")
        ctx.rng.shuffle(near)
        ctx.rng.shuffle(far)
        return near + far

    def perturb(self, base: Config, draw: Callable[[Param], object] | None = None) -> Config | None:
        """A valid unmeasured config with ``perturb_fields`` random fields of ``base`` redrawn:
        by ``draw`` (a field's new value, or None for a uniform draw) where given."""
        ctx = self.ctx
        for _ in range(50):
            cand = dict(base)
            for p in ctx.rng.sample(ctx.space.params, min(self.perturb_fields, len(ctx.space.params))):
                v = draw(p) if draw is not None else None
                cand[p.name] = v if v is not None else ctx.rng.choice(p.values())
            if ctx.space.satisfies(cand) and not ctx.is_measured(cand):
                return ctx.space.canonical(cand)
        return None

    def _to_elite(self) -> bool:
        """Move to the best elite not yet stood on (True), or stay (False)."""
        assert self.elites is not None
        for e in self.elites():
            if self.ctx.space.key(self.ctx.space.canonical(e)) not in self.visited:
                v = self._value(e)
                if v is not None:
                    self._move_to(e, v)
                    return True
        return False

    def _move_to(self, cfg: Config, value: float) -> None:
        self.cur, self.cur_value = self.ctx.space.canonical(cfg), value
        self.visited.add(self.ctx.space.key(self.cur))
        self.fruitless = 0
        self.queue = self._neighbours(self.cur)

    def propose(self, taken: set[str] | None = None) -> Config | None:
        """One unmeasured config, or None when the space is exhausted."""
        ctx = self.ctx
        taken = taken or set()
        if self.cur is None:
            if ctx.best is None:
                sample = ctx.sample_unmeasured(1)
                return sample[0] if sample else None
            self._move_to(ctx.best.config, ctx.value(ctx.best))
        for _ in range(10_000):
            if self.elites is not None and 0 < self.cap <= self.fruitless and self._to_elite():
                continue
            while self.queue:
                cand = self.queue.pop(0)
                v = self._value(cand)
                if v is None:
                    if ctx.space.key(ctx.space.canonical(cand)) in taken:
                        continue
                    self.fruitless += 1
                    return cand
                if v < self.cur_value:  # someone measured a better neighbour: climb for free
                    self._move_to(cand, v)
            # a local optimum: restart
            self.restarts += 1
            if self.elites is not None and self._to_elite():
                continue
            start = None
            if ctx.best is not None and ctx.rng.random() >= self.random_restart_share:
                start = self.perturb(ctx.best.config)
            if start is None:
                sample = ctx.sample_unmeasured(1)
                if not sample:
                    return None
                start = sample[0]
            self.cur, self.cur_value, self.queue = ctx.space.canonical(start), math.inf, []
            return start
        return None

    def observe(self, cfg: Config, value: float) -> None:
        """A measurement of one of the climber's own proposals."""
        cfg = self.ctx.space.canonical(cfg)
        if self.cur is not None and self.ctx.space.key(cfg) == self.ctx.space.key(self.cur) and math.isinf(self.cur_value):
            self._move_to(cfg, value)  # the restart point itself
        elif value < self.cur_value:
            self._move_to(cfg, value)  # first improvement
