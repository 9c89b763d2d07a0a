"""``datacheck inspect``: offending rows with values and first bad positions, tokens, export, bad input."""
from __future__ import annotations

import builtins
import json
import shutil

import polars as pl
import pytest
from conftest import ROOT

from datacheck.io.hashing import hash_file
from datacheck.model.config import Config, config_from_dict, load_config
from datacheck.model.errors import OptionalDependencyError, UsageError
from datacheck.tools.inspect import TOKENIZERS_INSTALL, export_rows, inspect_shards, load_tokenizer, parse_row_list

SAMPLE = ROOT / "sample_data"
SAMPLE_CFG = SAMPLE / "datacheck.toml"
CASES = ROOT.parent / "shared" / "cases"
REAL = ROOT.parent / "shared" / "realdata"
GPT2 = REAL / "gpt2_tokenizer"
MINILM = REAL / "minilm_bert_tokenizer"

from conftest import run_cli  # noqa: E402


def _cfg() -> Config:
    return load_config(SAMPLE_CFG)


def _one(paths, cfg=None, **kw):
    got = inspect_shards([str(p) for p in paths], cfg or _cfg(), **kw)
    assert len(got) == 1
    return got[0]


def test_out_of_vocab_rows_and_first_bad_position():
    ins = _one([SAMPLE / "defects/tokens/ids.parquet"])
    assert ins.failing == {"tokens.out_of_vocab:input_ids": [1, 3, 4]}
    got = [(r.row, r.column, r.position, r.length, r.bad_value) for r in ins.shown]
    # sample_data/README.md: row 1 id 50257 == vocab_size; row 3 id 65000; row 4 id -1
    assert got == [(1, "input_ids", 2, 16, "50257"), (3, "input_ids", 5, 16, "65000"), (4, "input_ids", 0, 16, "-1")]
    assert all(r.line is None for r in ins.shown)
    assert ins.shown[0].value.startswith("[26779, 17229, 50257,")


def test_jsonl_rows_carry_lines_and_values():
    ins = _one([SAMPLE / "defects/empty/text.jsonl"], checks=["empty.text"])
    assert [(r.row, r.line, r.value) for r in ins.shown] == [(1, 2, "''"), (3, 4, "'   \\t '"), (5, 6, "None")]


def test_csv_case_row_and_line():
    ins = _one([CASES / "negative_label_sentinel/data/train.csv"],
               load_config(CASES / "negative_label_sentinel/datacheck.toml"))
    assert ins.failing == {"labels.unexpected_sentinel:label": [2]}
    assert [(r.row, r.line, r.column, r.value) for r in ins.shown] == [(2, 4, "label", "-1")]


def test_check_filter_and_limit():
    ins = _one([SAMPLE / "defects/labels/classes.parquet"], checks=["labels.out_of_range"], limit=1)
    assert ins.failing == {"labels.out_of_range:label": [1, 3]}
    assert [(r.check, r.row, r.value) for r in ins.shown] == [("labels.out_of_range", 1, "3")]


def test_rows_selection_shows_checks_of_each_row():
    ins = _one([SAMPLE / "defects/labels/classes.parquet"], rows=[0, 5, 7])
    assert [(r.row, r.check) for r in ins.shown] == [(0, "(none)"), (5, "labels.unexpected_sentinel"),
                                                     (7, "labels.null")]


def test_parse_row_list():
    assert parse_row_list("17,42, 100-102") == [17, 42, 100, 101, 102]
    for bad in ("x", "5-3", ","):
        with pytest.raises(UsageError):
            parse_row_list(bad)


def test_unknown_check_is_usage_error():
    with pytest.raises(UsageError, match="did you mean 'tokens.out_of_vocab'"):
        inspect_shards([str(SAMPLE / "defects/tokens/ids.parquet")], _cfg(), checks=["tok.out_of_vocab"])


def test_decode_findings_have_line_and_byte_offset():
    ins = _one([SAMPLE / "defects/decode/records.jsonl"])
    bad = next(f for f in ins.decode if f.check == "decode.bad_record" and f.severity == "error")
    assert bad.lines == (2, 4)
    assert [e.byte_offset for e in bad.examples] == [84, 190]
    utf8 = next(f for f in ins.decode if f.check == "decode.invalid_utf8")
    assert utf8.lines == (6,) and utf8.examples[0].byte_offset == 271


