"""packing.boundary_mismatch / packing.position_ids_not_reset / packing.cross_document_label on inline
frames and against plain-Python references, and the packing efficiency stat."""
from __future__ import annotations

import polars as pl
from hypothesis import given
from hypothesis import strategies as st
from refs import EOT, IGN, STOP, rows, run, skip
from refs import FRAME_SETTINGS as SETTINGS
from refs import frame_failing as failing


def test_packing_boundaries_seq_lens_and_cu_seqlens():
    df = pl.DataFrame({"input_ids": [[5] * 5, [5] * 5], "seq_lens": [[2, 3], [2, 2]],
                       "cu_seqlens": [[0, 2, 5], [0, 3, 2]]})
    res = run(df)
    assert rows(res, "packing.boundary_mismatch:seq_lens") == [1]
    assert rows(res, "packing.boundary_mismatch:cu_seqlens") == [1]
    # rows packed by group_texts carry no delimiters: the check does not apply to that form of packed_lm
    res = run(pl.DataFrame({"input_ids": [[5]]}))
    assert res.layout["name"] == "packed_lm" and "packing.boundary_mismatch" in res.not_applicable
    assert skip(res, "packing.boundary_mismatch") is None


def test_position_ids_not_reset_negative_ids_and_no_wrap_with_seq_lens():
    """seq_lens path (list kernels on the ids' own dtype): a negative id fails its row even when the
    count of +1 steps happens to match ([0, -1, 0, 1]: the start step -1 -> 0 is +1), and Int32 ids
    whose difference wraps (MAX -> MIN is a +1 step in Int32 arithmetic) are not taken as a step."""
    i32 = 2**31
    df = pl.DataFrame({"position_ids": [[0, 1, 0, 1], [0, -1, 0, 1], [0, i32 - 1, -i32, 0]],
                       "seq_lens": [[2, 2], [2, 2], [3, 1]]},
                      schema={"position_ids": pl.List(pl.Int32), "seq_lens": pl.List(pl.Int32)})
    assert rows(run(df), "packing.position_ids_not_reset:position_ids") == [1, 2]
    u64 = df.with_columns(pl.Series("position_ids", [[0, 1, 0, 1], [0, 1, 0, 2], [0, 1, 2**40, 0]],
                                    dtype=pl.List(pl.UInt64)))
    assert rows(run(u64), "packing.position_ids_not_reset:position_ids") == [1, 2]


def test_packing_efficiency_stat():
    df = pl.DataFrame({"input_ids": [[5, 5, 5, 0], [5, 5, 5, 5]], "attention_mask": [[1, 1, 1, 0], [1, 1, 1, 1]],
                       "document_ids": [[0, 0, 1, 1], [0, 1, 2, 3]]})
    st = run(df).stats
    assert st["packing"] == {"documents": 6, "slots": 8, "real_tokens": 7, "efficiency": 7 / 8}


@st.composite
def packed_rows(draw):
    n = draw(st.integers(1, 8))
    rows = []
    for _ in range(n):
        docs = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
        pos, did, lab = [], [], []
        for d, ln in enumerate(docs):
            pos += list(range(ln))
            did += [d] * ln
            lab += [draw(st.sampled_from([IGN, 5, EOT])) for _ in range(ln)]
        if draw(st.booleans()):  # corrupt a position id
            k = draw(st.integers(0, len(pos) - 1))
            pos[k] = draw(st.integers(-2, 5))  # negative ids too: a document counts up from 0
        if draw(st.booleans()):  # corrupt a document id
            k = draw(st.integers(0, len(did) - 1))
            did[k] = draw(st.integers(0, 4))
        ids = [draw(st.sampled_from([5, 6, 7])) for _ in pos]
        rows.append((ids, lab, pos, did, docs))
    return rows


def ref_starts_docids(did):
    return [k for k in range(len(did)) if k == 0 or did[k] != did[k - 1]]


def ref_pos_not_reset(pos, starts) -> bool:
    return any((pos[k] != 0) if k in starts else (pos[k] != pos[k - 1] + 1) for k in range(len(pos)))


def ref_cross(lab, starts, shifted) -> bool:
    later = [s for s in starts if s > 0]
    if not shifted:
        return any(lab[s] != IGN for s in later)
    return any(lab[s - 1] != IGN and lab[s - 1] not in STOP for s in later)


