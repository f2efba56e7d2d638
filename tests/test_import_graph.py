"""No import circle inside ``kerntune/``.

A circle between two modules means neither can be read, tested or replaced without the
other, and it breaks as soon as one of them grows a module-level name the other needs at
import time.  Only imports that run when a module is imported count: those at module level
(including inside module-level ``if``/``try`` and class bodies), not those inside functions
(deferred on purpose, e.g. to keep torch out of the CLI's start-up), nor under
``if TYPE_CHECKING:``.  The graph is read from the source with ``ast``; nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "kerntune"


def _modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under the package (packages by ``__init__``)."""
    out: dict[str, Path] = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _runtime_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Import statements that run at import time: skip function bodies and TYPE_CHECKING blocks."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.append(node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    child = getattr(node, field, None)
                    if isinstance(child, list):
                        visit([c for c in child if isinstance(c, ast.stmt)] if field != "handlers"
                              else [s for h in child for s in h.body])

    visit(tree.body)
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """module -> the kerntune modules its import-time statements load (by the name they name:
    ``from a.b import c`` points at ``a.b.c`` where that is a module, else at ``a.b``)."""
    mods = _modules(root)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            graph[mod] |= {t for t in targets if t in mods and t != mod}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_the_checker_finds_a_planted_circle(tmp_path: Path) -> None:
    """The checker itself: a two-module circle at module level is found, a deferred one is not."""
    pkg = tmp_path / PACKAGE
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("from kerntune.sub import b\n")
    (pkg / "sub" / "b.py").write_text("from . import a\n")
    (pkg / "sub" / "c.py").write_text("def f():\n    from kerntune.sub import d\n")
    (pkg / "sub" / "d.py").write_text("import kerntune.sub.c\n")
    (pkg / "sub" / "e.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                      "    from kerntune.sub import f\n")
    (pkg / "sub" / "f.py").write_text("from kerntune.sub.e import TYPE_CHECKING\n")
    graph = import_graph(tmp_path)
    assert graph["kerntune.sub.b"] == {"kerntune.sub.a"}
    assert cycles(graph) == [["kerntune.sub.a", "kerntune.sub.b"]]


def test_no_import_circle_inside_kerntune() -> None:
    graph = import_graph()
    assert len(graph) > 50, "the package was not found"
    found = cycles(graph)
    assert not found, "import circles (module-level imports): " + "; ".join(" <-> ".join(c) for c in found)
