"""labels: the label domain (class labels and token labels), and label statistics."""
from __future__ import annotations

from typing import Any, Iterable

import polars as pl

from datacheck.checks import RowCheck, ShardContext, ShardItem, Stat, dataset_checks, shard_checks
from datacheck.checks._expr import counts_to_pairs, first_bad, value_counts
from datacheck.findings import Finding, Skipped
from datacheck.roles import inner_dtype, is_list

__all__ = ["label_checks", "unseen_class"]


def _fmt_counts(vc: Any, limit: int = 5) -> str:
    pairs = counts_to_pairs(vc)
    return ", ".join(f"{v!r} x{c}" for v, c in pairs[:limit]) + (" ..." if len(pairs) > limit else "")


def _flat_value_counts(c: pl.Expr, pred) -> pl.Expr:
    """Aggregate: value counts of the list elements satisfying ``pred`` (one explode, shared by CSE)."""
    x = c.explode()
    return value_counts(x.filter(pred(x).fill_null(False)))


def _class_label(ctx: ShardContext, col: str) -> Iterable[ShardItem]:
    t = ctx.schema[col]
    lab = ctx.cfg.labels
    ign = lab.ignore
    c = pl.col(col)
    numeric = t.is_numeric()
    if t.is_nested():
        why = (f"label column {col!r} has dtype {t}, not a scalar class label "
               "(token labels belong in [columns] labels)")
        for cid in ("labels.null", "labels.unexpected_sentinel", "labels.out_of_range"):
            yield Skipped(cid, why)
        return
    # A float label column (pandas writes missing labels as NaN) holds missing labels as null or NaN.
    is_float = t.is_float()
    missing = (c.is_null() | c.is_nan()) if is_float else c.is_null()
    yield RowCheck(check="labels.null", column=col, fails=missing, example=c,
                   message=lambda n, d, col=col, f=is_float: (f"{n} row(s) have no label in {col!r} "
                                                              f"({'null or NaN' if f else 'null'})"))
    yield Stat(key="labels", expr=value_counts(c, limit=10_000),
               post=lambda v, col=col: {"column": col, "counts": sorted(counts_to_pairs(v), key=lambda p: (p[0] is None, str(type(p[0])), p[0] if p[0] is not None else 0))})
    not_ignored = (c != ign) if (ign is not None and numeric) else pl.lit(True)
    sentinel = None
    if numeric:
        sentinel = (c < 0) & not_ignored
        ign_txt = f"ignore_index is {ign}" if ign is not None else "ignore_index is unset"
        yield RowCheck(
            check="labels.unexpected_sentinel", column=col, fails=sentinel, example=c,
            details={"values": value_counts(c.filter(sentinel))},
            message=lambda n, d, col=col, t=ign_txt: (f"{n} row(s) of {col!r} hold negative labels that are not the "
                                                      f"loss's ignore index ({t}): {_fmt_counts(d.get('values'))}. "
                                                      "Set [labels] ignore_index to the value the loss ignores, or drop these rows"),
        )
    if lab.classes is not None:
        classes = list(lab.classes)
        if numeric and not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in classes):
            yield Skipped("labels.out_of_range", f"label column {col!r} is numeric but [labels] classes are not")
            return
        if not numeric and t != pl.String and t != pl.Categorical:
            yield Skipped("labels.out_of_range", f"label column {col!r} has dtype {t}")
            return
        outside = missing.not_() & c.cast(pl.String if not numeric else t).is_in(
            (pl.Series([str(x) for x in classes]) if not numeric else pl.Series(classes).cast(t)).implode()).not_() & not_ignored
        if sentinel is not None:
            outside = outside & sentinel.not_()
        yield RowCheck(
            check="labels.out_of_range", column=col, fails=outside, example=c,
            details={"values": value_counts(c.filter(outside))},
            message=lambda n, d, col=col, k=classes: (f"{n} row(s) of {col!r} hold labels outside classes {k}: "
                                                      f"{_fmt_counts(d.get('values'))}"),
        )
    elif lab.num_classes is not None:
        k = lab.num_classes
        if not numeric:
            yield Skipped("labels.out_of_range", f"label column {col!r} holds {t} values: give [labels] classes, not num_classes")
            return
        outside = (c >= k) & not_ignored
        if is_float:  # a fractional value is no class index either; NaN is labels.null
            outside = ((c >= k) | ((c >= 0) & (c != c.floor()))) & not_ignored & c.is_nan().not_()
        yield RowCheck(
            check="labels.out_of_range", column=col, fails=outside, example=c,
            details={"values": value_counts(c.filter(outside)), "equal_num_classes": (c == k).sum(),
                     "equal_255": (c == 255).sum()},
            message=lambda n, d, col=col, k=k: _range_message(n, d, col, k),
        )
    else:
        yield Skipped("labels.out_of_range", f"no [labels] num_classes or classes for label column {col!r}")


