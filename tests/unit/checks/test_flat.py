"""The pass over the flat token buffers shared by sft.prompt_supervised, sft.eot_unsupervised,
the eos stat and the labels.shift_mismatch candidates (datacheck.checks._flat, shared through
registry.shared_pass): each against a plain-Python reference on random ragged rows (null elements,
null rows, rows whose lists differ in length, masks that are not binary, padding on either side,
both label conventions), packed rows, several batches and inputs cut in several chunks."""
from __future__ import annotations

import os
from unittest.mock import patch

import numpy as np
import polars as pl
from hypothesis import example, given
from hypothesis import strategies as st
from refs import EOS, EOT, IGN, PAD, STOP, ragged_sft_rows, ref_flat_rules
from refs import FRAME_SETTINGS as SETTINGS

from datacheck.checks import _flat
from datacheck.engine.shard import audit_frame
from datacheck.model.config import config_from_dict


def _in_view(cols: dict, i: int, with_att: bool) -> bool:
    ids, lab, att = cols["input_ids"][i], cols["labels"][i], cols["attention_mask"][i]
    if ids is None or len(lab) != len(ids):
        return False
    return not (with_att and any(x not in (0, 1) for x in att))


def ref_eos(cols: dict, shifted: bool, with_att: bool) -> dict:
    """The eos stat, plain Python: eos ids of real content (mask not 0) in the rows of the view,
    how many are supervised (labels[k], or labels[k-1] when shifted), and the rows holding one."""
    total = sup = rows = 0
    for i in range(len(cols["input_ids"])):
        if not _in_view(cols, i, with_att):
            continue
        ids, lab, att = cols["input_ids"][i], cols["labels"][i], cols["attention_mask"][i]
        n = 0
        for k in range(len(ids)):
            if ids[k] != EOS or (with_att and att[k] == 0):
                continue
            n += 1
            j = k - 1 if shifted else k
            sup += j >= 0 and lab[j] is not None and lab[j] != IGN
        total += n
        rows += n > 0
    return {"total": total, "supervised": sup, "rows_with_eos": rows}


def ref_shift_rows(cols: dict, shifted: bool, with_att: bool) -> set[int]:
    """labels.shift_mismatch, plain Python, on the rows of the view (a null next id is no next)."""
    out = set()
    for i in range(len(cols["input_ids"])):
        if not _in_view(cols, i, with_att):
            continue
        ids, lab = cols["input_ids"][i], cols["labels"][i]
        sup = [k for k in range(len(lab)) if lab[k] is not None and lab[k] != IGN]
        nxt = [k for k in sup if k + 1 < len(ids) and ids[k + 1] is not None]
        if not sup or not nxt:
            continue
        same = sum(lab[k] == ids[k] for k in sup) / len(sup)
        nx = sum(lab[k] == ids[k + 1] for k in nxt) / len(nxt)
        if (nx >= 0.9 and same < 0.9) if not shifted else (same >= 0.9 and nx < 0.9):
            out.add(i)
    return out


def _frame(cols: dict, with_am: bool, with_att: bool) -> pl.DataFrame:
    data = {c: v for c, v in cols.items() if (c != "assistant_mask" or with_am) and (c != "attention_mask" or with_att)}
    return pl.DataFrame(data, schema={c: pl.List(pl.Int64) for c in data})


#: fine-tuning rows, stated (the recognizer's verdict on a few synthetic rows is not what is tested here)
CFG = {"tokens": {"eot_token_ids": [EOT], "eos_token_id": EOS}, "dataset": {"layout": "sft_tokenized"}}


@SETTINGS
@given(cols=ragged_sft_rows(), shifted=st.booleans(), with_am=st.booleans(), with_att=st.booleans(),
       batch_rows=st.sampled_from([None, 1, 3]))
