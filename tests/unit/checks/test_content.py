"""content.periodic_tokens: its details, and the check and its flat-buffer kernel (content.periodic_rows)
against a plain-Python reference, with and without an attention mask."""
from __future__ import annotations

import os
from unittest.mock import patch

import numpy as np
import polars as pl
from hypothesis import example, given
from hypothesis import strategies as st
from refs import FRAME_SETTINGS as SETTINGS
from refs import frame_failing as failing
from refs import run

from datacheck.checks import _flat
from datacheck.checks.content import periodic_rows
from datacheck.engine.shard import audit_frame
from datacheck.model.config import config_from_dict


def test_periodic_tokens_details():
    row = [9, 8] + [4, 7, 7] * 40
    res = run(pl.DataFrame({"input_ids": [row, list(range(100))]}))
    f = next(f for f in res.findings if f.check == "content.periodic_tokens")
    assert f.rows == (0,)
    run0 = f.details["runs"][0]
    assert run0["row"] == 0 and run0["run"]["period"] == 3 and run0["run"]["start"] == 2 and run0["run"]["repeats"] == 40


def ref_periodic(ids: list[int]) -> bool:
    for p in range(1, 14):
        need = 31 * p
        run = 0
        for j in range(len(ids) - p):
            run = run + 1 if ids[j] == ids[j + p] else 0
            if run >= need:
                return True
    return False


@st.composite
def maybe_periodic(draw):
    n = draw(st.integers(1, 6))
    out = []
    for _ in range(n):
        pre = draw(st.lists(st.integers(0, 3), max_size=5))
        p = draw(st.integers(1, 13))
        unit = draw(st.lists(st.integers(0, 3), min_size=p, max_size=p))
        reps = draw(st.integers(25, 34))
        body = (unit * reps)[: draw(st.integers(p * 25, p * reps))]
        out.append(pre + body + draw(st.lists(st.integers(0, 3), max_size=5)))
    return out


@SETTINGS
@given(rows=maybe_periodic())
def test_periodic_tokens_match_reference(rows):
    df = pl.DataFrame({"input_ids": rows}, schema={"input_ids": pl.List(pl.Int64)})
    got = failing(df, {})
    assert got.get("content.periodic_tokens:input_ids", set()) == {i for i, r in enumerate(rows) if ref_periodic(r)}


def ref_periodic_masked(ids: list, mask: list[int]) -> bool:
    """Positions with mask 0 (padding) and null ids are never part of a run."""
    for p in range(1, 14):
        run = 0
        for j in range(len(ids) - p):
            ok = mask[j] == 1 and mask[j + p] == 1 and ids[j] is not None and ids[j] == ids[j + p]
            run = run + 1 if ok else 0
            if run >= 31 * p:
                return True
    return False


@st.composite
def masked_periodic(draw):
    """maybe_periodic rows with an attention_mask: right or left padding (the pad id drawn, possibly
    the repeated unit's own id, so that padding would extend a run), holes, and null ids."""
    rows = draw(maybe_periodic())
    out = []
    for ids in rows:
        n = len(ids)
        k = draw(st.integers(0, min(n, 40)))
        pad = draw(st.integers(0, 3))
        style = draw(st.sampled_from(["right", "left", "holes"]))
        if style == "right":
            mask = [1] * (n - k) + [0] * k
            ids = ids[: n - k] + [pad] * k
        elif style == "left":
            mask = [0] * k + [1] * (n - k)
            ids = [pad] * k + ids[k:]
        else:
            mask = [0 if draw(st.integers(0, 30)) == 0 else 1 for _ in range(n)]
        if draw(st.integers(0, 4)) == 0:
            ids = [None if draw(st.integers(0, 40)) == 0 else x for x in ids]
        out.append((ids, mask))
    return out


