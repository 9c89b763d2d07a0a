"""dist: a shard whose length or label distribution differs from the rest of the dataset (a shard
from another preprocessing run, a shard holding one class of a sorted dataset), and the scale of
regression targets (``dist.target_scale``, from the per-shard ``targets`` stats).

Both checks work on the exact per-shard histograms in the shard stats (``lengths``: integer
length -> count; ``labels``: label -> count), so they need no re-read and merge exactly. Each
shard is compared with the rest of its split (with ``[splits]``; else the rest of the dataset),
by iterative leave-one-out: the shard with the largest PSI against the pooled rest is reported and
leaves the reference, then the others are compared again, until none exceeds the threshold or half
of the shards are reported. So one odd shard does not make its normal neighbours look odd through
the shared reference (with two shards only the more distant one is reported).

Measure: the Population Stability Index, ``PSI = sum_b (p_b - q_b) * ln(p_b / q_b)`` over bins b,
p = the shard's proportions, q = the rest's; an empty bin's proportion is taken as
:data:`PSI_EPSILON`. Thresholds (the usual reading of PSI in model monitoring, e.g. Siddiqi,
*Credit Risk Scorecards*, 2006; Yurdakul, *Statistical properties of the population stability
index*, 2018): below 0.1 no shift, 0.1 to 0.25 a moderate shift, above :data:`PSI_THRESHOLD` (0.25)
a significant shift, which is what these checks report.

Bins: labels are their own bins (the label values); lengths are cut into at most
:data:`LENGTH_BINS` (10) bins at the deciles of the whole dataset's length histogram (ties make
fewer bins).

Minimum sample count: below :data:`MIN_ROWS` (200) rows in the shard or in the rest no verdict is
given (listed as skipped), and such a shard is not part of the reference of the others. Reason: for two samples of one distribution, PSI is about
``chi2(B-1) * (1/n + 1/m)``; with B = 10 bins and n = 200, its mean is 0.045 and its standard
deviation 0.021, so 0.25 is about 10 standard deviations away: no false alarm from sampling noise.

Single class: a shard whose rows all carry one label while the rest of the dataset has two or more
classes is ``dist.label_drift`` when drawing that many rows all of that class from the rest's
distribution has a probability below :data:`SINGLE_CLASS_P` (0.001); this needs no minimum count
beyond that probability (e.g. 10 rows of a 50/50 binary dataset).
"""
from __future__ import annotations

import math
from typing import Any, Iterable

import polars as pl

from datacheck.checks.registry import ShardContext, Stat, check, derives, finding, measure, moments_parts
from datacheck.derive.read import ALPACA, CHAT
from datacheck.model import layouts as lay
from datacheck.model.findings import Finding, Skipped
from datacheck.model.roles import is_list

__all__ = ["psi", "length_drift", "label_drift", "PSI_THRESHOLD", "MIN_ROWS", "LENGTH_BINS", "PSI_EPSILON",
           "SINGLE_CLASS_P", "target_moments", "target_scale"]

#: the read path's derivations this family reads: the Alpaca layout's messages and the chat
#: template's token columns are role columns like the shard's own
derives(__name__, ALPACA, CHAT)

PSI_THRESHOLD = 0.25
MIN_ROWS = 200
LENGTH_BINS = 10
PSI_EPSILON = 1e-4
SINGLE_CLASS_P = 1e-3


def psi(p: list[float], q: list[float], eps: float = PSI_EPSILON) -> float:
    """Population Stability Index of two count (or proportion) vectors over the same bins.

    Args:
        p: counts of the shard per bin (non-negative; normalised here).
        q: counts of the reference per bin.
        eps: proportion used for an empty bin (avoids ``ln 0``).

    Returns:
        PSI >= 0 (0: identical proportions). 0.0 when either side is empty.
    """
    sp, sq = float(sum(p)), float(sum(q))
    if sp <= 0 or sq <= 0:
        return 0.0
    total = 0.0
    for a, b in zip(p, q):
        x = max(a / sp, eps)
        y = max(b / sq, eps)
        total += (x - y) * math.log(x / y)
    return total


