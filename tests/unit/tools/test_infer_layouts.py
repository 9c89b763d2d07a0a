"""``datacheck schema infer`` recognizes the built-in layouts: on a shard in each
fine-tuning layout it proposes that layout's name, the roles and the facts the data tells (never a
token-id range), on inline frames and on the real chat and realdata material."""
from __future__ import annotations

import json
import tomllib

import polars as pl
import pytest
from conftest import SHARED, run_cli
from schemahelp import audit, found, write

from datacheck.tools.infer import LayoutProposal, propose_layout

CHAT = SHARED / "chat"
REAL = SHARED / "realdata"


def _msgs(*turns):
    return [{"role": r, "content": c} for r, c in turns]


def _propose(tmp_path, df, name="shard.parquet") -> LayoutProposal:
    return propose_layout([str(write(tmp_path, df, name))])


def test_chat_messages(tmp_path):
    p = _propose(tmp_path, pl.DataFrame({"messages": [_msgs(("user", "hi"), ("assistant", "yo"))]}))
    assert (p.layout, p.columns, p.facts) == ("chat_sft", {"messages": "messages"}, {})
    assert "{role, content}" in p.why


def test_sft_tokenized_right_padded_unshifted(tmp_path):
    # <s> user-ids </t> assistant-ids </t> pad: labels copy input_ids on the response only (HF convention)
    df = pl.DataFrame({
        "input_ids": [[1, 10, 11, 2, 20, 21, 2, 0], [1, 12, 2, 22, 2, 0, 0, 0], [1, 13, 14, 15, 2, 23, 2, 0]],
        "attention_mask": [[1] * 7 + [0], [1] * 5 + [0] * 3, [1] * 7 + [0]],
        "labels": [[-100] * 4 + [20, 21, 2, -100], [-100] * 3 + [22, 2, -100, -100, -100],
                   [-100] * 5 + [23, 2, -100]]})
    p = _propose(tmp_path, df)
    assert p.layout == "sft_tokenized"
    assert p.columns == {"input_ids": "input_ids", "labels": "labels", "attention_mask": "attention_mask"}
    assert p.facts == {"tokens": {"padding_side": "right", "eot_token_ids": [2]}, "labels": {"shifted": False}}
    assert "3 of 3 sample rows" in p.why
    toml = tomllib.loads(p.toml())
    assert toml["dataset"] == {"schema": "sft_tokenized"} and toml["labels"] == {"shifted": False}
    # what it proposes audits the same data without a schema finding
    assert found(audit(tmp_path / "shard.parquet", "sft_tokenized", **{k: v for k, v in toml.items()
                                                                         if k != "dataset"})) == []


def test_sft_tokenized_left_padded_shifted_assistant_masks(tmp_path):
    ids = [[0, 1, 10, 2, 20, 21, 2], [0, 0, 1, 11, 2, 22, 2]]
    # shifted (nanoGPT/Megatron): labels[i] is the id at i+1; last position has no target
    labels = [[-100, -100, -100, 20, 21, 2, -100], [-100, -100, -100, -100, 22, 2, -100]]
    df = pl.DataFrame({"input_ids": ids, "attention_mask": [[0, 1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1, 1]],
                       "labels": labels, "assistant_masks": [[0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 1, 1]],
                       "ignore": [[-1], [-1]]})
    p = _propose(tmp_path, df)
    assert p.layout == "sft_tokenized"
    assert p.columns["assistant_mask"] == "assistant_masks"
    assert p.facts["tokens"]["padding_side"] == "left"
    assert p.facts["labels"] == {"shifted": True}


def test_sft_other_sentinel(tmp_path):
    df = pl.DataFrame({"input_ids": [[1, 10, 2, 20, 2]] * 3, "labels": [[-1, -1, -1, 20, 2]] * 3})
    p = _propose(tmp_path, df)
    assert p.layout == "sft_tokenized"
    assert p.facts["labels"] == {"ignore_index": -1, "shifted": False}


@pytest.mark.parametrize("delim,extra", [
    ("position_ids", {"position_ids": [[0, 1, 2, 0, 1], [0, 1, 2, 3, 4]]}),
    ("document_ids", {"document_ids": [[0, 0, 0, 1, 1], [0, 0, 0, 0, 0]]}),
    ("seq_lens", {"seq_lens": [[3, 2], [5]]}),
    ("cu_seqlens", {"cu_seqlens": [[0, 3, 5], [0, 5]]}),
])
def test_packed(tmp_path, delim, extra):
    df = pl.DataFrame({"input_ids": [[5, 6, 2, 7, 2], [8, 9, 3, 4, 2]], "labels": [[5, 6, 2, -100, 2], [8, 9, 3, 4, 2]],
                       **extra})
    p = _propose(tmp_path, df)
    assert p.layout == "packed_lm", p
    assert p.columns[delim] == delim
    assert p.facts == {"labels": {"shifted": False}}
    assert "packed rows" in p.why


