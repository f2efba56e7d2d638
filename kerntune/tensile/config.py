"""Tensile / TensileLite benchmark configs: read, count, edit, write.

The file is read once with ruamel.yaml's round-trip loader (which keeps line
positions); a config written without edits is its input bytes, and an edited
one is the input with only the edited ForkParameters and BenchmarkCommonParameters
entries re-written (``splice``), so comments, order and quoting survive everywhere else.

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
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kerntune.errors import KerntuneError

#: Step keys older Tensile versions used; current Tensile refuses them, so do we.
LEGACY_STEP_KEYS = ("InitialSolutionParameters", "BenchmarkForkParameters", "JoinParameters", "BenchmarkJoinParameters")
#: Sections an edit must never touch: they define the problem, not the search.
LOCKED = ("GlobalParameters", "TestParameters", "ProblemType", "ProblemSizes", "BenchmarkFinalParameters",
          "LibraryLogic", "LibraryClient")


class TensileError(KerntuneError):
    """A config kerntune cannot read, or an edit it refuses."""


def _yaml() -> Any:
    from ruamel.yaml import YAML

    y = YAML(typ="rt")
    y.allow_duplicate_keys = True  # Tensile reads with PyYAML: the last duplicate wins, configs rely on it
    return y


def _flatten(entries: Any) -> dict[str, Any]:
    """Tensile's ``dict(chain(*[x.items() for x in entries]))``: every key of every entry, the last wins."""
    out: dict[str, Any] = {}
    for entry in entries or []:
        if isinstance(entry, dict):
            out.update(entry.items())
    return out


@dataclass
class Step:
    """One benchmark (a problem type and one of its size groups): its forks and kernel count."""

    problem: int
    step: int
    node: Any  # the size group's mapping in the document ({} for a problem with none: all defaults)

    @property
    def forks(self) -> list[Any]:
        return list(self.node.get("ForkParameters") or [])

    def fork_params(self) -> dict[str, list[Any]]:
        return {k: list(v) for k, v in _flatten(self.forks).items() if k != "Groups"}

    def groups(self) -> list[list[Any]]:
        return [list(g) for g in _flatten(self.forks).get("Groups") or []]

    def common_forks(self) -> dict[str, list[Any]]:
        """Multi-valued BenchmarkCommonParameters that no fork parameter overrides: Tensile forks them
        too (RULES.md), so they count, and prompts and edits must see them like fork parameters."""
        forks = _flatten(self.forks)
        return {k: list(v) for k, v in _flatten(self.node.get("BenchmarkCommonParameters")).items()
                if k not in forks and k != "ProblemSizes" and isinstance(v, list) and len(v) > 1}

    def kernel_count(self) -> int:
        """Tensile's ``maxPossibleSolutions``: common and fork parameters merged (fork wins), every
        parameter with more than one value multiplies, then every group by its size."""
        merged = {**_flatten(self.node.get("BenchmarkCommonParameters")), **_flatten(self.forks)}
        merged.pop("Groups", None)
        merged.pop("ProblemSizes", None)
        count = math.prod(len(v) for v in merged.values() if isinstance(v, list) and len(v) > 1)
        return count * math.prod(len(g) for g in self.groups())


