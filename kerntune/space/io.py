"""Reading and writing Spaces: kerntune YAML/JSON and Kernel Tuner's
``tune_params`` + ``restrictions``."""

from __future__ import annotations

import difflib
import inspect
import io
import json
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from kerntune.errors import SpaceError
from kerntune.space.kinds import param_from_dict
from kerntune.space.params import Choice, Param, canonical, infer_param
from kerntune.space.space import Constraint, Space


def space_from_dict(data: Mapping[str, Any]) -> Space:
    try:
        return _space_from_dict(data)
    except (TypeError, ValueError, AttributeError) as exc:
        # Wrong value types in a file (options: 5, default: 5, …): a user error, one line.
        raise SpaceError(f"malformed space: {exc}") from None


# Every top-level key a space file may hold: the Space itself; what ``space prune``/``expand``
# read (groups, accepts, extensible, implicit); and the record they write beside it (note, edits,
# where it came from, the iterations).  Any other key is a misspelling (``constraint:`` for
# ``constraints:`` would silently drop the constraints), so it is refused.
SPACE_KEYS = ("name", "description", "params", "constraints", "default")
PRUNE_KEYS = ("groups", "accepts", "extensible", "implicit")
RECORD_KEYS = ("note", "edits", "pruned_from", "expanded_from", "replayed_with", "iterations", "stop")


