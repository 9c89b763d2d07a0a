"""length: sequence lengths against max_seq_len, list columns that must align, and length statistics
(exact histograms: lengths are integers, so histograms merge exactly across shards)."""
from __future__ import annotations

from typing import Any, Iterable

import polars as pl

from datacheck.checks import RowCheck, ShardContext, ShardItem, Stat, shard_checks
from datacheck.checks._expr import counts_to_pairs
from datacheck.findings import Skipped
from datacheck.roles import is_list

__all__ = ["length_checks", "histogram_summary", "quantile_from_hist"]


def quantile_from_hist(hist: list[list[int]], q: float) -> int | None:
    """The q-quantile (nearest rank, ``ceil(q*n)``-th smallest) of an exact histogram ``[[len, count], ...]`` sorted by len."""
    import math

    n = sum(c for _, c in hist)
    if n == 0:
        return None
    rank = max(1, math.ceil(q * n))
    acc = 0
    for v, c in hist:
        acc += c
        if acc >= rank:
            return v
    return hist[-1][0]


def histogram_summary(hist: list[list[int]]) -> dict[str, Any]:
    """min/p50/p90/p99/max/mean of an exact histogram."""
    hist = sorted([h for h in hist if h[0] is not None], key=lambda h: h[0])
    n = sum(c for _, c in hist)
    if not n:
        return {"count": 0}
    return {
        "count": n,
        "min": hist[0][0],
        "p50": quantile_from_hist(hist, 0.5),
        "p90": quantile_from_hist(hist, 0.9),
        "p99": quantile_from_hist(hist, 0.99),
        "max": hist[-1][0],
        "mean": sum(v * c for v, c in hist) / n,
    }


def _hist_post(column: str, unit: str):
    def post(v: Any) -> dict[str, Any]:
        hist = sorted([[p[0], p[1]] for p in counts_to_pairs(v) if p[0] is not None])
        return {"column": column, "unit": unit, "histogram": hist, **histogram_summary(hist)}

    return post


@shard_checks("length")
def length_checks(ctx: ShardContext) -> Iterable[ShardItem]:
    """``length.over_max`` (input_ids longer than ``max_seq_len``: truncated by the trainer) and
    ``length.mismatch`` (in a row, ``input_ids``/``attention_mask``/``labels``/``token_type_ids``, and
    each ``aligned`` group, differ in length; in a seq2seq layout with ``decoder_input_ids`` or
    ``decoder_attention_mask``, ``labels`` align with those decoder columns instead), plus the
    ``lengths`` stats."""
    r, tok = ctx.roles, ctx.cfg.tokens
    ids = r.input_ids
    if ids is not None and is_list(ctx.schema[ids]):
        L = pl.col(ids).list.len()
        yield Stat(key="lengths", expr=L.value_counts(name="count").implode(), post=_hist_post(ids, "tokens"))
        if tok.max_seq_len is not None:
            m = tok.max_seq_len
            yield RowCheck(
                check="length.over_max", column=ids, fails=L > m, example=L,
                details={"longest": L.max()},
                message=lambda n, d, m=m: (f"{n} row(s) are longer than max_seq_len {m} (longest {d.get('longest')}) "
                                           f"and will be truncated ({tok.truncation_side} side)"),
            )
            yield Stat(key="truncation_rate", expr=(L > m).mean())
        else:
            yield Skipped("length.over_max", "[tokens] max_seq_len is not set")
    else:
        yield Skipped("length.over_max", "no input_ids column (set [columns] input_ids)")
        text = [c for c in r.text if ctx.schema[c] == pl.String]
        if text:
            total = pl.sum_horizontal([pl.col(c).str.len_chars().fill_null(0) for c in text])
            yield Stat(key="lengths", expr=total.value_counts(name="count").implode(),
                       post=_hist_post("+".join(text), "chars"))
    groups: list[tuple[str, ...]] = []
    # seq2seq (Hugging Face): labels align with the decoder side (decoder_input_ids /
    # decoder_attention_mask), not with the encoder's input_ids.
    decoder = tuple(c for c in ("decoder_input_ids", "decoder_attention_mask") if c in ctx.schema and is_list(ctx.schema[c]))
    enc_labels = None if decoder else r.labels
    base = tuple(c for c in (r.input_ids, r.attention_mask, enc_labels, r.token_type_ids)
                 if c is not None and is_list(ctx.schema[c]))
    if len(base) >= 2:
        groups.append(base)
    dec = tuple(c for c in (*decoder, r.labels if decoder else None) if c is not None and is_list(ctx.schema[c]))
    if len(dec) >= 2:
        groups.append(dec)
    groups += [g for g in r.aligned if all(is_list(ctx.schema[c]) for c in g)]
    if not groups:
        yield Skipped("length.mismatch", "fewer than two list columns that must align")
    for g in groups:
        lens = [pl.col(c).list.len() for c in g]
        fails = pl.any_horizontal([x.ne_missing(lens[0]) for x in lens[1:]])
        yield RowCheck(
            check="length.mismatch", column=None, fails=fails,
            example=pl.concat_str([pl.format("{}={}", pl.lit(c), pl.col(c).list.len()) for c in g], separator=", "),
            message=lambda n, d, g=g: (f"{n} row(s) have list columns of different lengths among {list(g)}: "
                                       "positions no longer line up (a collator will fail or misalign labels)"),
        )
