"""datacheck's compiled kernels: C extension modules built from ``datacheck/csrc/`` at install.

The pip install compiles them (setuptools ``ext-modules`` in pyproject.toml, ``-O3``; gcc or clang
and the Python headers). They are ``optional`` there: where no compiler is found the install goes on
without them and every caller takes its numpy path, which computes the same values (the property
tests compare the two on random data) more slowly. ``DATACHECK_NATIVE=0`` in the environment makes
every caller take the numpy path (read once, at import).

- :data:`scan`: ``datacheck._scan`` (``datacheck/csrc/scan.c``), the shared token pass's scan.
- :data:`rowhash`: ``datacheck._rowhash`` (``datacheck/csrc/rowhash.c``), row content digests
  (XXH3-128 of the vendored ``xxhash.h``, BSD-2-Clause, ``datacheck/csrc/LICENSE.xxhash``).

A source tree used without an install (``PYTHONPATH=.``) builds them in place with
``python -c "from setuptools import setup; setup()" build_ext --inplace``.
"""
from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["scan", "rowhash", "enabled", "built"]

#: the ``ABI`` constant each module must carry (a module built from older sources is not used):
#: ``_rowhash`` 2 from its first kernels (``list_digests``, ``fixed_rows``; 1 was the empty skeleton)
ABI = {"_scan": 2, "_rowhash": 2}


def _load(name: str) -> ModuleType | None:
    try:
        mod = importlib.import_module(f"datacheck.{name}")
    except ImportError:
        return None
    return mod if getattr(mod, "ABI", None) == ABI[name] else None


#: False when ``DATACHECK_NATIVE=0``: the numpy paths are taken even where the modules are built
enabled = os.environ.get("DATACHECK_NATIVE", "1") != "0"
_built = {name: _load(f"_{name}") for name in ("scan", "rowhash")}
#: the names of the modules that are built and importable, whatever ``DATACHECK_NATIVE`` says
built = tuple(name for name, mod in _built.items() if mod is not None)
scan: ModuleType | None = _built["scan"] if enabled else None
rowhash: ModuleType | None = _built["rowhash"] if enabled else None
