"""Typed helpers for shard statistics: exact length histograms and their quantiles (they merge
exactly across shards)."""
from __future__ import annotations

from typing import Any

__all__ = ["histogram_summary", "quantile_from_hist"]


def quantile_from_hist(hist: list[list[int]], q: float) -> int | None:
    """The q-quantile (nearest rank, ``ceil(q*n)``-th smallest) of an exact histogram ``[[len, count], ...]`` sorted by len."""
    import math

    n = sum(c for _, c in hist)
    if n == 0:
        return None
    rank = max(1, math.ceil(q * n))
    acc = 0
    for v, c in hist:
        acc += c
        if acc >= rank:
            return v
    return hist[-1][0]


def histogram_summary(hist: list[list[int]]) -> dict[str, Any]:
    """min/p50/p90/p99/max/mean of an exact histogram."""
    hist = sorted([h for h in hist if h[0] is not None], key=lambda h: h[0])
    n = sum(c for _, c in hist)
    if not n:
        return {"count": 0}
    return {
        "count": n,
        "min": hist[0][0],
        "p50": quantile_from_hist(hist, 0.5),
        "p90": quantile_from_hist(hist, 0.9),
        "p99": quantile_from_hist(hist, 0.99),
        "max": hist[-1][0],
        "mean": sum(v * c for v, c in hist) / n,
    }
