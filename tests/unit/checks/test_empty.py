"""empty.text / empty.sequence / empty.all_padding / empty.no_supervised_tokens."""
from __future__ import annotations

import polars as pl
import pytest
from checkhelp import audit_df, findings, one, skipped_reason
from hypothesis import given
from hypothesis import strategies as st
from refs import SHARD_SETTINGS as SETTINGS
from refs import int_lists, masks, rows_where, texts
from refs import n_rows as _rows
from refs import shard_failing as failing


@pytest.mark.parametrize(
    "texts, rows, empty, ws, null",
    [
        (["a", "", "  ", None, "b", "\t\n"], [1, 2, 3, 5], 1, 2, 1),
        (["x", "y"], [], 0, 0, 0),
        (["\u00a0", "\u3000 ", "ok"], [0, 1], 0, 2, 0),
        ([None, None], [0, 1], 0, 0, 2),
    ],
)
def test_empty_text_counts_whitespace_separately(tmp_path, texts, rows, empty, ws, null):
    rep = audit_df(tmp_path, pl.DataFrame({"text": texts}, schema={"text": pl.String}))
    got = findings(rep, "empty.text", "text")
    if not rows:
        assert got == []
        return
    (f,) = got
    assert (f.rows, f.count, f.severity) == (tuple(rows), len(rows), "error")
    assert f"{empty} empty, {ws} whitespace-only, {null} null" in f.message
    assert (f.details["empty"], f.details["whitespace_only"], f.details["null"]) == (empty, ws, null)


@pytest.mark.parametrize("blank", ["\u200b", "\u200b\u200b", "\ufeff", "\u00a0\u200b", "\u3000", "\u2060",
                                   "\u200c\u200d", " \u180e ", "\u2028\u2029", "\u0085"])
def test_empty_text_zero_width_and_unicode_whitespace(tmp_path, blank):
    """A text of only zero-width characters (U+200B..U+200D, U+2060, U+FEFF,
    U+180E) or Unicode whitespace is blank; a zero-width character inside real text is not."""
    rep = audit_df(tmp_path, pl.DataFrame({"text": ["ok", blank, "a\u200bb", "\ufeffhello"]}))
    f = one(rep, "empty.text", "text")
    assert f.rows == (1,)
    assert f.details["whitespace_only"] == 1


def test_empty_text_list_of_zero_width_strings(tmp_path):
    df = pl.DataFrame({"text": [["a", "\u200b"], ["\u200b", "\ufeff "], ["\u3000x"]]})
    rep = audit_df(tmp_path, df, {"columns": {"text": "text"}})
    assert one(rep, "empty.text", "text").rows == (1,)


def test_empty_text_every_text_column(tmp_path):
    df = {"sentence1": ["a", "", "c"], "sentence2": ["x", "y", " "]}
    rep = audit_df(tmp_path, df)
    assert one(rep, "empty.text", "sentence1").rows == (1,)
    assert one(rep, "empty.text", "sentence2").rows == (2,)


def test_empty_text_list_of_strings(tmp_path):
    df = pl.DataFrame({"text": [["a", ""], ["", " "], [], None, [None]]})
    rep = audit_df(tmp_path, df, {"columns": {"text": "text"}})
    assert one(rep, "empty.text", "text").rows == (1, 2, 3, 4)


def test_empty_text_non_string_column_is_skipped(tmp_path):
    rep = audit_df(tmp_path, {"text": [1, 2]}, {"columns": {"text": "text"}})
    assert findings(rep, "empty.text") == []
    assert "not a string" in skipped_reason(rep, "empty.text")


def test_empty_text_without_text_column_is_skipped(tmp_path):
    # tokenized classification rows: the token form of text_classification, empty.text does not apply
    rep = audit_df(tmp_path, {"input_ids": [[1, 2]], "label": [0]})
    assert rep.shards[0].layout == "text_classification"
    assert "empty.text" not in {s["check"] for s in rep.skipped}
    # rows of an unknown layout without a text column: a named skip
    rep = audit_df(tmp_path, {"x": [[1.5, 2.0]]})
    assert rep.shards[0].layout is None
    assert "no text column" in skipped_reason(rep, "empty.text")


def test_empty_text_does_not_apply_to_pretraining_rows(tmp_path):
    """Packed token rows have no text column to judge: not applicable, not listed as skipped."""
    rep = audit_df(tmp_path, {"input_ids": [[1, 2]]})
    assert rep.shards[0].layout == "packed_lm" and rep.shards[0].not_applicable > 0
    assert skipped_reason(rep, "empty.text") is None


@pytest.mark.parametrize(
    "ids, rows, nulls",
    [
        ([[1, 2], [], None, [0]], [1, 2], 1),
        ([[1], [2, 3]], [], 0),
        ([[], []], [0, 1], 0),
    ],
)
def test_empty_sequence(tmp_path, ids, rows, nulls):
    rep = audit_df(tmp_path, pl.DataFrame({"input_ids": ids}, schema={"input_ids": pl.List(pl.Int32)}))
    got = findings(rep, "empty.sequence", "input_ids")
    assert [f.rows for f in got] == ([tuple(rows)] if rows else [])
    if rows:
        assert f"({nulls} of them null)" in got[0].message


