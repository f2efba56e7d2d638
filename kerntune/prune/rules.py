"""What a kernel accepts for a parameter: the rule an added value must pass.

Why a rule and not just the parameter's kind: once a value is removed, a
power-of-two parameter is stored as a plain choice, yet a value added later
must still be a power of two; and a space file may declare ``accepts`` (an
explicit list or bounds) narrower than the kind.  Rules are written into every
edited space file, so they survive any number of prune and expand rounds.

Without a declared ``accepts`` the rule is the parameter's kind only:
``pow2`` any power of two, ``int`` any integer, ``number`` any finite number,
``str`` any string, ``bool`` (already complete), ``tuple`` a list of the same
length, ``fixed`` nothing (permutations and fixed-length lists enumerate every
value already).  Declare ``accepts`` to bound what a model may add.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from kerntune.errors import SpaceError
from kerntune.space import Boolean, IntRange, ListParam, Param, Permutation, PowerOfTwo, canonical, jsonable

KINDS = ("pow2", "int", "number", "str", "bool", "tuple", "fixed", "any")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# A kernel parameter beyond 64 bits is a model's mistake; such an int also cannot become a float
# (math.isfinite(10**400) raises OverflowError, as do the bounds' and the encoding's conversions).
_MAX_INT = 2**63


def _too_large(v: Any) -> bool:
    if isinstance(v, tuple):
        return any(_too_large(x) for x in v)
    return _is_int(v) and abs(v) >= _MAX_INT


def _is_number(v: Any) -> bool:
    """An int or a finite float; never raises (isfinite on a huge int would)."""
    if _is_int(v):
        return True
    return isinstance(v, float) and math.isfinite(v)


def kind_of(values: Sequence[Any]) -> str:
    """The narrowest kind every value has (``any`` when they are mixed)."""
    vals = [canonical(v) for v in values]
    for kind, test in (("bool", lambda v: isinstance(v, bool)), ("int", _is_int), ("number", _is_number),
                       ("str", lambda v: isinstance(v, str)), ("tuple", lambda v: isinstance(v, tuple))):
        if vals and all(test(v) for v in vals):
            return kind  # integers that happen to be powers of two stay "int": only a PowerOfTwo says pow2
    return "any"


@dataclass(frozen=True)
class Rule:
    kind: str
    values: tuple[Any, ...] | None = None
    low: float | None = None
    high: float | None = None
    length: int | None = None

    @classmethod
    def of(cls, p: Param) -> "Rule":
        if isinstance(p, PowerOfTwo):
            return cls("pow2")
        if isinstance(p, IntRange):
            return cls("int")
        if isinstance(p, Boolean):
            return cls("bool", values=(False, True))
        if isinstance(p, (Permutation, ListParam)):
            return cls("fixed")
        kind = kind_of(p.values())
        lengths = {len(v) for v in p.values() if isinstance(v, tuple)}
        return cls(kind, length=lengths.pop() if kind == "tuple" and len(lengths) == 1 else None)

    @classmethod
    def declared(cls, p: Param | None, decl: Any, name: str) -> "Rule":
        """A rule from a space file's ``accepts`` entry: a list of values, or a mapping with
        ``kind``, ``values``, ``low``, ``high``."""
        base = cls.of(p) if p is not None else cls("any")
        if isinstance(decl, (list, tuple)):
            return replace(base, values=tuple(canonical(v) for v in decl))
        if not isinstance(decl, Mapping):
            raise SpaceError(f"accepts[{name}] must be a list of values or a mapping (kind, values, low, high)")
        unknown = sorted(set(decl) - {"kind", "values", "low", "high", "length"})
        if unknown:
            raise SpaceError(f"accepts[{name}]: unknown key {unknown[0]!r} (known: kind, values, low, high, length)")
        kind = decl.get("kind", base.kind)
        if kind not in KINDS:
            raise SpaceError(f"accepts[{name}]: unknown kind {kind!r} (known: {', '.join(KINDS)})")
        for bound in ("low", "high"):
            if decl.get(bound) is not None and (not _is_number(decl[bound]) or _too_large(decl[bound])):
                raise SpaceError(f"accepts[{name}]: {bound} must be a number (below 2**63)")
        values = decl.get("values")
        return cls(kind, tuple(canonical(v) for v in values) if values is not None else None,
                   decl.get("low"), decl.get("high"), decl.get("length", base.length))

    def problem(self, value: Any) -> str | None:
        """Why ``value`` cannot be added under this rule, or None when it can."""
        v = canonical(value)
        if self.kind == "fixed":
            return "its values are complete (a permutation or fixed-length list): nothing can be added"
        if _too_large(v):
            return "an integer of 2**63 or more is not a value a kernel accepts"
        type_ok = {"pow2": lambda: _is_int(v) and v > 0 and v & (v - 1) == 0, "int": lambda: _is_int(v),
                   "number": lambda: _is_number(v), "str": lambda: isinstance(v, str),
                   "bool": lambda: isinstance(v, bool),
                   "tuple": lambda: isinstance(v, tuple) and (self.length is None or len(v) == self.length),
                   "any": lambda: isinstance(v, (int, float, str, bool, tuple)) and v is not None}[self.kind]()
        if not type_ok:
            return f"{jsonable(v)!r} is not {self.kind_text()}"
        if self.values is not None and not any(type(v) is type(a) and v == a for a in self.values):
            return f"{jsonable(v)!r} is not a value the kernel accepts ({self.text()})"
        if self.low is not None and _is_number(v) and v < self.low:
            return f"{jsonable(v)!r} is below the lowest value the kernel accepts ({self.low:g})"
        if self.high is not None and _is_number(v) and v > self.high:
            return f"{jsonable(v)!r} is above the highest value the kernel accepts ({self.high:g})"
        return None

    def kind_text(self) -> str:
        return {"pow2": "a power of two", "int": "an integer", "number": "a finite number", "str": "a string",
                "bool": "a boolean", "tuple": f"a list of {self.length or 'n'} values", "fixed": "addable",
                "any": "a number, string or list"}[self.kind]

    def text(self) -> str:
        """The rule in words, for prompts and refusals."""
        if self.kind == "fixed":
            return "nothing can be added"
        if self.values is not None:
            return "one of [" + ", ".join(repr(jsonable(v)) for v in self.values) + "]"
        bounds = ""
        if self.low is not None or self.high is not None:
            lo = f"{self.low:g}" if self.low is not None else "-inf"
            hi = f"{self.high:g}" if self.high is not None else "inf"
            bounds = f" in [{lo}, {hi}]"
        return f"any value that is {self.kind_text()}{bounds}"

    def order(self, values: Sequence[Any]) -> list[Any]:
        """Values in the order the parameter lists them: the declared list's, else ascending numbers."""
        vals = [canonical(v) for v in values]
        if self.values is not None:
            pos = {repr(a): i for i, a in enumerate(self.values)}
            return sorted(vals, key=lambda v: pos.get(repr(v), len(pos)))
        if all(_is_number(v) for v in vals):
            return sorted(vals)
        return vals

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        if self.values is not None:
            out["values"] = [jsonable(v) for v in self.values]
        for key in ("low", "high", "length"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out
