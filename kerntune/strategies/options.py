"""Every strategy's options, typed and bounded in one place.

Options arrive from the command line as ``-o NAME=JSON`` (or from a stored run on
``--resume``), so they are untrusted: ``population=0`` once scored -47.9 silently,
``population=1e9`` hung, ``kappa=nan`` poisoned the GP.  Each strategy has one pydantic
model here; :func:`validate_options` checks a strategy's options against it before
anything is measured and turns the first problem into one line.  The models are also
the options' documentation (``kerntune options``), so the docs cannot drift from the
checks.
"""

from __future__ import annotations

import json

from typing import Any, ClassVar, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from kerntune.errors import KerntuneError

#: Upper bounds that keep a mistyped number from hanging a run (a population of 1e9 tried to sample 1e9 configs).
_BIG = 100_000


class _Options(BaseModel):
    """Strict: JSON ``true`` is no count, ``"abc"`` no number, NaN and inf no value at all."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class ExhaustiveOptions(_Options):
    batch_size: Optional[int] = Field(None, ge=1, le=_BIG, description="configs per batch (default: 8 per worker, at least 32)")


class RandomOptions(_Options):
    batch_size: int = Field(8, ge=1, le=_BIG, description="configs drawn per batch")


class PatternOptions(_Options):
    initial: int = Field(10, ge=0, le=_BIG, description="random configs (the default first) before the climb")
    batch: int = Field(4, ge=1, le=_BIG, description="neighbours measured per step")
    perturb_fields: int = Field(3, ge=1, le=1000, description="fields changed at once when the climb is stuck")
    random_restart_share: float = Field(0.2, ge=0, le=1, description="share of restarts from a random config")


class GeneticOptions(_Options):
    population: int = Field(20, ge=2, le=10_000, description="configs per generation")
    mutation_rate: Optional[float] = Field(None, ge=0, le=1, description="chance that a field mutates (default max(1/params, 0.1))")
    elite: int = Field(2, ge=0, le=10_000, description="best configs kept unchanged into the next generation")
    tournament: int = Field(3, ge=1, le=10_000, description="configs drawn per parent selection")
    crossover_rate: float = Field(0.9, ge=0, le=1, description="chance that two parents are crossed")

    @model_validator(mode="after")
    def _fits(self) -> "GeneticOptions":
        if self.elite >= self.population:
            raise ValueError(f"elite ({self.elite}) must be smaller than population ({self.population})")
        return self


class GPOptions(_Options):
    startup: Optional[int] = Field(None, ge=0, le=_BIG, description="random configs before the model (default by budget)")
    kappa: float = Field(2.5, ge=0, le=100, description="exploration weight of the lower confidence bound")
    local_share: float = Field(0.3, ge=0, le=1, description="share of candidates drawn near the best")
    refit_every: int = Field(5, ge=1, le=_BIG, description="observations between hyperparameter refits")
    batch_size: Optional[int] = Field(None, ge=1, le=1024, description="configs proposed at once (default 1 on a recording, up to 8 on GPUs)")
    transfer_model: Literal["prior", "task", "none"] = Field("prior", description="how past runs inform the model")


class TPEOptions(_Options):
    startup: int = Field(5, ge=0, le=_BIG, description="random configs before the model")
    batch_size: int = Field(1, ge=1, le=1024, description="configs proposed at once")
    multivariate: bool = Field(False, description="model the parameters jointly")
    candidates: int = Field(100, ge=1, le=_BIG, description="candidates scored per proposal")
    local_share: float = Field(0.0, ge=0, le=1, description="share of candidates drawn near the best")


class BayesOptions(_Options):
    """``bayes`` is ``gp`` or ``tpe`` (``surrogate``); its other options are that surrogate's."""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)
    surrogate: Literal["gp", "tpe"] = Field("gp", description="the surrogate model: gp or tpe (then their options apply)")


