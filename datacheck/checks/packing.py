"""packing: several documents in one row.

Documents are delimited by ``document_ids`` (per-token document number), else by ``seq_lens``
(document lengths) or ``cu_seqlens`` (cumulative offsets ``[0, l1, l1+l2, ..., row length]``),
else (given only ``position_ids``) by resets of the position ids to 0. Rules on per-token columns
run in the shard's flat position view (one row per token; fused into the shard's one query);
rules that need ``seq_lens``/``cu_seqlens`` run on the lists with native list kernels
(``list.gather`` of the document starts). Both label conventions (``[labels] shifted``) are judged.
"""
from __future__ import annotations

from typing import Iterable

import polars as pl

from datacheck.checks._expr import as_int64
from datacheck.checks._flat import fast_dtype, positions_not_reset
from datacheck.checks._pos import prev, row_first
from datacheck.checks.mask import positions_view
from datacheck.checks.registry import (
    RowCheck,
    ShardContext,
    ShardItem,
    Stat,
    check,
    derives,
    fields_parts,
    measure,
    sum_parts,
)
from datacheck.checks.registry import ratio as _efficiency
from datacheck.checks.roledtype import problem
from datacheck.derive.read import CHAT
from datacheck.model import layouts as lay
from datacheck.model.findings import EXAMPLE_LENGTH, EXAMPLE_POSITION, EXAMPLE_TEXT, Skipped
from datacheck.model.roles import inner_dtype

__all__ = ["position_ids_not_reset", "boundary_mismatch", "cross_document_label", "packing_stats", "starts_list"]

#: the read path's derivations this family reads: the token columns a chat template's rendering
#: gives (``[tokens] tokenizer``)
derives(__name__, CHAT)

_BOUNDS = "document_ids|seq_lens|cu_seqlens"
_NO_BOUNDS = "no document_ids, seq_lens or cu_seqlens column (set [columns] document_ids, seq_lens or cu_seqlens)"


def _ok(ctx: ShardContext, role: str) -> bool:
    return getattr(ctx.roles, role) is not None and problem(ctx, role) is None


def _row_len(ctx: ShardContext) -> pl.Expr | None:
    """Per row: the packed row's length (the first usable token column's list length)."""
    for role in ("input_ids", "position_ids", "labels", "document_ids"):
        if _ok(ctx, role):
            return pl.col(getattr(ctx.roles, role)).list.len()
    return None


def starts_list(ctx: ShardContext) -> tuple[pl.Expr, str] | None:
    """Per row: the start offsets of the documents after the first (List(Int64)), from
    ``cu_seqlens`` (its inner offsets) or ``seq_lens`` (their running sums but the last), with the
    column it came from; None without either."""
    r = ctx.roles
    if _ok(ctx, "cu_seqlens"):
        cu = as_int64(r.cu_seqlens, ctx.schema[r.cu_seqlens])
        return cu.list.slice(1, (cu.list.len() - 2).clip(0)), r.cu_seqlens
    if _ok(ctx, "seq_lens"):
        sl = as_int64(r.seq_lens, ctx.schema[r.seq_lens])
        ends = sl.list.eval(pl.element().cum_sum())
        return ends.list.head((ends.list.len() - 1).clip(0)), r.seq_lens
    return None


def first_unreset(pos: list | None, docs: list | None = None, starts: list | None = None) -> dict | None:
    """The example of a row that fails ``packing.position_ids_not_reset``: its first bad position.

    Documents start at position 0, at each offset of ``starts`` (from ``seq_lens``/``cu_seqlens``),
    where ``docs`` (``document_ids``) changes, or (neither given) where a position id is 0. A position
    is bad when a document start is not 0 or another position is not the previous + 1. Returns the
    :data:`~datacheck.model.findings.EXAMPLE_TEXT` struct (text with the ids around it, position,
    row length), or None when no position is bad."""
    if pos is None:
        return None
    st = set(starts or ())
    for k, v in enumerate(pos):
        start = k == 0 or k in st or (docs is not None and k < len(docs) and docs[k] != docs[k - 1])
        prev_v = pos[k - 1] if k else None
        if start:
            want = 0
        elif starts is None and docs is None and v == 0:
            continue  # a reset starts the next document
        else:
            want = None if prev_v is None else prev_v + 1
        if v is None or v != want:
            where = "a document start" if start else "inside a document"
            around = pos[max(0, k - 3):k + 4]
            return {EXAMPLE_TEXT: f"first at position {k} of {len(pos)} ({where}): {v}, expected {want}; "
                                  f"position_ids[{max(0, k - 3)}:{k + 4}] = {around}",
                    EXAMPLE_POSITION: k, EXAMPLE_LENGTH: len(pos)}
    return None


