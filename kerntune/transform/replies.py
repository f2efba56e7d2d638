"""What the model may answer: JSON schemas, their validation and the repair of
tunable parameters.

Every reply is JSON (``LLMClient`` extracts it and runs one repair round with the
problems found here).  Code travels in a string field and is only ever compiled by
Kernel Tuner in a worker process; tunable parameters are ``{name: [values]}``;
restrictions and grid divisors are expression strings parsed by kerntune's safe
expression evaluator.  Nothing a model writes is evaluated as Python here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from kerntune.errors import KerntuneError
from kerntune.space import Expression
from kerntune.transform.kernel import AXES, BLOCK_NAMES, kernel_names, uses_name

MAX_CODE_CHARS = 200_000
MAX_PARAMS = 10
MAX_VALUES = 16
MAX_STEPS = 12
#: A rewrite's space larger than this is sent back: no budget explores it and enumerating it would stall.
MAX_COMBINATIONS = 100_000
_TEXT = {"type": "string", "maxLength": 600}
_VALUE = {"type": ["integer", "number", "boolean"]}
_PARAMS = {"type": "object", "maxProperties": MAX_PARAMS,
           "additionalProperties": {"type": "array", "items": _VALUE, "minItems": 1, "maxItems": MAX_VALUES}}
_EXPRS = {"type": "array", "items": {"type": "string", "maxLength": 300}, "maxItems": 20}
_STEPS = {"type": "array", "items": {"type": "string", "minLength": 3, "maxLength": 600}, "maxItems": MAX_STEPS}

SCHEMAS: dict[str, dict[str, Any]] = {
    "plan": {"type": "object", "required": ["steps"], "properties": {"steps": _STEPS, "reasoning": _TEXT}},
    "validate": {"type": "object", "required": ["valid", "reason"],
                 "properties": {"valid": {"type": "boolean"}, "reason": _TEXT}},
    "breakdown": {"type": "object", "required": ["breakdown", "steps"],
                  "properties": {"breakdown": {"type": "boolean"}, "steps": _STEPS, "reason": _TEXT}},
    "evaluate_step": {"type": "object", "required": ["apply", "reason"],
                      "properties": {"apply": {"type": "boolean"}, "reason": _TEXT}},
    "execute": {"type": "object", "required": ["code", "tune_params"],
                # no maxLength on code: a grammar-constrained model (local:) would compile it into a huge
                # repetition; execute_problems checks MAX_CODE_CHARS instead
                "properties": {"code": {"type": "string", "minLength": 10},
                               "tune_params": _PARAMS, "restrictions": _EXPRS,
                               "grid_div_x": _EXPRS, "grid_div_y": _EXPRS, "grid_div_z": _EXPRS,
                               "explanation": _TEXT}},
    "restrictions": {"type": "object", "required": ["restrictions"],
                     "properties": {"restrictions": _EXPRS, "reason": _TEXT}},
    "replan": {"type": "object", "required": ["steps"], "properties": {"steps": _STEPS, "reasoning": _TEXT}},
    # a Triton kernel file (kerntune.transform.triton_backend): its tunable space is part of the code
    "triton_execute": {"type": "object", "required": ["code"],
                       "properties": {"code": {"type": "string", "minLength": 10}, "explanation": _TEXT}},
    "inputs": {"type": "object", "required": ["code"],
               "properties": {"code": {"type": "string", "minLength": 10},
                              "explanation": _TEXT}},
}

_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "integer": int, "number": (int, float)}


def execute_schema(fixed: Mapping[str, Sequence[Any]] = {},
                   previous: Mapping[str, Sequence[Any]] = {}) -> dict[str, Any]:
    """The ``execute`` schema for one step: a parameter the step fixed or the current kernel has with string
    values (Kernel Tuner allows ``"ACC_T": ["float", "double"]``) may be restated with strings, as the prompt
    asks for every parameter the code uses; a new parameter's values are numbers (``"64*2"`` is no value)."""
    kept = dict(previous)
    kept.update(dict(fixed))
    names = [n for n, vals in kept.items() if any(isinstance(v, str) for v in vals)]
    if not names:
        return SCHEMAS["execute"]
    item = {"type": ["integer", "number", "boolean", "string"]}
    params = dict(_PARAMS, properties={n: {"type": "array", "items": item, "minItems": 1, "maxItems": MAX_VALUES}
                                       for n in names})
    return dict(SCHEMAS["execute"], properties=dict(SCHEMAS["execute"]["properties"], tune_params=params))


