"""Genetic algorithm: the strategy family that scored best in Kernel Tuner's
methodology study (≈0.52), so the one a new strategy must beat.

Tournament selection, uniform crossover, per-gene mutation that prefers a
neighbouring value, elitism; children that violate constraints or were
measured already are mutated again, then replaced by a random unmeasured
config, so every generation spends its evaluations on new configs.
"""

from __future__ import annotations

from kerntune.evaluate.trial import Trial
from kerntune.space import Config
from kerntune.strategies.base import SearchContext


def _mutate(ctx: SearchContext, cfg: Config, rate: float) -> Config:
    out = dict(cfg)
    for p in ctx.space.params:
        if ctx.rng.random() < rate:
            near = p.adjacent(out[p.name])
            pool = near if near and ctx.rng.random() < 0.7 else p.others(out[p.name])
            if pool:
                out[p.name] = ctx.rng.choice(pool)
    return out


def _crossover(ctx: SearchContext, a: Config, b: Config) -> Config:
    return {n: (a[n] if ctx.rng.random() < 0.5 else b[n]) for n in ctx.space.names}


def _tournament(ctx: SearchContext, pop: list[Trial], k: int) -> Trial:
    return min(ctx.rng.sample(pop, min(k, len(pop))), key=ctx.value)


def search(ctx: SearchContext, population: int = 20, mutation_rate: float | None = None, elite: int = 2,
           tournament: int = 3, crossover_rate: float = 0.9) -> None:
    rate = mutation_rate if mutation_rate is not None else max(1.0 / len(ctx.space.params), 0.1)
    # The best trials measured before this strategy started (llm-seeded's LLM rounds) seed the
    # population; the default and random configs fill it up.
    pop = sorted(ctx.history, key=ctx.value)[:population]
    want = population - len(pop)
    first = ctx.startup(want)
    if first:
        pop = pop + ctx.evaluate(first, source="genetic:init")
    if not pop:
        ctx.stop_reason = "space exhausted"
        return
    while True:
        pop = sorted(pop, key=ctx.value)[:population]
        children: list[Config] = []
        keys: set[str] = set()
        for _ in range(population * 20):
            if len(children) >= population - elite:
                break
            a, b = _tournament(ctx, pop, tournament), _tournament(ctx, pop, tournament)
            child = _crossover(ctx, a.config, b.config) if ctx.rng.random() < crossover_rate else dict(a.config)
            child = _mutate(ctx, child, rate)
            for _ in range(5):
                if ctx.space.satisfies(child) and not ctx.is_measured(child):
                    break
                child = _mutate(ctx, child, rate)
            key = ctx.space.key(child)
            if ctx.space.satisfies(child) and not ctx.is_measured(child) and key not in keys:
                children.append(child)
                keys.add(key)
        if len(children) < population - elite:
            fill = [c for c in ctx.sample_unmeasured(population - elite - len(children)) if ctx.space.key(c) not in keys]
            children.extend(fill)
        if not children:
            ctx.stop_reason = "space exhausted"
            return
        pop = pop[:elite] + ctx.evaluate(children, source="genetic")
