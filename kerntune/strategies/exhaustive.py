"""Exhaustive search: every valid config in enumeration order (brute force)."""

from __future__ import annotations

from kerntune.strategies.base import SearchContext


def search(ctx: SearchContext, batch_size: int = 32) -> None:
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
