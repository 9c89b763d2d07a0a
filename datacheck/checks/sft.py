"""sft: supervision of tokenized fine-tuning rows (chat and completion).

Tokenized rows: ``input_ids`` and token ``labels`` (list of int, shape (rows, seq_len)), optionally
``assistant_mask`` (0/1 per token, Hugging Face's ``return_assistant_tokens_mask``) and
``attention_mask``. The position-wise rules run in the shard's flat position view
(:func:`datacheck.checks.mask.positions_view`), fused with every other check into the shard's
one query; a row fails when any of its positions does. Both label conventions are handled
(``[labels] shifted``): a token ``k`` is a supervised target when ``labels[k] != ignore_index``
(unshifted) or ``labels[k-1] != ignore_index`` (shifted).
"""
from __future__ import annotations

from typing import Iterable

import polars as pl

from datacheck.checks._pos import assistant_span, in_row, prev, supervised_token
from datacheck.checks.mask import positions_view
from datacheck.checks.registry import (
    RowCheck,
    ShardContext,
    ShardItem,
    Stat,
    check,
    concat_parts,
    fields_parts,
    max_parts,
    measure,
    min_parts,
    sum_parts,
)
from datacheck.checks.roledtype import problem
from datacheck.model.findings import Skipped
from datacheck.model.roles import inner_dtype

__all__ = ["assistant_mask_empty", "prompt_supervised", "eot_unsupervised", "truncated_response", "double_bos",
           "supervision_stats"]

_NEEDS_LABELS = "needs a token labels column, input_ids and [labels] ignore_index"
_NO_STOP = "needs [tokens] eot_token_ids or eos_token_id (the end-of-turn ids)"


def _usable(ctx: ShardContext, *roles: str) -> bool:
    """Every role is present, list-typed and of a dtype that serves it (``schema.dtype`` otherwise)."""
    return all(getattr(ctx.roles, r) is not None and problem(ctx, r) is None for r in roles)


def _real(ctx: ShardContext) -> pl.Expr:
    """Per position in the view: the position is real content (attention_mask 1, or no mask)."""
    m = ctx.roles.attention_mask
    if m is None or problem(ctx, "attention_mask") is not None:
        return pl.lit(True)
    return (pl.col(m).cast(pl.Int64) == 1).fill_null(False)


@check("sft.assistant_mask_empty", roles=("assistant_mask",))
def assistant_mask_empty(ctx: ShardContext) -> Iterable[ShardItem]:
    """``sft.assistant_mask_empty``: ``assistant_mask`` (list of 0/1, shape (rows, seq_len)) has at
    least one position and no 1 in a row. A chat template without ``{% generation %}`` markers makes
    ``apply_chat_template(return_assistant_tokens_mask=True)`` return all zeros: with assistant-only
    loss nothing of the row is trained. Native list kernels (``list.max``)."""
    col = ctx.roles.assistant_mask
    c = pl.col(col)
    if inner_dtype(ctx.schema[col]) == pl.Boolean:
        c = c.cast(pl.List(pl.Int8))
    yield RowCheck(
        check="sft.assistant_mask_empty", column=col,
        fails=(c.list.len() > 0) & (c.list.max() == 0),
        example=pl.format("{} positions, none marked assistant", c.list.len()),
        message=lambda n, d, col=col: (f"{n} row(s) have an {col!r} of all zeros: no assistant token is marked, so "
                                       "assistant-only loss trains nothing on them. The chat template lacks "
                                       "{% generation %} ... {% endgeneration %} around the assistant content"),
    )


@check("sft.prompt_supervised", roles=("labels", "input_ids"), facts=("labels.ignore_index",),
       reasons={"labels": _NEEDS_LABELS, "input_ids": _NEEDS_LABELS, "labels.ignore_index": _NEEDS_LABELS})
