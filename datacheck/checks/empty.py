"""empty: samples that contribute nothing to the loss, or divide by zero."""
from __future__ import annotations

from typing import Iterable

import numpy as np
import polars as pl

from datacheck.checks._expr import truncated
from datacheck.checks._render import UNMARKED, cut_by_truncation, rejected_by_template, unmarked_template
from datacheck.checks.mask import position_pass
from datacheck.checks.registry import Payload, RowCheck, ShardContext, ShardItem, check, derives, measure, sum_parts
from datacheck.checks.roledtype import problem
from datacheck.checks.tokens import ID_LAYOUTS
from datacheck.derive.read import CHAT
from datacheck.model import layouts as lay
from datacheck.model.findings import Skipped
from datacheck.model.roles import inner_dtype, is_list, token_id_columns

__all__ = ["empty_text", "empty_sequence", "all_padding", "no_supervised_tokens", "BLANK_CHARS", "ZERO_WIDTH", "blank_text"]

#: the read path's derivations this family reads: the token columns a chat template's rendering
#: gives (``[tokens] tokenizer``)
derives(__name__, CHAT)

#: Characters that render as nothing but are not Unicode ``White_Space`` (so ``str.strip`` keeps
#: them): ZERO WIDTH SPACE / NON-JOINER / JOINER (U+200B-U+200D), WORD JOINER (U+2060), ZERO WIDTH
#: NO-BREAK SPACE / BOM (U+FEFF) and MONGOLIAN VOWEL SEPARATOR (U+180E, White_Space before Unicode 6.3).
ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff\u180e"
#: Regex class of a blank character: Unicode ``White_Space`` (``\s`` in the Rust regex engine polars
#: uses: space, tab, newlines, U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028/9, U+202F, U+205F,
#: U+3000) plus :data:`ZERO_WIDTH`.
BLANK_CHARS = "[\\s" + ZERO_WIDTH + "]"
_NON_BLANK = "[^\\s" + ZERO_WIDTH + "]"


def _blank(e: pl.Expr) -> pl.Expr:
    """Per string: no character other than :data:`BLANK_CHARS` (True for ``""``; null for null)."""
    return e.str.contains(_NON_BLANK).not_()


def blank_text(e: pl.Expr) -> pl.Expr:
    """Per string (Boolean, never null): ``empty.text``'s rule for a text that says nothing: null,
    ``""`` or only :data:`BLANK_CHARS` (the dup.* checks leave such rows to it:
    :mod:`datacheck.checks.dup.blank`)."""
    return e.is_null() | _blank(e)


def _all_zero(col: str, dtype: pl.DataType) -> pl.Expr:
    """Per row: every element of the mask list is 0 (native min/max kernels for int/bool masks)."""
    m = pl.col(col)
    inner = inner_dtype(dtype)
    if inner == pl.Boolean:
        return m.list.any().not_()
    if inner.is_integer():
        return (m.list.max() == 0) & (m.list.min() == 0)
    return m.list.eval(pl.element().cast(pl.Float64) != 0).list.any().not_()


@check("empty.text", layouts=lay.ANY - {"packed_lm", "packed_sft", "tabular", "ctc"}, roles=("text",), dtype_roles=())
def empty_text(ctx: ShardContext) -> Iterable[ShardItem]:
    """``empty.text``: a text value (dtype String) is null, ``""`` or blank: only Unicode whitespace
    and zero-width characters (:data:`BLANK_CHARS`, e.g. U+00A0, U+3000, U+200B, U+FEFF), which a
    tokenizer turns into no token or only a space token; a list-of-strings text value holds no
    non-blank string. ``whitespace_only`` counts the non-empty blank values. A text column of
    another dtype is ``schema.dtype`` and the check is skipped on it with that reason."""
    s = ctx.schema
    for col in ctx.roles.text:
        t = s[col]
        if t == pl.String:
            c = pl.col(col)
            blank = _blank(c)
            yield RowCheck(
                check="empty.text", column=col, fails=blank_text(c), example=c, not_retyped=col,
                details={"null": c.is_null().sum(), "empty": (c.str.len_bytes() == 0).sum(),
                         "whitespace_only": ((c.str.len_bytes() > 0) & blank).sum()},
                details_merge={"null": sum_parts, "empty": sum_parts, "whitespace_only": sum_parts},
                message=lambda n, d, col=col: (f"{n} row(s) of {col!r} have no text: {d.get('empty', 0)} empty, "
                                               f"{d.get('whitespace_only', 0)} whitespace-only, {d.get('null', 0)} null"),
            )
        elif is_list(t) and inner_dtype(t) == pl.String:
            c = pl.col(col)
            yield RowCheck(
                check="empty.text", column=col, example=c, not_retyped=col,
                fails=c.is_null() | (c.list.eval(_blank(pl.element()).not_()).list.any().not_()),
                message=lambda n, d, col=col: f"{n} row(s) of {col!r} hold no non-blank text",
            )
        else:
            bad_text = problem(ctx, "text", col)
            yield Skipped("empty.text", bad_text.skip_reason if bad_text is not None
                          else f"text column {col!r} has dtype {t}, not a string")