@SETTINGS
@given(rows=packed_rows(), shifted=st.booleans(), how=st.sampled_from(["document_ids", "seq_lens", "cu_seqlens",
                                                                         "position_ids"]),
       pos_dtype=st.sampled_from([pl.Int64, pl.Int32, pl.Int8]))
def test_packing_rules_match_reference(rows, shifted, how, pos_dtype):
    """Position ids in their own signed dtype too (the seq_lens/cu_seqlens path compares them without a cast)."""
    cols = {"input_ids": [r[0] for r in rows], "labels": [r[1] for r in rows], "position_ids": [r[2] for r in rows]}
    if how == "document_ids":
        cols["document_ids"] = [r[3] for r in rows]
    elif how == "seq_lens":
        cols["seq_lens"] = [r[4] for r in rows]
    elif how == "cu_seqlens":
        cols["cu_seqlens"] = [[sum(r[4][:j]) for j in range(len(r[4]) + 1)] for r in rows]
    df = pl.DataFrame(cols, schema={c: pl.List(pos_dtype if c == "position_ids" else pl.Int64) for c in cols})
    got = failing(df, {"labels": {"shifted": shifted}, "tokens": {"eot_token_ids": [EOT]}})
    want_pos, want_cross, want_bound = set(), set(), set()
    for i, (ids, lab, pos, did, docs) in enumerate(rows):
        if how == "document_ids":
            starts = ref_starts_docids(did)
            runs = len(starts)
            if len(set(did)) != runs:
                want_bound.add(i)
        elif how == "position_ids":
            starts = [k for k in range(len(pos)) if k == 0 or pos[k] == 0]
        else:
            starts = [sum(docs[:j]) for j in range(len(docs))]
        if ref_pos_not_reset(pos, starts):
            want_pos.add(i)
        if ref_cross(lab, starts, shifted):
            want_cross.add(i)
    assert got.get("packing.position_ids_not_reset:position_ids", set()) == want_pos
    assert got.get("packing.cross_document_label:labels", set()) == want_cross
    bound = set().union(*[v for k, v in got.items() if k.startswith("packing.boundary_mismatch")])
    assert bound == want_bound


def test_seq_lens_that_wrap_or_go_negative_are_boundary_mismatches():
    """seq_lens whose sum equals the row length only by wrapping around (uint64: [2**64 - 1, 5] sums
    to 4; Int64: [2**63 - 1, 2**63 - 1, 6] sums to 4) or by a negative length ([-2, 6]) do not
    describe the row's documents."""
    u = 2**64 - 1
    df = pl.DataFrame({"input_ids": [[5] * 4] * 3, "seq_lens": [[2, 2], [u, 5], [1, 3]]},
                      schema={"input_ids": pl.List(pl.Int64), "seq_lens": pl.List(pl.UInt64)})
    assert rows(run(df), "packing.boundary_mismatch:seq_lens") == [1]
    big = 2**63 - 1
    df = pl.DataFrame({"input_ids": [[5] * 4] * 3, "seq_lens": [[-2, 6], [big, big, 6], [4]]},
                      schema={"input_ids": pl.List(pl.Int64), "seq_lens": pl.List(pl.Int64)})
    assert rows(run(df), "packing.boundary_mismatch:seq_lens") == [0, 1]


def test_uint64_values_beyond_int64_are_judged_not_check_errors():
    """Unsigned 64-bit seq_lens, cu_seqlens, position ids and labels holding values beyond Int64
    (uint64 -1): the packing rules judge the rows (a strict cast to Int64 raised: a check error)."""
    u = 2**64 - 1
    lst = pl.List(pl.UInt64)
    for bounds, col in (([[2, 2], [u, 1]], "seq_lens"), ([[0, 2, 4], [0, u, 4]], "cu_seqlens")):
        df = pl.DataFrame({"input_ids": [[1, 2, 3, 4]] * 2, "labels": [[1, 2, 3, 4], [1, u, 3, 4]],
                           "position_ids": [[0, 1, 0, 1], [0, u, 2, 3]], col: bounds},
                          schema={"input_ids": lst, "labels": lst, "position_ids": lst, col: lst})
        res = run(df, {"labels": {"ignore_index": -100}})
        assert not res.check_errors, res.check_errors
        assert rows(res, f"packing.boundary_mismatch:{col}") == [1]
        assert rows(res, "packing.position_ids_not_reset:position_ids") == [1]
