"""length: sequence lengths against max_seq_len, list columns that must align, CTC feasibility
(``length.ctc_infeasible``), and length statistics
(exact histograms: lengths are integers, so histograms merge exactly across shards).

A sequence's length is the number of tokens the model attends to: with an ``attention_mask``, the
sum of the (binary) mask, so padding never counts as length (a shard padded to 128 is not "128
tokens long"); without a mask, the ``input_ids`` list length. See :func:`attended_length`."""
from __future__ import annotations

from typing import Any, Iterable

import polars as pl

from datacheck.checks._expr import as_int64, counts_to_pairs
from datacheck.checks.registry import (
    RowCheck,
    ShardContext,
    ShardItem,
    Stat,
    check,
    counts_parts,
    derives,
    fields_parts,
    max_parts,
    measure,
    ratio_post,
    sum_parts,
)
from datacheck.checks.roledtype import problem, problems
from datacheck.derive.read import CHAT
from datacheck.model import layouts as lay
from datacheck.model.findings import Skipped
from datacheck.model.roles import (
    AUDIO_COLUMNS,
    DECODER_COLUMNS,
    ROLE_TABLE,
    inner_dtype,
    is_list,
    list_depth,
    seq2seq_layout,
)
from datacheck.model.stats import LENGTHS, LengthHistogram

__all__ = ["over_max", "length_mismatch", "length_stats", "attended_length", "ctc_infeasible"]

#: the read path's derivations this family reads: the token columns a chat template's rendering
#: gives (``[tokens] tokenizer``)
derives(__name__, CHAT)






def _hist_post(column: str, unit: str):
    def post(v: Any) -> dict[str, Any]:
        hist = sorted((int(p[0]), int(p[1])) for p in counts_to_pairs(v) if p[0] is not None)
        return LengthHistogram(column, unit, tuple(hist)).to_stat()

    return post


def attended_length(ctx: ShardContext) -> tuple[pl.Expr, str] | None:
    """Per row (Int64): the sequence length the model attends to, and how it was measured.

    With an ``attention_mask`` (list of 0/1 ints, bools or floats) the length is the number of
    attended tokens, ``mask.list.sum()`` (a native list kernel; padded positions do not count, so a
    shard padded to a fixed length still shows its real lengths). A row whose mask is null falls
    back to the ``input_ids`` list length; a row whose ``input_ids`` is null has no length (null).
    Without a mask, it is the ``input_ids`` list length.
    None when ``input_ids`` is absent or of a dtype that cannot serve the role (``schema.dtype``).
    """
    r = ctx.roles
    ids = r.input_ids
    if ids is None or problem(ctx, "input_ids") is not None:
        return None
    n = pl.col(ids).list.len().cast(pl.Int64)
    m = r.attention_mask
    if m is None or problem(ctx, "attention_mask") is not None:
        return n, "input_ids list length"
    inner = inner_dtype(ctx.schema[m])
    attended = pl.col(m).list.sum()  # Int64 for integer masks, UInt32 (count of True) for booleans
    if inner.is_float():
        attended = attended.round(0)
    # a float mask summing to inf/NaN (``mask.non_binary`` reports it) counts the list length
    return (pl.when(pl.col(ids).is_not_null()).then(pl.coalesce(attended.cast(pl.Int64, strict=False), n)),
            "attended tokens (attention_mask sum)")


