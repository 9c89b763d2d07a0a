"""``datacheck schema infer``: what it writes, and that auditing the same data against it passes."""
from __future__ import annotations

import json
import shutil

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import SHARED, run_cli
from schemahelp import audit, found, summary, write

from datacheck.tools.infer import infer_contract


def _frame():
    return pl.DataFrame({
        "text": ["a", "bb", None, "dddd"],
        "label": [2, 0, 2, 1],
        "score": [0.5, -1.5, 3.25, 0.0],
        "input_ids": pl.Series([[5, 9], [3, 4, 7], [11], [0, 2]], dtype=pl.List(pl.Int32)),
        "mask": pl.Series([[1, 1], [1, 1, 0], [1], None], dtype=pl.List(pl.Int8)),
    })


def test_infer_values(tmp_path):
    write(tmp_path, _frame().head(2), "a.parquet")
    write(tmp_path, _frame().tail(2), "b.parquet")
    data, notes = infer_contract([str(tmp_path)])
    # token ids get no observed bounds: without [tokens] vocab_size they are left out, with a note
    assert notes == ["column 'input_ids' (input_ids): token ids: element bounds left out; set [tokens] vocab_size "
                     "or pass --tokenizer to bound them by [0, vocab_size) (the observed range would fail the next "
                     "shard with a rarer token)"]
    cols = data["columns"]
    assert cols["text"] == {"dtype": "String", "nullable": True}
    assert cols["label"] == {"dtype": "Int64", "isin": [0, 1, 2]}
    assert cols["score"]["dtype"] == "Float64"
    assert cols["score"]["in_range"] == {"min_value": -1.5, "max_value": 3.25, "include_min": True, "include_max": True}
    assert cols["input_ids"] == {"dtype": "List(Int32)"}
    assert cols["mask"] == {"dtype": "List(Int8)", "nullable": True}
    assert data["datacheck"]["columns"] == {
        "input_ids": {"min_length": 1, "max_length": 3},
        "mask": {"min_length": 1, "max_length": 3, "min_value": 0, "max_value": 1},  # no role: observed
    }


def test_infer_cli_then_audit_passes_and_catches_new_data(tmp_path):
    shard = write(tmp_path / "data", _frame())
    out = tmp_path / "contract.yaml"
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text("[tokens]\nvocab_size = 12\n")  # ids in [0, 12): the contract's bounds, not the observed 0..11
    r = run_cli("schema", "infer", str(shard), "-o", str(out), "--config", str(cfg))
    assert r.returncode == 0, r.stderr
    assert yaml.safe_load(out.read_text())["columns"]["label"]["isin"] == [0, 1, 2]
    assert found(audit(shard, out)) == []
    new = pl.DataFrame({"text": ["x"] * 3, "label": [1, 3, 0], "score": [9.0, 0.0, 0.0],
                        "input_ids": pl.Series([[1, 2], [1, 2, 3, 4], [12]], dtype=pl.List(pl.Int32)),
                        "mask": pl.Series([[1, 1], [1, 1, 1, 1], [1]], dtype=pl.List(pl.Int8))})
    got = summary(audit(write(tmp_path / "new", new), out))
    assert got == {("schema.check", "label", 1, (1,)),  # class 3 never seen
                   ("schema.check", "score", 1, (0,)),  # above the observed maximum 3.25
                   ("schema.check", "input_ids", 1, (1,)),  # length 4 > 3
                   ("schema.check", "input_ids", 1, (2,)),  # id 12 >= vocab_size 12
                   ("schema.check", "mask", 1, (1,))}  # length 4 > 3


