"""padding: what padded positions hold (``padding.*``): ids and labels at mask-0 positions, pad ids
attended, eos supervision when the pad is the eos; and the shard's ``padding_fraction``, ``eos`` and
``supervised_fraction`` stats."""
from __future__ import annotations

from typing import Any, Callable, Iterable

import polars as pl

from datacheck.checks._expr import first_at, positions_count, supervised_count, supervised_total
from datacheck.checks.batch import collator_columns, shard_supervision_rule
from datacheck.checks.mask import mask_int, position_pass, positions_view
from datacheck.checks.registry import (
    RowCheck,
    ShardContext,
    ShardItem,
    Stat,
    check,
    derives,
    fields_parts,
    finding,
    measure,
    sum_parts,
)
from datacheck.checks.registry import ratio as _div
from datacheck.checks.roledtype import problem, problems
from datacheck.derive.read import CHAT
from datacheck.model import layouts as lay
from datacheck.model.findings import EXAMPLE_LENGTH, EXAMPLE_POSITION, EXAMPLE_TEXT, Finding, Skipped
from datacheck.model.roles import seq2seq_layout
from datacheck.model.stats import EOS, EosSupervision

__all__ = ["token_not_pad", "pad_attended", "label_not_ignored", "label_of_token", "padding_stats", "eos_unsupervised"]

#: the read path's derivations this family reads: the token columns a chat template's rendering
#: gives (``[tokens] tokenizer``)
derives(__name__, CHAT)


_NEEDS_PAD = "needs input_ids and [tokens] pad_token_id"


@check("padding.token_not_pad", layouts=lay.TOKENIZED, roles=("attention_mask", "input_ids"), facts=("tokens.pad_token_id",),
       reasons={"input_ids": _NEEDS_PAD, "tokens.pad_token_id": _NEEDS_PAD}, dtype_roles=("attention_mask",))
def token_not_pad(ctx: ShardContext) -> Iterable[ShardItem]:
    """``padding.token_not_pad`` (warn): a position with mask 0 holds an id other than
    ``pad_token_id``. Only rows whose input_ids, attention_mask and labels (those present) have
    equal lengths and whose mask is binary are looked at (others are ``length.mismatch`` /
    ``mask.non_binary``). Where the shared pass over the flat buffers reads the mask
    (:func:`_pass_counts`) the per-row counts come from it; else from the position view."""
    if problem(ctx, "input_ids") is not None:
        yield Skipped("padding.token_not_pad", _NEEDS_PAD)
        return
    mcol, ids, pad = ctx.roles.attention_mask, ctx.roles.input_ids, ctx.cfg.tokens.pad_token_id
    nz = positions_count([mcol, ids], lambda mm, x, pad=pad: (mm == 0) & (x != pad), ctx.schema)
    bad = (pl.col(mcol) == 0) & (pl.col(ids) != pad)
    example = first_at([mcol, ids], lambda m, x, pad=pad: m == 0 and x != pad, lambda m, x: f"id {x} with mask 0",
                       count=nz, what="masked position(s) hold non-pad ids")

    def message(n: int, d: dict[str, Any], pad: int | None = pad) -> str:
        return (f"{n} row(s) hold ids other than pad_token_id {pad} at positions "
                f"with attention_mask 0 ({d.get('positions')} positions)")

    yield _positions_rule(ctx, "padding.token_not_pad", ids, "pad_id", bad, example, message)


def _positions_rule(ctx: ShardContext, check_id: str, column: str, field: str, bad: pl.Expr, example: Any,
                    message: Callable[[int, dict[str, Any]], str]) -> RowCheck:
    """The row check of a rule over the positions of the position view: a row fails when it holds a
    position where ``bad`` (per position, Boolean) holds; ``details["positions"]`` counts them. Its
    per-row counts come from the field ``field`` of the shared pass (:func:`_pass_counts`) where that
    pass reads the mask, else from ``bad`` evaluated in the position view: the same rows and counts."""
    count = _pass_counts(ctx, field)
    if count is not None:
        return RowCheck(check=check_id, column=column, fails=count > 0, example=example,
                        details={"positions": count.cast(pl.Int64).sum()}, details_merge={"positions": sum_parts},
                        message=message)
    return RowCheck(check=check_id, column=column, fails=bad, view=positions_view(ctx), example=example,
                    details={"positions": bad.sum()}, details_merge={"positions": sum_parts}, message=message)