@pytest.mark.parametrize("name, reason", [
    ("not_parquet.parquet", "bad magic bytes"),
    ("truncated.parquet", "truncated parquet file: no footer magic at the end (801 bytes"),
    ("zero_bytes.parquet", "zero-byte file"),
])
def test_unreadable_shard_says_why(name, reason):
    ins = _one([SAMPLE / "defects/decode" / name])
    assert ins.rows is None and reason in ins.unreadable


def test_cli_unreadable_exit_1_and_message():
    p = run_cli("inspect", str(SAMPLE / "defects/decode/not_parquet.parquet"), "--config", str(SAMPLE_CFG))
    assert p.returncode == 1
    assert "not_parquet.parquet" in p.stdout and "UNREADABLE: not a parquet file: bad magic bytes" in p.stdout
    assert "at offset 0" in p.stdout


def test_cli_bad_line_exit_1_with_line_and_offset():
    p = run_cli("inspect", str(SAMPLE / "defects/decode/records.jsonl"), "--config", str(SAMPLE_CFG))
    assert p.returncode == 1
    assert "line 2, byte offset 84" in p.stdout and "line 4, byte offset 190: two JSON values on one line" in p.stdout


def test_cli_clean_shard_exit_0_and_usage_exit_2(tmp_path):
    p = run_cli("inspect", str(SAMPLE / "lm_clean"), "--config", str(SAMPLE_CFG))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "no failing rows" in p.stdout
    p = run_cli("inspect", str(tmp_path / "missing.parquet"))
    assert p.returncode == 2 and "no such file or folder" in p.stderr
    p = run_cli("inspect", str(SAMPLE / "lm_clean"), "--check", "nope.nope")
    assert p.returncode == 2 and "unknown check ID" in p.stderr


def test_cli_finds_case_config_beside_data():
    p = run_cli("inspect", str(CASES / "label_equals_num_classes/data/bins.parquet"), "--format", "json")
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)["result"]
    assert doc["shards"][0]["failing"] == {"labels.out_of_range:yaw_bin": {"count": 1, "rows": [3]}}


# ------------------------------------------------------------------------------------------ export
@pytest.mark.parametrize("ext", ["parquet", "jsonl"])
def test_export_offending_rows_for_replay(tmp_path, ext):
    shard = SAMPLE / "defects/tokens/ids.parquet"
    out = tmp_path / f"repro.{ext}"
    p = run_cli("inspect", str(shard), "--config", str(SAMPLE_CFG), "--export", str(out))
    assert p.returncode == 1 and f"exported 3 row(s) to {out}" in p.stdout
    df = pl.read_parquet(out) if ext == "parquet" else pl.read_ndjson(out)
    assert df["_datacheck_row"].to_list() == [1, 3, 4]
    assert set(df["_datacheck_shard"]) == {"ids.parquet"}
    assert set(df["_datacheck_shard_hash"]) == {hash_file(shard)[0]}
    assert df["_datacheck_checks"].to_list() == [["tokens.out_of_vocab:input_ids"]] * 3
    # replay: the exported rows are exactly the shard's rows at those indices
    orig = pl.read_parquet(shard)[[1, 3, 4]]
    assert df["input_ids"].to_list() == orig["input_ids"].to_list()
    assert not list(tmp_path.glob(".*.tmp"))  # atomic: no temporary file left


def test_export_chosen_rows_from_jsonl_keeps_lines(tmp_path):
    out = tmp_path / "rows.jsonl"
    ins = inspect_shards([str(SAMPLE / "defects/empty/text.jsonl")], _cfg(), rows=[0, 3])
    path, n = export_rows(ins, out, _cfg(), rows=[0, 3])
    assert (path, n) == (out, 2)
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(r["_datacheck_row"], r["_datacheck_line"], r["_datacheck_checks"]) for r in recs] == [
        (0, 1, []), (3, 4, ["empty.text:text"])]


def test_export_bad_extension_is_usage_error(tmp_path):
    p = run_cli("inspect", str(SAMPLE / "defects/tokens/ids.parquet"), "--config", str(SAMPLE_CFG),
                "--export", str(tmp_path / "x.csv"))
    assert p.returncode == 2 and "write .parquet or .jsonl" in p.stderr


