"""Tensile / TensileLite benchmark configs: read, count, edit, write.

ruamel.yaml's round-trip mode keeps comments, key order and quoting, so an
edited config differs from its input only where it was edited.  The
indentation style is detected per file (the first style under which the
unedited file re-dumps byte-identically), and a config written without edits
is its input bytes.

Structure (Tensile's ``BenchmarkProblems``): a list of problems, each a list
whose first element is the ``ProblemType`` and whose other elements are
benchmark steps with ``InitialSolutionParameters``, ``BenchmarkCommonParameters``,
``ForkParameters`` and ``BenchmarkFinalParameters`` (``ProblemSizes``).
``ForkParameters`` is a list of one-key mappings ``{Name: [values]}``, which
multiply, plus optional ``Groups``: a list of groups, each a list of
alternative mappings; one alternative of every group is taken, so groups
multiply by their sizes and are additive inside (see tests/data/tensile/RULES.md).
"""

from __future__ import annotations

import copy
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kerntune.errors import KerntuneError

#: Step keys older Tensile versions used; current Tensile refuses them, so do we.
LEGACY_STEP_KEYS = ("BenchmarkForkParameters", "JoinParameters", "BenchmarkJoinParameters")
#: Sections an edit must never touch: they define the problem, not the search.
LOCKED = ("GlobalParameters", "TestParameters", "ProblemType", "ProblemSizes", "BenchmarkFinalParameters",
          "LibraryLogic", "LibraryClient")
_INDENTS = ((2, 4, 2), (2, 2, 0), (4, 4, 2), (2, 4, 0), (4, 6, 4), (2, 2, 2))


class TensileError(KerntuneError):
    """A config kerntune cannot read, or an edit it refuses."""


def _yaml(indent: tuple[int, int, int]) -> Any:
    from ruamel.yaml import YAML

    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.width = 4096
    y.indent(mapping=indent[0], sequence=indent[1], offset=indent[2])
    return y


@dataclass
class Step:
    """One benchmark step of one problem: where its forks live and how many kernels they make."""

    problem: int
    step: int
    node: Any  # the step's mapping in the document

    @property
    def forks(self) -> list[Any]:
        return list(self.node.get("ForkParameters") or [])

    def fork_params(self) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {}
        for entry in self.forks:
            for name, values in entry.items():
                if name != "Groups":
                    out[name] = list(values)
        return out

    def groups(self) -> list[list[Any]]:
        return [list(g) for entry in self.forks for name, gs in entry.items() if name == "Groups" for g in gs]

    def kernel_count(self) -> int:
        count = math.prod(len(v) for v in self.fork_params().values())
        return count * math.prod(len(g) for g in self.groups())


