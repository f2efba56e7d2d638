"""Pattern (local) search with restarts — an iterated local search.

It starts from the best of a small random sample (plus the default), then
climbs: neighbours one field away are measured in small batches, in random
order, and the search moves as soon as a batch holds an improvement
(first improvement: cheaper per step than scanning the whole neighbourhood).
Adjacent values are tried before the rest of a field's values, because
kernel times are usually smooth along block sizes.  At a local optimum it
restarts from a perturbation of the best config (a few fields changed), or
with probability ``random_restart_share`` from a fresh random config.
"""

from __future__ import annotations

from kerntune.space import Config
from kerntune.strategies.base import SearchContext


def _perturb(ctx: SearchContext, base: Config, fields: int) -> Config | None:
    for _ in range(50):
        cand = dict(base)
        for p in ctx.rng.sample(ctx.space.params, min(fields, len(ctx.space.params))):
            cand[p.name] = ctx.rng.choice(p.values())
        if ctx.space.satisfies(cand) and not ctx.is_measured(cand):
            return cand
    return None


def _ordered_neighbours(ctx: SearchContext, cfg: Config) -> list[Config]:
    near = ctx.unmeasured(ctx.space.neighbours(cfg, "adjacent"))
    far = ctx.unmeasured(ctx.space.neighbours(cfg, "hamming"))
    ctx.rng.shuffle(near)
    ctx.rng.shuffle(far)
    return ctx.unmeasured(near + far)


def _climb(ctx: SearchContext, cfg: Config, value: float, batch: int) -> None:
    while True:
        cands = _ordered_neighbours(ctx, cfg)
        if not cands:
            return
        moved = False
        for i in range(0, len(cands), batch):
            chunk = cands[i:i + batch]
            trials = ctx.evaluate(chunk, source="pattern")
            j = min(range(len(trials)), key=lambda k: ctx.value(trials[k]))
            if ctx.value(trials[j]) < value:
                cfg, value = ctx.space.canonical(chunk[j]), ctx.value(trials[j])
                moved = True
                break
        if not moved:
            return


def search(ctx: SearchContext, initial: int = 10, batch: int = 4, perturb_fields: int = 3,
           random_restart_share: float = 0.2) -> None:
    # Trials measured before this strategy started (llm-seeded's LLM rounds) count toward the
    # initial sample; the climb starts from the best of all of them.
    want = max(initial - len(ctx.history), 0)
    first = ctx.startup(want)
    if first:
        ctx.evaluate(first, source="pattern:sample")
    start: Config | None = ctx.best.config if ctx.best is not None else None
    while True:
        if start is None:  # no best yet, or a random restart (or the perturbation found nothing new)
            sample = ctx.sample_unmeasured(1)
            if not sample:
                ctx.stop_reason = "space exhausted"
                return
            start = sample[0]
        trial = ctx.evaluate([start], source="pattern:start")[0]
        _climb(ctx, ctx.space.canonical(start), ctx.value(trial), batch)
        start = None
        if ctx.rng.random() >= random_restart_share and ctx.best is not None:
            start = _perturb(ctx, ctx.best.config, perturb_fields)
