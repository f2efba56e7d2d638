"""The Space: parameters, constraints and a default, and every operation a
strategy, an evaluator or a prompt needs from them.

Configs are plain ``dict[str, value]`` with list values as tuples inside
kerntune (hashable) and lists in JSON.  ``Space.key`` gives the canonical
string used for de-duplication and as the store's unique key.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from kerntune.errors import SpaceError
from kerntune.space.expr import Expression
from kerntune.space.kinds import ListParam
from kerntune.space.params import Param, jsonable

Config = dict[str, Any]

# Above this many cartesian points a Space never materialises its valid set.
_MATERIALISE_LIMIT = 2_000_000


@dataclass(frozen=True)
class FieldError:
    """One reason a config is not valid, naming the field and what is allowed."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class Constraint:
    """A restriction on configs: a safe expression or a Python callable.

    Callables take the config dict; they stay in Python (never serialised), so a
    space with callables saves only its expression constraints and says so.

    A rule that raises for a config rejects that config (``x // 0``, a comparison with None, a
    bounded power beyond its limit).  A rule that raised for every config it was asked about is
    most likely called wrongly, not unsatisfiable: ``computed`` and ``last_error`` let the
    "no valid configuration" error say so instead of leaving the user to guess.
    """

    def __init__(self, rule: str | Callable[[Mapping[str, Any]], bool], names: Iterable[str] | None = None,
                 description: str = "") -> None:
        if isinstance(rule, str):
            self.expression: Expression | None = Expression(rule, names)
            self.fn: Callable[[Mapping[str, Any]], bool] = self.expression
            self.text = self.expression.source
        elif callable(rule):
            self.expression = None
            self.fn = rule
            self.text = description or getattr(rule, "__name__", "callable")
        else:
            raise SpaceError(f"constraint must be a string or a callable, got {type(rule).__name__}")
        self.description = description
        self.computed = False  # whether the rule ever returned (rather than raised)
        self.last_error: Exception | None = None

    def __call__(self, config: Mapping[str, Any]) -> bool:
        try:
            ok = bool(self.fn(config))
        except (ArithmeticError, TypeError, ValueError, KeyError, IndexError) as exc:
            # A constraint that cannot be computed for a config (e.g. x // 0) rejects it.
            self.last_error = exc.with_traceback(None)  # the message, not the frames
            return False
        if not self.computed:
            self.computed = True
        return ok

    def never_computed(self) -> str:
        """Why the rule rejected everything it saw, when it raised every time; else empty."""
        if self.computed or self.last_error is None:
            return ""
        return f"raised for every config tried ({type(self.last_error).__name__}: {self.last_error})"[:300]

    def __repr__(self) -> str:
        return f"Constraint({self.text!r})"


# Above this many cartesian points (minutes of constraint checks) a constrained space is not counted.
COUNT_LIMIT = 100_000_000
# A space too large to walk is searched this far for a valid default: in cartesian order, then at
# random (the first points all share the lowest values of the leading parameters).  About a second.
DEFAULT_SEARCH_ORDERED = 200_000
DEFAULT_SEARCH_RANDOM = 100_000
# A space too large to walk for its valid set (> COUNT_LIMIT points) is sampled by rejection alone:
# after the first max_tries misses, draws go on for this many seconds before "none found".  A sparse
# but satisfiable space (1 valid point in 4096 of 1.1e12) needs ~4,096 draws a config on average.
RANDOM_SEARCH_SECONDS = 5.0


def no_valid_error(constraints: Sequence[Constraint],
                   message: str = "the space has no valid configuration") -> SpaceError:
    """``message``, plus each constraint that raised for every config it was given and its error:
    a Kernel Tuner restriction called with the wrong arguments (TypeError) rejected every config
    and read as "no valid configuration", with nothing pointing at the restriction."""
    broken = [c for c in constraints if c.never_computed()]
    if broken:
        message += "; " + "; ".join(f"constraint {c.text!r} {c.never_computed()}" for c in broken[:3])
    return SpaceError(message)