@pytest.mark.parametrize(
    "ids, mask, rows",
    [
        ([[5, 6], [5, 6], [7], [], [1]], [[0, 0], [1, 0], [0], [], [1]], [0, 2]),  # empty ids: empty.sequence only
        ([[5, 6]], [[True, False]], []),
        ([[5, 6], [1, 2]], [[False, False], [True, True]], [0]),
    ],
)
def test_all_padding_by_mask(tmp_path, ids, mask, rows):
    rep = audit_df(tmp_path, {"input_ids": ids, "attention_mask": mask})
    got = findings(rep, "empty.all_padding")
    assert [(f.rows, f.column) for f in got] == ([(tuple(rows), "attention_mask")] if rows else [])
    if rows:
        assert "all zero" in got[0].message


def test_all_padding_by_pad_id_without_mask(tmp_path):
    rep = audit_df(tmp_path, {"input_ids": [[0, 0], [1, 0], [0], []]}, {"tokens": {"pad_token_id": 0}})
    f = one(rep, "empty.all_padding", "input_ids")
    assert f.rows == (0, 2)
    assert "pad_token_id 0" in f.message


def test_all_padding_skipped_without_mask_or_pad(tmp_path):
    rep = audit_df(tmp_path, {"input_ids": [[0, 0]]})
    assert skipped_reason(rep, "empty.all_padding") == "no attention_mask column and no [tokens] pad_token_id"


@pytest.mark.parametrize(
    "labels, max_len, side, rows, only_trunc",
    [
        ([[-100, -100], [-100, 3], [], None, [5]], None, "right", [0, 2, 3], 0),
        # right truncation to 2 keeps the first two labels: row 1 loses its only supervised label
        ([[-100, -100, 7], [-100, -100, -100], [1, -100, -100]], 2, "right", [0, 1], 1),
        # left truncation keeps the last two
        ([[7, -100, -100], [-100, 1, -100], [-100, -100, 2]], 2, "left", [0], 1),
    ],
)
def test_no_supervised_tokens_after_truncation(tmp_path, labels, max_len, side, rows, only_trunc):
    tokens = {"truncation_side": side, **({"max_seq_len": max_len} if max_len else {})}
    df = pl.DataFrame({"labels": labels}, schema={"labels": pl.List(pl.Int64)})
    rep = audit_df(tmp_path, df, {"tokens": tokens})
    f = one(rep, "empty.no_supervised_tokens", "labels")
    assert (f.rows, f.count) == (tuple(rows), len(rows))
    if only_trunc:
        assert f"({only_trunc} of them only because truncation to max_seq_len {max_len} ({side}) cut the answer off" in f.message
    else:
        assert "because" not in f.message
    # "after truncation" is said of the rows truncation cut only (the parenthesis above), never of all
    nulls = sum(1 for r in rows if labels[r] is None)
    empties = sum(1 for r in rows if labels[r] == [])
    if not nulls and not empties:
        assert f.message.startswith(f"{len(rows)} row(s) have no supervised token: every label is ignore_index")
    else:  # null and empty labels are named as such, not as "every label is ignore_index"
        assert f.message.startswith(
            f"{len(rows)} row(s) have no supervised token, so the mean loss is 0/0 = NaN: "
            f"{len(rows) - nulls - empties} with every label ignore_index -100, {nulls} whose labels are null "
            f"(also labels.null), {empties} with an empty labels list")


NO_SUP_IDS = [[1, 2], [1, 2], [1, 2], [1, 2], [1, 2], [], [1, 2], [3, 4]]
NO_SUP_LABELS = [[-100, -100], None, [], [None, -100], [None, None], [], [1, 2], [-100, 4]]


@pytest.mark.parametrize("batch_rows", [None, 3])
def test_no_supervised_tokens_says_what_each_row_holds(tmp_path, monkeypatch, batch_rows):
    """Rows whose labels are null, hold nulls, or are an empty list beside tokens are named as such;
    only the others are said to hold ignore_index labels only (a row with neither tokens nor labels
    counts there, as empty.sequence reports it)."""
    if batch_rows:
        monkeypatch.setenv("DATACHECK_BATCH_ROWS", str(batch_rows))
    df = pl.DataFrame({"input_ids": NO_SUP_IDS, "labels": NO_SUP_LABELS},
                      schema={"input_ids": pl.List(pl.Int64), "labels": pl.List(pl.Int64)})
    rep = audit_df(tmp_path, df, {"labels": {"ignore_index": -100}})
    f = one(rep, "empty.no_supervised_tokens", "labels")
    failing = [r for r, lab in enumerate(NO_SUP_LABELS) if lab is None or all(x in (None, -100) for x in lab)]
    null_rows = [r for r in failing if NO_SUP_LABELS[r] is None]
    null_labels = [r for r in failing if NO_SUP_LABELS[r] and None in NO_SUP_LABELS[r]]
    empty_beside_tokens = [r for r in failing if NO_SUP_LABELS[r] == [] and NO_SUP_IDS[r]]
    ignore_only = len(failing) - len(null_rows) - len(null_labels) - len(empty_beside_tokens)
    assert (list(f.rows), f.count) == (failing, 6)
    assert f.details == {"only_after_truncation": 0, "null_rows": len(null_rows), "null_labels": len(null_labels),
                         "empty_labels": len(empty_beside_tokens)}
    assert f.message == (
        f"6 row(s) have no supervised token, so the mean loss is 0/0 = NaN: {ignore_only} with every label "
        f"ignore_index -100, {len(null_rows)} whose labels are null (also labels.null), {len(null_labels)} whose "
        f"labels are each null or ignore_index -100 (also labels.null), {len(empty_beside_tokens)} with an empty "
        "labels list beside 'input_ids' that hold tokens")
    # what the message says labels.null reports, it does
    assert set(one(rep, "labels.null", "labels").rows) == set(null_rows + null_labels)