def test_flat_pass_rules_match_reference(cols, shifted, with_am, with_att, batch_rows):
    """Rows and position counts of the two sft rules, the eos stat and labels.shift_mismatch, in one
    batch or several (the shared pass never serves one batch's result to another)."""
    df = _frame(cols, with_am, with_att)
    env = {} if batch_rows is None else {"DATACHECK_BATCH_ROWS": str(batch_rows)}
    with patch.dict(os.environ, env):
        res = audit_frame(df, config_from_dict({**CFG, "labels": {"shifted": shifted}}))
    assert not [s for s in res.skipped if s.error], res.skipped
    assert res.stats["eos"] == ref_eos(cols, shifted, with_att)
    assert set(res.failing_rows.get("labels.shift_mismatch:labels", [])) == ref_shift_rows(cols, shifted, with_att)
    want = [ref_flat_rules(cols, i, shifted, with_am, with_att) for i in range(df.height)]
    for k, check in ((0, "sft.prompt_supervised"), (1, "sft.eot_unsupervised")):
        if check == "sft.prompt_supervised" and not with_am:
            continue
        assert set(res.failing_rows.get(f"{check}:labels", [])) == {i for i, w in enumerate(want) if w[k]}
        f = [f for f in res.findings if f.check == check]
        assert (f[0].details.get("positions") if f else 0) == sum(w[k] for w in want)


def ref_padding(cols: dict, i: int, pad: int = PAD) -> tuple[int, int, int]:
    """(padding.token_not_pad positions, padding.label_not_ignored positions, padding.pad_attended
    positions) of row ``i``, plain Python: in a row of the view, positions with attention_mask 0
    holding a non-null id other than ``pad`` / a non-null label other than IGN; positions with
    attention_mask 1 holding ``pad``."""
    if not _in_view(cols, i, True):
        return 0, 0, 0
    ids, lab, att = cols["input_ids"][i], cols["labels"][i], cols["attention_mask"][i]
    masked = [k for k in range(len(ids)) if att[k] == 0]
    return (sum(ids[k] is not None and ids[k] != pad for k in masked),
            sum(lab[k] is not None and lab[k] != IGN for k in masked),
            sum(att[k] == 1 and ids[k] == pad for k in range(len(ids))))


@st.composite
def padded_with_leaks(draw):
    """:func:`ragged_sft_rows` whose padded positions (attention_mask 0) sometimes hold another id,
    a null id, a supervised or a null label, and whose real positions (attention_mask 1) sometimes
    hold the pad id."""
    cols = draw(ragged_sft_rows())
    for i, att in enumerate(cols["attention_mask"]):
        if att is None:
            continue
        ids, lab = cols["input_ids"][i], cols["labels"][i]
        for k in range(len(att)):
            if att[k] == 0 and draw(st.integers(0, 3)) == 0:
                ids[k] = draw(st.sampled_from([PAD, EOS, 5, None]))
                if k < len(lab):
                    lab[k] = draw(st.sampled_from([IGN, 6, None]))
            elif att[k] == 1 and draw(st.integers(0, 5)) == 0:
                ids[k] = PAD
    return cols


@SETTINGS
@given(cols=padded_with_leaks(), shifted=st.booleans(), with_am=st.booleans(), batch_rows=st.sampled_from([None, 2]))
def test_flat_pass_padding_rules_match_reference(cols, shifted, with_am, batch_rows):
    """padding.token_not_pad, padding.label_not_ignored and padding.pad_attended read from the shared
    pass: their rows and position counts equal the plain-Python rule on the rows of the position view."""
    df = _frame(cols, with_am, True)
    env = {} if batch_rows is None else {"DATACHECK_BATCH_ROWS": str(batch_rows)}
    cfg = {**CFG, "tokens": {**CFG["tokens"], "pad_token_id": PAD}, "labels": {"shifted": shifted}}
    with patch.dict(os.environ, env):
        res = audit_frame(df, config_from_dict(cfg))
    assert not [s for s in res.skipped if s.error], res.skipped
    want = [ref_padding(cols, i) for i in range(df.height)]
    for k, (check, col) in enumerate((("padding.token_not_pad", "input_ids"), ("padding.label_not_ignored", "labels"),
                                      ("padding.pad_attended", "input_ids"))):
        assert set(res.failing_rows.get(f"{check}:{col}", [])) == {i for i, w in enumerate(want) if w[k]}
        f = [f for f in res.findings if f.check == check]
        assert (f[0].details.get("positions") if f else 0) == sum(w[k] for w in want)


