"""Property tests: every vectorized row check equals a plain-Python reference on random data.

Each test draws a small random frame (nulls, NaN, inf, empty lists, null lists, negative ids, -100
labels, non-binary masks included), audits it with ``runner.audit_shard(keep_rows=True)`` and
compares the full set of failing rows of each check (``ShardResult.failing_rows``) with the rows a
reference function, written with plain Python loops, says must fail. One reference per check.
"""
from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

import polars as pl
import pytest
from checkhelp import shard_result
from conftest import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SETTINGS = settings(max_examples=examples(int(os.environ.get("DATACHECK_HYPOTHESIS_EXAMPLES", "40"))), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def failing(df: pl.DataFrame, config: dict) -> dict[str, set[int]]:
    """{"check:column": failing rows} of ``df`` audited as one parquet shard."""
    with tempfile.TemporaryDirectory() as tmp:
        res = shard_result(Path(tmp), df, config)
    assert res.readable, res.findings
    assert not [s for s in res.skipped if "could not run" in s.reason], res.skipped
    return {k: set(v) for k, v in res.failing_rows.items()}


def rows_where(values: list, pred) -> set[int]:
    return {i for i, v in enumerate(values) if pred(v)}


# ---------------------------------------------------------------- strategies
floats = st.one_of(st.none(), st.just(float("nan")), st.just(float("inf")), st.just(float("-inf")),
                   st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6),
                   st.sampled_from([65504.0, 65505.0, -70000.0, 32752.0, 32753.0, 1e300]))
small_ints = st.one_of(st.none(), st.integers(-3, 12), st.sampled_from([-100, -1, 255, 1000]))
int_lists = st.one_of(st.none(), st.lists(small_ints, max_size=6))
texts = st.one_of(st.none(), st.text(alphabet=" \t\n\u00a0\u3000\u200b\ufeffab\u00e9\u4e2d", max_size=5))


def _rows(n_min: int = 1, n_max: int = 12):
    return st.integers(n_min, n_max)


# ---------------------------------------------------------------- finite
def ref_nan(v) -> bool:
    vals = v if isinstance(v, list) else [v]
    return any(x is not None and math.isnan(x) for x in vals)


def ref_inf(v) -> bool:
    vals = v if isinstance(v, list) else [v]
    return any(x is not None and math.isinf(x) for x in vals)


def ref_fp16_overflow(v, limit: float = 65504.0, warn_fraction: float = 0.5) -> bool:
    """Error (|x| > 65504) or warning (|x| > 0.5 x 65504) rows, both under one key."""
    vals = v if isinstance(v, list) else [v]
    return any(x is not None and math.isfinite(x) and abs(x) > limit * warn_fraction for x in vals)


@SETTINGS
@given(data=st.data(), n=_rows())
def test_finite_matches_reference(data, n):
    scal = data.draw(st.lists(floats, min_size=n, max_size=n))
    lst = data.draw(st.lists(st.one_of(st.none(), st.lists(floats, max_size=5)), min_size=n, max_size=n))
    df = pl.DataFrame({"x": scal, "xs": lst}, schema={"x": pl.Float64, "xs": pl.List(pl.Float64)})
    got = failing(df, {"numeric": {"compute_dtype": "fp16"}})
    for col, vals in (("x", scal), ("xs", lst)):
        assert got.get(f"finite.nan:{col}", set()) == rows_where(vals, lambda v: v is not None and ref_nan(v))
        assert got.get(f"finite.inf:{col}", set()) == rows_where(vals, lambda v: v is not None and ref_inf(v))
        assert got.get(f"finite.fp16_overflow:{col}", set()) == rows_where(
            vals, lambda v: v is not None and ref_fp16_overflow(v))


# ---------------------------------------------------------------- empty
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