@check("empty.sequence", layouts=ID_LAYOUTS, roles=("input_ids",), dtype_roles=(), reads_tokens=True)
def empty_sequence(ctx: ShardContext) -> Iterable[ShardItem]:
    """``empty.sequence``: a token-id column of the row is null or has length 0, one finding per
    column, naming it: ``input_ids``, and every other token-id list the model reads
    (:func:`datacheck.model.roles.token_id_columns`: TRL's ``prompt_input_ids`` / ``chosen_input_ids`` /
    ``rejected_input_ids``, KTO's ``completion_input_ids``, a decoder's ``decoder_input_ids``, any
    ``*_input_ids`` list of integers). An empty prompt leaves its responses read with no context; an
    empty response is also ``pref.empty_response``'s (the message says so). An empty list is empty
    whatever its element type, so ``input_ids`` is judged as any list; of another dtype it is skipped
    with the ``schema.dtype`` reason (when no other column holds ids). Rows a chat template rejected
    are ``sft.role_order``'s, not this (:func:`datacheck.checks._render.rejected_by_template`)."""
    ids = ctx.roles.input_ids
    cols = list(token_id_columns(ctx.roles, ctx.schema))
    bad_ids = problem(ctx, "input_ids") if ids is not None else None
    if bad_ids is not None and not is_list(ctx.schema[ids]):
        cols.remove(ids)
        if not cols:
            yield Skipped("empty.sequence", bad_ids.skip_reason)
            return
    pair = {ctx.roles.chosen, ctx.roles.rejected} - {None}
    for col in cols:
        c = pl.col(col)
        also = " (an empty response: also pref.empty_response)" if col in pair else ""
        yield RowCheck(
            check="empty.sequence", column=col, fails=(c.is_null() | (c.list.len() == 0)) & ~rejected_by_template(ctx, col),
            example=c, not_retyped=col,
            details={"null": c.is_null().sum()}, details_merge={"null": sum_parts},
            message=lambda n, d, col=col, also=also: (f"{n} row(s) have an empty {col} sequence "
                                                      f"({d.get('null', 0)} of them null){also}"),
        )


@check("empty.all_padding", layouts=lay.TOKENIZED, roles=("input_ids",))
def all_padding(ctx: ShardContext) -> Iterable[ShardItem]:
    """``empty.all_padding``: in a non-empty sequence, the ``attention_mask`` sums to 0 (or, without
    a mask, every id equals ``pad_token_id``): attention divides 0 by 0 and the loss is NaN."""
    r, s, tok = ctx.roles, ctx.schema, ctx.cfg.tokens
    ids = r.input_ids
    bad_mask = problem(ctx, "attention_mask") if r.attention_mask is not None else None
    if bad_mask is not None:
        yield Skipped("empty.all_padding", bad_mask.skip_reason)
        return
    c = pl.col(ids)
    nonempty = c.list.len() > 0
    if r.attention_mask is not None:
        m = pl.col(r.attention_mask)
        yield RowCheck(
            check="empty.all_padding", column=r.attention_mask,
            fails=nonempty & (m.list.len() > 0) & _all_zero(r.attention_mask, s[r.attention_mask]),
            example=m,
            message=lambda n, d: (f"{n} row(s) are only padding: attention_mask is all zero, so attention "
                                  "divides 0 by 0 and the loss is NaN"),
        )
    elif tok.pad_token_id is not None:
        pad = tok.pad_token_id
        yield RowCheck(
            check="empty.all_padding", column=ids, example=c,
            fails=nonempty & c.list.eval(pl.element() != pad).list.any().not_(),
            message=lambda n, d, pad=pad: f"{n} row(s) hold only pad_token_id {pad} (no attention_mask to tell real tokens)",
        )
    else:
        yield Skipped("empty.all_padding", "no attention_mask column and no [tokens] pad_token_id")


