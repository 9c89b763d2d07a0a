"""The shard layout (datacheck.derive.layout): given by [dataset] layout, by the built-in contract of
[dataset] schema (refined by the recognizer where the contract also holds finer rows), or recognized
from the columns and a sample of rows; unknown, with the reason and the key to set, when unsure. A
check outside the shard's layout does not apply there (counted, never a skipped entry); a shard of
unknown layout runs every check its roles allow."""
from __future__ import annotations

import shutil

import polars as pl
import pytest
from conftest import REALDATA

import datacheck
from datacheck.checks.registry import CHECKS, check
from datacheck.derive.layout import padding_side_of
from datacheck.engine.shard import audit_frame
from datacheck.model import catalog
from datacheck.model.config import config_from_dict
from datacheck.model.errors import ConfigError, InternalError
from datacheck.model.layouts import LAYOUT_NAMES, OPTIONAL_ROLES

IGN = -100


def _layout(df: dict | pl.DataFrame, cfg: dict | None = None) -> dict:
    return audit_frame(pl.DataFrame(df) if isinstance(df, dict) else df, config_from_dict(cfg or {})).layout


@pytest.mark.parametrize("frame, name", [
    ({"chosen": ["a"], "rejected": ["b"], "prompt": ["q"]}, "dpo"),
    ({"prompt": ["q", "q"], "completion": ["a", "b"], "label": [True, False]}, "kto"),
    # TRL's tokenized KTO rows (KTOTrainer's _tokenize: prompt and completion ids, masks, the boolean label)
    ({"prompt_input_ids": [[1, 2], [1, 2]], "prompt_attention_mask": [[1, 1], [1, 1]],
      "completion_input_ids": [[1, 2, 3], [1, 2, 4, 5]], "completion_attention_mask": [[1, 1, 1], [1, 1, 1, 1]],
      "label": [True, False]}, "kto"),
    ({"input_values": [[0.1, 0.2]], "labels": [[3, 4]]}, "ctc"),
    ({"messages": [[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]]}, "chat_sft"),
    # group_texts rows: one length, no padding, labels = ids
    ({"input_ids": [[5, 6, 7, 8]] * 2, "attention_mask": [[1] * 4] * 2, "labels": [[5, 6, 7, 8]] * 2}, "packed_lm"),
    # padded causal LM
    ({"input_ids": [[5, 6, 0, 0], [5, 6, 7, 8]], "attention_mask": [[1, 1, 0, 0], [1] * 4],
      "labels": [[5, 6, IGN, IGN], [5, 6, 7, 8]]}, "causal_lm"),
    # a prompt hidden from the loss
    ({"input_ids": [[1, 2, 3, 4]], "labels": [[IGN, IGN, 3, 4]]}, "sft_tokenized"),
    ({"input_ids": [[1, 2, 3, 4]], "labels": [[1, 2, 3, 4]], "assistant_mask": [[0, 0, 1, 1]]}, "sft_tokenized"),
    # position ids reset inside a row: packed; labels hiding more than each document's first token: packed SFT
    ({"input_ids": [[1, 2, 3, 4, 5]], "labels": [[IGN, 2, 3, IGN, 5]], "position_ids": [[0, 1, 2, 0, 1]]}, "packed_lm"),
    ({"input_ids": [[1, 2, 3, 4, 5]], "labels": [[IGN, IGN, 3, IGN, 5]], "position_ids": [[0, 1, 2, 0, 1]]},
     "packed_sft"),
    ({"input_ids": [[1, 2, 3]], "document_ids": [[0, 0, 1]]}, "packed_lm"),
    # labels of their own length: decoder targets
    ({"input_ids": [[1, 2, 3], [4, 5, 6, 7]], "labels": [[9, 1], [8, 8, 8, 8, 1]]}, "seq2seq"),
    ({"input_ids": [[1, 2]], "decoder_input_ids": [[0, 5]], "labels": [[5, 1]]}, "seq2seq"),
    # small class ids aligned with the pieces
    ({"input_ids": [[101, 2054, 2003, 102]] * 3, "labels": [[IGN, 1, 0, IGN], [IGN, 2, 0, IGN], [IGN, 0, 0, IGN]]},
     "token_classification"),
    ({"tokens": [["EU", "rejects"]], "ner_tags": [[3, 0]]}, "token_classification"),
    ({"input_ids": [[101, 7, 102]], "attention_mask": [[1, 1, 1]], "label": [1]}, "text_classification"),
    ({"text": ["good", "bad"], "label": [1, 0]}, "text_classification"),
    ({"text": ["good", "bad"], "score": [0.7, 0.1]}, "regression"),
    ({"f0": [0.1, 0.2], "f1": [1.0, 2.0], "label": [0, 1]}, "tabular"),
    ({"f0": [0.1, 0.2], "target": [1.5, 2.5]}, "regression"),
    # a corpus before tokenization: text and no label, with or without metadata (C4: url, timestamp)
    ({"text": ["The quick brown fox.", "Ein Satz."]}, "raw_text"),
    ({"text": ["a page", "another page"], "url": ["https://a.example", "https://b.example"],
      "timestamp": ["2019-04-25T12:57:54Z", "2019-04-26T01:02:03Z"]}, "raw_text"),
    ({"txt.gz": ["hello", "world"], "__key__": ["0001", "0002"]}, "raw_text"),  # a WebDataset text sample
])
def test_recognized(frame, name):
    got = _layout(frame)
    assert (got["name"], got["source"]) == (name, "recognized"), got
    assert got["why"]


