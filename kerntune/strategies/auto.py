"""``auto``: the default strategy.

Without a model it is the surrogate engine (``kerntune.strategies.surrogate``: the GP of
``gp`` with stall-triggered restarts and a tabu list, so that a deceptive basin does not
hold it).  With a model (``--llm``) the model and the engine share one budget
(``kerntune.strategies.auto_model``).
"""

from __future__ import annotations

from typing import Any

from kerntune.errors import KerntuneError
from kerntune.strategies.base import SearchContext
from kerntune.strategies.surrogate import SurrogateOptions, run

_ENGINE = set(SurrogateOptions.__dataclass_fields__)


def search(ctx: SearchContext, batch_size: int | None = None, **options: Any) -> None:
    engine = {k: v for k, v in options.items() if k in _ENGINE}
    rest = {k: v for k, v in options.items() if k not in _ENGINE}
    if ctx.llm is None:
        if rest:
            raise KerntuneError(f"auto: unknown option(s) {', '.join(sorted(rest))} "
                                f"(known without a model: {', '.join(sorted(_ENGINE | {'batch_size'}))})")
        run(ctx, SurrogateOptions(**engine), batch_size=batch_size)
        return
    from kerntune.strategies.auto_model import run_with_model

    run_with_model(ctx, SurrogateOptions(**engine), batch_size=batch_size, **rest)
