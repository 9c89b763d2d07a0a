"""mask.non_binary / mask.not_contiguous; the padding rules on the same mask reading (skips without a
mask, a frame that made polars panic, the property test of mask and padding against a reference)."""
from __future__ import annotations

from itertools import product

import polars as pl
import pytest
from checkhelp import audit_df, findings, one, shard_result, skipped_reason
from hypothesis import given
from hypothesis import strategies as st
from refs import SHARD_SETTINGS as SETTINGS
from refs import int_lists, rows_where
from refs import n_rows as _rows
from refs import shard_failing as failing

from datacheck.derive.layout import SAMPLE_ROWS


@pytest.mark.parametrize(
    "mask, dtype, rows",
    [
        ([[1, 1, 0], [1, 2, 0], [-1, 1], [], None, [0, 0]], pl.Int64, [1, 2]),
        ([[1, 0], [3, 1]], pl.UInt8, [1]),
        ([[1.0, 0.0], [0.5, 1.0]], pl.Float32, [1]),
    ],
)
def test_non_binary(tmp_path, mask, dtype, rows):
    df = pl.DataFrame({"attention_mask": mask}, schema={"attention_mask": pl.List(dtype)})
    rep = audit_df(tmp_path, df)
    f = one(rep, "mask.non_binary", "attention_mask")
    assert (f.rows, f.count, f.severity) == (tuple(rows), len(rows), "error")


def test_non_binary_example_gives_first_bad_position(tmp_path):
    rep = audit_df(tmp_path, {"attention_mask": [[1, 1, 1, 2, 0]]})
    assert one(rep, "mask.non_binary").examples[0].value == "'first at position 3 of 5: 2'"


@pytest.mark.parametrize(
    "side, mask, rows",
    [
        ("right", [[1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 1, 0], [1, 1, 1], [0, 0], [1, 2, 0, 1]], [1, 2]),
        ("left", [[1, 1, 0, 0], [0, 0, 1, 1], [0, 1, 0, 1], [1, 1, 1], [0, 0], []], [0, 2]),
    ],
)
def test_not_contiguous_against_padding_side(tmp_path, side, mask, rows):
    rep = audit_df(tmp_path, {"attention_mask": mask}, {"tokens": {"padding_side": side}})
    f = one(rep, "mask.not_contiguous", "attention_mask")
    assert f.rows == tuple(rows)
    assert f"padding_side={side}" in f.message


def test_boolean_mask(tmp_path):
    rep = audit_df(tmp_path, {"attention_mask": [[True, False], [False, True]]})
    assert findings(rep, "mask.non_binary") == []
    assert one(rep, "mask.not_contiguous").rows == (1,)




def test_mask_checks_skipped_without_mask(tmp_path):
    rep = audit_df(tmp_path, {"input_ids": [[1]]})
    for cid in ("mask.non_binary", "mask.not_contiguous", "padding.token_not_pad"):
        assert skipped_reason(rep, cid) == "no attention_mask column (set [columns] attention_mask)"
    # language-model rows without labels (the collator makes them, -100 at the padding): the padding
    # rule of labels does not apply
    assert rep.shards[0].layout in ("packed_lm", "causal_lm")
    assert skipped_reason(rep, "padding.label_not_ignored") is None
    rep = audit_df(tmp_path, {"input_ids": [[1]], "labels": [[1]]})
    assert skipped_reason(rep, "padding.label_not_ignored") == "no attention_mask column (set [columns] attention_mask)"



def test_fused_query_engine_panic_is_isolated(tmp_path):
    """This frame made polars panic (``PanicException``, a BaseException) inside the fused query over
    the parquet scan; the runner must isolate it and still give every check's exact rows."""
    df = pl.DataFrame(
        [{"input_ids": [0, 1], "attention_mask": [0, 1], "labels": [0, 0]},
         {"input_ids": [None, 3, None, 3, 0], "attention_mask": [1, 0, 0, 1, 1], "labels": [0, -1, None, -1, 0]},
         {"input_ids": None, "attention_mask": None, "labels": None}],
        schema={"input_ids": pl.List(pl.Int64), "attention_mask": pl.List(pl.Int64), "labels": pl.List(pl.Int64)})
    # padding_side set: unset, row 0 (the only padded first or last position) would make the shard left-padded
    res = shard_result(tmp_path, df, {"tokens": {"pad_token_id": 0, "padding_side": "right"}, "labels": {"ignore_index": -1}})
    assert res.rows == 3
    assert res.failing_rows["mask.not_contiguous:attention_mask"] == [0, 1]
    assert res.failing_rows["padding.token_not_pad:input_ids"] == [1]
    assert res.failing_rows["empty.sequence:input_ids"] == [2]
    assert res.failing_rows["padding.label_not_ignored:labels"] == [0]


