"""Exhaustive search: every valid config in enumeration order (brute force)."""

from __future__ import annotations

from kerntune.evaluate.trial import Status
from kerntune.space import Config
from kerntune.strategies.base import SearchContext


def _measure(ctx: SearchContext, batch: list[Config]) -> None:
    """The whole batch: a time budget may start only part of it (``SearchContext._fits_in_time``),
    and the configs it did not start ("over budget", unmeasured) are offered again."""
    while batch:
        trials = ctx.evaluate(batch, source="exhaustive")
        batch = [c for c, t in zip(batch, trials) if t.status is Status.UNMEASURED and not ctx.is_measured(c)]


def search(ctx: SearchContext, batch_size: int | None = None) -> None:
    """Batches of ``batch_size`` (default: 8 per compile worker, at least 32): a real
    evaluator compiles a batch in parallel and idles at its tail, so bigger is faster."""
    batch_size = batch_size or max(32, 8 * ctx.evaluator.parallelism)
    batch = []
    for cfg in ctx.space.enumerate():
        if ctx.is_measured(cfg):
            continue
        batch.append(cfg)
        if len(batch) >= batch_size:
            _measure(ctx, batch)
            batch = []
    _measure(ctx, batch)
    ctx.stop_reason = "space exhausted"
