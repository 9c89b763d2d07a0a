"""A schema YAML whose scalars parse but cannot be built as Python values (an integer of more digits
than Python converts, a date that does not exist) is a ConfigError naming the file and the line."""
from __future__ import annotations

import pytest

from datacheck.contracts import load_contract
from datacheck.model.errors import ConfigError


@pytest.mark.parametrize(("value", "says"), [
    ("9" * 20000, "digits"),           # Python's int(str) limit: 4300 digits
    ("2024-13-45", "month"),           # a YAML timestamp no calendar holds
])
def test_unbuildable_scalar_is_a_config_error(tmp_path, value, says):
    p = tmp_path / "s.yaml"
    p.write_text(f"schema_type: polars_dataframe\napi: polars\nname: s\ncolumns:\n  x:\n    dtype: Int64\n"
                 f"    checks:\n      le: {value}\n")
    with pytest.raises(ConfigError) as e:
        load_contract(str(p))
    text = str(e.value)
    assert "s.yaml" in text and "line 8" in text and says in text


def test_recursive_alias_is_refused_not_a_hang(tmp_path):
    p = tmp_path / "r.yaml"
    p.write_text("a: &a [1, *a]\nb: 2\n")
    with pytest.raises(ConfigError, match=r"r\.yaml.*holds itself through an alias"):
        load_contract(str(p))


def test_shared_alias_is_not_a_cycle(tmp_path):
    p = tmp_path / "ok.yaml"
    p.write_text("schema_type: polars_dataframe\napi: polars\nname: ok\ncolumns:\n"
                 "  a: &s {dtype: String, nullable: false}\n  b: *s\n  c: {dtype: String, checks: {isin: &v [x, y]}}\n"
                 "  d: {dtype: String, checks: {isin: *v}}\n")
    assert sorted(load_contract(str(p)).schema.columns) == ["a", "b", "c", "d"]


def test_unbuildable_scalar_is_named_once_per_alias(tmp_path):
    p = tmp_path / "d.yaml"
    p.write_text("a: &a [1, 2]\nb: *a\nc: 2024-02-30\n")
    with pytest.raises(ConfigError, match=r"line 3, column 4.*day"):
        load_contract(str(p))