class TensileConfig:
    def __init__(self, text: str, source: str = "<text>") -> None:
        self.source = source
        self.original = text
        try:
            self.doc: Any = _yaml().load(text)
        except Exception as exc:  # noqa: BLE001 - ruamel raises many error types
            raise TensileError(f"{source}: not YAML ({type(exc).__name__}: {str(exc).splitlines()[0]})") from None
        if not isinstance(self.doc, dict) or not ("BenchmarkProblems" in self.doc or self.alternate):
            raise TensileError(f"{source}: not a Tensile benchmark config (no BenchmarkProblems)")
        _refuse_duplicate_keys(text, source)
        self._check_structure()
        self.edited = False

    @classmethod
    def load(cls, path: str | Path) -> "TensileConfig":
        p = Path(path)
        if not p.is_file():
            raise TensileError(f"file not found: {p}")
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise TensileError(f"{p}: not UTF-8 text (byte {exc.start}: {exc.reason}); a Tensile config is YAML"
                               " text") from None
        except OSError as exc:
            raise TensileError(f"{p}: cannot read ({exc.strerror or exc})") from None
        return cls(text, str(p))

    def dumps(self) -> str:
        """The config as text: the input bytes, with edited ForkParameters and BenchmarkCommonParameters
        entries re-written in place (every other line, comment and blank line is the input's).  An edited
        text is read back before it is returned: splicing text is exact only for the layouts it knows,
        and a file that reads differently from the edited document (a value run into the previous line,
        a flow list cut in the middle) would be benchmarked as something nobody asked for, under a
        report of success."""
        if not self.edited:
            return self.original
        text = splice(self.original, self.doc)
        self._check_written(text)
        return text

    def _check_written(self, text: str) -> None:
        """TensileError unless ``text`` reads back as this (edited) document, kernel counts included."""
        why = "nothing written; the input is unchanged"
        try:
            again = TensileConfig(text, self.source)
        except TensileError as exc:
            raise TensileError(f"{self.source}: the edited config would not read back ({exc}); {why}") from None
        if _plain(again.doc) == _plain(self.doc):
            return
        for mine, theirs in zip(self.steps(), again.steps()):
            if _plain(mine.node) != _plain(theirs.node):
                raise TensileError(f"{self.source}: the edited config would read back differently (problem "
                                   f"{mine.problem} step {mine.step}: {theirs.kernel_count():,} kernels written, "
                                   f"{mine.kernel_count():,} edited; forks written {_short(theirs.forks)}); {why}")
        raise TensileError(f"{self.source}: the edited config would read back differently ({again.kernel_count():,}"
                           f" kernels written, {self.kernel_count():,} edited); {why}")

    def save(self, path: str | Path) -> None:
        target = Path(path)
        if target.resolve() == Path(self.source).resolve():
            raise TensileError(f"refusing to overwrite the input {self.source}: write the edited config elsewhere")
        target.write_text(self.dumps())

    @property
    def alternate(self) -> bool:
        """Tensile's ``--alternate-format``: ProblemType and ForkParameters at the top, one benchmark."""
        return isinstance(self.doc, dict) and "BenchmarkProblems" not in self.doc and "ForkParameters" in self.doc

    def _check_structure(self) -> None:
        if self.alternate:
            _check_parameters(self.doc, f"{self.source}:")
            return
        problems = self.doc["BenchmarkProblems"]
        if not isinstance(problems, list):
            raise TensileError(f"{self.source}: BenchmarkProblems must be a list")
        for i, problem in enumerate(problems):
            if not isinstance(problem, list) or not problem or not isinstance(problem[0], dict):
                raise TensileError(f"{self.source}: BenchmarkProblems[{i}] must be [ProblemType, steps...]")
            for j, step in enumerate(problem[1:]):
                # As Tensile: a legacy key with a value stops it; present but empty is ignored.
                legacy = [k for k in LEGACY_STEP_KEYS if isinstance(step, dict) and step.get(k) is not None]
                if legacy:
                    raise TensileError(f"{self.source}: BenchmarkProblems[{i}] step {j} uses the legacy key "
                                       f"{legacy[0]} (current Tensile refuses it; move its parameters to "
                                       "ForkParameters)")
                if isinstance(step, dict):
                    _check_parameters(step, f"{self.source}: BenchmarkProblems[{i}] step {j}:")

    def steps(self) -> list[Step]:
        return [Step(i, j, node) for i, j, node in step_nodes(self.doc)]

    def problem_types(self) -> list[dict[str, Any]]:
        if self.alternate:
            return [dict(self.doc.get("ProblemType") or {})]
        return [dict(problem[0]) for problem in self.doc["BenchmarkProblems"]]

    def problem_type(self, problem: int) -> dict[str, Any]:
        return self.problem_types()[problem]

    def kernel_count(self) -> int:
        return sum(s.kernel_count() for s in self.steps())

    def copy(self) -> "TensileConfig":
        other = copy.copy(self)
        other.doc = copy.deepcopy(self.doc)
        return other


