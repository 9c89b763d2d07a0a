"""datacheck.io.native: the compiled kernels are built by the install and loaded."""
from __future__ import annotations

import os
import subprocess
import sys
import types

from conftest import ROOT

from datacheck.io import native


def test_every_kernel_module_is_built_and_loaded():
    # the pip install compiles them (pyproject.toml ext-modules); a tree used without an install
    # builds them with `python -c "from setuptools import setup; setup()" build_ext --inplace`
    assert set(native.built) == {"scan", "rowhash"}, (
        f"datacheck's kernels are not built (only {native.built}): see datacheck/io/native.py")
    assert native.enabled == (os.environ.get("DATACHECK_NATIVE", "1") != "0")


def test_datacheck_native_0_takes_the_numpy_paths():
    code = "from datacheck.io import native; print(native.scan, native.rowhash, sorted(native.built))"
    env = {**os.environ, "DATACHECK_NATIVE": "0", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split(" ", 2)[:2] == ["None", "None"]
    assert "'rowhash', 'scan'" in out  # built, not used


def test_a_module_built_from_older_sources_is_not_used(monkeypatch):
    # a datacheck/_rowhash*.so or _scan*.so left from the skeleton (ABI 1, no kernels) by an earlier
    # in-place build: the callers take their numpy path rather than call a kernel it lacks
    stale = types.SimpleNamespace(ABI=1)
    monkeypatch.setattr(native.importlib, "import_module", lambda name: stale)
    assert native._load("_rowhash") is None and native._load("_scan") is None
    stale.ABI = 2
    assert native._load("_rowhash") is stale and native._load("_scan") is stale