@SETTINGS
@given(cols=padded_with_leaks(), shifted=st.booleans(), batch_rows=st.sampled_from([None, 2]))
def test_flat_pass_padding_rules_with_pad_as_eos_match_reference(cols, shifted, batch_rows):
    """GPT-2 style: the pad id is the eos id and no other end-of-turn id is set, so the pad is the
    only id the scan looks for (padding.token_not_pad reuses that comparison). padding.token_not_pad,
    padding.label_not_ignored, the eos stat and the shift candidates equal the plain-Python rules
    (padding.pad_attended is skipped: an attended pad id is the eos). The rows are padded with the
    eos id (every PAD id becomes EOS), so most masked positions hold the pad."""
    cols["input_ids"] = [None if row is None else [EOS if x == PAD else x for x in row] for row in cols["input_ids"]]
    df = _frame(cols, False, True)
    env = {} if batch_rows is None else {"DATACHECK_BATCH_ROWS": str(batch_rows)}
    cfg = {"tokens": {"eos_token_id": EOS, "pad_token_id": EOS}, "dataset": {"layout": "sft_tokenized"},
           "labels": {"shifted": shifted}}
    with patch.dict(os.environ, env):
        res = audit_frame(df, config_from_dict(cfg))
    assert not [s for s in res.skipped if s.error], res.skipped
    want = [ref_padding(cols, i, EOS) for i in range(df.height)]
    assert any(s.check == "padding.pad_attended" for s in res.skipped)  # an attended pad is the eos here
    for k, (check, col) in enumerate((("padding.token_not_pad", "input_ids"), ("padding.label_not_ignored", "labels"))):
        assert set(res.failing_rows.get(f"{check}:{col}", [])) == {i for i, w in enumerate(want) if w[k]}
        f = [f for f in res.findings if f.check == check]
        assert (f[0].details.get("positions") if f else 0) == sum(w[k] for w in want)
    assert res.stats["eos"] == ref_eos(cols, shifted, True)
    assert set(res.failing_rows.get("labels.shift_mismatch:labels", [])) == ref_shift_rows(cols, shifted, True)


@st.composite
def labels_with_strays(draw):
    """:func:`ragged_sft_rows` whose labels sometimes hold a negative value other than IGN or a
    large one."""
    cols = draw(ragged_sft_rows())
    for lab in cols["labels"]:
        for k in range(len(lab or [])):
            if draw(st.integers(0, 5)) == 0:
                lab[k] = draw(st.sampled_from([-1, -7, 9, 100]))
    return cols


def ref_label_rows(cols: dict, bound: int, keep_len: int | None, side: str) -> dict[str, set[int]]:
    """Rows of labels.unexpected_sentinel, labels.out_of_range and empty.no_supervised_tokens, plain
    Python, over every row (in the position view or not)."""
    out: dict[str, set[int]] = {"labels.unexpected_sentinel": set(), "labels.out_of_range": set(),
                                "empty.no_supervised_tokens": set()}
    for i, lab in enumerate(cols["labels"]):
        if lab is None:
            out["empty.no_supervised_tokens"].add(i)
            continue
        real = [x for x in lab if x is not None and x != IGN]
        if any(x < 0 for x in real):
            out["labels.unexpected_sentinel"].add(i)
        if any(x >= bound for x in real):
            out["labels.out_of_range"].add(i)
        kept = lab if keep_len is None else (lab[:keep_len] if side == "right" else lab[max(0, len(lab) - keep_len):])
        if not any(x is not None and x != IGN for x in kept):
            out["empty.no_supervised_tokens"].add(i)
    return out


@SETTINGS
@given(cols=labels_with_strays(), with_att=st.booleans(), bound=st.sampled_from([4, 8, 200]),
       keep_len=st.sampled_from([None, 1, 3, 6]), side=st.sampled_from(["right", "left"]),
       batch_rows=st.sampled_from([None, 3]))
