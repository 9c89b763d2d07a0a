"""The sft rules on tokenized rows (sft.prompt_supervised, sft.eot_unsupervised, sft.truncated_response,
sft.double_bos, sft.assistant_mask_empty) on inline frames and against plain-Python references, for both
label conventions and left and right padding; their skip reasons and the supervised-token stats."""
from __future__ import annotations

from unittest.mock import patch

import polars as pl
from hypothesis import given
from hypothesis import strategies as st
from refs import BOS, EOS, EOT, IGN, PAD, STOP, frame_failing, ragged_sft_rows, ref_flat_rules, rows, skip
from refs import FRAME_SETTINGS as SETTINGS
from refs import run as run_any

from datacheck.checks import sft
from datacheck.engine.shard import audit_frame
from datacheck.model.config import config_from_dict

#: the rows of these tests are fine-tuning rows; the layout is stated, so that the rules run whatever
#: the recognizer would make of a few synthetic rows (tests/unit/derive/test_layout.py tests it)
SFT_LAYOUT = {"layout": "sft_tokenized"}


def _as_sft(cfg: dict | None) -> dict:
    cfg = dict(cfg or {})
    return {**cfg, "dataset": {**SFT_LAYOUT, **cfg.get("dataset", {})}}


def failing(df: pl.DataFrame, cfg: dict) -> dict[str, set[int]]:
    """``refs.frame_failing`` on ``sft_tokenized`` rows."""
    return frame_failing(df, _as_sft(cfg))


def run(df, cfg: dict | None = None):
    """``df`` audited in memory as ``sft_tokenized`` rows with the config ``cfg``."""
    return run_any(df, _as_sft(cfg))


def test_sft_skips_name_the_missing_fact():
    df = pl.DataFrame({"input_ids": [[1, 2]], "labels": [[1, 2]]})
    res = run(df)
    assert "assistant_mask" in skip(res, "sft.prompt_supervised")
    assert "eot_token_ids" in skip(res, "sft.eot_unsupervised")
    assert skip(res, "sft.double_bos") == "[tokens] bos_token_id is not set"
    assert skip(res, "sft.truncated_response") == "[tokens] max_seq_len is not set"


def test_sft_supervised_token_counts_for_every_row():
    df = pl.DataFrame({"input_ids": [[1, 5, 2], [1, 5, 6]], "labels": [[IGN, 5, 2], [IGN, IGN, IGN]],
                       "assistant_mask": [[0, 1, 1], [0, 1, 1]]})
    st = run(df, {"tokens": {"eos_token_id": 2}}).stats["supervised_tokens"]
    assert st["per_row"] == [2, 0] and st["zero_rows"] == 1 and st["total"] == 2


def test_truncated_response_rows_and_last_ids():
    """Only rows whose mask reaches max_seq_len are judged; the details give the cut last ids."""
    df = pl.DataFrame({"input_ids": [[5, 6, 7, 8], [5, 6, 2, 0], [5, 6, 7, 9], [5, 6, 2, 2], [5, 6, 7, 8]],
                       "labels": [[IGN, 6, 7, 8], [IGN, 6, 2, IGN], [IGN, 6, 7, 9], [IGN, 6, 2, IGN], [IGN] * 4],
                       "attention_mask": [[1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]]})
    res = run(df, {"tokens": {"eot_token_ids": [2], "max_seq_len": 4}})
    assert rows(res, "sft.truncated_response:labels") == [0, 2]  # 3 ends supervised on 2; 4 has no target
    f = next(f for f in res.findings if f.check == "sft.truncated_response")
    assert f.details["last_ids"] == [{"labels": 8, "count": 1}, {"labels": 9, "count": 1}]


def test_truncated_response_leaves_rows_of_other_checks():
    """A row whose lists differ in length (length.mismatch) or whose mask is not binary is not judged."""
    df = pl.DataFrame({"input_ids": [[5, 6, 7], [5, 6, 7, 8], [5, 6, 7, 8]],
                       "labels": [[IGN, 6, 7, 8], [IGN, 6, 7, 8], [IGN, 6, 7, 8]],
                       "attention_mask": [[1, 1, 1, 1], [1, 2, 1, 1], [1, 1, 1, 1]]})
    res = run(df, {"tokens": {"eot_token_ids": [2], "max_seq_len": 4}})
    assert rows(res, "sft.truncated_response:labels") == [2]


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
                                            "labels": {"shifted": shifted}, "dataset": SFT_LAYOUT}))
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


def test_double_bos_with_a_uint64_mask_beyond_int64_is_judged():
    """Left padding, a uint64 attention_mask: the sequence starts at len - sum(mask); a mask value of
    uint64 -1 (mask.non_binary's) no longer makes the check raise (a strict cast to Int64)."""
    u = 2**64 - 1
    df = pl.DataFrame({"input_ids": [[PAD, BOS, BOS, 5], [PAD, BOS, 5, 6]], "labels": [[IGN, IGN, 5, 6]] * 2,
                       "attention_mask": [[0, 1, 1, 1], [0, u, 1, 1]]},
                      schema={"input_ids": pl.List(pl.Int64), "labels": pl.List(pl.Int64),
                              "attention_mask": pl.List(pl.UInt64)})
    res = run(df, {"tokens": {"bos_token_id": BOS, "padding_side": "left", "pad_token_id": PAD}})
    assert not [s for s in res.check_errors if s.check == "sft.double_bos"], res.check_errors
    assert rows(res, "sft.double_bos:input_ids") == [0]