@SETTINGS
@given(rows=masked_periodic(), mask_dtype=st.sampled_from([pl.Int8, pl.Int64, pl.Boolean]))
def test_periodic_tokens_with_mask_match_reference(rows, mask_dtype):
    df = pl.DataFrame({"input_ids": [r[0] for r in rows], "attention_mask": [r[1] for r in rows]},
                      schema={"input_ids": pl.List(pl.Int64), "attention_mask": pl.List(pl.Int64)})
    df = df.with_columns(pl.col("attention_mask").cast(pl.List(mask_dtype)))
    got = failing(df, {})
    assert got.get("content.periodic_tokens:input_ids", set()) == {
        i for i, (ids, m) in enumerate(rows) if ref_periodic_masked(ids, m)}


@st.composite
def split_runs(draw):
    """Rows that each hold part of one long periodic run (a run split across consecutive rows must
    not count: in the flat buffer the rows are adjacent), some long enough alone, with padding on a
    drawn side, null ids and null rows."""
    p = draw(st.integers(1, 13))
    unit = draw(st.lists(st.integers(0, 2), min_size=p, max_size=p))
    stream = unit * draw(st.integers(40, 80))
    side = draw(st.sampled_from(["right", "left", "none"]))
    ids_rows, masks = [], []
    at = 0
    while at < len(stream):
        n = draw(st.integers(1, 31 * p + 2 * p + 3))
        ids = list(stream[at:at + n])
        at += n
        k = draw(st.integers(0, 3)) if side != "none" else 0
        mask = [1] * len(ids) + [0] * k if side == "right" else [0] * k + [1] * len(ids)
        ids = ids + [unit[0]] * k if side == "right" else [unit[0]] * k + ids
        if draw(st.integers(0, 5)) == 0:
            ids[draw(st.integers(0, len(ids) - 1))] = None
        ids_rows.append(ids)
        masks.append(mask)
    if draw(st.booleans()):
        at = draw(st.integers(0, len(ids_rows)))
        ids_rows.insert(at, None)
        masks.insert(at, None)
    return ids_rows, masks


@SETTINGS
@given(rows=split_runs(), use_mask=st.booleans(), block=st.sampled_from([None, 1, 7, 40, 500]))
def test_periodic_rows_kernel_matches_reference(rows, use_mask, block):
    """The flat-buffer kernel (content.periodic_rows) row by row against the plain-Python reference,
    on runs cut across rows, with right/left padding masked or, without a mask, counted as ids; the
    samples compared block of positions by block, at the default block and at blocks that cut
    rows and runs anywhere."""
    ids_rows, masks = rows
    ids = pl.Series("input_ids", ids_rows, dtype=pl.List(pl.Int64))
    mask = pl.Series("attention_mask", masks, dtype=pl.List(pl.Int8)) if use_mask else None
    with patch.object(_flat, "PERIODIC_BLOCK", block or _flat.PERIODIC_BLOCK):
        got = periodic_rows(ids, mask).to_list()
    want = [False if r is None else (ref_periodic_masked(r, m) if use_mask else
                                     ref_periodic_masked(r, [1] * len(r)))
            for r, m in zip(ids_rows, masks)]
    assert got == want
    df = pl.DataFrame({"input_ids": ids} if mask is None else {"input_ids": ids, "attention_mask": mask})
    res = audit_frame(df, config_from_dict({}))
    assert set(res.failing_rows.get("content.periodic_tokens:input_ids", [])) == {i for i, w in enumerate(want) if w}