def _check_parameters(step: Any, where: str) -> None:
    """The shapes Tensile itself needs, refused here with one line instead of a traceback or a wrong
    count.  BenchmarkCommonParameters and ForkParameters are lists of mappings ``{Name: [values]}``:
    Tensile iterates every value list (``for value in values``), so a scalar ``DepthU: 5`` stops it
    (TypeError), a string ``KernelLanguage: Assembly`` is read as the letters A, s, s, ... (each an
    invalid value), and ``null`` stops it ("You must specify value(s)").  ``Groups`` is a list of
    groups, each a list of alternative mappings."""
    for section in ("BenchmarkCommonParameters", "ForkParameters"):
        entries = step.get(section)
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise TensileError(f"{where} {section} must be a list of entries like '- DepthU: [16, 32]',"
                               f" not a {_kind(entries)}")
        for entry in entries:
            if not isinstance(entry, dict):
                raise TensileError(f"{where} {section} entry {_short(entry)} must be a mapping like"
                                   " 'DepthU: [16, 32]'")
            for name, values in entry.items():
                if name == "ProblemSizes":
                    continue
                if name == "Groups" and section == "ForkParameters":
                    _check_groups(values, f"{where} {section} Groups")
                elif values is None:
                    raise TensileError(f"{where} {section} {name} has no values (null): Tensile stops on it;"
                                       " give a list like [16, 32]")
                elif not isinstance(values, list):
                    raise TensileError(f"{where} {section} {name}: {_short(values)} is a {_kind(values)}, not a"
                                       f" list of values: Tensile reads a list (write [{_short(values)}])")


def _check_groups(groups: Any, where: str) -> None:
    if not isinstance(groups, list):
        raise TensileError(f"{where} must be a list of groups (each a list of alternatives), not a {_kind(groups)}")
    for n, group in enumerate(groups):
        if not isinstance(group, list) or not all(isinstance(alt, dict) for alt in group):
            raise TensileError(f"{where}[{n}] must be a list of alternative mappings like"
                               " '- {StaggerU: 0, WorkGroupMapping: 1}'")


#: Top-level keys whose mappings kerntune reads (BenchmarkProblems, and the alternate format's sections).
_READ_SECTIONS = ("BenchmarkProblems", "ProblemType", "InitialSolutionParameters", "BenchmarkCommonParameters",
                  "ForkParameters", "BenchmarkFinalParameters")


def _refuse_duplicate_keys(text: str, source: str) -> None:
    """A key given twice in one mapping of what kerntune reads is refused, naming it and its line.

    Tensile reads with PyYAML, where the last duplicate wins; ruamel (needed for the line positions
    splicing uses) keeps the first, so counts, edits and prompts would describe values Tensile never
    uses, and a splice would position an edit on one duplicate while the value came from the other.
    Duplicates elsewhere (real configs repeat GlobalParameters keys) are harmless: neither counted nor
    edited."""
    from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode

    root = _yaml().compose(text)
    if not isinstance(root, MappingNode):
        return
    todo: list[Any] = []
    top: dict[str, int] = {}
    for key, value in root.value:
        if isinstance(key, ScalarNode) and key.value in _READ_SECTIONS:
            if key.value in top:
                raise _duplicate(source, key, top[key.value])
            top[key.value] = key.start_mark.line + 1
            todo.append(value)
    seen: set[int] = set()
    while todo:  # a stack, not recursion: a hostile file nests thousands deep
        node = todo.pop()
        if id(node) in seen:  # an alias: the same node again
            continue
        seen.add(id(node))
        if isinstance(node, MappingNode):
            names: dict[str, int] = {}
            for key, value in node.value:
                if isinstance(key, ScalarNode):
                    if key.value in names:
                        raise _duplicate(source, key, names[key.value])
                    names[key.value] = key.start_mark.line + 1
                todo.append(value)
        elif isinstance(node, SequenceNode):
            todo.extend(node.value)


def _duplicate(source: str, key: Any, first_line: int) -> TensileError:
    return TensileError(f"{source}: line {key.start_mark.line + 1}: duplicate key {key.value!r} (first on line "
                        f"{first_line}): Tensile keeps the last one; remove the one it should not use")


def _kind(value: Any) -> str:
    for cls, word in ((dict, "mapping"), (list, "list"), (str, "string"), (bool, "boolean"), ((int, float), "number")):
        if isinstance(value, cls):
            return word
    return type(value).__name__