class LLMOptions(_Options):
    initial: int = Field(25, ge=1, le=10_000, description="configs the model proposes in its first round")
    refine: int = Field(15, ge=1, le=10_000, description="configs per later round")
    max_rounds: int = Field(5, ge=1, le=10_000, description="model rounds at most")
    patience: int = Field(2, ge=1, le=10_000, description="rounds without improvement before stopping")
    min_improvement: float = Field(0.01, ge=0, le=1, description="relative gain that counts as improvement")
    target_ms: Optional[float] = Field(None, gt=0, description="stop once a config is this fast")
    temperature: float = Field(0.7, ge=0, le=2, description="sampling temperature of the model")
    include_source: bool = Field(True, description="show the kernel source in the prompt")
    include_hardware: bool = Field(True, description="show the GPU's facts in the prompt")
    include_hints: bool = Field(True, description="show tuning hints in the prompt")
    fallback: Literal["random", "pattern", "error"] = Field("pattern", description="who proposes when the model fails (error: stop)")
    warmup: int = Field(3, ge=0, le=10_000, description="configs (the default, then random ones) measured while the first call is out")
    max_tokens: int = Field(6000, ge=1, le=1_000_000, description="answer length cap per call")
    top_up: bool = Field(True, description="fill a round the model left short with fallback configs")
    tell_unspent: bool = Field(True, description="say so when the rounds end with evaluations unspent")

    #: llm-seeded refuses a fallback that would not act in its own words (``_rounds``)
    says_own_fallback: ClassVar[bool] = False

    @model_validator(mode="after")
    def _fallback_acts(self) -> "LLMOptions":
        """A fallback given (random or pattern) with ``top_up=false`` given too is refused: without the
        top-up a failed model call ends the rounds and no fallback ever proposes, so the option was
        accepted and did nothing.  (llm-seeded, whose top_up is false unless given, says it its own way.)"""
        given = self.model_fields_set
        if self.says_own_fallback:
            return self
        if {"fallback", "top_up"} <= given and self.top_up is False and self.fallback != "error":
            raise ValueError(f"fallback={self.fallback} has no effect with top_up=false: a failed model call ends"
                             " the model rounds (give top_up=true, or fallback=error to stop the run)")
        return self


class LLMSeededOptions(LLMOptions):
    rounds: int = Field(1, ge=1, le=10_000, description="model rounds before the classical strategy")
    then: Literal["exhaustive", "random", "pattern", "bayes", "genetic", "gp", "tpe"] = Field(
        "bayes", description="the classical strategy that continues")
    then_options: Optional[dict[str, Any]] = Field(None, description="options of that strategy")
    # llm-seeded sets these for its LLM phase unless given.
    patience: Optional[int] = Field(None, ge=1, le=10_000, description="as llm (default rounds + 1)")  # type: ignore[assignment]
    top_up: Optional[bool] = Field(None, description="as llm (default false)")  # type: ignore[assignment]
    fallback: Literal["random", "pattern", "error"] = Field(
        "pattern", description="error: stop when the model fails; random and pattern need top_up=true (without it"
        " a failed model call ends the LLM phase and the classical search goes on)")

    says_own_fallback: ClassVar[bool] = True
    #: llm's options that llm-seeded sets itself: refused, and not listed by ``kerntune options``
    not_listed: ClassVar[frozenset[str]] = frozenset({"max_rounds", "tell_unspent"})

    @model_validator(mode="after")
    def _rounds(self) -> "LLMSeededOptions":
        if "max_rounds" in self.model_fields_set:
            raise ValueError("llm-seeded sets max_rounds from 'rounds'; give rounds instead")
        if "tell_unspent" in self.model_fields_set:
            raise ValueError("llm-seeded's classical strategy spends what its LLM rounds leave; tell_unspent is llm's option")
        from kerntune.strategies.llm_seeded import fallback_refused  # (the strategy says it too, and why)

        why = fallback_refused({k: getattr(self, k) for k in self.model_fields_set})
        if why:
            raise ValueError(why)
        return self


_Warp = Literal["log", "copula", "blend", "clip", "boxcox", "yeojohnson"]  # surrogate_aux.WARPS (a test keeps them equal)


