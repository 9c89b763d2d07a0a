"""A spy for the tests that ask which objects a call saw (the prefetch tests: which Prefetch was
started or taken, which path was prefetched or released)."""
from __future__ import annotations

from typing import Any


def record_calls(monkeypatch: Any, owner: Any, name: str, at: Any = None) -> list[Any]:
    """Wrap ``owner.name`` so that every call appends its first argument (``self`` for a method
    looked up on a class) to the returned list, then runs the real one. The wrapper is set on ``at``
    (an object or a dotted import path for ``monkeypatch.setattr``; default ``owner``) under ``name``,
    and undone with the test's monkeypatch."""
    calls: list[Any] = []
    real = getattr(owner, name)

    def spy(first: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(first)
        return real(first, *args, **kwargs)

    if isinstance(at, str):
        monkeypatch.setattr(at, spy)
    else:
        monkeypatch.setattr(owner if at is None else at, name, spy)
    return calls
