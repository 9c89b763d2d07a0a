"""Shard statistics as typed values: exact length histograms and their quantiles, label counts and
eos supervision (they merge exactly across shards). The report stores them as plain JSON under the
keys :data:`LENGTHS`, :data:`LABELS`, :data:`EOS`; modules read them back through these types, never
by string keys of their own."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

__all__ = ["histogram_summary", "quantile_from_hist", "LENGTHS", "LABELS", "EOS", "LengthHistogram", "LabelCounts",
           "EosSupervision"]


def quantile_from_hist(hist: list[list[int]], q: float) -> int | None:
    """The q-quantile (nearest rank, ``ceil(q*n)``-th smallest) of an exact histogram ``[[len, count], ...]`` sorted by len."""
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


#: keys of a shard's ``stats`` (and of the report's merged ``stats``) that modules read back
LENGTHS = "lengths"
LABELS = "labels"
EOS = "eos"


def _label_sort_key(p: tuple[Any, int]) -> tuple[bool, str, Any]:
    v = p[0]
    return (v is None, str(type(v)), v if v is not None else 0)


@dataclass(frozen=True)
class LengthHistogram:
    """The exact length histogram of a shard (or dataset): ``stats["lengths"]`` as a value.

    Attributes:
        column: the measured column(s) (``input_ids``, or ``"text+title"`` for characters of text columns).
        unit: ``"tokens"`` (attended tokens with a mask, else the list length) or ``"chars"``.
        histogram: ``((length, rows), ...)`` sorted by length; exact, so shards merge exactly.
    """

    column: str | None
    unit: str | None
    histogram: tuple[tuple[int, int], ...]

    @classmethod
    def of(cls, stats: Mapping[str, Any]) -> LengthHistogram | None:
        """The histogram in a ``stats`` mapping, or None when the shard has none."""
        st = stats.get(LENGTHS)
        if not st:
            return None
        return cls(st.get("column"), st.get("unit"), tuple((int(v), int(c)) for v, c in st.get("histogram") or ()))

    @classmethod
    def merge(cls, items: Iterable[LengthHistogram]) -> LengthHistogram | None:
        """The exact sum of histograms (column and unit of the last one, as the report has always said)."""
        counts: dict[int, int] = {}
        column = unit = None
        seen = False
        for h in items:
            seen = True
            column, unit = h.column, h.unit
            for v, c in h.histogram:
                counts[v] = counts.get(v, 0) + c
        if not seen or not counts:
            return None
        return cls(column, unit, tuple(sorted(counts.items())))

    def to_stat(self) -> dict[str, Any]:
        """The JSON form: ``{column, unit, histogram, count, min, p50, p90, p99, max, mean}``."""
        hist = [[v, c] for v, c in self.histogram]
        return {"column": self.column, "unit": self.unit, "histogram": hist, **histogram_summary(hist)}


@dataclass(frozen=True)
class LabelCounts:
    """Exact class-label counts of a shard (or dataset): ``stats["labels"]`` as a value.

    Attributes:
        column: the label column.
        counts: ``((value, rows), ...)``; ``value`` is the stored label (int, str, float or None).
    """

    column: str | None
    counts: tuple[tuple[Any, int], ...]

    @classmethod
    def of(cls, stats: Mapping[str, Any]) -> LabelCounts | None:
        st = stats.get(LABELS)
        if not st:
            return None
        return cls(st.get("column"), tuple((v, int(c)) for v, c in st.get("counts") or ()))

    @classmethod
    def merge(cls, items: Iterable[LabelCounts]) -> LabelCounts | None:
        """The exact sum of label counts (column of the last one)."""
        counts: dict[Any, int] = {}
        column = None
        seen = False
        for lc in items:
            seen = True
            column = lc.column
            for v, c in lc.counts:
                counts[v] = counts.get(v, 0) + c
        if not seen:
            return None
        return cls(column, tuple(sorted(counts.items(), key=_label_sort_key)))

    def to_stat(self) -> dict[str, Any]:
        """The JSON form: ``{column, counts: [[value, rows], ...]}`` sorted (None last, by type, by value)."""
        return {"column": self.column, "counts": [[v, c] for v, c in sorted(self.counts, key=_label_sort_key)]}


@dataclass(frozen=True)
class EosSupervision:
    """How often the eos that ends real content is supervised in a shard: ``stats["eos"]`` as a value.

    Attributes:
        total: eos positions inside real content (attention_mask 1, or no mask).
        supervised: of those, positions whose label is not ``ignore_index``.
        rows_with_eos: rows holding at least one such eos.
    """

    total: int
    supervised: int
    rows_with_eos: int

    @classmethod
    def of(cls, stats: Mapping[str, Any]) -> EosSupervision | None:
        st = stats.get(EOS)
        if not st:
            return None
        return cls(int(st.get("total") or 0), int(st.get("supervised") or 0), int(st.get("rows_with_eos") or 0))
