"""Tensile library logic files: the solutions that won a previous tuning, as evidence for a prompt.

A logic file (``3_LibraryLogic/*.yaml``, or a library's ``Logic/`` folder) is
either a list or, in newer TensileLite, a mapping:

  list:    [ {MinimumRequiredVersion}, schedule name, architecture (a string, or
             {Architecture, CUCount}), [Device ids], ProblemType, [solutions...],
             index order, exact logic, range logic, ... ]
  mapping: {MinimumRequiredVersion, ScheduleName, ArchitectureName, CUCount,
            DeviceNames, ProblemType, Solutions, IndexOrder, ExactLogic, ...}

A solution is a mapping of kernel parameters (MatrixInstruction, DepthU,
WorkGroup, ThreadTile, GlobalReadVectorWidthA, ...) with its ``SolutionIndex``;
the exact logic maps each problem size ``[M, N, batch, K]`` to ``[solution
index, efficiency]``.  What a model can use is which parameter values won which
sizes, so that is what ``evidence`` writes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from kerntune.tensile.config import TensileError

#: Parameters shown for each winner besides the config's own fork parameters.
KEY_PARAMS = ("MatrixInstruction", "MacroTile0", "MacroTile1", "DepthU", "WorkGroup", "ThreadTile",
              "GlobalReadVectorWidthA", "GlobalReadVectorWidthB", "GlobalReadVectorWidth", "VectorWidthA",
              "VectorWidthB", "PrefetchGlobalRead", "PrefetchLocalRead", "StaggerU", "StaggerUStride",
              "WorkGroupMapping", "GlobalSplitU", "1LDSBuffer", "TransposeLDS", "ScheduleIterAlg", "StreamK")


@dataclass
class LogicFile:
    path: str
    schedule: str
    arch: str
    cu_count: int | None
    problem_type: dict[str, Any]
    solutions: dict[int, dict[str, Any]]
    exact: list[tuple[tuple[int, ...], int, float | None]] = field(default_factory=list)

    def winners(self) -> dict[int, list[tuple[int, ...]]]:
        """Solution index -> the sizes it won (every solution, with no sizes, when there is no exact logic)."""
        if not self.exact:
            return {i: [] for i in self.solutions}
        out: dict[int, list[tuple[int, ...]]] = {}
        for size, idx, _ in self.exact:
            if idx in self.solutions:
                out.setdefault(idx, []).append(size)
        return out


def _exact(rows: Any) -> list[tuple[tuple[int, ...], int, float | None]]:
    out = []
    for row in rows or []:
        try:
            size, (idx, eff) = row[0], row[1][:2]
            out.append((tuple(int(x) for x in size), int(idx), float(eff) if eff is not None else None))
        except (TypeError, ValueError, IndexError, KeyError):
            continue  # a malformed row: skip it, keep the rest
    return out


def read_logic(path: str | Path) -> LogicFile:
    from ruamel.yaml import YAML

    p = Path(path)
    try:
        doc = YAML(typ="safe").load(p.read_text())
    except OSError as exc:
        raise TensileError(f"{p}: cannot read ({exc.strerror})") from None
    except Exception as exc:  # noqa: BLE001 - ruamel raises many error types
        raise TensileError(f"{p}: not YAML ({str(exc).splitlines()[0]})") from None
    if isinstance(doc, dict) and "Solutions" in doc:
        arch, cus = doc.get("ArchitectureName") or "", doc.get("CUCount")
        ptype, sols, exact, sched = doc.get("ProblemType") or {}, doc.get("Solutions"), doc.get("ExactLogic"), \
            doc.get("ScheduleName") or ""
    elif isinstance(doc, list) and len(doc) >= 6 and isinstance(doc[5], list):
        sched, arch_node, ptype, sols = str(doc[1]), doc[2], doc[4], doc[5]
        arch, cus = (arch_node.get("Architecture", ""), arch_node.get("CUCount")) if isinstance(arch_node, dict) \
            else (str(arch_node), None)
        exact = doc[7] if len(doc) > 7 else None
    else:
        raise TensileError(f"{p}: not a Tensile library logic file (expected [version, schedule, arch, devices, "
                           "ProblemType, solutions, ...] or a mapping with Solutions)")
    if not isinstance(sols, list) or not all(isinstance(s, dict) for s in sols):
        raise TensileError(f"{p}: the solutions entry is not a list of solution mappings")
    solutions = {int(s.get("SolutionIndex", i)): s for i, s in enumerate(sols)}
    return LogicFile(str(p), str(sched), str(arch), cus if isinstance(cus, int) else None,
                     ptype if isinstance(ptype, dict) else {}, solutions,
                     _exact(exact) if isinstance(exact, list) else [])


def _fmt(v: Any) -> str:
    return "[" + ", ".join(_fmt(x) for x in v) + "]" if isinstance(v, list) else str(v)


def evidence(logic: LogicFile, params: Iterable[str] = (), problem_type: dict[str, Any] | None = None,
             limit: int = 24) -> str:
    """A prompt section: per parameter, the values of the winning solutions (and how many sizes
    each won), then a few sizes with their winner's values."""
    winners = logic.winners()
    names = list(dict.fromkeys([*params, *KEY_PARAMS]))
    names = [n for n in names if any(n in logic.solutions[i] for i in winners)]
    n_sizes = len(logic.exact)
    head = (f"## Winners of a previous tuning ({Path(logic.path).name}: {logic.arch or '?'} {logic.schedule}"
            + (f", {logic.cu_count} CUs" if logic.cu_count else "")
            + f"; {n_sizes} problem sizes, {len(winners)} winning solutions)")
    lines = [head, ""]
    if problem_type:
        for key in ("TransposeA", "TransposeB"):
            a, b = problem_type.get(key), logic.problem_type.get(key)
            if a is not None and b is not None and bool(a) != bool(b):
                lines.append(f"Note: the logic file's {key} is {b}, this config's is {a}: weigh it as weaker evidence.")
    lines.append("Values of the winning solutions (sizes won):")
    for n in names:
        counts: Counter[str] = Counter()
        for i, sizes in winners.items():
            if n in logic.solutions[i]:
                counts[_fmt(logic.solutions[i][n])] += max(len(sizes), 1)
        lines.append(f"- {n}: " + ", ".join(f"{v} ({c})" for v, c in counts.most_common()))
    if logic.exact:
        lines += ["", "Winner per size [M, N, batch, K] -> solution:"]
        for size, idx, _ in logic.exact[:limit]:
            sol = logic.solutions.get(idx, {})
            vals = ", ".join(f"{n}={_fmt(sol[n])}" for n in names[:6] if n in sol)
            lines.append(f"- {list(size)} -> {idx}: {vals}")
        if len(logic.exact) > limit:
            lines.append(f"- ... {len(logic.exact) - limit} more sizes")
    return "\n".join(lines)