# ------------------------------------------------------------------------------------------ tokenizers
needs_tok = pytest.mark.skipif(not GPT2.is_dir() or not MINILM.is_dir(), reason="../shared/realdata tokenizers absent")


@needs_tok
@pytest.mark.parametrize("path", [GPT2, GPT2 / "vocab.json"])
def test_gpt2_vocab_merges_pair(path):
    tok = load_tokenizer(path)
    assert tok.vocab_size == 50257
    # PROVENANCE.md: "Hello"=15496, " world"=995
    # byte-level tokens shown decoded: "Ġworld" is " world"
    assert tok.tokens([15496, 995, 50256, 50257]) == ["Hello", " world", "<|endoftext|>", "<oov:50257>"]


@needs_tok
def test_tokenizer_json_and_tokens_window_marks_first_bad():
    tok = load_tokenizer(MINILM / "tokenizer.json")
    assert tok.vocab_size == 30522
    assert tok.encode("hello world") == ["[CLS]", "hello", "world", "[SEP]"]  # no padding to 128
    ins = _one([SAMPLE / "defects/tokens/ids.parquet"], tokenizer=load_tokenizer(GPT2))
    row1 = ins.shown[0]
    assert row1.tokens[2] == "⟦<oov:50257>⟧" and row1.tokens[:2] == (" spreads", " Pere")


@needs_tok
def test_tokenizer_sets_vocab_size_when_config_lacks_it(tmp_path):
    shard = tmp_path / "ids.parquet"
    pl.DataFrame({"input_ids": [[101, 2000, 102], [101, 30522, 102]]}).write_parquet(shard)
    ins = _one([shard], Config(), tokenizer=load_tokenizer(MINILM))
    assert ins.failing == {"tokens.out_of_vocab:input_ids": [1]}
    assert any("using the tokenizer's 30522" in n for n in ins.notes)
    assert ins.shown[0].tokens == ("[CLS]", "⟦<oov:30522>⟧", "[SEP]")


