"""The checks of datacheck.checks.targets: labels.binary_out_of_range, dist.target_scale and
length.ctc_infeasible (against a plain-Python reference, together with tokens.position_out_of_range)."""
from __future__ import annotations

import polars as pl
from hypothesis import given
from hypothesis import strategies as st
from refs import FRAME_SETTINGS as SETTINGS
from refs import IGN, rows, run, skip
from refs import frame_failing as failing

import datacheck


def test_binary_out_of_range_hints_0_255():
    df = {"target": [0.0, 1.0, 255.0, 0.5], "text": ["a", "b", "c", "d"]}
    res = run(df, {"columns": {"target": "target"}, "labels": {"target_kind": "binary"}})
    assert rows(res, "labels.binary_out_of_range:target") == [2]
    res = run({"target": [[0.0, 255.0], [0.0, 0.0]]}, {"columns": {"target": "target"}, "labels": {"target_kind": "binary"}})
    f = next(f for f in res.findings if f.check == "labels.binary_out_of_range")
    assert f.rows == (0,) and "{0, 255}" in f.message and f.details["max"] == 255.0
    assert "regression" in skip(run(df, {"columns": {"target": "target"}}), "labels.binary_out_of_range")


def test_target_scale_from_shard_stats(tmp_path):
    pl.DataFrame({"price": [1e5, 3e5, 2e5], "text": ["a", "b", "c"]}).write_parquet(tmp_path / "a.parquet")
    rep = datacheck.audit(str(tmp_path), config={"columns": {"target": "price"}})
    got = [f for f in rep.findings if f.check == "dist.target_scale"]
    assert len(got) == 1 and got[0].details["mean"] == 2e5 and got[0].severity == "warn"
    rep = datacheck.audit(str(tmp_path), config={"columns": {"target": "price"}, "numeric": {"target_scale_warn": 1e6}})
    assert not [f for f in rep.findings if f.check == "dist.target_scale"]


def test_ctc_infeasible_counts_repeats():
    # 4 frames, downsample 2 -> 2 steps; labels [5, 5] need 3 (a blank between the repeats)
    df = pl.DataFrame({"input_lengths": [4, 6, 4], "labels": [[5, 5, IGN], [5, 5], [5, 6]]})
    res = run(df, {"labels": {"ctc_downsample": 2}})
    assert rows(res, "length.ctc_infeasible:labels") == [0]


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
