"""``bayes``: Bayesian optimisation, with a Gaussian process over the valid
configs by default (``surrogate="gp"``, ``gp.py``) or Optuna's TPE
(``surrogate="tpe"``, ``tpe.py``; also the strategy ``tpe``).

Why the GP is the default: on the recorded convolution space (200
evaluations, 20 repeats) TPE scored about 0.45 at best, the GP 0.63 (seeds 0-19;
other seed sets 0.6-0.7); the GP was also better on dedispersion and on two of
the three Triton matmul recordings, TPE slightly better on 4096^3 (0.80 vs 0.76;
benchmarks/results/compare_classical.md).  TPE proposes in the
cartesian box and knows no constraints, so its proposals have to be snapped
to valid unmeasured configs; the GP scores every valid config directly.
"""

from __future__ import annotations

from typing import Any

from kerntune.errors import KerntuneError
from kerntune.strategies.base import SearchContext


def search(ctx: SearchContext, surrogate: str = "gp", **options: Any) -> None:
    """``surrogate`` picks the model; the other options go to it (see ``gp.search`` and ``tpe.search``)."""
    if surrogate == "gp":
        from kerntune.strategies import gp

        gp.search(ctx, **options)
    elif surrogate == "tpe":
        from kerntune.strategies import tpe

        tpe.search(ctx, **options)
    else:
        raise KerntuneError(f"unknown bayes surrogate {surrogate!r} (gp, tpe)")