def prompt_supervised(ctx: ShardContext) -> Iterable[ShardItem]:
    """``sft.prompt_supervised``: a token outside the assistant spans is a supervised target.

    The spans come from ``assistant_mask`` (1 = assistant token), else from
    ``[sft] response_template_ids`` up to and including the next end-of-turn id. A position fails
    when its token is a supervised target (see the module docstring for both label conventions),
    it is real content (attention_mask 1 or no mask; padding is ``padding.label_not_ignored``), it
    is outside the spans, and it is not the end-of-turn/eos id right after a span (templates that
    leave ``<|im_end|>`` outside ``{% generation %}`` while the trainer supervises it are right).
    Skipped without spans: "needs assistant_mask or [sft] response_template_ids" (the dataset-level
    "every row 100% supervised" variant of CHECKS.md is not built).
    """
    span = assistant_span(ctx)
    if span is None:
        yield Skipped("sft.prompt_supervised", "needs an assistant_mask column or [sft] response_template_ids "
                      "(the token ids that open an assistant turn) to know the assistant spans")
        return
    asst, source = span
    r, ign, tok = ctx.roles, ctx.cfg.labels.ignore, ctx.cfg.tokens
    sup = supervised_token(r.labels, ign, ctx.cfg.labels.shifted)
    stop = tok.stop_ids
    after_span = (pl.col(r.input_ids).is_in(list(stop)) & prev(asst).fill_null(False)) if stop else pl.lit(False)
    bad = sup & _real(ctx) & ~asst & ~after_span.fill_null(False)
    yield RowCheck(
        check="sft.prompt_supervised", column=r.labels, fails=bad, view=positions_view(ctx),
        details={"positions": bad.sum()}, details_merge={"positions": sum_parts},
        message=lambda n, d, source=source: (f"{n} row(s) supervise tokens outside the assistant spans ({source}; "
                                             f"{d.get('positions')} positions): system/user tokens are trained on. "
                                             "Set their labels to ignore_index"),
    )


@check("sft.eot_unsupervised", roles=("labels", "input_ids"), facts=("labels.ignore_index",),
       reasons={"labels": _NEEDS_LABELS, "input_ids": _NEEDS_LABELS, "labels.ignore_index": _NEEDS_LABELS})
def eot_unsupervised(ctx: ShardContext) -> Iterable[ShardItem]:
    """``sft.eot_unsupervised`` (warn): the end-of-turn token closing an assistant turn is not a
    supervised target, so the model never learns to stop.

    A closing end-of-turn is an ``eot_token_ids``/``eos_token_id`` position of real content that is
    inside an assistant span or right after one (spans from ``assistant_mask`` or
    ``response_template_ids``); without spans, one right after a supervised token. The message
    gives the share of rows.
    """
    stop = ctx.cfg.tokens.stop_ids
    if not stop:
        yield Skipped("sft.eot_unsupervised", _NO_STOP)
        return
    r, ign = ctx.roles, ctx.cfg.labels.ignore
    sup = supervised_token(r.labels, ign, ctx.cfg.labels.shifted)
    is_stop = pl.col(r.input_ids).is_in(list(stop)).fill_null(False)
    span = assistant_span(ctx)
    if span is None:
        closing = is_stop & prev(sup).fill_null(False)
    else:
        asst = span[0]
        closing = is_stop & (asst | prev(asst).fill_null(False))
    bad = closing & _real(ctx) & ~sup
    yield RowCheck(
        check="sft.eot_unsupervised", column=r.labels, fails=bad, view=positions_view(ctx),
        details={"positions": bad.sum()}, details_merge={"positions": sum_parts},
        message=lambda n, d, stop=stop: (f"{n} row(s) do not supervise the end-of-turn id ({', '.join(map(str, stop))}) "
                                         f"that closes an assistant turn ({d.get('positions')} positions): the model "
                                         "never learns to stop. Keep the label of the end-of-turn token"),
    )


@check("sft.truncated_response", roles=("labels",), facts=("labels.ignore_index", "tokens.max_seq_len"),
       reasons={"labels": _NEEDS_LABELS})
