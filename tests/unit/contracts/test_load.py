"""Loading contracts: names, YAML/JSON files, Python DataFrameModels, and every bad input as exit 2
or a schema.* finding with a clear message, never a traceback."""
from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import run_cli
from schemahelp import audit, summary, write

from datacheck.contracts import load_contract
from datacheck.model.errors import ConfigError

GOOD = """
schema_type: polars_dataframe
columns:
  label:
    dtype: Int64
    isin: [0, 1]
  text:
    dtype: String
    nullable: true
"""


def _cli(tmp_path, *args):
    return run_cli("audit", *map(str, args), "--no-cache", "--report-dir", str(tmp_path / ".rep"), "--no-progress")


def test_yaml_and_json_forms_give_the_same_findings(tmp_path):
    shard = write(tmp_path, {"label": [0, 2, 1], "text": ["a", None, "c"]})
    (tmp_path / "s.yaml").write_text(GOOD)
    (tmp_path / "s.json").write_text(json.dumps({"schema_type": "polars_dataframe", "columns": {
        "label": {"dtype": "Int64", "checks": [{"value": [0, 1], "options": {"check_name": "isin"}}]},
        "text": {"dtype": "String", "nullable": True}}}))
    want = {("schema.check", "label", 1, (1,))}
    assert summary(audit(shard, tmp_path / "s.yaml")) == want
    assert summary(audit(shard, tmp_path / "s.json")) == want


def test_python_model_custom_check_carries_name_and_message(tmp_path):
    (tmp_path / "contract.py").write_text(
        "import pandera.polars as pa\nimport polars as pl\n\n"
        "class Reviews(pa.DataFrameModel):\n"
        "    label: int = pa.Field(ge=0, le=1)\n"
        "    text: str\n\n"
        "    @pa.check('text', name='no_html', error='text holds HTML tags')\n"
        "    def no_html(cls, data):\n"
        "        return data.lazyframe.select(pl.col(data.key).str.contains('<').not_())\n")
    shard = write(tmp_path, {"label": [0, 1, 5], "text": ["ok", "<b>x</b>", "fine"]})
    report = audit(shard, f"{tmp_path / 'contract.py'}:Reviews")
    got = {(f.check, f.column, f.count, f.rows) for f in report.findings if f.check.startswith("schema.")}
    assert got == {("schema.check", "text", 1, (1,)), ("schema.check", "label", 1, (2,))}
    html = next(f for f in report.findings if f.column == "text")
    assert "'no_html'" in html.message and "text holds HTML tags" in html.message
    assert html.examples[0].value == "'<b>x</b>'"


def test_udf_fallback_for_a_check_that_is_not_one_expression(tmp_path):
    (tmp_path / "contract.py").write_text(
        "import pandera.polars as pa\nimport polars as pl\n\n"
        "class M(pa.DataFrameModel):\n"
        "    x: int\n\n"
        "    @pa.check('x', name='below_mean_plus_10')\n"
        "    def below(cls, data):\n"
        "        m = data.lazyframe.select(pl.col(data.key).mean()).collect().item()\n"
        "        return data.lazyframe.select(pl.col(data.key) <= m + 10)\n")
    shard = write(tmp_path, {"x": [1, 2, 3, 100]})
    assert summary(audit(shard, f"{tmp_path / 'contract.py'}:M")) == {("schema.check", "x", 1, (3,))}


def test_schema_naming_an_absent_column_is_a_finding(tmp_path):
    shard = write(tmp_path, {"label": [0, 1]})
    (tmp_path / "s.yaml").write_text(GOOD.replace("nullable: true", "nullable: true\n  score:\n    dtype: Float64"))
    r = _cli(tmp_path, shard, "--schema", tmp_path / "s.yaml", "--format", "json")
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    found = {(f["check"], f["column"]) for s in json.loads(r.stdout)["shards"] for f in s["findings"]}
    assert found == {("schema.missing_column", "text"), ("schema.missing_column", "score")}


@pytest.mark.parametrize("text,needle", [
    ("columns:\n  label: {dtype: Int64\n", "not valid YAML at line"),
    ("columns:\n  label:\n    dtype: Int65\n", "not a valid Pandera polars schema"),
    ("columns:\n  label:\n    dtype: Int64\n    no_such_check: 3\n", "columns.label: unknown check 'no_such_check'"),
    ("columns: {a: {}}\ndatacheck:\n  columns:\n    a: {kind: tensor}\n", "datacheck.columns.a.kind"),
    ("columns: {a: {}}\ndatacheck:\n  version: 9\n", "newer than this datacheck reads"),
    ("- just\n- a list\n", "must hold a mapping"),
])
def test_bad_schema_file_is_exit_2_naming_file_and_key(tmp_path, text, needle):
    shard = write(tmp_path, {"label": [0]})
    (tmp_path / "bad.yaml").write_text(text)
    r = _cli(tmp_path, shard, "--schema", tmp_path / "bad.yaml")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert str(tmp_path / "bad.yaml") in r.stderr
    assert needle in r.stderr