@st.composite
def periodic_with_labels(draw):
    """Rows with labels (so the shard has the shared position pass) and an attention mask, about
    half of them holding a run long enough (32 repeats of a period of 1 to 13 ids or more) before
    masking: padding on a drawn side, holes, null ids, and rows left out of the position view
    (labels of another length, a mask value 2 or a null one)."""
    out = []
    for _ in range(draw(st.integers(1, 6))):
        p = draw(st.integers(1, 13))
        unit = draw(st.lists(st.integers(0, 3), min_size=p, max_size=p))
        ids = draw(st.lists(st.integers(0, 3), max_size=4)) + unit * draw(st.integers(29, 36)) \
            + draw(st.lists(st.integers(0, 3), max_size=4))
        n = len(ids)
        k = draw(st.integers(0, 6))
        style = draw(st.sampled_from(["right", "left", "holes", "none"]))
        mask = [1] * n
        if style == "right":
            mask[n - k:] = [0] * k
        elif style == "left":
            mask[:k] = [0] * k
        elif style == "holes":
            mask = [0 if draw(st.integers(0, 60)) == 0 else 1 for _ in range(n)]
        if draw(st.integers(0, 4)) == 0:
            ids = [None if draw(st.integers(0, 80)) == 0 else x for x in ids]
        labels = [-100 if x is None else x for x in ids]
        what = draw(st.integers(0, 9))
        if what == 0:
            labels = labels[:-1]
        elif what == 1:
            mask[draw(st.integers(0, n - 1))] = draw(st.sampled_from([2, None]))
        out.append((ids, mask, labels))
    return out


def _in_position_view(ids: list, mask: list, labels: list) -> bool:
    return len(labels) == len(ids) == len(mask) and all(m in (0, 1) for m in mask)


@SETTINGS
@given(rows=periodic_with_labels(), batch_rows=st.sampled_from([None, 2]))
@example(rows=[([9, 8] + [4, 7, 7] * 40, [1] * 122, [9, 8] + [4, 7, 7] * 40), (list(range(100)), [1] * 100, [0] * 100)],
         batch_rows=None)
def test_periodic_tokens_from_the_shared_pass_match_reference(rows, batch_rows):
    """With labels and ignore_index (the shard's shared position pass, datacheck.checks._flat), the
    candidate rows come from that pass (content._candidates is never asked) and the failing rows
    equal the plain-Python rule on the rows of the position view."""
    df = pl.DataFrame({"input_ids": [r[0] for r in rows], "attention_mask": [r[1] for r in rows],
                       "labels": [r[2] for r in rows]},
                      schema={"input_ids": pl.List(pl.Int64), "attention_mask": pl.List(pl.Int8),
                              "labels": pl.List(pl.Int64)})
    env = {} if batch_rows is None else {"DATACHECK_BATCH_ROWS": str(batch_rows)}
    with patch.dict(os.environ, env), patch("datacheck.checks.content._candidates", side_effect=AssertionError):
        res = audit_frame(df, config_from_dict({"dataset": {"layout": "causal_lm"}}))
    assert not [s for s in res.skipped if s.error], res.skipped
    assert set(res.failing_rows.get("content.periodic_tokens:input_ids", [])) == {
        i for i, (ids, m, lab) in enumerate(rows) if _in_position_view(ids, m, lab) and ref_periodic_masked(ids, m)}


def test_periodic_rows_at_the_shortest_row_that_holds_a_run():
    """A run of period p needs 32 p ids of one row: a row of exactly 32 p periodic ids holds one (the
    longest row of the batch bounds the periods searched), one id less does not, whatever the period."""
    for p in (1, 4, 5, 13):
        unit = list(range(100, 100 + p))
        rows = [(unit * 32)[: 32 * p], (unit * 32)[: 32 * p - 1], [7] * 3]
        assert periodic_rows(pl.Series("input_ids", rows, dtype=pl.List(pl.Int64))).to_list() == [True, False, False]
        assert periodic_rows(pl.Series("input_ids", rows[1:], dtype=pl.List(pl.Int64))).to_list() == [False, False]
        assert [ref_periodic(r) for r in rows] == [True, False, False]