def find_valid(params: Sequence[Param], constraints: Sequence[Constraint]) -> Config:
    """A valid config for a space that names no valid default: the first in cartesian order, or
    (beyond the first points of a huge space) one drawn at random.

    A space of up to ``_MATERIALISE_LIMIT`` points is walked whole, so "no valid configuration" is
    exact.  A larger one (an unsatisfiable ``a > 65536`` over 1.1e12 points walked for hours) is
    searched in bounded steps; when that finds nothing the error says how far it looked and what the
    user can do: check the constraints, or give a default that satisfies them.
    """
    names = [p.name for p in params]
    value_lists = [p.values() for p in params]
    size = math.prod(len(v) for v in value_lists)

    def ok(cfg: Config) -> bool:
        return all(c(cfg) for c in constraints)

    ordered = size if size <= _MATERIALISE_LIMIT else DEFAULT_SEARCH_ORDERED
    for combo in itertools.islice(itertools.product(*value_lists), ordered):
        cfg = dict(zip(names, combo))
        if ok(cfg):
            return cfg
    if size <= _MATERIALISE_LIMIT:
        raise no_valid_error(constraints)
    rng = random.Random(0)  # seeded: the same space file always gets the same default
    for _ in range(DEFAULT_SEARCH_RANDOM):
        cfg = {n: rng.choice(v) for n, v in zip(names, value_lists)}
        if ok(cfg):
            return cfg
    raise no_valid_error(constraints,
        f"no valid configuration found among the first {ordered:,} of {size:,} configurations and"
        f" {DEFAULT_SEARCH_RANDOM:,} drawn at random: the constraints may admit none"
        f" ({'; '.join(c.text for c in constraints)[:300]}); if they do, give a 'default' that satisfies them")


