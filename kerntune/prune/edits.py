"""Edit operations on a Space: what a pruner (a model or a rule) may do to it.

An edit is validated against the space as it stands when the edit comes up,
so a list is applied in order and a refused edit leaves the space unchanged:
unknown names, values the parameter does not have, values outside what the
kernel accepts, and any edit that would leave no valid config are refused with
a reason that names them.  Parameters are pinned, never deleted, so config
keys (and recorded measurements) stay comparable with the original space.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import product
from typing import Any, Mapping, Sequence

from kerntune.errors import SpaceError
from kerntune.space import Choice, Param, Space, jsonable
from kerntune.space.params import canonical

OPS = ("remove_param", "remove_value", "add_value", "add_param", "split_group", "join_groups")


@dataclass
class Edit:
    op: str
    param: str = ""
    value: Any = None
    values: list[Any] = field(default_factory=list)
    params: list[str] = field(default_factory=list)
    reason: str = ""

    @classmethod
    def from_dict(cls, item: Mapping[str, Any]) -> "Edit":
        if not isinstance(item, Mapping):
            raise SpaceError(f"an edit must be an object, got {type(item).__name__}")
        op = item.get("op")
        if op not in OPS:
            raise SpaceError(f"unknown edit op {op!r} (known: {', '.join(OPS)})")
        return cls(op=op, param=str(item.get("param") or ""), value=item.get("value"),
                   values=list(item.get("values") or []), params=[str(p) for p in item.get("params") or []],
                   reason=str(item.get("reason") or "")[:300])

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.op}
        if self.param:
            out["param"] = self.param
        if self.value is not None:
            out["value"] = jsonable(self.value)
        if self.values:
            out["values"] = [jsonable(v) for v in self.values]
        if self.params:
            out["params"] = self.params
        if self.reason:
            out["reason"] = self.reason
        return out

    def text(self) -> str:
        what = {"remove_param": f"pin {self.param} = {self.value!r}", "remove_value": f"drop {self.param} = {self.value!r}",
                "add_value": f"add {self.param} = {self.value!r}", "add_param": f"add parameter {self.param}",
                "split_group": f"split {self.params} into an independent group",
                "join_groups": f"join groups {self.params}"}[self.op]
        return what + (f"  ({self.reason})" if self.reason else "")


@dataclass
class EditOutcome:
    space: Space
    applied: list[Edit]
    refused: list[tuple[Edit, str]]
    before: int
    after: int

    def diff(self, original: Space) -> str:
        """A readable diff: per parameter, the values dropped and added; then refusals."""
        lines = []
        for p in original.params:
            old, new = list(p.values()), list(self.space.by_name[p.name].values())
            gone = [v for v in old if v not in new]
            added = [v for v in new if v not in old]
            if gone or added:
                lines.append(f"  {p.name}: " + " ".join([f"-{jsonable(v)}" for v in gone] +
                                                        [f"+{jsonable(v)}" for v in added])
                             + f"   ({len(old)} -> {len(new)} values)")
        lines.append(f"configs: {self.before:,} -> {self.after:,}")
        lines += [f"refused: {e.text()}: {why}" for e, why in self.refused]
        return "\n".join(lines)


def _with_values(p: Param, values: Sequence[Any], default: Any) -> Param:
    return Choice(p.name, options=tuple(values), default=default, description=p.description)


def _rebuilt(space: Space, name: str, values: Sequence[Any], what: str) -> Space:
    old = space.by_name[name]
    default = space.default[name]
    if default not in values:  # the default moves to the kept value nearest the old default's position
        pos = old.index(default) or 0
        default = min(values, key=lambda v: abs((old.index(v) or 0) - pos))
    params = [_with_values(p, values, default) if p.name == name else p for p in space.params]
    new_default = dict(space.default, **{name: default})
    if not all(c(new_default) for c in space.constraints):
        # The old default is gone: the first valid config of the edited space takes its place.
        new_default = next((dict(zip(space.names, combo)) for combo in product(*(p.values() for p in params))
                            if all(c(dict(zip(space.names, combo))) for c in space.constraints)), None)
        if new_default is None:
            raise SpaceError(f"{what} would leave no valid config")
    return Space(params, space.constraints, new_default, name=space.name, description=space.description)


def apply_edits(space: Space, edits: Sequence[Edit], accepts: Mapping[str, Sequence[Any]] | None = None) -> EditOutcome:
    """Apply ``edits`` in order; ``accepts`` maps a parameter to every value the kernel
    accepts (additions must come from it; without it nothing can be added)."""
    before = space.count()
    current = space
    applied: list[Edit] = []
    refused: list[tuple[Edit, str]] = []
    for e in edits:
        try:
            current = _apply_one(current, e, accepts or {})
            applied.append(e)
        except SpaceError as exc:
            refused.append((e, str(exc)))
    return EditOutcome(current, applied, refused, before, current.count())


def _apply_one(space: Space, e: Edit, accepts: Mapping[str, Sequence[Any]]) -> Space:
    if e.op in ("split_group", "join_groups"):
        raise SpaceError("independent groups exist only in Tensile configs (kerntune tensile); a generic space is "
                         "one product of its parameters")
    if e.op == "add_param":
        raise SpaceError(f"parameter {e.param!r} cannot be added: the kernel does not read it (a generic space's "
                         "kernel fixes its parameters; add it to the kernel file first)")
    if e.param not in space.by_name:
        raise SpaceError(f"unknown parameter {e.param!r} (known: {', '.join(space.names)})")
    p = space.by_name[e.param]
    values = list(p.values())
    value = canonical(e.value)
    if e.op == "add_value":
        allowed = [canonical(v) for v in accepts.get(e.param, ())]
        if value in values:
            raise SpaceError(f"{e.param} already has the value {e.value!r}")
        if value not in allowed:
            raise SpaceError(f"{e.param} = {e.value!r} is not a value the kernel accepts"
                             + (f" ({', '.join(map(repr, allowed))})" if allowed else ""))
        order = [canonical(v) for v in accepts[e.param]]
        new = sorted(values + [value], key=order.index)
    elif value not in values:
        raise SpaceError(f"{e.param} has no value {e.value!r} (values: {p.allowed_text()})")
    elif e.op == "remove_param":
        new = [value]
    else:  # remove_value
        new = [v for v in values if v != value]
        if not new:
            raise SpaceError(f"removing {e.param} = {e.value!r} would leave {e.param} without values")
    return _rebuilt(space, e.param, new, e.text())


def edits_schema(space: Space) -> dict[str, Any]:
    """JSON schema of a pruner's answer: ``{"edits":[{"op","param","value","reason"}]}``."""
    # The value must be one of the space's values (of some parameter: a grammar-constrained
    # model otherwise writes {} or null; a value of the wrong parameter is refused with a reason).
    values = {json.dumps(jsonable(v)): jsonable(v) for p in space.params for v in p.values()}
    value: dict[str, Any] = ({"enum": list(values.values())} if len(values) <= 256
                             else {"type": ["integer", "number", "string", "boolean", "array"]})
    return {"type": "object", "required": ["edits"], "properties": {"edits": {
        "type": "array", "maxItems": 4 * len(space.params) + 8,
        "items": {"type": "object", "required": ["op", "param", "value"], "properties": {
            "op": {"type": "string", "enum": ["remove_value", "remove_param"]},
            "param": {"type": "string", "enum": list(space.names)},
            "value": value, "reason": {"type": "string", "maxLength": 200}}}}}}


def edits_from_answer(answer: Any) -> tuple[list[Edit], list[str]]:
    """Edits from a parsed model answer, and the reasons items were dropped."""
    items = answer.get("edits") if isinstance(answer, Mapping) else answer
    if not isinstance(items, list):
        return [], ['expected {"edits": [...]}']
    edits, problems = [], []
    for item in items:
        try:
            edits.append(Edit.from_dict(item))
        except SpaceError as exc:
            problems.append(str(exc))
    return edits, problems
