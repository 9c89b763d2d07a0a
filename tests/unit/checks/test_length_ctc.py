"""length.ctc_infeasible of datacheck.checks.length (against a plain-Python reference, together with
tokens.position_out_of_range)."""
from __future__ import annotations

import polars as pl
from hypothesis import given
from hypothesis import strategies as st
from refs import FRAME_SETTINGS as SETTINGS
from refs import IGN, rows, run
from refs import frame_failing as failing


def test_ctc_infeasible_counts_repeats():
    # 4 frames, downsample 2 -> 2 steps; labels [5, 5] need 3 (a blank between the repeats)
    df = pl.DataFrame({"input_lengths": [4, 6, 4], "labels": [[5, 5, IGN], [5, 5], [5, 6]]})
    res = run(df, {"labels": {"ctc_downsample": 2}})
    assert rows(res, "length.ctc_infeasible:labels") == [0]


def test_ctc_with_uint64_lengths_and_labels_beyond_int64_is_judged():
    """uint64 input_lengths and labels holding uint64 -1: a row with 2**64 - 1 frames is feasible,
    a row whose 2 frames cannot emit 2 labels is not (a strict cast to Int64 raised: a check error)."""
    u = 2**64 - 1
    df = pl.DataFrame({"input_lengths": [u, 1, 8], "labels": [[1, 2], [u, 1], [u, 1]]},
                      schema={"input_lengths": pl.UInt64, "labels": pl.List(pl.UInt64)})
    res = run(df, {"dataset": {"layout": "ctc"}})
    assert not res.check_errors, res.check_errors
    assert rows(res, "length.ctc_infeasible:labels") == [1]


@SETTINGS
@given(rows=st.lists(st.tuples(st.integers(0, 12), st.lists(st.integers(-1, 4), max_size=6)), min_size=1, max_size=8),
       ds=st.integers(1, 3), kmax=st.integers(1, 6))
def test_ctc_and_positions_match_reference(rows, ds, kmax):
    labels = [[IGN if x == -1 else x for x in lab] for _, lab in rows]
    pos = [list(range(len(lab))) for lab in labels]
    df = pl.DataFrame({"input_lengths": [r[0] for r in rows], "labels": labels, "position_ids": pos},
                      schema={"input_lengths": pl.Int64, "labels": pl.List(pl.Int64), "position_ids": pl.List(pl.Int64)})
    got = failing(df, {"labels": {"ctc_downsample": ds}, "tokens": {"max_position_embeddings": kmax}})

    def need(lab):
        kept = [x for x in lab if x != IGN]
        return len(kept) + sum(kept[j] == kept[j - 1] for j in range(1, len(kept)))
    assert got.get("length.ctc_infeasible:labels", set()) == {
        i for i, (n, _) in enumerate(rows) if n // ds < need(labels[i])}
    assert got.get("tokens.position_out_of_range:position_ids", set()) == {
        i for i, p in enumerate(pos) if p and max(p) >= kmax}