def _short(value: Any) -> str:
    text = str(_plain(value))
    return text if len(text) <= 60 else text[:57] + "..."


def step_nodes(doc: Any) -> list[tuple[int, int, Any]]:
    """(problem, size group, mapping) of every benchmark in a document."""
    if "BenchmarkProblems" not in doc:
        return [(0, 0, doc)]
    out = []
    for i, problem in enumerate(doc["BenchmarkProblems"]):
        groups = [g for g in problem[1:] if isinstance(g, dict)]
        for j, group in enumerate(groups or [{}]):
            out.append((i, j, group))
    return out


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
    items = list(_plain(entry).items())
    out = []
    for n, (name, value) in enumerate(items):
        lead = f"{indent}- " if n == 0 else f"{indent}  "
        if name == "Groups":
            out.append(f"{lead}Groups:")
            for group in value:
                out += [f"{indent}  {'- ' if i == 0 else '  '}- {_flow(alt)}" for i, alt in enumerate(group)]
        else:
            out.append(f"{lead}{name}: {_flow(value)}")
    return "\n".join(out) + "\n"


def _edit_block_list(lines: list[str], entry0: Any, entry1: Any, region_end: int) -> str | None:
    """The text of a one-key entry whose block-style value list lost or gained items, written by
    deleting and appending item lines only, so comments between the items survive; None when
    the entry is not such a list."""
    if len(entry0) != 1:
        return None
    (name,) = entry0
    seq = entry0[name]
    new = _plain(entry1[name])
    if not hasattr(seq, "lc") or not len(seq) or seq.fa.flow_style() or not isinstance(new, list):
        return None
    start = entry0.lc.key(name)[0]
    positions = [seq.lc.item(j) for j in range(len(seq))]
    item_lines = [line for line, _ in positions]
    if start in item_lines:
        return None
    # ruamel places an item at its value: for "-" alone on a line (a Groups group written
    # "-\n  - {...}") that is the first child's line, and splicing there corrupted the file.
    # Only items whose dash shares the value's line are edited line by line; others are re-written.
    if any(lines[line][:col].strip() != "-" for line, col in positions):
        return None
    dash_col = len(lines[item_lines[0]]) - len(lines[item_lines[0]].lstrip())
    spans = []
    for j, a in enumerate(item_lines):
        b = a + 1
        while b < len(lines) and not _is_filler(lines[b]) and len(lines[b]) - len(lines[b].lstrip()) > dash_col:
            b += 1
        spans.append((a, b))
    old = _plain(seq)
    remaining = list(new)
    keep = []
    for j, item in enumerate(old):
        if item in remaining:
            remaining.remove(item)
            keep.append(j)
    # kept items in their order, then the new ones: right for candidates removed and added; items
    # changed in place (every group of a Groups entry losing a parameter) are re-written where they
    # stood, so the order Tensile enumerates them in stays; anything else is re-written whole
    in_place = [old[j] for j in keep] + remaining != new
    if in_place and len(old) != len(new):
        return None
    out = lines[start:item_lines[0]]
    pos = item_lines[0]
    for j, (a, b) in enumerate(spans):
        out += lines[pos:a]
        if in_place and old[j] != new[j]:
            out.append(" " * dash_col + "- " + _flow(new[j]) + "\n")
        elif in_place or j in keep:
            out += lines[a:b]
        pos = b
    if not in_place:
        out += [" " * dash_col + "- " + _flow(v) + "\n" for v in remaining]
    return "".join(out) + "".join(lines[pos:region_end])


def _is_filler(line: str) -> bool:
    return not line.strip() or line.lstrip().startswith("#")


#: The sections of a benchmark step that edits change (multi-valued common parameters fork too).
EDITED_SECTIONS = ("BenchmarkCommonParameters", "ForkParameters")


