"""The perturbation steps of ``auto``'s surrogate engine (``kerntune.strategies.surrogate``): where a
perturbation starts (the best config or another elite of a diverse archive) and how its redrawn fields
take their values (the good density of ``parzen.py``).  A mixin of
``SurrogateSearch``, apart so that the engine's module stays about its GP steps; why each piece is as it
is: the engine's docstring ("Why perturbation steps", "Why an archive of diverse elites")."""

from __future__ import annotations

from typing import Any

import numpy as np

from kerntune.space import Config, Param


class PerturbSteps:
    """``SurrogateSearch``'s perturbation origin, elite archive and perturbations."""

    ctx: Any
    opts: Any

    def _perturb_origin(self) -> Config:
        """Where a perturbation starts: the best config, or (once the best has stalled for
        ``elite_stall`` evaluations, with chance 1 - ``elite_from_best``) another elite."""
        ctx = self.ctx
        assert ctx.best is not None
        others = self.elites()[1:] if self.opts.elites > 0 else []
        if not others or self.since_best < self.opts.elite_stall or ctx.rng.random() < self.opts.elite_from_best:
            return ctx.best.config
        return ctx.rng.choice(others)

    def elites(self) -> list[Config]:
        """Best-first archive of measured configs pairwise at least ``elite_distance`` fields
        apart (greedy over the history, best first), at most ``elites``; the first is the best."""
        ctx = self.ctx
        if self._elite_cache[0] == len(ctx.history):
            return self._elite_cache[1]
        names = [p.name for p in ctx.space.params]
        kept: list[Config] = []
        for t in sorted((t for t in ctx.history if t.ok), key=ctx.value):
            if len(kept) >= max(self.opts.elites, 1):
                break
            if all(sum(t.config.get(n) != e.get(n) for n in names) >= self.opts.elite_distance for e in kept):
                kept.append(t.config)
        self._elite_cache = (len(ctx.history), kept)
        return kept

    def perturb(self, base: Config) -> Config | None:
        """The climber's perturbation of ``base``, each redrawn field's value from the good density
        with probability ``perturb_guide`` (an estimation-of-distribution mutation), else uniform."""
        if self.parzen is None or len(self.all_vals) < 2:
            return self.climber.perturb(base)
        obs, vals = np.array(self.all_feats), np.array(self.all_vals)
        dens: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        parzen, rng = self.parzen, self.ctx.rng

        def draw(p: Param) -> object:
            e = self.columns.get(p.name)
            values = p.values()
            if e is None or len(values) < 2 or rng.random() >= self.opts.perturb_guide:
                return None
            if p.name not in dens:
                dens[p.name] = parzen.good_density(obs, vals, e)
            lv, d = dens[p.name]
            j = min(int(np.searchsorted(np.cumsum(d), rng.random() * d.sum())), len(lv) - 1)
            return values[int(round(lv[j] * (len(values) - 1)))]

        return self.climber.perturb(base, draw)