def test_missing_tokenizers_package_gives_install_command(monkeypatch, tmp_path):
    real_import = builtins.__import__

    def fake_import(name, *a, **kw):
        if name == "tokenizers" or name.startswith("tokenizers."):
            raise ImportError("No module named 'tokenizers'")
        return real_import(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(OptionalDependencyError) as exc:
        load_tokenizer(tmp_path / "tokenizer.json")
    # the extra's own dependency, never `pip install datacheck...` (that PyPI name is another project)
    assert 'pip install "tokenizers>=0.15"' in str(exc.value) and TOKENIZERS_INSTALL in str(exc.value)
    assert 'pip install -e ".[tokenizers]"' in TOKENIZERS_INSTALL and "datacheck[" not in TOKENIZERS_INSTALL


def test_tokenizer_path_errors(tmp_path):
    with pytest.raises(UsageError, match="no such file or folder"):
        load_tokenizer(tmp_path / "nope")
    with pytest.raises(UsageError, match="holds no tokenizer.json"):
        load_tokenizer(tmp_path)
    (tmp_path / "vocab.json").write_text("{}")
    with pytest.raises(UsageError, match="needs merges.txt"):
        load_tokenizer(tmp_path / "vocab.json")
    (tmp_path / "tokenizer.json").write_text("not json")
    with pytest.raises(UsageError, match="cannot load it as a tokenizer"):
        load_tokenizer(tmp_path / "tokenizer.json")


@pytest.mark.parametrize("fmt", ["arrow_stream", "arrow_file", "csv"])
def test_every_format(tmp_path, fmt):
    import pyarrow as pa

    df = pl.DataFrame({"text": ["a", "", "c"], "label": [0, 1, 5]})
    cfg = config_from_dict({"labels": {"num_classes": 2}})
    if fmt == "csv":
        path = tmp_path / "s.csv"
        df.write_csv(path)
    else:
        path = tmp_path / "s.arrow"
        table = df.to_arrow()
        with pa.OSFile(str(path), "wb") as sink:
            opener = pa.ipc.new_stream if fmt == "arrow_stream" else pa.ipc.new_file
            with opener(sink, table.schema) as w:
                w.write_table(table)
    ins = _one([path], cfg)
    assert ins.failing == {"empty.text:text": [1], "labels.out_of_range:label": [2]}
    lines = [r.line for r in ins.shown]
    assert lines == ([3, 4] if fmt == "csv" else [None, None])


def test_folder_of_hf_split(tmp_path):
    src = REAL / "dkhate_danish_offensive/dkhate_processed_hf/test"
    if not src.is_dir():
        pytest.skip("../shared/realdata is not present")
    dst = tmp_path / "test"
    shutil.copytree(src, dst)
    ins = inspect_shards([str(dst)], config_from_dict({"labels": {"num_classes": 1}}), limit=2)
    assert [i.shard.rel for i in ins] == ["data-00000-of-00001.arrow"]
    assert len(ins[0].failing["labels.out_of_range:label"]) == 41  # PROVENANCE.md: test has 41 OFF (label 1)


ROW_CASES = ["all_padding_sample", "corrupt_jsonl_lines", "empty_text", "label_equals_num_classes",
             "nan_regression_target", "negative_label_sentinel", "padding_supervised", "repeated_samples",
             "truncation_leaves_no_supervised_tokens"]


@pytest.mark.skipif(not CASES.is_dir(), reason="../shared/cases is not present")
@pytest.mark.parametrize("case", ROW_CASES)
def test_shared_cases_inspect_lists_expected_rows(case):
    expect = json.loads((CASES / case / "expect.json").read_text())["expect"]
    cfg = load_config(CASES / case / "datacheck.toml")
    for e in expect:
        (ins,) = inspect_shards([str(CASES / case / "data" / e["shard"])], cfg, checks=[e["check"]])
        if e["check"].startswith("decode."):
            (f,) = [f for f in ins.decode if f.severity == "error"]
            assert list(f.lines) == e["lines"]
            continue
        rows = sorted({r for k, v in ins.failing.items() for r in v})
        assert rows == e["rows"], (case, ins.failing)
        shown = sorted({r.row for r in ins.shown})
        assert shown == e["rows"] and not set(shown) & set(e.get("not_rows", []))


def test_a_value_beyond_64_bits_is_shown_as_written(tmp_path):
    # a JSON label and a token id beyond Int64 are read at Int64's nearest bound by the checks; inspect
    # shows the rows' values as the file holds them (the checks' examples in the report stay at the bound,
    # which their message says)
    big, small = 2**64 + 5, -(2**63) - 1
    (tmp_path / "a.jsonl").write_text('{"label": 1}\n{"label": %d}\n{"label": %d}\n' % (big, small))
    (tmp_path / "t.jsonl").write_text('{"input_ids": [1, 2, %d]}\n{"input_ids": [1, 2, 3]}\n' % big)
    (tmp_path / "datacheck.toml").write_text("[labels]\nnum_classes = 3\n[tokens]\nvocab_size = 10\n")
    cfg = str(tmp_path / "datacheck.toml")
    r = run_cli("inspect", str(tmp_path / "a.jsonl"), "--config", cfg)
    assert r.returncode == 1, r.stderr
    assert f"      value: {big}" in r.stdout.splitlines()
    assert f"      value: {small}" in r.stdout.splitlines()
    assert "Int64's bound" not in r.stdout and str(2**63 - 1) not in r.stdout
    assert "      value: 1" not in r.stdout.splitlines()  # a sound row is not shown
    r = run_cli("inspect", str(tmp_path / "t.jsonl"), "--config", cfg)
    assert f"      first bad element: position 2 of 3: {big}" in r.stdout.splitlines()
    assert f"      value: [1, 2, {big}]" in r.stdout.splitlines()


def test_an_integral_decimal_beyond_64_bits_is_shown_as_written(tmp_path):
    # decimal(38, 0) labels (a SQL export): an integer label, read at Int64's bound by the checks
    import decimal

    import polars as pl

    big = 10**30
    pl.DataFrame({"label": pl.Series([decimal.Decimal(1), decimal.Decimal(big)], dtype=pl.Decimal(38, 0))}
                 ).write_parquet(tmp_path / "d.parquet")
    (tmp_path / "datacheck.toml").write_text("[labels]\nnum_classes = 3\n")
    r = run_cli("inspect", str(tmp_path / "d.parquet"), "--config", str(tmp_path / "datacheck.toml"))
    assert r.returncode == 1, r.stderr
    assert f"      value: {big}" in r.stdout.splitlines() and str(2**63 - 1) not in r.stdout