_EXAMPLE_DTYPE = pl.Struct({EXAMPLE_TEXT: pl.String, EXAMPLE_POSITION: pl.Int64, EXAMPLE_LENGTH: pl.Int64})


def _unreset_example(pos: pl.Expr, docs: pl.Expr | None = None, starts: pl.Expr | None = None) -> pl.Expr:
    """Per failing row (the engine evaluates examples on example rows only): :func:`first_unreset`."""
    fields = [pos.alias("p")] + ([docs.alias("d")] if docs is not None else []) + (
        [starts.alias("s")] if starts is not None else [])
    return pl.struct(fields).map_elements(
        lambda r: first_unreset(r["p"], r.get("d"), r.get("s")), return_dtype=_EXAMPLE_DTYPE)


def _view_start(ctx: ShardContext) -> tuple[pl.Expr, str] | None:
    """Per position in the flat view: True at the first token of each document (document_ids, else
    position-id resets), with the column it came from; None when neither is usable."""
    r = ctx.roles
    if _ok(ctx, "document_ids"):
        d = pl.col(r.document_ids)
        return (row_first() | (d != prev(d)).fill_null(True)), r.document_ids
    if _ok(ctx, "position_ids"):
        return (row_first() | (pl.col(r.position_ids) == 0).fill_null(False)), r.position_ids
    return None


@check("packing.position_ids_not_reset", layouts=lay.PACKED, roles=("position_ids",))
def position_ids_not_reset(ctx: ShardContext) -> Iterable[ShardItem]:
    """``packing.position_ids_not_reset``: in a packed row, a document does not start at position 0,
    or positions within a document do not step by 1 (``position_ids[k] == position_ids[k-1] + 1``).

    Documents from ``document_ids`` (flat view), else ``seq_lens``/``cu_seqlens`` (list kernels: no
    id is negative, the ids gathered at the starts are all 0 and exactly ``len - documents`` steps
    are +1; with ``seq_lens`` over the flat buffers, :func:`datacheck.checks._flat.positions_not_reset`),
    else position-id resets (a row must start at 0; every other position is 0 or the previous + 1)."""
    r = ctx.roles
    pos = pl.col(r.position_ids)
    msg = ("{n} row(s) have position_ids that do not restart at 0 for each packed document or do not step "
           "by 1 inside one (documents from {src}): attention and RoPE treat the documents as one sequence. "
           "Restart position_ids at 0 for each document")
    if not _ok(ctx, "document_ids") and (sl := starts_list(ctx)) is not None:
        starts, src = sl
        # a valid row has no negative id (every document counts up from 0): with that condition the
        # ids' own dtype serves (a difference of two non-negative ids never wraps; a wrapped +1 needs
        # a negative id, and such a row fails anyway), and no start step (to 0 from an id >= 0) is
        # +1, so "len - documents steps are +1" means every step inside a document is. UInt64 is
        # compared in Int64 (its differences would not fit); one cast, used once per kernel below.
        p = as_int64(r.position_ids, ctx.schema[r.position_ids]) if inner_dtype(ctx.schema[r.position_ids]) == pl.UInt64 else pos
        at_starts = p.list.gather(starts, null_on_oob=True)
        n_docs = starts.list.len() + 1
        n = p.list.len()
        bad = ((p.list.first() != 0) | (p.list.min() < 0)
               | (at_starts.list.len() - at_starts.list.count_matches(0) > 0)
               | (p.list.diff().list.count_matches(1) != n - n_docs)) & (n > 0)
        if src == r.seq_lens and fast_dtype(ctx.schema[r.position_ids]) and fast_dtype(ctx.schema[r.seq_lens]):
            bad = positions_not_reset(r.position_ids, r.seq_lens, bad)  # the same rule over the flat buffers
        yield RowCheck(check="packing.position_ids_not_reset", column=r.position_ids,
                       fails=bad, example=_unreset_example(pos, starts=starts),
                       message=lambda n, d, src=src: msg.format(n=n, src=repr(src)))
        return
    got = _view_start(ctx)
    if got is None:  # position_ids present but unusable is a schema.dtype skip by the registry
        return
    start, src = got
    bad = pl.when(start).then(pos != 0).otherwise(pos != prev(pos) + 1).fill_null(False)
    docs = pl.col(r.document_ids) if src == r.document_ids else None
    yield RowCheck(check="packing.position_ids_not_reset", column=r.position_ids, fails=bad,
                   example=_unreset_example(pos, docs=docs), view=positions_view(ctx), details={"positions": bad.sum()}, details_merge={"positions": sum_parts},
                   message=lambda n, d, src=src: msg.format(n=n, src=repr(src)) + f" ({d.get('positions')} positions)")


