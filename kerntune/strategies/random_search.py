"""Random search without replacement: the baseline every score is relative to."""

from __future__ import annotations

from kerntune.strategies.base import SearchContext


def search(ctx: SearchContext, batch_size: int = 8) -> None:
    while True:
        batch = ctx.sample_unmeasured(batch_size)
        if not batch:
            ctx.stop_reason = "space exhausted"
            return
        ctx.evaluate(batch, source="random")
