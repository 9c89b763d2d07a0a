"""labels: the label domain (class labels and token labels), and label statistics."""
from __future__ import annotations

import itertools
from typing import Any, Iterable

import polars as pl

from datacheck.checks._expr import counts_to_pairs, first_bad, value_counts
from datacheck.checks._render import rejected_by_template
from datacheck.checks.registry import (
    RowCheck,
    ShardContext,
    ShardItem,
    Stat,
    check,
    counts_parts,
    derives,
    finding,
    measure,
)
from datacheck.checks.roledtype import problem
from datacheck.derive.read import CHAT
from datacheck.model import layouts as lay
from datacheck.model.findings import Finding, Skipped
from datacheck.model.stats import LabelCounts

__all__ = ["out_of_range", "unexpected_sentinel", "label_null", "label_stats", "unseen_class", "index_classes"]

#: the read path's derivations this family reads: the token columns a chat template's rendering
#: gives (``[tokens] tokenizer``)
derives(__name__, CHAT)


def _fmt_counts(vc: Any, limit: int = 5) -> str:
    pairs = counts_to_pairs(vc)
    return ", ".join(f"{v!r} x{c}" for v, c in pairs[:limit]) + (" ..." if len(pairs) > limit else "")


def _flat_value_counts(c: pl.Expr, pred) -> pl.Expr:
    """Aggregate: value counts of the list elements satisfying ``pred`` (one explode, shared by CSE)."""
    x = c.explode()
    return value_counts(x.filter(pred(x).fill_null(False)))


def _fmt_label(v: Any, names: list | None) -> str:
    """A label value for a message; with class names, an integer index shows its name or says it has none."""
    if names is None or isinstance(v, bool) or not isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, float) and not v.is_integer():
        return repr(v)
    i = int(v)
    if 0 <= i < len(names):
        return f"{i} ({names[i]!r})"
    return f"{i} (no class name; classes has {len(names)} names)"


def _fmt_label_counts(vc: Any, names: list | None, limit: int = 5) -> str:
    pairs = counts_to_pairs(vc)
    return ", ".join(f"{_fmt_label(v, names)} x{c}" for v, c in pairs[:limit]) + (" ..." if len(pairs) > limit else "")


def index_classes(classes: Any, dtype: pl.DataType) -> bool:
    """True when integer labels index into ``classes`` (Hugging Face ``ClassLabel``): the classes are
    names (strings) and the label column holds numbers (integer, or float as pandas stores them)."""
    return (classes is not None and any(isinstance(x, str) for x in classes)
            and (dtype.is_integer() or dtype.is_float()))


def _class_label(ctx: ShardContext, col: str) -> Iterable[ShardItem]:
    t = ctx.schema[col]
    lab = ctx.cfg.labels
    ign = lab.ignore
    bad_dtype = problem(ctx, "label", col)
    c = pl.col(col)
    if bad_dtype is not None:  # a missing label is missing whatever the dtype; the domain checks cannot run
        yield RowCheck(check="labels.null", column=col, fails=c.is_null(), example=c,
                       message=lambda n, d, col=col: f"{n} row(s) have no label in {col!r} (null)")
        for cid in ("labels.unexpected_sentinel", "labels.out_of_range"):
            yield Skipped(cid, bad_dtype.skip_reason)
        return
    if t == pl.Boolean:
        c = c.cast(pl.Int8)  # a boolean class label is class 0 / 1
        t = pl.Int8
    numeric = t.is_numeric()
    # A float label column (pandas writes missing labels as NaN) holds missing labels as null or NaN.
    is_float = t.is_float()
    missing = (c.is_null() | c.is_nan()) if is_float else c.is_null()
    yield RowCheck(check="labels.null", column=col, fails=missing, example=c,
                   message=lambda n, d, col=col, f=is_float: (f"{n} row(s) have no label in {col!r} "
                                                              f"({'null or NaN' if f else 'null'})"))
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
    names: list | None = None
    if lab.classes is not None and index_classes(lab.classes, t):
        names = list(lab.classes)  # integer labels index into the class names (Hugging Face ClassLabel)
        k = len(names)
    elif lab.classes is not None:
        classes = list(lab.classes)
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
        return
    elif lab.num_classes is not None:
        k = lab.num_classes
    else:
        yield Skipped("labels.out_of_range", f"no [labels] num_classes or classes for label column {col!r}")
        return
    outside = (c >= k) & not_ignored
    details = {"values": value_counts(c.filter(outside))}
    if is_float:  # a fractional value is no class index either; NaN is labels.null
        non_integer = (c >= 0) & (c != c.floor()) & c.is_nan().not_()
        outside = ((c >= k) | non_integer) & not_ignored & c.is_nan().not_()
        details = {"values": value_counts(c.filter(outside & non_integer.not_())),
                   "non_integer": value_counts(c.filter(outside & non_integer))}
    yield RowCheck(
        check="labels.out_of_range", column=col, fails=outside, example=c,
        details={**details, "equal_num_classes": (c == k).sum(), "equal_255": (c == 255).sum()},
        message=lambda n, d, col=col, k=k, names=names: _range_message(n, d, col, k, names),
    )