class AutoOptions(_Options):
    """``auto``: its engine's options (``SurrogateOptions``, whose defaults are the ones used; a test
    keeps these equal to them) and, with a model, the cooperation's (``auto_model.run_with_model``)."""

    # the GP and its steps
    kappa: float = Field(2.5, ge=0, le=100, description="exploration weight of the GP's lower confidence bound")
    explore_kappa: float = Field(50.0, ge=0, le=10_000, description="that weight for a restart's first config")
    local_share: float = Field(0.3, ge=0, le=1, description="share of GP steps among the one-field neighbours of the region's best")
    startup: int = Field(5, ge=0, le=_BIG, description="the default config plus random ones before the model decides")
    refit_every: int = Field(5, ge=1, le=_BIG, description="observations between refits of the kernel")
    y_warp: _Warp = Field("copula", description="the GP's targets: copula (normal scores of the ranks), log, ...")
    y_clip: float = Field(0.5, gt=0, lt=1, description="quantile above which y_warp clip caps the log-times")
    global_warp: Optional[_Warp] = Field("log", description="targets that global_share of the GP's global steps predict from (null: y_warp's)")
    global_fit: bool = Field(True, description="those steps use a second GP fitted on those targets (false: the main GP predicts from them)")
    global_share: float = Field(0.5, ge=0, le=1, description="share of global steps that use global_warp's targets")
    gp_ordinal: float = Field(1.0, ge=0, le=2, description="ordered fields may enter the kernel as |index difference| ** this (0: Hamming)")
    gp_ordinal_fit: bool = Field(True, description="ordinal or Hamming per field by the marginal likelihood")
    gp_align: bool = Field(True, description="integer fields not all powers of two get a power-of-two alignment column")
    model: Literal["gp", "rf", "et"] = Field("gp", description="the surrogate: gp, or a random forest / extra trees (the forest extra)")
    rf_trees: int = Field(32, ge=1, le=10_000, description="trees of rf / et")
    rf_leaf: int = Field(2, ge=1, le=_BIG, description="minimum samples per leaf of rf / et")
    rf_spread: Literal["trees", "total"] = Field("trees", description="the forest's uncertainty: spread of the tree means, or plus the leaves' variance")
    # restarts
    stall: Optional[int] = Field(None, ge=1, le=_BIG, description="evaluations without gain before a restart (default max(15, 2 x parameters))")
    tabu_radius: int = Field(2, ge=0, le=1000, description="fields within which a left basin is closed to global steps")
    tabu_until: Optional[float] = Field(0.5, ge=0, le=1, description="past this share of the evaluation budget the tabu closes nothing (null: never; no effect under a time budget alone)")
    fail_block: Optional[float] = Field(0.5, gt=0, le=1, description="leave out of the GP's steps configs whose kriged chance of failing exceeds this (null: none left out)")
    region_radius: Optional[int] = Field(None, ge=0, le=1000, description="after a restart, fields within which the search stays (default: all)")
    # the climber member
    climb_share: float = Field(0.5, ge=0, le=1, description="the climber's share before either member has earned credit (0: no climber); other values act only with climb_max null or above min_share, else the share is climb_max")
    min_share: float = Field(0.3, ge=0, le=0.5, description="neither member's share falls below this (before climb_max)")
    climb_max: Optional[float] = Field(0.15, ge=0, le=1, description="the climber's share is at most this (null: no cap)")
    credit_rate: float = Field(0.1, gt=0, le=1, description="weight of a proposal's gain in its member's running credit (acts only with climb_max null or above min_share, else the share is climb_max)")
    perturb_share: float = Field(0.5, ge=0, le=1, description="share of climber steps that perturb a good config instead of climbing")
    perturb_guide: float = Field(0.5, ge=0, le=1, description="chance that a perturbed field's value comes from the good configs' density")
    elites: int = Field(4, ge=0, le=1000, description="archive of diverse good configs that perturbations may start from (0: none)")
    elite_distance: int = Field(3, ge=0, le=1000, description="fields between any two configs of the archive, at least")
    elite_from_best: float = Field(0.5, ge=0, le=1, description="chance that a perturbation starts from the best rather than another elite")
    elite_stall: int = Field(20, ge=0, le=_BIG, description="evaluations without a new best before other elites serve as origins")
    climb_elites: bool = Field(True, description="at a local optimum the climber climbs on from an unvisited elite")
    climb_cap: int = Field(10, ge=0, le=_BIG, description="fruitless neighbours before the climber moves to the next elite (0: only at a local optimum)")
    batch_size: Optional[int] = Field(None, ge=1, le=1024, description="configs proposed at once (default 1 on a recording, up to 8 on GPUs)")
    # with a model (--llm) only
    initial: int = Field(25, ge=1, le=10_000, description="with a model: configs of its first answer")
    refine: int = Field(15, ge=1, le=10_000, description="with a model: configs of each later answer")
    max_calls: int = Field(6, ge=1, le=10_000, description="with a model: calls at most (the first included)")
    screen_keep: float = Field(0.6, ge=0, le=1, description="with a model: share of a later answer the surrogate lets through")
    temperature: float = Field(0.7, ge=0, le=2, description="with a model: its sampling temperature")
    max_tokens: int = Field(6000, ge=1, le=1_000_000, description="with a model: answer length cap per call")
    include_source: bool = Field(True, description="with a model: show the kernel source in the prompt")
    include_hardware: bool = Field(True, description="with a model: show the GPU's facts in the prompt")
    include_hints: bool = Field(True, description="with a model: show tuning hints in the prompt")
    new_region_fields: int = Field(2, ge=1, le=1000, description="with a model: ask again once the best moved this many fields from what it saw")
    model_clock_s: Optional[float] = Field(None, gt=0, description="with a model, on a recording: charge each call as this many seconds")
    overlap_first: int = Field(10, ge=0, le=_BIG, description="with a model, under a budget of evaluations: evaluations the surrogate may spend while the first call is out, its start included (no cap under a budget of time alone)")
    overlap_later: Optional[int] = Field(None, ge=0, le=_BIG, description="with a model: the same for later calls (default refine)")

    #: the options above that act only with a model (``auto_model.run_with_model``'s; a test keeps them equal):
    #: ``validate_options(..., with_model=False)`` refuses them
    model_only: ClassVar[frozenset[str]] = frozenset({
        "initial", "refine", "max_calls", "screen_keep", "temperature", "max_tokens", "include_source",
        "include_hardware", "include_hints", "new_region_fields", "model_clock_s", "overlap_first", "overlap_later"})