def test_no_supervised_tokens_uses_configured_ignore_index(tmp_path):
    rep = audit_df(tmp_path, {"labels": [[-1, -1], [-100, -1]]}, {"labels": {"ignore_index": -1}})
    assert one(rep, "empty.no_supervised_tokens").rows == (0,)


def test_no_supervised_tokens_skipped_reasons(tmp_path):
    rep = audit_df(tmp_path, {"labels": [[1, 2]]}, {"labels": {"ignore_index": False}})
    assert skipped_reason(rep, "empty.no_supervised_tokens") == "[labels] ignore_index is unset"
    rep = audit_df(tmp_path, {"text": ["a"]}, {"dataset": {"layout": "sft_tokenized"}})
    assert "no token labels column" in skipped_reason(rep, "empty.no_supervised_tokens")


# ---------------------------------------------------------------- property tests against a plain-Python reference
ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff\u180e"


def ref_empty_text(s) -> bool:
    return s is None or all(ch.isspace() or ch in ZERO_WIDTH for ch in s)


def ref_empty_sequence(ids) -> bool:
    return ids is None or len(ids) == 0


def ref_all_padding_mask(ids, mask) -> bool:
    """Every (non-null) mask value is 0; a mask of nulls only is mask.non_binary, not all padding."""
    if ids is None or len(ids) == 0 or mask is None or len(mask) == 0:
        return False
    vals = [m for m in mask if m is not None]
    return bool(vals) and all(m == 0 for m in vals)


def ref_all_padding_ids(ids, pad: int) -> bool:
    if ids is None or len(ids) == 0:
        return False
    return not any(x is not None and x != pad for x in ids)


def truncate(seq: list, max_len: int | None, side: str) -> list:
    if max_len is None:
        return seq
    return seq[:max_len] if side == "right" else seq[max(0, len(seq) - max_len):]


def ref_no_supervised(labels, ign: int, max_len: int | None, side: str) -> bool:
    if labels is None:
        return True
    return not any(x is not None and x != ign for x in truncate(labels, max_len, side))


@SETTINGS
@given(data=st.data(), n=_rows(), side=st.sampled_from(["right", "left"]),
       max_len=st.one_of(st.none(), st.integers(1, 4)), with_mask=st.booleans())
def test_empty_matches_reference(data, n, side, max_len, with_mask):
    text = data.draw(st.lists(texts, min_size=n, max_size=n))
    ids = data.draw(st.lists(int_lists, min_size=n, max_size=n))
    mask = data.draw(st.lists(masks, min_size=n, max_size=n))
    labels = data.draw(st.lists(int_lists, min_size=n, max_size=n))
    cols = {"text": text, "input_ids": ids, "labels": labels}
    schema = {"text": pl.String, "input_ids": pl.List(pl.Int64), "labels": pl.List(pl.Int64)}
    if with_mask:
        cols["attention_mask"], schema["attention_mask"] = mask, pl.List(pl.Int64)
    df = pl.DataFrame(cols, schema=schema)
    tokens = {"pad_token_id": 0, "truncation_side": side}
    if max_len is not None:
        tokens["max_seq_len"] = max_len
    # the layout given: recognized from a few drawn rows it can be packed_lm (every non-null row's labels
    # the ids, one length), where a text column is not judged; these four rules apply to tokenized SFT rows
    got = failing(df, {"tokens": tokens, "dataset": {"layout": "sft_tokenized"}})
    assert got.get("empty.text:text", set()) == rows_where(text, ref_empty_text)
    assert got.get("empty.sequence:input_ids", set()) == rows_where(ids, ref_empty_sequence)
    if with_mask:
        want = {i for i in range(n) if ref_all_padding_mask(ids[i], mask[i])}
        assert got.get("empty.all_padding:attention_mask", set()) == want
    else:
        assert got.get("empty.all_padding:input_ids", set()) == rows_where(ids, lambda v: ref_all_padding_ids(v, 0))
    assert got.get("empty.no_supervised_tokens:labels", set()) == rows_where(
        labels, lambda v: ref_no_supervised(v, -100, max_len, side))
