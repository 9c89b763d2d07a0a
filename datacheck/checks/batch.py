"""batch: what the trainer's batching makes of the data (CHECKS.md ``batch.*``; needs ``[batch]``).

The shard pass stores, when ``[batch] batch_size`` is set, the supervised-token count of every row
as a :class:`Payload` (:data:`SUPERVISED_KEY`: a UInt32 Series, one value per row), by the rule of
:func:`supervision`: with a token ``labels`` list, labels other than ``ignore_index`` after
truncation to ``max_seq_len`` on ``truncation_side`` (every token when ``ignore_index`` is unset);
without one, beside an assistant mask, the assistant tokens (TRL's ``assistant_only_loss``:
``labels[assistant_masks == 0] = -100``); without either, in a language-model layout (``causal_lm``,
``packed_lm``), the labels Hugging Face's ``DataCollatorForLanguageModeling(mlm=False)`` makes:
``input_ids`` copied, the positions holding ``pad_token_id`` set to -100. The dataset stage then simulates
the trainer's order over the shards in index order (the audit's shard order: relative paths
sorted) as torch's own ``DistributedSampler`` and ``BatchSampler`` deal them
(:mod:`datacheck.model.order`) from the shards' row counts and these payloads; no shard is read again.

- ``batch.no_batches`` (error): with ``drop_last``, a rank's share (``ceil(rows / world_size)``) is
  under one ``batch_size``, so each rank gets 0 micro-batches; also any dataset of 0 rows.
- ``batch.singleton_tail`` (error): each rank's last micro-batch holds exactly 1 row (batch norm on
  one sample fails in training mode: "Expected more than 1 value per channel"); not judged with
  ``batch_size = 1`` (every micro-batch holds 1 row; a skipped entry says so).
- ``batch.small_tail`` (warn): each rank's last micro-batch holds at least 2 and fewer than
  ``batch_size / 2`` rows (a 1-row tail is ``batch.singleton_tail`` only).
- ``batch.wraparound`` (info): ``DistributedSampler`` pads each epoch by repeating
  ``ceil(rows / world_size) * world_size - rows`` rows (those rows get extra weight).
- ``batch.no_supervised_tokens`` (error): some (epoch, step, rank, micro-batch) of the simulated
  order has 0 supervised tokens: a mean cross-entropy over that micro-batch is 0/0 = NaN. Every
  epoch of ``[batch] epochs`` is simulated (``set_epoch`` reseeds the shuffle).

Token-budget batching (``[batch] max_tokens``; ``batch_size`` then caps the rows of a micro-batch, or
is unset): the order is that of :class:`datacheck.model.budget.TokenBudgetBatchSampler` (fairseq's
``batch_by_size``), from each row's token count (:data:`TOKENS_KEY` payload: the ``input_ids`` list
length capped at ``max_seq_len``). The checks keep their meaning, measured in that order:
``batch.no_batches`` when, with ``drop_last``, there are fewer token batches than ranks;
``batch.singleton_tail`` / ``batch.small_tail`` on each rank's last micro-batch, the small tail
being one whose padded tokens (rows x longest row) are under half of ``max_tokens``;
``batch.wraparound`` counts the rows of the batches ``DistributedSampler`` repeats. A row longer
than ``max_tokens`` gets a micro-batch of its own (the plan lists it; no check ID covers it).

Every check is skipped with the reason when Megatron's loader reads the shards (``[batch] loader``
``megatron``, or ``auto`` over Megatron ``.bin``/``.idx`` pairs only: GPTDataset's fixed-length samples
have no tails and no wraparound; :mod:`datacheck.model.megatronorder`), when torch is missing (the install command), when a shard
cannot be read (its row count is unknown), when neither ``batch_size`` nor ``max_tokens`` is set,
or, with ``max_tokens``, when a shard has no ``input_ids`` list (row lengths unknown).
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import polars as pl

from datacheck.checks._expr import supervised_per_row, truncated
from datacheck.checks.registry import Payload, ShardContext, check, derives, finding, measure
from datacheck.derive.read import CHAT
from datacheck.model import layouts as lay
from datacheck.model.errors import OptionalDependencyError
from datacheck.model.findings import Finding, Skipped
from datacheck.model.megatronorder import uses_megatron_loader
from datacheck.model.order import EpochOrder, epoch_order
from datacheck.model.roles import is_list

__all__ = ["SUPERVISED_KEY", "TOKENS_KEY", "supervised_expr", "assistant_supervised_expr", "collator_supervised_expr",
           "collator_columns",
           "supervision", "supervision_rule", "shard_supervision_rule", "tokens_expr", "batch_payload", "dataset_order",
           "dataset_lengths"]

#: the read path's derivations this family reads: the token columns a chat template's rendering
#: gives (``[tokens] tokenizer``)
derives(__name__, CHAT)

#: the payload key of the per-row supervised-token counts
SUPERVISED_KEY = "batch.supervised"
#: the payload key of the per-row token counts (for ``max_tokens``)
TOKENS_KEY = "batch.tokens"
#: either a fixed batch size or a token budget serves
_FACTS = ("batch.batch_size|batch.max_tokens",)
_REASONS = {_FACTS[0]: "[batch] batch_size is not set"}
_MAX_LISTED = 20


def supervised_expr(ctx_cfg: Any, labels_col: str) -> pl.Expr:
    """Per row (UInt32, 0 for a null list): supervised token labels after truncation (see the module)."""
    tok, ign = ctx_cfg.tokens, ctx_cfg.labels.ignore
    if ign is None:
        e = supervised_per_row(labels_col, -(2 ** 62), tok.max_seq_len, tok.truncation_side)
    else:
        e = supervised_per_row(labels_col, ign, tok.max_seq_len, tok.truncation_side)
    return e.fill_null(0).cast(pl.UInt32)


def assistant_supervised_expr(ctx_cfg: Any, assistant_col: str) -> pl.Expr:
    """Per row (UInt32, 0 for a null list): the supervised tokens of a row with an assistant mask and no
    labels column, as TRL's ``DataCollatorForLanguageModeling`` labels them under ``assistant_only_loss``
    (``labels = input_ids``; ``labels[assistant_masks == 0] = -100``): the mask's positions other than 0
    after truncation to ``max_seq_len`` on ``truncation_side`` (the mask is aligned with the ids). The
    rule in words: :func:`supervision_rule`."""
    tok = ctx_cfg.tokens
    kept = truncated(assistant_col, tok.max_seq_len, tok.truncation_side)  # integer, boolean or float masks alike
    return kept.list.eval((pl.element().cast(pl.Float64) != 0).cast(pl.UInt32)).list.sum().fill_null(0).cast(pl.UInt32)


def collator_supervised_expr(ctx_cfg: Any, ids_col: str, mask_col: str | None) -> pl.Expr:
    """Per row (UInt32, 0 for a null list): the supervised tokens of a row without a labels column, as
    Hugging Face's ``DataCollatorForLanguageModeling(mlm=False)`` labels it (``labels =
    input_ids.clone(); labels[labels == pad_token_id] = -100``), after truncation to ``max_seq_len``
    on ``truncation_side``: the ids other than ``[tokens] pad_token_id``. Without a pad id: the
    positions where ``mask_col`` (the attention mask) is not 0 (the padding the tokenizer would have
    put the pad id in), else every id. The rule in words: :func:`supervision_rule`."""
    tok = ctx_cfg.tokens
    pad = tok.pad_token_id
    if pad is None and mask_col is None:
        return truncated(ids_col, tok.max_seq_len, tok.truncation_side).list.len().fill_null(0).cast(pl.UInt32)
    col, off = (ids_col, pad) if pad is not None else (mask_col, 0)
    return supervised_per_row(col, off, tok.max_seq_len, tok.truncation_side).fill_null(0).cast(pl.UInt32)


def supervision_rule(ctx_cfg: Any, layout: str | None, labels_col: str | None, ids_col: str | None,
                     mask_col: str | None, assistant_col: str | None = None) -> str | None:
    """How a row's supervised tokens are counted, in words (``datacheck plan`` prints it), or None when
    they are unknown. ``labels_col``: the token labels list column (None: none or not a list);
    ``ids_col``: the ``input_ids`` list column; ``mask_col``: the attention mask column;
    ``assistant_col``: the assistant mask list column.

    - a token labels list: its labels other than ``[labels] ignore_index``;
    - no labels, ids and an assistant mask: the assistant tokens (mask not 0), as TRL's collator
      labels them under ``assistant_only_loss`` (``labels = input_ids``; ``labels[assistant_masks == 0]
      = -100``) (:func:`assistant_supervised_expr`);
    - no labels, a language-model layout (``causal_lm``, ``packed_lm``: the labels are the ids) and
      ids: Hugging Face's ``DataCollatorForLanguageModeling(mlm=False)`` (:func:`collator_supervised_expr`);
    - else None (a classification row has one class label, no token targets; an unknown layout is
      not guessed at)."""
    tok, ign = ctx_cfg.tokens, ctx_cfg.labels.ignore
    trunc = f" after truncation to max_seq_len {tok.max_seq_len}" if tok.max_seq_len is not None else ""
    if labels_col is not None:
        return (f"token labels {labels_col!r} other than ignore_index {ign}" if ign is not None
                else f"every token label of {labels_col!r} (no ignore_index)") + trunc
    if ids_col is not None and assistant_col is not None:
        return (f"no labels column: the assistant tokens ({assistant_col!r} not 0), as TRL's collator labels them "
                f"with assistant_only_loss ({ids_col!r} with every position of {assistant_col!r} 0 set to -100)"
                + trunc)
    if ids_col is None or layout not in lay.LM:
        return None
    how = "no labels column: labels as DataCollatorForLanguageModeling(mlm=False) makes them, "
    if tok.pad_token_id is not None:
        return how + f"{ids_col!r} with every pad_token_id {tok.pad_token_id} set to -100" + trunc
    if mask_col is not None:
        return how + (f"{ids_col!r} with the padding ({mask_col!r} 0) ignored (no [tokens] pad_token_id: the "
                      "positions the pad id would fill)") + trunc
    return how + f"every id of {ids_col!r} (no [tokens] pad_token_id, no attention mask: nothing is padding)" + trunc


def _list_col(col: str | None, schema: dict[str, pl.DataType]) -> str | None:
    return col if col is not None and is_list(schema.get(col, pl.Null())) else None


def collator_columns(layout: str | None, roles: Any, schema: dict[str, pl.DataType]) -> tuple[str, str | None] | None:
    """``(input_ids column, attention mask column or None)`` of a shard whose token labels are those
    Hugging Face's ``DataCollatorForLanguageModeling(mlm=False)`` makes (``labels = input_ids.clone();
    labels[labels == pad_token_id] = -100``): a language-model layout (``causal_lm``, ``packed_lm``)
    with an ``input_ids`` list and no token labels list. None otherwise (the shard's own labels
    decide, or its supervision is unknown). ``roles``: the shard's resolved roles; ``schema``: its
    column dtypes. The one rule :func:`supervision`, ``datacheck plan`` and ``padding.eos_unsupervised``
    share."""
    ids = _list_col(roles.input_ids, schema)
    if ids is None or layout not in lay.LM or _list_col(roles.labels, schema) is not None:
        return None
    return ids, _list_col(roles.attention_mask, schema)


def supervision(ctx_cfg: Any, layout: str | None, roles: Any, schema: dict[str, pl.DataType]
                ) -> tuple[pl.Expr, str] | None:
    """The per-row supervised-token count (UInt32 expression) and its rule in words
    (:func:`supervision_rule`) for a shard of ``layout`` with ``roles`` and ``schema``; None when unknown."""
    lab = _list_col(roles.labels, schema)
    ids, amask = _list_col(roles.input_ids, schema), _list_col(roles.assistant_mask, schema)
    rule = supervision_rule(ctx_cfg, layout, lab, ids, _list_col(roles.attention_mask, schema), amask)
    if rule is None:
        return None
    if lab is not None:
        return supervised_expr(ctx_cfg, lab), rule
    if ids is not None and amask is not None:
        return assistant_supervised_expr(ctx_cfg, amask), rule
    cols = collator_columns(layout, roles, schema)
    assert cols is not None
    return collator_supervised_expr(ctx_cfg, *cols), rule


def shard_supervision_rule(ctx_cfg: Any, shard: Any) -> str | None:
    """:func:`supervision_rule` of an audited shard (a :class:`~datacheck.model.results.ShardResult`:
    its roles, layout and column dtypes as the report records them); None when unreadable or unknown."""
    if not shard.readable:
        return None

    def col(role: str) -> str | None:
        c = (shard.roles.get(role) or {}).get("columns")
        return c if isinstance(c, str) and str(shard.columns.get(c, "")).startswith(("List", "Array")) else None
    return supervision_rule(ctx_cfg, (shard.layout or {}).get("name"), col("labels"), col("input_ids"),
                            col("attention_mask"), col("assistant_mask"))


def tokens_expr(ctx_cfg: Any, ids_col: str) -> pl.Expr:
    """Per row (UInt32, 0 for a null list): the ``input_ids`` list length, capped at ``[tokens]
    max_seq_len`` when set (the row's tokens as the trainer sees them after truncation)."""
    n = pl.col(ids_col).list.len()
    if ctx_cfg.tokens.max_seq_len is not None:
        n = n.clip(upper_bound=ctx_cfg.tokens.max_seq_len)
    return n.fill_null(0).cast(pl.UInt32)


def _series(v: Any) -> pl.Series:
    return v if isinstance(v, pl.Series) else pl.Series(v, dtype=pl.UInt32)


@measure("batch")
def batch_payload(ctx: ShardContext) -> Iterable[Payload]:
    """The supervised-token count of every row, for ``batch.no_supervised_tokens`` (when ``[batch]
    batch_size`` or ``max_tokens`` is set and :func:`supervision` knows the rows' supervision), and with
    ``max_tokens`` the token count of every row (a list ``input_ids`` column)."""
    b = ctx.cfg.batch
    if b.batch_size is None and b.max_tokens is None:
        return
    sup = supervision(ctx.cfg, ctx.layout, ctx.roles, ctx.schema)
    if sup is not None:
        yield Payload(key=SUPERVISED_KEY, expr=sup[0].implode(), post=_series)
    ids = ctx.roles.input_ids
    if b.max_tokens is not None and ids is not None and is_list(ctx.schema.get(ids, pl.Null())):
        yield Payload(key=TOKENS_KEY, expr=tokens_expr(ctx.cfg, ids).implode(), post=_series)


def _payload_array(dctx: Any, key: str) -> np.ndarray | None:
    """The per-row payload ``key`` of every shard, concatenated in shard order (int64), or None when
    a shard lacks it."""
    parts = []
    for s in dctx.shards:
        v = s.payload.get(key)
        if v is None:
            return None
        parts.append(v.to_numpy() if isinstance(v, pl.Series) else np.asarray(v))
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)


