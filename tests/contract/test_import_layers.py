"""The package's import structure (ast over ``datacheck/**/*.py``, nothing imported):

- no import cycle among the package's modules (module-level imports; ``if TYPE_CHECKING:`` blocks
  left out; ``from pkg import sub`` counts as importing the submodule ``pkg.sub``);
- no function-local import of one of the package's own modules (:data:`LOCAL_ALLOWED`, the pairs
  allowed, is empty). Lazy imports of optional heavy packages (tokenizers, ...) are not the
  package's own modules and stay allowed.
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

from conftest import ROOT

PKG = ROOT / "datacheck"

#: (file, imported module) pairs allowed to import inside a function.
LOCAL_ALLOWED: set[tuple[str, str]] = set()  # none left: every import of the package is at module top


def _modules() -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is_package) for every module of the package."""
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        parts = list(p.relative_to(ROOT).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (p, is_pkg)
    return out


MODS = _modules()


def _owner(name: str) -> str:
    while name and name not in MODS:
        name = name.rpartition(".")[0]
    return name


def _targets(cur: str, is_pkg: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The package's modules an import statement imports (resolving relative imports)."""
    if isinstance(node, ast.Import):
        return [_owner(a.name) for a in node.names if a.name.split(".")[0] == "datacheck" and _owner(a.name)]
    base = node.module or ""
    if node.level:
        pkg = cur.split(".") if is_pkg else cur.split(".")[:-1]
        pkg = pkg[: len(pkg) - (node.level - 1)]
        base = ".".join(pkg + ([node.module] if node.module else []))
    if base.split(".")[0] != "datacheck":
        return []
    out = []
    for a in node.names:
        sub = f"{base}.{a.name}"
        o = sub if sub in MODS else _owner(base)
        if o:
            out.append(o)
    return out


class _Imports(ast.NodeVisitor):
    """Module-level and function-local imports of one module (``TYPE_CHECKING`` blocks skipped)."""

    def __init__(self) -> None:
        self.depth = 0
        self.top: list[ast.Import | ast.ImportFrom] = []
        self.local: list[ast.Import | ast.ImportFrom] = []

    def _fn(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _fn

    def visit_If(self, node: ast.If) -> None:
        t = node.test
        if (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
                isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"):
            for n in node.orelse:
                self.visit(n)
            return
        self.generic_visit(node)

    def _imp(self, node: ast.Import | ast.ImportFrom) -> None:
        (self.local if self.depth else self.top).append(node)

    visit_Import = visit_ImportFrom = _imp


@functools.cache  # one walk of the package for every test here (the tests only read it)
def _scan() -> tuple[dict[str, set[str]], set[tuple[str, str]], list[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODS}
    local: set[tuple[str, str]] = set()
    where: list[str] = []
    for m, (p, is_pkg) in MODS.items():
        v = _Imports()
        v.visit(ast.parse(p.read_text(encoding="utf-8"), str(p)))
        for node in v.top:
            graph[m].update(t for t in _targets(m, is_pkg, node) if t != m)
        rel = p.relative_to(ROOT).as_posix()
        for node in v.local:
            for t in _targets(m, is_pkg, node):
                mod = node.module if isinstance(node, ast.ImportFrom) and node.module and not node.level else t
                local.add((rel, mod))
                where.append(f"{rel}:{node.lineno} imports {mod}")
    return graph, local, where


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on, stack, out = set(), [], []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on:
                    low[v] = min(low[v], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycle():
    graph, _, _ = _scan()
    assert len(graph) > 60  # the walk found the package
    assert _cycles(graph) == []


def test_cycle_detection_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_no_new_function_local_imports_of_the_package():
    _, local, where = _scan()
    new = sorted(local - LOCAL_ALLOWED)
    assert new == [], ("function-local imports of datacheck modules (move them to the top of the module; "
                       f"a cycle that forces one is a layering bug): {[w for w in where if any(w.startswith(f + ':') and w.endswith(m) for f, m in new)]}")


def test_moved_modules_have_no_local_imports_of_the_package():
    """cli/, render/, report/, execute/{cache,parts,merge}.py, tools/diff.py, io/outputs.py import at the top."""
    _, local, _ = _scan()
    clean = ("datacheck/cli/", "datacheck/render/", "datacheck/report/", "datacheck/execute/cache.py",
             "datacheck/execute/parts.py", "datacheck/execute/merge.py", "datacheck/tools/diff.py",
             "datacheck/io/outputs.py")
    assert [x for x in local if x[0].startswith(clean)] == []