def _groups(dctx: Any) -> dict[str | None, list[Any]]:
    """Readable shards grouped by split (None: no ``[splits]``, or a shard in no split)."""
    splits = getattr(dctx, "splits", {}) or {}
    out: dict[str | None, list[Any]] = {}
    for s in dctx.readable_shards():
        out.setdefault(splits.get(s.path) if splits else None, []).append(s)
    return out


def _value_kind(v: Any) -> str:
    """``"int"`` (bool and integral floats included), ``"float"`` or ``"str"`` (anything else)."""
    if isinstance(v, bool) or isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "int" if v.is_integer() else "float"
    return "str"


def _signature(s: Any, key: str, hist: dict[Any, int]) -> tuple:
    """What makes two shards' histograms comparable: for ``lengths`` the unit (tokens, characters,
    ...) and the measured column; for ``labels`` the label column and the kind of its values
    (integer class ids never compare with class names)."""
    st = s.stats.get(key) or {}
    if key == "lengths":
        return (st.get("unit"), st.get("column"))
    return (st.get("column"), tuple(sorted({_value_kind(v) for v in hist})))


def _hist(s: Any, key: str, field: str, ignore: int | None = None) -> dict[Any, int] | None:
    """The shard's histogram ``value -> count`` from its stats; nulls dropped, and for labels the
    "no label" values too (``ignore``, i.e. ``[labels] ignore_index``, and negative integers such as
    the ``-1`` of an unlabelled test split): they are not classes."""
    st = s.stats.get(key)
    if not st or field not in st:
        return None
    out: dict[Any, int] = {}
    for v, c in st[field]:
        if v is None:
            continue
        if key == "labels" and _value_kind(v) == "int" and (v < 0 or (ignore is not None and v == ignore)):
            continue
        out[v] = out.get(v, 0) + int(c)
    return out


def _decile_edges(hist: dict[Any, int], bins: int) -> list[float]:
    """Upper edges (inclusive) of up to ``bins`` bins at the quantiles of an integer histogram."""
    items = sorted(hist.items())
    n = sum(c for _, c in items)
    edges: list[float] = []
    acc = 0
    k = 1
    for v, c in items:
        acc += c
        while k < bins and acc >= k * n / bins:
            if not edges or edges[-1] != v:
                edges.append(v)
            k += 1
    if not edges or edges[-1] != items[-1][0]:
        edges.append(items[-1][0])
    return edges


def _binned(hist: dict[Any, int], edges: list[float]) -> list[int]:
    import bisect

    out = [0] * len(edges)
    for v, c in hist.items():
        i = min(bisect.bisect_left(edges, v), len(edges) - 1)
        out[i] += c
    return out


def _drift(dctx: Any, key: str, field: str, check: str, binned: bool) -> Iterable[Finding | Skipped]:
    small: list[str] = []
    any_hist = False
    ignore = dctx.cfg.labels.ignore
    mixed: list[str] = []
    for split, shards in _groups(dctx).items():
        by_sig: dict[tuple, list[tuple[Any, dict[Any, int]]]] = {}
        for s in shards:
            h = _hist(s, key, field, ignore)
            if h:
                by_sig.setdefault(_signature(s, key, h), []).append((s, h))
        if len(by_sig) > 1:
            mixed.append(f"{'split ' + repr(split) + ': ' if split else ''}"
                         + "; ".join(f"{_sig_text(key, sig)} in {len(v)} shard(s)" for sig, v in sorted(
                             by_sig.items(), key=lambda kv: str(kv[0]))))
        for _sig, hists in sorted(by_sig.items(), key=lambda kv: str(kv[0])):
            if len(hists) >= 2:
                any_hist = True
                yield from _drift_group(hists, split, key, check, binned, small)
    if mixed:
        yield Skipped(check, f"shards measure {key} differently, so only like shards were compared: "
                             + " | ".join(mixed))
    if not any_hist:
        return
    if small:
        yield Skipped(check, f"{len(small)} shard(s) have fewer than {MIN_ROWS} rows: no drift verdict for "
                             f"{', '.join(sorted(small)[:5])}{' ...' if len(small) > 5 else ''} (nor do they count "
                             "in the reference of the others)")


def _sig_text(key: str, sig: tuple) -> str:
    if key == "lengths":
        return f"{sig[0] or 'length'} of {sig[1]!r}"
    return f"{'/'.join(sig[1]) or 'no'} labels in {sig[0]!r}"


