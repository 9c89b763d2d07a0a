"""tokens: token ids against the vocabulary, the id column's storage type, token type ids, and
position ids against the model's position table (``tokens.position_out_of_range``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

import polars as pl

from datacheck.checks._expr import counts_to_pairs, first_bad, id_storage_cap
from datacheck.checks.registry import RowCheck, ShardContext, ShardItem, check, derives, finding, max_parts, min_parts
from datacheck.checks.roledtype import problem
from datacheck.contracts import load_contract
from datacheck.derive.read import CHAT
from datacheck.model import layouts as lay
from datacheck.model.findings import Finding, Skipped
from datacheck.model.roles import ROLE_SPECS, inner_dtype, token_id_columns

__all__ = ["out_of_vocab", "dtype_overflow", "type_id_out_of_range", "contract_dtype_overflow", "overflow_cap",
           "position_out_of_range", "ID_LAYOUTS", "id_columns", "PROMPT_IDS", "ReadSequence", "read_sequences"]

#: the read path's derivations this family reads: the token columns a chat template's rendering
#: gives (``[tokens] tokenizer``)
derives(__name__, CHAT)


#: the layouts whose rows may hold token ids: the tokenized layouts, and preference rows (TRL's
#: tokenized pairs ``prompt_input_ids`` / ``chosen_input_ids`` / ``rejected_input_ids``, KTO's
#: ``completion_input_ids``)
ID_LAYOUTS: frozenset[str] = lay.TOKENIZED | frozenset({"dpo", "kto"})


def id_columns(ctx: ShardContext) -> tuple[list[str], Skipped | None]:
    """The token-id list columns of ``ctx``'s rows the vocabulary checks judge
    (:func:`datacheck.model.roles.token_id_columns`, an ``input_ids`` column whose dtype cannot serve
    left out: it is ``schema.dtype``), and the skip of a shard with none: the ``input_ids`` role's dtype
    problem, else its missing-column reason."""
    p = problem(ctx, "input_ids")
    cols = [c for c in token_id_columns(ctx.roles, ctx.schema) if not (p is not None and c == ctx.roles.input_ids)]
    if cols:
        return cols, None
    return cols, ("" if p is None else p.skip_reason) or ROLE_SPECS["input_ids"].missing_reason  # type: ignore[return-value]


def overflow_cap(ctx: ShardContext, ids: str | None = None) -> int | None:
    """The largest id the element type of ``ids`` (default: the ``input_ids`` column) can store when
    that is below ``vocab_size - 1`` (shared by ``tokens.dtype_overflow`` and the messages of
    ``tokens.out_of_vocab``), else None."""
    return id_storage_cap(ctx.schema[ids or ctx.roles.input_ids], ctx.cfg.tokens.vocab_size)


@check("tokens.dtype_overflow", layouts=ID_LAYOUTS, roles=("input_ids",), facts=("tokens.vocab_size",),
       dtype_roles=(), reads_tokens=True)
def dtype_overflow(ctx: ShardContext) -> Iterable[ShardItem]:
    """``tokens.dtype_overflow`` (shard level, from the schema): the element type of a token-id column
    (:func:`id_columns`: ``input_ids``, TRL's ``chosen_input_ids`` / ``rejected_input_ids`` /
    ``prompt_input_ids``, any ``*_input_ids`` list of integers) cannot hold ``vocab_size - 1`` (e.g.
    uint16, max 65535, for mBERT's 119547): ids above it cannot be stored, so if the data was tokenized
    with that vocabulary they were wrapped or clipped on the way (the finding says so as a condition,
    not as a fact). One finding per column. An ``input_ids`` column whose dtype is not a list of
    integers is ``schema.dtype`` and this check is skipped with that reason when no other column holds ids."""
    cols, skip = id_columns(ctx)
    if skip is not None:
        yield Skipped("tokens.dtype_overflow", skip)  # type: ignore[arg-type]
        return
    vocab = ctx.cfg.tokens.vocab_size
    for ids in cols:
        cap = overflow_cap(ctx, ids)
        if cap is not None:
            inner = inner_dtype(ctx.schema[ids])
            yield finding(
                "tokens.dtype_overflow", column=ids,
                message=(f"{ids!r} stores ids as {inner} (max {cap}) but vocab_size is {vocab}: ids above {cap} "
                         f"cannot be stored: if the data was tokenized with vocab_size {vocab} they were wrapped or "
                         "clipped. Store ids as int32 (or uint32)."),
                details={"dtype": str(inner), "dtype_max": cap, "vocab_size": vocab},
            )


def outside_range(hi: int) -> Callable[[pl.Expr], pl.Expr]:
    """Element predicate of an id that indexes an embedding of ``hi`` rows: null, < 0 or >= ``hi``."""
    return lambda x: x.is_null() | (x < 0) | (x >= hi)


def row_outside_range(c: pl.Expr, hi: int) -> pl.Expr:
    """Per row (list of integers): any element null, < 0 or >= ``hi``. Native list kernels only
    (``list.min``/``list.max``/``count_matches(None)``), so it fuses cheaply into the shard's query."""
    return (c.list.max() >= hi) | (c.list.min() < 0) | (c.list.count_matches(None) > 0)


@check("tokens.out_of_vocab", layouts=ID_LAYOUTS, roles=("input_ids",), facts=("tokens.vocab_size",),
       dtype_roles=(), reads_tokens=True)
def out_of_vocab(ctx: ShardContext) -> Iterable[ShardItem]:
    """``tokens.out_of_vocab``, one row check per token-id column of the row (:func:`id_columns`:
    ``input_ids``, and in preference rows TRL's ``prompt_input_ids`` / ``chosen_input_ids`` /
    ``rejected_input_ids``, any ``*_input_ids`` list of integers): every one of them is looked up in
    the same embedding.

    Each column: list of integers, shape (rows, seq_len). A row fails when any id is < 0 or
    >= ``vocab_size`` (the embedding has ``vocab_size`` rows; an id past it is an index error on
    GPU, or silently wrong with some kernels), or is null (a null id has no embedding row; collators
    fail or fill it with an arbitrary value).

    Native list kernels only (``list.min``/``list.max``/``list.count_matches(None)``); per-element
    evaluation runs in the second pass, on failing rows only. An ``input_ids`` column whose dtype is
    not a list of integers is ``schema.dtype`` (:mod:`datacheck.checks.roledtype`) and is not judged
    here; with no other token-id column the check is skipped with that reason.
    """
    cols, skip = id_columns(ctx)
    if skip is not None:
        yield Skipped("tokens.out_of_vocab", skip)  # type: ignore[arg-type]
        return
    vocab = ctx.cfg.tokens.vocab_size
    for ids in cols:
        t = ctx.schema[ids]
        c = pl.col(ids)
        bad = outside_range(vocab)
        flat = c.explode()
        yield RowCheck(
            check="tokens.out_of_vocab", column=ids,
            fails=row_outside_range(c, vocab),
            example=first_bad(ids, t, bad, null_text="null id"),
            details={"max_id": flat.filter(bad(flat)).max(),
                     "min_id": flat.filter(bad(flat)).min(),
                     "ids": c.list.eval(bad(pl.element()).cast(pl.UInt32)).list.sum().sum(),
                     "null_ids": c.list.count_matches(None).sum()},
            message=lambda n, d: _oov_message(n, d, vocab, ctx.cfg.tokens.pad_token_id, ctx.cfg.labels.ignore),
        )


@check("tokens.type_id_out_of_range", layouts=lay.TOKENIZED, roles=("token_type_ids",), facts=("tokens.type_vocab_size",))
def type_id_out_of_range(ctx: ShardContext) -> Iterable[ShardItem]:
    """``tokens.type_id_out_of_range``: a ``token_type_ids`` value outside ``[0, type_vocab_size)``.

    ``token_type_ids``: list of integers, shape (rows, seq_len). The model's token-type embedding
    has ``type_vocab_size`` rows (BERT: 2, RoBERTa/XLM-R: 1), so a type id >= it, or < 0, is an
    index error on GPU. A row fails when any type id is < 0 or >= ``[tokens] type_vocab_size``, or
    is null (it has no embedding row either). A null list (no type ids at all) does not fail here.
    Native list kernels (``list.min``/``list.max``/``count_matches(None)``) in the fused query; the
    offending values are counted in the second pass, on failing rows only. Skipped (by the registry)
    without a ``token_type_ids`` column, without ``type_vocab_size``, or when the column is not a
    list of integers (``schema.dtype``).
    """
    col = ctx.roles.token_type_ids
    k = ctx.cfg.tokens.type_vocab_size
    c = pl.col(col)
    bad = outside_range(k)
    flat = c.explode()
    shown = flat.filter(bad(flat))
    if inner_dtype(ctx.schema[col]) != pl.UInt64:  # uint64 keeps its values (one beyond Int64 did not cast)
        shown = shown.cast(pl.Int64)
    yield RowCheck(
        check="tokens.type_id_out_of_range", column=col,
        fails=row_outside_range(c, k),
        example=first_bad(col, ctx.schema[col], bad, null_text="null type id"),
        details={"values": shown.value_counts(sort=True, name="count").head(10).implode()},
        message=lambda n, d, col=col, k=k: (f"{n} row(s) of {col!r} hold token type ids outside "
                                            f"[0, type_vocab_size={k}): {_pairs(d.get('values'))}; the token-type "
                                            "embedding has no row for them (set type_vocab_size to the model's, "
                                            "or drop token_type_ids for models without segment embeddings)"),
    )


def _pairs(vc: Any) -> str:
    pairs = counts_to_pairs(vc)
    return ", ".join(f"{'null' if v is None else v} x{n}" for v, n in pairs)


def _oov_message(n: int, d: dict, vocab: int, pad: int | None = None, ignore: int | None = None) -> str:
    """The message of ``tokens.out_of_vocab``. When ``pad`` (``[tokens] pad_token_id``) is itself out of
    range and is the only offending id (min = max = pad), the pad is named as the cause: a pad token
    added past the model's vocabulary (SmolLM's ``[PAD]`` = 49152 with ``vocab_size`` 49152).
    When the offending ids are negative and both the smallest and the largest are label sentinels
    (``ignore``, ``[labels] ignore_index``, default -100, or -1), the advice names a sentinel written
    into ``input_ids`` (ids padded with the labels' pad value), not ``vocab_size``: no vocabulary
    has a negative id. Other ids keep the vocab mismatch advice."""
    nulls = d.get("null_ids") or 0
    msg = f"{n} row(s) hold token ids outside [0, vocab_size={vocab})"
    parts = [f"{d.get('ids')} ids"]
    lo, hi = d.get("min_id"), d.get("max_id")
    if lo is not None:
        parts.append(f"offending ids range from {lo} to {hi}" if lo != hi else f"the offending id is {lo}")
    if nulls:
        parts.append(f"{nulls} null id(s): a null id has no embedding")
    msg += " (" + "; ".join(parts) + ")"
    pad_out = pad is not None and not 0 <= pad < vocab
    if lo is not None and pad_out and lo == hi == pad:
        msg += (f": the out-of-range id is [tokens] pad_token_id = {pad}, a pad token added past the model's "
                f"vocabulary; pad with an id below {vocab} (e.g. eos) or resize the model's embeddings to "
                f"{pad + 1} rows and set [tokens] vocab_size to match")
    elif lo is not None and hi < 0 and {lo, hi} <= {-1, ignore}:  # type: ignore[operator]
        shown = " and ".join(str(v) for v in sorted({lo, hi}))
        msg += (f": {shown} {'is a label sentinel' if lo == hi else 'are label sentinels'} ([labels] ignore_index "
                f"{ignore} or -1), not token ids: no vocabulary has a negative id, so input_ids were padded or "
                "masked with the labels' value; pad input_ids with [tokens] pad_token_id (masked in attention_mask) "
                "and keep the sentinel in the labels")
    elif lo is not None:
        msg += ": a tokenizer/model vocab mismatch or a wrong vocab_size"
        if pad_out and lo <= pad <= hi:  # type: ignore[operator]
            msg += f" (pad_token_id = {pad} is among them: it lies past the vocabulary too)"
    return msg


@check("tokens.dtype_overflow", level="dataset")
def contract_dtype_overflow(dctx: Any) -> Iterable[Finding]:
    """``tokens.dtype_overflow`` decided from the contract: the schema declares the ``input_ids``
    element type (e.g. ``List(UInt16)``, max 65535) too narrow for ``[tokens] vocab_size - 1``.

    Reported once for the dataset, and only when no shard already reported it from its own storage
    type (tokens family), so the defect is never counted twice.
    """
    cfg = dctx.cfg
    vocab = cfg.tokens.vocab_size
    spec = cfg.schema_spec()
    if spec is None or vocab is None:
        return
    if any(f.check == "tokens.dtype_overflow" for s in dctx.shards for f in s.findings):
        return

    contract = load_contract(spec)
    ids_cols = {s.roles.get("input_ids", {}).get("columns") for s in dctx.readable_shards()} - {None}
    for col in sorted(ids_cols):
        c = contract.schema.columns.get(col)
        if c is None or c.dtype is None:
            continue
        declared = getattr(c.dtype, "type", None)
        if not isinstance(declared, pl.DataType):
            continue
        inner = inner_dtype(declared)
        cap = id_storage_cap(declared, vocab)
        if cap is not None:
            yield finding(
                "tokens.dtype_overflow", column=col,
                message=(f"schema {contract.name} declares {col!r} as {declared} (max {cap}) but vocab_size is "
                         f"{vocab}: data that follows this contract wraps ids above {cap}. Declare int32 ids"),
                shards=tuple(sorted(s.path for s in dctx.readable_shards())),
                details={"dtype": str(inner), "dtype_max": cap, "vocab_size": vocab, "source": "schema"})


#: TRL's prompt column: its DPOTrainer (``concatenated_forward``) and KTOTrainer read the prompt and a
#: response as one sequence
PROMPT_IDS = "prompt_input_ids"


@dataclass(frozen=True)
class ReadSequence:
    """One token sequence the model reads from a row, named by its column.

    Attributes:
        column: the token-id column that names it (findings are of this column).
        length: per row, the tokens of the sequence (UInt32 expression; null where a part is null).
        what: the sequence in words (``'input_ids'``, ``'prompt_input_ids' + 'chosen_input_ids'``).
    """

    column: str
    length: pl.Expr
    what: str


def read_sequences(cols: list[str]) -> list[ReadSequence]:
    """The sequences the model reads from the token-id columns ``cols`` (:func:`id_columns`): each column
    on its own, except that beside TRL's ``prompt_input_ids`` (and another token-id column) every other
    column is a response read after the prompt: TRL's DPOTrainer concatenates ``prompt_input_ids`` with
    ``chosen_input_ids`` and with ``rejected_input_ids`` (``concatenated_forward``), so such a sequence
    holds ``len(prompt) + len(response)`` tokens, unless the column already starts with the prompt
    (TRL before 0.12 stored ``chosen_input_ids`` as prompt + chosen; KTO's ``completion_input_ids``
    holds prompt + completion): then its own length. The prompt is then no sequence of its own (each
    response sequence holds it). An encoder-decoder pair (the prompt to the encoder) is not told apart."""
    prompt = PROMPT_IDS if PROMPT_IDS in cols and len(cols) > 1 else None
    out = []
    for col in cols:
        if col == prompt:
            continue
        n = pl.col(col).list.len()
        if prompt is None:
            out.append(ReadSequence(col, n, repr(col)))
            continue
        p = pl.col(prompt)
        with_prompt = pl.col(col).list.head(p.list.len()) == p
        out.append(ReadSequence(col, pl.when(with_prompt).then(n).otherwise(p.list.len() + n),
                                f"{prompt!r} + {col!r}"))
    return out


@check("tokens.position_out_of_range", layouts=ID_LAYOUTS, roles=("position_ids|input_ids",),
       facts=("tokens.max_position_embeddings",), reads_tokens=True)
def position_out_of_range(ctx: ShardContext) -> Iterable[ShardItem]:
    """``tokens.position_out_of_range``: a ``position_ids`` value (list of int) outside
    ``[0, max_position_embeddings)`` or null; without position ids, a sequence the model reads longer
    than ``max_position_embeddings`` (its positions 0..len-1 are used): every token-id column
    (:func:`id_columns`: ``input_ids``, TRL's ``prompt_input_ids`` / ``chosen_input_ids`` /
    ``rejected_input_ids``, any ``*_input_ids`` list of integers) read as the trainer reads it
    (:func:`read_sequences`: a response after its prompt), one finding per column, naming it. With
    usable position ids, they stand for ``input_ids``' positions; the other token-id columns are still
    judged by length. The length rule is skipped with the reason when the loader cuts samples across the
    rows (:attr:`ShardContext.packed_by_loader`: Megatron documents). The position embedding (or RoPE
    cache) has ``max_position_embeddings`` rows. Native list kernels (``list.min``/``list.max``/``list.len``)."""
    k = ctx.cfg.tokens.max_position_embeddings
    r = ctx.roles
    by_positions = r.position_ids is not None and problem(ctx, "position_ids") is None
    if by_positions:
        c = pl.col(r.position_ids)
        yield RowCheck(
            check="tokens.position_out_of_range", column=r.position_ids,
            fails=(c.list.max() >= k) | (c.list.min() < 0) | (c.list.count_matches(None) > 0),
            example=pl.format("min {} max {}", c.list.min(), c.list.max()),
            details={"max": c.list.max().max(), "min": c.list.min().min()},
            details_merge={"max": max_parts, "min": min_parts},
            message=lambda n, d, k=k: (f"{n} row(s) hold position_ids outside [0, max_position_embeddings={k}) "
                                       f"(range {d.get('min')}..{d.get('max')}): the position table has no row for them"))
    cols, skip = id_columns(ctx)
    if by_positions:
        cols = [c for c in cols if c != r.input_ids]
    elif skip is not None:
        yield Skipped("tokens.position_out_of_range", skip)  # type: ignore[arg-type]
        return
    if not cols:
        return
    if ctx.packed_by_loader is not None:  # a sample's positions restart: a long row runs past nothing
        yield Skipped("tokens.position_out_of_range", ctx.packed_by_loader)
        return
    for seq in read_sequences(cols):
        n_tok = seq.length
        plain = seq.column == r.input_ids
        yield RowCheck(
            check="tokens.position_out_of_range", column=seq.column, fails=n_tok > k,
            example=pl.format("{} tokens", n_tok), details={"longest": n_tok.max()}, details_merge={"longest": max_parts},
            message=lambda n, d, k=k, what=("" if plain else f" of {seq.what}"): (
                f"{n} row(s){what} are longer than max_position_embeddings={k} (longest {d.get('longest')}): their "
                "positions run past the position table"))
