"""Every Sphinx cross-reference in the package (``:mod:``, ``:func:``, ``:class:``, ``:meth:``,
``:attr:``, ``:data:``, ``:exc:``, ``:obj:`` in docstrings and comments) names something that exists:
a dotted name is imported and looked up attribute by attribute (another package's too, e.g.
``concurrent.futures.ProcessPoolExecutor``); a bare name is looked up in the module that mentions it,
then in that module's classes; ``.name`` is relative to the module's package. A class attribute
counts when it is a class member, a dataclass or pydantic field, an annotation or set as ``self.name``
in the class. A module moved or a function renamed leaves no stale reference behind."""
from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path
from types import ModuleType
from typing import Any

from conftest import ROOT

ROLE = re.compile(r":(mod|func|class|meth|attr|data|exc|obj):`~?([^`<>]+?)(?:\(\))?`")
#: modules never imported here (importing ``datacheck.__main__`` runs the CLI)
SKIP = {"datacheck.__main__"}


def _member(obj: Any, name: str) -> tuple[bool, Any]:
    if hasattr(obj, name):
        return True, getattr(obj, name)
    if not inspect.isclass(obj):
        return False, None
    names: set[str] = set(getattr(obj, "__dataclass_fields__", {}) or {}) | set(getattr(obj, "model_fields", {}) or {})
    for c in obj.__mro__:
        names |= set(getattr(c, "__annotations__", {}))
    if name in names:
        return True, None
    try:
        src = inspect.getsource(obj)
    except (OSError, TypeError):
        src = ""
    return bool(re.search(rf"self\.{re.escape(name)}\b\s*(:[^=\n]+)?=(?!=)|self\.{re.escape(name)}\s*,", src)), None


def _dotted(parts: list[str]) -> bool:
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:]:
            ok, obj = _member(obj, p)
            if not ok:
                return False
        return True
    return False


def _resolves(name: str, mod: ModuleType) -> bool:
    parts = name.split(".")
    if parts[0] == "datacheck" or not hasattr(mod, parts[0]) and len(parts) > 1 and _dotted(parts[:1]):
        return _dotted(parts)
    obj: Any = mod
    for p in parts:
        ok, obj = _member(obj, p)
        if not ok:
            break
    else:
        return True
    classes = [v for v in vars(mod).values() if inspect.isclass(v) and v.__module__ == mod.__name__]
    return any(_dotted([c.__module__, c.__qualname__, *parts]) for c in classes)


def _stale() -> list[tuple[str, str]]:
    out = []
    for path in sorted((ROOT / "datacheck").rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        modname = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        text = path.read_text(encoding="utf-8")
        refs = [(text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2).strip()) for m in ROLE.finditer(text)]
        if not refs or modname in SKIP:
            continue
        mod = importlib.import_module(modname)
        for line, role, name in refs:
            if name.startswith("."):
                name = (modname if rel.name == "__init__" else modname.rpartition(".")[0]) + name
            if not _resolves(name, mod):
                out.append((f"{Path(*rel.parts).as_posix()}.py:{line} :{role}:`{name}`", name))
    return out


def test_every_cross_reference_resolves():
    stale = [where for where, _ in _stale()]
    assert stale == [], "references to names that do not exist (fix the name or drop the role):\n" + "\n".join(stale)


def test_a_planted_stale_reference_is_found():
    mod = importlib.import_module("datacheck.io.outputs")
    assert _resolves("write_atomic", mod) and _resolves("datacheck.io.outputs.write_frame_atomic", mod)
    assert _resolves("datacheck.execute.cache.ShardCache.prune", mod)
    assert _resolves("concurrent.futures.ProcessPoolExecutor", mod)
    assert not _resolves("datacheck.outputs.write_atomic", mod)
    assert not _resolves("datacheck.execute.cache.ShardCache.no_such_method", mod)
    assert not _resolves("no_such_function", mod)