def _range_message(n: int, d: dict, col: str, k: int) -> str:
    msg = f"{n} row(s) of {col!r} hold labels outside [0, {k}): {_fmt_counts(d.get('values'))}"
    if d.get("equal_num_classes"):
        msg += (f". {d['equal_num_classes']} equal num_classes ({k}): an off-by-one in the labelling or binning "
                f"(the classifier has outputs 0..{k - 1})")
    if d.get("equal_255"):
        msg += ". Value 255 is a common 'void' label: set [labels] ignore_index = 255 if the loss ignores it"
    return msg


def _token_labels(ctx: ShardContext, col: str) -> Iterable[ShardItem]:
    t = ctx.schema[col]
    if not is_list(t) or not inner_dtype(t).is_integer():
        yield Skipped("labels.out_of_range", f"token labels column {col!r} has dtype {t}, not a list of integers")
        return
    ign = ctx.cfg.labels.ignore
    bound = ctx.cfg.tokens.vocab_size or ctx.cfg.labels.num_classes
    bound_name = "vocab_size" if ctx.cfg.tokens.vocab_size else "num_classes"

    def neg(x: pl.Expr) -> pl.Expr:
        return (x < 0) & (x != ign) if ign is not None else x < 0

    c = pl.col(col)
    yield RowCheck(
        check="labels.unexpected_sentinel", column=col, fails=c.list.eval(neg(pl.element())).list.any(),
        example=first_bad(col, t, neg),
        details={"values": _flat_value_counts(c, neg)},
        message=lambda n, d, col=col: (f"{n} row(s) of {col!r} hold negative token labels other than ignore_index "
                                       f"{ign}: {_fmt_counts(d.get('values'))}"),
    )
    yield RowCheck(check="labels.null", column=col, fails=c.is_null(), example=c,
                   message=lambda n, d, col=col: f"{n} row(s) have no token labels in {col!r} (null)")
    if bound is None:
        yield Skipped("labels.out_of_range", f"token labels {col!r}: no [tokens] vocab_size or [labels] num_classes")
        return

    def high(x: pl.Expr) -> pl.Expr:
        return (x >= bound) & (x != ign) if ign is not None else x >= bound

    fast = (c.list.max() >= bound) if (ign is None or ign < bound) else c.list.eval(high(pl.element())).list.any()
    yield RowCheck(
        check="labels.out_of_range", column=col, fails=fast, example=first_bad(col, t, high),
        details={"max": c.list.max().max()},
        message=lambda n, d, col=col: (f"{n} row(s) of {col!r} hold token labels >= {bound_name} {bound} "
                                       f"(largest {d.get('max')})"),
    )


@shard_checks("labels")
def label_checks(ctx: ShardContext) -> Iterable[ShardItem]:
    """``labels.out_of_range``, ``labels.unexpected_sentinel``, ``labels.null`` for the class label
    (scalar) and the token labels (list).

    A class label fails ``out_of_range`` when it is >= ``num_classes`` (or not in ``classes``) and not
    ``ignore_index``; a negative value that is not ``ignore_index`` is ``unexpected_sentinel`` instead
    (reported only there). Token labels: >= ``vocab_size`` (else ``num_classes``) and not
    ``ignore_index``; negative non-ignore values are sentinels.
    """
    if ctx.roles.label is None and ctx.roles.labels is None:
        for cid in ("labels.out_of_range", "labels.unexpected_sentinel", "labels.null"):
            yield Skipped(cid, "no label column (set [columns] label or labels)")
        return
    if ctx.roles.label is not None:
        yield from _class_label(ctx, ctx.roles.label)
    if ctx.roles.labels is not None:
        yield from _token_labels(ctx, ctx.roles.labels)


@dataset_checks("labels")
def unseen_class(dctx: Any) -> Iterable[Finding | Skipped]:
    """``labels.unseen_class``: a class in ``[0, num_classes)`` (or in ``classes``) that no row of the
    dataset carries. Uses the exact per-shard label counts (merged)."""
    lab = dctx.cfg.labels
    merged: dict[Any, int] = {}
    col = None
    for s in dctx.readable_shards():
        st = s.stats.get("labels")
        if not st:
            continue
        col = st["column"]
        for v, cnt in st["counts"]:
            merged[v] = merged.get(v, 0) + cnt
    if col is None:
        yield Skipped("labels.unseen_class", "no class label column (set [columns] label)")
        return
    if lab.classes is not None:
        domain = list(lab.classes)
        seen = {str(v) for v in merged}
        unseen = [c for c in domain if str(c) not in seen]
    elif lab.num_classes is not None:
        unseen = [k for k in range(lab.num_classes) if k not in merged and float(k) not in merged]
    else:
        yield Skipped("labels.unseen_class", "no [labels] num_classes or classes")
        return
    if unseen:
        yield Finding(
            check="labels.unseen_class", severity="warn", column=col, count=len(unseen),
            message=(f"{len(unseen)} class(es) never occur in the dataset: {unseen[:20]}"
                     f"{' ...' if len(unseen) > 20 else ''}; their output units get no positive examples"),
            details={"unseen": unseen[:1000]},
        )