def test_position_ids_without_resets_are_not_packing(tmp_path):
    df = pl.DataFrame({"input_ids": [[5, 6, 7], [8, 9, 3]], "position_ids": [[0, 1, 2], [0, 1, 2]]})
    assert _propose(tmp_path, df).layout is None  # not packed_lm (no reset); causal_lm needs an attention_mask
    masked = df.with_columns(pl.Series("attention_mask", [[1, 1, 1], [1, 1, 1]]))
    assert _propose(tmp_path / "m", masked).layout == "causal_lm"


def test_plain_causal_lm_is_not_sft(tmp_path):
    # labels = input_ids with padding ignored: a causal-LM row, no prompt hidden
    df = pl.DataFrame({"input_ids": [[5, 6, 7, 0], [8, 9, 3, 4]], "attention_mask": [[1, 1, 1, 0], [1, 1, 1, 1]],
                       "labels": [[5, 6, 7, -100], [8, 9, 3, 4]]})
    p = _propose(tmp_path, df)
    assert p.layout == "causal_lm"
    assert p.facts == {"tokens": {"padding_side": "right"}, "labels": {"shifted": False}}


@pytest.mark.parametrize("chosen,rejected,form", [
    (["4"], ["5"], "text"),
    ([[7, 8, 9]], [[7, 8, 3]], "token ids"),
    ([_msgs(("user", "q"), ("assistant", "4"))], [_msgs(("user", "q"), ("assistant", "5"))], "conversation"),
])
def test_dpo(tmp_path, chosen, rejected, form):
    p = _propose(tmp_path, pl.DataFrame({"chosen": chosen, "rejected": rejected}))
    assert (p.layout, p.columns) == ("dpo", {"chosen": "chosen", "rejected": "rejected"})
    assert form in p.why


def test_ctc(tmp_path):
    df = pl.DataFrame({"input_values": [[0.1, 0.2, 0.3], [0.0, 0.5]], "labels": [[3, 4], [5]], "input_length": [3, 2]})
    p = _propose(tmp_path, df)
    assert (p.layout, p.columns) == ("ctc", {"labels": "labels", "input_lengths": "input_length"})
    assert any("ctc_downsample" in n for n in p.notes)
    assert found(audit(tmp_path / "shard.parquet", "ctc", columns=p.columns)) == []


def test_no_layout(tmp_path):
    p = _propose(tmp_path, pl.DataFrame({"a": ["x"], "b": ["y"]}))
    assert p.layout is None and p.toml() == ""


# ------------------------------------------------------------------------------------------- real material
def test_real_hh_rlhf_is_dpo():
    src = CHAT / "hh_rlhf" / "harmless-base_test.jsonl.gz"
    if not src.is_file():
        pytest.skip("../shared/chat is not present")
    p = propose_layout([str(src)])
    assert p.layout == "dpo"
    assert p.columns == {"chosen": "chosen", "rejected": "rejected"}
    assert p.why == "preference pairs: 'chosen' and 'rejected' (text)"
    assert p.sample_rows == 1000
    rep = audit(src, "dpo")
    assert found(rep) == [] and rep.shards[0].rows == 2312


def test_real_fastchat_sharegpt_is_chat_sft(tmp_path):
    src = CHAT / "fastchat" / "dummy_conversation.json"
    if not src.is_file():
        pytest.skip("../shared/chat is not present")
    rows = json.loads(src.read_text(encoding="utf-8"))  # a JSON array: copied as JSON Lines (a shard)
    shard = tmp_path / "dummy_conversation.jsonl"
    shard.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    p = propose_layout([str(shard)])
    assert (p.layout, p.columns, p.sample_rows) == ("chat_sft", {"messages": "conversations"}, 500)
    assert "ShareGPT {from, value}" in p.why
    assert found(audit(shard, "chat_sft", columns=p.columns)) == []


def test_real_llamafactory_messages_is_chat_sft():
    src = CHAT / "llamafactory" / "v1_sft_demo.jsonl"
    if not src.is_file():
        pytest.skip("../shared/chat is not present")
    p = propose_layout([str(src)])
    assert (p.layout, p.columns, p.sample_rows) == ("chat_sft", {"messages": "messages"}, 500)


def test_real_tokenized_and_text_sets_are_not_fine_tuning_layouts():
    mbert = REAL / "dkhate_danish_offensive" / "dkhate_mbert"
    if not mbert.is_dir():
        pytest.skip("../shared/realdata is not present")
    p = propose_layout([str(mbert)])
    # mBERT ids and one class label per row: classification rows, never causal_lm (that header was
    # the defect: the contract named a language model's layout for an encoder's classification set)
    assert p.layout == "text_classification" and p.rows is not None and p.rows.name == "text_classification"
    assert p.columns == {"input_ids": "input_ids", "attention_mask": "attention_mask",
                         "token_type_ids": "token_type_ids", "label": "label"}
    assert p.facts == {"tokens": {"padding_side": "right"}}  # every row padded to 128 at the end
    sst2 = propose_layout([str(REAL / "sst2_vi_glue_parquet")])
    assert (sst2.layout, sst2.columns) == ("text_classification", {"text": ["sentence"], "label": "label"})


