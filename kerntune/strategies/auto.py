"""``auto``: the default strategy.

Without a model it is the surrogate engine (``kerntune.strategies.surrogate``: the GP of
``gp`` with stall-triggered restarts and a tabu list, so that a deceptive basin does not
hold it).  With a model (``--llm``) the model and the engine share one budget
(``kerntune.strategies.auto_model``).

Options (``-o NAME=VALUE``; checked before anything is measured and listed with their bounds by
``kerntune options auto``: ``strategies.options.AutoOptions``; unknown names stop the run with one line):

* the engine's (``SurrogateOptions``): ``kappa`` (2.5), ``explore_kappa`` (50), ``local_share``
  (0.3), ``startup`` (5), ``stall`` (evaluations without gain before a restart; default
  max(15, 2 x parameters)), ``tabu_radius`` (2), ``tabu_until`` (0.5, the thirty-sixth pass's:
  past that share of an evaluation budget the tabu closes nothing; null: never), ``fail_block`` (0.5, the
  thirty-ninth pass's: configs whose failure, kriged from the measured ones, is more likely than this are
  left out of the GP's steps; null: none), ``region_radius``, ``refit_every`` (5),
  ``climb_share`` (0.5), ``min_share`` (0.3), ``credit_rate`` (0.1), ``climb_max`` (0.15; at or below
  ``min_share`` it is the climber's share throughout, and ``climb_share`` but for 0 and ``credit_rate`` do not act),
  ``perturb_share`` (0.5: share of the climber's steps that perturb the best config instead of
  climbing), ``perturb_guide`` (0.5: chance that a perturbed field's new value comes from the
  density of that field among the best measured configs, else uniform), the fifth pass's ``elites``
  (4), ``elite_distance`` (3), ``elite_from_best`` (0.5), ``elite_stall`` (20), ``climb_elites``
  (true), ``climb_cap`` (10); ``y_warp`` ("copula": the GP's targets are normal scores of the ranks;
  "log", "blend", "clip" with ``y_clip``, "boxcox", "yeojohnson"); ``model`` ("gp"; "rf" or "et": a
  random forest or extra trees in the GP's place, SMAC-style, mean and spread over the trees:
  ``kerntune.strategies.forest_model``, needs the ``forest`` extra; not adopted), ``rf_trees`` (32),
  ``rf_leaf`` (2), ``rf_spread`` ("trees": the spread of the tree means; "total": plus the
  within-leaf variance, SMAC's); the thirteenth pass's ``gp_ordinal`` (1.0) and ``gp_ordinal_fit``
  (true); the twenty-fourth pass's ``gp_align`` (true: integer fields whose values are not all powers
  of two get a power-of-two alignment column in the GP's kernel);
  the eighteenth pass's, on by default since the twenty-fifth: ``global_warp`` ("log": the GP's global
  steps predict from these targets while its fit and local steps keep ``y_warp``; null: off),
  ``global_fit`` (true: those steps use a second GP fitted on those targets), ``global_share`` (0.5:
  the share of global steps that use them); the GP's only (ignored with ``model`` "rf" or "et");
  and ``batch_size`` (1 on a recording, up to 8 on GPUs).  The options of passes that were not
  adopted are gone from the tree (``SurrogateOptions``' docstring);
* with a model only: ``initial`` (25), ``refine`` (15), ``max_calls`` (6), ``screen_keep`` (0.6),
  ``temperature`` (0.7), ``max_tokens``, ``include_source``/``include_hardware``/``include_hints``,
  ``new_region_fields`` (2), ``model_clock_s`` (none).
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
    import inspect

    from kerntune.strategies.auto_model import run_with_model

    known = set(inspect.signature(run_with_model).parameters) - {"ctx", "engine_opts", "batch_size"}
    unknown = sorted(set(rest) - known)
    if unknown:
        raise KerntuneError(f"auto: unknown option(s) {', '.join(unknown)} "
                            f"(known: {', '.join(sorted(_ENGINE | known | {'batch_size'}))})")
    run_with_model(ctx, SurrogateOptions(**engine), batch_size=batch_size, **rest)
