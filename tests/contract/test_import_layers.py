"""The package's import structure (ast over ``datacheck/**/*.py``, nothing imported):

- no import cycle among the package's modules (module-level imports; ``if TYPE_CHECKING:`` blocks
  left out; ``from pkg import sub`` counts as importing the submodule ``pkg.sub``);
- no function-local import of one of the package's own modules, except the pairs in
  :data:`LOCAL_ALLOWED` (what exists today: the list only shrinks; an entry that no longer occurs
  fails too, so it is removed when its import moves to the top). Lazy imports of optional heavy
  packages (tokenizers, ...) are not the package's own modules and stay allowed;
- imports go down the layers of :data:`LAYERS` only (ARCHITECTURE.md): a module imports modules of
  its own group or of a lower rank, never of a higher rank nor of another group of its own rank.
  Every import statement counts here, module-level, ``if TYPE_CHECKING:`` and function-local alike:
  a type-only import still makes the lower layer know the upper one's names (and breaks when the
  upper one moves), so it is a layering dependency even though it never runs.
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

from conftest import ROOT

PKG = ROOT / "datacheck"

#: (file, imported module) pairs allowed to import inside a function.
LOCAL_ALLOWED: set[tuple[str, str]] = set()  # none left: every import of the package is at module top


#: The layers, bottom to top: each rank is a tuple of groups; the packages of one group may import
#: each other (without cycles), a group of one rank may not import another group of the same rank
#: (tools, render, torch, trace and resume are independent verbs' libraries). formats/ and derive/ are
#: placed before they exist so the table holds when they land.
LAYERS: tuple[tuple[tuple[str, ...], ...], ...] = (
    (("model",),),
    (("io",),),
    (("formats",),),
    (("derive",),),
    (("checks", "contracts"),),  # the schema family holds a contract's rules; a contract's rules are RowChecks
    (("engine",),),
    (("report",),),
    (("execute",),),
    (("tools",), ("render",), ("torch",), ("trace",), ("resume",)),
    (("api",),),
    (("cli",),),
)
#: The package's top-level modules, each placed in a layer's group explicitly (``datacheck`` is
#: ``datacheck/__init__.py``, the public names; ``listing`` spans the audit's checks and trace's
#: log rules). A new top-level module fails :func:`test_every_module_has_a_layer` until placed here.
TOP_LEVEL = {"datacheck": "api", "datacheck._version": "model", "datacheck.api": "api",
             "datacheck.listing": "api", "datacheck.__main__": "cli"}
#: Folders of the package that hold data or C sources, not modules.
DATA_FOLDERS = ("builtin_schemas", "csrc")  # csrc: the C sources of datacheck._scan and datacheck._rowhash (io/native.py)


def _rank_table() -> dict[str, tuple[int, int]]:
    """Package name -> (rank, group within the rank)."""
    return {pkg: (r, g) for r, groups in enumerate(LAYERS) for g, group in enumerate(groups) for pkg in group}


RANK = _rank_table()


def _layer_of(mod: str) -> str | None:
    """The layer package of a module: ``datacheck.io.outputs`` -> ``io``; a top-level module's from
    :data:`TOP_LEVEL`; None when it is placed nowhere."""
    if mod in TOP_LEVEL:
        return TOP_LEVEL[mod]
    parts = mod.split(".")
    return parts[1] if len(parts) >= 2 else None


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


def _all_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of a module: module-level, ``if TYPE_CHECKING:`` and function-local."""
    return [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


def layer_violations(rank: dict[str, tuple[int, int]] | None = None,
                     extra: dict[str, list[tuple[str, int, str]]] | None = None) -> list[str]:
    """``importer -> imported (layer rank -> layer rank)`` for each import of the package that goes up
    a rank or sideways to another group of the same rank, with its file and line.

    Args:
        rank: the table (default :data:`RANK`).
        extra: planted imports for the self-test: module -> [(file, line, imported module)].
    """
    rank = RANK if rank is None else rank
    found: list[tuple[str, int, str, str]] = []
    for m, (p, is_pkg) in MODS.items():
        rel = p.relative_to(ROOT).as_posix()
        for node in _all_imports(ast.parse(p.read_text(encoding="utf-8"), str(p))):
            found.extend((rel, node.lineno, m, t) for t in _targets(m, is_pkg, node))
    for m, planted in (extra or {}).items():
        found.extend((rel, line, m, t) for rel, line, t in planted)
    out = []
    for rel, line, m, t in found:
        a, b = _layer_of(m), _layer_of(t)
        if a is None or b is None or a == b:
            continue
        (ra, ga), (rb, gb) = rank[a], rank[b]
        if rb > ra or (rb == ra and gb != ga):
            how = "up" if rb > ra else "sideways"
            out.append(f"{rel}:{line} {m} -> {t} ({a} rank {ra} -> {b} rank {rb}: {how})")
    return sorted(set(out))


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


def test_every_module_has_a_layer():
    """Every module of the package is placed: a package of :data:`LAYERS` or a :data:`TOP_LEVEL` module."""
    unplaced = sorted(m for m in MODS if (_layer_of(m) or "") not in RANK)
    assert unplaced == [], f"modules in no layer (add the package to LAYERS or the module to TOP_LEVEL): {unplaced}"
    folders = sorted(d.name for d in PKG.iterdir() if d.is_dir() and d.name != "__pycache__"
                     and d.name not in DATA_FOLDERS and not (d / "__init__.py").exists())
    assert folders == [], f"folders of the package that are neither a package nor data: {folders}"


def test_imports_go_down_the_layers():
    bad = layer_violations()
    assert bad == [], ("imports against the layer order (ARCHITECTURE.md; a module may import its own group "
                       "or a lower rank only):\n" + "\n".join(bad))


def test_layer_check_finds_planted_upward_and_sideways_imports():
    """The check itself: an upward import (model -> io), a sideways one (render -> tools) and an
    allowed one (checks -> contracts, one group) planted on the real graph."""
    planted = {"datacheck.model.findings": [("datacheck/model/findings.py", 1, "datacheck.io.outputs")],
               "datacheck.render.text": [("datacheck/render/text.py", 1, "datacheck.tools.inspect")],
               "datacheck.checks.schema": [("datacheck/checks/schema.py", 1, "datacheck.contracts.load")]}
    bad = layer_violations(extra=planted)
    assert [b for b in bad if b.endswith("up)") and "model.findings" in b] == [
        "datacheck/model/findings.py:1 datacheck.model.findings -> datacheck.io.outputs (model rank 0 -> io rank 1: up)"]
    assert any("datacheck.render.text -> datacheck.tools.inspect" in b and b.endswith("sideways)") for b in bad)
    assert not any(b.startswith("datacheck/checks/schema.py:1 ") for b in bad)


def test_layer_table_places_every_package_once():
    names = [p for groups in LAYERS for group in groups for p in group]
    assert len(names) == len(set(names))
    assert {"formats", "derive"} <= set(names)  # placed before they land
    assert set(TOP_LEVEL.values()) <= set(names)


def test_type_checking_and_local_imports_count_for_layers():
    src = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from datacheck.cli.main import main\n"
           "def f():\n    import datacheck.api\n")
    mods = [t for n in _all_imports(ast.parse(src)) for t in _targets("datacheck.model.x", False, n)]
    assert mods == ["datacheck.cli.main", "datacheck.api"]
