"""Gaussian-process Bayesian optimisation over a pool of valid configs: the
default model of ``bayes`` (``bayes`` with ``surrogate="tpe"`` is Optuna's TPE).

Why this design.  Tuned on the recorded Kernel Tuner convolution space (A100,
4362 configs, one isolated optimum), checked on dedispersion and three Triton
matmul recordings (H100); methodology score at 200 evaluations, means over
40-80 seeds, where 20 seeds alone scatter by about +-0.06:

* Every unmeasured valid config is scored (the valid set is enumerated once
  and cached per Space; huge spaces use a random pool that grows by the
  incumbent's neighbours), so nothing is ever snapped from an invalid
  proposal to a valid one: that snapping is what held TPE back (~0.45).
* Kernel ``exp(-sum_e theta_e * [x_e != x'_e])`` over the encoded fields: a
  Hamming kernel.  Kernel times are jagged along block sizes (a multiple of
  32 is fast, its neighbours slow), so an ordinal distance fits worse: 0.59
  against 0.66 with ordinal terms added, 0.56 ordinal alone.
* Per-field length-scales by marginal likelihood over the narrow grid
  ``_GRID``: with tens of points a free ARD fit switches fields off and
  misleads the search (0.57 with a grid 0.02-6.4, 0.46 with one shared scale).
* log-times, standardised.  Failed configs are left out of the regression:
  the fastest configs border the ones that fail (shared memory, registers),
  and telling failures as slow, or modelling a failure probability, steered
  away from the optimum (Triton matmul 256x8192x8192: 0.49 and 0.55 vs 0.70).
* Lower confidence bound, ``kappa`` 2.5 (1.5: 0.57).  With probability
  ``local_share`` a step is restricted to the incumbent's one-field
  neighbours, which is where pattern search wins on smooth spaces (matmul
  +0.03-0.08, convolution unchanged).  A short random start (``startup`` 5:
  default + 4 random) leaves more of the budget to the model.

With ``ctx.transfer`` (past runs of the kernel on nearby shapes, see
``kerntune.run.warm_start``) the past runs' prediction for this shape is the GP's
prior mean (``kerntune.strategies.gp_prior``: one GP per past run, shrunk to
a neutral value away from what the run measured, runs weighted by shape
distance) and the GP models the residual; the first pick is the prior's best.
``transfer_model="task"`` keeps the earlier design, a multi-task GP: the past
measurements are observations too, the kernel gains one Hamming term on the
task (its correlation fitted by marginal likelihood), no random start, and
configs that only ever failed in the past runs are tried last.  The prior
needs fewer evaluations than the task design on two of the three recorded
H100 matmul shapes (4096^3: 11.5 against 18, 256x8192x8192: 9 against 68.5)
and more on the third (8192x8192x512: 122 against 106.5; gp_prior's docstring).

The Cholesky factor's inverse and ``V = K(pool, obs) L^-T`` grow by one column
per observation, so a step costs O(pool * n); only a change of length-scales
rebuilds them.  On convolution, 20 repeats take about 15-20 s.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from kerntune.evaluate.trial import Trial
from kerntune.space import Config, Space
from kerntune.strategies.base import SearchContext
from kerntune.strategies.gp_model import (  # noqa: F401  (surrogate and the tests import these from here)
    _ENUMERATE_LIMIT,
    _FIT_UNTIL,
    _GP,
    _MAX_OBS,
    _POOL_MAX,
    _encode,
    _enumerated,
)
from kerntune.strategies.gp_prior import PastPrior
from kerntune.strategies.surrogate_aux import one_blas_thread

_TRANSFER_STARTUP = 0       # random start (default config included) when past runs are told


def _past_observations(space: Space, transfer: Sequence[dict[str, float]], total: int = _FIT_UNTIL * 2 // 3
                       ) -> list[tuple[int, Config, float]]:
    """(task, config, centred log-time ratio) for the best finite entries of each past run, at
    most ``total`` in all, so that the length-scales are still refitted while this run's own
    measurements come in (refits stop at ``_FIT_UNTIL`` observations); task 1 is the first run
    (the new shape is task 0)."""
    per_run = total // max(len(transfer), 1)
    out: list[tuple[int, Config, float]] = []
    for task, run in enumerate(transfer, 1):
        finite = sorted((v, k) for k, v in run.items() if math.isfinite(v))[:per_run]
        if len(finite) < 2:
            continue
        mean = sum(v for v, _ in finite) / len(finite)
        out += [(task, space.from_key(k), v - mean) for v, k in finite]
    return out


def search(ctx: SearchContext, startup: int | None = None, kappa: float = 2.5, local_share: float = 0.3,
           refit_every: int = 5, batch_size: int | None = None, transfer_model: str = "prior") -> None:
    """The GP search (``_search``) with BLAS held to one thread, as ``auto``'s surrogate holds it: its
    factorisations are small, and several BLAS threads on a busy 2-core machine took each solve to about
    9 ms (6.5 of a 120-evaluation run's 8.1 s; same picks either way).  Kernels measured meanwhile run in
    worker processes of their own, which the limit does not reach."""
    with one_blas_thread():
        _search(ctx, startup, kappa, local_share, refit_every, batch_size, transfer_model)


def _search(ctx: SearchContext, startup: int | None, kappa: float, local_share: float, refit_every: int,
            batch_size: int | None, transfer_model: str) -> None:
    """``batch_size`` configs per step (default: 1 on a recording, the run's parallelism (its evaluator's)
    up to 8 on a real one, where a batch compiles in parallel).  ``transfer_model`` says how past runs
    (``ctx.transfer``) are used: ``prior`` (their shrunk, distance-weighted prediction as the GP's prior
    mean, ``kerntune.strategies.gp_prior``), ``task`` (their measurements as a second task of one GP,
    the earlier design) or ``none``."""
    space = ctx.space
    if transfer_model not in ("prior", "task", "none"):
        raise ValueError(f"gp: transfer_model must be prior, task or none, not {transfer_model!r}")
    if batch_size is None:
        batch_size = 1 if ctx.evaluator.simulated_clock else max(1, min(8, ctx.batch_parallelism))
    # room for the trials measured before this strategy (told first) and for its own
    cap = _MAX_OBS if ctx.remaining_evals is None else min(len(ctx.history) + ctx.remaining_evals, _MAX_OBS)
    past = _past_observations(space, ctx.transfer) if transfer_model == "task" else []
    # One extra encoded column with past runs: which run an observation is from (0 = this one).
    # (A second column marking this run, so that past runs may agree with each other more than
    # with this shape, was tried: better on 4096^3, never within 2% on 8192x8192x512.)
    tasks = 1 if past else 0
    here = np.zeros(tasks)
    cap += len(past)
    model = _GP(space.encoded_width + tasks, cap)

    def enc(cfgs: Sequence[Config]) -> np.ndarray:
        feats = _encode(space, cfgs)
        return np.hstack([feats, np.tile(here, (len(cfgs), 1))])
    configs: list[Config] = []
    index: dict[str, int] = {}
    measured: list[bool] = []
    prior = None                    # the past runs' prediction (transfer_model "prior")
    prior_of = np.empty(0)          # ... for each pool entry

    def grow(cfgs: Sequence[Config], keys: Sequence[str] | None = None, feats: np.ndarray | None = None) -> None:
        nonlocal prior_of
        keys = keys if keys is not None else [space.key(c) for c in cfgs]
        new = [i for i, k in enumerate(keys) if k not in index]
        for i in new:
            index[keys[i]] = len(configs)
            configs.append(cfgs[i])
            measured.append(keys[i] in ctx.measured)
        if new:
            f = feats[new] if feats is not None else _encode(space, [cfgs[i] for i in new])
            model.add_pool(np.hstack([f, np.tile(here, (len(new), 1))]))
            if prior is not None:
                prior_of = np.concatenate([prior_of, prior.predict(f)])

    if space.cartesian_size <= _ENUMERATE_LIMIT or (space.materialised and space.count() <= _ENUMERATE_LIMIT):
        cfgs, keys, feats = _enumerated(space)
        if len(cfgs) > _POOL_MAX:
            pick = sorted(ctx.rng.sample(range(len(cfgs)), _POOL_MAX))
            cfgs, keys, feats = [cfgs[i] for i in pick], [keys[i] for i in pick], feats[pick]
        grow(cfgs, keys, feats)
    else:
        grow(ctx.sample_unmeasured(_POOL_MAX))
    live = np.ptp(model.pool, axis=0) > 0 if len(configs) else np.zeros(model.pool.shape[1], bool)
    past_y = np.array([y for _, _, y in past])
    if ctx.transfer and transfer_model == "prior":
        prior = PastPrior(space, ctx.transfer, live) if len(configs) else None
        if prior:
            prior_of = prior.predict(model.pool)
            ctx.note(f"gp: prior mean from {len(prior.runs)} past run(s) on nearby shapes")
        else:
            prior = None
    failed_before: set[str] = set()
    if past:
        live[-1] = True
        for task, cfg, y in past:
            model.add_obs(np.append(_encode(space, [cfg])[0], task))
        failed_before = {k for run in ctx.transfer for k, v in run.items() if not math.isfinite(v)}
        failed_before -= {space.key(c) for _, c, _ in past}
        ctx.note(f"gp: {len(past)} measurements of {len(ctx.transfer)} past run(s) on nearby shapes "
                         "as a second task")
    ys: list[float] = []
    ys_prior: list[float] = []      # the prior at each of ys's configs
    seen: set[str] = set()

    def record(batch: Sequence[Config], trials: Sequence[Trial]) -> None:
        for cfg, t in zip(batch, trials):
            key = space.key(space.canonical(cfg))
            if key not in ctx.measured or key in seen:
                continue  # invalid, over budget, or told already
            seen.add(key)
            if key in index:
                measured[index[key]] = True
            if t.ok and model.n < cap:
                ys.append(math.log(max(t.time_ms, 1e-12)))  # type: ignore[arg-type]
                model.add_obs(enc([cfg])[0])
                if prior is not None:
                    ys_prior.append(float(prior_of[index[key]]) if key in index else float(prior.predict(enc([cfg]))[0]))

    if startup is None:
        startup = _TRANSFER_STARTUP if past else 5
    # Trials measured before this strategy started (the LLM rounds of llm-seeded, say) are told
    # first; the random start only tops them up to ``startup``.
    earlier = list(ctx.history)
    record([t.config for t in earlier], earlier)
    if prior is not None:  # the prior's best, then random (measured: better than the default first)
        first = [configs[i] for i in np.argsort(prior_of) if not measured[i]][: min(1, max(startup - len(earlier), 0))]
    else:
        first = ctx.unmeasured([space.default])[: max(startup - len(earlier), 0)]
    first += ctx.sample_unmeasured(max(startup - len(earlier) - len(first), 0), besides=first)
    if first:
        record(first, ctx.evaluate(first, source="gp:startup"))
    since_fit = refit_every
    best = math.inf
    while True:
        if ctx.best is not None and ctx.value(ctx.best) < best:
            best = ctx.value(ctx.best)
            grow(ctx.unmeasured(space.neighbours(ctx.best.config, "hamming")))
        mask = np.array(measured, dtype=bool)
        if not ys and not past:  # nothing has run yet: keep sampling
            batch = ctx.sample_unmeasured(1)
            if not batch:
                ctx.stop_reason = "space exhausted"
                return
            record(batch, ctx.evaluate(batch, source="gp:random"))
            continue
        y = np.array(ys)
        offset = None  # with a prior: the prior mean of every pool entry, in the units of yn
        if prior is not None:
            # The GP models the residual log-time - prior; its scale is this run's spread, floored
            # at half the prior's (one or two measurements say little about the spread).
            resid = y - np.array(ys_prior)
            scale = max(float(y.std()) if len(y) > 1 else 0.0, 0.5 * float(np.std(prior_of))) or 1.0
            centre = float(resid.mean()) if len(resid) else 0.0
            yn = (resid - centre) / scale
            offset = (prior_of - centre) / scale
        elif past:
            # Each task is centred on its own mean (shapes differ in level), then one scale.
            allc = np.concatenate([past_y, y - y.mean() if len(y) else y])
            yn = allc / (allc.std() or 1.0)
        else:
            yn = (y - y.mean()) / (y.std() or 1.0)
        if since_fit >= refit_every and model.n <= _FIT_UNTIL:
            model.refit(yn, live)
            since_fit = 0
        picks: list[int] = []
        fantasies = 0
        late = np.array([k in failed_before for k in index], dtype=bool) if failed_before else None
        for q in range(batch_size):
            mu, sd = model.predict(yn)
            score = (mu if offset is None else mu + offset) - kappa * sd
            if local_share and ctx.best is not None and ctx.rng.random() < local_share:
                near = [index[k] for k in map(space.key, space.neighbours(ctx.best.config, "hamming")) if k in index]
                near = [i for i in near if not mask[i]]
                if near:
                    local = np.ones(len(mask), dtype=bool)
                    local[near] = False
                    score[local] = np.inf
            score[mask] = np.inf
            if late is not None:
                score[late & ~mask] = 1e9  # finite: still taken once nothing else is left
            pick = int(np.argmin(score))
            if not np.isfinite(score[pick]):
                break
            picks.append(pick)
            mask[pick] = True
            if q + 1 < batch_size and model.n < cap:
                # Kriging believer: pretend the pick came out as predicted, so the next pick of
                # this batch goes elsewhere; the pretended observations are dropped below.
                model.add_obs(model.pool[pick])
                yn = np.append(yn, mu[pick])
                fantasies += 1
        model.drop_last(fantasies)
        if not picks:
            ctx.stop_reason = "space exhausted"
            return
        batch = [configs[i] for i in picks]
        record(batch, ctx.evaluate(batch, source="gp"))
        since_fit += len(picks)