masks = st.one_of(st.none(), st.lists(st.one_of(st.sampled_from([0, 0, 1, 1, 2, -1, None])), max_size=6))


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
    got = failing(df, {"tokens": tokens})
    assert got.get("empty.text:text", set()) == rows_where(text, ref_empty_text)
    assert got.get("empty.sequence:input_ids", set()) == rows_where(ids, ref_empty_sequence)
    if with_mask:
        want = {i for i in range(n) if ref_all_padding_mask(ids[i], mask[i])}
        assert got.get("empty.all_padding:attention_mask", set()) == want
    else:
        assert got.get("empty.all_padding:input_ids", set()) == rows_where(ids, lambda v: ref_all_padding_ids(v, 0))
    assert got.get("empty.no_supervised_tokens:labels", set()) == rows_where(
        labels, lambda v: ref_no_supervised(v, -100, max_len, side))


# ---------------------------------------------------------------- labels
def ref_label_null(v) -> bool:
    """A missing class label: null, or NaN in a float column."""
    return v is None or (isinstance(v, float) and math.isnan(v))


def ref_label_sentinel(v, ign: int | None) -> bool:
    return not ref_label_null(v) and v < 0 and v != ign


def ref_label_out_of_range(v, k: int, ign: int | None) -> bool:
    """>= num_classes, or (float labels) a fractional value; never the ignore index or a sentinel."""
    if ref_label_null(v) or v == ign:
        return False
    return v >= k or (v >= 0 and v != math.floor(v))


def ref_label_not_in_classes(v, classes: list[int], ign: int | None) -> bool:
    return not ref_label_null(v) and v not in classes and v != ign and not ref_label_sentinel(v, ign)


def ref_token_label_sentinel(lst, ign: int | None) -> bool:
    return lst is not None and any(x is not None and x < 0 and x != ign for x in lst)


def ref_token_label_out_of_range(lst, bound: int, ign: int | None) -> bool:
    return lst is not None and any(x is not None and x >= bound and x != ign for x in lst)


ignores = st.sampled_from([-100, -1, 255, None])


float_labels = st.one_of(small_ints.map(lambda v: None if v is None else float(v)),
                         st.sampled_from([float("nan"), 0.5, 1.5, -0.5, float("inf"), float("-inf")]))


@SETTINGS
@given(data=st.data(), n=_rows(), ign=ignores, k=st.integers(1, 6), sparse=st.booleans(), as_float=st.booleans())
def test_class_labels_match_reference(data, n, ign, k, sparse, as_float):
    label = data.draw(st.lists(float_labels if as_float else small_ints, min_size=n, max_size=n))
    df = pl.DataFrame({"label": label}, schema={"label": pl.Float64 if as_float else pl.Int64})
    labels_cfg: dict = {"ignore_index": ign if ign is not None else False}
    classes = [0, 2, 7, 255] if sparse else None
    if sparse:
        labels_cfg["classes"] = classes
    else:
        labels_cfg["num_classes"] = k
    # a float column is a class label when [columns] names it (inferred, it would be a regression target)
    got = failing(df, {"labels": labels_cfg, "columns": {"label": "label"}})
    assert got.get("labels.null:label", set()) == rows_where(label, ref_label_null)
    assert got.get("labels.unexpected_sentinel:label", set()) == rows_where(label, lambda v: ref_label_sentinel(v, ign))
    if sparse:
        want = rows_where(label, lambda v: ref_label_not_in_classes(v, classes, ign))
    else:
        want = rows_where(label, lambda v: ref_label_out_of_range(v, k, ign))
    assert got.get("labels.out_of_range:label", set()) == want


@SETTINGS
@given(data=st.data(), n=_rows(), ign=ignores, vocab=st.sampled_from([5, 10, 300]))
def test_token_labels_match_reference(data, n, ign, vocab):
    labels = data.draw(st.lists(int_lists, min_size=n, max_size=n))
    df = pl.DataFrame({"labels": labels}, schema={"labels": pl.List(pl.Int64)})
    got = failing(df, {"labels": {"ignore_index": ign if ign is not None else False},
                       "tokens": {"vocab_size": vocab}})
    assert got.get("labels.null:labels", set()) == rows_where(labels, lambda v: v is None)
    assert got.get("labels.unexpected_sentinel:labels", set()) == rows_where(
        labels, lambda v: ref_token_label_sentinel(v, ign))
    assert got.get("labels.out_of_range:labels", set()) == rows_where(
        labels, lambda v: ref_token_label_out_of_range(v, vocab, ign))