@check("packing.boundary_mismatch", layouts=lay.PACKED, roles=(_BOUNDS,), reasons={_BOUNDS: _NO_BOUNDS})
def boundary_mismatch(ctx: ShardContext) -> Iterable[ShardItem]:
    """``packing.boundary_mismatch``: ``seq_lens`` (list of int) do not sum to the row length (the
    length of input_ids, else position_ids, labels or document_ids); ``cu_seqlens`` does not start
    at 0, rise strictly, and end at the row length; or a ``document_ids`` value recurs after another
    document (the number of distinct ids differs from the number of runs). Native list kernels."""
    r = ctx.roles
    n = _row_len(ctx)
    parts: list[tuple[pl.Expr, str]] = []
    if _ok(ctx, "seq_lens") and n is not None:
        sl = pl.col(r.seq_lens)
        # every length in [0, n] first: the sum of such lengths cannot wrap around ([2**64 - 1, 5]
        # summed to 4 in uint64), and a negative length ([-2, 6]) is no document
        parts.append(((sl.list.sum() != n) | (sl.list.len() == 0) | (sl.list.min() < 0) | (sl.list.max() > n),
                      r.seq_lens))
    if _ok(ctx, "cu_seqlens"):
        cu = as_int64(r.cu_seqlens, ctx.schema[r.cu_seqlens])
        rising = cu.list.diff().list.slice(1).list.min() > 0
        bad = (cu.list.first() != 0) | ~rising.fill_null(True) | (cu.list.len() < 2)
        if n is not None:
            bad = bad | (cu.list.last() != n)
        parts.append((bad, r.cu_seqlens))
    if _ok(ctx, "document_ids"):
        d = pl.col(r.document_ids)
        runs = d.list.len() - d.list.diff().list.count_matches(0)
        parts.append((d.list.n_unique() != runs, r.document_ids))
    if not parts:
        yield Skipped("packing.boundary_mismatch", "needs the row length (input_ids, position_ids or labels) "
                      "to judge seq_lens")
        return
    for bad, col in parts:
        yield RowCheck(check="packing.boundary_mismatch", column=col, fails=bad.fill_null(False), example=pl.col(col),
                       message=lambda n, d, col=col: (f"{n} row(s) have document boundaries in {col!r} that do not "
                                                      "match the row (lengths not summing to the row length, offsets "
                                                      "not rising from 0 to it, or a document id recurring after "
                                                      "another document)"))


@check("packing.cross_document_label", layouts=lay.PACKED, roles=("labels", "document_ids|seq_lens|cu_seqlens|position_ids"),
       facts=("labels.ignore_index",),
       reasons={"document_ids|seq_lens|cu_seqlens|position_ids":
                "no document_ids, seq_lens, cu_seqlens or position_ids column (set [columns] document_ids)"})