def test_infer_prints_yaml_and_bad_path_is_exit_2(tmp_path):
    shard = write(tmp_path, {"label": ["NOT", "OFF"]})
    r = run_cli("schema", "infer", str(shard))
    assert r.returncode == 0 and "isin:" in r.stdout and "- NOT" in r.stdout
    r = run_cli("schema", "infer", str(tmp_path / "missing"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    r = run_cli("schema")
    assert r.returncode == 2 and "schema infer" in r.stderr


def test_inferred_dtype_disagreement_is_a_note(tmp_path):
    write(tmp_path, {"a": [1]}, "a.parquet")
    write(tmp_path, pl.DataFrame({"a": [1.5]}), "b.parquet")
    data, notes = infer_contract([str(tmp_path)])
    assert "dtype" not in data["columns"]["a"]
    assert notes == ["column 'a' has different dtypes across shards (Int64, Float64): dtype left out"]


# ---- real data -------------------------------------------------------------------------------


def test_sst2_vi_test_split_breaks_train_label_domain(realdata, tmp_path):
    root = realdata / "sst2_vi_glue_parquet"
    out = tmp_path / "sst2.yaml"
    r = run_cli("schema", "infer", str(root / "train-00000-of-00001.parquet"), "-o", str(out))
    assert r.returncode == 0, r.stderr
    contract = yaml.safe_load(out.read_text())
    assert contract["columns"]["label"]["isin"] == [0, 1]
    assert contract["columns"]["idx"]["in_range"]["max_value"] == 67348
    report = audit(root / "test-00000-of-00001.parquet", out)
    got = found(report)
    assert [(f.check, f.column, f.count) for f in got] == [("schema.check", "label", 1821)]
    assert got[0].rows == tuple(range(20))
    assert got[0].examples[0].value == "-1"
    assert "isin([0, 1])" in got[0].message


def test_dkhate_raw_passes_its_own_inferred_schema(realdata, tmp_path):
    root = realdata / "dkhate_danish_offensive" / "raw_parquet"
    out = tmp_path / "dk.yaml"
    assert run_cli("schema", "infer", str(root), "-o", str(out)).returncode == 0
    assert yaml.safe_load(out.read_text())["columns"]["label"]["isin"] == ["NOT", "OFF"]
    r = run_cli("audit", str(root), "--schema", str(out), "--no-cache", "--format", "json",
                "--report-dir", str(tmp_path / "rep"))
    rep = json.loads(r.stdout)
    assert [f for s in rep["shards"] for f in s["findings"] if f["check"].startswith("schema.")] == []
    # the file names make train and test splits (the Hub's naming): the one error is the real leak of
    # test rows into train (counted in tests/e2e/gate/test_hub_splits.py)
    assert r.returncode == 1 and [f["check"] for f in rep["findings"] if f["severity"] == "error"] == [
        "dup.split_overlap"]


@pytest.mark.slow
def test_dkhate_mbert_against_causal_lm_layout(realdata, tmp_path):
    root = realdata / "dkhate_danish_offensive" / "dkhate_mbert"
    report = audit(root, "causal_lm")
    assert found(report) == []
    # the DatasetDict's declared splits: 9 of the 329 test rows also sit in train
    # (checked independently with pyarrow over input_ids/attention_mask/token_type_ids); the only error
    errors = [(f.check, f.count) for f in report.findings if f.severity == "error"]
    assert errors == [("dup.split_overlap", 9)]
    # the same data with attention_mask dropped (a copy; the original is never touched)
    for split in ("train", "test"):
        src = next((root / split).glob("data-*.arrow"))
        with pa.ipc.open_stream(src) as rd:
            table = rd.read_all()
        (tmp_path / split).mkdir()
        pq.write_table(table.drop_columns(["attention_mask"]), tmp_path / split / "data.parquet")
    got = summary(audit(tmp_path, "causal_lm"))
    assert got == {("schema.missing_column", "attention_mask", 0, ())}
    assert len(found(audit(tmp_path, "causal_lm"))) == 2  # one per shard


def test_infer_many_columns_keeps_each_columns_stats(tmp_path):
    df = pl.DataFrame({f"c{k}": [k, k + 100] for k in range(12)})
    data, _ = infer_contract([str(write(tmp_path, df))])
    assert data["columns"]["c1"]["in_range"]["min_value"] == 1
    assert data["columns"]["c11"]["in_range"] == {"min_value": 11, "max_value": 111, "include_min": True,
                                                  "include_max": True}


CHAT = SHARED / "chat"
SMOLLM = CHAT / "tokenizers/smollm_135m"
#: ChatML with {% generation %} (as tests/unit/derive/test_chat_sft_render.py sets it: the folder ships no template)
CHATML_GEN = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' }}"
              "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] + '<|im_end|>' }}"
              "{% endgeneration %}{% else %}{{ message['content'] + '<|im_end|>' }}{% endif %}{{ '\n' }}{% endfor %}")


def _chat_tokenizer(tmp_path):
    folder = tmp_path / "tok"
    shutil.copytree(SMOLLM, folder)
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    cfg["chat_template"] = CHATML_GEN
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
    return folder


@pytest.mark.slow
@pytest.mark.skipif(not SMOLLM.is_dir(), reason="shared chat material not present")
@pytest.mark.parametrize("data, kept, left_out", [
    # Alpaca layout: messages is derived with or without a tokenizer, so it stays in the contract
    ("llamafactory/identity.json", {"instruction", "input", "output", "messages"},
     "input_ids, assistant_mask, labels, chat_assistant_tokens_untruncated, chat_template_error"),
    # preference pairs: TRL's rendered pair columns
    ("llamafactory/dpo_en_demo.json", {"conversations", "chosen", "rejected"},
     "chosen_input_ids, rejected_input_ids, chosen_response_tokens, rejected_response_tokens, pair_prompt_tokens, "
     "chat_template_error"),
])
def test_infer_leaves_columns_rendered_by_the_tokenizer_out(tmp_path, data, kept, left_out):
    """A contract inferred with [tokens] tokenizer fits the audit without it."""
    pytest.importorskip("transformers")
    path = CHAT / data
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(f'[tokens]\ntokenizer = "{_chat_tokenizer(tmp_path)}"\n')
    out = tmp_path / "contract.yaml"
    r = run_cli("schema", "infer", str(path), "-o", str(out), "--config", str(cfg))
    assert r.returncode == 0, r.stderr
    contract = yaml.safe_load(out.read_text())
    assert set(contract["columns"]) == kept
    assert f"left out of the contract: {left_out} (" in r.stdout + r.stderr
    assert found(audit(str(path), out)) == []  # no tokenizer: no schema.missing_column


def test_a_role_column_beyond_int64_keeps_no_observed_bound(tmp_path):
    """A class label and token ids beyond 64 bits (JSONL: Int128, read by the audit at Int64's
    bounds): the contract keeps their Int64 dtype but no classes or element range made of a bound
    (9223372036854775807 is no value of the data), with a note naming each column."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.jsonl").write_text('{"text": "a", "label": 0, "input_ids": [1, 2]}\n'
                                  '{"text": "b", "label": %d, "input_ids": [%d, 2]}\n' % (2**64, -(2**64)))
    contract, notes = infer_contract([str(data)])
    assert contract["columns"]["label"] == {"dtype": "Int64"}
    assert contract["columns"]["input_ids"] == {"dtype": "List(Int64)"}
    assert "min_value" not in contract.get("datacheck", {}).get("columns", {}).get("input_ids", {})
    assert sorted(n.split("'")[1] for n in notes if "beyond 64 bits" in n) == ["input_ids", "label"]


def test_a_csv_integer_column_beyond_int64_is_inferred_and_the_data_passes_it(tmp_path):
    # polars reads a CSV integer column holding a value beyond Int64 as Int128, a dtype Pandera's polars
    # engine cannot name: the contract leaves that column's dtype (and its observed range) out with a
    # note, and the same data passes the contract
    big = 2**63  # one past the Int64 maximum
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.csv").write_text(f"text,label,big\na,1,1\nb,0,{big}\nc,1,-5\n")
    assert pl.read_csv(data / "a.csv")["big"].dtype == pl.Int128
    contract, notes = infer_contract([str(data)])
    assert "dtype" not in contract["columns"]["big"] and "in_range" not in contract["columns"]["big"]
    assert contract["columns"]["label"] == {"dtype": "Int64", "isin": [0, 1]}
    assert any("'big'" in n and "Int128" in n for n in notes), notes
    out = tmp_path / "schema.yaml"
    r = run_cli("schema", "infer", str(data), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert found(audit([str(data)], str(out))) == []
