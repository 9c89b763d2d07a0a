"""The layout schemas resolve by name from a regular (non-editable) install: the wheel carries
``schemas/*.yaml`` as ``datacheck/builtin_schemas/``."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile

import pytest
from conftest import ROOT

from datacheck.contracts import LAYOUTS


@pytest.mark.slow
@pytest.mark.slow
def test_wheel_carries_layouts_and_names_resolve(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "schemas", src / "schemas")
    shutil.copytree(ROOT / "datacheck", src / "datacheck", symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))  # the kernels: built by the wheel
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(src)],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0 and "No matching distribution" in r.stderr:
        pytest.skip("no package index to fetch the build backend from")
    assert r.returncode == 0, r.stderr
    wheel = next((tmp_path / "dist").glob("datacheck-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for layout in LAYOUTS:
        assert f"datacheck/builtin_schemas/{layout}.yaml" in names
    # the compiled kernels (datacheck/io/native.py), built from datacheck/csrc by the wheel's build
    assert sorted(n.split(".")[0] for n in names if n.startswith("datacheck/_") and n.endswith(".so")) == \
        ["datacheck/_rowhash", "datacheck/_scan"], names
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = ("import datacheck; from datacheck.contracts import load_contract, LAYOUTS;"
            "assert datacheck.__file__.startswith(%r), datacheck.__file__;"
            "from datacheck.io import native; assert native.built == ('scan', 'rowhash'), native.built;"
            "print(sorted(load_contract(n).name for n in LAYOUTS))" % str(site))
    env = dict(os.environ, PYTHONPATH=str(site))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(sorted(LAYOUTS))