def dataset_lengths(dctx: Any) -> np.ndarray | None:
    """Tokens per global row (int64), when ``max_tokens`` is set and every shard has an ``input_ids`` list."""
    return _payload_array(dctx, TOKENS_KEY) if dctx.cfg.batch.max_tokens is not None else None


def dataset_order(dctx: Any, cid: str, epoch: int = 0) -> tuple[EpochOrder | None, Skipped | None]:
    """The simulated order of ``epoch`` over the audited shards, or why it cannot be simulated (also
    when Megatron's loader reads them: torch's samplers are not its order)."""
    if uses_megatron_loader([s.format for s in dctx.shards], dctx.cfg.batch.loader):
        return None, Skipped(cid, "Megatron's loader reads these shards ([batch] loader; auto: every shard is a "
                                  "Megatron .bin/.idx pair): GPTDataset cuts fixed-length samples across the documents "
                                  "and MegatronPretrainingSampler hands out whole global batches, so torch's "
                                  "micro-batches of rows, their tails and wraparound do not occur (datacheck plan "
                                  "shows Megatron's order)")
    bad = [s.path for s in dctx.shards if not s.readable]
    if bad:
        return None, Skipped(cid, f"shard {bad[0]} is unreadable: its row count is unknown, so the batch "
                                  "order cannot be simulated")
    lengths = dataset_lengths(dctx)
    if dctx.cfg.batch.max_tokens is not None and lengths is None:
        return None, Skipped(cid, "[batch] max_tokens: token-budget batching needs each row's token count, and a "
                                  "shard has no input_ids list column (set [columns] input_ids)")
    n = sum(int(s.rows) for s in dctx.shards)
    memo = getattr(dctx, "memo", None)
    key = ("batch.order", epoch)
    if memo is not None and key in memo:  # the five batch checks ask for epoch 0 alike
        return memo[key], None
    try:
        order = epoch_order(n, dctx.cfg.batch, epoch, lengths)
    except OptionalDependencyError as exc:
        return None, Skipped(cid, str(exc))
    if memo is not None:
        memo[key] = order
    return order, None


