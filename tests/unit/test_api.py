"""Wrong argument types of the public API are usage errors naming what is expected."""
from __future__ import annotations

import pytest

import datacheck
from datacheck.model.errors import UsageError


@pytest.mark.parametrize("paths", [123, None, [1, "a.parquet"], {"a": 1}])
def test_audit_with_paths_of_another_type_is_a_usage_error(paths):
    with pytest.raises(UsageError, match="paths must be a path"):
        datacheck.audit(paths)


def test_audit_with_a_config_of_another_type_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="config must be a path to datacheck.toml"):
        datacheck.audit(str(tmp_path), config=42)


_LIBRARY_CALL = """
import sys, datacheck
try:
    datacheck.audit(sys.argv[1], workers=1, fail_on="never")
except datacheck.ConfigError as exc:
    print("ConfigError:", exc)
    sys.exit(2)
print("audited")
"""


@pytest.mark.parametrize("value", ["0", "abc"])
def test_audit_refuses_an_unusable_polars_max_threads_before_polars_panics(tmp_path, value):
    """A library caller with POLARS_MAX_THREADS=0 (polars panics at its first query) or a value
    polars ignores gets a ConfigError naming the variable and what to set, not a Rust panic. A
    process of its own: polars reads the variable once, when its thread pool starts."""
    import os
    import subprocess
    import sys

    from conftest import ROOT

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "s.jsonl").write_text('{"text": "a"}\n{"text": "b"}\n')
    p = subprocess.run([sys.executable, "-c", _LIBRARY_CALL, str(tmp_path / "data")], capture_output=True, text=True,
                       cwd=ROOT, timeout=300, env={**os.environ, "POLARS_MAX_THREADS": value})
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert f"ConfigError: POLARS_MAX_THREADS={value!r}" in p.stdout and "POLARS_MAX_THREADS=4" in p.stdout
    assert "PanicException" not in p.stderr and "Traceback" not in p.stderr
