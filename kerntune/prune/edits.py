"""Edit operations on a Space: what a pruner or an expander (a model, a rule, a person) may do.

Six operations: ``remove_param`` (pin a parameter to one value), ``remove_value``,
``add_value``, ``add_param``, ``split_group`` (make parameters additive
alternatives of each other) and ``join_groups`` (make them multiply again).
An edit is validated against the space as it stands when the edit comes up, so
a list is applied in order and a refused edit leaves the space unchanged: unknown
names, values the parameter does not have, added values outside what the kernel
accepts (``rules.py``), parameters the kernel does not read, and any edit that
would leave no valid config are refused with a reason that names them.
Parameters are pinned, never deleted, so config keys (and recorded measurements)
stay comparable with the original space.

Additive groups.  A Space has no notion of groups, so a group is a constraint:
for a group ``(A, B, C)`` whose base values are ``a0, b0, c0`` (the default
config's when the group was made), ``(A != a0) + (B != b0) + (C != c0) <= 1``
admits the configs where at most one of them leaves its base value.  As in
Tensile's ``Groups``, alternatives add within a group (``1 + sum(|values| - 1)``
combinations) and the group multiplies with every other parameter and group;
``Space.count``, enumeration, sampling and every strategy follow from the
constraint, and a saved space file keeps it, so every kerntune command sees the
same configs.  The groups and their base values are kept beside the space
(``SpaceState.groups`` and ``bases``; ``groups:`` in a space file, a group whose
bases left the default as a mapping of its parameters to them) and the
constraints rebuilt from them after every edit.  The bases stay where they were when an edit moves the
default: a constraint written around a moved default admitted configs the space
never had (two parameters off the old base), so removing a base value, which can
only remove configs, would have added some.  Without its base value a parameter
is always "off base", so the group's other parameters keep theirs: exactly the
configs of the space before the edit that remain.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Mapping, Sequence

from kerntune.errors import SpaceError
from kerntune.prune.rules import Rule, kind_of
from kerntune.space import Choice, Param, Space, jsonable
from kerntune.space.params import canonical
from kerntune.space.space import Constraint, find_valid

OPS = ("remove_param", "remove_value", "add_value", "add_param", "split_group", "join_groups")
#: The ops that act on one named parameter, and the fields an edit object may hold.
_NEEDS_PARAM = ("remove_param", "remove_value", "add_value", "add_param")
_FIELDS = ("op", "param", "value", "values", "params", "kind", "default", "reason")


@dataclass
class Edit:
    op: str
    param: str = ""
    value: Any = None
    values: list[Any] = field(default_factory=list)
    params: list[str] = field(default_factory=list)
    reason: str = ""
    kind: str = ""        # add_param with --allow-new: the new parameter's kind (pow2, int, number, str, ...)
    default: Any = None   # add_param: the value the kernel used while the parameter did not exist

    @classmethod
    def from_dict(cls, item: Mapping[str, Any]) -> "Edit":
        if not isinstance(item, Mapping):
            raise SpaceError(f"an edit must be an object, got {type(item).__name__}")
        op = item.get("op")
        if op not in OPS:
            raise SpaceError(f"unknown edit op {op!r} (known: {', '.join(OPS)})")
        values, params = item.get("values") or [], item.get("params") or []
        if not isinstance(values, list) or not isinstance(params, list):
            raise SpaceError(f"{op}: 'values' and 'params' must be lists")
        if op in _NEEDS_PARAM and not item.get("param"):
            # said as what it is: an add_param without it was refused as "parameter '' cannot be added"
            # with advice (--allow-new) that could not help
            unknown = sorted(set(item) - set(_FIELDS))
            raise SpaceError(f"{op}: 'param' (the parameter's name) is missing"
                             + (f"; unknown field(s) {', '.join(map(repr, unknown))}" if unknown else "")
                             + f" (an edit's fields: {', '.join(_FIELDS)})")
        return cls(op=op, param=str(item.get("param") or ""), value=item.get("value"), values=list(values),
                   params=[str(p) for p in params], reason=str(item.get("reason") or "")[:300],
                   kind=str(item.get("kind") or ""), default=item.get("default"))

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
        if self.kind:
            out["kind"] = self.kind
        if self.default is not None:
            out["default"] = jsonable(self.default)
        if self.reason:
            out["reason"] = self.reason
        return out

    def text(self) -> str:
        values = f" {[jsonable(v) for v in self.values]}" if self.values else ""
        what = {"remove_param": f"pin {self.param} = {self.value!r}",
                "remove_value": f"drop {self.param} = {self.value!r}",
                "add_value": f"add {self.param} = {self.value!r}", "add_param": f"add parameter {self.param}{values}",
                "split_group": f"split {self.params} into an additive group",
                "join_groups": f"join the groups of {self.params or [self.param]}"}[self.op]
        return what + (f"  ({self.reason})" if self.reason else "")


def _literal(value: Any) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    return repr(value)


def group_constraint(space: Space, names: Sequence[str], bases: Mapping[str, Any] | None = None) -> str | None:
    """The constraint text of an additive group around its base values (``bases``; a parameter without
    one: the space's default), None when it restricts nothing.  A parameter with one value that is its
    base never leaves it and is left out; one whose values lack its base (pinned elsewhere, base removed)
    is always off base and stays in: the others must keep their bases."""
    terms = []
    for n in names:
        base = (bases or {}).get(n, space.default[n])
        param = space.by_name[n]
        if len(param.values()) > 1 or not param.contains(base):
            terms.append(f"({n} != {_literal(base)})")
    if len(terms) < 2:
        return None
    return " + ".join(terms) + " <= 1"


def group_combinations(space: Space, names: Sequence[str], bases: Mapping[str, Any] | None = None) -> int:
    """How many value combinations of its parameters an additive group admits, counted as
    ``group_constraint`` restricts them: ``1 + sum(|values| - 1)`` while every parameter holds its base;
    a parameter that lacks its base (base removed) is always off it and pins the others to theirs, so
    its values alone; two lacking theirs admit none.  The diff once counted ``1 + sum(|values| - 1)``
    regardless, and stated 6 where a group with a removed base held 2."""
    sizes, lacking = [], []
    for n in names:
        param = space.by_name[n]
        size = len(param.values())
        sizes.append(size)
        if not param.contains((bases or {}).get(n, space.default[n])):
            lacking.append(size)
    if len(lacking) > 1:
        return 0
    if lacking:
        return lacking[0]
    return 1 + sum(s - 1 for s in sizes)


@dataclass
class SpaceState:
    """A space as edits see it: the space without its group constraints (``base``), the groups and
    their parameters' base values, the rule each parameter's additions must pass, the parameters the
    kernel reads but the space does not search yet (``extensible``) and names a user allowed to be
    added (``allow_new``)."""

    base: Space
    groups: list[tuple[str, ...]] = field(default_factory=list)
    rules: dict[str, Rule] = field(default_factory=dict)
    extensible: dict[str, Param] = field(default_factory=dict)
    allow_new: tuple[str, ...] = ()
    implicit: dict[str, Any] = field(default_factory=dict)  # added parameter -> the kernel's value without it
    #: grouped parameter -> its base value, fixed when its group was made (edits that move the default
    #: must not move the group: see the module's docstring)
    bases: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, space: Space, accepts: Mapping[str, Any] | None = None, extensible: Sequence[Param] = (),
           groups: Sequence[Sequence[str]] = (), allow_new: Sequence[str] = (),
           implicit: Mapping[str, Any] | None = None, bases: Mapping[str, Any] | None = None) -> "SpaceState":
        """``bases`` maps grouped parameters to their base values; a grouped parameter without one takes
        the space's default (how groups were read before bases were kept)."""
        ext = {p.name: p for p in extensible if p.name not in space.by_name}
        rules = {p.name: Rule.of(p) for p in space.params}
        rules.update({p.name: replace(Rule.of(p), values=tuple(p.values())) for p in ext.values()})
        for name, decl in (accepts or {}).items():
            if name not in space.by_name and name not in ext:
                raise SpaceError(f"accepts names unknown parameter {name!r} (known: {', '.join(space.names)})")
            rules[name] = decl if isinstance(decl, Rule) else Rule.declared(
                space.by_name.get(name) or ext[name], decl, name)
        for g in groups:
            unknown = [n for n in g if n not in space.by_name]
            if unknown:
                raise SpaceError(f"group {list(g)} names unknown parameter {unknown[0]!r}")
        unknown = [n for n in implicit or {} if n not in space.by_name]
        if unknown:
            raise SpaceError(f"implicit names unknown parameter {unknown[0]!r}")
        grouped = [n for g in groups for n in g]
        stray = [n for n in bases or {} if n not in grouped]
        if stray:
            raise SpaceError(f"a base value is given for {stray[0]!r}, which is in no group")
        given = {n: canonical(v) for n, v in (bases or {}).items()}
        return cls(space, [tuple(g) for g in groups], rules, ext, tuple(allow_new),
                   {n: canonical(v) for n, v in (implicit or {}).items()},
                   {n: given[n] if n in given else space.default[n] for n in grouped})

    @cached_property
    def space(self) -> Space:
        """The searched space: ``base`` with one constraint per additive group.  Where the default leaves
        the groups' bases in a way they forbid, the first config they admit is the default; SpaceError
        when there is none."""
        texts = [t for g in self.groups if (t := group_constraint(self.base, g, self.bases))]
        if not texts:
            return self.base
        default = self.base.default
        grouped = [Constraint(t, self.base.names) for t in texts]
        if not all(c(default) for c in grouped):
            default = find_valid(self.base.params, list(self.base.constraints) + grouped)
        return Space(self.base.params, list(self.base.constraints) + texts, default,
                     name=self.base.name, description=self.base.description)

    def rule(self, name: str) -> Rule:
        return self.rules.get(name) or Rule.of(self.base.by_name[name])

    def group_of(self, name: str) -> tuple[str, ...] | None:
        return next((g for g in self.groups if name in g), None)


@dataclass
class EditOutcome:
    state: SpaceState
    applied: list[Edit]
    refused: list[tuple[Edit, str]]
    before: int
    after: int

    @property
    def space(self) -> Space:
        return self.state.space

    def diff(self, original: Space | SpaceState) -> str:
        """A readable diff: values dropped and added per parameter, new parameters, groups made and
        undone, the config counts, then every refusal with its reason."""
        old_state = original if isinstance(original, SpaceState) else SpaceState.of(original)
        lines = []
        for p in old_state.base.params:
            old, new = list(p.values()), list(self.state.base.by_name[p.name].values())
            gone = [v for v in old if v not in new]
            added = [v for v in new if v not in old]
            if gone or added:
                lines.append(f"  {p.name}: " + " ".join([f"-{jsonable(v)}" for v in gone] +
                                                        [f"+{jsonable(v)}" for v in added])
                             + f"   ({len(old)} -> {len(new)} values)")
        for p in self.state.base.params:
            if p.name not in old_state.base.by_name:
                lines.append(f"  +{p.name}: new parameter, values {p.allowed_text()}, "
                             f"default {jsonable(self.state.base.default[p.name])!r}")
        for g in self.state.groups:
            if g not in old_state.groups:
                sizes = [len(self.state.base.by_name[n].values()) for n in g]
                count = group_combinations(self.state.base, g, self.state.bases)
                lines.append(f"  +group ({', '.join(g)}): additive, {count} combinations "
                             f"instead of {' x '.join(map(str, sizes))}")
        for g in old_state.groups:
            if g not in self.state.groups:
                lines.append(f"  -group ({', '.join(g)}): its parameters multiply again")
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
        # The old default is gone: the first valid config of the edited space takes its place,
        # searched within find_valid's bounds (walking 1e12 points for it hung the run).
        try:
            new_default = find_valid(params, space.constraints)
        except SpaceError as exc:
            detail = "" if str(exc) == "the space has no valid configuration" else f" ({exc})"
            raise SpaceError(f"{what} would leave no valid config{detail}") from None
    return Space(params, space.constraints, new_default, name=space.name, description=space.description)


def apply_edits(space: Space | SpaceState, edits: Sequence[Edit], accepts: Mapping[str, Any] | None = None,
                allow_new: Sequence[str] = ()) -> EditOutcome:
    """Apply ``edits`` in order.  ``accepts`` maps a parameter to what the kernel accepts (a list,
    or a mapping with kind/values/low/high; see rules.py); ``allow_new`` names parameters that
    may be added with the values the edit gives."""
    state = space if isinstance(space, SpaceState) else SpaceState.of(space, accepts, allow_new=allow_new)
    if isinstance(space, SpaceState) and (accepts or allow_new):
        rules = dict(state.rules)
        rules.update({n: d if isinstance(d, Rule) else Rule.declared(state.base.by_name.get(n), d, n)
                      for n, d in (accepts or {}).items()})
        state = replace(state, rules=rules, allow_new=tuple(state.allow_new) + tuple(allow_new))
    before = state.space.count()
    applied: list[Edit] = []
    refused: list[tuple[Edit, str]] = []
    for e in edits:
        try:
            new = _apply_one(state, e)
            try:
                new.space  # noqa: B018 - the groups' constraints must still admit a config
            except SpaceError as exc:
                raise SpaceError(f"{e.text()} would leave no valid config ({exc})") from None
            state = new
            applied.append(e)
        except SpaceError as exc:
            refused.append((e, str(exc)))
    return EditOutcome(state, applied, refused, before, state.space.count())


def _apply_one(state: SpaceState, e: Edit) -> SpaceState:
    space = state.base
    if e.op == "split_group":
        return _split(state, e)
    if e.op == "join_groups":
        names = e.params or ([e.param] if e.param else [])
        hit = [g for g in state.groups if any(n in g for n in names)]
        if not hit:
            raise SpaceError(f"no group holds {names} (groups: {[list(g) for g in state.groups] or 'none'})")
        kept = [g for g in state.groups if g not in hit]
        return replace(state, groups=kept, bases={n: v for n, v in state.bases.items() if any(n in g for g in kept)})
    if e.op == "add_param":
        return _add_param(state, e)
    if e.param not in space.by_name:
        raise SpaceError(f"unknown parameter {e.param!r} (known: {', '.join(space.names)})")
    p = space.by_name[e.param]
    values = list(p.values())
    value = canonical(e.value)
    if e.op == "add_value":
        rule = state.rule(e.param)
        if value is None:
            raise SpaceError(f"add_value {e.param} needs a value")
        if p.contains(value):
            raise SpaceError(f"{e.param} already has the value {e.value!r}")
        why = rule.problem(value)
        if why:
            raise SpaceError(f"{e.param}: {why}")
        new_state = replace(state, base=_rebuilt(space, e.param, rule.order(values + [value]), e.text()))
        if new_state.space.count() <= state.space.count():
            raise SpaceError(f"{e.text()} adds no valid config: the space's constraints reject every config with "
                             f"{e.param} = {e.value!r}" + (" (a recorded space admits only its recorded configs: "
                                                           "expand a space file instead)"
                                                           if any(c.expression is None for c in space.constraints)
                                                           else ""))
        return new_state
    if not p.contains(value):
        raise SpaceError(f"{e.param} has no value {e.value!r} (values: {p.allowed_text()})")
    value = values[p.index(value)]  # type: ignore[index]
    if e.op == "remove_param":
        new = [value]
    else:  # remove_value
        new = [v for v in values if v != value]
        if not new:
            raise SpaceError(f"removing {e.param} = {e.value!r} would leave {e.param} without values")
    return replace(state, base=_rebuilt(space, e.param, new, e.text()))


def _split(state: SpaceState, e: Edit) -> SpaceState:
    names = list(dict.fromkeys(e.params))
    unknown = [n for n in names if n not in state.base.by_name]
    if unknown:
        raise SpaceError(f"unknown parameter {unknown[0]!r} (known: {', '.join(state.base.names)})")
    taken = [(n, g) for n in names if (g := state.group_of(n))]
    if taken:
        raise SpaceError(f"{taken[0][0]} is already in the group {list(taken[0][1])}: join it first")
    if len([n for n in names if len(state.base.by_name[n].values()) > 1]) < 2:
        raise SpaceError("a group needs at least two parameters with more than one value each")
    return replace(state, groups=state.groups + [tuple(names)],
                   bases=dict(state.bases, **{n: state.base.default[n] for n in names}))


def _add_param(state: SpaceState, e: Edit) -> SpaceState:
    space, name = state.base, e.param
    if name in space.by_name:
        raise SpaceError(f"{name} is already a parameter (add_value adds values to it)")
    if name in state.extensible:
        declared = state.extensible[name]
        values = [canonical(v) for v in e.values] or list(declared.values())
        bad = [v for v in values if not declared.contains(v)]
        if bad:
            raise SpaceError(f"{name} = {jsonable(bad[0])!r} is not a value the kernel accepts "
                             f"({declared.allowed_text()})")
        default = declared.default_value  # the value the kernel used so far: always kept
        rule = state.rule(name)
        description = declared.description
    elif name in state.allow_new:
        values = [canonical(v) for v in e.values]
        if not values:
            raise SpaceError(f"add_param {name} needs values")
        kind = e.kind or kind_of(values)
        if kind == "any":
            raise SpaceError(f"add_param {name}: values of mixed types {[jsonable(v) for v in values]}")
        rule = Rule(kind)
        bad = [(v, why) for v in values if (why := rule.problem(v))]
        if bad:
            raise SpaceError(f"add_param {name}: {bad[0][1]}")
        default = canonical(e.default) if e.default is not None else values[0]
        if rule.problem(default):
            raise SpaceError(f"add_param {name}: default {rule.problem(default)}")
        description = ""
    else:
        raise SpaceError(f"parameter {name!r} cannot be added: the kernel must read it (declare it under "
                         "'extensible:' in the space file, or pass --allow-new NAME)")
    if len({repr(v) for v in values}) != len(values):
        raise SpaceError(f"add_param {name}: duplicate values")
    ordered = rule.order(values if default in values else [default] + values)
    param = Choice(name, options=tuple(ordered), default=default, description=description)
    base = Space(space.params + [param], space.constraints, dict(space.default, **{name: default}),
                 name=space.name, description=space.description)
    return replace(state, base=base, rules=dict(state.rules, **{name: rule}),
                   extensible={k: v for k, v in state.extensible.items() if k != name},
                   implicit=dict(state.implicit, **{name: default}))


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


def expand_schema(state: SpaceState) -> dict[str, Any]:
    """JSON schema of an expander's answer: all six operations; values are free (new ones are the point)
    and checked by the rules when applied."""
    names = list(state.base.names) + [n for n in list(state.extensible) + list(state.allow_new)
                                      if n not in state.base.by_name]
    scalar = {"type": ["integer", "number", "string", "boolean", "array"]}
    return {"type": "object", "required": ["edits"], "properties": {"edits": {
        "type": "array", "maxItems": 4 * len(names) + 8,
        "items": {"type": "object", "required": ["op"], "properties": {
            "op": {"type": "string", "enum": list(OPS)},
            "param": {"type": "string", "enum": names}, "value": scalar,
            "values": {"type": "array", "items": scalar, "maxItems": 64},
            "params": {"type": "array", "items": {"type": "string", "enum": names}},
            "kind": {"type": "string"}, "default": scalar,
            "reason": {"type": "string", "maxLength": 200}}}}}}


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
