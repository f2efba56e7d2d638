"""A random-forest surrogate for the ``auto`` engine (``model="rf"``, off by default): SMAC's model
(Hutter et al. 2011) in the place of the Hamming-kernel GP, with the same portfolio, climber,
restarts, tabu list and elites around it.

Why try it.  Ten design passes on the GP engine (``benchmarks/search_quality/PASSES.md``) moved
portfolio shares, acquisitions, restarts and target warps; none lifted the worst recorded space,
and the tenth pass put the ceiling on the model itself.  A tree ensemble is the other standard
model over discrete, partly categorical tuning spaces: splits on a field's position keep the order
of ordered kinds, interactions of several fields are modelled without a kernel's smoothness, and a
single config much faster than its neighbours (an isolated optimum) is a leaf of its own once seen.

What it is.  A ``RandomForestRegressor`` (scikit-learn, imported lazily: the ``forest`` extra) on
``Space.encode`` of the measured configs, refitted whenever the targets change (SMAC refits every
iteration); the prediction is the mean over the trees and the uncertainty their spread (standard
deviation across trees), as SMAC does.  It has ``_GP``'s interface (``add_pool``, ``add_obs``,
``drop_last``, ``refit``, ``predict``, ``predict_at``, ``pool``, ``n``), so the engine's code is the
same for both models; the GP path is untouched when ``model`` is "gp".  Trees are seeded from the
search's RNG, so a run is deterministic for its seed.

What the eleventh pass measured (budget 200, 20 repeats, seed 0; ``benchmarks/search_quality/PASSES.md``,
"Eleventh pass").  Not adopted: in the default engine the forest lowered the mean score from 0.735 to
0.693 and the worst space from 0.50 to 0.39; none of the variants (extra trees, LCB width 1, SMAC's
total-variance spread, log-time targets, one sample a leaf, a smaller climber share) lifted the worst
space without dropping the mean.  The forest loses most on spaces whose good configs are nearly equal
(a piecewise-constant mean cannot order a config's near-equal neighbours, which the GP's kernel does)
and on an isolated optimum; it gains on one recording (0.89-0.94 against 0.79) in every variant.  The
best row by mean (``kappa`` 1, ``rf_leaf`` 1, ``climb_max`` 0.15) scored 0.738 against 0.708 at 60
repeats of seed 1000, all of it on spaces already above 0.7, with the worst space lower (0.50 / 0.55).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from kerntune.strategies.surrogate_options import SurrogateOptions

_TREES = 32          # trees per forest (SMAC uses 10; more trees give a steadier spread)
_LEAF = 2            # minimum samples per leaf
_FEATURES = 0.8      # share of the fields each split considers (SMAC: 5/6)
_SD_FLOOR = 1e-3     # the spread's floor, in units of the standardised targets


def require_sklearn(model: str = "rf") -> None:
    """Fail with one clear line when scikit-learn (the ``forest`` extra) is missing: when the options
    are checked, before a run is stored (``options.validate_options``), and again when a forest is built."""
    try:
        import sklearn  # noqa: F401
    except ImportError as e:  # pragma: no cover - depends on the environment
        from kerntune.errors import KerntuneError

        raise KerntuneError(f'auto: model="{model}" needs scikit-learn (pip install "kerntune[forest]")') from e


def forest(width: int, cap: int, opts: "SurrogateOptions", rng: random.Random) -> "Forest":
    """The engine's forest for ``opts.model`` ("rf" or "et"), seeded by one draw of the search's RNG."""
    return Forest(width, cap, rng.getrandbits(31), trees=opts.rf_trees, leaf=opts.rf_leaf, extra=opts.model == "et",
                  spread=opts.rf_spread)


class Forest:
    """Random-forest regression over a growable pool of encoded configs (``_GP``'s interface)."""

    def __init__(self, width: int, cap: int, seed: int, trees: int = _TREES, leaf: int = _LEAF,
                 features: float = _FEATURES, extra: bool = False, spread: str = "trees") -> None:
        require_sklearn("et" if extra else "rf")
        self.cap = cap
        self.seed = seed
        self.trees, self.leaf, self.features, self.extra, self.spread = trees, leaf, features, extra, spread
        self.pool = np.empty((0, width))
        self._pool32 = np.empty((0, width), dtype=np.float32)
        self.obs = np.empty((cap, width))
        self.n = 0
        self.theta = np.zeros(width)   # unused (the GP's length-scales); kept for the interface
        self._fitted: tuple[int, bytes] | None = None
        self._forest = None
        self._cache: tuple[np.ndarray, np.ndarray] | None = None  # pool mean and spread of the current fit
        self.fits = 0

    def add_pool(self, feats: np.ndarray) -> None:
        self.pool = np.vstack([self.pool, feats])
        self._pool32 = np.ascontiguousarray(self.pool, dtype=np.float32)
        self._cache = None

    def add_obs(self, feat: np.ndarray) -> None:
        self.obs[self.n] = feat
        self.n += 1

    def drop_last(self, k: int) -> None:
        self.n -= k

    def refit(self, yn: np.ndarray, live: np.ndarray) -> None:
        """Nothing to do here: the forest is refitted in ``predict`` whenever its data change."""

    def _fit(self, yn: np.ndarray) -> None:
        key = (self.n, np.asarray(yn, dtype=float).tobytes())
        if self._fitted == key:
            return
        from sklearn.ensemble import ExtraTreesRegressor, RandomForestRegressor

        kind = ExtraTreesRegressor if self.extra else RandomForestRegressor
        forest = kind(n_estimators=self.trees, min_samples_leaf=self.leaf, max_features=self.features,
                      bootstrap=True, random_state=(self.seed + self.n) % (2**31), n_jobs=1)
        forest.fit(self.obs[: self.n], np.asarray(yn, dtype=float)[: self.n])
        self._forest, self._fitted, self._cache = forest, key, None
        self.fits += 1

    def _per_tree(self, x32: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        trees = self._forest.estimators_  # type: ignore[union-attr]
        preds = np.empty((len(trees), len(x32)))
        if self.spread == "total":
            # SMAC's spread: the law of total variance over the trees, the variance of the tree
            # means plus the mean variance of the targets within each tree's leaf.
            within = np.zeros(len(x32))
            for i, t in enumerate(trees):
                leaves = t.tree_.apply(x32)
                preds[i] = t.tree_.value[leaves].reshape(len(x32), -1)[:, 0]
                within += t.tree_.impurity[leaves]
            var = preds.var(0) + within / len(trees)
            return preds.mean(0), np.maximum(np.sqrt(var), _SD_FLOOR)
        for i, t in enumerate(trees):
            preds[i] = t.tree_.predict(x32).reshape(len(x32), -1)[:, 0]
        return preds.mean(0), np.maximum(preds.std(0), _SD_FLOOR)

    def predict(self, yn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean over the trees and their spread, over the pool."""
        self._fit(yn)
        if self._cache is None:
            self._cache = self._per_tree(self._pool32)
        mu, sd = self._cache
        return mu.copy(), sd.copy()

    def predict_at(self, feats: np.ndarray, yn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``predict`` at other points than the pool."""
        self._fit(yn)
        return self._per_tree(np.ascontiguousarray(feats, dtype=np.float32))
