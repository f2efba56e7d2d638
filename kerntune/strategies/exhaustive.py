"""Exhaustive search: every valid config in enumeration order (brute force)."""

from __future__ import annotations

from kerntune.strategies.base import SearchContext


def search(ctx: SearchContext, batch_size: int | None = None) -> None:
    """Batches of ``batch_size`` (default: 8 per compile worker, at least 32): a real
    evaluator compiles a batch in parallel and idles at its tail, so bigger is faster."""
    batch_size = batch_size or max(32, 8 * ctx.batch_parallelism)
    batch = []
    for cfg in ctx.space.enumerate():
        if ctx.is_measured(cfg):
            continue
        batch.append(cfg)
        if len(batch) >= batch_size:
            ctx.evaluate(batch, source="exhaustive")
            batch = []
    if batch:
        ctx.evaluate(batch, source="exhaustive")
    ctx.stop_reason = "space exhausted"