def _tails(order: EpochOrder) -> list[int]:
    """The size of each rank's last micro-batch (0 when the rank has none)."""
    return [len(mbs[-1]) if mbs else 0 for mbs in order.ranks]


def _setup(dctx: Any) -> str:
    b = dctx.cfg.batch
    size = (f"max_tokens {b.max_tokens}" + (f" (at most {b.batch_size} rows)" if b.batch_size else "")
            if b.max_tokens is not None else f"batch_size {b.batch_size}")
    return f"{size} x world_size {b.world_size} x grad_accum {b.grad_accum}, drop_last {str(b.drop_last).lower()}"


@check("batch.no_batches", layouts=lay.ANY, level="dataset", facts=_FACTS, reasons=_REASONS)
def no_batches(dctx: Any) -> Iterable[Finding | Skipped]:
    """``batch.no_batches``: each rank gets 0 micro-batches per epoch."""
    order, skip = dataset_order(dctx, "batch.no_batches")
    if order is None:
        yield skip  # type: ignore[misc]
        return
    if order.micro_batches == 0:
        b = dctx.cfg.batch
        why = ("the dataset has 0 rows" if order.n_rows == 0 else
               f"the rows make {order.n_batches} token batch(es) of at most {b.max_tokens} tokens, fewer than "
               f"{b.world_size} rank(s), and drop_last drops them" if order.max_tokens is not None else
               f"each of {b.world_size} rank(s) gets {order.per_rank} row(s), under one batch of "
               f"{b.batch_size}, and drop_last drops it")
        yield finding("batch.no_batches", count=order.n_rows,
                      message=f"no batch at all per epoch: {why} ({_setup(dctx)}); the trainer runs 0 steps",
                      details={"rows": order.n_rows, "rows_per_rank": order.per_rank})