@measure(LENGTHS)
def length_stats(ctx: ShardContext) -> Iterable[Stat]:
    """The ``lengths`` histogram (exact; unit tokens, or characters of the text columns without
    ``input_ids``) and ``truncation_rate`` (the share of rows longer than ``max_seq_len``).

    Length unit: tokens. With an ``attention_mask``, the histogram and ``truncation_rate`` count
    attended tokens (the sum of the mask; padding is not content and is never truncated away from
    real text), e.g. a shard padded to 128 with at most 40 real tokens has lengths <= 40. Without a
    mask, the ``input_ids`` list length. Without ``input_ids``, characters of the text columns. No
    ``truncation_rate`` when the loader cuts samples across the rows (:attr:`ShardContext.packed_by_loader`)."""
    measured = attended_length(ctx)
    if measured is not None:
        L, _how = measured
        yield Stat(key=LENGTHS, expr=L.value_counts(name="count").implode(), merge=counts_parts(),
                   post=_hist_post(ctx.roles.input_ids, "tokens"))
        if ctx.cfg.tokens.max_seq_len is not None and ctx.packed_by_loader is None:
            # (rows over, rows with a length): both add across batches; the rate is their ratio
            over = L > ctx.cfg.tokens.max_seq_len
            yield Stat(key="truncation_rate", expr=pl.struct(over=over.sum(), n=over.count()),
                       merge=fields_parts(over=sum_parts, n=sum_parts), post=ratio_post("over", "n"))
        return
    text = [c for c in ctx.roles.text if ctx.schema[c] == pl.String]
    if text:
        total = pl.sum_horizontal([pl.col(c).str.len_chars().fill_null(0) for c in text])
        yield Stat(key=LENGTHS, expr=total.value_counts(name="count").implode(), merge=counts_parts(),
                   post=_hist_post("+".join(text), "chars"))


@check("length.over_max", layouts=lay.TOKENIZED, roles=("input_ids",), facts=("tokens.max_seq_len",))
def over_max(ctx: ShardContext) -> Iterable[ShardItem]:
    """``length.over_max`` (warn): a sequence longer than ``max_seq_len``, which the trainer
    truncates. Length as in :func:`attended_length` (attended tokens with a mask).

    Skipped, with the reason, on a shard whose rows are documents the loader cuts samples across
    (:attr:`ShardContext.packed_by_loader`): a long one is spread over several samples, never truncated."""
    why = ctx.packed_by_loader
    if why is not None:
        yield Skipped("length.over_max", why)
        return
    tok = ctx.cfg.tokens
    measured = attended_length(ctx)
    if measured is None:
        return
    L, how = measured
    m = tok.max_seq_len
    yield RowCheck(
        check="length.over_max", column=ctx.roles.input_ids, fails=L > m, example=L,
        details={"longest": L.max()}, details_merge={"longest": max_parts},
        message=lambda n, d, m=m, how=how: (f"{n} row(s) are longer than max_seq_len {m} (longest "
                                            f"{d.get('longest')}) and will be truncated "
                                            f"({tok.truncation_side} side); length = {how}"),
    )


@check("length.mismatch", layouts=lay.ANY - {"tabular"} - lay.UNTOKENIZED_TEXT, roles=("input_ids|labels|aligned",),
       dtype_roles=())