def test_unsure_says_so_and_asks_for_the_key():
    # labels equal to the ids where the lengths agree, and of another length elsewhere: a length defect or seq2seq?
    got = _layout({"input_ids": [[1, 2, 3], [4, 5, 6]], "labels": [[1, 2, 3], [4, 5]]})
    assert got["name"] is None and got["source"] == "unknown"
    assert got["why"].startswith("unsure:") and "set [dataset] layout" in got["why"]
    got = _layout({"a": ["x"], "b": [[1.5]]})
    assert got["name"] is None and "no layout fits the columns a (String)" in got["why"]


def test_given_layouts_and_refinement():
    rows = {"input_ids": [[1, 2, 3, 4]], "labels": [[IGN, IGN, 3, 4]]}
    assert _layout(rows, {"dataset": {"layout": "causal_lm"}}) == {
        "name": "causal_lm", "source": "config", "why": '[dataset] layout = "causal_lm"'}
    got = _layout(rows, {"dataset": {"schema": "seq2seq"}})
    assert (got["name"], got["source"]) == ("seq2seq", "schema")
    # the causal_lm contract also holds SFT rows: the recognizer refines it
    got = _layout(rows, {"dataset": {"schema": "causal_lm"}})
    assert (got["name"], got["source"]) == ("sft_tokenized", "recognized") and 'schema = "causal_lm"' in got["why"]
    with pytest.raises(ConfigError, match="unknown layout 'pretraining'"):
        config_from_dict({"dataset": {"layout": "pretraining"}})


def test_not_applicable_checks_are_counted_not_skipped():
    rows = pl.DataFrame({"input_ids": [[5, 6, 7, 8]] * 3, "labels": [[5, 6, 7, 8]] * 3})
    res = audit_frame(rows, config_from_dict({"tokens": {"max_seq_len": 4, "eos_token_id": 2}}))
    assert res.layout["name"] == "packed_lm"
    # not applicable: outside the layout, or needing a role packed rows hold in another form only
    # (OPTIONAL_ROLES: a class label, a text, token type ids) that these rows lack
    have = set(rows.columns)

    def other_form(spec) -> bool:
        return any(all(n in OPTIONAL_ROLES["packed_lm"] and n not in have for n in r.split("|")) for r in spec.roles)
    expected = [cid for cid, spec in CHECKS.items()
                if spec.shard is not None and (not spec.applies("packed_lm") or other_form(spec))]
    assert res.not_applicable == expected and "sft.truncated_response" in expected
    assert "tokens.type_id_out_of_range" in expected and "tokens.out_of_vocab" not in expected
    assert not {s.check for s in res.skipped} & set(expected)


def test_an_unknown_layout_runs_every_check_the_roles_allow():
    """No gate passes by accident: the response rule still judges rows of a shard of unknown layout."""
    df = pl.DataFrame({"input_ids": [[1, 2, 3], [4, 5, 6]], "labels": [[1, 2, 3], [4, 5]], "attention_mask": [[1] * 3] * 2})
    res = audit_frame(df, config_from_dict({"tokens": {"max_seq_len": 3, "eos_token_id": 2}}))
    assert res.layout["name"] is None and res.not_applicable == []
    assert {f.check for f in res.findings} >= {"length.mismatch", "sft.truncated_response"}


def test_raw_text_runs_the_text_checks_and_asks_for_no_token_or_label_fact():
    """A web-text corpus (only ``text``) was ``unknown``: every token and label check was listed as
    skipped for a missing input_ids / labels / attention_mask column. As ``raw_text`` the text and row
    checks judge it (an empty text and a repeated row are found at their rows) and nothing that needs
    tokens or labels is said to be missing."""
    texts = ["The quick brown fox jumps over the lazy dog.", "  ", "Ein kurzer Satz über Bäume.",
             "The quick brown fox jumps over the lazy dog.", "这是一个中文句子。"]
    res = audit_frame(pl.DataFrame({"text": texts}), config_from_dict({"batch": {"batch_size": 2}}))
    assert res.layout["name"] == "raw_text"
    empty = [i for i, t in enumerate(texts) if not t.strip()]
    repeats = [i for i, t in enumerate(texts) if t in texts[:i]]
    got = {f.check: list(f.rows) for f in res.findings}
    assert got == {"empty.text": empty, "dup.exact_in_shard": repeats}
    token_roles = ("input_ids", "attention_mask", "labels", "label", "token_type_ids", "position_ids", "list column")
    assert [s for s in res.skipped if any(r in s.reason for r in token_roles)] == []
    assert {"tokens.out_of_vocab", "labels.null", "labels.out_of_range", "length.mismatch",
            "empty.no_supervised_tokens"} <= set(res.not_applicable)