def cross_document_label(ctx: ShardContext) -> Iterable[ShardItem]:
    """``packing.cross_document_label``: the target across a document boundary is supervised.

    Unshifted labels (the model shifts): the first token of a later document has a label other than
    ``ignore_index`` (it would be predicted from the previous document's last token). Shifted labels
    (``[labels] shifted = true``): the last token of the earlier document has a label other than
    ``ignore_index`` and the end-of-turn/eos ids (its target is the next document's first token).
    Boundaries from document_ids or position-id resets (flat view), else seq_lens/cu_seqlens
    (``list.gather`` at the starts)."""
    r, ign, shifted = ctx.roles, ctx.cfg.labels.ignore, ctx.cfg.labels.shifted
    stop = list(ctx.cfg.tokens.stop_ids)
    lab = pl.col(r.labels)
    conv = "shifted" if shifted else "unshifted"
    msg = ("{n} row(s) supervise a target across a packed-document boundary ({conv} labels, documents from {src}): "
           "the model learns to predict one document from another. Set that label to ignore_index")
    sl = starts_list(ctx)
    got = _view_start(ctx) if (_ok(ctx, "document_ids") or sl is None) else None
    if got is not None:
        start, src = got
        later = start & ~row_first()
        if not shifted:
            bad = later & (lab != ign)
        else:
            nxt_later = later.shift(-1).fill_null(False)  # the next position starts a later document of this row
            bad = nxt_later & (lab != ign) & ~lab.is_in(stop)
        bad = bad.fill_null(False)
        yield RowCheck(check="packing.cross_document_label", column=r.labels, fails=bad, view=positions_view(ctx),
                       details={"positions": bad.sum()}, details_merge={"positions": sum_parts},
                       message=lambda n, d, src=src: msg.format(n=n, conv=conv, src=repr(src)))
        return
    if sl is None:
        return
    starts, src = sl
    l64 = as_int64(r.labels, ctx.schema[r.labels])
    at = l64.list.gather(starts - 1 if shifted else starts, null_on_oob=True)
    ok = at.list.count_matches(ign) + at.list.count_matches(None)
    if shifted:
        for s in stop:
            ok = ok + at.list.count_matches(s)
    yield RowCheck(check="packing.cross_document_label", column=r.labels, fails=(at.list.len() - ok) > 0,
                   example=at, message=lambda n, d, src=src: msg.format(n=n, conv=conv, src=repr(src)))


@measure("packing")
def packing_stats(ctx: ShardContext) -> Iterable[Stat]:
    """``packing``: for packed shards (document_ids, seq_lens or cu_seqlens): ``documents`` (count),
    ``slots`` (token positions), ``real_tokens`` (attention_mask 1s; else ids other than
    ``pad_token_id``; else every position) and ``efficiency`` = real_tokens / slots."""
    r = ctx.roles
    n = _row_len(ctx)
    if n is None:
        return
    if _ok(ctx, "document_ids"):
        d = pl.col(r.document_ids)
        docs = (d.list.len() - d.list.diff().list.count_matches(0)).sum()
    elif _ok(ctx, "cu_seqlens"):
        docs = (pl.col(r.cu_seqlens).list.len() - 1).clip(0).sum()
    elif _ok(ctx, "seq_lens"):
        docs = pl.col(r.seq_lens).list.len().sum()
    else:
        return
    pad = ctx.cfg.tokens.pad_token_id
    if _ok(ctx, "attention_mask"):
        real = as_int64(r.attention_mask, ctx.schema[r.attention_mask]).list.sum().sum()
    elif pad is not None and _ok(ctx, "input_ids"):
        ids = pl.col(r.input_ids)
        real = (ids.list.len() - ids.list.count_matches(pad)).sum()
    else:
        real = n.sum()
    slots = n.sum()
    yield Stat(key="packing", expr=pl.struct(documents=docs, slots=slots, real_tokens=real),
               merge=fields_parts(documents=sum_parts, slots=sum_parts, real_tokens=sum_parts),
               post=lambda v: {**v, "efficiency": _efficiency(v["real_tokens"], v["slots"])} if v else None)