@check("empty.no_supervised_tokens", layouts=lay.TOKENIZED | frozenset({"ctc"}), roles=("labels",), facts=("labels.ignore_index",),
       reasons={"labels.ignore_index": "[labels] ignore_index is unset"})
def no_supervised_tokens(ctx: ShardContext) -> Iterable[ShardItem]:
    """``empty.no_supervised_tokens``: every token label equals ``ignore_index`` after truncation to
    ``max_seq_len`` on ``truncation_side`` (the mean loss over 0 tokens is 0/0 = NaN). Not
    position-wise, so the same under either ``[labels] shifted`` convention. Rows a chat template
    rejected (null rendered labels) are ``sft.role_order``'s, not this. The message counts the rows
    that have supervised tokens before truncation (labels longer than ``max_seq_len``, or, for labels
    the read path rendered and truncated, assistant tokens in the whole rendering): truncation cut
    their answer, and the message says so of those rows only. Rows whose labels are null, whose
    kept labels hold a null (a null label is no supervised token), or whose labels are an empty list
    beside input_ids that hold tokens are counted in the details (``null_rows``, ``null_labels``,
    ``empty_labels``, present only when not 0) and named as such in the message, never as "every
    label is ignore_index" (the first two are ``labels.null``'s rows too). Example: the labels kept after
    truncation. Skipped for labels rendered by a chat template without ``{% generation %}`` markers
    (``sft.assistant_mask_empty`` reports the template once). Which rows fail comes from the shared
    pass over the flat buffers where it applies (:func:`datacheck.checks.mask.position_pass`), else
    from list kernels. On ``masked_lm`` rows (pre-masked masked-LM data: the loss is a mean over the
    supervised positions of the whole batch, and a short row often gets no masked position) a row
    without a supervised label is no defect: the check fails every row only when no row of the shard
    has one (:func:`_unsupervised_shard`; the message says the shard holds no masked position)."""
    r, s, tok, lab = ctx.roles, ctx.schema, ctx.cfg.tokens, ctx.cfg.labels
    if not is_list(s[r.labels]):
        yield Skipped("empty.no_supervised_tokens", f"labels column {r.labels!r} is not a list")
        return
    if unmarked_template(ctx, r.labels) is not None:
        yield Skipped("empty.no_supervised_tokens", UNMARKED)
        return
    ign = lab.ignore
    kept = truncated(r.labels, tok.max_seq_len, tok.truncation_side)
    if ctx.layout == "masked_lm":
        yield RowCheck(
            check="empty.no_supervised_tokens", column=r.labels, fails=None, from_payload=_unsupervised_shard,
            example=kept, not_retyped=r.labels,
            message=lambda n, d, ign=ign, col=r.labels: (
                f"no row of the shard has a supervised token: every one of its {n} row(s) has every {col!r} "
                f"label ignore_index {ign} (no masked position), so masked-LM training on it learns nothing and "
                "a batch of it has a mean loss of 0/0 = NaN; re-run the masking collator (mlm=True, "
                "mlm_probability > 0) or check that the labels were saved"),
        )
        return
    none_kept = kept.list.eval(pl.element() != ign).list.any().not_() | pl.col(r.labels).is_null()
    fast = position_pass(ctx)  # the shared pass over the flat buffers, where it applies: the same rows
    none_kept_rows = (fast[0].struct.field("lab_kept") == 0) if fast is not None else none_kept
    none_at_all = pl.col(r.labels).list.eval(pl.element() != ign).list.any().not_() | pl.col(r.labels).is_null()
    some_before = none_at_all.not_()
    cut = cut_by_truncation(ctx, r.labels)
    if cut is not None:
        some_before = some_before | cut
    by_truncation = none_kept & some_before
    trunc = f"truncation to max_seq_len {tok.max_seq_len} ({tok.truncation_side})"
    lab_col = pl.col(r.labels)
    ids_listed = r.input_ids is not None and is_list(s[r.input_ids])
    with_tokens = (pl.col(r.input_ids).list.len() > 0) if ids_listed else pl.lit(True)
    empty_text = "with an empty labels list" + (f" beside {r.input_ids!r} that hold tokens" if ids_listed else "")
    kinds = {  # the failing rows that are not "every label is ignore_index" (None when there are none)
        "null_rows": lab_col.is_null(),
        "empty_labels": (lab_col.list.len() == 0) & with_tokens.fill_null(True),
        "null_labels": kept.list.count_matches(None) > 0,
    }
    yield RowCheck(
        check="empty.no_supervised_tokens", column=r.labels, fails=none_kept_rows & ~rejected_by_template(ctx, r.labels),
        example=kept, not_retyped=r.labels,
        details={"only_after_truncation": by_truncation.sum(),
                 **{k: pl.when(e.sum() > 0).then(e.sum()) for k, e in kinds.items()}},
        details_merge={"only_after_truncation": sum_parts, **{k: sum_parts for k in kinds}},
        message=lambda n, d, ign=ign, trunc=trunc, empty_text=empty_text: _no_supervised_message(
            n, d, ign, trunc, empty_text),
    )


