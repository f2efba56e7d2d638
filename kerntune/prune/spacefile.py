"""Reading a space to edit and writing the edited one.

A space to edit is either a recording (Kernel Tuner cache, T4, kerntune table:
it also measures) or a space file (YAML/JSON).  A space file may carry three
keys beside the Space's own, which every other kerntune command ignores:

``accepts``     per parameter, what the kernel accepts (a list, or kind/values/low/high)
``extensible``  parameters the kernel reads but the space does not search yet
                (``{name, kind, ..., default}``: default = what the kernel uses without it)
``groups``      additive groups, each a list of parameter names whose base values are
                the default's, or a mapping of its parameters to their base values
                (``{BM: 16, W: 2}``, written once an edit moved the default away from
                them); their constraints are also written into ``constraints`` so
                every command enumerates alike
``implicit``    parameters added by an edit -> the value the kernel used without them
                (a config holding that value is the recorded config without the parameter)

An edited space file holds all three (``accepts`` for every parameter, so a
power of two stays a power of two after it became a plain choice), plus the
edits applied, the source it was edited from and, per iteration, what the
model did and what was measured.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from kerntune.errors import KerntuneError, SpaceError
from kerntune.evaluate import ReplayEvaluator
from kerntune.evaluate.recorded import TABLE_FORMAT
from kerntune.prune.edits import SpaceState, group_constraint
from kerntune.space import Space, jsonable, space_from_dict
from kerntune.space.io import read_space_dict, space_yaml
from kerntune.space.kinds import param_from_dict
from kerntune.space.params import canonical


def _yaml() -> Any:
    y = space_yaml()
    y.sort_base_mapping_type_on_output = False  # keep name, params, constraints, default first
    return y


#: A JSON space file is parsed whole to tell it from a recording; recordings are the big JSON files.
SPACE_FILE_MAX_BYTES = 4_000_000


def is_space_file(path: Path) -> bool:
    """A space file (YAML, or JSON with top-level ``params``) rather than a recording: the one test
    ``space info``, ``space schema`` and ``space prune``/``expand`` share.  It parses the whole file:
    ``space info`` once read only its first 4096 bytes and took a valid space file whose ``params`` came
    later for a recording.  Its top-level test is the recording reader's, so what one calls a space file
    the other does too (a kerntune table holds its space under ``space``, beside ``trials``).  JSON that
    does not parse is a space file when it names ``params`` and is no kerntune table, so the error
    names the JSON fault."""
    if path.suffix in (".yaml", ".yml"):
        return True
    try:
        if path.suffix != ".json" or not path.is_file() or path.stat().st_size > SPACE_FILE_MAX_BYTES:
            return False
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return False
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return '"params"' in text and TABLE_FORMAT not in text
    return isinstance(data, dict) and "params" in data and not ({"cache", "results", "trials"} & set(data))


def state_from_dict(data: Mapping[str, Any], allow_new: Sequence[str] = ()) -> SpaceState:
    full = space_from_dict(data)
    raw = data.get("groups") or []
    if not isinstance(raw, list) or not all(isinstance(g, (list, Mapping)) for g in raw):
        raise SpaceError("'groups' must be a list of groups, each a mapping of parameter names to base values"
                         " (or a list of parameter names)")
    groups = [[str(n) for n in g] for g in raw]
    for g in groups:
        unknown = [n for n in g if n not in full.by_name]
        if unknown:
            raise SpaceError(f"group {g} names unknown parameter {unknown[0]!r}")
    # Base values as the file gives them; a group listed by name alone has the default's (older files).
    bases = {str(n): v for g in raw if isinstance(g, Mapping) for n, v in g.items()}
    # The group constraints are rebuilt from the groups: strip the ones the file carries.
    implied = {t for g in groups if (t := group_constraint(full, g, {n: canonical(v) for n, v in bases.items()}))}
    base = Space(full.params, [c for c in full.constraints if c.text not in implied], full.default,
                 name=full.name, description=full.description)
    ext_raw = data.get("extensible") or []
    if not isinstance(ext_raw, list):
        raise SpaceError("'extensible' must be a list of parameter specs (name, kind, ..., default)")
    extensible = [param_from_dict(dict(spec)) for spec in ext_raw]
    accepts = data.get("accepts") or {}
    if not isinstance(accepts, Mapping):
        raise SpaceError("'accepts' must map parameter names to a list or a mapping")
    implicit = data.get("implicit") or {}
    if not isinstance(implicit, Mapping):
        raise SpaceError("'implicit' must map added parameters to the value the kernel uses without them")
    return SpaceState.of(base, accepts, extensible, groups, allow_new, implicit, bases)


def load_state(path: Path, replay: Path | None = None,
               allow_new: Sequence[str] = ()) -> tuple[SpaceState, ReplayEvaluator | None]:
    """The space to edit and, when there is one, the recording that measures it: ``path`` itself
    when it is a recording, else ``replay``."""
    if not path.exists():
        raise KerntuneError(f"file not found: {path}")
    if replay is not None and not replay.exists():
        raise KerntuneError(f"file not found: {replay}")
    if is_space_file(path):
        state = state_from_dict(read_space_dict(path), allow_new)
        return state, ReplayEvaluator.from_file(replay) if replay is not None else None
    evaluator = ReplayEvaluator.from_file(replay or path)
    space = evaluator.space if replay is None else ReplayEvaluator.from_file(path).space
    return SpaceState.of(space, allow_new=allow_new), evaluator


def state_to_dict(state: SpaceState) -> dict[str, Any]:
    data = state.space.to_dict()
    if state.groups:
        # A group whose bases are the default's is written as its names, as before bases were kept
        # (lossless: reading derives them from the default); one whose default moved keeps its bases.
        data["groups"] = [list(g) if all(state.bases[n] == state.space.default[n] for n in g)
                          else {n: jsonable(state.bases[n]) for n in g} for g in state.groups]
    data["accepts"] = {n: r.to_dict() for n, r in state.rules.items() if n in state.base.by_name}
    if state.implicit:
        data["implicit"] = {n: jsonable(v) for n, v in state.implicit.items()}
    if state.extensible:
        data["extensible"] = [p.to_dict() for p in state.extensible.values()]
    dropped = [c.text for c in state.base.constraints if c.expression is None]
    if dropped:
        data["note"] = ("not saved (Python callables): " + "; ".join(dropped) +
                        f". This file's space has {state_from_dict(data).space.count():,} valid configs.")
    return data


def save_state(state: SpaceState, path: Path, extra: Mapping[str, Any]) -> str:
    """Write the edited space (JSON for .json, else YAML) with ``extra`` (edits, provenance);
    returns the note about constraints that could not be saved, if any."""
    data = state_to_dict(state)
    data.update({k: jsonable(v) for k, v in extra.items()})
    if path.suffix == ".json":
        path.write_text(json.dumps(data, indent=1, default=str) + "\n")
    else:
        buf = io.StringIO()
        _yaml().dump(json.loads(json.dumps(data, default=str)), buf)
        path.write_text(buf.getvalue())
    return str(data.get("note", ""))