def _pass_counts(ctx: ShardContext, name: str) -> pl.Expr | None:
    """Per row (UInt32): the field ``name`` of the shared pass over the flat buffers
    (:func:`datacheck.checks.mask.position_pass`) when that pass reads the attention mask, the
    rows of the position view alike; else None (the rule runs in the position view)."""
    fast = position_pass(ctx)
    if fast is None or ctx.roles.attention_mask not in positions_view(ctx).cols:
        return None
    return fast[0].struct.field(name)


@check("padding.pad_attended", layouts=lay.TOKENIZED, roles=("attention_mask", "input_ids"), facts=("tokens.pad_token_id",),
       reasons={"input_ids": _NEEDS_PAD, "tokens.pad_token_id": _NEEDS_PAD}, dtype_roles=("attention_mask",))
def pad_attended(ctx: ShardContext) -> Iterable[ShardItem]:
    """``padding.pad_attended``: ``pad_token_id != eos_token_id`` and a position holding
    ``pad_token_id`` in ``input_ids`` (list of ints) has ``attention_mask`` 1 (list of 0/1 ints,
    bools or floats): the model attends to padding, as when the mask was built as all ones.

    Skipped when ``pad_token_id == eos_token_id`` (GPT-2 style: an attended pad id is the eos
    that ends the text). With ``eos_token_id`` unset, pad is taken to differ from eos. Only rows
    whose input_ids, attention_mask and labels (those present) have equal lengths and whose mask is
    binary are looked at (others are ``length.mismatch`` / ``mask.non_binary``). Per-row counts
    from the shared pass over the flat buffers where it reads the mask (as ``padding.token_not_pad``)."""
    tok = ctx.cfg.tokens
    if problem(ctx, "input_ids") is not None:
        yield Skipped("padding.pad_attended", _NEEDS_PAD)
        return
    if tok.eos_token_id is not None and tok.eos_token_id == tok.pad_token_id:
        yield Skipped("padding.pad_attended", f"pad_token_id == eos_token_id ({tok.pad_token_id}): an attended "
                                              "pad id is the eos that ends the text")
        return
    mcol, ids, pad = ctx.roles.attention_mask, ctx.roles.input_ids, tok.pad_token_id
    nz = positions_count([mcol, ids], lambda mm, x, pad=pad: (mm == 1) & (x == pad), ctx.schema)
    example = first_at([mcol, ids], lambda m, x, pad=pad: m == 1 and x == pad,
                       lambda m, x: f"pad id {x} with mask 1", count=nz, what="attended position(s) hold pad_token_id")

    def message(n: int, d: dict[str, Any], pad: int | None = pad) -> str:
        return (f"{n} row(s) hold pad_token_id {pad} at positions with attention_mask 1 "
                f"({d.get('positions')} positions): the model attends to padding. Set the "
                "mask to 0 at padded positions (if pad_token_id is also your eos, set "
                "[tokens] eos_token_id)")

    bad = (pl.col(mcol).cast(pl.Int64) == 1) & (pl.col(ids) == pad)
    yield _positions_rule(ctx, "padding.pad_attended", ids, "pad_att", bad, example, message)


_NEEDS_IGNORE = "needs a token labels column and [labels] ignore_index"


@check("padding.label_not_ignored", layouts=lay.TOKENIZED, roles=("attention_mask", "labels"), facts=("labels.ignore_index",),
       reasons={"labels": _NEEDS_IGNORE, "labels.ignore_index": _NEEDS_IGNORE}, dtype_roles=("attention_mask",),
       layout_roles={"seq2seq": ("labels",)})