def length_mismatch(ctx: ShardContext) -> Iterable[ShardItem]:
    """``length.mismatch``: in a row, the list columns that must align differ in length.

    What must align: the roles marked ``aligned`` in the role table (``input_ids`` /
    ``attention_mask`` / ``labels`` / ``token_type_ids``) and each ``[columns] aligned`` group. In
    an encoder-decoder (seq2seq) layout (:func:`~datacheck.model.roles.seq2seq_layout`: ``[dataset]
    schema = "seq2seq"``, or decoder columns) ``labels`` is the target
    sequence: it aligns with ``decoder_input_ids`` / ``decoder_attention_mask`` when present, else
    with nothing, and the encoder columns align among themselves.

    Audio rows (an :data:`~datacheck.model.roles.AUDIO_COLUMNS` column and no ``input_ids``: wav2vec2's
    CTC rows, Whisper's): ``labels`` is the transcript (CTC targets, or decoder targets), of its own
    length, and the ``attention_mask`` covers the audio: it aligns with a waveform ``input_values``
    (one list level: one mask entry a sample, as ``Wav2Vec2FeatureExtractor`` pads them) and with
    nothing else (log-mel ``input_features`` are ``[mels][frames]`` in Whisper and ``[frames][mels]``
    elsewhere: no one axis to align). Every collated wav2vec2 CTC row was ``length.mismatch``
    between its mask (audio samples) and its labels (characters)."""
    r = ctx.roles
    groups: list[tuple[str, ...]] = []
    s2s = seq2seq_layout(ctx.cfg.dataset.schema_, ctx.schema, ctx.layout)
    decoder = tuple(c for c in DECODER_COLUMNS if c in ctx.schema and is_list(ctx.schema[c]))
    audio = [c for c in AUDIO_COLUMNS if c in ctx.schema and is_list(ctx.schema[c])] if r.input_ids is None else []
    enc_labels = None if (s2s or audio) else r.labels
    bad = {p.column for p in problems(ctx)}
    aligned_roles = [spec.name for spec in ROLE_TABLE if spec.aligned]
    base = tuple(c for c in (enc_labels if role == "labels" else getattr(r, role) for role in aligned_roles)
                 if c is not None and c not in bad and is_list(ctx.schema[c])
                 and not (audio and c == r.attention_mask))
    if len(base) >= 2:
        groups.append(base)
    wave = [c for c in audio if c == "input_values" and list_depth(ctx.schema[c]) == 1]
    mask = r.attention_mask
    if wave and mask is not None and mask not in bad and is_list(ctx.schema[mask]):
        groups.append((wave[0], mask))
    dec = tuple(c for c in (*decoder, r.labels if (s2s and decoder) else None)
                if c is not None and c not in bad and is_list(ctx.schema[c]))
    if len(dec) >= 2:
        groups.append(dec)
    groups += [g for g in r.aligned if all(is_list(ctx.schema[c]) for c in g)]
    if not groups:
        yield Skipped("length.mismatch", "fewer than two list columns that must align")
    for g in groups:
        lens = [pl.col(c).list.len() for c in g]
        fails = pl.any_horizontal([x.ne_missing(lens[0]) for x in lens[1:]])
        hint = ""
        if not s2s and r.labels in g and r.input_ids in g:
            hint = (". If labels are the target of an encoder-decoder model (T5, BART), set [dataset] schema = "
                    "\"seq2seq\": labels then align with the decoder columns, or with nothing")
        yield RowCheck(
            check="length.mismatch", column=None, fails=fails,
            example=pl.concat_str([pl.format("{}={}", pl.lit(c), pl.col(c).list.len()) for c in g], separator=", "),
            message=lambda n, d, g=g, hint=hint: (f"{n} row(s) have list columns of different lengths among {list(g)}: "
                                                  "positions no longer line up (a collator will fail or misalign "
                                                  f"labels){hint}"),
        )


@check("length.ctc_infeasible", layouts=frozenset({"ctc"}), roles=("input_lengths", "labels"))
def ctc_infeasible(ctx: ShardContext) -> Iterable[ShardItem]:
    """``length.ctc_infeasible``: with ``input_lengths`` (per-row encoder frames, integer) and token
    ``labels`` (list of int; ``ignore_index`` entries are padding and dropped):
    ``floor(input_length / ctc_downsample)`` is less than the label length plus its adjacent repeats
    (CTC needs a blank between two equal labels), so the CTC loss is inf."""
    r, ign, ds = ctx.roles, ctx.cfg.labels.ignore, ctx.cfg.labels.ctc_downsample
    lab = as_int64(r.labels, ctx.schema[r.labels])
    if ign is not None:
        lab = lab.list.eval(pl.element().filter(pl.element() != ign))
    need = lab.list.len() + lab.list.diff().list.count_matches(0)
    frames = as_int64(r.input_lengths, ctx.schema[r.input_lengths]) // ds
    yield RowCheck(
        check="length.ctc_infeasible", column=r.labels, fails=(frames < need).fill_null(False),
        example=pl.format("{} output steps < {} needed", frames, need),
        message=lambda n, d, ds=ds: (f"{n} row(s) have fewer encoder output steps (input_lengths // ctc_downsample="
                                     f"{ds}) than their labels need (length + adjacent repeats): the CTC loss is inf. "
                                     "Drop them, or use zero_infinity=True"))