class TensileConfig:
    def __init__(self, text: str, source: str = "<text>") -> None:
        self.source = source
        self.original = text
        self.indent = _INDENTS[0]
        self.doc: Any = None
        for ind in _INDENTS:
            try:
                doc = _yaml(ind).load(text)
            except Exception as exc:  # noqa: BLE001 - ruamel raises many error types
                raise TensileError(f"{source}: not YAML ({type(exc).__name__}: {str(exc).splitlines()[0]})") from None
            if self.doc is None:
                self.doc = doc
            if self._dump(doc, ind) == text:
                self.doc, self.indent = doc, ind
                break
        if not isinstance(self.doc, dict) or "BenchmarkProblems" not in self.doc:
            raise TensileError(f"{source}: not a Tensile benchmark config (no BenchmarkProblems)")
        self._check_structure()
        self.edited = False

    @classmethod
    def load(cls, path: str | Path) -> "TensileConfig":
        p = Path(path)
        if not p.is_file():
            raise TensileError(f"file not found: {p}")
        return cls(p.read_text(), str(p))

    @staticmethod
    def _dump(doc: Any, indent: tuple[int, int, int]) -> str:
        buf = io.StringIO()
        _yaml(indent).dump(doc, buf)
        return buf.getvalue()

    def round_trips(self) -> bool:
        """True when ruamel re-dumps the unedited file byte-identically (edits then stay local)."""
        return self._dump(self.doc, self.indent) == self.original

    def dumps(self) -> str:
        """The config as text: the input bytes, with edited ForkParameters entries re-written in
        place (every other line, comment and blank line is the input's)."""
        return splice(self.original, self.doc) if self.edited else self.original

    def save(self, path: str | Path) -> None:
        target = Path(path)
        if target.resolve() == Path(self.source).resolve():
            raise TensileError(f"refusing to overwrite the input {self.source}: write the edited config elsewhere")
        target.write_text(self.dumps())

    def _check_structure(self) -> None:
        problems = self.doc["BenchmarkProblems"]
        if not isinstance(problems, list):
            raise TensileError(f"{self.source}: BenchmarkProblems must be a list")
        for i, problem in enumerate(problems):
            if not isinstance(problem, list) or not problem or not isinstance(problem[0], dict):
                raise TensileError(f"{self.source}: BenchmarkProblems[{i}] must be [ProblemType, steps...]")
            for j, step in enumerate(problem[1:]):
                legacy = [k for k in LEGACY_STEP_KEYS if isinstance(step, dict) and k in step]
                if legacy:
                    raise TensileError(f"{self.source}: BenchmarkProblems[{i}] step {j} uses the legacy key "
                                       f"{legacy[0]} (current Tensile refuses it; move its parameters to "
                                       "ForkParameters)")

    def steps(self) -> list[Step]:
        out = []
        for i, problem in enumerate(self.doc["BenchmarkProblems"]):
            for j, step in enumerate(problem[1:]):
                if isinstance(step, dict):
                    out.append(Step(i, j, step))
        return out

    def problem_type(self, problem: int) -> dict[str, Any]:
        return dict(self.doc["BenchmarkProblems"][problem][0])

    def kernel_count(self) -> int:
        return sum(s.kernel_count() for s in self.steps())

    def copy(self) -> "TensileConfig":
        other = copy.copy(self)
        other.doc = _yaml(self.indent).load(self._dump(self.doc, self.indent))
        return other


def _plain(node: Any) -> Any:
    if isinstance(node, dict):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return [_plain(v) for v in node]
    return node


def _flow(value: Any) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, str):
        return f'"{value}"' if any(c in value for c in ":#,[]{}") or not value else value
    return str(value)


def _entry_text(entry: Any, indent: str) -> str:
    ((name, value),) = _plain(entry).items()
    if name == "Groups":
        out = [f"{indent}- Groups:"]
        for group in value:
            alts = [f"{indent}  {'- ' if i == 0 else '  '}- {_flow(alt)}" for i, alt in enumerate(group)]
            out += alts
        return "\n".join(out) + "\n"
    return f"{indent}- {name}: {_flow(value)}\n"


def _is_filler(line: str) -> bool:
    return not line.strip() or line.lstrip().startswith("#")


def splice(original: str, edited_doc: Any) -> str:
    """Re-write only the ForkParameters entries that differ between ``original`` and
    ``edited_doc`` (matched by parameter name); entries that are unchanged keep their lines."""
    base = _yaml(_INDENTS[0]).load(original)
    lines = original.splitlines(keepends=True)
    pieces: list[tuple[int, int, str]] = []
    for problem0, problem1 in zip(base["BenchmarkProblems"], edited_doc["BenchmarkProblems"]):
        for step0, step1 in zip(problem0[1:], problem1[1:]):
            forks0, forks1 = step0.get("ForkParameters"), step1.get("ForkParameters")
            if not forks0 or _plain(forks0) == _plain(forks1 or []):
                continue
            key_line, key_col = step0.lc.key("ForkParameters")
            starts = [forks0.lc.item(i)[0] for i in range(len(forks0))]
            end = starts[-1] + 1
            while end < len(lines) and (_is_filler(lines[end]) or len(lines[end]) - len(lines[end].lstrip()) > key_col):
                end += 1
            while end > starts[-1] + 1 and _is_filler(lines[end - 1]):
                end -= 1
            first = lines[starts[0]]
            indent = first[: first.index("-")]
            spans = {next(iter(e)): "".join(lines[a:b]) for e, a, b in zip(forks0, starts, starts[1:] + [end])}
            old = {next(iter(e)): _plain(e) for e in forks0}
            text = []
            for e in forks1 or []:
                name = next(iter(e))
                text.append(spans[name] if old.get(name) == _plain(e) else _entry_text(e, indent))
            pieces.append((starts[0], end, "".join(text)))
    out, pos = [], 0
    for a, b, text in sorted(pieces):
        out.append("".join(lines[pos:a]) + text)
        pos = b
    out.append("".join(lines[pos:]))
    return "".join(out)