def test_every_check_declares_known_layouts():
    for cid, spec in CHECKS.items():
        assert spec.layouts and spec.layouts <= set(LAYOUT_NAMES), cid
    unbuilt = next(c for c in catalog.CATALOG if c not in CHECKS and not c.startswith(("decode.", "log.")))
    with pytest.raises(InternalError, match="declares no layouts"):
        check(unbuilt)(lambda ctx: ())  # a first registration must say where it applies
    assert unbuilt not in CHECKS


@pytest.mark.parametrize("frame, cfg", [
    ({"text": ["a", "b"], "a": [[1]] * 2, "b": [[1], [1, 2]]}, {"columns": {"aligned": [["a", "b"]]}}),
    ({"text": ["a", "b"], "x": [0.5, 1.5]}, {"columns": {"features": ["x"]}}),
    ({"text": ["a", "b"], "input_ids": [["a"], ["b"]]}, {}),  # an input_ids role of the wrong type
    ({"text": ["a", "b"], "label_name": [0, 1]}, {}),  # a label the roles do not read (not a class name)
    ({"text": ["a", "b"], "coarse_label": [0, 1]}, {}),
])
def test_text_with_another_role_is_never_raw_text(frame, cfg):
    """Only text and metadata make a corpus before tokenization: a role the checks judge (aligned
    lists, features, token ids of the wrong type) keeps its checks applicable."""
    assert _layout(frame, cfg)["name"] != "raw_text"


def test_real_emotion_label_name_is_its_class_label(tmp_path):
    """dair-ai emotion (PROVENANCE.md: ``text;label_name``, 6 classes): a string ``label_name`` with
    no ``label``/``labels`` column is the class label (a class name): text classification, with no
    [columns]; it was unknown and its labels unchecked."""
    src = REALDATA / "emotion" / "val.txt"
    if not src.is_file():
        pytest.skip("../shared/realdata is not present")
    shutil.copy(src, tmp_path / "val.csv")
    rep = datacheck.audit([str(tmp_path / "val.csv")], config={"dataset": {"separator": ";"}})
    assert rep.shards[0].rows == 2000 and rep.shards[0].layout == "text_classification"
    assert rep.roles["label"]["columns"] == "label_name"


@pytest.mark.parametrize("frame, label", [
    # SetFit: an integer label and its name beside it: the integer is the label, the name no second one
    ({"text": ["a", "b"], "label": [0, 1], "label_text": ["neg", "pos"]}, "label"),
    ({"text": ["a", "b"], "label_text": ["neg", "pos"]}, "label_text"),
    ({"text": ["a", "b"], "label_name": [0, 1]}, None),  # a number under a name's name: not guessed
    ({"text": ["a", "b"], "label_name": ["x", "y"], "label_text": ["x", "y"]}, None),  # two: which one?
    ({"text": ["a", "b"], "coarse_label": [0, 1]}, None),  # TREC: one of two label columns, not guessed
])
def test_only_a_lone_class_name_column_is_read_as_the_label(frame, label):
    got = audit_frame(pl.DataFrame(frame), config_from_dict({}))
    assert (got.roles["label"]["columns"] if "label" in got.roles else None) == label


def test_padding_side_counts_only_rows_padded_on_one_side():
    """``padding_side_of``: a row starting and ending with a 0 (all padding, or a hole at the far end)
    votes for no side; rows padded on one side only decide, and both sides seen is unknown."""
    left, right = [0, 0, 1, 1], [1, 1, 0, 0]
    for odd in ([0, 0, 0, 0], [0, 1, 1, 0], [], None):
        assert padding_side_of(pl.DataFrame({"m": [left, odd, left]}), "m") == ("left", 2, 0)
        assert padding_side_of(pl.DataFrame({"m": [right, odd]}), "m") == ("right", 0, 1)
    assert padding_side_of(pl.DataFrame({"m": [left, right]}), "m") == (None, 1, 1)
    assert padding_side_of(pl.DataFrame({"m": [[1, 1], [0, 0]]}), "m") == (None, 0, 0)
    bools = pl.DataFrame({"m": [[False, True], [False, False]]})
    assert padding_side_of(bools, "m") == ("left", 1, 0)
