"""The surrogate engine of ``auto``: the GP of ``gp`` (Hamming kernel, per-field
length-scales, LCB over every valid config) made robust against deceptive basins by
restarts with a tabu list, and driven through ``propose``/``tell`` so that a model
can share its budget (``kerntune.strategies.auto``).

Why restarts.  On recorded spaces with a deceptive basin (a local optimum some 15-25%
off that most starts fall into, several fields away from the optimum) the plain GP
settles in the basin and spends the rest of the budget on its neighbours: on two of the
eight shipped recordings its methodology score was 0.09 and 0.22 (5 repeats; 0.60-0.87
elsewhere).  When the best has not improved for ``stall`` evaluations the engine calls the
current incumbent a basin, puts it on a tabu list and restarts: every config within
``tabu_radius`` fields of a tabu centre is left out of the global proposals, the restart's
first point is the most promising far config under a more exploratory bound, and local
steps follow the restart's own best.  The model (all measurements) is kept across
restarts, so a restart costs no re-learning; the tabu only closes regions that were
searched already.  Nothing here depends on a particular space: the stall length and the
radius scale with the number of parameters.

Why perturbation steps.  Traces of the portfolio on a convolution recording with a deceptive
basin showed that the runs which stay stuck (one held 1.24x the optimum from evaluation 35 to
200) are the ones where nobody jumps a few fields away from the incumbent; the climber does so
only at a local optimum, after scanning its whole neighbourhood.  So half of the climber's
steps (``perturb_share``) are a perturbation of the best config (three random fields redrawn,
each from the good density of ``parzen.py`` half the time, ``perturb_guide``), and the climber
climbs on from a perturbation that beats its current point.  20 repeats, budget 200, seeds 0 /
100: mean score 0.666 / 0.694 -> 0.707 / 0.735, convolution_A4000 0.44 / 0.45 -> 0.59 / 0.71,
dedispersion_MI250X 0.62 / 0.72 -> 0.66 / 0.80; convolution_A100 (0.48 / 0.55 -> 0.47 / 0.53)
and dedispersion_A100 (0.59 / 0.59 -> 0.63 / 0.57) stay under 0.6: they want the GP's own
global steps, which the climber's share takes.  Perturbations alone, with no climbing, cost
the matmul recordings (matmul 256: 0.81 -> 0.65), where adjacent steps are what pays.

Why an archive of diverse elites.  Traces of runs stuck on a convolution recording for 100+
evaluations at 1.47x the optimum showed a poor family of boolean-flag combinations: a config of
the good family had been measured, one field from a 1.07x config, but nothing climbed from it,
because the GP's local steps, the climber and the perturbations all start from the incumbent.
The engine keeps up to ``elites`` measured configs, best first, pairwise ``elite_distance``
fields apart; once the best has stalled for ``elite_stall`` evaluations, half the perturbations
start from another elite, and the climber, at a local optimum or after ``climb_cap`` fruitless
neighbours, climbs on from the best elite it has not stood on.  20 repeats, budget 200, seeds
0 / 100 / 200: mean 0.707 / 0.735 / 0.717 -> 0.725 / 0.747 / 0.718, worst space 0.47 / 0.53 /
0.49 -> 0.57 / 0.59 / 0.51 (``benchmarks/search_quality/PASSES.md``, fifth pass); perturbing
from other elites always (no stall) cost the deceptive convolution space, whose basin is left
only by jumps from the incumbent.

Why the GP regresses normal scores of the ranks (``y_warp`` "copula", ``surrogate_aux.warp``).
Log-times are heavy-tailed: a few configs many times slower than the rest set the GP's amplitude
and length-scales, while the search only needs the good configs in order.  Over eight seeds
(280 repeats, budget 200) the mean score rose from 0.695 +- 0.005 to 0.722 +- 0.004, higher at 7 of
8 seeds; the worst space did not move beyond noise (0.53 +- 0.02 both; the isolated optimum of
convolution_A100 is told apart by magnitude, which ranks flatten).  The sixth pass's other options
(a GP lead until the first restart, a late cap on the climber, subspace-LCB perturbations,
undecayed credit) were not adopted: none raised the worst space beyond noise at 60 repeats a seed
(they left the tree with the other passes' unadopted options; the benchmarks README says where they run).

The start stays the default plus random draws (twelfth pass, ``surrogate_aux.startup_configs``):
space-filling starts and an early bound moved the first evaluations, not the score.

Why ordered fields may be ordinal in the kernel, and the climber capped at 0.15 of the steps
(thirteenth pass, ``gp_model._GP``).  Under Hamming a field's values are only equal or not, so a
good block size of 64 says as much about 128 as about 1024.  With ``gp_ordinal_fit`` each ordered
field's term is Hamming or ``|index difference|`` by the marginal likelihood at every refit.  With
the cap (ninth pass), over 180 repeats at seeds 1000 / 2000 / 3000: mean 0.718 +- 0.005 -> 0.757
+- 0.005, higher at each seed, five spaces up beyond noise (convolution_A4000 +0.05,
dedispersion_MI250X +0.12), none down beyond it; the worst space, convolution_A100, 0.52 -> 0.50
+- 0.02 (ordinal terms smooth over its isolated optimum; the cap gives its GP steps back).

Why integer fields get an alignment column (twenty-fourth pass; ``gp_align``,
``gp_model.alignment_columns``).  Sizes divisible by the same power of two (multiples of the warp,
the wavefront, a memory transaction) behave alike on a GPU, so along a block size of 16, 32, 48,
64, ... the times form a sawtooth, not a slope: neither the ordinal term (a slope) nor Hamming
(every value on its own) carries what one aligned size says about the others.  Each integer field
whose values are not a run of powers of two gets a column with its values' power-of-two
divisibility, whose length-scale the likelihood fits, or switches off, like any field's.  Over 180
repeats at seeds 1000 / 2000 / 3000 it lifted both convolution spaces at once, where every earlier
pass traded one for the other (figures: ``benchmarks/search_quality/PASSES.md``, twenty-fourth pass).

Why half of the GP's global steps use a second GP on log-times (``global_warp``, ``global_fit``,
``global_share``; eighteenth pass, adopted in the twenty-fifth beside ``gp_align``).  Ranks suit
landscapes told apart by order, log-times those told apart by magnitude (an isolated optimum far
ahead of the rest); one engine cannot know which it faces, so its global steps alternate between a
model of each, while the fit of the main GP and the local steps keep the ranks.  Pooled over 180
repeats: worst space 0.55 -> 0.59, mean unchanged (0.763 -> 0.761 +- 0.004).

Why the tabu lifts past half of an evaluation budget (``tabu_until`` 0.5; twenty-seventh pass,
adopted in the thirty-sixth).  The tabu is for escaping: early in a run it pushes restarts out of
a basin the search has settled in.  Late in a run it can close what is left to find: traces on a
recording with an isolated optimum showed the restart closing the optimum's own family (its best
configs two fields apart), so the run stayed 1.07-1.11x off where the plain GP found the optimum.
Past half the budget the balls close nothing, so the late global steps may return to any region
(diversify early, intensify late).  It reads only the evaluation count (under a budget of time
alone it never lifts) and leaves every run identical up to there, so it cannot cost the early
evaluations that short-cutoff spaces are scored on.  PASSES.md has the rows at four seeds.

Why likely failures are left out of the GP's steps (``fail_block`` 0.5; thirty-ninth pass).  The GP
leaves failed configs out of its regression (``gp``'s docstring: the fastest configs border the failing
ones, and telling failures as slow steered away from the optimum), so a failed config's neighbours keep
the largest uncertainty next to the good big-tile configs, and the bound walked into the failing region
one config at a time: 12 runs spent 25-33% of their first 100 evaluations on failures where the spaces
hold 9-14% (TPE: about the space's share).  So the failure indicator (1 failed, 0 ran) of every measured
config is kriged with the main GP's kernel (its length-scales, refitted with it), and a config whose
kriged indicator exceeds ``fail_block`` is left out of the global and local steps (first 100: 11-20%).
The model is built at the first failure, so a space without failures runs exactly as before.  Seed
1000, 60 repeats: held-out mean 0.509 -> 0.542 (+0.033 +- 0.024; the SwiGLU GEMMs +0.13 and +0.11),
nothing lower beyond 0.4 standard errors; development spaces over seeds 1000 and 2000: mean 0.766 ->
0.769, matmul_4096_h100 -0.027 +- 0.018 (its optimum borders the failing tiles), matmul 256x8192x8192
+0.029 (``benchmarks/search_quality/PASSES.md``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from kerntune.evaluate.trial import Trial
from kerntune.space import Config
from kerntune.strategies.base import SearchContext
from kerntune.strategies.climber import Climber
from kerntune.strategies.forest_model import forest
from kerntune.strategies.gp import _ENUMERATE_LIMIT, _FIT_UNTIL, _GP, _MAX_OBS, _POOL_MAX, _encode, _enumerated
from kerntune.strategies.gp_model import _NOISE, alignment_columns, ordinal_steps
from kerntune.strategies.parzen import Parzen
from kerntune.strategies.surrogate_aux import one_blas_thread, startup_configs, warp
from kerntune.strategies.surrogate_options import SurrogateOptions
from kerntune.strategies.surrogate_perturb import PerturbSteps


@dataclass
class _Region:
    """One search region: its incumbent (best measured since it began) and its gain clock."""

    best: float = math.inf
    best_config: Config | None = None
    since_gain: int = 0
    restarts: list[Config] = field(default_factory=list)


class SurrogateSearch(PerturbSteps):
    """Proposes configs by GP-LCB within the current region; learns from ``tell``."""

    def __init__(self, ctx: SearchContext, opts: SurrogateOptions | None = None) -> None:
        self.ctx, self.opts = ctx, opts or SurrogateOptions()
        space = ctx.space
        # room for the trials measured before the engine (told first: warm starts, a model's) and its own
        self.cap = _MAX_OBS if ctx.remaining_evals is None else min(len(ctx.history) + ctx.remaining_evals, _MAX_OBS)
        self.budget0 = ctx.remaining_evals  # evaluations this engine may spend (None: a time budget)
        self.gmodel: _GP | None = None
        if self.opts.model != "gp":  # the eleventh pass's random forest (forest_model.py)
            self.model = forest(space.encoded_width, self.cap, self.opts, ctx.rng)
        else:
            kernel = {"steps": ordinal_steps(space), "alpha": self.opts.gp_ordinal, "adaptive": self.opts.gp_ordinal_fit,
                      "aux": alignment_columns(space) if self.opts.gp_align else None}
            self.model = _GP(space.encoded_width, self.cap, _NOISE, **kernel)  # type: ignore[arg-type]
            if self.opts.global_fit and self.opts.global_split:
                # global_fit (eighteenth pass): the global steps' own GP, the same kernel family fitted on global_warp's targets
                self.gmodel = _GP(space.encoded_width, self.cap, _NOISE, **kernel)  # type: ignore[arg-type]
        #: fail_block: the failure indicator of every measured config, kriged with the main GP's kernel;
        #: built at the first failure (a space without failures pays nothing for it)
        self.fmodel: _GP | None = None
        self._fkernel = kernel if self.opts.fail_block is not None and self.opts.model == "gp" else None
        self.configs: list[Config] = []
        self.index: dict[str, int] = {}
        self.measured: list[bool] = []
        if space.cartesian_size <= _ENUMERATE_LIMIT:
            cfgs, keys, feats = _enumerated(space)
            if len(cfgs) > _POOL_MAX:
                pick = sorted(ctx.rng.sample(range(len(cfgs)), _POOL_MAX))
                cfgs, keys, feats = [cfgs[i] for i in pick], [keys[i] for i in pick], feats[pick]
            self._grow(cfgs, keys, feats)
        else:
            self._grow(ctx.sample_unmeasured(_POOL_MAX))
        self.live = np.ptp(self.model.pool, axis=0) > 0 if self.configs else np.zeros(space.encoded_width, bool)
        self.ys: list[float] = []
        self.best_value = math.inf  # log-time of the best measured config (ys stops growing at the cap)
        self.seen: set[str] = set()
        self.since_fit = self.opts.refit_every
        self.region = _Region()
        self.tabu: list[np.ndarray] = []     # encoded centres of closed basins
        self.tabu_mask = np.zeros(len(self.configs), dtype=bool)
        self.stall_after = self.opts.stall_after(len(space.params))
        self.region_radius = self.opts.radius(len(space.params))
        self.restarts = 0
        self._restart_pending = False
        self.climber = Climber(ctx)
        self._elite_cache: tuple[int, list[Config]] = (-1, [])
        self.since_best = 0                        # evaluations since the best of all last improved
        if self.opts.climb_elites and self.opts.elites > 0:
            self.climber.elites = self.elites
            self.climber.cap = self.opts.climb_cap
        self.owner: dict[str, str] = {}            # config key -> the member that proposed it
        self.credit = {"gp": 0.0, "climb": 0.0}    # running mean log-time gain per proposal of each member
        self.steps = {"gp": 0, "climb": 0}
        self.parzen = Parzen(self.model.pool) if self.opts.perturb_guide > 0 and self.configs else None
        self.all_feats: list[np.ndarray] = []      # every measured config (failures too), for the good density
        self.all_vals: list[float] = []
        self.widths = [p.width for p in space.params]
        self.columns = {p.name: sum(self.widths[:i]) for i, p in enumerate(space.params) if p.width == 1}

    # -- pool -------------------------------------------------------------------------------
    def _grow(self, cfgs: Sequence[Config], keys: Sequence[str] | None = None, feats: np.ndarray | None = None) -> None:
        space = self.ctx.space
        keys = keys if keys is not None else [space.key(c) for c in cfgs]
        new = [i for i, k in enumerate(keys) if k not in self.index]
        for i in new:
            self.index[keys[i]] = len(self.configs)
            self.configs.append(cfgs[i])
            self.measured.append(keys[i] in self.ctx.measured)
        if new:
            f = feats[new] if feats is not None else _encode(space, [cfgs[i] for i in new])
            self.model.add_pool(f)
            if self.gmodel is not None:
                self.gmodel.add_pool(f)
            if self.fmodel is not None:
                self.fmodel.add_pool(f)
            if hasattr(self, "tabu_mask"):
                extra = np.zeros(len(new), dtype=bool)
                for c in self.tabu:
                    extra |= np.sum(f != c, axis=1) <= self.opts.tabu_radius
                self.tabu_mask = np.concatenate([self.tabu_mask, extra])
            if getattr(self, "parzen", None) is not None:
                self.parzen.set_pool(self.model.pool)  # type: ignore[union-attr]

    # -- learning ---------------------------------------------------------------------------
    def tell(self, batch: Sequence[Config], trials: Sequence[Trial], own: bool = True) -> None:
        """Record measured configs (any source: the model's too) and move the region clock.

        ``own=False`` for configs the engine did not propose (a model's answers): they teach the
        GP, but they move the search region only when they beat the best of all, and they do not
        run its stall clock.  After a restart the region is fresh, and a model that keeps
        answering in the family it believes in would otherwise become the new region's incumbent
        and pull the search back into the basin the restart left."""
        with one_blas_thread():
            self._tell(batch, trials, own)

    def _tell(self, batch: Sequence[Config], trials: Sequence[Trial], own: bool = True) -> None:
        space = self.ctx.space
        for cfg, t in zip(batch, trials):
            key = space.key(space.canonical(cfg))
            if key not in self.ctx.measured or key in self.seen:
                continue  # invalid, over budget, or told already
            self.seen.add(key)
            best_of_all = self.best_value
            if key in self.index:
                self.measured[self.index[key]] = True
            value = math.log(max(t.time_ms, 1e-12)) if t.ok else math.inf  # type: ignore[arg-type]
            self.all_feats.append(_encode(space, [cfg])[0])
            self.all_vals.append(value)
            self._tell_failure_model()
            self.since_best = 0 if math.isfinite(value) and value < best_of_all - 1e-9 else self.since_best + 1
            member = self.owner.pop(key, None)
            if member is not None:
                best_before = min(self.ys) if self.ys else math.inf
                gain = best_before - value if math.isfinite(value) and math.isfinite(best_before) else 0.0
                self.credit[member] = (1 - self.opts.credit_rate) * self.credit[member] + self.opts.credit_rate * max(gain, 0.0)
                if member == "climb":
                    self.climber.observe(cfg, self.ctx.value(t))
            if t.ok and self.model.n < self.cap:
                self.ys.append(value)
                feat = _encode(space, [cfg])[0]
                self.model.add_obs(feat)
                if self.gmodel is not None:
                    self.gmodel.add_obs(feat)
                self.since_fit += 1
            self.best_value = min(self.best_value, value)
            if value < self.region.best - 1e-9 and (own or value < best_of_all - 1e-9):
                self.region.best, self.region.best_config, self.region.since_gain = value, dict(t.config), 0
                self._grow(self.ctx.unmeasured(space.neighbours(t.config, "hamming")))
            elif own:
                self.region.since_gain += 1
        if self.region.since_gain >= self.stall_after and self.region.best_config is not None:
            self._restart()

    @property
    def stalled(self) -> bool:
        """True right after a restart was triggered (``auto`` asks the model again then)."""
        return self._restart_pending

    def _restart(self) -> None:
        centre = _encode(self.ctx.space, [self.region.best_config])[0]  # type: ignore[list-item]
        self.tabu.append(centre)
        self.tabu_mask |= np.sum(self.model.pool != centre, axis=1) <= self.opts.tabu_radius
        self.region = _Region()
        self.restarts += 1
        self._restart_pending = True

    def _tabu_lifted(self) -> bool:
        """``tabu_until``: past that share of the evaluation budget the tabu balls close nothing."""
        return (self.opts.tabu_until is not None and bool(self.budget0)
                and len(self.all_vals) >= self.opts.tabu_until * self.budget0)  # type: ignore[operator]

    def _normalised(self) -> np.ndarray:
        """The GP's targets: standardised log-times, optionally warped (``y_warp``,
        ``surrogate_aux.warp``)."""
        return self._targets(self.opts.y_warp)

    def _targets(self, how: str) -> np.ndarray:
        y = warp(np.array(self.ys), how, self.opts.y_clip)
        return (y - y.mean()) / (y.std() or 1.0)

    def _refit(self, yn: np.ndarray) -> None:
        """Refit the kernel on ``yn`` (and ``global_fit``'s GP on ``global_warp``'s targets) when due."""
        if self.since_fit >= self.opts.refit_every and self.model.n <= _FIT_UNTIL:
            self.model.refit(yn, self.live)
            if self.gmodel is not None:
                self.gmodel.refit(self._targets(self.opts.global_warp), self.live)  # type: ignore[arg-type]
            if self.fmodel is not None:
                self.fmodel.set_kernel(self.model.theta, self.model.kind)
            self.since_fit = 0

    def _tell_failure_model(self) -> None:
        """Bring the failure model up to ``all_feats`` (its observations are their prefix, failures being the
        infinite ``all_vals``); it is built at the first failure."""
        if self._fkernel is None:
            return
        if self.fmodel is None:
            if math.isfinite(self.all_vals[-1]):
                return
            self.fmodel = _GP(self.ctx.space.encoded_width, self.cap, _NOISE, **self._fkernel)  # type: ignore[arg-type]
            self.fmodel.add_pool(self.model.pool)
            self.fmodel.set_kernel(self.model.theta, self.model.kind)
        while self.fmodel.n < min(len(self.all_feats), self.cap):
            self.fmodel.add_obs(self.all_feats[self.fmodel.n])

    def _likely_failures(self) -> np.ndarray | None:
        """``fail_block``: pool configs whose kriged failure indicator exceeds it (None: none known)."""
        if self.fmodel is None:
            return None
        ind = (~np.isfinite(self.all_vals[: self.fmodel.n])).astype(float)
        if not ind.any():
            return None
        mu, _ = self.fmodel.predict(ind - ind.mean())
        return mu + ind.mean() > self.opts.fail_block

    def screen(self, cfgs: Sequence[Config]) -> list[float]:
        """The surrogate's LCB for arbitrary configs (a model's proposals), lower is better."""
        if not self.ys or not cfgs:
            return [0.0] * len(cfgs)
        yn = self._normalised()
        mu, sd = self.model.predict_at(_encode(self.ctx.space, cfgs), yn)
        return list(mu - self.opts.kappa * sd)

    # -- proposing --------------------------------------------------------------------------
    def startup_batch(self) -> list[Config]:
        """The default and random configs up to ``startup`` successes-worth of trials."""
        return startup_configs(self.ctx, self.opts)

    def propose(self, n: int, taken: set[str] | None = None) -> list[Config]:
        """Up to ``n`` unmeasured configs (kriging believer within a batch)."""
        with one_blas_thread():
            return self._propose(n, taken)

    def climb_probability(self) -> float:
        """The climber's share of the next steps: credit-proportional (probability matching),
        bounded by ``min_share`` on both sides and capped at ``climb_max``, the prior share until
        either has credit.  With ``climb_max`` at or below ``min_share`` (the defaults: 0.15, 0.3)
        the share is ``climb_max`` throughout, so ``climb_share`` (but for 0) and ``credit_rate`` do not act."""
        credit = self.credit
        total = credit["gp"] + credit["climb"]
        share = credit["climb"] / total if total > 1e-12 else self.opts.climb_share
        share = min(max(share, self.opts.min_share), 1.0 - self.opts.min_share)
        if self.opts.climb_max is not None:
            share = min(share, self.opts.climb_max)
        return share

    def _propose(self, n: int, taken: set[str] | None) -> list[Config]:
        ctx, space = self.ctx, self.ctx.space
        taken = set(taken or ())
        out: list[Config] = []
        if self.ys and self.opts.climb_share > 0:
            p = self.climb_probability()
            for _ in range(sum(ctx.rng.random() < p for _ in range(n))):
                c = None
                if ctx.rng.random() < self.opts.perturb_share and ctx.best is not None:
                    c = self.perturb(self._perturb_origin())
                if c is None or space.key(space.canonical(c)) in taken:
                    c = self.climber.propose(taken)
                if c is None:
                    break
                k = space.key(space.canonical(c))
                taken.add(k)
                self.owner[k] = "climb"
                self.steps["climb"] += 1
                out.append(c)
        picks = self._gp_propose(n - len(out), taken)
        for c in picks:
            self.owner[space.key(space.canonical(c))] = "gp"
            self.steps["gp"] += 1
        return out + picks

    def _gp_propose(self, n: int, taken: set[str]) -> list[Config]:
        ctx, space = self.ctx, self.ctx.space
        if n <= 0:
            return []
        if not self.ys:
            return [c for c in ctx.sample_unmeasured(n + len(taken)) if space.key(c) not in taken][:n]
        mask = np.array(self.measured, dtype=bool)
        for k in taken:
            if k in self.index:
                mask[self.index[k]] = True
        yn = self._normalised()
        self._refit(yn)
        # global_warp (eighteenth pass): the global steps predict from these targets (under global_fit,
        # with their own GP); the fit (else) and the local steps keep y_warp's
        split = self.opts.global_split
        yg = self._targets(self.opts.global_warp) if split else yn  # type: ignore[arg-type]
        gmodel = self.gmodel if self.gmodel is not None else self.model
        picks: list[int] = []
        fantasies = 0
        anchor = self.region.best_config or (self.region.restarts[0] if self.region.restarts else None)
        centre_feat = _encode(space, [anchor])[0] if anchor is not None else None
        likely_fail = self._likely_failures()
        for q in range(n):
            mu, sd = self.model.predict(yn)
            mu_g, sd_g = mu, sd
            if split and (self.opts.global_share >= 1.0 or ctx.rng.random() < self.opts.global_share):
                mu_g, sd_g = gmodel.predict(yg)
            restart = self._restart_pending and q == 0
            kappa_q = self.opts.explore_kappa if restart else self.opts.kappa
            score = mu_g - kappa_q * sd_g
            blocked = mask if self._tabu_lifted() else mask | self.tabu_mask
            if likely_fail is not None:
                blocked = blocked | likely_fail
            if self.restarts and centre_feat is not None:
                # A restarted region searches near its own start: the global model would pull
                # it back towards the regions it knows, which is what the restart escapes.
                blocked = blocked | (np.sum(self.model.pool != centre_feat, axis=1) > self.region_radius)
            if blocked.all():
                blocked = mask  # every region searched: the tabu yields
            centre = self.region.best_config
            if not restart and centre is not None and ctx.rng.random() < self.opts.local_share:
                near = [self.index[k] for k in map(space.key, space.neighbours(centre, "hamming")) if k in self.index]
                near = [i for i in near if not mask[i] and (likely_fail is None or not likely_fail[i])]
                if near:
                    if mu_g is not mu:
                        score = mu - kappa_q * sd
                    local = np.ones(len(mask), dtype=bool)
                    local[near] = False
                    score[local] = np.inf
                    blocked = mask
            score[blocked] = np.inf
            pick = int(np.argmin(score))
            if not np.isfinite(score[pick]):
                score = mu - self.opts.kappa * sd
                score[mask] = np.inf
                pick = int(np.argmin(score))
                if not np.isfinite(score[pick]):
                    break
            if restart and self._restart_pending:
                self._restart_pending = False
                self.region.restarts.append(dict(self.configs[pick]))
            picks.append(pick)
            mask[pick] = True
            if q + 1 < n and self.model.n < self.cap:
                if split:  # the believer's value under each target's own mean
                    yg = np.append(yg, (gmodel.predict(yg)[0] if mu_g is mu else mu_g)[pick])
                self.model.add_obs(self.model.pool[pick])
                if self.gmodel is not None:
                    self.gmodel.add_obs(self.model.pool[pick])
                yn = np.append(yn, mu[pick])
                fantasies += 1
        self.model.drop_last(fantasies)
        if self.gmodel is not None:
            self.gmodel.drop_last(fantasies)
        return [self.configs[i] for i in picks]


def run(ctx: SearchContext, opts: SurrogateOptions | None = None, batch_size: int | None = None) -> None:
    """The engine alone until the budget ends (``auto`` without a model)."""
    engine = SurrogateSearch(ctx, opts)
    if batch_size is None:
        batch_size = 1 if ctx.evaluator.simulated_clock else max(1, min(8, ctx.batch_parallelism))
    earlier = list(ctx.history)
    engine.tell([t.config for t in earlier], earlier)
    first = engine.startup_batch()
    if first:
        engine.tell(first, ctx.evaluate(first, source="auto:startup"))
    try:
        while True:
            batch = engine.propose(batch_size)
            if not batch:
                ctx.stop_reason = "space exhausted"
                return
            engine.tell(batch, ctx.evaluate(batch, source="auto:restart" if engine.stalled else "auto:surrogate"))
    finally:
        if engine.restarts:
            ctx.note(f"auto: {engine.restarts} restart(s) after {engine.stall_after} evaluations without gain")