def _drift_group(hists: list[tuple[Any, dict[Any, int]]], split: str | None, key: str, check: str,
                 binned: bool, small: list[str]) -> Iterable[Finding]:
    """The drift verdicts of one group of comparable shards (same split and :func:`_signature`);
    shards below :data:`MIN_ROWS` are appended to ``small``."""
    total: dict[Any, int] = {}
    for _, h in hists:
        for v, c in h.items():
            total[v] = total.get(v, 0) + c
    if not binned:
        for s, h in hists:
            rest = {v: total[v] - h.get(v, 0) for v in total}
            yield from _single_class(s, h, rest, sum(h.values()), sum(rest.values()), split)
    edges = _decile_edges(total, LENGTH_BINS) if binned else None
    keys = None if binned else sorted(total, key=lambda v: (str(type(v)), v))

    def vec(h: dict[Any, int]) -> list[int]:
        return _binned(h, edges) if binned else [h.get(k, 0) for k in keys]

    eligible = []
    for s, h in hists:
        if sum(h.values()) < MIN_ROWS:
            small.append(s.path)
        elif binned or len(h) > 1:  # a single-class shard is judged by _single_class
            eligible.append((s, h, vec(h)))
    yield from _outliers(check, eligible, split, key, binned)


def _outliers(check: str, eligible: list, split: str | None, key: str, binned: bool) -> Iterable[Finding]:
    """Iterative leave-one-out: the shard with the largest PSI against the pooled rest is flagged
    and leaves the reference, until no shard exceeds the threshold or half the shards are flagged
    (an odd shard must not make its normal neighbours look odd through the shared reference)."""
    pool = list(eligible)
    flagged = 0
    while len(pool) >= 2 and flagged < len(eligible) // 2:
        width = len(pool[0][2])
        tot = [sum(v[i] for _, _, v in pool) for i in range(width)]
        best = None
        for item in pool:
            s, h, v = item
            rest = [t - x for t, x in zip(tot, v)]
            if sum(rest) < MIN_ROWS:
                continue
            value = psi(v, rest)
            if best is None or value > best[0]:
                best = (value, item, rest)
        if best is None or best[0] <= PSI_THRESHOLD:
            return
        value, item, _rest = best
        s, h, _v = item
        rest_h: dict[Any, int] = {}
        for o, oh, _ in pool:
            if o is not s:
                for k, c in oh.items():
                    rest_h[k] = rest_h.get(k, 0) + c
        yield _finding(check, s, value, h, rest_h, split, binned, st=s.stats.get(key, {}))
        pool.remove(item)
        flagged += 1


def _summary(h: dict[Any, int]) -> str:
    n = sum(h.values())
    if not n:
        return "empty"
    mean = sum(float(v) * c for v, c in h.items()) / n
    return f"mean {mean:.1f}, min {min(h)}, max {max(h)}"


def _shares(h: dict[Any, int], limit: int = 6) -> str:
    n = sum(h.values()) or 1
    top = sorted(h.items(), key=lambda kv: -kv[1])[:limit]
    return ", ".join(f"{k!r}: {c / n:.0%}" for k, c in top)


def _finding(check: str, s: Any, value: float, h: dict, rest: dict, split: str | None, binned: bool,
             st: dict) -> Finding:
    where = f"the rest of split {split!r}" if split else "the rest of the dataset"
    if binned:
        desc = f"lengths ({st.get('unit', 'length')}) {_summary(h)} vs {_summary(rest)} in {where}"
    else:
        desc = f"labels {{{_shares(h)}}} vs {{{_shares(rest)}}} in {where}"
    return finding(
        check, column=st.get("column"), count=sum(h.values()), shards=(s.path,),
        message=f"{s.path}: {desc}; PSI {value:.3f} > {PSI_THRESHOLD} (a different source or preprocessing?)",
        details={"psi": round(value, 6), "threshold": PSI_THRESHOLD, "split": split, "rows": sum(h.values())},
    )


