"""tokens: token ids against the vocabulary, and the id column's storage type."""
from __future__ import annotations

from typing import Iterable

import polars as pl

from datacheck.checks.registry import RowCheck, ShardContext, ShardItem, shard_checks
from datacheck.checks._expr import first_bad, id_storage_cap
from datacheck.checks.roledtype import problem
from datacheck.model.findings import Finding, Skipped
from datacheck.model.roles import inner_dtype

__all__ = ["token_checks"]


@shard_checks("tokens")
def token_checks(ctx: ShardContext) -> Iterable[ShardItem]:
    """``tokens.out_of_vocab`` and ``tokens.dtype_overflow``.

    ``input_ids``: list of integers, shape (rows, seq_len). A row fails ``out_of_vocab`` when any id
    is < 0 or >= ``vocab_size`` (the embedding has ``vocab_size`` rows; an id past it is an
    index error on GPU, or silently wrong with some kernels), or is null (a null id has no
    embedding row; collators fail or fill it with an arbitrary value). ``dtype_overflow`` (shard
    level): the element type cannot hold ``vocab_size - 1`` (e.g. uint16, max 65535, for mBERT's
    119547): ids above it cannot be stored, so if the data was tokenized with that vocabulary they
    were wrapped or clipped on the way (the finding says so as a condition, not as a fact).

    Native list kernels only (``list.min``/``list.max``/``list.count_matches(None)``); per-element
    evaluation runs in the second pass, on failing rows only. An ``input_ids`` column whose dtype is
    not a list of integers is ``schema.dtype`` (:mod:`datacheck.checks.roledtype`) and both checks
    are skipped with that reason.
    """
    ids = ctx.roles.input_ids
    vocab = ctx.cfg.tokens.vocab_size
    if ids is None:
        yield Skipped("tokens.out_of_vocab", "no input_ids column (set [columns] input_ids)")
        yield Skipped("tokens.dtype_overflow", "no input_ids column (set [columns] input_ids)")
        return
    if vocab is None:
        yield Skipped("tokens.out_of_vocab", "[tokens] vocab_size is not set")
        yield Skipped("tokens.dtype_overflow", "[tokens] vocab_size is not set")
        return
    bad_dtype = problem(ctx, "input_ids")
    if bad_dtype is not None:
        yield Skipped("tokens.out_of_vocab", bad_dtype.skip_reason)
        yield Skipped("tokens.dtype_overflow", bad_dtype.skip_reason)
        return
    t = ctx.schema[ids]
    inner = inner_dtype(t)
    cap = id_storage_cap(t, vocab)
    if cap is not None:
        yield Finding(
            check="tokens.dtype_overflow", severity="error", column=ids,
            message=(f"{ids!r} stores ids as {inner} (max {cap}) but vocab_size is {vocab}: ids above {cap} "
                     f"cannot be stored: if the data was tokenized with vocab_size {vocab} they were wrapped or "
                     "clipped. Store ids as int32 (or uint32)."),
            details={"dtype": str(inner), "dtype_max": cap, "vocab_size": vocab},
        )
    c = pl.col(ids)

    def bad(x: pl.Expr) -> pl.Expr:
        return x.is_null() | (x < 0) | (x >= vocab)

    flat = c.explode()
    yield RowCheck(
        check="tokens.out_of_vocab", column=ids,
        fails=(c.list.max() >= vocab) | (c.list.min() < 0) | (c.list.count_matches(None) > 0),
        example=first_bad(ids, t, bad, null_text="null id"),
        details={"max_id": flat.filter(bad(flat)).max(),
                 "min_id": flat.filter(bad(flat)).min(),
                 "ids": c.list.eval(bad(pl.element()).cast(pl.UInt32)).list.sum().sum(),
                 "null_ids": c.list.count_matches(None).sum()},
        message=lambda n, d: _oov_message(n, d, vocab),
    )


def _oov_message(n: int, d: dict, vocab: int) -> str:
    nulls = d.get("null_ids") or 0
    msg = f"{n} row(s) hold token ids outside [0, vocab_size={vocab})"
    parts = [f"{d.get('ids')} ids"]
    if d.get("min_id") is not None:
        parts.append(f"offending ids range from {d.get('min_id')} to {d.get('max_id')}")
    if nulls:
        parts.append(f"{nulls} null id(s): a null id has no embedding")
    msg += " (" + "; ".join(parts) + ")"
    if d.get("min_id") is not None:
        msg += ": a tokenizer/model vocab mismatch or a wrong vocab_size"
    return msg