def check_schema(value: Any, schema: Mapping[str, Any], path: str = "answer") -> list[str]:
    """The JSON-schema subset kerntune's reply schemas use; one message per problem."""
    problems: list[str] = []
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else list(types)
        ok = any(isinstance(value, _TYPES[t]) and not (t in ("integer", "number") and isinstance(value, bool))
                 for t in names)
        if not ok:
            return [f"{path}: expected {' or '.join(names)}, got {type(value).__name__}"]
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            problems.append(f"{path}: too short")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            problems.append(f"{path}: longer than {schema['maxLength']} characters")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            problems.append(f"{path}: needs at least {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            problems.append(f"{path}: at most {schema['maxItems']} items")
        for i, item in enumerate(value[:100]):
            problems += check_schema(item, schema.get("items", {}), f"{path}[{i}]")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                problems.append(f"{path}: missing {key!r}")
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            problems.append(f"{path}: at most {schema['maxProperties']} entries")
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, item in list(value.items())[:100]:
            if key in props:
                problems += check_schema(item, props[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                problems += check_schema(item, extra, f"{path}.{key}")
    return problems


def strip_fences(code: str) -> str:
    """Code the model wrapped in a Markdown fence inside the JSON string."""
    m = re.fullmatch(r"\s*```[A-Za-z+]*\s*\n(.*?)\n?```\s*", code, re.S)
    return m.group(1) if m else code


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_RESERVED = {"int", "float", "double", "char", "void", "if", "else", "for", "while", "do", "return", "const",
             "unsigned", "long", "short", "struct", "switch", "case", "break", "continue", "default", "sizeof",
             "kernel", "global", "local", "private", "constant", "__kernel", "__global", "__local"}


def execute_problems(answer: Any, kernel_name: str, lang: str, fixed: Mapping[str, Sequence[Any]] = (),
                     previous: Mapping[str, Sequence[Any]] = ()) -> list[str]:
    """Problems with a rewritten kernel, for the repair round (empty: usable).

    Grid divisors and restrictions may name the answer's parameters, the step's fixed ones and the current
    kernel's (``previous``: its block sizes and those the code still uses keep their values; a block size
    under another spelling is renamed to Kernel Tuner's): a work-per-thread step's
    ``["block_size_x", "WPT"]`` was refused when only WPT was declared."""
    problems = check_schema(answer, execute_schema(fixed, previous))
    if problems:
        return problems
    code = strip_fences(answer["code"])
    if len(code) > MAX_CODE_CHARS:
        return [f"code: longer than {MAX_CODE_CHARS:,} characters"]
    if kernel_name not in kernel_names(code, lang):
        problems.append(f"code: must define the kernel {kernel_name!r} with its original argument list")
    for name, values in answer["tune_params"].items():
        if not _IDENT.match(name) or name in _RESERVED:
            problems.append(f"tune_params: {name!r} is not a usable parameter name (a C identifier, not a keyword)")
        if len(set(map(repr, values))) != len(values):
            problems.append(f"tune_params.{name}: repeated values")
    sizes = {n: len(v) for n, v in answer["tune_params"].items()}
    sizes.update({n: len(v) for n, v in dict(fixed).items()})
    combos = 1
    for n in sizes.values():
        combos *= max(n, 1)
    if combos > MAX_COMBINATIONS:
        problems.append(f"tune_params: {combos:,} combinations of values; give fewer values (at most"
                        f" {MAX_COMBINATIONS:,} combinations)")
    names = set(answer["tune_params"]) | set(fixed) | set(previous)
    names |= {b for b in BLOCK_NAMES if any(near_duplicates(b, n) for n in names)}  # BLOCK_SIZE_X becomes block_size_x
    for axis in AXES:
        for text in answer.get(f"grid_div_{axis}") or []:
            try:
                Expression(text, names)
            except KerntuneError as exc:
                problems.append(f"grid_div_{axis}: {exc}")
    problems += restriction_problems(answer.get("restrictions") or [], names)
    return problems


def restriction_problems(restrictions: Sequence[str], names: Sequence[str] | set[str]) -> list[str]:
    problems = []
    for text in restrictions:
        try:
            Expression(text, names)
        except KerntuneError as exc:
            problems.append(f"restrictions: {exc}")
    return problems


def usable_restrictions(restrictions: Sequence[str], names: Sequence[str] | set[str]) -> tuple[list[str], list[str]]:
    """The restrictions that parse over ``names``, and a note for each dropped one."""
    kept, notes = [], []
    for text in restrictions:
        try:
            kept.append(Expression(text, names).source)
        except KerntuneError as exc:
            notes.append(f"restriction dropped: {exc}")
    return kept, notes


# -- parameter fixing ------------------------------------------------------------------------------
def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def near_duplicates(a: str, b: str) -> bool:
    """block_size and BLOCK_SIZE_X, tile_size and TILESIZE: one parameter under two names.

    Names that differ only in their axis (block_size_x, block_size_y) are different parameters.
    """
    if a == b:
        return False
    na, nb = _norm(a), _norm(b)
    if na == nb:
        return True
    short, long_ = sorted((na, nb), key=len)
    return long_.startswith(short) and long_[len(short):] in ("x", "s", "dim", "val", "value", "param")


def _clean_values(values: Sequence[Any], strings: bool = False) -> list[Any]:
    """The model's values for a parameter it declares: numbers (integral floats as integers), and strings
    only where ``strings`` (a parameter the kernel had or the step fixed, restated), at most ``MAX_VALUES``.
    Never applied to the values a step fixed or the current kernel had: those are the user's (or an
    accepted kernel's), Kernel Tuner's values as given, strings included (``"ACC_T": ["float", "double"]``
    lost every value, and every rewrite was rejected)."""
    out: list[Any] = []
    for v in values:
        if isinstance(v, bool):
            v = int(v)
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if (isinstance(v, (int, float)) or (strings and isinstance(v, str))) and v not in out:
            out.append(v)
    return out[:MAX_VALUES]


def _mergeable(a: str, b: str, code: str) -> bool:
    """Whether near duplicates ``a`` and ``b`` are one parameter under two names: when the code names only
    one of them (the other is a declaration under another spelling), or they differ only in case and
    underscores.  Two names the code uses both are two parameters: WPT and WPT_X were fused, the model's
    ``acc[WPT][WPT_X]`` rewritten to ``acc[WPT][WPT]`` and WPT's earlier values replaced."""
    if _norm(a) == _norm(b):
        return True
    return not (uses_name(code, a) and uses_name(code, b))


@dataclass
class FixedParams:
    code: str
    tune_params: dict[str, list[Any]]
    grid_div: dict[str, list[str]]
    notes: list[str] = field(default_factory=list)
    renames: dict[str, str] = field(default_factory=dict)

    def rename(self, text: str) -> str:
        """An expression the model wrote, with the renamed parameters' names replaced."""
        for old, new in self.renames.items():
            text = re.sub(rf"\b{re.escape(old)}\b", new, text)
        return text


def fix_params(code: str, declared: Mapping[str, Sequence[Any]], previous: Mapping[str, Sequence[Any]] = {},
               fixed: Mapping[str, Sequence[Any]] = {}, grid_div: Mapping[str, Sequence[str]] = {}) -> FixedParams:
    """Make the declared parameters match the code.

    - near-duplicate names (block_size / BLOCK_SIZE_X) become one: Kernel Tuner's block-size names
      win, then names the kernel had before or the step fixed, then the name the code uses most; the
      others are renamed in the code.  Two names the code uses both are two parameters (WPT and WPT_X,
      TILE and TILE_X), unless they differ only in case and underscores (``_mergeable``);
    - a step's fixed parameters keep the step's values, as they are (strings included);
    - a parameter the code still uses but the model did not declare keeps its earlier values, and so do
      the earlier block sizes (they set the launch whether or not the code names them), as they are;
    - a declared parameter the code never names is dropped (block sizes stay: they set the launch);
    - ``#define NAME`` lines for declared parameters are removed: Kernel Tuner defines them.
    """
    notes: list[str] = []
    params: dict[str, list[Any]] = {}
    for name, values in declared.items():
        vals = _clean_values(values, strings=name in previous or name in fixed)
        if vals:
            params[name] = vals
        else:
            notes.append(f"{name}: no numeric values; dropped")
    for name, values in fixed.items():
        params[name] = list(values)
    divs = {a: list(v) for a, v in grid_div.items() if v}
    known = list(fixed) + [n for n in previous if n not in fixed]

    def rank(name: str) -> tuple[int, int, int]:
        return (0 if name in BLOCK_NAMES else 1, 0 if name in known else 1,
                -len(re.findall(rf"\b{re.escape(name)}\b", code)))

    candidates = list(dict.fromkeys(list(params) + [n for n in previous if uses_name(code, n)]))
    # BLOCK_SIZE_X alone is still Kernel Tuner's block_size_x: under another name it would not set the launch
    candidates += [b for b in BLOCK_NAMES if b not in candidates and any(near_duplicates(b, c) for c in candidates)]
    merged: set[str] = set()
    renames: dict[str, str] = {}
    for i, a in enumerate(candidates):
        if a in merged:
            continue
        group = [a]
        for b in candidates[i + 1:]:
            # every two of a group are one parameter: TILE (declared, unused) takes in TILE_X or TILES, not both
            if b not in merged and near_duplicates(a, b) and all(_mergeable(g, b, code) for g in group):
                group.append(b)
        if len(group) == 1:
            continue
        keep = min(group, key=rank)
        for other in group:
            if other == keep:
                continue
            merged.add(other)
            renames[other] = keep
            code = re.sub(rf"\b{re.escape(other)}\b", keep, code)
            if other in params:
                if keep not in params:
                    params[keep] = params[other]
                del params[other]
            for axis, exprs in divs.items():
                divs[axis] = [re.sub(rf"\b{re.escape(other)}\b", keep, e) for e in exprs]
            notes.append(f"{other} renamed to {keep} (one parameter under two names)")
    for name, values in previous.items():
        if name in params or name in merged:
            continue
        if uses_name(code, name):
            params[name] = list(values)
            notes.append(f"{name}: used in the code but not declared; kept its earlier values")
        elif name in BLOCK_NAMES:  # the launch keeps its tuned block shape
            params[name] = list(values)
    div_names = {n for exprs in divs.values() for e in exprs for n in re.findall(r"[A-Za-z_]\w*", e)}
    for name in list(params):
        if name in BLOCK_NAMES or name in div_names or uses_name(code, name):
            continue
        del params[name]
        notes.append(f"{name}: declared but not used in the code; dropped")
    for name in params:
        pattern = re.compile(rf"^[ \t]*#[ \t]*define[ \t]+{re.escape(name)}\b[^\n]*\n?", re.M)
        if pattern.search(code):
            code = pattern.sub("", code)
            notes.append(f"#define {name} removed: Kernel Tuner defines every tunable parameter")
    return FixedParams(code, params, divs, notes, renames)