def _single_class(s: Any, h: dict, rest: dict, n: int, m: int, split: str | None) -> Iterable[Finding]:
    rest = {v: c for v, c in rest.items() if c > 0}  # classes only in this shard are not in the rest
    classes_rest = list(rest)
    if len(h) != 1 or m == 0 or len(set(classes_rest) | set(h)) < 2:
        return
    (cls, cnt), = h.items()
    share = rest.get(cls, 0) / m
    p_chance = share ** cnt if share > 0 else 0.0
    if p_chance >= SINGLE_CLASS_P:
        return
    where = f"split {split!r}" if split else "the dataset"
    yield finding(
        "dist.label_drift", column=None, count=cnt, shards=(s.path,),
        message=(f"{s.path} holds a single class ({cls!r}, {cnt} rows) while the rest of {where} has "
                 f"{len(set(classes_rest))} classes ({_shares(rest)}); chance of that {p_chance:.1e} "
                 "(a shard cut from label-sorted data?)"),
        details={"single_class": cls, "rows": cnt, "chance": p_chance, "split": split},
    )


@check("dist.length_drift", layouts=lay.ANY, level="dataset")
def length_drift(dctx: Any) -> Iterable[Finding | Skipped]:
    """``dist.length_drift``: a shard's exact length histogram (stats ``lengths``) against the rest of
    its split (or dataset), PSI over decile bins > 0.25; no verdict below 200 rows on either side."""
    yield from _drift(dctx, "lengths", "histogram", "dist.length_drift", binned=True)


@check("dist.label_drift", layouts=lay.LABELED, level="dataset")
def label_drift(dctx: Any) -> Iterable[Finding | Skipped]:
    """``dist.label_drift``: a shard's label counts (stats ``labels``) against the rest, PSI > 0.25
    (no verdict below 200 rows), or a single class of a multi-class dataset (chance < 0.001)."""
    yield from _drift(dctx, "labels", "counts", "dist.label_drift", binned=False)


@measure("targets")
def target_moments(ctx: ShardContext) -> Iterable[Stat]:
    """``targets``: per regression target column, ``{count, mean, std}`` of its finite values
    (list targets flattened), for ``dist.target_scale``."""
    for col in ctx.roles.target:
        t = ctx.schema[col]
        x = pl.col(col).explode() if is_list(t) else pl.col(col)
        if not (x is not None and (t.is_numeric() or is_list(t))):
            continue
        x = x.cast(pl.Float64, strict=False)
        x = x.filter(x.is_finite())
        yield Stat(key=f"targets.{col}", expr=pl.struct(count=x.count(), mean=x.mean(), std=x.std()), merge=moments_parts,
                   post=lambda v: dict(v) if v else None)


@check("dist.target_scale", layouts=frozenset({"regression"}), level="dataset", facts=("numeric.target_scale_warn",))
def target_scale(dctx: Any) -> Iterable[Finding | Skipped]:
    """``dist.target_scale`` (shard level, decided from each shard's ``targets`` stats): a regression
    target whose standard deviation or absolute mean exceeds ``[numeric] target_scale_warn``
    (default 1000): MSE on raw magnitudes explodes; standardize it. Not judged for
    ``target_kind = "binary"``."""
    cfg = dctx.cfg
    if cfg.labels.target_kind != "regression":
        yield Skipped("dist.target_scale", '[labels] target_kind is "binary"')
        return
    limit = cfg.numeric.target_scale_warn
    seen = False
    for s in dctx.readable_shards():
        for key, v in sorted(s.stats.items()):
            if not key.startswith("targets.") or not isinstance(v, dict):
                continue
            seen = True
            mean, std = v.get("mean"), v.get("std")
            big = [(name, val) for name, val in (("|mean|", abs(mean) if isinstance(mean, float) else None),
                                                 ("std", std if isinstance(std, float) else None))
                   if val is not None and math.isfinite(val) and val > limit]
            if big:
                col = key.split(".", 1)[1]
                what = ", ".join(f"{name} {val:.4g}" for name, val in big)
                yield finding("dist.target_scale", column=col, shards=(s.path,),
                              message=(f"target {col!r} in {s.path} has {what} above target_scale_warn={limit:g}: "
                                       "MSE on raw magnitudes explodes; standardize the target (z-score or log)"),
                              details={"mean": mean, "std": std, "count": v.get("count"), "limit": limit})
    if not seen:
        yield Skipped("dist.target_scale", "no regression target column (set [columns] target)")