# ---------------------------------------------------------------- tokens and length
def ref_out_of_vocab(ids, vocab: int) -> bool:
    """An id outside [0, vocab), or a null id (it has no embedding row)."""
    return ids is not None and any(x is None or x < 0 or x >= vocab for x in ids)


def ref_length(ids, mask) -> int | None:
    """Attended tokens (the sum of the mask's non-null values) when the row has a mask, else the
    list length; None when the row has no input_ids."""
    if ids is None:
        return None
    if mask is not None:
        return sum(m for m in mask if m is not None)
    return len(ids)


def ref_over_max(ids, max_len: int, mask=None) -> bool:
    n = ref_length(ids, mask)
    return n is not None and n > max_len


def ref_mismatch(*lists) -> bool:
    lens = [None if x is None else len(x) for x in lists]
    return any(n != lens[0] for n in lens[1:])


@SETTINGS
@given(data=st.data(), n=_rows(), vocab=st.sampled_from([3, 10, 1000]), max_len=st.integers(1, 5),
       dtype=st.sampled_from([pl.Int64, pl.Int32, pl.UInt32]))
def test_tokens_and_length_match_reference(data, n, vocab, max_len, dtype):
    elem = small_ints if dtype != pl.UInt32 else st.one_of(st.none(), st.integers(0, 12), st.just(1000))
    lists = st.one_of(st.none(), st.lists(elem, max_size=6))
    ids = data.draw(st.lists(lists, min_size=n, max_size=n))
    mask = data.draw(st.lists(masks, min_size=n, max_size=n))
    labels = data.draw(st.lists(int_lists, min_size=n, max_size=n))
    df = pl.DataFrame({"input_ids": ids, "attention_mask": mask, "labels": labels},
                      schema={"input_ids": pl.List(dtype), "attention_mask": pl.List(pl.Int64),
                              "labels": pl.List(pl.Int64)})
    got = failing(df, {"tokens": {"vocab_size": vocab, "max_seq_len": max_len}})
    assert got.get("tokens.out_of_vocab:input_ids", set()) == rows_where(ids, lambda v: ref_out_of_vocab(v, vocab))
    assert got.get("length.over_max:input_ids", set()) == {i for i in range(n) if ref_over_max(ids[i], max_len, mask[i])}
    assert got.get("length.mismatch", set()) == {i for i in range(n) if ref_mismatch(ids[i], mask[i], labels[i])}


# ---------------------------------------------------------------- mask and padding
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
    got = failing(df, {"tokens": {"pad_token_id": pad, "padding_side": side}, "labels": {"ignore_index": ign}})
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


# ---------------------------------------------------------------- dup
def ref_dup_in_shard(rows: list[tuple]) -> set[int]:
    """Rows whose content (a tuple of the role columns' values) equals an earlier row's."""
    seen: set = set()
    out = set()
    for i, r in enumerate(rows):
        key = tuple(tuple(v) if isinstance(v, list) else v for v in r)
        if key in seen:
            out.add(i)
        seen.add(key)
    return out


@SETTINGS
@given(data=st.data(), n=_rows(1, 20), with_ids=st.booleans())
def test_dup_in_shard_matches_reference(data, n, with_ids):
    text = data.draw(st.lists(st.one_of(st.none(), st.sampled_from(["", "a", "b", " a"])), min_size=n, max_size=n))
    label = data.draw(st.lists(st.one_of(st.none(), st.integers(0, 1)), min_size=n, max_size=n))
    idx = list(range(n))  # a column with no role never makes rows distinct
    cols = {"text": text, "label": label, "idx": idx}
    schema = {"text": pl.String, "label": pl.Int64, "idx": pl.Int64}
    content = list(zip(text, label))
    if with_ids:
        ids = data.draw(st.lists(st.one_of(st.none(), st.lists(st.integers(0, 1), max_size=2)), min_size=n, max_size=n))
        cols["input_ids"], schema["input_ids"] = ids, pl.List(pl.Int64)
        content = list(zip(text, label, ids))
    got = failing(pl.DataFrame(cols, schema=schema), {})
    assert got.get("dup.exact_in_shard", set()) | got.get("dup.exact_in_shard:text", set()) == ref_dup_in_shard(content)