def splice(original: str, edited_doc: Any) -> str:
    """Re-write only the BenchmarkCommonParameters and ForkParameters entries that differ between
    ``original`` and ``edited_doc`` (matched by parameter name); entries that are unchanged keep their
    lines.  A section written as a flow list (``[{DepthU: [8, 16]}, ...]``, ``[]``) is re-written whole,
    as one flow list: its entries share lines, so there are no entry lines to keep.  A section reached
    from several steps through a YAML alias is one node with one line range: it is spliced once (twice
    duplicated its entries; the edits refuse to change such a node anyway)."""
    if original and not original.endswith(("\n", "\r")):
        original += "\n"  # lines appended after the last one must not run into it
    base = _yaml().load(original)
    lines = original.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    value_nodes: dict[str, list[Any]] = {}
    pieces: list[tuple[int, int, str]] = []  # character ranges of ``original`` and their new text
    done: set[int] = set()
    for n, ((_, _, step0), (_, _, step1)) in enumerate(zip(step_nodes(base), step_nodes(edited_doc))):
        for section in EDITED_SECTIONS:
            entries0, entries1 = step0.get(section), step1.get(section)
            if entries0 is None or id(entries0) in done or _plain(entries0) == _plain(entries1 or []):
                continue  # unedited, or already spliced (the edits refuse a step without the section)
            done.add(id(entries0))
            if not entries0 or entries0.fa.flow_style():
                if section not in value_nodes:
                    value_nodes[section] = _section_value_nodes(original, section)
                node = value_nodes[section][n]
                start = offsets[node.start_mark.line] + node.start_mark.column
                end = offsets[node.end_mark.line] + node.end_mark.column
                pieces.append((start, end, _flow(_plain(entries1 or []))))
            else:
                pieces.append(_block_piece(lines, offsets, step0.lc.key(section)[1], entries0, entries1))
    out, pos = [], 0
    for a, b, text in sorted(pieces):
        out.append(original[pos:a] + text)
        pos = b
    out.append(original[pos:])
    return "".join(out)


def _block_piece(lines: list[str], offsets: list[int], key_col: int, entries0: Any,
                 entries1: Any) -> tuple[int, int, str]:
    """The character range of a block-style section's entries and their new text: unchanged entries
    keep their lines, changed ones are edited line by line where they can be, else re-written."""
    starts = [entries0.lc.item(i)[0] for i in range(len(entries0))]
    end = starts[-1] + 1
    while end < len(lines) and (_is_filler(lines[end]) or len(lines[end]) - len(lines[end].lstrip()) > key_col):
        end += 1
    while end > starts[-1] + 1 and _is_filler(lines[end - 1]):
        end -= 1
    first = lines[starts[0]]
    indent = first[: len(first) - len(first.lstrip())]
    if not entries1:  # every entry removed: an empty list, not a section of null
        return offsets[starts[0]], offsets[end], " " * max(len(indent), key_col + 2) + "[]\n"
    spans = {tuple(e): "".join(lines[a:b]) for e, a, b in zip(entries0, starts, starts[1:] + [end])}
    ends = {tuple(e): b for e, b in zip(entries0, starts[1:] + [end])}
    old = {tuple(e): _plain(e) for e in entries0}
    text = []
    for e in entries1:
        name = tuple(e)
        if old.get(name) == _plain(e):
            text.append(spans[name])
        else:
            e0 = next(x for x in entries0 if tuple(x) == name) if name in old else None
            kept = _edit_block_list(lines, e0, e, ends[name]) if e0 is not None else None
            text.append(kept if kept is not None else _entry_text(e, indent))
    return offsets[starts[0]], offsets[end], "".join(text)


def _section_value_nodes(text: str, section: str) -> list[Any]:
    """The ``section`` value of every benchmark as ruamel composes it (None: the step has none), in
    ``step_nodes`` order: the nodes carry where a value ends, which a flow list's text needs."""
    from ruamel.yaml.nodes import MappingNode, SequenceNode

    def get(node: Any, name: str) -> Any:
        if not isinstance(node, MappingNode):
            return None
        return next((v for k, v in node.value if getattr(k, "value", None) == name), None)

    root = _yaml().compose(text)
    problems = get(root, "BenchmarkProblems")
    if problems is None:
        return [get(root, section)]
    out = []
    for problem in problems.value if isinstance(problems, SequenceNode) else []:
        groups = [g for g in problem.value[1:] if isinstance(g, MappingNode)] if isinstance(problem, SequenceNode) else []
        out += [get(g, section) for g in groups] or [None]
    return out