def _range_message(n: int, d: dict, col: str, k: int, names: list | None = None) -> str:
    domain = f"[0, {k})" if names is None else f"[0, {k}) (indices into classes {names})"
    parts = []
    if d.get("values"):
        parts.append(f"outside {domain}: {_fmt_label_counts(d.get('values'), names)}")
    if d.get("non_integer"):
        parts.append(f"not an integer class index: {_fmt_counts(d.get('non_integer'))}")
    msg = f"{n} row(s) of {col!r} hold labels " + ("; ".join(parts) if parts else f"outside {domain}")
    what = "num_classes" if names is None else "the number of classes"
    if d.get("equal_num_classes"):
        msg += (f". {d['equal_num_classes']} equal {what} ({k}): an off-by-one in the labelling or binning "
                f"(the classifier has outputs 0..{k - 1})")
    if d.get("equal_255"):
        msg += ". Value 255 is a common 'void' label: set [labels] ignore_index = 255 if the loss ignores it"
    return msg


def _token_labels(ctx: ShardContext, col: str) -> Iterable[ShardItem]:
    t = ctx.schema[col]
    bad_dtype = problem(ctx, "labels", col)
    if bad_dtype is not None:
        yield RowCheck(check="labels.null", column=col, fails=pl.col(col).is_null() & ~rejected_by_template(ctx, col),
                       example=pl.col(col),
                       message=lambda n, d, col=col: f"{n} row(s) have no token labels in {col!r} (null)")
        for cid in ("labels.unexpected_sentinel", "labels.out_of_range"):
            yield Skipped(cid, bad_dtype.skip_reason)
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
    yield RowCheck(check="labels.null", column=col, fails=c.is_null() & ~rejected_by_template(ctx, col), example=c,
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


def _label_items(ctx: ShardContext, cid: str) -> Iterable[ShardItem]:
    """The items of ``cid`` for the class label (scalar) and the token labels (list). The three
    label checks share one domain computation (a negative value that is not ``ignore_index`` is
    ``unexpected_sentinel`` and never ``out_of_range``; a dtype problem leaves ``null`` running)."""
    items: list[ShardItem] = []
    if ctx.roles.label is not None:
        items += _class_label(ctx, ctx.roles.label)
    if ctx.roles.labels is not None:
        items += _token_labels(ctx, ctx.roles.labels)
    return [i for i in items if i.check == cid]


_NO_LABEL = {"label|labels": "no label column (set [columns] label or labels)"}


@check("labels.out_of_range", layouts=lay.ANY, roles=("label|labels",), reasons=_NO_LABEL)
def out_of_range(ctx: ShardContext) -> Iterable[ShardItem]:
    """``labels.out_of_range``: a class label >= ``num_classes`` (or not in ``classes``), or a
    non-integer float (1.5: "not an integer class index"), and not ``ignore_index``. With string
    ``classes`` and an integer (or float) label column, the labels are indices into the class names,
    as Hugging Face ``ClassLabel`` stores them: the valid range is ``[0, len(classes))``. String
    labels must equal a name in ``classes``. Token labels: >= ``vocab_size`` (else ``num_classes``)
    and not ``ignore_index``. A label column whose dtype cannot serve the role is ``schema.dtype``;
    the check is then skipped with that reason."""
    return _label_items(ctx, "labels.out_of_range")


@check("labels.unexpected_sentinel", layouts=lay.ANY, roles=("label|labels",), reasons=_NO_LABEL)
def unexpected_sentinel(ctx: ShardContext) -> Iterable[ShardItem]:
    """``labels.unexpected_sentinel``: a negative class or token label that is not ``ignore_index``
    (reported here only, never again as ``labels.out_of_range``)."""
    return _label_items(ctx, "labels.unexpected_sentinel")


@check("labels.null", layouts=lay.ANY, roles=("label|labels",), reasons=_NO_LABEL)
def label_null(ctx: ShardContext) -> Iterable[ShardItem]:
    """``labels.null``: a missing label (null; for a float class label column, null or NaN), whatever
    the label column's dtype."""
    return _label_items(ctx, "labels.null")


@measure("labels")
def label_stats(ctx: ShardContext) -> Iterable[Stat]:
    """The exact class-label counts of the shard (``stats.labels``: column and [value, count] pairs),
    for ``labels.unseen_class`` and ``dist.label_drift``; none when the label dtype cannot serve."""
    col = ctx.roles.label
    if col is None or problem(ctx, "label", col) is not None:
        return
    c = pl.col(col)
    if ctx.schema[col] == pl.Boolean:
        c = c.cast(pl.Int8)  # a boolean class label is class 0 / 1
    yield Stat(key="labels", expr=value_counts(c, limit=10_000), merge=counts_parts(limit=10_000),
               post=lambda v, col=col: {"column": col, "counts": sorted(counts_to_pairs(v), key=lambda p: (p[0] is None, str(type(p[0])), p[0] if p[0] is not None else 0))})


@check("labels.unseen_class", layouts=lay.CLASSIFICATION | frozenset({"kto"}), level="dataset")
def unseen_class(dctx: Any) -> Iterable[Finding | Skipped]:
    """``labels.unseen_class``: a class in ``[0, num_classes)`` (or in ``classes``) that no row of the
    dataset carries. Uses the exact per-shard label counts (merged). With string ``classes`` and
    integer labels (Hugging Face ``ClassLabel``), class ``i`` is seen when label ``i`` occurs."""
    lab = dctx.cfg.labels
    counts = LabelCounts.merge(c for c in (LabelCounts.of(s.stats) for s in dctx.readable_shards()) if c is not None)
    merged: dict[Any, int] = dict(counts.counts) if counts is not None else {}
    col = counts.column if counts is not None else None
    if col is None:
        given = sorted({s.roles["label"]["columns"] for s in dctx.readable_shards() if "label" in (s.roles or {})})
        yield Skipped("labels.unseen_class",
                      f"label column {given[0]!r} has a dtype that cannot serve a class label (reported as schema.dtype)"
                      if given else "no class label column (set [columns] label)")
        return
    numeric_seen = [v for v in merged if v is not None]
    if lab.classes is not None and numeric_seen and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                        for v in numeric_seen) and index_classes(lab.classes, pl.Int64):
        # integer labels index into the class names (Hugging Face ClassLabel): unseen by index
        seen_idx = {int(v) for v in numeric_seen if float(v).is_integer()}
        unseen = [name for i, name in enumerate(lab.classes) if i not in seen_idx]
    elif lab.classes is not None:
        domain = list(lab.classes)
        seen = {str(v) for v in merged}
        unseen = [c for c in domain if str(c) not in seen]
    elif lab.num_classes is not None:
        # From the seen classes, never by enumerating [0, num_classes): memory and time follow the data,
        # not the config value (num_classes = 2**63 - 1 once enumerated every class).
        k = lab.num_classes
        seen_in = {int(v) for v in merged if isinstance(v, (int, float)) and not isinstance(v, bool)
                   and float(v).is_integer() and 0 <= v < k}
        n_unseen = k - len(seen_in)
        unseen = list(itertools.islice((i for i in range(k) if i not in seen_in), 1000))
    else:
        yield Skipped("labels.unseen_class", "no [labels] num_classes or classes")
        return
    if lab.num_classes is None or lab.classes is not None:
        n_unseen = len(unseen)
    if unseen:
        yield finding(
            "labels.unseen_class", column=col, count=n_unseen,
            message=(f"{n_unseen} class(es) never occur in the dataset: {unseen[:20]}"
                     f"{' ...' if n_unseen > 20 else ''}; their output units get no positive examples"),
            details={"unseen": unseen[:1000]},
        )
