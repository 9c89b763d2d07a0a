"""tokens: token ids against the vocabulary, and the id column's storage type."""
from __future__ import annotations

from typing import Iterable

import polars as pl

from datacheck.checks import RowCheck, ShardContext, ShardItem, shard_checks
from datacheck.checks._expr import first_bad, int_max
from datacheck.findings import Finding, Skipped
from datacheck.roles import inner_dtype, is_list

__all__ = ["token_checks"]


@shard_checks("tokens")
def token_checks(ctx: ShardContext) -> Iterable[ShardItem]:
    """``tokens.out_of_vocab`` and ``tokens.dtype_overflow``.

    ``input_ids``: list of integers, shape (rows, seq_len). A row fails ``out_of_vocab`` when any id
    is < 0 or >= ``vocab_size`` (the embedding has ``vocab_size`` rows; an id past it is an
    index error on GPU, or silently wrong with some kernels). ``dtype_overflow`` (shard level): the
    element type cannot hold ``vocab_size - 1`` (e.g. uint16, max 65535, for mBERT's 119547), so
    ids were wrapped when stored.
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
    t = ctx.schema[ids]
    inner = inner_dtype(t)
    if not is_list(t) or not inner.is_integer():
        yield Skipped("tokens.out_of_vocab", f"input_ids column {ids!r} has dtype {t}, not a list of integers")
        return
    cap = int_max(inner)
    if cap is not None and cap < vocab - 1:
        yield Finding(
            check="tokens.dtype_overflow", severity="error", column=ids,
            message=(f"{ids!r} stores ids as {inner} (max {cap}) but vocab_size is {vocab}: ids above {cap} "
                     f"were wrapped when stored. Store ids as int32 (or uint32)."),
            details={"dtype": str(inner), "dtype_max": cap, "vocab_size": vocab},
        )
    c = pl.col(ids)

    def bad(x: pl.Expr) -> pl.Expr:
        return (x < 0) | (x >= vocab)

    yield RowCheck(
        check="tokens.out_of_vocab", column=ids,
        fails=(c.list.max() >= vocab) | (c.list.min() < 0),
        example=first_bad(ids, t, bad),
        details={"max_id": c.explode().filter(bad(c.explode())).max(),
                 "min_id": c.explode().filter(bad(c.explode())).min(),
                 "ids": c.list.eval(bad(pl.element()).cast(pl.UInt32)).list.sum().sum()},
        message=lambda n, d: (f"{n} row(s) hold token ids outside [0, vocab_size={vocab}) "
                              f"({d.get('ids')} ids; offending ids range from {d.get('min_id')} to {d.get('max_id')}): "
                              "a tokenizer/model vocab mismatch or a wrong vocab_size"),
    )