def test_flat_pass_label_rules_match_reference(cols, with_att, bound, keep_len, side, batch_rows):
    """labels.unexpected_sentinel, labels.out_of_range and empty.no_supervised_tokens read from the
    shared pass (every row, rows left out of the position view included): their failing rows equal
    the plain-Python rules, whatever the truncation."""
    df = _frame(cols, False, with_att)
    env = {} if batch_rows is None else {"DATACHECK_BATCH_ROWS": str(batch_rows)}
    tokens = {**CFG["tokens"], "vocab_size": bound, "max_seq_len": keep_len, "truncation_side": side}
    with patch.dict(os.environ, env):
        res = audit_frame(df, config_from_dict({**CFG, "tokens": {k: v for k, v in tokens.items() if v is not None}}))
    assert not [s for s in res.skipped if s.error], res.skipped
    for check, rows in ref_label_rows(cols, bound, keep_len, side).items():
        assert set(res.failing_rows.get(f"{check}:labels", [])) == rows, check


@st.composite
def one_width_rows(draw):
    """:func:`labels_with_strays` with every column of every row padded to one width (mask 0, label
    IGN, the pad id), a row whose labels are one shorter kept so (the segments around it), and null
    rows kept: the rows of a matrix."""
    cols = draw(labels_with_strays())
    width = max((len(r) for r in cols["input_ids"] if r is not None), default=0) + draw(st.integers(0, 2))
    fill = {"input_ids": PAD, "labels": IGN, "assistant_mask": 0, "attention_mask": 0}
    for c, rows in cols.items():
        for i, r in enumerate(rows):
            if r is not None:
                short = c == "labels" and len(r) < len(cols["input_ids"][i])
                rows[i] = r + [fill[c]] * (width - len(r) - short)
    return cols


def ref_supervised(cols: dict) -> list[int]:
    """Per row, plain Python: labels other than IGN and null (null rows: 0)."""
    return [0 if lab is None else sum(1 for x in lab if x is not None and x != IGN) for lab in cols["labels"]]


@SETTINGS
@given(cols=st.one_of(labels_with_strays(), padded_with_leaks(), one_width_rows()), with_att=st.booleans(),
       batch_rows=st.sampled_from([None, 2]), step=st.sampled_from([3, 65536]))
def test_flat_pass_supervised_labels_match_reference(cols, with_att, batch_rows, step):
    """The pass's ``lab_sup`` (every row, in the position view or not, whether its lists differ in
    length or not, rows of one width or not) counts the labels other than IGN and null, and the
    supervised_fraction stat it serves equals the plain-Python ratio over every label slot."""
    df = _frame(cols, False, with_att)
    ok = pl.Series([_in_view(cols, i, with_att) for i in range(df.height)])
    inputs = [df["input_ids"], df["labels"], ok] + ([df["attention_mask"]] if with_att else [])
    want = ref_supervised(cols)
    for per_slice in (0, 10**12):  # the columns' own buffers in segments, or copied without the rows
        with patch.object(_flat, "ELEMENTS_PER_SLICE", per_slice), patch.object(_flat, "SCAN_STEP", step):
            got = _flat._pass(list(inputs), IGN, False, tuple(STOP), EOS, False, with_att, PAD, 8)
        assert got.struct.field("lab_sup").to_list() == want
    env = {} if batch_rows is None else {"DATACHECK_BATCH_ROWS": str(batch_rows)}
    with patch.dict(os.environ, env):
        res = audit_frame(df, config_from_dict(CFG))
    assert not [s for s in res.skipped if s.error], res.skipped
    slots = sum(len(r) for r in cols["labels"] if r is not None)
    assert res.stats["supervised_fraction"] == (sum(want) / slots if slots else "nan")


