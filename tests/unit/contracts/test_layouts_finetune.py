"""The fine-tuning layouts: chat_sft, sft_tokenized, packed_lm, dpo, ctc. Each
validates a matching inline frame with no schema finding and rejects broken ones with the right
finding (check, column, count, rows)."""
from __future__ import annotations

import polars as pl
import pytest
from schemahelp import audit, found, summary, write

from datacheck.contracts import LAYOUTS, load_contract
from datacheck.contracts.model import dtype_kind

L = pl.List
FINETUNE = ("chat_sft", "sft_tokenized", "packed_lm", "dpo", "ctc")


def _msgs(*turns):
    return [{"role": r, "content": c} for r, c in turns]


@pytest.mark.parametrize("name", FINETUNE)
def test_layout_loads_by_name_and_via_config(name):
    assert name in LAYOUTS
    c = load_contract(name)
    assert c.name == name and c.schema.columns


def test_struct_kinds():
    t = L(pl.Struct({"role": pl.String, "content": pl.String}))
    assert dtype_kind(t) == {"list<struct>"}
    assert dtype_kind(pl.Struct({"a": pl.Int64})) == {"struct"}


def test_chat_sft(tmp_path):
    ok = pl.DataFrame({"id": ["a", "b"], "messages": [_msgs(("user", "hi"), ("assistant", "hello")),
                                                      _msgs(("system", "s"), ("user", "q"), ("assistant", "a"))]})
    assert found(audit(write(tmp_path, ok, "ok.parquet"), "chat_sft")) == []
    share = pl.DataFrame({"conversations": [[{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]]})
    assert found(audit(write(tmp_path / "s", share, "sharegpt.jsonl"), "chat_sft")) == []
    bad = pl.DataFrame({"messages": [_msgs(("user", "hi"), ("assistant", "x")), [], None]},
                       schema={"messages": L(pl.Struct({"role": pl.String, "content": pl.String}))})
    assert summary(audit(write(tmp_path / "b", bad, "bad.parquet"), "chat_sft")) == {
        ("schema.check", "messages", 1, (1,)),     # no message at all
        ("schema.nullable", "messages", 1, (2,))}  # null conversation
    flat = pl.DataFrame({"messages": ["user: hi\nassistant: hello"]})
    assert summary(audit(write(tmp_path / "f", flat, "flat.parquet"), "chat_sft")) == {
        ("schema.dtype", "messages", 0, ())}  # a string, not a list of turns
    alpaca = pl.DataFrame({"instruction": ["x"], "output": ["y"]})  # the read path derives its messages
    assert summary(audit(write(tmp_path / "a", alpaca, "a.parquet"), "chat_sft")) == set()
    none = pl.DataFrame({"text": ["x"], "output": ["y"]})
    assert summary(audit(write(tmp_path / "n", none, "n.parquet"), "chat_sft")) == {
        ("schema.missing_column", "^(messages|conversations)$", 0, ())}


def _sft(**over):
    d = {"input_ids": pl.Series([[1, 10, 11, 2, 20, 21, 2], [1, 12, 2, 22, 2, 0, 0]], dtype=L(pl.Int32)),
         "attention_mask": pl.Series([[1] * 7, [1, 1, 1, 1, 1, 0, 0]], dtype=L(pl.Int8)),
         "labels": pl.Series([[-100, -100, -100, -100, 20, 21, 2], [-100, -100, -100, 22, 2, -100, -100]],
                             dtype=L(pl.Int64)),
         "assistant_masks": pl.Series([[0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 1, 1, 0, 0]], dtype=L(pl.Int8))}
    d.update(over)
    return pl.DataFrame(d)


def test_sft_tokenized(tmp_path):
    assert found(audit(write(tmp_path, _sft(), "ok.parquet"), "sft_tokenized")) == []
    assert found(audit(write(tmp_path / "m", _sft().drop("attention_mask", "assistant_masks"), "ok.parquet"),
                       "sft_tokenized")) == []
    bad = _sft(input_ids=pl.Series([[1, 10, 11, 2, 20, 21, 2], [1, 12, -5, 22, 2, 0, 0]], dtype=L(pl.Int32)),
               assistant_masks=pl.Series([[0, 0, 0, 0, 1, 1, 2], [0, 0, 0, 1, 1, 0, 0]], dtype=L(pl.Int8)))
    assert summary(audit(write(tmp_path / "b", bad, "bad.parquet"), "sft_tokenized")) == {
        ("schema.check", "input_ids", 1, (1,)),          # id -5 < 0
        ("schema.check", "assistant_masks", 1, (0,))}    # 2 not in [0, 1]
    nolab = _sft().drop("labels")
    assert summary(audit(write(tmp_path / "n", nolab, "n.parquet"), "sft_tokenized")) == {
        ("schema.missing_column", "labels", 0, ())}


def _packed(**over):
    d = {"input_ids": [[5, 6, 7, 8, 9, 4], [5, 6, 7, 8, 9, 4]],
         "labels": [[-100, 6, 7, -100, 9, 4], [-100, 6, 7, 8, 9, 4]],
         "position_ids": [[0, 1, 2, 0, 1, 2], [0, 1, 2, 3, 4, 5]],
         "seq_lens": [[3, 3], [6]],
         "cu_seqlens": [[0, 3, 6], [0, 6]]}
    d.update(over)
    return pl.DataFrame(d)


def test_packed_lm(tmp_path):
    assert found(audit(write(tmp_path, _packed(), "ok.parquet"), "packed_lm")) == []
    only_doc = pl.DataFrame({"input_ids": [[5, 6, 7]], "document_ids": [[0, 0, 1]]})
    assert found(audit(write(tmp_path / "d", only_doc, "d.parquet"), "packed_lm")) == []
    bad = _packed(position_ids=[[0, 1, 2, 0, 1, 2], [0, 1, -1, 3, 4, 5]], seq_lens=[[3, 0, 3], [6]],
                  cu_seqlens=[[0, 3, 6], [6]])
    assert summary(audit(write(tmp_path / "b", bad, "bad.parquet"), "packed_lm")) == {
        ("schema.check", "position_ids", 1, (1,)),  # a position below 0
        ("schema.check", "seq_lens", 1, (0,)),      # an empty document
        ("schema.check", "cu_seqlens", 1, (1,))}    # one offset: not a boundary list
    unpacked = pl.DataFrame({"input_ids": [[5, 6, 7]], "labels": [[5, 6, 7]]})
    assert summary(audit(write(tmp_path / "u", unpacked, "u.parquet"), "packed_lm")) == {
        ("schema.missing_column", None, 0, ())}  # nothing delimits the documents


@pytest.mark.parametrize("form", ["text", "conversation", "message", "tokens"])
def test_dpo_forms(tmp_path, form):
    if form == "text":
        ok = pl.DataFrame({"prompt": ["2+2?"], "chosen": ["4"], "rejected": ["5"]})
    elif form == "conversation":
        ok = pl.DataFrame({"chosen": [_msgs(("user", "2+2?"), ("assistant", "4"))],
                           "rejected": [_msgs(("user", "2+2?"), ("assistant", "5"))]})
    elif form == "message":  # LLaMA-Factory's ShareGPT pairs: one {from, value} message each
        ok = pl.DataFrame({"conversations": [[{"from": "human", "value": "2+2?"}]],
                           "chosen": [{"from": "gpt", "value": "4"}], "rejected": [{"from": "gpt", "value": "5"}]})
    else:
        ok = pl.DataFrame({"chosen": [[7, 8, 9]], "rejected": [[7, 8, 3]]})
    assert found(audit(write(tmp_path, ok, "ok.parquet"), "dpo")) == []


def test_dpo_broken(tmp_path):
    bad = pl.DataFrame({"chosen": [[7, 8], [], [1]], "rejected": [[7, 9], [3], None]})
    assert summary(audit(write(tmp_path, bad, "bad.parquet"), "dpo")) == {
        ("schema.check", "chosen", 1, (1,)),        # empty token list
        ("schema.nullable", "rejected", 1, (2,))}
    wrong = pl.DataFrame({"chosen": [1.5], "response": ["x"]})
    assert summary(audit(write(tmp_path / "w", wrong, "w.parquet"), "dpo")) == {
        ("schema.dtype", "chosen", 0, ()), ("schema.missing_column", "rejected", 0, ())}


def test_ctc(tmp_path):
    ok = pl.DataFrame({"input_values": [[0.1, -0.2, 0.0, 0.3], [0.5, 0.5]], "labels": [[3, 4], [5]],
                       "input_length": [4, 2]})
    assert found(audit(write(tmp_path, ok, "ok.parquet"), "ctc")) == []
    mel = pl.DataFrame({"input_features": [[[0.1, 0.2], [0.3, 0.4]]], "labels": [[1]]})
    assert found(audit(write(tmp_path / "m", mel, "m.parquet"), "ctc")) == []
    bad = pl.DataFrame({"input_values": [[0.1, 0.2], [0.3]], "labels": [[], [2, -1]], "input_length": [2, 0]})
    assert summary(audit(write(tmp_path / "b", bad, "bad.parquet"), "ctc")) == {
        ("schema.check", "labels", 1, (0,)),        # no target
        ("schema.check", "labels", 1, (1,)),        # -1 is not a label id
        ("schema.check", "input_length", 1, (1,))}  # 0 frames
    text = pl.DataFrame({"audio_path": ["a.wav"], "labels": [[1]]})
    assert summary(audit(write(tmp_path / "t", text, "t.parquet"), "ctc")) == {
        ("schema.missing_column", None, 0, ())}  # no features