class Space:
    """A finite, constrained search space of kernel configurations."""

    def __init__(self, params: Sequence[Param], constraints: Iterable[str | Callable | Constraint] = (),
                 default: Mapping[str, Any] | None = None, name: str = "", description: str = "",
                 members: Sequence[Mapping[str, Any]] | None = None) -> None:
        """``members``, when given, is the valid set itself (a recording's recorded configs): it is
        enumerated and sampled directly, never by walking the cartesian product, which for a sparse
        recording (8 parameters x 8 values, 300 configs) is 16.7 million points of nothing.  They
        also constrain: a config outside them is not valid (default, sampling, neighbours), with or
        without a constraint that says so."""
        if not params:
            raise SpaceError("a space needs at least one parameter")
        names = [p.name for p in params]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise SpaceError(f"duplicate parameter name {dupes[0]!r}")
        self.params: list[Param] = list(params)
        self.by_name: dict[str, Param] = {p.name: p for p in self.params}
        self.names: list[str] = names
        self.constraints: list[Constraint] = [
            c if isinstance(c, Constraint) else Constraint(c, names) for c in constraints
        ]
        self.name = name
        self.description = description
        self._valid_cache: list[Config] | None = None
        self._count: int | None = None
        self._members: frozenset[str] | None = None
        if members is not None:
            # In cartesian order, as enumerating would list them: seeded searches stay the same.
            cfgs = [self.canonical(m) for m in members]
            pos = [{(isinstance(v, bool), v): i for i, v in enumerate(p.values())} for p in self.params]
            self._valid_cache = sorted(
                (c for c in cfgs if self.satisfies(c)),
                key=lambda c: tuple(pos[j].get((isinstance(c[n], bool), c[n]), 0) for j, n in enumerate(self.names)))
            self._count = len(self._valid_cache)
            self._members = frozenset(self.key(c) for c in self._valid_cache)
        self.default: Config = self._build_default(default or {})

    # -- construction helpers ---------------------------------------------------------
    def _build_default(self, given: Mapping[str, Any]) -> Config:
        unknown = sorted(set(given) - set(self.names))
        if unknown:
            raise SpaceError(f"default names unknown parameter {unknown[0]!r}")
        # The parameter's own values: a default of 64.0 is measured (and keyed) as 64.
        cfg = {p.name: p.own(given[p.name] if p.name in given else p.default_value) for p in self.params}
        errors = self.validate(cfg, check_constraints=False)
        if errors:
            raise SpaceError(f"default config invalid: {errors[0]}")
        if (self.constraints or self._members is not None) and not self.satisfies(cfg):
            if given:
                broken = next((c for c in self.constraints if not c(cfg)), None)
                if broken is None:
                    raise SpaceError(f"default config {self.to_json(cfg)} is not one of the space's configs")
                why = broken.never_computed()
                raise SpaceError(f"default config {self.to_json(cfg)} violates constraint {broken.text!r}"
                                 + (f": it {why}" if why else ""))
            if self._valid_cache is not None:  # given members: the first of them, never a non-member
                if not self._valid_cache:
                    raise no_valid_error(self.constraints)
                return dict(self._valid_cache[0])
            cfg = find_valid(self.params, self.constraints)
        return cfg

    # -- sizes ------------------------------------------------------------------------------
    @property
    def cartesian_size(self) -> int:
        return math.prod(len(p.values()) for p in self.params)

    def count(self) -> int:
        """Number of valid configs (enumerates once, then cached).  Without constraints every
        cartesian point is valid: ten pow2 1..32768 parameters are 1.1e12 configs, not an hour's walk."""
        if self._count is None:
            if self._valid_cache is not None:
                self._count = len(self._valid_cache)
            elif not self.constraints:
                self._count = self.cartesian_size
            elif self.cartesian_size > COUNT_LIMIT:
                # Walking them would take hours: one clear line instead of a hang.
                raise SpaceError(
                    f"the space has {self.cartesian_size:,} cartesian points under {len(self.constraints)}"
                    f" constraint(s): too many to count its valid configs (at most {COUNT_LIMIT:,} are walked);"
                    " give the parameters fewer values")
            else:
                self._count = sum(1 for _ in self.enumerate())
        return self._count

    # -- validity ---------------------------------------------------------------------------
    def satisfies(self, config: Mapping[str, Any]) -> bool:
        if self._members is not None and self.key(config) not in self._members:
            return False
        return all(c(config) for c in self.constraints)

    def validate(self, config: Mapping[str, Any], check_constraints: bool = True) -> list[FieldError]:
        """Every reason ``config`` is not a member of this space; empty if it is."""
        if not isinstance(config, Mapping):
            return [FieldError("<config>", f"expected an object of parameters, got {type(config).__name__}")]
        errors = []
        for key in config:
            if key not in self.by_name:
                errors.append(FieldError(str(key), f"unknown parameter (known: {', '.join(self.names)})"))
        for p in self.params:
            if p.name not in config:
                errors.append(FieldError(p.name, f"missing; allowed: {p.allowed_text()}"))
                continue
            value = config[p.name]
            if not p.contains(value):
                if isinstance(p, ListParam):
                    detail = "; ".join(p.element_errors(value))
                    errors.append(FieldError(p.name, f"{detail} (allowed: {p.allowed_text()})"))
                else:
                    # in JSON, as the model must write it (a repair round quoted 'x' and None back to it)
                    shown = json.dumps(jsonable(value), default=str)
                    errors.append(FieldError(p.name, f"{shown} is not allowed; allowed: {p.allowed_text()}"))
        if not errors and check_constraints:
            cfg = self.canonical(config)
            for c in self.constraints:
                if not c(cfg):
                    errors.append(FieldError("<constraints>", f"violates constraint {c.text!r}"))
            if not errors and self._members is not None and self.key(cfg) not in self._members:
                errors.append(FieldError("<members>", f"not one of the space's {len(self._members):,} configs"))
        return errors

    def is_valid(self, config: Mapping[str, Any]) -> bool:
        return not self.validate(config)

    def canonical(self, config: Mapping[str, Any]) -> Config:
        """``config`` with each value as its parameter holds it (tuples for lists, 64 for 64.0)."""
        return {n: self.by_name[n].own(config[n]) for n in self.names if n in config}

    def normalize(self, partial: Mapping[str, Any]) -> Config:
        """Fill unspecified fields from the default; unknown fields are an error."""
        if not isinstance(partial, Mapping):
            raise SpaceError(f"expected an object of parameters, got {type(partial).__name__}")
        unknown = [k for k in partial if k not in self.by_name]
        if unknown:
            raise SpaceError(f"{unknown[0]}: unknown parameter (known: {', '.join(self.names)})")
        cfg = dict(self.default)
        # Each value becomes the parameter's own: a model's 64.0 (JSON Schema's enum lets it pass) is
        # measured as 64, and a permutation's [2.0, 1, 0] as (2, 1, 0).
        cfg.update({k: self.by_name[k].own(v) for k, v in partial.items()})
        return {n: cfg[n] for n in self.names}

    def sparse(self, config: Mapping[str, Any]) -> Config:
        """Only the fields that differ from the default (what prompts show)."""
        return {n: v for n, v in self.canonical(config).items() if v != self.default[n]}

    # -- keys and serialisation of configs --------------------------------------------------
    def key(self, config: Mapping[str, Any]) -> str:
        """The config's canonical string: one config, one key (64 and 64.0 are the same config;
        True and 1 stay apart where the parameter tells them apart)."""
        return json.dumps([jsonable(p.own(config[p.name])) for p in self.params], separators=(",", ":"))

    def from_key(self, key: str) -> Config:
        return {p.name: p.own(v) for p, v in zip(self.params, json.loads(key))}

    def to_json(self, config: Mapping[str, Any]) -> str:
        return json.dumps({n: jsonable(config[n]) for n in self.names if n in config}, separators=(",", ":"))

    # -- enumeration and sampling ---------------------------------------------------------------
    def enumerate(self) -> Iterator[Config]:
        """All valid configs, lazily, in the cartesian order of ``params``; a walk to the end keeps their count."""
        if self._valid_cache is not None:
            yield from (dict(c) for c in self._valid_cache)
            return
        walked = 0
        for combo in itertools.product(*(p.values() for p in self.params)):
            cfg = dict(zip(self.names, combo))
            if self.satisfies(cfg):
                walked += 1
                yield cfg
        self._count = walked  # a walk to the end counted the valid set: count() need not walk it again

    @property
    def materialised(self) -> bool:
        """Whether the valid set is held in memory (given as members, or enumerated once)."""
        return self._valid_cache is not None

    def valid_configs(self) -> list[Config]:
        """The materialised valid set, for spaces small enough to hold in memory."""
        if self._valid_cache is None:
            if self.cartesian_size > COUNT_LIMIT:
                raise SpaceError(f"space has {self.cartesian_size:,} cartesian points; too many to walk for its valid"
                                 f" configs (at most {COUNT_LIMIT:,})")
            # A large space under tight constraints (rejection sampling keeps missing) is walked once and
            # its valid set kept when it is small enough to hold.
            valid: list[Config] = []
            for cfg in self.enumerate():
                if len(valid) == _MATERIALISE_LIMIT:
                    raise SpaceError(f"space has more than {_MATERIALISE_LIMIT:,} valid configs; too many to hold")
                valid.append(cfg)
            self._valid_cache = valid
            self._count = len(valid)
        return self._valid_cache

    def random_config(self, rng: random.Random, max_tries: int = 10_000) -> Config:
        """One config drawn uniformly among valid configs.

        Uniform over the cartesian product, then rejection, is uniform over the
        valid set; when rejection keeps failing the valid set is materialised.  A space
        too large to walk (over ``COUNT_LIMIT`` points) cannot be materialised, so
        rejection goes on for up to ``RANDOM_SEARCH_SECONDS`` before "none found": a
        valid fraction of 1/4096 missed 10,000 draws in one call of eleven.
        """
        if self._valid_cache is not None and self.cartesian_size > _MATERIALISE_LIMIT:
            # A sparse valid set held in memory: draw from it (rejection would mostly miss).
            if not self._valid_cache:
                raise no_valid_error(self.constraints)
            return dict(rng.choice(self._valid_cache))
        tries = min(max_tries, 200) if self.cartesian_size <= _MATERIALISE_LIMIT else max_tries
        for _ in range(tries):
            cfg = {p.name: rng.choice(p.values()) for p in self.params}
            if self.satisfies(cfg):
                return cfg
        if self._valid_cache is None and self.cartesian_size > COUNT_LIMIT:
            return self._keep_drawing(rng, tries)
        valid = self.valid_configs()
        if not valid:
            raise no_valid_error(self.constraints)
        return dict(rng.choice(valid))

    def _keep_drawing(self, rng: random.Random, tries: int) -> Config:
        """Rejection sampling bounded by time, for a space that cannot be walked (the same draws
        as before for a seeded rng: only how long it may go on is bounded)."""
        deadline = time.monotonic() + RANDOM_SEARCH_SECONDS
        while time.monotonic() < deadline:
            for _ in range(256):
                cfg = {p.name: rng.choice(p.values()) for p in self.params}
                if self.satisfies(cfg):
                    return cfg
            tries += 256
        raise no_valid_error(
            self.constraints,
            f"no valid configuration found in {tries:,} random draws ({RANDOM_SEARCH_SECONDS:g} s) from"
            f" {self.cartesian_size:,} cartesian points, too many to walk: the constraints admit none or very"
            f" few ({'; '.join(c.text for c in self.constraints)[:300]})")

    def sample(self, rng: random.Random, n: int, exclude: Iterable[str] = ()) -> list[Config]:
        """Up to ``n`` distinct valid configs, uniformly, none of whose keys is in ``exclude``.

        In a space too sparse to draw from in time it returns the configs it found; it raises
        only when it found none."""
        excluded = set(exclude)
        out: list[Config] = []
        seen = set(excluded)
        misses = 0
        while len(out) < n and misses < 50 + 5 * n:
            try:
                cfg = self.random_config(rng)
            except SpaceError:
                if not out:
                    raise
                break
            k = self.key(cfg)
            if k in seen:
                misses += 1
                continue
            seen.add(k)
            out.append(cfg)
        if len(out) < n and (self.materialised or self.cartesian_size <= _MATERIALISE_LIMIT):
            # Nearly exhausted space: draw from what is left without replacement.
            rest = [c for c in self.valid_configs() if self.key(c) not in seen]
            out.extend(dict(c) for c in rng.sample(rest, min(n - len(out), len(rest))))
        return out

    # -- neighbourhoods ------------------------------------------------------------------------
    def neighbours(self, config: Mapping[str, Any], mode: str = "adjacent") -> list[Config]:
        """Valid configs that differ from ``config`` in exactly one parameter.

        ``adjacent`` moves a numeric field one step along its value list (and one
        element of a list, or swaps two neighbours of a permutation); ``hamming``
        allows any other value of one field.
        """
        if mode not in ("adjacent", "hamming"):
            raise SpaceError(f"unknown neighbourhood {mode!r} (adjacent, hamming)")
        cfg = self.canonical(config)
        out = []
        for p in self.params:
            alts = p.adjacent(cfg[p.name]) if mode == "adjacent" else p.others(cfg[p.name])
            for alt in alts:
                cand = dict(cfg)
                cand[p.name] = alt
                if self.satisfies(cand):
                    out.append(cand)
        return out

    # -- surrogate encoding ---------------------------------------------------------------------
    @property
    def encoded_width(self) -> int:
        return sum(p.width for p in self.params)

    def encode(self, config: Mapping[str, Any]) -> np.ndarray:
        """A vector in [0, 1]^d that keeps the order of ordered kinds."""
        cfg = self.canonical(config)
        return np.array([x for p in self.params for x in p.encode(cfg[p.name])], dtype=float)

    # -- schema ---------------------------------------------------------------------------------
    def config_schema(self, sparse: bool = True) -> dict[str, Any]:
        props = {p.name: p.json_schema() for p in self.params}
        schema: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
        if not sparse:
            schema["required"] = list(self.names)
        return schema

    def json_schema(self, sparse: bool = True, min_items: int | None = None,
                    max_items: int | None = None) -> dict[str, Any]:
        """Schema of the answer a model must give: ``{"configs":[{"reasoning","config"}]}``.

        ``min_items``/``max_items`` bound the list: a grammar-constrained local model
        otherwise takes the shortest valid answer, ``{"configs":[]}``.  Reasons are capped
        at 300 characters for the same reason in reverse (a small model can loop forever).
        """
        configs: dict[str, Any] = {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"reasoning": {"type": "string", "maxLength": 300},
                               "config": self.config_schema(sparse)},
                "required": ["config"],
            },
        }
        if min_items:
            configs["minItems"] = min_items
        if max_items:
            configs["maxItems"] = max_items
        return {"type": "object", "properties": {"configs": configs}, "required": ["configs"]}

    # -- dict form ------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.name:
            out["name"] = self.name
        if self.description:
            out["description"] = self.description
        out["params"] = [p.to_dict() for p in self.params]
        exprs = [c.text for c in self.constraints if c.expression is not None]
        if exprs:
            out["constraints"] = exprs
        out["default"] = {n: jsonable(v) for n, v in self.default.items()}
        return out

    def describe(self) -> str:
        """Plain-text summary for prompts and ``space info``."""
        lines = []
        for p in self.params:
            desc = f" — {p.description}" if p.description else ""
            lines.append(f"- {p.name}: {p.type_text()}; default {json.dumps(jsonable(self.default[p.name]), ensure_ascii=False)}{desc}")
        for c in self.constraints:
            lines.append(f"- constraint: {c.text}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Space({self.name or 'unnamed'}, params={self.names})"