@SETTINGS
@given(cols=ragged_sft_rows(), shifted=st.booleans(), cut=st.integers(1, 7))
def test_flat_pass_over_chunks_equals_one_chunk(cols, shifted, cut):
    """The pass over inputs cut in chunks (alike, or differently per column) equals the pass over
    one chunk of each."""
    df = _frame(cols, True, True)
    ok = pl.Series([_in_view(cols, i, True) for i in range(df.height)])  # the view's row condition
    one = [df["input_ids"], df["labels"], ok, df["assistant_mask"], df["attention_mask"]]
    cut = min(cut, df.height)

    def chunked(s: pl.Series, at: int) -> pl.Series:
        return pl.concat([s.slice(0, at), s.slice(at)], rechunk=False)

    args = (IGN, shifted, tuple(STOP), EOS, True, True)
    want = _flat._pass(list(one), *args).to_list()
    assert _flat._pass([chunked(s, cut) for s in one], *args).to_list() == want
    other = max(0, cut - 1)
    assert _flat._pass([chunked(s, cut if i % 2 else other) for i, s in enumerate(one)], *args).to_list() == want


@SETTINGS
@given(cols=ragged_sft_rows(), shifted=st.booleans(), with_am=st.booleans(), with_att=st.booleans(),
       keep=st.sampled_from([(None, "right"), (2, "right"), (2, "left")]), bound=st.sampled_from([None, 8]),
       step=st.sampled_from([3, 65536]))
def test_flat_pass_skips_misaligned_rows_alike_in_segments_and_by_mask(cols, shifted, with_am, with_att, keep, bound,
                                                                         step):
    """Rows whose lists differ in length give every field the same counts whether the pass reads
    the columns' own buffers in segments between those rows (few such rows) or copies the columns
    without the rows outside the view (many), by steps that end inside a segment or not."""
    df = _frame(cols, True, True)
    ok = pl.Series([_in_view(cols, i, with_att) for i in range(df.height)])
    inputs = [df["input_ids"], df["labels"], ok] + ([df["assistant_mask"]] if with_am else []) + (
        [df["attention_mask"]] if with_att else [])
    args = (IGN, shifted, tuple(STOP), EOS, with_am, with_att, PAD, bound, *keep)
    with patch.object(_flat, "SCAN_STEP", step):
        with patch.object(_flat, "ELEMENTS_PER_SLICE", 0):  # always segments
            segments = _flat._pass(list(inputs), *args).to_list()
        with patch.object(_flat, "ELEMENTS_PER_SLICE", 10**12):  # always a copy without the rows
            copied = _flat._pass(list(inputs), *args).to_list()
    assert segments == copied


@SETTINGS
@given(cols=st.one_of(labels_with_strays(), padded_with_leaks()), shifted=st.booleans(), step=st.integers(1, 9),
       keep=st.sampled_from([(None, "right"), (2, "right"), (2, "left")]), bound=st.sampled_from([8, 200]))
def test_flat_pass_by_steps_equals_one_step(cols, shifted, step, keep, bound):
    """The scan of the flat buffers by steps of any size (a step ending inside a row, or between a
    label and the id after it) gives the counts of one step over the whole buffers; ids stored as
    Int32 and masks as Int8 beside Int64 labels (a parquet shard's usual types), or labels as Int8
    (a bound of 200 above their type's maximum), give the counts of Int64 everywhere (every field:
    padding and label fields included)."""
    df = _frame(cols, True, True)
    ok = pl.Series([_in_view(cols, i, True) for i in range(df.height)])
    args = (IGN, shifted, tuple(STOP), EOS, True, True, PAD, bound, *keep)

    def inputs(frame: pl.DataFrame) -> list[pl.Series]:
        return [frame["input_ids"], frame["labels"], ok, frame["assistant_mask"], frame["attention_mask"]]

    want = _flat._pass(inputs(df), *args).to_list()
    narrow = df.with_columns(pl.col("input_ids").cast(pl.List(pl.Int32)),
                             pl.col("assistant_mask").cast(pl.List(pl.Int8)),
                             pl.col("attention_mask").cast(pl.List(pl.Int8)))
    with patch.object(_flat, "SCAN_STEP", step):
        assert _flat._pass(inputs(df), *args).to_list() == want
        assert _flat._pass(inputs(narrow), *args).to_list() == want
        assert _flat._pass(inputs(narrow.with_columns(pl.col("labels").cast(pl.List(pl.Int8)))), *args).to_list() == want