@check("batch.singleton_tail", layouts=lay.ANY, level="dataset", facts=_FACTS, reasons=_REASONS)
def singleton_tail(dctx: Any) -> Iterable[Finding | Skipped]:
    """``batch.singleton_tail``: the last micro-batch of a rank holds exactly 1 row. Not judged with
    ``batch_size = 1`` and no ``max_tokens`` (a skipped entry says so): every micro-batch then holds 1
    row by design and the last is no different (a new user's clean data failed the gate on it)."""
    b = dctx.cfg.batch
    if b.max_tokens is None and b.batch_size == 1:
        yield Skipped("batch.singleton_tail", "[batch] batch_size = 1: every micro-batch holds 1 row by design, so "
                                              "the last one is no different (batch norm, if the model has it, fails "
                                              "on every step alike)")
        return
    order, skip = dataset_order(dctx, "batch.singleton_tail")
    if order is None:
        yield skip  # type: ignore[misc]
        return
    tails = _tails(order)
    ranks = [r for r, t in enumerate(tails) if t == 1]
    if ranks:
        yield finding("batch.singleton_tail", count=len(ranks),
                      message=(f"the last micro-batch of {len(ranks)} rank(s) holds 1 row ({_setup(dctx)}; "
                               f"{order.n_rows} rows): batch norm fails on it in training mode; "
                               "set drop_last or change the batch size"),
                      details={"ranks": ranks[:1000], "last_batch_rows": 1, "micro_batches_per_rank": order.micro_batches})