MODELS: dict[str, type[_Options]] = {
    "exhaustive": ExhaustiveOptions, "random": RandomOptions, "pattern": PatternOptions, "genetic": GeneticOptions,
    "bayes": BayesOptions, "gp": GPOptions, "tpe": TPEOptions, "llm": LLMOptions, "llm-seeded": LLMSeededOptions,
    "auto": AutoOptions,
}


def _listed(model: type[_Options]) -> list[str]:
    """The options a user may give, in order (not those the strategy sets itself: ``not_listed``)."""
    hidden = getattr(model, "not_listed", frozenset())
    return [name for name in model.model_fields if name not in hidden]


def _problem(strategy: str, exc: ValidationError, given: dict[str, Any]) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(x) for x in err["loc"])
    if err["type"] == "extra_forbidden":
        known = ", ".join(_listed(MODELS[strategy])) if strategy in MODELS else ""
        return f"{strategy}: unknown option {loc!r} (known: {known})"
    shown = f" (got {given[loc]!r})" if loc in given else ""
    where = f"option {loc!r}: " if loc else ""
    return f"{strategy}: {where}{err['msg']}{shown}"


def own_options(strategy: str, options: dict[str, Any]) -> dict[str, Any]:
    """One strategy's options with ``compare``'s spelling accepted: ``-o auto.stall=30`` is ``stall=30`` when
    the strategy is ``auto`` (or an alias of it); an option named for another strategy is refused."""
    from kerntune.strategies import ALIASES

    own = ALIASES.get(strategy, strategy)
    out: dict[str, Any] = {}
    for key, value in options.items():
        prefix, dot, name = key.partition(".")
        if dot and prefix and name:
            if ALIASES.get(prefix, prefix) != own:
                raise KerntuneError(f"option {key!r} is for strategy {prefix}; this run's strategy is {strategy}")
            key = name
        if key in out:
            raise KerntuneError(f"option {key!r} is given twice")
        out[key] = value
    return out