@SETTINGS
@given(lens=st.lists(st.integers(0, 1500), min_size=1, max_size=6), seed=st.integers(0, 2**16),
       density=st.sampled_from([0.0, 0.0005, 0.01, 0.5]))
def test_last_true_matches_reference(lens, seed, density):
    """The last True of each segment (sft.truncated_response's last supervised label), found by
    windows of 8, 64 and 512 positions from the end, equals a plain scan of the segment."""
    rng = np.random.default_rng(seed)
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    flags = rng.random(int(offsets[-1])) < density
    got = _flat._last_true(flags, offsets[:-1], offsets[1:]).tolist()
    want = [max((k for k in range(a, b) if flags[k]), default=-1) for a, b in zip(offsets[:-1], offsets[1:])]
    assert got == want


def test_one_pass_serves_every_rule_of_a_query():
    """Packed rows: the two sft rules, the eos stat and the shift candidates read one pass per
    query: a clean batch costs one pass; the defects planted in row 1 (prompt supervised) and
    row 2 (eot unsupervised) are found."""
    ids = [1, 5, 6, EOT, 1, 7, 7, EOT, EOS]
    clean = [IGN, IGN, IGN, IGN, IGN, 7, 7, EOT, EOS]
    am = [0, 0, 0, 0, 0, 1, 1, 1, 1]
    prompt = [IGN, 5, IGN, IGN, IGN, 7, 7, EOT, EOS]
    eot = [IGN, IGN, IGN, IGN, IGN, 7, 7, IGN, EOS]
    pos = [[0, 1, 2, 3, 0, 1, 2, 3, 4]] * 3

    def frame(labels):  # distinct rows (a repeated row is dup.exact_in_shard)
        rows = [[1, 5 + r, *ids[2:]] for r in range(3)]
        labels = [[x if x != 5 else rows[r][1] for x in lab] for r, lab in enumerate(labels)]
        return pl.DataFrame({"input_ids": rows, "labels": labels, "assistant_mask": [am] * 3, "position_ids": pos})

    calls = []
    real = _flat._pass

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    with patch.object(_flat, "_pass", counted):
        res = audit_frame(frame([clean] * 3), config_from_dict(CFG))
    assert not res.failing_rows and not [s for s in res.skipped if s.error]
    assert res.stats["eos"] == {"total": 3, "supervised": 3, "rows_with_eos": 3}
    assert len(calls) == 1  # one fused query, one pass for its four users
    res = audit_frame(frame([clean, prompt, eot]), config_from_dict(CFG))
    assert res.failing_rows["sft.prompt_supervised:labels"] == [1]
    assert res.failing_rows["sft.eot_unsupervised:labels"] == [2]
    assert "labels.shift_mismatch:labels" not in res.failing_rows
    assert [f.details["positions"] for f in res.findings if f.check.startswith("sft.")] == [1, 1]


@st.composite
def wild_packed(draw):
    """position_ids and seq_lens of any shape: nulls (rows and elements), empty lists, negative ids,
    seq_lens that do not sum to the row length, negative or huge seq_lens."""
    n = draw(st.integers(1, 8))
    pos, sl = [], []
    for _ in range(n):
        if draw(st.integers(0, 9)) == 0:
            pos.append(None)
        else:
            docs = draw(st.lists(st.integers(0, 4), max_size=4))
            row = [k for d in docs for k in range(d)]
            if row and draw(st.booleans()):
                row[draw(st.integers(0, len(row) - 1))] = draw(st.sampled_from([-1, 0, 3, None]))
            pos.append(row)
        how = draw(st.integers(0, 9))
        if how == 0:
            sl.append(None)
        elif how <= 5 and pos[-1] is not None:  # documents as planted (runs of 0, 1, 2, ...)
            row, lens, run = pos[-1], [], 0
            for k, x in enumerate(row):
                if k and x == 0:
                    lens.append(run)
                    run = 0
                run += 1
            sl.append(lens + [run] if row else [])
        else:
            sl.append(draw(st.lists(st.one_of(st.integers(-3, 6), st.just(None), st.just(2 ** 40)), max_size=4)))
    return pos, sl