@check("batch.small_tail", layouts=lay.ANY, level="dataset", facts=_FACTS, reasons=_REASONS)
def small_tail(dctx: Any) -> Iterable[Finding | Skipped]:
    """``batch.small_tail``: the last micro-batch of a rank has 2 .. ceil(batch_size/2)-1 rows (with
    ``max_tokens``: 2 rows or more and padded tokens, rows x longest row, under ``max_tokens / 2``)."""
    order, skip = dataset_order(dctx, "batch.small_tail")
    if order is None:
        yield skip  # type: ignore[misc]
        return
    tails = _tails(order)
    if order.max_tokens is not None:
        lengths = dataset_lengths(dctx)
        assert lengths is not None  # dataset_order had them
        padded = [len(m[-1]) * int(lengths[m[-1]].max()) if len(m) and len(m[-1]) else 0 for m in order.ranks]
        ranks = [r for r, t in enumerate(tails) if 1 < t and 2 * padded[r] < order.max_tokens]
        if ranks:
            yield finding("batch.small_tail", count=len(ranks),
                          message=(f"the last micro-batch of {len(ranks)} rank(s) holds {padded[ranks[0]]} padded "
                                   f"tokens, under half of max_tokens {order.max_tokens} ({_setup(dctx)}; "
                                   f"{order.n_rows} rows): its gradient is noisier and weighs each row more"),
                          details={"ranks": ranks[:1000], "last_batch_rows": sorted({tails[r] for r in ranks}),
                                   "last_batch_padded_tokens": sorted({padded[r] for r in ranks})})
        return
    bs = int(dctx.cfg.batch.batch_size)
    ranks = [r for r, t in enumerate(tails) if 1 < t and 2 * t < bs]
    if ranks:
        sizes = sorted({tails[r] for r in ranks})
        yield finding("batch.small_tail", count=len(ranks),
                      message=(f"the last micro-batch of {len(ranks)} rank(s) holds {sizes[0]} row(s), under half "
                               f"of batch_size {bs} ({_setup(dctx)}; {order.n_rows} rows): its gradient is noisier "
                               "and weighs each row more"),
                      details={"ranks": ranks[:1000], "last_batch_rows": sizes})


