"""Property tests of the fine-tuning rules (sft, packing, content, positions, targets): each
vectorized check equals a plain-Python reference on random data, for both label conventions and
left and right padding."""
from __future__ import annotations

import os
from unittest.mock import patch

import polars as pl
from conftest import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from datacheck.checks import sft
from datacheck.checks.content import periodic_rows
from datacheck.engine.shard import audit_frame
from datacheck.model.config import config_from_dict

SETTINGS = settings(max_examples=examples(int(os.environ.get("DATACHECK_HYPOTHESIS_EXAMPLES", "25"))), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
IGN = -100
BOS, EOT, EOS, PAD = 1, 2, 3, 0
STOP = {EOT, EOS}


def failing(df: pl.DataFrame, config: dict) -> dict[str, set[int]]:
    res = audit_frame(df, config_from_dict(config))
    assert res.readable, res.findings
    assert not [s for s in res.skipped if s.error], res.skipped
    return {k: set(v) for k, v in res.failing_rows.items()}


@st.composite
def sft_rows(draw, n_max: int = 8):
    """Rows of equal-length input_ids / labels / assistant_mask / attention_mask (padding on a drawn side)."""
    n = draw(st.integers(1, n_max))
    side = draw(st.sampled_from(["right", "left"]))
    rows = []
    for _ in range(n):
        length = draw(st.integers(1, 10))
        real = draw(st.integers(0, length))
        ids = draw(st.lists(st.sampled_from([BOS, EOT, EOS, 5, 6, 7]), min_size=real, max_size=real))
        lab = [draw(st.sampled_from([IGN, x, 6])) for x in ids]
        am = draw(st.lists(st.sampled_from([0, 1]), min_size=real, max_size=real))
        pad = length - real
        if side == "right":
            rows.append((ids + [PAD] * pad, lab + [IGN] * pad, am + [0] * pad, [1] * real + [0] * pad))
        else:
            rows.append(([PAD] * pad + ids, [IGN] * pad + lab, [0] * pad + am, [0] * pad + [1] * real))
    df = pl.DataFrame({"input_ids": [r[0] for r in rows], "labels": [r[1] for r in rows],
                       "assistant_mask": [r[2] for r in rows], "attention_mask": [r[3] for r in rows]},
                      schema={c: pl.List(pl.Int64) for c in ("input_ids", "labels", "assistant_mask", "attention_mask")})
    return df, side, rows


def sup_tok(lab: list[int], k: int, shifted: bool) -> bool:
    if shifted:
        return k >= 1 and lab[k - 1] != IGN
    return lab[k] != IGN


def ref_prompt(row, shifted) -> bool:
    ids, lab, am, m = row
    for k in range(len(ids)):
        after = ids[k] in STOP and k >= 1 and am[k - 1] == 1
        if sup_tok(lab, k, shifted) and m[k] == 1 and am[k] != 1 and not after:
            return True
    return False


def ref_eot(row, shifted) -> bool:
    ids, lab, am, m = row
    for k in range(len(ids)):
        closing = ids[k] in STOP and (am[k] == 1 or (k >= 1 and am[k - 1] == 1))
        if closing and m[k] == 1 and not sup_tok(lab, k, shifted):
            return True
    return False


def ref_truncated(row, max_len) -> bool:
    ids, lab, am, m = row
    sup = [x for x in lab if x != IGN]
    return sum(m) >= max_len and bool(sup) and sup[-1] not in STOP


@SETTINGS
@given(rows=st.lists(st.lists(st.sampled_from([IGN, EOT, EOS, 5, 6, None]), max_size=10), min_size=1, max_size=8),
       max_len=st.integers(1, 10))
def test_truncated_response_without_mask_matches_reference(rows, max_len):
    """No attention_mask: the row's length is its real content; null labels are not supervised."""
    df = pl.DataFrame({"input_ids": [[5] * len(r) for r in rows], "labels": rows},
                      schema={"input_ids": pl.List(pl.Int64), "labels": pl.List(pl.Int64)})
    got = failing(df, {"tokens": {"eot_token_ids": [EOT], "eos_token_id": EOS, "max_seq_len": max_len}})

    def ref(lab):
        sup = [x for x in lab if x is not None and x != IGN]
        return len(lab) >= max_len and bool(sup) and sup[-1] not in STOP
    assert got.get("sft.truncated_response:labels", set()) == {i for i, r in enumerate(rows) if ref(r)}


@SETTINGS
@given(data=sft_rows(), max_len=st.integers(1, 10), tail=st.integers(1, 3))
def test_truncated_response_with_a_short_tail_matches_reference(data, max_len, tail):
    """The last supervised label is searched in the row's last ``_TAIL`` labels first, in the whole row
    where the tail has none: with a tail of 1-3 labels (rows of up to 10) both paths are taken."""
    df, side, rows = data
    cfg = {"tokens": {"eot_token_ids": [EOT], "eos_token_id": EOS, "pad_token_id": PAD, "padding_side": side,
                      "max_seq_len": max_len}}
    with patch.object(sft, "_TAIL", tail):
        got = failing(df, cfg)
    assert got.get("sft.truncated_response:labels", set()) == {
        i for i in range(len(rows)) if ref_truncated(rows[i], max_len)}


def ref_double_bos(row, side) -> bool:
    ids, lab, am, m = row
    start = len(ids) - sum(m) if side == "left" else 0
    return ids[start:start + 2] == [BOS, BOS]


@SETTINGS
@given(data=sft_rows(), shifted=st.booleans(), max_len=st.integers(1, 10))
def test_sft_rules_match_reference(data, shifted, max_len):
    df, side, rows = data
    cfg = {"tokens": {"eot_token_ids": [EOT], "eos_token_id": EOS, "bos_token_id": BOS, "pad_token_id": PAD,
                      "padding_side": side, "max_seq_len": max_len}, "labels": {"shifted": shifted}}
    got = failing(df, cfg)
    idx = range(len(rows))
    assert got.get("sft.prompt_supervised:labels", set()) == {i for i in idx if ref_prompt(rows[i], shifted)}
    assert got.get("sft.eot_unsupervised:labels", set()) == {i for i in idx if ref_eot(rows[i], shifted)}
    assert got.get("sft.truncated_response:labels", set()) == {i for i in idx if ref_truncated(rows[i], max_len)}
    assert got.get("sft.double_bos:input_ids", set()) == {i for i in idx if ref_double_bos(rows[i], side)}
    assert got.get("sft.assistant_mask_empty:assistant_mask", set()) == {
        i for i in idx if rows[i][2] and max(rows[i][2]) == 0}
    # padding.pad_attended: pad id with mask 1 (pad != eos here)
    assert got.get("padding.pad_attended:attention_mask", set()) == {
        i for i in idx if any(x == PAD and mm == 1 for x, mm in zip(rows[i][0], rows[i][3]))}


@st.composite
def ragged_sft_rows(draw):
    """Packed-looking rows (several EOT-closed turns) with null elements, null rows, rows whose
    lists differ in length and attention masks that are not binary (both left out of the position
    rules), padding on either side."""
    n = draw(st.integers(1, 8))
    side = draw(st.sampled_from(["right", "left"]))
    cols: dict[str, list] = {"input_ids": [], "labels": [], "assistant_mask": [], "attention_mask": []}
    for _ in range(n):
        if draw(st.integers(0, 9)) == 0:
            for c in cols:
                cols[c].append(None)
            continue
        real = draw(st.integers(0, 12))
        ids = draw(st.lists(st.sampled_from([BOS, EOT, EOS, 5, 6, 7, None]), min_size=real, max_size=real))
        lab = [draw(st.sampled_from([IGN, IGN, 6, None])) if x is None else draw(st.sampled_from([IGN, x, 6, None]))
               for x in ids]
        am = draw(st.lists(st.sampled_from([0, 1, 1, None]), min_size=real, max_size=real))
        att = [draw(st.sampled_from([1, 1, 1, 1, 2, None])) for _ in ids]
        pad = draw(st.integers(0, 3))
        if side == "right":
            ids, lab, am, att = ids + [PAD] * pad, lab + [IGN] * pad, am + [0] * pad, att + [0] * pad
        else:
            ids, lab, am, att = [PAD] * pad + ids, [IGN] * pad + lab, [0] * pad + am, [0] * pad + att
        if ids and draw(st.integers(0, 9)) == 0:
            lab = lab[:-1]  # lengths differ: length.mismatch, not a position rule
        for c, v in zip(cols, (ids, lab, am, att)):
            cols[c].append(v)
    return cols


def ref_flat_rules(cols: dict, i: int, shifted: bool, with_am: bool, with_att: bool) -> tuple[int, int]:
    """(prompt_supervised positions, eot_unsupervised positions) of row ``i``, plain Python."""
    ids, lab, am, att = (cols[c][i] for c in ("input_ids", "labels", "assistant_mask", "attention_mask"))
    if ids is None or len(lab) != len(ids):
        return 0, 0
    if with_att and any(x not in (0, 1) for x in att):
        return 0, 0

    def sup(k):
        j = k - 1 if shifted else k
        return j >= 0 and lab[j] is not None and lab[j] != IGN

    def asst(k):
        return k >= 0 and am[k] == 1

    prompt = eot = 0
    for k in range(len(ids)):
        real = att[k] == 1 if with_att else True
        stop = ids[k] in STOP
        if with_am and sup(k) and real and not asst(k) and not (stop and asst(k - 1)):
            prompt += 1
        closing = stop and ((asst(k) or asst(k - 1)) if with_am else (k >= 1 and sup(k - 1)))
        if closing and real and not sup(k):
            eot += 1
    return prompt, eot


@SETTINGS
@given(cols=ragged_sft_rows(), shifted=st.booleans(), with_am=st.booleans(), with_att=st.booleans(),
       bool_masks=st.booleans())
def test_sft_position_rules_on_ragged_rows_match_reference(cols, shifted, with_am, with_att, bool_masks):
    """sft.prompt_supervised / sft.eot_unsupervised: rows and position counts
    against the reference, both label conventions, with or without assistant / attention masks
    (Int64 or Boolean), nulls, null rows and rows left out of the position view."""
    data = {c: v for c, v in cols.items() if (c != "assistant_mask" or with_am) and (c != "attention_mask" or with_att)}
    df = pl.DataFrame(data, schema={c: pl.List(pl.Int64) for c in data})
    if bool_masks and with_am:
        df = df.with_columns(pl.col("assistant_mask").list.eval(pl.element() == 1))
        cols = {**cols, "assistant_mask": [None if r is None else [None if x is None else (1 if x == 1 else 0)
                                                                     for x in r] for r in cols["assistant_mask"]]}
    res = audit_frame(df, config_from_dict({"tokens": {"eot_token_ids": [EOT], "eos_token_id": EOS},
                                            "labels": {"shifted": shifted}}))
    assert not [s for s in res.skipped if s.error], res.skipped
    want = [ref_flat_rules(cols, i, shifted, with_am, with_att) for i in range(df.height)]
    for k, check in ((0, "sft.prompt_supervised"), (1, "sft.eot_unsupervised")):
        if check == "sft.prompt_supervised" and not with_am:
            assert any(s.check == check for s in res.skipped)
            continue
        rows = {i for i, w in enumerate(want) if w[k]}
        assert set(res.failing_rows.get(f"{check}:labels", [])) == rows
        f = [f for f in res.findings if f.check == check]
        assert (f[0].details.get("positions") if f else 0) == sum(w[k] for w in want)


def ref_template_spans(ids: list[int], tmpl: list[int]) -> list[bool]:
    inside, out = False, []
    for k in range(len(ids)):
        if k >= len(tmpl) and ids[k - len(tmpl):k] == tmpl:
            inside = True
        elif k >= 1 and ids[k - 1] in STOP:
            inside = False
        out.append(inside)
    return out


@SETTINGS
@given(data=sft_rows(), shifted=st.booleans())
def test_prompt_supervised_from_response_template(data, shifted):
    df, _side, rows = data
    df = df.drop("assistant_mask")
    tmpl = [5, 6]
    cfg = {"tokens": {"eot_token_ids": [EOT], "eos_token_id": EOS}, "labels": {"shifted": shifted},
           "sft": {"response_template_ids": tmpl}}
    got = failing(df, cfg)
    want_p, want_e = set(), set()
    for i, (ids, lab, _am, m) in enumerate(rows):
        span = ref_template_spans(ids, tmpl)
        asst = [1 if s else 0 for s in span]
        if ref_prompt((ids, lab, asst, m), shifted):
            want_p.add(i)
        if ref_eot((ids, lab, asst, m), shifted):
            want_e.add(i)
    assert got.get("sft.prompt_supervised:labels", set()) == want_p
    assert got.get("sft.eot_unsupervised:labels", set()) == want_e


# ---------------------------------------------------------------- packing
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


# ---------------------------------------------------------------- content, positions, targets
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
@given(rows=split_runs(), use_mask=st.booleans())
def test_periodic_rows_kernel_matches_reference(rows, use_mask):
    """The flat-buffer kernel (content.periodic_rows) row by row against the plain-Python reference,
    on runs cut across rows, with right/left padding masked or, without a mask, counted as ids."""
    ids_rows, masks = rows
    ids = pl.Series("input_ids", ids_rows, dtype=pl.List(pl.Int64))
    mask = pl.Series("attention_mask", masks, dtype=pl.List(pl.Int8)) if use_mask else None
    got = periodic_rows(ids, mask).to_list()
    want = [False if r is None else (ref_periodic_masked(r, m) if use_mask else
                                     ref_periodic_masked(r, [1] * len(r)))
            for r, m in zip(ids_rows, masks)]
    assert got == want
    df = pl.DataFrame({"input_ids": ids} if mask is None else {"input_ids": ids, "attention_mask": mask})
    res = audit_frame(df, config_from_dict({}))
    assert set(res.failing_rows.get("content.periodic_tokens:input_ids", [])) == {i for i, w in enumerate(want) if w}


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
    got = failing(df, {"labels": {"shifted": shifted}})
    assert got.get("labels.shift_mismatch:labels", set()) == {i for i, (a, b) in enumerate(rows) if ref_shift(a, b, shifted)}


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
