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

    def elites(self, size: int | None = None) -> list[Config]:
        """Best-first archive of measured configs pairwise at least ``elite_distance`` fields
        apart (greedy over the history, best first), at most ``size`` (default ``elites``); the
        first is the best."""
        ctx = self.ctx
        size = max(self.opts.elites if size is None else size, 1)
        cached = self._elite_cache.get(size)
        if cached is not None and cached[0] == len(ctx.history):
            return cached[1]
        names = [p.name for p in ctx.space.params]
        kept: list[Config] = []
        for t in sorted((t for t in ctx.history if t.ok), key=ctx.value):
            if len(kept) >= size:
                break
            if all(sum(t.config.get(n) != e.get(n) for n in names) >= self.opts.elite_distance for e in kept):
                kept.append(t.config)
        self._elite_cache[size] = (len(ctx.history), kept)
        return kept

    def recombinations(self, limit: int = 64) -> list[Config]:
        """Unmeasured valid crossovers of every pair of the ``cross_elites`` archive (fifty-second
        pass, ``cross_share``): each child takes every field where the two parents differ from one
        or the other, all such mixes when there are at most ``limit`` a pair, else ``limit`` drawn
        at random.  A stalled run often holds, among its good configs, one on the right code path
        with poor tiles and one with good tiles on the wrong path; neither the one-field steps nor
        a perturbation of three fields joins the two."""
        ctx, space = self.ctx, self.ctx.space
        parents = self.elites(self.opts.cross_elites)
        out: dict[str, Config] = {}
        for i, a in enumerate(parents):
            for b in parents[i + 1:]:
                diff = [n for n in space.names if a[n] != b[n]]
                total = 2 ** len(diff) - 2
                if total <= 0:
                    continue
                masks = range(1, total + 1) if total <= limit else (ctx.rng.randrange(1, total + 1) for _ in range(limit))
                for m in masks:
                    child = dict(a)
                    for k, n in enumerate(diff):
                        if m >> k & 1:
                            child[n] = b[n]
                    if not space.satisfies(child):
                        continue
                    child = space.canonical(child)
                    key = space.key(child)
                    if key not in out and key not in ctx.measured:
                        out[key] = child
        return list(out.values())

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