def label_not_ignored(ctx: ShardContext) -> Iterable[ShardItem]:
    """``padding.label_not_ignored``: a position with mask 0 has a label other than ``ignore_index``
    (the loss trains on padding). In a seq2seq layout the labels follow the decoder, not the
    encoder's mask: the padded positions are then the labels' trailing run of ``pad_token_id``
    (:func:`_decoder_label_padding`), so there it needs no ``attention_mask`` column (T5 rows
    tokenized without one run too; declared by ``layout_roles``); on a shard of unknown layout the
    message also names ``[dataset] layout = "seq2seq"`` (decoder targets the recognizer could not place).

    The rule is the same whatever ``[labels] shifted`` says: unshifted, ``labels[i]`` at a padded
    position is the target predicted from position i-1 (the model learns to emit padding);
    shifted, it is the target predicted from the padded position i itself (loss on padding input).
    Per-row counts from the shared pass over the flat buffers where it reads the mask, else from
    the position view (as ``padding.token_not_pad``)."""
    if problem(ctx, "labels") is not None:
        yield Skipped("padding.label_not_ignored", _NEEDS_IGNORE)
        return
    s2s = seq2seq_layout(ctx.cfg.dataset.schema_, ctx.schema, ctx.layout)
    if s2s is not None:
        yield from _decoder_label_padding(ctx, s2s)
        return
    mcol, labels, ign = ctx.roles.attention_mask, ctx.roles.labels, ctx.cfg.labels.ignore
    nz = positions_count([mcol, labels], lambda mm, y, ign=ign: (mm == 0) & (y != ign), ctx.schema)
    bad = (pl.col(mcol) == 0) & (pl.col(labels) != ign)
    example = first_at([mcol, labels], lambda m, y, ign=ign: m == 0 and y != ign,
                       lambda m, y: f"label {y} with mask 0", count=nz, what="padded position(s) are supervised")

    # a shard of unknown layout: its labels may be a decoder's targets (T5 sets padded to one length),
    # which the encoder's mask does not cover: the finding names the way out besides the fix
    hint = ("" if ctx.layout is not None else "; or, if 'labels' holds a decoder's targets (an encoder-decoder "
            "set), set [dataset] layout = \"seq2seq\"")

    def message(n: int, d: dict[str, Any], ign: int | None = ign, hint: str = hint) -> str:
        return (f"{n} row(s) carry labels other than ignore_index {ign} at padded "
                f"positions (attention_mask 0; {d.get('positions')} positions): "
                "the loss trains on padding. Set labels to ignore_index where the mask is 0" + hint)

    yield _positions_rule(ctx, "padding.label_not_ignored", labels, "pad_label", bad, example, message)


def _decoder_label_padding(ctx: ShardContext, s2s: str) -> Iterable[ShardItem]:
    """``padding.label_not_ignored`` in a seq2seq layout (``s2s``: why it is one): ``labels`` is the
    decoder's target, which the encoder's ``attention_mask`` does not cover, so a padded position is
    one of the trailing run of ``pad_token_id`` that ends a row of ``labels`` (integer lists): the
    target padded with the pad id instead of ``ignore_index``, as T5's classic preprocessing
    (``labels = tokenizer(text_target=..., padding="max_length").input_ids``) does, so that the loss
    trains the decoder to emit padding. When ``pad_token_id == eos_token_id`` the run's first id is
    the eos that ends the target and is not counted. A row fails when its run counts one position
    or more (``details["positions"]``: their sum). The encoder's ``attention_mask`` is not read (a
    shard without one is judged alike). Skipped without ``[tokens] pad_token_id`` (nothing else tells
    the decoder's padding from the target: T5's ``decoder_start_token_id`` is its pad id, BART's is
    its eos; ``[tokens] tokenizer`` sets the pad id from the tokenizer's files)."""
    tok, labels = ctx.cfg.tokens, ctx.roles.labels
    pad = tok.pad_token_id
    if pad is None or labels is None:
        yield Skipped("padding.label_not_ignored", f"seq2seq layout ({s2s}): labels follow the decoder, not "
                                                   "attention_mask, so their padding is the trailing run of the pad "
                                                   "id; needs [tokens] pad_token_id (or [tokens] tokenizer) to tell it")
        return
    eos_is_pad = tok.eos_token_id is not None and tok.eos_token_id == pad
    # positions with no other id at or after them: the trailing run of the pad id
    run = pl.col(labels).list.eval((pl.element() != pad).fill_null(True).cast(pl.Int8)
                                   .cum_max(reverse=True).eq(0)).list.sum().fill_null(0).cast(pl.Int64)
    count = (run - 1).clip(lower_bound=0) if eos_is_pad else run

    def one(r: dict[str, Any]) -> dict[str, Any] | None:
        y, n = r[labels], r["__n"]
        if y is None or not n:
            return None
        k = len(y) - n
        return {EXAMPLE_TEXT: f"{n} decoder padding position(s) supervised; first at position {k} of {len(y)}: "
                              f"label {y[k]} (pad_token_id) after the target", EXAMPLE_POSITION: k, EXAMPLE_LENGTH: len(y)}

    example = pl.struct(pl.col(labels), count.alias("__n")).map_elements(one, return_dtype=pl.Struct(
        {EXAMPLE_TEXT: pl.String, EXAMPLE_POSITION: pl.Int64, EXAMPLE_LENGTH: pl.Int64}))

    def message(n: int, d: dict[str, Any], pad: int = pad, ign: int | None = ctx.cfg.labels.ignore, s2s: str = s2s) -> str:
        return (f"{n} row(s) pad the decoder's labels with pad_token_id {pad} instead of ignore_index "
                f"{ign} ({d.get('positions')} positions; {s2s}): the loss trains the decoder "
                "on padding. Set labels to ignore_index after the target (DataCollatorForSeq2Seq's "
                "label_pad_token_id = -100)")

    yield RowCheck(check="padding.label_not_ignored", column=labels, fails=count > 0, example=example,
                   details={"positions": count.sum()}, details_merge={"positions": sum_parts}, message=message)


