"""The options of ``auto``'s surrogate engine (``kerntune.strategies.surrogate``), apart from the
engine so that they are listed in one place: ``-o auto.NAME=VALUE`` sets them.  Why the defaults are
what they are: the engine's docstring and ``benchmarks/search_quality/PASSES.md``.  The options of
design passes that were not adopted (lead/late climber shares, subspace and shell perturbations,
Thompson and Hedge acquisitions, space-filling starts, an early bound, a fitted nugget, ...) left the
tree once their conclusions were written down; the README says at which commit each pass's commands
run."""

from __future__ import annotations

from dataclasses import dataclass

from kerntune.errors import KerntuneError
from kerntune.strategies.surrogate_aux import WARPS


@dataclass
class SurrogateOptions:
    """Options of the engine (``auto``'s ``-o auto.NAME=VALUE`` passes them through)."""

    kappa: float = 2.5            # LCB width (gp's tuned value)
    explore_kappa: float = 50.0   # LCB width for a restart's first point (near pure exploration)
    local_share: float = 0.3      # share of steps among the one-field neighbours of the region's best
    startup: int = 5              # default config + random ones before the model decides
    stall: int | None = None      # evaluations without gain before a restart (None: from the dimension)
    tabu_radius: int = 2          # fields within which a tabu centre's region is closed
    tabu_until: float | None = 0.5  # past this share of the evaluation budget the tabu closes nothing (None: never; thirty-sixth pass)
    fail_block: float | None = 0.5  # leave out of the GP's steps configs whose kriged chance of failing exceeds this (None: none; thirty-ninth pass)
    region_radius: int | None = None  # after a restart, fields within which the region's search stays
    refit_every: int = 5
    climb_share: float = 0.5      # the climber's share of steps before either member has earned credit
    min_share: float = 0.3        # neither member's share falls below this
    credit_rate: float = 0.1      # weight of a proposal's gain in its member's running mean gain
    perturb_share: float = 0.5    # share of the climber's steps that perturb the best config instead of climbing
    perturb_guide: float = 0.5    # chance that a perturbed field's value is drawn from the good density (parzen.py)
    elites: int = 4               # size of the archive of diverse good configs (0: none; perturbations start from the best)
    elite_distance: int = 3       # the archive's configs are pairwise at least this many fields apart
    elite_from_best: float = 0.5  # chance that a perturbation starts from the best rather than another elite
    elite_stall: int = 20         # other elites serve as origins only after this many evaluations without a new best
    climb_elites: bool = True     # at a local optimum (or after climb_cap fruitless steps) climb on from an unvisited elite
    climb_cap: int = 10           # fruitless neighbours before the climber moves to the next elite (0: only at a local optimum)
    # The GP's targets (sixth, seventh and tenth passes; surrogate_aux.warp)
    y_warp: str = "copula"        # copula (normal scores of the ranks), log, blend, clip, boxcox or yeojohnson
    y_clip: float = 0.5           # quantile above which "clip" caps the log-times
    # Ninth design pass (README "Ninth pass")
    climb_max: float | None = 0.15  # the climber's share is at most this (after min_share); default since the thirteenth pass (None before)
    # Eleventh design pass (options, off by default: README "Eleventh pass"; forest_model.py)
    model: str = "gp"             # the engine's surrogate: "gp" (Hamming-kernel GP) or "rf" / "et" (random forest / extra trees, SMAC-style)
    rf_trees: int = 32            # trees of "rf" / "et"
    rf_leaf: int = 2              # minimum samples per leaf of "rf" / "et"
    rf_spread: str = "trees"      # the forest's uncertainty: "trees" (spread of the tree means) or "total" (plus the within-leaf variance, SMAC)

    # Thirteenth design pass (adopted with climb_max 0.15: README "Thirteenth pass"; gp_model._GP)
    gp_ordinal: float = 1.0       # > 0: ordered fields may enter the GP's kernel as |index difference| ** this (0: Hamming only)
    gp_ordinal_fit: bool = True   # each ordered field's term, ordinal or Hamming, by marginal likelihood (False: ordinal throughout)

    # Twenty-fourth design pass (adopted: README "Twenty-fourth pass"; gp_model.alignment_columns)
    gp_align: bool = True         # integer fields not all powers of two get a power-of-two alignment column in the GP's kernel

    # Eighteenth design pass, adopted with gp_align in the twenty-fifth (README "Eighteenth pass", "Twenty-fifth pass"):
    # half of the GP's global steps predict from log-times with a second GP fitted on them, so that a
    # landscape told apart by magnitude (an isolated optimum) and one told apart by rank both have a model.
    # Only with model "gp" and a global_warp other than y_warp (else ignored).
    global_warp: str | None = "log"  # y_warp of the GP's global steps only (restart points too); the fit and the local steps keep y_warp
    global_fit: bool = True       # with global_warp: the global steps use a second GP with its own kernel fit on global_warp's targets
    global_share: float = 0.5     # with global_warp: the share of global steps that use it (the others keep y_warp)

    @property
    def global_split(self) -> bool:
        """Whether the GP's global steps use other targets than its fit (``global_warp``): only
        with the GP (``model`` "gp") and a ``global_warp`` that differs from ``y_warp``."""
        return self.model == "gp" and self.global_warp not in (None, self.y_warp)

    def stall_after(self, n_params: int) -> int:
        return self.stall if self.stall is not None else max(15, 2 * n_params)

    def radius(self, n_params: int) -> int:
        return self.region_radius if self.region_radius is not None else n_params

    def __post_init__(self) -> None:
        if self.model not in ("gp", "rf", "et"):
            raise KerntuneError(f'auto: model must be "gp", "rf" or "et", not {self.model!r}')
        if self.rf_spread not in ("trees", "total"):
            raise KerntuneError(f'auto: rf_spread must be "trees" or "total", not {self.rf_spread!r}')
        if not 0.0 <= self.gp_ordinal <= 2.0:
            raise KerntuneError(f"auto: gp_ordinal must be in [0, 2] (0: Hamming), not {self.gp_ordinal}")
        if self.global_warp is not None and self.global_warp not in WARPS:
            raise KerntuneError(f"auto: global_warp must be null or one of {', '.join(WARPS)}, not {self.global_warp!r}")
        if not 0.0 <= self.global_share <= 1.0:
            raise KerntuneError(f"auto: global_share must be in [0, 1], not {self.global_share}")