def truncated_response(ctx: ShardContext) -> Iterable[ShardItem]:
    """``sft.truncated_response`` (warn): the row is ``max_seq_len`` long (its real content: the
    attention_mask's 1s when there is a mask, else the list length) and its last supervised
    target (the last label other than ``ignore_index``; with either convention the label value is
    the target token id) is not an end-of-turn/eos id: the response was cut. Rows with no
    supervised label are ``empty.no_supervised_tokens``, not this."""
    stop = ctx.cfg.tokens.stop_ids
    if not stop:
        yield Skipped("sft.truncated_response", _NO_STOP)
        return
    r, ign, max_len = ctx.roles, ctx.cfg.labels.ignore, ctx.cfg.tokens.max_seq_len
    lab = pl.col(r.labels)
    sup = (lab != ign).fill_null(False)
    last = sup & (in_row(sup.cast(pl.UInt32).cum_sum(reverse=True)) == 1)
    full = in_row(_real(ctx).cast(pl.UInt32).sum()) >= max_len
    bad = last & full & ~lab.is_in(list(stop)).fill_null(False)
    yield RowCheck(
        check="sft.truncated_response", column=r.labels, fails=bad, view=positions_view(ctx),
        details={"last_ids": lab.filter(bad).value_counts(sort=True, name="count").head(5).implode()},
        message=lambda n, d, m=max_len: (f"{n} row(s) are max_seq_len={m} long and their last supervised token is "
                                         "not an end-of-turn/eos id: the response was cut. Raise max_seq_len or "
                                         "drop/split the long conversations"),
    )


@check("sft.double_bos", roles=("input_ids",), facts=("tokens.bos_token_id",))
def double_bos(ctx: ShardContext) -> Iterable[ShardItem]:
    """``sft.double_bos`` (warn): the sequence starts with ``bos_token_id`` twice (the chat template
    and the tokenizer both add it). With left padding and an attention_mask, the sequence starts
    at its first real position (``len - sum(mask)``). Native list kernels (``list.get``)."""
    r, tok = ctx.roles, ctx.cfg.tokens
    ids, bos = pl.col(r.input_ids), tok.bos_token_id
    start: pl.Expr | int = 0
    if tok.padding_side == "left" and _usable(ctx, "attention_mask"):
        m = pl.col(r.attention_mask).cast(pl.List(pl.Int64))
        start = ids.list.len() - m.list.sum()
    first = ids.list.get(start, null_on_oob=True)
    second = ids.list.get(start + 1, null_on_oob=True)
    yield RowCheck(
        check="sft.double_bos", column=r.input_ids, fails=(first == bos) & (second == bos),
        example=ids.list.head(4),
        message=lambda n, d, bos=bos: (f"{n} row(s) start with bos_token_id {bos} twice: the chat template and the "
                                       "tokenizer both add it. Tokenize the rendered text with add_special_tokens=False"),
    )


@measure("sft")
def supervision_stats(ctx: ShardContext) -> Iterable[Stat]:
    """``supervised_tokens``: per-row supervised-token counts of every row (list of int, one per
    row, in row order; a supervised token is a label other than ``ignore_index``), with their
    total, min and max; only for shards with token labels and an assistant_mask or ``[sft]``."""
    r, ign = ctx.roles, ctx.cfg.labels.ignore
    if ign is None or not _usable(ctx, "labels"):
        return
    if r.assistant_mask is None and ctx.cfg.sft.response_template_ids is None:
        return
    per_row = (pl.col(r.labels).list.len() - pl.col(r.labels).list.count_matches(ign)).cast(pl.UInt32)
    yield Stat(key="supervised_tokens", expr=pl.struct(
        per_row=per_row.implode(), total=per_row.sum(), min=per_row.min(), max=per_row.max(),
        zero_rows=(per_row == 0).sum()), post=lambda v: dict(v) if v else None,
        merge=fields_parts(per_row=concat_parts, total=sum_parts, min=min_parts, max=max_parts, zero_rows=sum_parts))
