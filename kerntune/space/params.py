"""Parameter kinds of a search space: ``Param`` and the scalar kinds (the sequence kinds and the
registry of all of them are in ``kerntune.space.kinds``).

Every kind is finite and ordered: ``values()`` lists what a kernel accepts,
in an order where neighbours are meaningful (ascending numbers).  That one
property lets the Space enumerate, sample, step to neighbours and encode
without knowing which kind it holds.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar, Sequence

import numpy as np

from kerntune.errors import SpaceError

Value = Any


def canonical(value: Value) -> Value:
    """Lists and tuples compare equal once both are tuples (JSON gives lists).  NumPy values become
    Python's (Kernel Tuner users write ``np.arange(32, 257, 32)``: a NumPy scalar was refused as an
    option, or kept and then broke YAML saving)."""
    if isinstance(value, (list, tuple)):
        return tuple(canonical(v) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return canonical(value.tolist())
    return value


def jsonable(value: Value) -> Value:
    if isinstance(value, tuple):
        return [jsonable(v) for v in value]
    return value


def _same(a: Value, b: Value) -> bool:
    # 1 == True in Python; a boolean parameter must not accept 1 and vice versa.
    return type(a) is type(b) and a == b or (
        isinstance(a, (int, float)) and isinstance(b, (int, float))
        and not isinstance(a, bool) and not isinstance(b, bool) and a == b
    )


_MISSING = object()

#: Values one parameter may have: each is held in memory (a 0..10^12 range once hung the reader).
MAX_VALUES = 1_000_000


@dataclass(frozen=True)
class Param:
    """Base of all kinds: a name, a finite ordered value list, a default."""

    name: str
    description: str = ""
    default: Value = None
    kind: ClassVar[str] = "param"

    def __post_init__(self) -> None:
        if not self.name or not str(self.name).isidentifier():
            raise SpaceError(f"parameter name {self.name!r} must be an identifier")
        if not self.values():
            raise SpaceError(f"parameter {self.name!r} has no values")
        if self.default is not None and self.index(self.default) is None:
            raise SpaceError(
                f"parameter {self.name!r}: default {self.default!r} is not one of {self.allowed_text()}"
            )

    # -- what every kind provides -------------------------------------------------
    def values(self) -> tuple[Value, ...]:
        raise NotImplementedError

    @property
    def default_value(self) -> Value:
        return canonical(self.default) if self.default is not None else self.values()[0]

    def index(self, value: Value) -> int | None:
        """Position of ``value`` in ``values()``, or None if not allowed."""
        value = canonical(value)
        for i, v in enumerate(self.values()):
            if _same(v, value):
                return i
        return None

    def contains(self, value: Value) -> bool:
        return self.index(value) is not None

    def own(self, value: Value) -> Value:
        """``value`` as this parameter holds it (64 for 64.0): 64.0 is allowed where 64 is, and was
        keyed apart from it (measured twice) and handed to the kernel as a float.  An exact-type match
        wins (1.0 stays 1.0 beside an option 1); True never becomes 1; a value not allowed is returned
        unchanged, for ``validate`` to refuse."""
        # the exact-type look-up first: a value found there is canonical already (an int, a string, a
        # tuple of them), and this is on every config's key (a fifth of a replayed search's time)
        try:
            hit = self._own_map.get((type(value), value), _MISSING)
        except TypeError:  # unhashable: a list, canonical() makes it a tuple
            hit = _MISSING
        if hit is not _MISSING:
            return hit
        value = canonical(value)
        try:
            hit = self._own_map.get((type(value), value), _MISSING)
        except TypeError:  # unhashable: a nested list the schema let through
            hit = _MISSING
        if hit is not _MISSING:
            return hit
        i = self.index(value)
        return self.values()[i] if i is not None else value

    @cached_property
    def _own_map(self) -> dict[tuple[type, Value], Value]:
        # The exact-type fast path of own(): most values already are the parameter's own.
        out: dict[tuple[type, Value], Value] = {}
        for v in reversed(self.values()):
            out[(type(v), v)] = v
        return out

    def allowed_text(self) -> str:
        vals = self.values()
        # JSON literals (true, "tma", null), as the model must write them in its answer, not Python's
        if len(vals) > 64:
            return f"{len(vals)} values from {_json_literal(vals[0])} to {_json_literal(vals[-1])}"
        return "[" + ", ".join(_json_literal(v) for v in vals) + "]"

    def adjacent(self, value: Value) -> list[Value]:
        """Values one step away: the natural 'small move' for local search."""
        i = self.index(value)
        vals = self.values()
        if i is None:
            return []
        return [vals[j] for j in (i - 1, i + 1) if 0 <= j < len(vals)]

    def others(self, value: Value) -> list[Value]:
        return [v for v in self.values() if not _same(v, canonical(value))]

    @property
    def width(self) -> int:
        return 1

    def encode(self, value: Value) -> list[float]:
        """Position in [0, 1]; ordered kinds keep their order for surrogates."""
        n = len(self.values())
        i = self.index(value)
        if i is None:
            raise SpaceError(f"{self.name}: {value!r} is not one of {self.allowed_text()}")
        return [i / (n - 1) if n > 1 else 0.0]

    def json_schema(self) -> dict[str, Any]:
        return {"enum": [jsonable(v) for v in self.values()]}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "kind": self.kind}
        out.update(self._spec())
        if self.default is not None:
            out["default"] = jsonable(self.default)
        if self.description:
            out["description"] = self.description
        return out

    def _spec(self) -> dict[str, Any]:
        raise NotImplementedError

    def type_text(self) -> str:
        """Short human/LLM description of the kind and range."""
        return f"{self.kind} {self.allowed_text()}"


@dataclass(frozen=True)
class PowerOfTwo(Param):
    low: int = 1
    high: int = 1
    kind: ClassVar[str] = "pow2"

    def __post_init__(self) -> None:
        for bound in (self.low, self.high):
            if not isinstance(bound, int) or bound < 1 or bound & (bound - 1):
                raise SpaceError(f"parameter {self.name!r}: pow2 bounds must be powers of two, got {bound!r}")
        if self.low > self.high:
            raise SpaceError(f"parameter {self.name!r}: low {self.low} > high {self.high}")
        super().__post_init__()

    def values(self) -> tuple[int, ...]:
        return self._values

    @cached_property
    def _values(self) -> tuple[int, ...]:
        lo, hi = int(math.log2(self.low)), int(math.log2(self.high))
        return tuple(2**k for k in range(lo, hi + 1))

    def _spec(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high}

    def type_text(self) -> str:
        return f"power of two in [{self.low}, {self.high}]"


@dataclass(frozen=True)
class IntRange(Param):
    low: int = 0
    high: int = 0
    step: int = 1
    kind: ClassVar[str] = "int"

    def __post_init__(self) -> None:
        for what in ("low", "high", "step"):
            if isinstance(getattr(self, what), bool) or not isinstance(getattr(self, what), int):
                raise SpaceError(f"parameter {self.name!r}: {what} must be an integer, got {getattr(self, what)!r}")
        if self.step < 1:
            raise SpaceError(f"parameter {self.name!r}: step must be >= 1")
        if self.low > self.high:
            raise SpaceError(f"parameter {self.name!r}: low {self.low} > high {self.high}")
        n = (self.high - self.low) // self.step + 1
        if n > MAX_VALUES:
            raise SpaceError(f"parameter {self.name!r}: {n:,} values (at most {MAX_VALUES:,}; use a coarser step or pow2)")
        super().__post_init__()

    def values(self) -> tuple[int, ...]:
        return self._values

    @cached_property
    def _values(self) -> tuple[int, ...]:
        return tuple(range(self.low, self.high + 1, self.step))

    def index(self, value: Value) -> int | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or value != int(value):
            return None
        value = int(value)
        if value < self.low or value > self.high or (value - self.low) % self.step:
            return None
        return (value - self.low) // self.step

    def own(self, value: Value) -> Value:
        # Arithmetic, not a lookup table: a range may hold a million values.
        value = canonical(value)
        return int(value) if self.index(value) is not None else value

    def json_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "integer", "minimum": self.low, "maximum": self.high}
        if self.step > 1:
            schema = {"enum": list(self.values())}
        return schema

    def _spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"low": self.low, "high": self.high}
        if self.step != 1:
            spec["step"] = self.step
        return spec

    def type_text(self) -> str:
        step = f" step {self.step}" if self.step != 1 else ""
        return f"integer in [{self.low}, {self.high}]{step}"


@dataclass(frozen=True)
class Choice(Param):
    options: tuple[Value, ...] = ()
    kind: ClassVar[str] = "choice"

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", tuple(canonical(o) for o in self.options))
        for opt in self.options:
            if not isinstance(opt, (int, float, str, bool, type(None), tuple)):
                raise SpaceError(f"parameter {self.name!r}: option {opt!r} must be a number, string or null")
        if len(set(map(repr, self.options))) != len(self.options):
            raise SpaceError(f"parameter {self.name!r}: duplicate options")
        super().__post_init__()

    @property
    def default_value(self) -> Value:
        # None is a legitimate option, so 'default is None' cannot mean 'unset' here
        # when the options contain None; the first option is then the default.
        return canonical(self.default) if self.default is not None else self.options[0]

    def values(self) -> tuple[Value, ...]:
        return self.options

    @property
    def ordered(self) -> bool:
        return all(isinstance(o, (int, float)) and not isinstance(o, bool) for o in self.options)

    def adjacent(self, value: Value) -> list[Value]:
        # Unordered options (strings) have no 'next'; every other option is one step.
        return super().adjacent(value) if self.ordered else self.others(value)

    def _spec(self) -> dict[str, Any]:
        return {"options": [jsonable(o) for o in self.options]}

    def type_text(self) -> str:
        return f"one of {self.allowed_text()}"


@dataclass(frozen=True)
class Boolean(Param):
    kind: ClassVar[str] = "bool"

    def values(self) -> tuple[bool, ...]:
        return (False, True)

    def json_schema(self) -> dict[str, Any]:
        return {"type": "boolean"}

    def _spec(self) -> dict[str, Any]:
        return {}

    def type_text(self) -> str:
        return "boolean"



def infer_param(name: str, values: Sequence[Value], description: str = "", default: Value = None) -> Param:
    """Kernel Tuner lists become a Choice; all-boolean lists become Boolean.

    All-number lists are sorted: values() must be ascending so that neighbours and
    encode() follow the numbers, not the order the user happened to list them in.
    Kernel Tuner's default is the first listed value, so that one stays the default
    (for a boolean too: ``[True, False]`` starts at True, although Boolean lists False first).
    """
    vals = [canonical(v) for v in values]
    if vals and all(isinstance(v, bool) for v in vals) and set(vals) == {False, True}:
        if default is None and vals[0] is True:  # only then is it not the first of values()
            default = True
        return Boolean(name=name, description=description, default=default)
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) and v == v for v in vals)
    if numeric and vals != sorted(vals):
        default = vals[0] if default is None else default
        vals = sorted(vals)
    return Choice(name=name, options=tuple(vals), description=description, default=default)


def _json_literal(value: Value) -> str:
    return json.dumps(jsonable(value), ensure_ascii=False)