def test_bad_json_and_python_files(tmp_path):
    shard = write(tmp_path, {"label": [0]})
    (tmp_path / "bad.json").write_text('{"columns": {"label": }')
    r = _cli(tmp_path, shard, "--schema", tmp_path / "bad.json")
    assert r.returncode == 2 and "not valid JSON at line 1" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "m.py").write_text("class M(:\n")
    r = _cli(tmp_path, shard, "--schema", f"{tmp_path / 'm.py'}:M")
    assert r.returncode == 2 and "Python syntax error at line 1" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "ok.py").write_text("X = 1\n")
    r = _cli(tmp_path, shard, "--schema", f"{tmp_path / 'ok.py'}:Missing")
    assert r.returncode == 2 and "defines no 'Missing'" in r.stderr


def test_unknown_name_and_missing_file(tmp_path):
    shard = write(tmp_path, {"label": [0]})
    r = _cli(tmp_path, shard, "--schema", "causal_llm")
    assert r.returncode == 2 and "unknown schema name 'causal_llm'" in r.stderr and "causal_lm" in r.stderr
    r = _cli(tmp_path, shard, "--schema", tmp_path / "nope.yaml")
    assert r.returncode == 2 and "not found" in r.stderr
    (tmp_path / "datacheck.toml").write_text('[dataset]\nschema = "tabularr"\n')
    r = _cli(tmp_path, shard, "--config", tmp_path / "datacheck.toml")
    assert r.returncode == 2 and "unknown schema name 'tabularr'" in r.stderr


def test_config_error_type_and_cache(tmp_path):
    (tmp_path / "s.yaml").write_text(GOOD)
    a = load_contract(str(tmp_path / "s.yaml"))
    assert load_contract(str(tmp_path / "s.yaml")) is a  # unchanged file: cached
    (tmp_path / "s.yaml").write_text(GOOD + "  extra:\n    dtype: Int8\n")
    assert "extra" in load_contract(str(tmp_path / "s.yaml")).schema.columns  # edited file: re-read
    with pytest.raises(ConfigError) as e:
        load_contract("x.py")
    assert e.value.key == "dataset.schema"


def test_no_schema_skips_with_reason(tmp_path):
    report = audit(write(tmp_path, {"a": [1]}), None)
    reasons = {s["check"]: s["reason"] for s in report.to_dict()["skipped"]}
    assert reasons["schema.check"] == "no schema given (set [dataset] schema or --schema)"


def test_strict_schema_extra_column(tmp_path):
    (tmp_path / "s.yaml").write_text("strict: true\ncolumns:\n  a: {dtype: Int64}\n")
    report = audit(write(tmp_path, pl.DataFrame({"a": [1], "b": [2]})), tmp_path / "s.yaml")
    f = [f for f in report.findings if f.check == "schema.check"]
    assert len(f) == 1 and f[0].details["columns"] == ["b"]


def test_pandera_dtype_mismatch(tmp_path):
    (tmp_path / "s.yaml").write_text("columns:\n  a: {dtype: Int32}\n  b: {dtype: List(Int32)}\n  c: {dtype: String}\n")
    df = pl.DataFrame({"a": [1], "b": pl.Series([[1]], dtype=pl.List(pl.Int64)), "c": ["x"]})
    report = audit(write(tmp_path, df), tmp_path / "s.yaml")
    fs = [f for f in report.findings if f.check.startswith("schema.")]
    assert [(f.check, f.column, f.details["expected"], f.details["actual"]) for f in fs] == [
        ("schema.dtype", "a", "Int32", "Int64"), ("schema.dtype", "b", "List(Int32)", "List(Int64)")]


def test_a_schema_that_cannot_load_names_where_it_was_given(tmp_path):
    """The README's exit 2: "the message names the flag or key". A bad schema said only its value
    ("tabularr: unknown schema name ..."), and inspect/clean met it while reading the first shard."""
    shard = write(tmp_path, {"label": [0]})
    r = _cli(tmp_path, shard, "--schema", "causal_llm")
    assert r.returncode == 2 and "error: --schema: unknown schema name 'causal_llm' (did you mean 'causal_lm'?)" in r.stderr
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text('[dataset]\nschema = "tabularr"\n')
    want = f"error: {cfg}: key 'dataset.schema': unknown schema name 'tabularr' (did you mean 'tabular'?)"
    r = _cli(tmp_path, shard, "--config", cfg)
    assert r.returncode == 2 and want in r.stderr
    for verb in (["inspect", str(shard)], ["clean", str(shard), "--out", str(tmp_path.parent / "out")]):
        r = run_cli(*verb, "--config", str(cfg))
        assert r.returncode == 2 and want in r.stderr, (verb, r.stderr)
    r = _cli(tmp_path, shard, "--schema", tmp_path / "nope.yaml")
    assert r.returncode == 2 and "error: --schema: " in r.stderr and "not found" in r.stderr
