"""Position-wise helpers for the checks evaluated in the shard's flat position view.

The view (:func:`datacheck.checks.mask.positions_view`) holds one row per token position, in row
order, with ``__row`` (the 0-based row of the position) and the aligned token columns as scalars.
These helpers express "the previous / next position of the same row", "the first position of a
row", "the position is a supervised target" and "the position is inside an assistant span" as
plain polars expressions over that frame (shifts compared on ``__row``; no Python over rows).
"""
from __future__ import annotations

import polars as pl

from datacheck.checks.registry import ShardContext

__all__ = ["ROW", "row_first", "prev", "nxt", "supervised_token", "template_span", "assistant_span", "in_row"]

ROW = pl.col("__row")


def row_first() -> pl.Expr:
    """True at the first position of each row."""
    return (ROW != ROW.shift(1)).fill_null(True)


def prev(x: pl.Expr, k: int = 1) -> pl.Expr:
    """``x`` at the position ``k`` before, when it is in the same row; else null."""
    return pl.when(ROW.shift(k) == ROW).then(x.shift(k))


def nxt(x: pl.Expr, k: int = 1) -> pl.Expr:
    """``x`` at the position ``k`` after, when it is in the same row; else null."""
    return pl.when(ROW.shift(-k) == ROW).then(x.shift(-k))


def in_row(x: pl.Expr) -> pl.Expr:
    """``x`` evaluated per row (a window over ``__row``)."""
    return x.over("__row")


def supervised_token(labels: str, ignore: int, shifted: bool) -> pl.Expr:
    """True where the token at this position is a supervised target (null-safe, False for nulls).

    Unshifted labels (Hugging Face: the model shifts): ``labels[k] != ignore_index``. Shifted labels
    (``labels[i]`` is the target of position i, i.e. token i+1): ``labels[k-1] != ignore_index``.
    """
    lab = pl.col(labels)
    sup = (prev(lab) if shifted else lab) != ignore
    return sup.fill_null(False)


def template_span(ids: str, template: list[int], stop: tuple[int, ...]) -> pl.Expr:
    """True at the positions of an assistant span found from token ids: from the position after a
    complete ``response_template_ids`` match up to and including the next stop (end-of-turn/eos) id
    in the same row (TRL's completion-only collator delimits spans the same way)."""
    x = pl.col(ids)
    k = len(template)
    ends = pl.lit(True)
    for t, tok in enumerate(template):
        ends = ends & (prev(x, k - 1 - t) == tok if k - 1 - t else x == tok)
    ends = ends.fill_null(False)
    is_stop = x.is_in(list(stop)).fill_null(False) if stop else pl.lit(False)
    mark = (pl.when(row_first()).then(pl.lit(0, pl.Int8))
            .when(prev(ends).fill_null(False)).then(pl.lit(1, pl.Int8))
            .when(prev(is_stop).fill_null(False)).then(pl.lit(0, pl.Int8)))
    return mark.forward_fill() == 1


def assistant_span(ctx: ShardContext) -> tuple[pl.Expr, str] | None:
    """(per-position "inside an assistant span" expression, where it comes from) or None when the
    shard has neither an ``assistant_mask`` nor ``[sft] response_template_ids`` with input_ids."""
    r, cfg = ctx.roles, ctx.cfg
    if r.assistant_mask is not None:
        return (pl.col(r.assistant_mask).cast(pl.Int64) == 1).fill_null(False), f"{r.assistant_mask!r}"
    tmpl = cfg.sft.response_template_ids
    if tmpl and r.input_ids is not None:
        return template_span(r.input_ids, list(tmpl), cfg.tokens.stop_ids), "[sft] response_template_ids"
    return None
