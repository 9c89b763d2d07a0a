"""Check registry: one producer per check ID.

A check is one function registered with the ID it emits and the roles and facts it needs::

    @check("tokens.out_of_vocab", layouts=TOKENIZED, roles=("input_ids",), facts=("tokens.vocab_size",))
    def out_of_vocab(ctx: ShardContext) -> Iterable[ShardItem]: ...

The registry, not the function, lists the check as :class:`~datacheck.model.findings.Skipped`
when a declared role is absent (the role table's reason, e.g. "no input_ids column (set [columns]
input_ids)"), when a declared fact (config ``section.key``) is unset ("[tokens] vocab_size is not
set"), or when a declared role's column has a dtype that cannot serve the role (the
``schema.dtype`` reason). Only then is the function called.

A shard-level check function receives a :class:`ShardContext` and yields items of its own ID only:

- :class:`RowCheck`: a boolean polars expression per row (True = the row fails), fused by the
  engine with every other check of the shard into ONE lazy query;
- :class:`~datacheck.model.findings.Finding`: a shard-level finding decided from the schema alone;
- :class:`AfterQuery`: a shard-level verdict decided from the row count after the fused query;
- :class:`~datacheck.model.findings.Skipped`: the check cannot run here, and why.

Measurements that are not a check (:class:`Stat` for the shard's ``stats``, :class:`Payload` for
the merge) are registered with :func:`measure`. Dataset-level checks (``level="dataset"``) receive
the :class:`~datacheck.model.results.DatasetContext` and yield Findings and Skipped of their ID.
The hook for a shard that cannot be read at all is registered with :func:`on_unreadable`.

Every ID is a catalog ID (:mod:`datacheck.model.catalog`); each has exactly one producer (a shard
stage, a dataset stage, or both, in one module).

A family whose checks or measurements read columns the read path derives (the Alpaca layout's
``messages``, the chat template's ``input_ids``/``assistant_mask``/``labels``, rendered preference
pairs: :data:`datacheck.derive.read.DERIVATIONS`) declares them with :func:`derives`;
:func:`needed_derivations` is the set the engine asks the read path for.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Union

import numpy as np
import polars as pl

from datacheck.derive.chat import ChatTemplate
from datacheck.derive.pairs import UnrenderedPairs
from datacheck.derive.read import DERIVATIONS
from datacheck.model import catalog
from datacheck.model.config import Config
from datacheck.model.errors import InternalError, ReportVersionError, UsageError
from datacheck.model.findings import Finding, Skipped
from datacheck.model.layouts import ANY as ANY_LAYOUT
from datacheck.model.layouts import LAYOUTS
from datacheck.model.roles import ROLE_SPECS, Roles, role_dtype_problems, role_problem

__all__ = [
    "ShardContext",
    "RowCheck",
    "FlatView",
    "RowAgg",
    "Stat",
    "Payload",
    "AfterQuery",
    "RowsKey",
    "ShardItem",
    "ShardPlan",
    "CheckSpec",
    "check",
    "measure",
    "on_unreadable",
    "derives",
    "needed_derivations",
    "DERIVES",
    "CHECKS",
    "MEASURES",
    "UNREADABLE",
    "READER_IDS",
    "fact_value",
    "finding",
    "shard_plan",
    "dataset_items",
    "unreadable_findings",
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
    "shared_pass",
    "clear_shared_passes",
]


@dataclass(frozen=True)
class ShardContext:
    """What a shard check may know before reading data: config facts, roles, and the schema."""

    cfg: Config
    roles: Roles
    schema: dict[str, pl.DataType]
    shard: str
    #: False when the audit has a single shard and no splits or --against: nothing can repeat across
    #: shards, so the row-hash payload for the merge is not computed (it is the costliest item).
    cross_shard: bool = True
    #: implicit-prompt preference pairs the read path could not render (the pref family reports
    #: them as skipped entries), or None
    unrendered_pairs: UnrenderedPairs | None = None
    #: the chat template the read path rendered ``messages`` with (:class:`~datacheck.derive.chat.ChatTemplate`),
    #: or None when nothing was rendered
    chat_template: ChatTemplate | None = None
    #: the shard's layout name (:data:`datacheck.model.layouts.LAYOUTS`), or None when unknown: a
    #: check whose declared layouts leave it out is not applicable (not run, not skipped)
    layout: str | None = None


@dataclass(frozen=True)
class FlatView:
    """A position-wise view of list columns that must align (e.g. input_ids, attention_mask, labels).

    The runner builds it once per shard from the same scan (polars shares the scan between the
    queries of one ``collect_all``): each list column exploded jointly, one row per position, plus
    ``__row`` (the 0-based row of the position). Rows where the lists differ in length, or where
    ``where`` is not true, contribute one null position (so they never fail a position-wise check).
    Checks and stats that carry this view are evaluated in it: their expressions see the columns
    as scalars (one element each).

    Attributes:
        key: identity of the view (items with equal keys share one exploded frame).
        cols: the list columns, exploded together.
        where: optional per-row condition (e.g. the mask is binary).
        drop_others: rows where ``where`` (or the lengths) fail contribute no position at all,
            instead of one null position: for a view of candidate rows (few or none on clean data),
            read only by its own check, whose expressions then run over the candidates' positions
            only (the rolling windows of ``content.periodic_tokens`` ran over one null position per
            row: about 12 of the 17 ms it cost a 38,917 x 128 batch without candidates).
    """

    key: str
    cols: tuple[str, ...]
    where: pl.Expr | None = None
    drop_others: bool = False

    def row_ok(self) -> pl.Expr:
        """Per row (list kernels): the row's positions are in the view (its lists have one length
        and ``where`` holds); other rows contribute one null position. A rule computed per row by
        list kernels instead of in the view uses it to judge the same rows."""
        first = pl.col(self.cols[0]).list.len()
        same = pl.all_horizontal([first == pl.col(c).list.len() for c in self.cols[1:]]) if len(self.cols) > 1 else first.is_not_null()
        if self.where is not None:
            same = same & self.where
        return same

    def frame(self, lf: pl.LazyFrame) -> pl.LazyFrame:
        """The exploded frame of ``lf`` (columns ``__row`` and ``cols``; ``__row`` is ``lf``'s own
        ``__row`` column when it has one, else the row's position in ``lf``)."""
        same = self.row_ok()
        # a frame of gathered rows (the second pass) carries the shard's row numbers in ``__row``:
        # keep them, so details name the shard's rows and not the positions in the gathered frame
        row = (pl.col("__row").cast(pl.UInt32) if "__row" in lf.collect_schema().names()
               else pl.int_range(pl.len(), dtype=pl.UInt32))
        # the condition is computed once per row as a column (inlined in each column's when/then,
        # polars evaluated it once per column: a candidate condition with n_unique costs that much)
        picked = lf.select([row.alias("__row"), same.alias("__keep"), *[pl.col(c) for c in self.cols]])
        if self.drop_others:
            return picked.filter(pl.col("__keep")).drop("__keep").explode(list(self.cols), empty_as_null=True)
        return (picked.select([pl.col("__row")] + [pl.when(pl.col("__keep")).then(pl.col(c)).alias(c) for c in self.cols])
                .explode(list(self.cols), empty_as_null=True))


#: the reducers a :class:`RowAgg` may use (polars' grouped aggregations of one column)
ROW_AGG_HOW = ("sum", "max", "min")


@dataclass(frozen=True)
class RowAgg:
    """A per-row aggregate over a :class:`FlatView`: ``how`` (``"sum"``, ``"max"`` or ``"min"``) of
    the per-position expression ``expr`` over the positions of each row.

    The engine evaluates every RowAgg of one view once per shard (the positions' expressions as
    columns of the exploded frame, then one grouped aggregation by ``__row``) and hands a row check
    one row per row of the view, with ``__row`` and a column per aggregate name: per-row sums and
    "last position where" without a window per row (``over``) or running sums in the position view.
    Two checks may share an aggregate by giving the same name and the same expression (a name given
    twice with different expressions is an InternalError).

    Attributes:
        name: the column name the row check's ``fails`` reads (unique per view).
        expr: per-position expression in the view (boolean or numeric; null is skipped by the reducer).
        how: the reducer.
    """

    name: str
    expr: pl.Expr
    how: str = "sum"

    def __post_init__(self) -> None:
        if self.how not in ROW_AGG_HOW:
            raise InternalError(f"row aggregate {self.name!r}: how must be one of {ROW_AGG_HOW}, not {self.how!r}")


@dataclass(frozen=True)
class RowCheck:
    """A row-level check as polars expressions.

    Attributes:
        check: check ID.
        column: the column concerned (None when several).
        fails: Boolean expression per row; True = the row fails; null counts as not failing.
            (May be None when ``rows`` is given.)
        message: ``f(count, details) -> str``; ``details`` holds the evaluated ``details`` exprs.
        example: per-row expression of the value to show; evaluated only on example rows.
        details: name -> aggregate expression, evaluated in the second pass over this check's
            failing rows only (never when nothing failed), so it costs nothing on clean data.
        severity: overrides the catalog's default severity.
        refine: with ``key``: ``f(sub) -> exact_rows``, where ``sub`` (a DataFrame with ``__row``,
            the 0-based shard row, and every column) holds every row whose ``key`` is shared with
            another row of the shard; it returns the rows that exactly repeat an earlier one (e.g.
            duplicates by a 64-bit in-memory hash, verified exactly here, so a collision never
            creates a finding).
        details_merge: per ``details`` key, how its values on each batch's failing rows merge
            (:func:`sum_parts`, :func:`max_parts`, ...). When every key has one, a multi-batch shard
            evaluates the details batch by batch and keeps none of the failing rows; otherwise the
            failing rows (the columns the checks read) are kept until the shard's last batch, so
            memory grows with the failing rows of such a check.
        key: instead of ``fails``, a per-row hash expression: the rows whose key repeats an earlier
            row's (over the whole shard, across batches) are candidates, verified by ``refine``.
        rows: instead of ``fails``, an aggregate expression giving the sorted failing row indices
            (UInt32).
        view: a :class:`FlatView`: ``fails`` (and ``details``) are then evaluated per position in
            that view, and a row fails when any of its positions does.
        from_payload: instead of ``fails``, ``f(payload) -> rows``: the failing rows decided after
            the fused query from the shard's :class:`Payload` values (e.g. in-shard duplicates from
            the 128-bit row hashes the query already computed for the merge).
        per_row: with ``view``: the :class:`RowAgg` aggregates ``fails`` reads. ``fails`` is then
            evaluated over one row per row of the view (columns ``__row`` and the aggregate names),
            not per position; ``details`` stay per position.
    """

    check: str
    column: str | None
    fails: pl.Expr | None
    message: Callable[[int, dict[str, Any]], str]
    example: pl.Expr | None = None
    details: dict[str, pl.Expr] = field(default_factory=dict)
    severity: str | None = None
    refine: Callable[[pl.DataFrame], list[int]] | None = None
    rows: pl.Expr | None = None
    view: FlatView | None = None
    from_payload: Callable[[dict[str, Any]], list[int]] | None = None
    key: pl.Expr | None = None
    details_merge: dict[str, Callable[[list[Any]], Any]] = field(default_factory=dict)
    per_row: tuple[RowAgg, ...] = ()

    def __post_init__(self) -> None:
        if self.per_row and self.view is None:
            raise InternalError(f"row check {self.check!r}: per-row aggregates need a flat view")


@dataclass(frozen=True)
class Stat:
    """An aggregate that goes into the shard's ``stats`` under ``key`` (after ``post``).

    A shard larger than one batch (:mod:`datacheck.formats.batches`) evaluates ``expr`` on each batch;
    ``merge`` combines the batches' values (as Python values, before ``post``, in row order) into
    the value ``expr`` has on the whole shard, and ``post`` runs once on it. Write ``expr`` as
    mergeable partial aggregates (counts, sums, exact value counts, min/max, moments) and derive
    ratios in ``post``. The combinators below (:func:`sum_parts`, :func:`counts_parts`,
    :func:`fields_parts`, ...) merge exactly, except :func:`moments_parts` (floating point).
    ``merge=None``: the stat cannot be merged and is a check error on a multi-batch shard.
    """

    key: str
    expr: pl.Expr
    post: Callable[[Any], Any] = lambda v: v
    view: FlatView | None = None
    merge: Callable[[list[Any]], Any] | None = None


@dataclass(frozen=True)
class Payload:
    """An aggregate computed in the fused query and kept on the shard result (``ShardResult.payload``)
    for the merge, but never written into the report (e.g. 128-bit row content hashes). The value
    stays a polars object (e.g. a Series), unlike a :class:`Stat`'s.

    On a multi-batch shard, ``post`` runs on each batch and ``merge`` combines the batches' posted
    values in row order (default :func:`concat_parts`: per-row payloads are concatenated)."""

    key: str
    expr: pl.Expr
    post: Callable[[Any], Any] = lambda v: v
    merge: Callable[[list[Any]], Any] = field(default=lambda parts: concat_parts(parts))


def finding(check_id: str, message: str, *, severity: str | None = None, **fields: Any) -> Finding:
    """A :class:`~datacheck.model.findings.Finding` of ``check_id`` at the catalog's default severity
    (:func:`datacheck.model.catalog.info`), unless ``severity`` names another; ``fields`` are the
    Finding's other attributes (``column``, ``count``, ``rows``, ``shards``, ``details``, ...). The
    policy's ``[policy]`` overrides apply later, to every finding alike.

    Raises:
        InternalError: ``check_id`` is not a catalog ID.
    """
    if not catalog.is_known(check_id):
        raise InternalError(f"finding of {check_id!r}: not a catalog ID (CHECKS.md)")
    return Finding(check=check_id, severity=severity or catalog.info(check_id).severity, message=message, **fields)


# ------------------------------------------------------------------ merging batches (exact)


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


# ------------------------------------------------------------------ one pass shared by several checks

#: results of :func:`shared_pass` for the query being run: key -> (the inputs, held so that their
#: buffer addresses stay theirs, and the value); emptied by the engine after each query
_SHARED: dict[tuple, tuple[list[pl.Series], Any]] = {}
_SHARED_LOCK = threading.Lock()
_SHARED_KEY_LOCKS: dict[tuple, threading.Lock] = {}


def _buffers(s: pl.Series) -> tuple:
    """The identity of a series' data: per chunk, the addresses of its Arrow buffers (a chunk's
    export is zero-copy), its offset and length."""
    parts = []
    for c in s.get_chunks():
        a = c.to_arrow()
        parts.append((a.offset, len(a), tuple(b.address if b is not None else 0 for b in a.buffers())))
    return (s.name, str(s.dtype), tuple(parts))


def shared_pass(key: tuple, inputs: list[pl.Series], compute: Callable[[], Any]) -> Any:
    """The value of ``compute()`` (a pass over ``inputs``, the Series handed to a ``map_batches``
    kernel), computed once per query for equal ``key`` and equal input data: several checks whose
    expressions call the same kernel (each reading its own field of the result) cost one pass, where
    polars evaluates each ``map_batches`` of a select separately (it does not merge Python UDFs).

    Data are equal when their Arrow buffers are the same, chunk by chunk (addresses of live
    buffers: the entry holds the inputs, so no other data can take those addresses while it
    exists). The engine empties the entries after
    each query (:func:`clear_shared_passes`), so they never outlive a batch. Thread-safe: polars
    runs the expressions of a select in parallel; a second caller waits for the first."""
    full = (key, tuple(_buffers(s) for s in inputs))
    with _SHARED_LOCK:
        lock = _SHARED_KEY_LOCKS.setdefault(full, threading.Lock())
    with lock:
        got = _SHARED.get(full)
        if got is not None:
            return got[1]
        value = compute()
        _SHARED[full] = (list(inputs), value)
        return value


def clear_shared_passes() -> None:
    """Forget every :func:`shared_pass` result (the engine calls it after each query)."""
    with _SHARED_LOCK:
        _SHARED.clear()
        _SHARED_KEY_LOCKS.clear()


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


@dataclass(frozen=True)
class AfterQuery:
    """A shard-level verdict decided after the fused query from the shard's row count.

    Attributes:
        check: check ID.
        decide: ``f(rows) -> findings`` (``rows``: the shard's row count, an int >= 0).
    """

    check: str
    decide: Callable[[int], Iterable[Finding]]


@dataclass(frozen=True, order=True)
class RowsKey:
    """The key of one row check's failing rows (``ShardResult.failing_rows``): the check ID and the
    column it concerns (None when several). ``str(key)`` is ``"check"`` or ``"check:column"``."""

    check: str
    column: str | None = None

    def __str__(self) -> str:
        return self.check if self.column is None else f"{self.check}:{self.column}"


ShardItem = Union[RowCheck, Finding, Skipped, AfterQuery]
MeasureItem = Union[Stat, Payload]
ShardFn = Callable[[ShardContext], Iterable[ShardItem]]
DatasetFn = Callable[[Any], Iterable[Union[Finding, Skipped]]]


@dataclass(frozen=True)
class CheckSpec:
    """One check ID's producer: what it needs and the functions that compute it.

    Attributes:
        id: the catalog ID it emits (and no other).
        roles: roles it needs; ``"a|b"`` needs either. A role that must be present with a dtype that
            serves it (``dtype_roles``) skips the check with the ``schema.dtype`` reason otherwise.
        facts: config facts it needs, as ``section.key`` (``tokens.vocab_size``); unset (None) skips it;
            ``"a.x|a.y"``: either serves (skipped when all are unset).
        reasons: overrides of the derived skip reasons, by role or fact name.
        dtype_roles: the declared roles whose dtype must serve the role (default: every single role).
        shard: the shard-stage function, or None.
        dataset: the dataset-stage function, or None.
        module: the module that registered it.
        dataset_facts: config facts the dataset stage needs (its own declaration).
        layouts: the layouts (:data:`datacheck.model.layouts.LAYOUTS`) the check applies to; on a
            shard of another (known) layout it is not applicable.
    """

    id: str
    roles: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()
    reasons: tuple[tuple[str, str], ...] = ()
    dtype_roles: tuple[str, ...] = ()
    shard: ShardFn | None = None
    dataset: DatasetFn | None = None
    module: str = ""
    dataset_facts: tuple[str, ...] = ()
    layouts: frozenset[str] = ANY_LAYOUT

    def applies(self, layout: str | None) -> bool:
        """Whether the check applies to a shard of ``layout`` (None, unknown: every check applies)."""
        return layout is None or layout in self.layouts

    def reason(self, name: str, default: str) -> str:
        return dict(self.reasons).get(name, default)

    def unmet_dataset(self, cfg: Config) -> str | None:
        """Why the dataset stage cannot run (an unset ``dataset_facts`` entry), or None."""
        for fact in self.dataset_facts:
            if _unset(cfg, fact):
                return self.reason(fact, _unset_reason(fact))
        return None

    def unmet(self, roles: Roles, cfg: Config, problems: Any = None) -> str | None:
        """Why this check cannot run (the first unmet declaration), or None.

        Args:
            roles: the shard's roles (None at the dataset stage: roles are not checked there).
            cfg: the config.
            problems: ``() -> list[RoleDtypeProblem]`` of the shard (called only when needed).
        """
        if roles is not None:
            for role in self.roles:
                names = role.split("|")
                if not any(roles.has(r) for r in names):
                    why = next((w for r, w in getattr(roles, "unavailable", ()) if r in names), None)
                    if why is not None:  # the read path could not make the role (e.g. rendering needs a package)
                        return why
                    default = (ROLE_SPECS[names[0]].missing_reason if len(names) == 1 else
                               f"no {' or '.join(names)} column (set [columns] {' or '.join(names)})")
                    return self.reason(role, default)
        for fact in self.facts:
            if _unset(cfg, fact):
                return self.reason(fact, _unset_reason(fact))
        if roles is not None and self.dtype_roles and problems is not None:
            probs = problems()
            for role in self.dtype_roles:
                p = role_problem(probs, role)
                if p is not None:
                    return p.skip_reason
        return None


def _unset(cfg: Config, fact: str) -> bool:
    """Whether fact ``section.key`` is unset; ``"a.x|a.y"`` (either fact serves) is unset when all are."""
    return all(fact_value(cfg, f) is None for f in fact.split("|"))


def _unset_reason(fact: str) -> str:
    parts = [f.split(".", 1) for f in fact.split("|")]
    return "; ".join(f"[{section}] {key} is not set" for section, key in parts)


def fact_value(cfg: Config, fact: str) -> Any:
    """The value of config fact ``section.key`` (``labels.ignore_index`` is the effective ignore
    index: None when unset). Raises InternalError for a fact the config does not have."""
    section, key = fact.split(".", 1)
    sec = getattr(cfg, section, None)
    if sec is None:
        raise InternalError(f"check declares fact {fact!r}, but the config has no [{section}] section")
    if section == "labels" and key == "ignore_index":
        return sec.ignore
    if key == "schema" and section == "dataset":
        return sec.schema_
    if key not in type(sec).model_fields:
        raise InternalError(f"check declares fact {fact!r}, but [{section}] has no key {key!r}")
    return getattr(sec, key)


#: check ID -> its producer (filled by the family modules' decorators)
CHECKS: dict[str, CheckSpec] = {}
#: measurements (stats and payloads) by name, in registration order
MEASURES: dict[str, Callable[[ShardContext], Iterable[MeasureItem]]] = {}
#: family module -> the derivations of the read path its checks and measurements read (:func:`derives`)
DERIVES: dict[str, frozenset[str]] = {}
#: check ID -> the hook for a shard that cannot be read (``fn(shard, format, reason) -> findings``)
UNREADABLE: dict[str, Callable[[str, str, str], Iterable[Finding]]] = {}
#: IDs the shard reader itself produces while opening (``ShardData.decode_findings``): ID -> producer module
READER_IDS: dict[str, str] = {"decode.bad_record": "datacheck.formats", "decode.invalid_utf8": "datacheck.formats"}


def _register(cid: str, stage: str, fn: Callable, roles: tuple[str, ...], facts: tuple[str, ...],
              reasons: dict[str, str] | None, dtype_roles: tuple[str, ...] | None,
              layouts: Iterable[str] | None) -> None:
    if not catalog.is_known(cid):
        raise InternalError(f"check {cid!r} ({fn.__module__}.{fn.__name__}) is not in the catalog (CHECKS.md)")
    if layouts is not None:
        unknown = sorted(set(layouts) - set(LAYOUTS))
        if unknown or not set(layouts):
            raise InternalError(f"check {cid!r}: layouts must be names of {sorted(LAYOUTS)}, got {sorted(layouts)}")
    for f in (alt for fact in facts for alt in fact.split("|")):
        section, _, key = f.partition(".")
        if not key:
            raise InternalError(f"check {cid!r}: fact {f!r} must be written section.key")
    for r in roles:
        for name in r.split("|"):
            if name not in ROLE_SPECS:
                raise InternalError(f"check {cid!r}: unknown role {name!r}")
    old = CHECKS.get(cid)
    if old is not None:
        if old.module != fn.__module__:
            raise InternalError(f"check {cid!r} has two producers: {old.module} and {fn.__module__}")
        if getattr(old, stage) is not None and getattr(old, stage) is not fn:
            raise InternalError(f"check {cid!r} has two {stage}-stage functions in {fn.__module__}")
    if dtype_roles is None:
        dtype_roles = tuple(r for r in roles if "|" not in r)
    base = old if old is not None else CheckSpec(id=cid, module=fn.__module__)
    if old is None and layouts is None:
        raise InternalError(f"check {cid!r} ({fn.__module__}.{fn.__name__}) declares no layouts: write "
                            "layouts=ANY (or the layouts it applies to, datacheck.model.layouts)")
    if old is not None and layouts is not None and frozenset(layouts) != old.layouts:
        raise InternalError(f"check {cid!r}: its shard and dataset stages declare different layouts")
    lay = frozenset(layouts) if layouts is not None else base.layouts
    if stage == "shard":
        CHECKS[cid] = CheckSpec(cid, tuple(roles), tuple(facts), tuple((reasons or {}).items()) + base.reasons,
                                tuple(dtype_roles), fn, base.dataset, fn.__module__, base.dataset_facts, lay)
    else:
        if roles:
            raise InternalError(f"check {cid!r}: a dataset-stage check declares facts, not roles")
        CHECKS[cid] = CheckSpec(cid, base.roles, base.facts, base.reasons + tuple((reasons or {}).items()),
                                base.dtype_roles, base.shard, fn, fn.__module__, tuple(facts), lay)


def check(cid: str, *, roles: tuple[str, ...] = (), facts: tuple[str, ...] = (), level: str = "shard",
          reasons: dict[str, str] | None = None, dtype_roles: tuple[str, ...] | None = None,
          layouts: Iterable[str] | None = None) -> Callable:
    """Register the producer of check ``cid``.

    Args:
        cid: a catalog ID (InternalError otherwise, at import).
        roles: roles the check needs (``"label|labels"``: either); absent -> skipped with the role
            table's reason.
        facts: config facts it needs (``"tokens.vocab_size"``); unset -> skipped "[tokens]
            vocab_size is not set".
        level: ``"shard"`` (``fn(ShardContext)``, yields RowCheck/Finding/AfterQuery/Skipped) or
            ``"dataset"`` (``fn(DatasetContext)``, yields Finding/Skipped, after every shard). One ID
            may have one function of each level, in the same module.
        reasons: skip reasons by role or fact name, replacing the derived ones.
        dtype_roles: the declared roles whose column must have a dtype that serves the role
            (default: every declared single role; ``()`` to check dtypes in the function).
        layouts: the layouts the check applies to (:mod:`datacheck.model.layouts`: ``ANY`` or a
            group such as ``SFT``); required at an ID's first registration (InternalError without);
            its other stage may repeat it or leave it out. On a shard of another known layout the
            check is not applicable: neither run nor skipped, counted in ``ShardPlan.not_applicable``.
    """
    if level not in ("shard", "dataset"):
        raise InternalError(f"check {cid!r}: level must be 'shard' or 'dataset', not {level!r}")

    def deco(fn: Callable) -> Callable:
        _register(cid, level, fn, tuple(roles), tuple(facts), reasons,
                  dtype_roles if level == "shard" else (), layouts)
        return fn

    return deco


def derives(module: str, *derivations: str) -> None:
    """Declare that the checks and measurements of the family ``module`` read the columns the read
    path derives by ``derivations`` (names of :data:`datacheck.derive.read.DERIVATIONS`).

    Raises:
        InternalError: an unknown derivation name (at import).
    """
    unknown = sorted(set(derivations) - DERIVATIONS)
    if unknown:
        raise InternalError(f"{module} declares unknown derivations {unknown}; known: {sorted(DERIVATIONS)}")
    DERIVES[module] = DERIVES.get(module, frozenset()) | frozenset(derivations)


def needed_derivations(only: Iterable[str] | None = None) -> frozenset[str]:
    """The derivations the read path runs for the registered shard-stage checks (those in ``only``,
    or all) and every measurement: the union of what their families declared with :func:`derives`."""
    wanted = set(only) if only is not None else None
    modules = {spec.module for cid, spec in CHECKS.items()
               if spec.shard is not None and (wanted is None or cid in wanted)}
    modules |= {fn.__module__ for fn in MEASURES.values()}
    return frozenset().union(*(DERIVES.get(m, frozenset()) for m in modules))


def measure(name: str) -> Callable:
    """Register a measurement ``fn(ShardContext) -> Iterable[Stat | Payload]`` (shard stats for the
    report, payloads for the merge). Measurements are not checks: they never skip or find."""

    def deco(fn: Callable) -> Callable:
        if name in MEASURES and MEASURES[name] is not fn:
            raise InternalError(f"measurement {name!r} registered twice")
        MEASURES[name] = fn
        return fn

    return deco


def on_unreadable(cid: str) -> Callable:
    """Register the hook for a shard that cannot be read: ``fn(shard, format, reason) -> findings``."""

    def deco(fn: Callable) -> Callable:
        if not catalog.is_known(cid):
            raise InternalError(f"unreadable hook {cid!r} is not in the catalog")
        if cid in CHECKS or (cid in UNREADABLE and UNREADABLE[cid] is not fn):
            raise InternalError(f"check {cid!r} has two producers")
        UNREADABLE[cid] = fn
        return fn

    return deco


@dataclass
class ShardPlan:
    """Everything the registered checks and measurements want from one shard, by kind."""

    row_checks: list[RowCheck] = field(default_factory=list)
    stats: list[Stat] = field(default_factory=list)
    payloads: list[Payload] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    after: list[AfterQuery] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    #: the shard-stage checks that do not apply to the shard's layout (IDs, registration order)
    not_applicable: list[str] = field(default_factory=list)


def _own(spec_id: str, item: Any) -> Any:
    if getattr(item, "check", spec_id) != spec_id:
        raise InternalError(f"the producer of {spec_id!r} yielded an item of {item.check!r}: one producer per ID")
    return item


def shard_plan(ctx: ShardContext, only: set[str] | None = None, measures: bool = True) -> ShardPlan:
    """Run every registered shard-stage check (or those in ``only``) and measurement on ``ctx``.

    Raises:
        InternalError: a check yielded an item of another ID, or an object that is no shard item.
    """
    plan = ShardPlan()
    probs_cache: list[Any] = []

    def problems() -> Any:
        if not probs_cache:
            lab = ctx.cfg.labels
            probs_cache.append(role_dtype_problems(ctx.roles, ctx.schema, num_classes=lab.num_classes,
                                                   classes=tuple(lab.classes) if lab.classes is not None else None,
                                                   shard=ctx.shard))
        return probs_cache[0]

    for cid, spec in CHECKS.items():
        if spec.shard is None or (only is not None and cid not in only):
            continue
        if not spec.applies(ctx.layout):
            plan.not_applicable.append(cid)
            continue
        why = spec.unmet(ctx.roles, ctx.cfg, problems)
        if why is not None:
            plan.skipped.append(Skipped(cid, why))
            continue
        try:
            items = list(spec.shard(ctx))
        except (UsageError, ReportVersionError):  # bad input the check found: the user's error (exit 2)
            raise
        except Exception as exc:  # noqa: BLE001 - a raising check function is a check error, not a crash
            plan.skipped.append(_raised(cid, spec.shard, exc))
            continue
        for item in items:
            item = _own(cid, item)
            if isinstance(item, RowCheck):
                plan.row_checks.append(item)
            elif isinstance(item, Finding):
                plan.findings.append(item)
            elif isinstance(item, Skipped):
                plan.skipped.append(item)
            elif isinstance(item, AfterQuery):
                plan.after.append(item)
            else:
                raise InternalError(f"check {cid!r} yielded {type(item).__name__}; measurements go in @measure")
    if measures:
        for name, fn in MEASURES.items():
            try:
                measured = list(fn(ctx))
            except (UsageError, ReportVersionError):
                raise
            except Exception as exc:  # noqa: BLE001 - a raising measurement is a check error, not a crash
                plan.skipped.append(_raised(f"stats.{name}", fn, exc))
                continue
            for item in measured:
                if isinstance(item, Stat):
                    plan.stats.append(item)
                elif isinstance(item, Payload):
                    plan.payloads.append(item)
                else:
                    raise InternalError(f"measurement {name!r} yielded {type(item).__name__}, not a Stat or Payload")
    return plan


def _raised(cid: str, fn: Any, exc: BaseException) -> Skipped:
    """The check error entry of a check (or measurement) function that raised: never a silent pass."""
    first = (str(exc).splitlines() or [""])[0]
    return Skipped(cid, f"check function {getattr(fn, '__name__', fn)!r} raised {type(exc).__name__}: {first}",
                   error=True)


def dataset_items(dctx: Any) -> Iterator[Finding | Skipped]:
    """Every registered dataset-stage check on ``dctx`` (a check whose roles or facts are unmet is skipped
    with the reason; one whose function raises is a check error). A check that applies to none of the
    readable shards' layouts (every one known) is not run and not listed."""
    layouts = {(s.layout or {}).get("name") for s in dctx.shards if s.readable}
    for cid, spec in CHECKS.items():
        if spec.dataset is None:
            continue
        if layouts and not any(spec.applies(lay) for lay in layouts):
            continue
        why = spec.unmet_dataset(dctx.cfg)
        if why is not None:
            yield Skipped(cid, why)
            continue
        try:
            items = list(spec.dataset(dctx))
        except (UsageError, ReportVersionError):  # bad input the check found (e.g. a shipped index): exit 2
            raise
        except Exception as exc:  # noqa: BLE001 - a raising check function is a check error, not a crash
            yield _raised(cid, spec.dataset, exc)
            continue
        for item in items:
            yield _own(cid, item)


def unreadable_findings(shard: str, fmt: str, reason: str) -> list[Finding]:
    """The findings of a shard that cannot be read (``shard``: its relative path, ``fmt``: its format)."""
    return [f for fn in UNREADABLE.values() for f in fn(shard, fmt, reason)]