# ---------------------------------------------------------------- readers agree
@settings(max_examples=max(5, SETTINGS.max_examples // 4), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), n=_rows())
def test_formats_give_the_same_failing_rows(data, n):
    """The same rows read from parquet, Arrow IPC and JSONL fail the same checks on the same rows."""
    text = data.draw(st.lists(texts, min_size=n, max_size=n))
    label = data.draw(st.lists(small_ints, min_size=n, max_size=n))
    ids = data.draw(st.lists(int_lists, min_size=n, max_size=n))
    df = pl.DataFrame({"text": text, "label": label, "input_ids": ids},
                      schema={"text": pl.String, "label": pl.Int64, "input_ids": pl.List(pl.Int64)})
    cfg = {"labels": {"num_classes": 3}, "tokens": {"vocab_size": 10, "max_seq_len": 3, "pad_token_id": 0}}
    got = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("s.parquet", "s.arrow", "s.jsonl"):
            got[name] = shard_result(Path(tmp), df, cfg, name=name).failing_rows
    assert got["s.arrow"] == got["s.parquet"]
    assert got["s.jsonl"] == got["s.parquet"]


csv_texts = st.one_of(st.none(), st.text(alphabet=' ,;"\n\tab\u00e912.', max_size=6))


@settings(max_examples=max(5, SETTINGS.max_examples // 4), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), n=_rows())
def test_csv_gives_the_same_failing_rows_as_parquet(data, n):
    """Text with separators, quotes, newlines and whitespace survives the CSV reader: the scalar
    checks fail on the same rows as for parquet (a CSV cannot tell an empty field from a null)."""
    text = data.draw(st.lists(csv_texts, min_size=n, max_size=n))
    label = data.draw(st.lists(small_ints, min_size=n, max_size=n))
    df = pl.DataFrame({"text": text, "label": label}, schema={"text": pl.String, "label": pl.Int64})
    cfg = {"labels": {"num_classes": 3}}
    as_read = df.with_columns(pl.when(pl.col("text") == "").then(None).otherwise(pl.col("text")).alias("text"))
    with tempfile.TemporaryDirectory() as tmp:
        want = shard_result(Path(tmp), as_read, cfg).failing_rows
        got = shard_result(Path(tmp), df, cfg, name="s.csv").failing_rows
    assert got == want


@SETTINGS
@given(data=st.data(), n=_rows(), max_len=st.integers(1, 4))
def test_length_stats_match_reference(data, n, max_len):
    """The exact length histogram, truncation rate and padding fraction equal plain-Python counts."""
    ids = data.draw(st.lists(int_lists, min_size=n, max_size=n))
    mask = [None if x is None else data.draw(st.lists(st.sampled_from([0, 1]), min_size=len(x), max_size=len(x)))
            for x in ids]
    df = pl.DataFrame({"input_ids": ids, "attention_mask": mask},
                      schema={"input_ids": pl.List(pl.Int64), "attention_mask": pl.List(pl.Int64)})
    with tempfile.TemporaryDirectory() as tmp:
        stats = shard_result(Path(tmp), df, {"tokens": {"max_seq_len": max_len}}).stats
    lens = [ref_length(x, m) for x, m in zip(ids, mask) if x is not None]  # attended tokens
    hist = sorted([v, lens.count(v)] for v in set(lens))
    assert stats["lengths"]["histogram"] == hist
    if lens:
        assert stats["lengths"]["max"] == max(lens) and stats["lengths"]["min"] == min(lens)
        ordered = sorted(lens)
        for q, key in ((0.5, "p50"), (0.9, "p90"), (0.99, "p99")):  # nearest rank: the ceil(q*n)-th smallest
            assert stats["lengths"][key] == ordered[max(1, math.ceil(q * len(ordered))) - 1]
        assert stats["truncation_rate"] == pytest.approx(sum(v > max_len for v in lens) / len(lens))
    flat = [v for m in mask if m is not None for v in m]
    if flat:
        assert stats["padding_fraction"] == pytest.approx(1 - sum(flat) / len(flat))