@check("batch.wraparound", layouts=lay.ANY, level="dataset", facts=_FACTS, reasons=_REASONS)
def wraparound(dctx: Any) -> Iterable[Finding | Skipped]:
    """``batch.wraparound``: DistributedSampler (or accelerate's ``even_batches``, ``[batch] loader =
    "accelerate"``) repeats rows to pad the epoch."""
    order, skip = dataset_order(dctx, "batch.wraparound")
    if order is None:
        yield skip  # type: ignore[misc]
        return
    if order.repeats and order.max_tokens is not None:
        ws = dctx.cfg.batch.world_size
        yield finding("batch.wraparound", count=order.repeats,
                      message=(f"DistributedSampler repeats {order.repeated_batches} token batch(es) ({order.repeats} "
                               f"row(s)) per epoch to split {order.n_batches} batches evenly over {ws} ranks"),
                      details={"repeats_per_epoch": order.repeats, "repeated_batches": order.repeated_batches,
                               "batches_per_epoch": order.n_batches})
    elif order.repeats and dctx.cfg.batch.loader == "accelerate":
        ws = dctx.cfg.batch.world_size
        yield finding("batch.wraparound", count=order.repeats,
                      message=(f"accelerate's even_batches repeats {order.repeats} row(s) of the epoch's first batches "
                               f"per epoch to give each of {ws} process(es) as many full batches ({order.n_rows} "
                               "rows); drop_last or even_batches = false avoids it"),
                      details={"repeats_per_epoch": order.repeats, "rows_per_rank": order.per_rank})
    elif order.repeats:
        ws = dctx.cfg.batch.world_size
        yield finding("batch.wraparound", count=order.repeats,
                      message=(f"DistributedSampler repeats {order.repeats} row(s) per epoch to split {order.n_rows} "
                               f"rows evenly over {ws} ranks ({order.per_rank} each)"),
                      details={"repeats_per_epoch": order.repeats, "rows_per_rank": order.per_rank})


