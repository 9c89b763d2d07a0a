"""A schema file without a ``columns`` mapping is not an (empty) contract: exit 2 naming the file."""
from __future__ import annotations

import pytest
from conftest import run_cli
from schemahelp import write

from datacheck.contracts import load_contract
from datacheck.model.errors import ConfigError


@pytest.mark.parametrize("name,text", [
    ("foo.yaml", "foo: 1\n"),                       # the user report's example
    ("nocols.yaml", "schema_type: polars_dataframe\nstrict: true\n"),
    ("nullcols.yaml", "columns:\n"),                # `columns:` with nothing under it
    ("listcols.yaml", "columns:\n  - label\n"),     # not a mapping
    ("foo.json", '{"foo": 1}'),
])
def test_no_columns_is_exit_2(tmp_path, name, text):
    shard = write(tmp_path, {"label": [0]})
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError) as exc:
        load_contract(str(path))
    assert exc.value.key == "dataset.schema"
    assert f"schema file {path} has no 'columns': not a datacheck/Pandera schema" in str(exc.value)
    r = run_cli("audit", str(shard), "--schema", str(path), "--no-cache", "--report-dir", str(tmp_path / ".rep"),
                "--no-progress")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert f"schema file {path} has no 'columns'" in r.stderr and "Traceback" not in r.stderr


def test_empty_columns_mapping_is_still_a_contract(tmp_path):
    """``columns: {}`` is a mapping (frame-level checks only, or strict=false): accepted as before."""
    (tmp_path / "empty.yaml").write_text("columns: {}\n")
    assert dict(load_contract(str(tmp_path / "empty.yaml")).schema.columns) == {}