def validate_options(strategy: str, options: dict[str, Any] | None, with_model: bool | None = None) -> dict[str, Any]:
    """The options ``strategy`` was given, checked; raises KerntuneError with one line.

    Returns them unchanged (only what the user set), so stored runs keep what was asked for
    and the strategies' own defaults stay the single source of default values.  ``with_model``:
    whether the run has a model (``--llm``); False refuses ``auto``'s options that act only with
    one (``AutoOptions.model_only``), None (unknown) lets them pass.
    """
    from kerntune.strategies import ALIASES

    name = ALIASES.get(strategy, strategy)
    options = dict(options or {})
    model = MODELS.get(name)
    if model is None:
        return options  # an unknown strategy is refused by get_strategy with its own line
    try:
        checked = model.model_validate(options)
    except ValidationError as exc:
        raise KerntuneError(_problem(name, exc, options)) from None
    if isinstance(checked, BayesOptions):
        rest = {k: v for k, v in options.items() if k != "surrogate"}
        try:
            validate_options(checked.surrogate, rest)
        except KerntuneError as exc:  # say it as the user wrote it: bayes (with surrogate gp), not gp
            raise KerntuneError(f"{name} (surrogate {checked.surrogate}): {str(exc).split(': ', 1)[1]}") from None
    if isinstance(checked, LLMSeededOptions) and options.get("then_options"):
        validate_options(checked.then, options["then_options"])
    if isinstance(checked, AutoOptions) and with_model is False:
        needs = sorted(set(options) & AutoOptions.model_only)
        if needs:
            many = len(needs) > 1
            raise KerntuneError(f"{name}: option{'s' if many else ''} {', '.join(map(repr, needs))} "
                                f"{'need' if many else 'needs'} --llm ({'they act' if many else 'it acts'} only with a model)")
    if isinstance(checked, AutoOptions) and checked.model != "gp":
        from kerntune.strategies.forest_model import require_sklearn

        require_sklearn(checked.model)  # a missing extra is said before a run is stored, not after
    return options


def describe_options(strategy: str) -> list[tuple[str, str, str, str]]:
    """(name, type, default, what it does) of each option, from the model itself."""
    model = MODELS.get(strategy_name(strategy))
    if model is None:
        return []   # a strategy that checks its own options
    out = []
    for name, f in model.model_fields.items():
        if name not in _listed(model):
            continue
        bounds = [f"{k} {getattr(m, k)}" for m in f.metadata for k in ("ge", "gt", "le", "lt") if getattr(m, k, None) is not None]
        kind = _type_text(f.annotation)
        default = json.dumps(f.default) if f.default is None or isinstance(f.default, bool) else repr(f.default)
        out.append((name, kind + (f" ({', '.join(bounds)})" if bounds else ""), default, f.description or ""))
    return out


def _type_text(a: Any) -> str:
    """``int``, ``float or null``, ``'log' | 'copula'``: a type as a user types its values."""
    import types
    import typing

    origin, args = typing.get_origin(a), typing.get_args(a)
    if origin is typing.Annotated:
        return _type_text(args[0])
    if origin in (typing.Union, types.UnionType):
        inner = [x for x in args if x is not type(None)]
        text = " | ".join(_type_text(x) for x in inner)
        return text + " or null" if len(inner) < len(args) else text
    if origin is typing.Literal:
        return " | ".join(repr(x) for x in args)
    if isinstance(a, type):
        return a.__name__
    return str(a).replace("typing.", "")


def strategy_name(strategy: str) -> str:
    """The registered name of ``strategy`` (aliases resolved); one line when there is none."""
    from kerntune.strategies import ALIASES, STRATEGIES

    name = ALIASES.get(strategy, strategy)
    if name not in STRATEGIES:
        raise KerntuneError(f"unknown strategy {strategy!r} (known: {', '.join(STRATEGIES)})")
    return name