def test_cli_writes_the_proposal(tmp_path):
    src = CHAT / "hh_rlhf" / "harmless-base_test.jsonl.gz"
    if not src.is_file():
        pytest.skip("../shared/chat is not present")
    out = tmp_path / "contract.yaml"
    r = run_cli("schema", "infer", str(src), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "datacheck: layout: dpo (preference pairs: 'chosen' and 'rejected' (text))" in r.stderr
    text = out.read_text()
    assert '#   the built-in layout holds what every such dataset needs: [dataset] schema = "dpo"' in text
    assert '#   chosen = "chosen"' in text


def test_real_llamafactory_sharegpt_pairs_pass_the_dpo_layout_infer_proposes():
    """dpo_en_demo.json (300 rows): chosen/rejected are single {from, value} messages. ``schema infer``
    proposes ``dpo`` for it; auditing with that layout was two schema.dtype errors (a false alarm)."""
    src = CHAT / "llamafactory" / "dpo_en_demo.json"
    if not src.is_file():
        pytest.skip("../shared/chat is not present")
    p = propose_layout([str(src)])
    assert (p.layout, p.columns) == ("dpo", {"chosen": "chosen", "rejected": "rejected"})
    rep = audit(src, "dpo")
    assert rep.shards[0].rows == 300
    assert found(rep) == []


@pytest.mark.parametrize("folder", ["dkhate_mbert", "dkhate_xlmr"])
def test_tokenized_classification_is_proposed_as_text_classification_and_passes_it(folder):
    """A tokenized classification set (input_ids, attention_mask, label; mBERT also token_type_ids)
    was proposed as ``causal_lm``. It is ``text_classification``, the layout the audit recognizes, and
    its rows pass that built-in contract with no schema.* finding (PROVENANCE.md: every row padded to
    128, labels 0/1)."""
    src = REAL / "dkhate_danish_offensive" / folder / "test"
    if not src.is_dir():
        pytest.skip("../shared/realdata is not present")
    p = propose_layout([str(src)])
    assert p.layout == "text_classification" and p.columns["label"] == "label"
    rep = audit(src, "text_classification")
    assert rep.shards[0].rows == 329
    assert found(rep) == []


def test_token_ids_with_class_label_and_token_labels_stay_token_rows(tmp_path):
    """Only ids + a class label (no token ``labels`` list) are classification rows."""
    df = pl.DataFrame({"input_ids": [[5, 6, 7], [5, 6]], "attention_mask": [[1, 1, 1], [1, 1]],
                       "label": [0, 1]})
    assert _propose(tmp_path, df).layout == "text_classification"
    lm = pl.DataFrame({"input_ids": [[5, 6, 7], [5, 6, 0]], "attention_mask": [[1, 1, 1], [1, 1, 0]],
                       "labels": [[5, 6, 7], [5, 6, -100]]})
    assert _propose(tmp_path / "lm", lm).layout == "causal_lm"


def test_raw_text_is_proposed_for_a_corpus_and_passes_it(tmp_path):
    """A corpus before tokenization (text and metadata, no label): ``raw_text``, the layout the audit
    recognizes (it was 'no built-in layout fits')."""
    df = pl.DataFrame({"text": ["The quick brown fox.", "Ein kurzer Satz.", "这是一个句子。"], "url": ["a", "b", "c"]})
    p = _propose(tmp_path, df)
    assert (p.layout, p.columns) == ("raw_text", {"text": ["text"]})
    assert p.rows is not None and p.rows.name == "raw_text"
    assert found(audit(tmp_path / "shard.parquet", "raw_text")) == []


@pytest.mark.parametrize("shard", [
    "megatron_gpt2_openwebtext/meg-gpt2-openwebtext_text_document.bin",  # unpadded documents, no mask
    "agnews_prompts_jsonl/ag_news_prompt_text_document.bin",
    "megatron_toy_duplicates/my-gpt2_text_document.bin",
    "dkhate_danish_offensive/dkhate_xlmr/train/data-00000-of-00001.arrow",  # padded with a mask
])
def test_a_proposed_built_in_contract_holds_the_data_it_was_proposed_from(shard):
    """The header of ``schema infer`` says "the built-in layout holds what every such dataset needs:
    [dataset] schema = ...": following it must not fail the data it came from. Megatron documents
    (token ids, no attention_mask: nothing is padded) were proposed ``causal_lm``, whose contract
    requires an attention_mask: schema.missing_column on every real Megatron shard."""
    path = SHARED / "realdata" / shard
    p = propose_layout([str(path)])
    if p.layout is not None:
        assert found(audit(str(path), p.layout, columns=p.columns)) == []
    else:
        assert p.rows is not None and p.rows.name == "causal_lm"  # the audit still judges them as causal-LM rows
        assert any("attention_mask" in n for n in p.notes)