def label_of_token(ctx: ShardContext, labels: str) -> pl.Expr:
    """In :func:`~datacheck.checks.mask.positions_view`: the label that supervises the token at each position.

    ``[labels] shifted = false`` (Hugging Face; the model shifts): ``labels[i]``. ``shifted = true``
    (nanoGPT, Megatron: ``labels[i] == input_ids[i+1]``): ``labels[i-1]``, the target predicted at
    the position before (null at position 0, which no label supervises)."""
    if ctx.cfg.labels.shifted:
        return pl.col(labels).shift(1).over("__row")
    return pl.col(labels)


@measure("padding")
def padding_stats(ctx: ShardContext) -> Iterable[Stat]:
    """``padding_fraction`` (share of mask-0 positions), ``eos`` (eos tokens inside real content,
    and how many are supervised: for ``padding.eos_unsupervised``; with ``[labels] shifted`` the eos
    at position i is supervised by ``labels[i-1]``, see :func:`label_of_token`) and
    ``supervised_fraction``."""
    r, tok, lab = ctx.roles, ctx.cfg.tokens, ctx.cfg.labels
    mcol = r.attention_mask
    if mcol is not None and problem(ctx, "attention_mask") is None:
        _mcol, _t, _inner, mi, _binary = mask_int(ctx)
        yield Stat(key="padding_fraction", expr=pl.struct(real=mi.list.sum().sum(), slots=mi.list.len().sum()),
                   merge=fields_parts(real=sum_parts, slots=sum_parts),
                   post=lambda v: None if v is None else 1 - _div(v["real"], v["slots"]))
    # eos supervision stats (for padding.eos_unsupervised, decided across the dataset)
    usable = {c for c in (r.labels, r.input_ids, mcol) if c is not None} - {p.column for p in problems(ctx)}
    labels = r.labels if r.labels in usable and seq2seq_layout(ctx.cfg.dataset.schema_, ctx.schema, ctx.layout) is None else None
    ids = r.input_ids if r.input_ids in usable else None
    if labels is not None and ids is not None and lab.ignore is not None and tok.eos_token_id is not None:
        eos, ign = tok.eos_token_id, lab.ignore
        in_content = pl.col(ids) == eos
        if mcol in usable:
            in_content = in_content & (pl.col(mcol) != 0)
        in_content = in_content.fill_null(False)
        merge = fields_parts(total=sum_parts, supervised=sum_parts, rows_with_eos=sum_parts)  # rows never span batches
        fast = position_pass(ctx)
        if fast is not None:  # per-row counts from the shared pass over the flat buffers
            total, sup = fast[0].struct.field("eos_total"), fast[0].struct.field("eos_sup")
            yield Stat(key=EOS, expr=pl.struct(total=total.sum(), supervised=sup.sum(), rows_with_eos=(total > 0).sum()),
                       merge=merge, post=lambda v: dict(v) if v else {"total": 0, "supervised": 0, "rows_with_eos": 0})
        else:
            yield Stat(key=EOS, view=positions_view(ctx), expr=pl.struct(
                total=in_content.sum(), supervised=(in_content & (label_of_token(ctx, labels) != ign).fill_null(False)).sum(),
                rows_with_eos=pl.col("__row").filter(in_content).n_unique()),
                merge=merge, post=lambda v: dict(v) if v else {"total": 0, "supervised": 0, "rows_with_eos": 0})
    # rows a Hugging Face collator labels; never rows a loader cuts samples from (Megatron documents:
    # GPTDataset's labels are the next tokens, the eod among them unless --eod-mask-loss)
    collated = collator_columns(ctx.layout, r, ctx.schema) if ctx.packed_by_loader is None else None
    if (collated is not None and ids is not None and tok.eos_token_id is not None
            and tok.pad_token_id == tok.eos_token_id):
        yield _collator_eos(ctx, ids, tok.eos_token_id, tok.pad_token_id)
    if labels is not None and lab.ignore is not None:
        ign = lab.ignore
        # where the sft family's supervised_tokens stat reads supervised_count too, the query
        # computes it once for both (common subexpression): the total is its sum then
        shared = r.assistant_mask is not None or ctx.cfg.sft.response_template_ids is not None
        # else from the shared pass over the flat buffers when it runs (its per-row ``lab_sup``: the
        # labels other than ign and null, every row), which has compared every label with ign already
        fast = None if shared else position_pass(ctx)
        if shared:
            sup = supervised_count(labels, ign).sum()
        elif fast is not None:
            sup = fast[0].struct.field("lab_sup").sum()
        else:
            sup = supervised_total(labels, ctx.schema[labels], ign)
        yield Stat(key="supervised_fraction",
                   expr=pl.struct(sup=sup, slots=pl.col(labels).list.len().sum()),
                   merge=fields_parts(sup=sum_parts, slots=sum_parts),
                   post=lambda v: None if v is None else _div(v["sup"], v["slots"]))


