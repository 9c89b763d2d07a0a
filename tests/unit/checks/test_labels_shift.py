"""labels.shift_mismatch of datacheck.checks.labels against a plain-Python reference, for both label
conventions."""
from __future__ import annotations

import polars as pl
from hypothesis import given
from hypothesis import strategies as st
from refs import FRAME_SETTINGS as SETTINGS
from refs import IGN
from refs import frame_failing as failing


def ref_shift(ids, lab, shifted) -> bool:
    sup = [i for i in range(len(lab)) if lab[i] is not None and lab[i] != IGN]
    nxt = [i for i in sup if i + 1 < len(ids)]
    if not sup:
        return False
    same = sum(lab[i] == ids[i] for i in sup) / len(sup)
    nx = sum(lab[i] == ids[i + 1] for i in nxt) / len(nxt) if nxt else None
    if nx is None:
        return False
    return (nx >= 0.9 and same < 0.9) if not shifted else (same >= 0.9 and nx < 0.9)


@st.composite
def shift_rows(draw):
    n = draw(st.integers(1, 8))
    rows = []
    for _ in range(n):
        ids = draw(st.lists(st.integers(0, 4), min_size=1, max_size=10))
        how = draw(st.sampled_from(["same", "next", "random"]))
        if how == "same":
            lab = list(ids)
        elif how == "next":
            lab = ids[1:] + [IGN]
        else:
            lab = draw(st.lists(st.integers(0, 4), min_size=len(ids), max_size=len(ids)))
        lab = [IGN if draw(st.integers(0, 4)) == 0 else x for x in lab]
        if draw(st.booleans()):  # input ids equal to ignore_index and null labels: the prefilter's bounds
            ids = [IGN if draw(st.integers(0, 5)) == 0 else x for x in ids]
            lab = [None if draw(st.integers(0, 6)) == 0 else x for x in lab]
        rows.append((ids, lab))
    return rows


@SETTINGS
@given(rows=shift_rows(), shifted=st.booleans(), ids_dtype=st.sampled_from([pl.Int64, pl.Int32, pl.UInt64]))
def test_shift_mismatch_matches_reference(rows, shifted, ids_dtype):
    if ids_dtype == pl.UInt64:  # no exact Int64 bound: every row goes to the exact per-row shares
        rows = [([max(x, 0) for x in a], b) for a, b in rows]
    df = pl.DataFrame({"input_ids": [r[0] for r in rows], "labels": [r[1] for r in rows]},
                      schema={"input_ids": pl.List(pl.Int64), "labels": pl.List(pl.Int64)})
    df = df.with_columns(pl.col("input_ids").cast(pl.List(ids_dtype)))
    got = failing(df, {"labels": {"shifted": shifted}, "dataset": {"layout": "causal_lm"}})  # LM rows, stated
    assert got.get("labels.shift_mismatch:labels", set()) == {i for i, (a, b) in enumerate(rows) if ref_shift(a, b, shifted)}