#: :func:`mlm_supervision`'s payloads: supervised labels kept after truncation, and rows, of the shard
_MLM_SUPERVISED, _MLM_ROWS = "empty.mlm_supervised", "empty.mlm_rows"


@measure("mlm_supervision")
def mlm_supervision(ctx: ShardContext) -> Iterable[Payload]:
    """On a ``masked_lm`` shard with a list ``labels`` column and ``[labels] ignore_index`` set: the
    shard's count of labels other than ignore_index kept after truncation (int) and its row count
    (int), summed over its batches, for ``empty.no_supervised_tokens`` (:func:`_unsupervised_shard`);
    nothing on any other shard."""
    r, lab, tok = ctx.roles, ctx.cfg.labels, ctx.cfg.tokens
    if ctx.layout != "masked_lm" or r.labels is None or lab.ignore is None or not is_list(ctx.schema.get(r.labels, pl.Null)):
        return
    kept = truncated(r.labels, tok.max_seq_len, tok.truncation_side)
    sup = kept.list.eval((pl.element() != lab.ignore).cast(pl.Int64)).list.sum().fill_null(0).sum()
    yield Payload(key=_MLM_SUPERVISED, expr=sup, post=int, merge=sum_parts, shard_only=True)
    yield Payload(key=_MLM_ROWS, expr=pl.len(), post=int, merge=sum_parts, shard_only=True)


def _unsupervised_shard(payload: dict) -> "np.ndarray":
    """``empty.no_supervised_tokens`` on ``masked_lm`` rows: every row (0 .. rows - 1, int64) when no
    label of the shard is supervised, else none. Masked-LM's loss is a mean over the supervised
    positions of a whole batch, and at 15% masking a short row often gets no masked position: such a
    row is no defect, a shard with no masked position at all is."""
    if int(payload[_MLM_SUPERVISED] or 0):
        return np.zeros(0, dtype=np.int64)
    return np.arange(int(payload[_MLM_ROWS] or 0), dtype=np.int64)


def _no_supervised_message(n: int, d: dict[str, int], ign: int, trunc: str, empty_text: str) -> str:
    """``empty.no_supervised_tokens``' message for ``n`` rows: what holds of each kind of row in the
    details ``d`` (``null_rows``: labels null; ``empty_labels``: an empty labels list (beside
    input_ids that hold tokens, where there is an input_ids list column), said as ``empty_text``;
    ``null_labels``: kept labels each null or ``ign``, at least one null; the others: every kept
    label is ``ign``, a row with no token and no label at all among them, as ``empty.sequence``
    reports it), then how many only truncation cut (``only_after_truncation``)."""
    odd = {k: d.get(k) or 0 for k in ("null_rows", "empty_labels", "null_labels")}
    if not any(odd.values()):
        head = f"{n} row(s) have no supervised token: every label is ignore_index {ign}, so the mean loss is 0/0 = NaN"
    else:
        rest = n - sum(odd.values())
        parts = ([f"{rest} with every label ignore_index {ign}"] if rest > 0 else []) + [
            text for k, text in (
                ("null_rows", f"{odd['null_rows']} whose labels are null (also labels.null)"),
                ("null_labels", f"{odd['null_labels']} whose labels are each null or ignore_index {ign} "
                                "(also labels.null)"),
                ("empty_labels", f"{odd['empty_labels']} {empty_text}"),
            ) if odd[k]]
        head = f"{n} row(s) have no supervised token, so the mean loss is 0/0 = NaN: " + ", ".join(parts)
    k = d.get("only_after_truncation", 0)
    return head + (f" ({k} of them only because {trunc} cut the answer off: raise max_seq_len, shorten or drop them)"
                   if k else "")