def ref_first_run(ids: list, mask: list) -> tuple[int, int, int] | None:
    """(start, period, repeats) of the details of content.periodic_tokens for one row: the first
    position covered by a run of any period, the smallest period whose run starts there, and
    ``length // p + 1`` with ``length`` the run's whole stretch of equal comparisons; None without run."""
    best = None
    for p in range(1, 14):
        j, n = 0, len(ids) - p
        while j < n:
            k = j
            while k < n and mask[k] == 1 and mask[k + p] == 1 and ids[k] is not None and ids[k] == ids[k + p]:
                k += 1
            if k - j >= 31 * p:
                if best is None or j < best[0]:
                    best = (j, p, (k - j) // p + 1)
                break
            j = k + 1
    return best


def _flat_of(ids_rows: list, masks: list | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(vals, ok, offsets) of rows of ids (None: a null row, no position), built in plain Python."""
    vals, ok, offsets = [], [], [0]
    for i, r in enumerate(ids_rows):
        for j, x in enumerate(r or []):
            vals.append(0 if x is None else x)
            ok.append(x is not None and (masks is None or masks[i][j] == 1))
        offsets.append(len(vals))
    return np.array(vals, dtype=np.int64), np.array(ok, dtype=bool), np.array(offsets, dtype=np.int64)


@SETTINGS
@given(rows=split_runs(), use_mask=st.booleans(), chunk=st.sampled_from([None, 1, 5, 64]))
def test_periodic_runs_match_reference(rows, use_mask, chunk):
    """The details (content.periodic_tokens' "runs": first 20 rows, per row the first run with the
    smallest period) against the plain-Python reference: the kernel (_flat.periodic_runs, one row's
    comparisons chunk by chunk, at chunks that cut runs anywhere) and the audit's details."""
    ids_rows, masks = rows
    want = [(i, *got) for i, r in enumerate(ids_rows) if r is not None
            and (got := ref_first_run(r, masks[i] if use_mask else [1] * len(r))) is not None][:20]
    vals, ok, offsets = _flat_of(ids_rows, masks if use_mask else None)
    with patch.object(_flat, "RUN_CHUNK", chunk or _flat.RUN_CHUNK):
        assert _flat.periodic_runs(vals, ok, offsets, 20) == want
    ids = pl.Series("input_ids", ids_rows, dtype=pl.List(pl.Int64))
    df = pl.DataFrame({"input_ids": ids} if not use_mask else
                      {"input_ids": ids, "attention_mask": pl.Series(masks, dtype=pl.List(pl.Int8))})
    res = audit_frame(df, config_from_dict({}))
    f = [f for f in res.findings if f.check == "content.periodic_tokens"]
    assert [(r["row"], r["run"]["start"], r["run"]["period"], r["run"]["repeats"])
            for r in (f[0].details["runs"] if f else [])] == want


def test_a_very_long_period_one_run():
    """One id repeated over 3 chunks and more (periodic_runs compares RUN_CHUNK positions at a time),
    between ordinary rows, then the same row with one other id in its middle: the check's kernel and
    its details give the run's start, period 1 and its repeats, computed from the lengths."""
    n = 3 * _flat.RUN_CHUNK + 5
    rows = [list(range(40)), [7] * n, [1, 2, 3]]
    assert periodic_rows(pl.Series("input_ids", rows, dtype=pl.List(pl.Int32))).to_list() == [False, True, False]
    vals, ok, offsets = _flat_of(rows, None)
    assert _flat.periodic_runs(vals, None, offsets, 20) == [(1, 0, 1, n)]  # n - 1 equal neighbours: n repeats
    cut = n // 2
    rows[1][cut] = 8  # two runs: [0, cut) and (cut, n)
    vals, ok, offsets = _flat_of(rows, None)
    assert _flat.periodic_runs(vals, None, offsets, 20) == [(1, 0, 1, cut)]
    rows[1][:cut] = list(range(cut))  # the first part no run: the second one, from position cut + 1
    vals, ok, offsets = _flat_of(rows, None)
    assert _flat.periodic_runs(vals, None, offsets, 20) == [(1, cut + 1, 1, n - cut - 1)]
    assert periodic_rows(pl.Series("input_ids", rows, dtype=pl.List(pl.Int32))).to_list() == [False, True, False]
