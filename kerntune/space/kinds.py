"""The sequence kinds of a search space, an ordering of items (``Permutation``) and a fixed-length
list whose elements share one kind (``ListParam``, e.g. Helion's block sizes), and the registry of
every kind (``KINDS``, ``param_from_dict``).  ``kerntune.space.params`` holds ``Param`` and the scalar
kinds; this module builds on it (never the other way round: no import circle)."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

from kerntune.errors import SpaceError
from kerntune.space.params import (MAX_VALUES, Boolean, Choice, IntRange, Param, PowerOfTwo, Value, _same, canonical,
                                   jsonable)

@dataclass(frozen=True)
class Permutation(Param):
    """An ordering of items, e.g. a loop order; neighbours swap two adjacent items."""

    items: tuple[Value, ...] = ()
    kind: ClassVar[str] = "permutation"

    def __post_init__(self) -> None:
        object.__setattr__(self, "items", tuple(canonical(i) for i in self.items))
        # A repeated item would make itertools.permutations list each ordering more than
        # once, so values() and Space.count() would count the same config several times.
        seen: set[str] = set()
        for item in self.items:
            if repr(item) in seen:
                raise SpaceError(f"parameter {self.name!r}: permutation item {jsonable(item)!r} is listed twice")
            seen.add(repr(item))
        if len(self.items) > 8:
            raise SpaceError(f"parameter {self.name!r}: permutations of more than 8 items are not enumerable")
        super().__post_init__()

    def values(self) -> tuple[tuple[Value, ...], ...]:
        return self._values

    @cached_property
    def _values(self) -> tuple[tuple[Value, ...], ...]:
        return tuple(itertools.permutations(self.items))

    def index(self, value: Value) -> int | None:
        value = canonical(value)
        if not isinstance(value, tuple) or sorted(map(repr, value)) != sorted(map(repr, self.items)):
            return None
        return super().index(value)

    def own(self, value: Value) -> Value:
        """``value`` with each element replaced by the item it equals: (2, 1, 0) for a model's [2.0, 1, 0].

        The answer schema lists the items in an ``enum``, and JSON Schema compares 2.0 equal to 2, so
        the float passes it; items are matched by repr (1 and 1.0 may both be items), so validation
        refused it.  An element equal to no item, or to several, is left as it is (and refused)."""
        value = canonical(value)
        if not isinstance(value, tuple):
            return value
        out = []
        for element in value:
            exact = [i for i in self.items if type(i) is type(element) and i == element]
            near = exact or [i for i in self.items if _same(i, element)]
            if len(near) != 1:
                return value
            out.append(near[0])
        return tuple(out)

    def adjacent(self, value: Value) -> list[Value]:
        value = canonical(value)
        out = []
        for i in range(len(value) - 1):
            swapped = list(value)
            swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
            out.append(tuple(swapped))
        return out

    @property
    def width(self) -> int:
        return len(self.items)

    def encode(self, value: Value) -> list[float]:
        value = canonical(value)
        n = max(len(self.items) - 1, 1)
        return [value.index(item) / n for item in self.items]

    def json_schema(self) -> dict[str, Any]:
        n = len(self.items)
        return {"type": "array", "items": {"enum": [jsonable(i) for i in self.items]},
                "minItems": n, "maxItems": n, "uniqueItems": True}

    def _spec(self) -> dict[str, Any]:
        return {"items": [jsonable(i) for i in self.items]}

    def type_text(self) -> str:
        """The items in JSON, as the model must write them: Python's ['i', 'j'], None and True, copied
        into an answer, made the whole answer invalid JSON."""
        return f"permutation of {json.dumps([jsonable(i) for i in self.items], ensure_ascii=False)}"


@dataclass(frozen=True)
class ListParam(Param):
    """A fixed-length list whose elements share one kind (e.g. Helion block_sizes)."""

    element: Param = field(default=None)  # type: ignore[assignment]
    length: int = 1
    kind: ClassVar[str] = "list"

    def __post_init__(self) -> None:
        if not isinstance(self.element, Param):
            raise SpaceError(f"parameter {self.name!r}: list needs an element kind")
        if isinstance(self.length, bool) or not isinstance(self.length, int) or self.length < 1:
            raise SpaceError(f"parameter {self.name!r}: list length must be an integer >= 1")
        n = len(self.element.values()) ** min(self.length, 64)
        if n > MAX_VALUES:
            raise SpaceError(f"parameter {self.name!r}: {len(self.element.values())}^{self.length} lists"
                             f" (at most {MAX_VALUES:,} values per parameter)")
        super().__post_init__()

    def values(self) -> tuple[tuple[Value, ...], ...]:
        return self._values

    @cached_property
    def _values(self) -> tuple[tuple[Value, ...], ...]:
        return tuple(itertools.product(self.element.values(), repeat=self.length))

    @property
    def default_value(self) -> Value:
        if self.default is not None:
            return canonical(self.default)
        return (self.element.default_value,) * self.length

    def index(self, value: Value) -> int | None:
        value = canonical(value)
        if not isinstance(value, tuple) or len(value) != self.length:
            return None
        n = len(self.element.values())
        idx = 0
        for item in value:
            i = self.element.index(item)
            if i is None:
                return None
            idx = idx * n + i
        return idx

    def own(self, value: Value) -> Value:
        # Element by element: the product of the element's values may be a million lists.
        value = canonical(value)
        if not isinstance(value, tuple) or self.index(value) is None:
            return value
        return tuple(self.element.own(v) for v in value)

    def element_errors(self, value: Value) -> list[str]:
        value = canonical(value)
        if not isinstance(value, tuple):
            return [f"expected a list of {self.length} values"]
        if len(value) != self.length:
            return [f"expected {self.length} values, got {len(value)}"]
        # JSON, as the model writes its answer (this goes back to it in a repair round): null, "x", not None, 'x'
        return [f"[{i}]={json.dumps(jsonable(v), ensure_ascii=False, default=repr)} is not one of"
                f" {self.element.allowed_text()}" for i, v in enumerate(value) if not self.element.contains(v)]

    def allowed_text(self) -> str:
        return f"lists of {self.length} values, each {self.element.allowed_text()}"

    def adjacent(self, value: Value) -> list[Value]:
        value = canonical(value)
        out = []
        for i, item in enumerate(value):
            for alt in self.element.adjacent(item):
                out.append(value[:i] + (alt,) + value[i + 1:])
        return out

    def others(self, value: Value) -> list[Value]:
        value = canonical(value)
        out = []
        for i, item in enumerate(value):
            for alt in self.element.others(item):
                out.append(value[:i] + (alt,) + value[i + 1:])
        return out

    @property
    def width(self) -> int:
        return self.length * self.element.width

    def encode(self, value: Value) -> list[float]:
        return [x for item in canonical(value) for x in self.element.encode(item)]

    def json_schema(self) -> dict[str, Any]:
        return {"type": "array", "items": self.element.json_schema(),
                "minItems": self.length, "maxItems": self.length}

    def _spec(self) -> dict[str, Any]:
        element = self.element.to_dict()
        element.pop("name", None)
        return {"length": self.length, "element": element}

    def type_text(self) -> str:
        return f"list of {self.length} x ({self.element.type_text()})"


KINDS: dict[str, type[Param]] = {
    cls.kind: cls for cls in (PowerOfTwo, IntRange, Choice, Boolean, Permutation, ListParam)
}


def param_from_dict(data: dict[str, Any], name: str | None = None) -> Param:
    """Build a Param from its YAML/JSON form; the inverse of ``Param.to_dict``."""
    data = dict(data)
    kind = data.pop("kind", None)
    name = data.pop("name", name)
    if kind not in KINDS:
        raise SpaceError(f"parameter {name!r}: unknown kind {kind!r} (known: {', '.join(KINDS)})")
    cls = KINDS[kind]
    if kind == "list":
        element = data.pop("element", None)
        if not isinstance(element, dict):
            raise SpaceError(f"parameter {name!r}: list needs an 'element' mapping")
        data["element"] = param_from_dict(element, name=f"{name}_item")
    for key in ("options", "items"):
        if key in data:
            data[key] = tuple(data[key])
    try:
        return cls(name=name, **data)
    except TypeError as exc:
        raise SpaceError(f"parameter {name!r}: {exc}") from None