def _collator_eos(ctx: ShardContext, ids: str, eos: int, pad: int) -> Stat:
    """The ``eos`` stat of a shard whose labels ``DataCollatorForLanguageModeling(mlm=False)`` makes
    (:func:`~datacheck.checks.batch.collator_columns`: no labels column): the eos ids of real content
    (``attention_mask`` not 0, every position without a usable mask), and of those the ones the collator
    keeps as targets (``labels[i] = input_ids[i]`` unless it is ``pad_token_id``: none when pad == eos).
    Counted in the position view, so rows that ``length.mismatch`` / ``mask.non_binary`` report are left out."""
    view = positions_view(ctx)
    mcol = ctx.roles.attention_mask
    in_content = pl.col(ids) == eos
    if mcol is not None and mcol in view.cols:
        in_content = in_content & (pl.col(mcol) != 0)
    in_content = in_content.fill_null(False)
    return Stat(key=EOS, view=view, expr=pl.struct(
        total=in_content.sum(), supervised=(in_content & (pl.col(ids) != pad)).sum(),
        rows_with_eos=pl.col("__row").filter(in_content).n_unique()),
        merge=fields_parts(total=sum_parts, supervised=sum_parts, rows_with_eos=sum_parts),
        post=lambda v: dict(v) if v else {"total": 0, "supervised": 0, "rows_with_eos": 0})


@check("padding.eos_unsupervised", layouts=lay.LM | lay.SFT | lay.PACKED, level="dataset")
def eos_unsupervised(dctx: Any) -> Iterable[Finding | Skipped]:
    """``padding.eos_unsupervised``: ``pad_token_id == eos_token_id`` and no eos inside real content
    (attention_mask 1) carries a label other than ``ignore_index`` in any sample: the collator masked
    every eos as padding, so the model never learns to stop. Reports the eos-supervision ratio.

    The labels are the shard's token labels; a language-model shard without them (``causal_lm``,
    ``packed_lm``: :func:`~datacheck.checks.batch.collator_columns`) is labelled as
    ``DataCollatorForLanguageModeling(mlm=False)`` labels it (every ``pad_token_id`` set to -100, so with
    pad == eos every eos), the rule ``datacheck plan`` counts supervised tokens by; the message names the
    rules of the shards whose eos were counted. Counted over the whole dataset: one shard that supervises
    its eos is enough to pass."""
    tok = dctx.cfg.tokens
    if tok.pad_token_id is None or tok.eos_token_id is None:
        yield Skipped("padding.eos_unsupervised", "needs [tokens] pad_token_id and eos_token_id")
        return
    if tok.pad_token_id != tok.eos_token_id:
        return
    total = sup = rows = 0
    shards = []
    rules: list[str] = []
    measured = 0
    for s in dctx.readable_shards():
        e = EosSupervision.of(s.stats)
        if e is None:
            continue
        measured += 1
        total += e.total
        sup += e.supervised
        rows += e.rows_with_eos
        if e.total:
            shards.append(s.path)
            rule = shard_supervision_rule(dctx.cfg, s)
            if rule is not None and rule not in rules:
                rules.append(rule)
    if not measured:
        yield Skipped("padding.eos_unsupervised",
                      "needs input_ids with a token labels column and [labels] ignore_index, or a language-model "
                      "layout (causal_lm, packed_lm) without labels (DataCollatorForLanguageModeling's labels) in "
                      "some shard")
        return
    if total and sup == 0:
        counted = f"; labels counted as: {'; '.join(rules)}" if rules else ""
        yield finding(
            "padding.eos_unsupervised", count=rows, ratio=0.0,
            shards=tuple(shards),
            message=(f"pad_token_id == eos_token_id ({tok.eos_token_id}) and none of the {total} eos tokens in "
                     f"{rows} row(s) is supervised (eos-supervision ratio 0): the collator masked eos as padding, "
                     f"so the model never learns to stop{counted}. Keep the label of the eos that ends each "
                     "sample (a labels column, or a pad token other than the eos)"),
            details={"eos_tokens": total, "eos_supervised": sup, "ratio": 0.0},
        )
