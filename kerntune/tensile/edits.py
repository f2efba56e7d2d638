"""The six Tensile edit operations, validated against a table of values the
Tensile kernel generator accepts.

Operations on one benchmark step (``problem``, ``step`` index):
  remove_fork / add_fork            a multiplicative ForkParameters entry
  remove_group_param / add_group_param   a parameter of every alternative in a Groups group
                                    (the independent, additive part)
  remove_candidate / add_candidate  one value of a fork parameter
remove_fork and remove_candidate also reach a multi-valued BenchmarkCommonParameters entry, which
forks too (tests/data/tensile/RULES.md).  Groups override forks of the same name, so a fork of a
parameter the groups set, or a group parameter that is a fork, is refused; so is an edit of a node
another step shares through a YAML anchor.
Locked sections (GlobalParameters, TestParameters, ProblemType, ProblemSizes)
are never touched; an edit that names them, uses an invalid value, or would
leave a step with no kernel is refused with a message naming it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from kerntune.tensile.config import EDITED_SECTIONS, LOCKED, Step, TensileConfig, TensileError

OPS = ("remove_fork", "add_fork", "remove_group_param", "add_group_param", "remove_candidate", "add_candidate")


def _ints(n: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, list) and len(v) == n and all(isinstance(x, int) and not isinstance(x, bool)
                                                                   for x in v)


def _one_of(*allowed: Any) -> Callable[[Any], bool]:
    return lambda v: v in allowed


def _pow2(lo: int, hi: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi and v & (v - 1) == 0


def _matrix_instruction(v: Any) -> bool:
    """[M, N, K, B] (the instruction) or the 9-tuple [M, N, K, B, MIBlock, WaveTileM, WaveTileN, WaveGroupM,
    WaveGroupN]: positive ints, a known MFMA shape."""
    if not (_ints(4)(v) or _ints(9)(v)) or any(x <= 0 for x in v):
        return False
    return (v[0], v[1]) in {(4, 4), (16, 16), (32, 32), (64, 4), (4, 64)} and v[2] in (1, 2, 4, 8, 16, 32, 64)


def _workgroup(v: Any) -> bool:
    return _ints(3)(v) and all(x > 0 for x in v) and v[0] * v[1] * v[2] <= 1024 and (v[0] * v[1] * v[2]) % 64 == 0


#: Parameter -> validator of one value (what Tensile's solution generator accepts).
VALID: dict[str, Callable[[Any], bool]] = {
    "MatrixInstruction": _matrix_instruction,
    "DepthU": lambda v: isinstance(v, int) and not isinstance(v, bool) and 8 <= v <= 1024 and v % 8 == 0,
    "WorkGroup": _workgroup,
    "ThreadTile": lambda v: _ints(2)(v) and all(1 <= x <= 16 for x in v),
    "GlobalReadVectorWidth": _one_of(-1, 1, 2, 4, 8, 16),
    "GlobalReadVectorWidthA": _one_of(-1, 1, 2, 4, 8, 16),
    "GlobalReadVectorWidthB": _one_of(-1, 1, 2, 4, 8, 16),
    "LocalReadVectorWidth": _one_of(-1, 1, 2, 4, 8, 16),
    "VectorWidth": _one_of(-1, 1, 2, 4, 8),
    "VectorWidthA": _one_of(-1, 1, 2, 4, 8),
    "VectorWidthB": _one_of(-1, 1, 2, 4, 8),
    "PrefetchGlobalRead": _one_of(0, 1, 2, True, False),
    "PrefetchLocalRead": lambda v: isinstance(v, (int, bool)) and 0 <= int(v) <= 16,
    "StaggerU": _one_of(0, 2, 4, 8, 16, 32, 64),
    "StaggerUStride": lambda v: isinstance(v, int) and v >= 0 and (v == 0 or v & (v - 1) == 0),
    "WorkGroupMapping": lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 64,
    "GlobalSplitU": lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 64,
    "1LDSBuffer": _one_of(-1, 0, 1),
    "ScheduleIterAlg": _one_of(0, 1, 2, 3),
    "TransposeLDS": _one_of(-1, 0, 1, 2),
    "LdsPadA": lambda v: isinstance(v, int) and -1 <= v <= 64,
    "LdsPadB": lambda v: isinstance(v, int) and -1 <= v <= 64,
    "LdsBlockSizePerPadA": lambda v: isinstance(v, int) and (v in (-1, 0) or _pow2(1, 4096)(v)),
    "LdsBlockSizePerPadB": lambda v: isinstance(v, int) and (v in (-1, 0) or _pow2(1, 4096)(v)),
    "StoreVectorWidth": _one_of(-1, 1, 2, 4, 8),
    "SourceSwap": _one_of(0, 1, True, False),
    "StorePriorityOpt": _one_of(0, 1, True, False),
    "NumElementsPerBatchStore": lambda v: isinstance(v, int) and 0 <= v <= 64,
    "DirectToLds": _one_of(0, 1, True, False),
    "ExpandPointerSwap": _one_of(0, 1, True, False),
    "KernelLanguage": _one_of("Assembly", "Source"),
    "StreamK": _one_of(0, 1, 2, 3),
    "WaveSeparateGlobalReadA": _one_of(0, 1, 2),
    "WaveSeparateGlobalReadB": _one_of(0, 1, 2),
    "GlobalReadPerMfma": lambda v: isinstance(v, (int, float)) and v > 0,
    "LocalWritePerMfma": lambda v: isinstance(v, (int, float)) and (v == -1 or v > 0),
}


def check_value(name: str, value: Any) -> None:
    if name in LOCKED:
        raise TensileError(f"{name} is locked: it defines the problem, not the search")
    ok = VALID.get(name)
    if ok is None:
        raise TensileError(f"unknown Tensile parameter {name!r} (no table of valid values; known: "
                           f"{', '.join(sorted(VALID))})")
    if not ok(value):
        raise TensileError(f"{name} = {value!r} is not a value Tensile accepts")


@dataclass
class TensileEdit:
    op: str
    param: str
    value: Any = None
    values: list[Any] = field(default_factory=list)
    problem: int = 0
    step: int = 0
    reason: str = ""

    @classmethod
    def from_dict(cls, d: Any) -> "TensileEdit":
        """An edit from a model's answer item; anything malformed is one TensileError (the caller drops
        the item): a string item, a problem of 1e400 (int(inf) overflows) or 1.5, values not a list."""
        if not isinstance(d, Mapping):
            raise TensileError(f"an edit must be an object, got {type(d).__name__}: {str(d)[:80]!r}")
        if d.get("op") not in OPS:
            raise TensileError(f"unknown edit op {str(d.get('op'))[:80]!r} (known: {', '.join(OPS)})")
        param = d.get("param", "")
        if not isinstance(param, str):
            raise TensileError(f"{d['op']}: param must be a string, got {type(param).__name__}")
        values = d.get("values") or []
        if not isinstance(values, list):
            raise TensileError(f"{d['op']} {param}: values must be a list, got {type(values).__name__}")
        return cls(d["op"], param, d.get("value"), list(values), _index(d, "problem"), _index(d, "step"),
                   str(d.get("reason", ""))[:300])


def _index(d: Mapping[str, Any], key: str) -> int:
    """A problem or step index: a non-negative whole number (2.0 is 2; 1e400, 1.5, "a" and true are refused)."""
    v = d.get(key, 0)
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 1_000_000:
        raise TensileError(f"{d['op']} {d.get('param', '')}: {key} must be a non-negative integer, got {str(v)[:40]}")
    return v


def apply(config: TensileConfig, edits: list[TensileEdit]) -> tuple[TensileConfig, list[tuple[TensileEdit, str]]]:
    """A new config with the valid edits applied (the input is never modified); refusals with reasons."""
    out = config.copy()
    refused = []
    for e in edits:
        trial = out.copy()
        try:
            _apply_one(trial, e)
            if trial.kernel_count() == 0 or any(s.kernel_count() == 0 for s in trial.steps()):
                raise TensileError(f"{e.op} {e.param} would leave a benchmark step with no kernel")
            trial.edited = True
            out = trial
        except TensileError as exc:
            refused.append((e, str(exc)))
    return out, refused


def _step(config: TensileConfig, e: TensileEdit) -> Any:
    for s in config.steps():
        if s.problem == e.problem and s.step == e.step:
            return s
    raise TensileError(f"no benchmark step {e.step} in problem {e.problem}")


def _apply_one(config: TensileConfig, e: TensileEdit) -> None:
    if e.param in LOCKED:
        raise TensileError(f"{e.param} is locked: it defines the problem, not the search")
    s = _step(config, e)
    forks = s.node.get("ForkParameters")
    # As Tensile flattens the entries, the last entry naming a parameter is the one that counts.
    entry = next((f for f in reversed(forks or []) if e.param in f and e.param != "Groups"), None)
    section, entries = "ForkParameters", forks
    if entry is None and e.op in ("remove_fork", "remove_candidate") and e.param in s.common_forks():
        # A multi-valued BenchmarkCommonParameters entry forks too (RULES.md): these edits reach it there.
        section, entries = "BenchmarkCommonParameters", s.node["BenchmarkCommonParameters"]
        entry = next(f for f in reversed(entries) if e.param in f)
    elif forks is None:
        raise TensileError(f"problem {e.problem} step {e.step} has no ForkParameters")
    where = f"problem {e.problem} step {e.step}"
    if e.op == "remove_fork":
        if entry is None:
            raise TensileError(f"{e.param} is not a fork parameter of {where}")
        hit = [f for f in entries if e.param in f]
        _refuse_shared(config, s, section, entries, [entries, *hit], e.param)
        for f in hit:
            if len(f) > 1:
                del f[e.param]
            else:
                entries.remove(f)
    elif e.op == "add_fork":
        if entry is not None:
            raise TensileError(f"{e.param} is already a fork parameter")
        if not e.values:
            raise TensileError(f"add_fork {e.param} needs values")
        for v in e.values:
            check_value(e.param, v)
        if any(e.param in alt for g in s.groups() for alt in g):
            # Groups are applied after the forks (RULES.md): every candidate would be the group's value.
            raise TensileError(f"{e.param} is set by Groups, which override forks")
        _refuse_shared(config, s, section, entries, [entries], e.param)
        forks.append({e.param: list(e.values)})
    elif e.op in ("remove_candidate", "add_candidate"):
        if entry is None:
            raise TensileError(f"{e.param} is not a fork parameter of {where}")
        values = entry[e.param]
        if e.op == "remove_candidate":
            if e.value not in values:
                raise TensileError(f"{e.param} has no candidate {e.value!r}")
            if len(values) == 1:
                raise TensileError(f"removing {e.param} = {e.value!r} would leave {e.param} without candidates")
            _refuse_shared(config, s, section, entries, [values], e.param)
            values.remove(e.value)
        else:
            check_value(e.param, e.value)
            if e.value in values:
                raise TensileError(f"{e.param} already has the candidate {e.value!r}")
            if any(e.param in alt for g in s.groups() for alt in g):
                # as add_fork: the groups' value wins (RULES.md), so the candidate would add duplicates
                raise TensileError(f"{e.param} is set by Groups, which override forks")
            _refuse_shared(config, s, section, entries, [values], e.param)
            values.append(e.value)
    else:  # group parameters: every alternative of the groups that hold the parameter
        groups = s.groups()
        if not groups:
            raise TensileError(f"{where} has no Groups")
        if e.op == "remove_group_param":
            hit = [alt for g in groups for alt in g if e.param in alt]
            if not hit:
                raise TensileError(f"no group alternative sets {e.param}")
            _refuse_shared(config, s, section, entries, hit, e.param)
            for alt in hit:
                del alt[e.param]
        else:
            check_value(e.param, e.value)
            for g in groups:
                for alt in g:
                    if e.param in alt:
                        raise TensileError(f"{e.param} is already set in a group alternative")
            # A group wins over a fork of the same name (RULES.md): its candidates would silently go.
            if entry is not None:
                raise TensileError(f"{e.param} is a fork parameter: a group value would override its candidates")
            if e.param in s.common_forks():
                raise TensileError(f"{e.param} is a multi-valued BenchmarkCommonParameters entry: a group value "
                                   "would override its candidates")
            alts = [alt for g in groups for alt in g]
            _refuse_shared(config, s, section, entries, alts, e.param)
            for alt in alts:
                alt[e.param] = e.value


def _refuse_shared(config: TensileConfig, s: Step, section: str, entries: Any, changed: list[Any],
                   param: str) -> None:
    """TensileError when what the edit changes is also another step's, through a YAML anchor: the
    change would reach that step too, and splicing the shared lines once per step duplicated them."""
    steps = config.steps()
    other = shared_with(steps, s, [entries])
    what = section
    if other is None:
        other, what = shared_with(steps, s, changed), f"{section} {param}"
    if other is not None:
        raise TensileError(f"{what} of problem {s.problem} step {s.step} is a YAML anchor shared with problem "
                           f"{other.problem} step {other.step}; edit a copy")


def shared_with(steps: list[Step], step: Step, nodes: list[Any]) -> Step | None:
    """The first other step from whose edited sections one of ``nodes`` (the lists and mappings an
    edit would change) can be reached.  A YAML anchor and its aliases load as one object, so changing
    it for one step changes every step that names it: not the edit that was asked for."""
    wanted = {id(n) for n in nodes}
    for other in steps:
        if (other.problem, other.step) == (step.problem, step.step) or not isinstance(other.node, dict):
            continue
        todo = [other.node.get(section) for section in EDITED_SECTIONS]
        seen: set[int] = set()
        while todo:
            node = todo.pop()
            if not isinstance(node, (dict, list)) or id(node) in seen:
                continue
            if id(node) in wanted:
                return other
            seen.add(id(node))
            todo.extend(node.values() if isinstance(node, dict) else node)
    return None