def _check_top_keys(data: Mapping[str, Any]) -> None:
    known = SPACE_KEYS + PRUNE_KEYS + RECORD_KEYS
    unknown = [str(k) for k in data if k not in known]
    if unknown:
        close = difflib.get_close_matches(unknown[0], SPACE_KEYS + PRUNE_KEYS, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise SpaceError(f"unknown top-level key {unknown[0]!r} in the space{hint}; known keys: "
                         f"{', '.join(SPACE_KEYS + PRUNE_KEYS)}")


def _space_from_dict(data: Mapping[str, Any]) -> Space:
    if not isinstance(data, Mapping) or "params" not in data:
        raise SpaceError("a space file needs a 'params' list or mapping")
    _check_top_keys(data)
    raw = data["params"]
    params: list[Param] = []
    shorthand: set[str] = set()  # names given as a bare list of options (BLOCK: [64, 32, 128])
    if isinstance(raw, Mapping):
        for n, spec in raw.items():
            if isinstance(spec, Mapping):
                params.append(param_from_dict(spec, name=n))
            else:
                params.append(_shorthand_choice(n, spec))
                shorthand.add(str(n))
    elif isinstance(raw, list):
        params = [param_from_dict(spec) for spec in raw]
    else:
        raise SpaceError("'params' must be a list or a mapping")
    constraints = data.get("constraints") or []
    if isinstance(constraints, str):
        constraints = [constraints]
    # A default the file declares on a parameter is as much the user's as the space-level one: if
    # together they violate a constraint, that is an error naming them, not a silent swap for the
    # first valid config (which only an unstated default gets).  The space-level entry wins.
    default = data.get("default")
    declared = {p.name: p.default for p in params if p.default is not None and p.name not in shorthand}
    if declared and (default is None or isinstance(default, Mapping)):
        default = {**declared, **(default or {})}
    return Space(params, constraints, default=default, name=data.get("name", ""),
                 description=data.get("description", ""))


def _shorthand_choice(name: Any, options: Any) -> Param:
    """``BLOCK: [64, 32, 128, 16]``: a choice whose numbers are sorted, as ``from_kernel_tuner``
    sorts them.  values() is the order neighbours and the surrogate encoding follow, so the listed
    order made 64's neighbours [32] and never 128.  The first listed stays the default, as before;
    it is not a declared default (one that violates a constraint is still replaced by a valid one)."""
    spec = {"kind": "choice", "options": options}
    if isinstance(options, (list, tuple)):
        vals = [canonical(v) for v in options]
        numeric = bool(vals) and all(isinstance(v, (int, float)) and not isinstance(v, bool) and v == v for v in vals)
        if numeric and vals != sorted(vals) and len(set(map(repr, vals))) == len(vals):
            return Choice(name=name, options=tuple(sorted(vals)), default=vals[0])
    return param_from_dict(spec, name=name)


def space_yaml() -> Any:
    # Imported here: the GPU worker processes import kerntune.space without needing YAML.
    from ruamel.yaml import YAML

    y = YAML(typ="safe")
    y.default_flow_style = None
    return y


def read_space_dict(path: str | Path) -> dict[str, Any]:
    """The mapping a JSON or YAML space file holds, before it becomes a Space: ``space expand``
    needs the raw mapping too (its ``groups``, ``extensible`` and ``accepts`` entries), so both
    readers share this one and its error messages."""
    path = Path(path)
    if not path.is_file():
        raise SpaceError(f"space file not found: {path}")
    try:
        text = path.read_text()
    except (UnicodeDecodeError, OSError) as exc:
        raise SpaceError(f"{path}: cannot read a text space file ({type(exc).__name__})") from None
    from ruamel.yaml.error import YAMLError

    try:
        data = json.loads(text) if path.suffix == ".json" else space_yaml().load(text)
    except (json.JSONDecodeError, YAMLError) as exc:
        raise SpaceError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {exc}".splitlines()[0]) from None
    if not isinstance(data, dict):
        raise SpaceError(f"{path}: a space file is a mapping with 'params'")
    return data


def load_space(path: str | Path) -> Space:
    return space_from_dict(read_space_dict(path))


def save_space(space: Space, path: str | Path) -> None:
    path = Path(path)
    data = space.to_dict()
    if path.suffix == ".json":
        path.write_text(json.dumps(data, indent=2) + "\n")
    else:
        buf = io.StringIO()
        space_yaml().dump(data, buf)
        path.write_text(buf.getvalue())


def from_kernel_tuner(tune_params: Mapping[str, Sequence[Any]],
                      restrictions: str | Sequence[str] | Callable[..., bool] | None = None,
                      name: str = "", descriptions: Mapping[str, str] | None = None) -> Space:
    """Build a Space from Kernel Tuner's inputs.

    Kernel Tuner accepts restrictions as a list of expression strings, callables (see
    ``_kt_callable``) and ``(callable, [names])`` pairs, or one callable — all are supported.
    """
    descriptions = descriptions or {}
    params = [infer_param(n, list(v), descriptions.get(n, "")) for n, v in tune_params.items()]
    names = [p.name for p in params]
    constraints: list[Any]
    if restrictions is None:
        constraints = []
    elif isinstance(restrictions, str):
        constraints = [restrictions]
    elif callable(restrictions):
        constraints = [_kt_callable(restrictions, names, "kernel_tuner restrictions callable")]
    else:
        constraints = list(restrictions)
        for i, rule in enumerate(constraints):
            if isinstance(rule, tuple) and len(rule) in (2, 3) and callable(rule[0]) \
                    and isinstance(rule[1], (list, tuple)):
                unknown = [str(n) for n in rule[1] if n not in names]
                if unknown:
                    raise SpaceError(f"restriction {rule[0]!r} names unknown parameter {unknown[0]!r}"
                                     f" (known: {', '.join(names)})")
                constraints[i] = _kt_callable(rule[0], [str(n) for n in rule[1]], selected=True)
            elif callable(rule) and type(rule).__module__.split(".")[0] == "constraint":
                raise SpaceError(f"restriction {rule!r} is a python-constraint object: give kerntune an expression"
                                 " string or a function of the tune parameters instead")
            elif callable(rule) and not isinstance(rule, Constraint):
                constraints[i] = _kt_callable(rule, names)
    return Space(params, constraints, name=name)


class _KeywordCall:
    """A restriction called ``fn(**{name: config[name]})`` (or positionally, ``fn(*values)``):
    a picklable object rather than a closure."""

    def __init__(self, fn: Callable[..., Any], names: Sequence[str], positional: bool) -> None:
        self.fn, self.names, self.positional = fn, list(names), positional

    def __call__(self, config: Mapping[str, Any]) -> Any:
        if self.positional:
            return self.fn(*(config[n] for n in self.names))
        return self.fn(**{n: config[n] for n in self.names})


def _kt_callable(fn: Callable[..., Any], names: Sequence[str], description: str = "",
                 selected: bool = False) -> Constraint:
    """A Kernel Tuner restriction callable as a Constraint, called the way Kernel Tuner calls it.

    Kernel Tuner's ``Searchspace`` calls a lone callable with one parameter with the config dict
    (the old style, ``lambda p: p["x"] > 1``) and any other with every tune parameter's value, in
    ``tune_params`` order; its ``util.check_restriction`` calls ``restrict(**params)``.  kerntune
    called every one with the dict, so ``lambda a, b: a * b <= 16`` raised TypeError for every
    config and the space read as "no valid configuration".  Here: parameters that name tune
    parameters, or ``**kwargs``, get keyword arguments (where the two Kernel Tuner paths agree;
    ``def r(b, a)`` gets each by name, as ``check_restriction`` gives them); one parameter that
    names none gets the dict; as many positional parameters as tune parameters, naming none, get
    the values in order.  A ``(callable, [names])`` pair gets those names, by keyword or in order.
    Anything else is refused here, with its signature, rather than rejecting every config.
    """
    text = description or getattr(fn, "__name__", "callable")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature: the dict, as before
        return Constraint(fn, description=text)
    kind = inspect.Parameter
    args = list(sig.parameters.values())
    var_kw = any(a.kind is kind.VAR_KEYWORD for a in args)
    var_pos = any(a.kind is kind.VAR_POSITIONAL for a in args)
    by_name = [a.name for a in args if a.kind in (kind.POSITIONAL_OR_KEYWORD, kind.KEYWORD_ONLY) and a.name in names]
    required = [a for a in args if a.default is a.empty and a.kind not in (kind.VAR_POSITIONAL, kind.VAR_KEYWORD)]
    n_positional = sum(a.kind in (kind.POSITIONAL_ONLY, kind.POSITIONAL_OR_KEYWORD) for a in args)
    if (by_name or var_kw) and all(a.name in by_name for a in required):
        return Constraint(_KeywordCall(fn, names if var_kw else by_name, positional=False), description=text)
    takes_all = len(required) <= len(names) and (var_pos or n_positional >= len(names))
    if len(args) == 1 and args[0].kind in (kind.POSITIONAL_ONLY, kind.POSITIONAL_OR_KEYWORD, kind.VAR_POSITIONAL) \
            and not selected:
        return Constraint(fn, description=text)  # the old style: the config dict
    if takes_all and (selected or len(names) > 1) and all(a.kind is not kind.KEYWORD_ONLY for a in required):
        return Constraint(_KeywordCall(fn, names, positional=True), description=text)
    raise SpaceError(f"restriction {text!r} takes arguments ({', '.join(sig.parameters)}): kerntune passes a"
                     f" restriction either the config dict (one argument) or tune parameters by name"
                     f" ({', '.join(names)})")