# ---------------------------------------------------------------- property tests against a plain-Python reference
def ref_non_binary(mask) -> bool:
    """A value other than 0 or 1; a null element is neither."""
    return mask is not None and any(m is None or m not in (0, 1) for m in mask)


def ref_not_contiguous(mask, side: str) -> bool:
    """Binary masks only: right padding fails on a 1 after a 0; left padding on a 0 after a 1."""
    if mask is None or len(mask) == 0 or ref_non_binary(mask):
        return False
    before, after = (0, 1) if side == "right" else (1, 0)
    return any(mask[i] == before and mask[j] == after for i in range(len(mask)) for j in range(i + 1, len(mask)))


def ref_masked_positions_differ(values, mask, expected: int) -> bool:
    """A position with mask 0 holds a value other than ``expected`` (aligned, binary masks only)."""
    if values is None or mask is None or len(values) != len(mask) or ref_non_binary(mask):
        return False
    return any(m == 0 and v is not None and v != expected for v, m in zip(values, mask))


binary_masks = st.one_of(st.none(), st.lists(st.sampled_from([0, 1]), max_size=6))


@SETTINGS
@given(data=st.data(), n=_rows(), side=st.sampled_from(["right", "left"]), ign=st.sampled_from([-100, -1]),
       pad=st.sampled_from([0, 1]), mask_dtype=st.sampled_from([pl.Int64, pl.Int8, pl.UInt8, pl.Boolean, pl.Float32]))
def test_mask_and_padding_match_reference(data, n, side, ign, pad, mask_dtype):
    mask_elems = st.sampled_from({pl.UInt8: [0, 1, 2, None], pl.Boolean: [0, 1, None],
                                  pl.Float32: [0, 1, 0.5, 2, None]}.get(mask_dtype, [0, 1, 2, -1, None]))
    # mostly aligned binary masks (so the padding checks see real work), some non-binary, some null
    mask = data.draw(st.lists(st.one_of(binary_masks, st.lists(mask_elems, max_size=6)), min_size=n, max_size=n))
    ids = [None if m is None else data.draw(st.lists(st.one_of(st.none(), st.integers(0, 3)), min_size=len(m),
                                                     max_size=len(m))) for m in mask]
    ids = [data.draw(int_lists) if data.draw(st.integers(0, 5)) == 0 else x for x in ids]
    labels = [None if m is None else data.draw(st.lists(st.sampled_from([ign, ign, 0, 5, None]), min_size=len(m),
                                                        max_size=len(m))) for m in mask]
    stored = [None if m is None else [bool(x) if mask_dtype == pl.Boolean and x is not None else x for x in m]
              for m in mask]
    df = pl.DataFrame({"input_ids": ids, "attention_mask": stored, "labels": labels},
                      schema={"input_ids": pl.List(pl.Int64), "attention_mask": pl.List(mask_dtype),
                              "labels": pl.List(pl.Int64)})
    # the rules on any rows of the layout they apply to (the recognizer's verdict on random rows is not tested here)
    got = failing(df, {"tokens": {"pad_token_id": pad, "padding_side": side}, "labels": {"ignore_index": ign},
                       "dataset": {"layout": "causal_lm"}})
    assert got.get("mask.non_binary:attention_mask", set()) == rows_where(mask, ref_non_binary)
    assert got.get("mask.not_contiguous:attention_mask", set()) == rows_where(mask, lambda m: ref_not_contiguous(m, side))
    # position-wise checks look only at rows whose input_ids, attention_mask and labels align
    aligned = [ids[i] is not None and labels[i] is not None and mask[i] is not None
               and len(ids[i]) == len(mask[i]) == len(labels[i]) for i in range(n)]
    assert got.get("padding.token_not_pad:input_ids", set()) == {
        i for i in range(n) if aligned[i] and ref_masked_positions_differ(ids[i], mask[i], pad)}
    assert got.get("padding.label_not_ignored:labels", set()) == {
        i for i in range(n) if aligned[i] and ref_masked_positions_differ(labels[i], mask[i], ign)}
    binary = [mask[i] is not None and not ref_non_binary(mask[i]) for i in range(n)]
    assert got.get("padding.pad_attended:input_ids", set()) == {
        i for i in range(n) if aligned[i] and binary[i]
        and any(m == 1 and v == pad for v, m in zip(ids[i], mask[i]))}


