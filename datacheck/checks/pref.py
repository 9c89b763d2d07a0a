"""pref: preference pairs (DPO, reward models): ``chosen`` and ``rejected`` per row.

Each column holds text (String), token ids (list of int), a message struct with a ``value`` or
``content`` field (LLaMA-Factory's ShareGPT preference layout), or a list of such messages.
"""
from __future__ import annotations

from typing import Iterable

import polars as pl

from datacheck.checks._expr import truncated
from datacheck.checks.registry import RowCheck, ShardContext, ShardItem, check
from datacheck.model.findings import Skipped

__all__ = ["identical_pair", "empty_response"]

_TEXT_FIELDS = ("content", "value", "text")


def _text_field(dtype: pl.DataType) -> str | None:
    if isinstance(dtype, pl.Struct):
        names = [f.name for f in dtype.fields]
        return next((f for f in _TEXT_FIELDS if f in names), None)
    return None


def _empty(col: str, dtype: pl.DataType) -> pl.Expr | None:
    """Per row: the response is null, empty or whitespace-only (None for a dtype it cannot judge)."""
    c = pl.col(col)
    if dtype == pl.String:
        return c.is_null() | (c.str.strip_chars().str.len_chars() == 0)
    if isinstance(dtype, pl.Struct):
        f = _text_field(dtype)
        if f is None:
            return None
        t = c.struct.field(f)
        return c.is_null() | t.is_null() | (t.cast(pl.String).str.strip_chars().str.len_chars() == 0)
    if isinstance(dtype, (pl.List, pl.Array)):
        inner = dtype.inner
        base = c.is_null() | (c.list.len() == 0)
        if isinstance(inner, pl.Struct) and (f := _text_field(inner)) is not None:
            last = c.list.last().struct.field(f)
            return base | last.is_null() | (last.cast(pl.String).str.strip_chars().str.len_chars() == 0)
        return base
    return None


def _example(col: str, dtype: pl.DataType) -> pl.Expr | None:
    """The value to show: text cut to 200 characters, or the first 16 ids; None for messages."""
    if dtype == pl.String:
        return pl.col(col).str.slice(0, 200)
    if isinstance(dtype, pl.List) and not isinstance(dtype.inner, pl.Struct):
        return pl.col(col).list.head(16)
    return None


@check("pref.empty_response", roles=("chosen", "rejected"))
def empty_response(ctx: ShardContext) -> Iterable[ShardItem]:
    """``pref.empty_response``: ``chosen`` or ``rejected`` is null, empty or whitespace-only (text:
    after stripping; token ids: an empty list; a message struct: its content/value; a list of
    messages: empty, or its last message's content empty). One finding per column."""
    for col in (ctx.roles.chosen, ctx.roles.rejected):
        bad = _empty(col, ctx.schema[col])
        if bad is None:
            yield Skipped("pref.empty_response", f"{col!r} has dtype {ctx.schema[col]}: not text, token ids or messages")
            continue
        yield RowCheck(check="pref.empty_response", column=col, fails=bad, example=_example(col, ctx.schema[col]),
                       message=lambda n, d, col=col: (f"{n} row(s) have an empty {col!r} response (null, empty or "
                                                      "whitespace-only): the pair teaches nothing or the wrong thing"))


@check("pref.identical_pair", roles=("chosen", "rejected"))
def identical_pair(ctx: ShardContext) -> Iterable[ShardItem]:
    """``pref.identical_pair``: ``chosen`` equals ``rejected``: exact text (or message) equality, or
    for token-id lists equality after truncation to ``max_seq_len`` on ``truncation_side`` (when
    set). The DPO loss of such a pair is the constant ln 2 with zero gradient. Null pairs are
    ``pref.empty_response``, not this."""
    a, b = ctx.roles.chosen, ctx.roles.rejected
    ta, tb = ctx.schema[a], ctx.schema[b]
    if ta != tb:
        yield Skipped("pref.identical_pair", f"{a!r} ({ta}) and {b!r} ({tb}) have different dtypes")
        return
    tok = ctx.cfg.tokens
    if isinstance(ta, pl.List) and ta.inner.is_integer():
        ea, eb = truncated(a, tok.max_seq_len, tok.truncation_side), truncated(b, tok.max_seq_len, tok.truncation_side)
        how = f" after truncation to max_seq_len={tok.max_seq_len} ({tok.truncation_side})" if tok.max_seq_len else ""
    else:
        ea, eb, how = pl.col(a), pl.col(b), ""
    yield RowCheck(check="pref.identical_pair", column=None, fails=(ea == eb).fill_null(False),
                   example=_example(a, ta),
                   message=lambda n, d, how=how: (f"{n} pair(s) have chosen equal to rejected{how}: the DPO loss is "
                                                  "the constant ln 2 with zero gradient. Drop them or fix the pairing"))