def _supervised(dctx: Any) -> np.ndarray | None:
    return _payload_array(dctx, SUPERVISED_KEY)


def _rules(dctx: Any) -> list[str]:
    """The distinct :func:`shard_supervision_rule` texts of the readable shards, in shard order."""
    out: list[str] = []
    for s in dctx.shards:
        rule = shard_supervision_rule(dctx.cfg, s)
        if rule is not None and rule not in out:
            out.append(rule)
    return out


def zero_micro_batches(order: EpochOrder, supervised: np.ndarray) -> list[tuple[int, int, int, int]]:
    """``(epoch, in-epoch step, rank, micro_batch)`` of every micro-batch of ``order`` whose rows
    hold 0 supervised tokens in total (``supervised``: int array, one count per global row)."""
    ga = order.grad_accum
    held = np.asarray(supervised) != 0  # counts are >= 0: a micro-batch sums to 0 when each of its rows holds 0
    out: list[tuple[int, int, int, int]] = []
    if held.all():
        return out
    for r, mbs in enumerate(order.ranks):
        lens = np.fromiter((len(idx) for idx in mbs), dtype=np.int64, count=len(mbs))
        if not lens.any():
            continue
        some = np.bincount(np.repeat(np.arange(len(mbs)), lens), weights=held[np.concatenate(mbs)], minlength=len(mbs))
        for m in np.flatnonzero((lens > 0) & (some == 0)).tolist():
            out.append((order.epoch, m // ga, r, m % ga))
    return out


@check("batch.no_supervised_tokens", layouts=lay.ANY - lay.UNTOKENIZED_TEXT, level="dataset", facts=_FACTS, reasons=_REASONS)
def no_supervised_batches(dctx: Any) -> Iterable[Finding | Skipped]:
    """``batch.no_supervised_tokens``: a (step, rank, micro-batch) of the simulated order with 0
    supervised tokens, over every epoch of ``[batch] epochs``."""
    cid = "batch.no_supervised_tokens"
    order, skip = dataset_order(dctx, cid)
    if order is None:
        yield skip  # type: ignore[misc]
        return
    sup = _supervised(dctx)
    if sup is None:
        yield Skipped(cid, "no token labels list column (set [columns] labels), and not a language-model layout whose "
                           "labels are the ids (causal_lm, packed_lm): supervised tokens per row are unknown")
        return
    zeros = zero_micro_batches(order, sup)
    if (sup == 0).any():  # else no micro-batch of any epoch sums to 0: the other epochs are not drawn
        for e in range(1, dctx.cfg.batch.epochs):
            zeros += zero_micro_batches(epoch_order(order.n_rows, dctx.cfg.batch, e, dataset_lengths(dctx)), sup)
    if zeros:
        spe = order.steps
        listed = ", ".join(f"epoch {e} step {s} (global {e * spe + s}) rank {r} micro-batch {m}"
                           for e, s, r, m in zeros[:5])
        yield finding(cid, count=len(zeros),
                      message=(f"{len(zeros)} micro-batch(es) of the simulated order have 0 supervised tokens "
                               f"(mean loss 0/0 = NaN): {listed}{' ...' if len(zeros) > 5 else ''}; "
                               f"supervised tokens: {'; '.join(_rules(dctx))}; see them with datacheck plan --step N"),
                      details={"micro_batches": [list(z) for z in zeros[:_MAX_LISTED]],
                               "rows_with_zero": int((sup == 0).sum()), "steps_per_epoch": spe})