def test_a_boolean_mask_audited_first_does_not_change_an_integer_mask_s_rows():
    """The shared pass over the positions is registered once per process by its key: a shard whose
    mask is boolean (binary when it has no null) audited before one whose integer mask holds a 2 gave
    that row padding.token_not_pad (its non-binary row taken as binary); each mask's own rule now."""
    cfg = {"tokens": {"pad_token_id": 1, "padding_side": "right"}, "labels": {"ignore_index": -1},
           "dataset": {"layout": "causal_lm"}}

    def frame(dtype, mask):
        return pl.DataFrame({"input_ids": [[5, 0, 7]], "attention_mask": [mask], "labels": [[-1, -1, -1]]},
                            schema={"input_ids": pl.List(pl.Int64), "attention_mask": pl.List(dtype),
                                    "labels": pl.List(pl.Int64)})

    assert "padding.token_not_pad:input_ids" not in failing(frame(pl.Boolean, [True, True, True]), cfg)
    got = failing(frame(pl.Int64, [1, 0, 2]), cfg)
    assert got["mask.non_binary:attention_mask"] == {0}  # a 2: the row is left out of the padding rules
    assert "padding.token_not_pad:input_ids" not in got


def _side_ref(mask: list[int], side: str) -> bool:
    """Plain-Python reference: the binary mask's 1s are one block against ``side`` (right: no 1
    after a 0; left: no 0 after a 1)."""
    before, after = (0, 1) if side == "right" else (1, 0)
    return not any(mask[k] == after and before in mask[:k] for k in range(1, len(mask)))


@pytest.mark.parametrize("masks", [
    # left-padded rows (as SmolLM2's tokenizer pads), one with a hole
    [[0, 0, 1, 1, 1], [0, 1, 1, 1, 1], [1, 1, 1, 1, 1], [0, 0, 1, 0, 1], [0, 0, 0, 1, 1]],
    # right-padded rows, one with a hole, one padded on the left
    [[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 1, 0], [0, 1, 1, 1]],
    # no padded row: nothing to recognize, nothing fails
    [[1, 1], [1, 1, 1]],
])
def test_not_contiguous_without_padding_side_follows_the_side_the_rows_are_padded_on(tmp_path, masks):
    """``[tokens] padding_side`` unset: the side is the one the shard's rows are padded on (a left-
    padded shard is not 'padding on the other side' on every row); a hole is still a hole."""
    padded_left = sum(m[0] == 0 for m in masks)
    padded_right = sum(m[-1] == 0 for m in masks)
    side = "left" if padded_left and not padded_right else "right"
    want = tuple(i for i, m in enumerate(masks) if not _side_ref(m, side))
    rep = audit_df(tmp_path, {"attention_mask": masks})
    got = findings(rep, "mask.not_contiguous")
    assert (got[0].rows if got else ()) == want
    if want:
        assert f"padding_side={side}" in got[0].message


@pytest.mark.parametrize("with_ids", [False, True])  # the list kernels, and the shared pass over the flat buffers
def test_not_contiguous_when_the_first_rows_are_unpadded_judges_each_row_on_its_own_side(tmp_path, with_ids):
    """``[tokens] padding_side`` unset and none of the first SAMPLE_ROWS rows padded (a shard sorted by
    length, or whose full-length rows come first): nothing tells the side. It was taken as right, and
    every later left-padded row was ``mask.not_contiguous``. Now a row fails only when its 1s are one
    block at neither end. Every binary mask of length 1..6 after 1,000 unpadded rows."""
    head = [[1] * 6 for _ in range(SAMPLE_ROWS)]
    tail = [list(m) for k in range(1, 7) for m in product([0, 1], repeat=k)]
    masks = head + tail
    want = tuple(SAMPLE_ROWS + i for i, m in enumerate(tail) if not (_side_ref(m, "left") or _side_ref(m, "right")))
    assert want and SAMPLE_ROWS + tail.index([0, 0, 1, 1]) not in want  # left-padded rows pass; holes fail
    cols = {"attention_mask": masks}
    if with_ids:
        cols |= {"input_ids": [[7] * len(m) for m in masks], "labels": [[7 if x else -100 for x in m] for m in masks]}
    got = findings(audit_df(tmp_path, cols), "mask.not_contiguous")
    assert got and got[0].count == len(want) and got[0].rows == want[:len(got[0].rows)]
    assert "one block at neither end" in got[0].message and "not recognized" in got[0].message