def ref_not_reset(pos, sl) -> bool:
    """The rule on a row without nulls and with non-negative seq_lens, plain Python."""
    n = len(pos)
    if n == 0:
        return False
    ends = [sum(sl[:j + 1]) for j in range(len(sl))]
    starts = ends[:-1]
    steps = sum(pos[k] - pos[k - 1] == 1 for k in range(1, n))
    return (pos[0] != 0 or min(pos) < 0 or any(s >= n or pos[s] != 0 for s in starts)
            or steps != n - max(len(sl), 1))


@SETTINGS
@given(data=wild_packed(), pos_dtype=st.sampled_from([pl.Int64, pl.Int32, pl.Int8, pl.UInt32]),
       sl_dtype=st.sampled_from([pl.Int64, pl.Int32]))
# an empty row with seq_lens [0, 0]: its document start 0 lies past the row, yet an empty row never
# fails (the list rule's ``n > 0``); the fast path flagged it (found by the suite's random examples)
@example(data=([[], None, [0], None, None], [[0, 0], None, None, None, None]), pos_dtype=pl.Int64, sl_dtype=pl.Int64)
def test_positions_not_reset_fast_path_equals_list_kernels(data, pos_dtype, sl_dtype):
    """packing.position_ids_not_reset with seq_lens: the flat-buffer kernel finds the rows the list
    kernels find (on any data: nulls, empty rows, wrong or wild seq_lens), and the plain-Python
    reference on rows without nulls."""
    pos, sl = data
    if pos_dtype == pl.UInt32:
        pos = [None if r is None else [None if x is None else max(x, 0) for x in r] for r in pos]
    if sl_dtype == pl.Int32:
        sl = [None if r is None else [None if x == 2 ** 40 else x for x in r] for r in sl]
    n = len(pos)
    df = pl.DataFrame({"input_ids": [None if r is None else [5] * len(r) for r in pos], "position_ids": pos,
                       "seq_lens": sl},
                      schema={"input_ids": pl.List(pl.Int64), "position_ids": pl.List(pos_dtype),
                              "seq_lens": pl.List(sl_dtype)})
    key = "packing.position_ids_not_reset:position_ids"
    res = audit_frame(df, config_from_dict({}))
    assert not [s for s in res.skipped if s.error], res.skipped
    fast = set(res.failing_rows.get(key, []))
    with patch("datacheck.checks.packing.fast_dtype", lambda *a, **k: False):
        lists = set(audit_frame(df, config_from_dict({})).failing_rows.get(key, []))
    assert fast == lists
    for i in range(n):
        p, s = pos[i], sl[i]
        if p is None or s is None or None in p or None in s or any(x < 0 or x > 2 ** 31 for x in s):
            continue
        assert (i in fast) == ref_not_reset(p, s), (p, s)


@SETTINGS
@given(lens=st.lists(st.integers(0, 9), min_size=1, max_size=8), same=st.booleans(), seed=st.integers(0, 2**16))
def test_row_of_a_position_matches_a_search_of_the_offsets(lens, same, seed):
    """The row of each flat position: a division when every row has one length (padded rows), a
    binary search of the offsets otherwise; both equal the plain scan of the rows' ranges."""
    if same:
        lens = [lens[0]] * len(lens)
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    rows = _flat._Rows.of(offsets, np.ones(len(lens), dtype=bool))
    assert rows.width == (lens[0] if same and lens[0] > 0 else rows.width)
    total = int(offsets[-1])
    idx = np.sort(np.random.default_rng(seed).integers(0, max(total, 1), size=min(total, 20))).astype(np.int64)
    want = [next(r for r in range(len(lens)) if offsets[r] <= k < offsets[r + 1]) for k in idx.tolist()]
    assert rows.row_of(idx).tolist() == want
