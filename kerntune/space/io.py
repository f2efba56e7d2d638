"""Reading and writing Spaces: kerntune YAML/JSON and Kernel Tuner's
``tune_params`` + ``restrictions``."""

from __future__ import annotations

import difflib
import io
import json
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from kerntune.errors import SpaceError
from kerntune.space.params import Param, infer_param, param_from_dict
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
    if isinstance(raw, Mapping):
        params = [param_from_dict(spec if isinstance(spec, Mapping) else {"kind": "choice", "options": spec}, name=n)
                  for n, spec in raw.items()]
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
    declared = {p.name: p.default for p in params if p.default is not None}
    if declared and (default is None or isinstance(default, Mapping)):
        default = {**declared, **(default or {})}
    return Space(params, constraints, default=default, name=data.get("name", ""),
                 description=data.get("description", ""))


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

    Kernel Tuner accepts restrictions as a list of expression strings, or one
    callable taking the config dict (older versions) — both are supported.
    """
    descriptions = descriptions or {}
    params = [infer_param(n, list(v), descriptions.get(n, "")) for n, v in tune_params.items()]
    constraints: Iterable[Any]
    if restrictions is None:
        constraints = []
    elif isinstance(restrictions, str):
        constraints = [restrictions]
    elif callable(restrictions):
        constraints = [Constraint(restrictions, description="kernel_tuner restrictions callable")]
    else:
        constraints = list(restrictions)
    return Space(params, constraints, name=name)
