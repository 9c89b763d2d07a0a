"""Merge combinators: how a value computed on each batch of a multi-batch shard
(:mod:`datacheck.formats.batches`) combines into the value on the whole shard (``Stat.merge``,
``Payload.merge``, ``RowCheck.details_merge``, :class:`datacheck.checks.spec.Stat`), plus the ratio
helpers a ``post`` derives after the merge. Every combinator is exact except :func:`moments_parts`
(floating point, within a relative 1e-9).
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import polars as pl

__all__ = [
    "sum_parts",
    "min_parts",
    "max_parts",
    "first_part",
    "concat_parts",
    "counts_parts",
    "fields_parts",
    "moments_parts",
    "ratio",
    "ratio_post",
]


def sum_parts(parts: list[Any]) -> Any:
    """Sum of the batches' values (counts, integer sums); None values are left out; None when all are."""
    vals = [p for p in parts if p is not None]
    return sum(vals[1:], vals[0]) if vals else None


def min_parts(parts: list[Any]) -> Any:
    """Smallest of the batches' values (None values left out; None when all are)."""
    vals = [p for p in parts if p is not None]
    return min(vals) if vals else None


def max_parts(parts: list[Any]) -> Any:
    """Largest of the batches' values (None values left out; None when all are)."""
    vals = [p for p in parts if p is not None]
    return max(vals) if vals else None


def first_part(parts: list[Any]) -> Any:
    """The first batch's value (a value that does not depend on the rows, e.g. a payload's spec)."""
    return parts[0] if parts else None


def concat_parts(parts: list[Any]) -> Any:
    """Per-row values concatenated in row order: Python lists, polars Series and DataFrames, numpy
    arrays, and dicts of those (key by key; values of other types must be equal: the first is kept)."""
    vals = [p for p in parts if p is not None]
    if not vals:
        return None
    v0 = vals[0]
    if isinstance(v0, list):
        return [x for p in vals for x in p]
    if isinstance(v0, (pl.Series, pl.DataFrame)):
        return pl.concat(vals, rechunk=True)
    if isinstance(v0, np.ndarray):
        return np.concatenate(vals)
    if isinstance(v0, dict):
        return {k: concat_parts([p.get(k) for p in vals]) for k in v0}
    return v0


def counts_parts(limit: int | None = None) -> Callable[[list[Any]], Any]:
    """Merge of ``value_counts`` lists (``[{<value name>: v, "count": c}, ...]``): counts added by
    value, sorted by count (descending; ties by first appearance in row order), the first ``limit``
    kept. Exact when every batch listed all its values (a batch with more than ``limit`` distinct
    values had its rarest values cut before the merge)."""

    def merge(parts: list[Any]) -> Any:
        name: str | None = None
        total: dict[Any, int] = {}
        values: dict[Any, Any] = {}
        for p in parts:
            for d in p or []:
                if name is None:
                    name = next(k for k in d if k != "count")
                v = d[name]
                key = (type(v).__name__, v) if not isinstance(v, float) or v == v else ("nan", None)
                if key in total:
                    total[key] += d["count"]
                else:
                    total[key] = d["count"]
                    values[key] = v
        out = sorted(total.items(), key=lambda kv: -kv[1])
        if limit is not None:
            out = out[:limit]
        return [{name: values[k], "count": c} for k, c in out]

    return merge


def fields_parts(**combinators: Callable[[list[Any]], Any]) -> Callable[[list[Any]], Any]:
    """Merge of struct values (dicts): field by field with its combinator (a batch whose struct is
    None is left out; None when all are)."""

    def merge(parts: list[Any]) -> Any:
        vals = [p for p in parts if p is not None]
        if not vals:
            return None
        return {k: combinators[k]([p.get(k) for p in vals]) for k in vals[0]}

    return merge


def ratio(a: Any, b: Any) -> float:
    """``a / b`` as polars divides two aggregated numbers: float division; ``x / 0`` is +-inf and
    ``0 / 0`` NaN (never ZeroDivisionError), so a ratio derived in ``post`` equals the one-query value."""
    if b == 0:
        return math.nan if a == 0 or a != a else math.copysign(math.inf, a)
    return a / b


def ratio_post(num: str, den: str) -> Callable[[Any], Any]:
    """``post`` of a struct stat ``{num, den}``: ``num / den`` (None when the struct is None or
    ``den`` is 0: the rate of no rows, as polars' ``mean`` of no values)."""

    def post(v: Any) -> Any:
        if not v or not v.get(den):
            return None
        return v[num] / v[den]

    return post


def moments_parts(parts: list[Any]) -> Any:
    """Merge of ``{count, mean, std}`` structs (std with ddof 1, as polars' ``std``): the pooled
    mean ``sum(n_i * mean_i) / n`` and the pooled sum of squared deviations ``M2 = sum(M2_i +
    n_i * (mean_i - mean)**2)`` with ``M2_i = std_i**2 * (n_i - 1)`` (Chan, Golub and LeVeque 1979,
    "Updating formulae and a pairwise algorithm for computing sample variances"); ``std =
    sqrt(M2 / (n - 1))``. Floating point: equal to the one-batch value within a relative 1e-9
    (a different order of additions), not bit for bit."""
    vals = [p for p in parts if p is not None and p.get("count")]
    if not vals:
        return next((p for p in parts if p is not None), None)
    n = sum(int(p["count"]) for p in vals)
    mean = sum(p["count"] * p["mean"] for p in vals) / n
    m2 = 0.0
    for p in vals:
        sd = p["std"] if p["std"] is not None else 0.0
        m2 += sd * sd * (p["count"] - 1) + p["count"] * (p["mean"] - mean) ** 2
    return {"count": n, "mean": mean, "std": math.sqrt(m2 / (n - 1)) if n > 1 else None}
