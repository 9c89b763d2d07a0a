"""Auditing one shard: every check of the shard fused into ONE lazy polars query over the scan,
then a second, small pass that gathers example values only for the checks that failed.

The engine knows no check ID: it runs whatever the registry (:mod:`datacheck.checks.registry`)
plans for the shard: row checks, stats, payloads, schema-level findings and after-query verdicts,
and asks the registry's unreadable hook when a shard cannot be read."""
from __future__ import annotations

import dataclasses
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Final, Iterator

import numpy as np
import polars as pl

from datacheck.checks import all as _families  # noqa: F401 - every family registers its checks
from datacheck.checks.registry import (
    CHECKS,
    FlatView,
    Payload,
    Repeats,
    RowAgg,
    RowCheck,
    RowsKey,
    ShardContext,
    ShardPlan,
    Stat,
    clear_shared_passes,
    needed_derivations,
    shard_plan,
    shared_roots,
    unreadable_findings,
    with_shared_columns,
)
from datacheck.derive.layout import SAMPLE_ROWS, padding_side_of, shard_layout
from datacheck.derive.read import CheckInput, open_for_checks
from datacheck.formats.batches import batch_rows, forced_batch_rows, gather_rows, shard_reader
from datacheck.formats.parquetdecode import release_unused
from datacheck.formats.registry import hash_shard
from datacheck.io.discover import DiscoveredShard
from datacheck.io.hashing import file_state
from datacheck.io.shardbytes import Unreadable
from datacheck.io.structs import sorted_fields
from datacheck.model import catalog
from datacheck.model.config import Config
from datacheck.model.constants import (
    BATCH_TARGET_BYTES,
    EXAMPLE_VALUE_MAX_CHARS,
    LAYOUT_SAMPLE_BYTES,
    ONE_BATCH_TARGETS,
)
from datacheck.model.errors import ENGINE_ERRORS, InternalError, OutOfMemory, ran_out_of_memory
from datacheck.model.findings import Example, Finding, Skipped
from datacheck.model.results import ShardResult
from datacheck.model.roles import is_list

__all__ = ["ShardResult", "audit_shard", "audit_file", "audit_frame"]






def _unreadable(ds: DiscoveredShard, chash: str, size: int, reason: str) -> ShardResult:
    return ShardResult(path=ds.rel, format=ds.format, content_hash=chash, bytes=size, rows=None,
                       findings=unreadable_findings(ds.rel, ds.format, reason))


def _first_line(exc: BaseException) -> str:
    """The first line of an exception's message (polars puts its plan below it)."""
    lines = str(exc).splitlines()
    return lines[0] if lines else ""


def _probed(rc: RowCheck) -> bool:
    """Whether the fused query first asks only whether any row of ``rc`` fails (see :func:`_run_batch`)."""
    return rc.key is None and rc.rows is None and rc.fails is not None


def _row_exprs(i: int, rc: RowCheck, probe: bool = False) -> list[pl.Expr]:
    """The outputs of row check ``i`` in the fused query: its candidate keys, its failing rows (an
    imploded UInt32 list, 0-based in the batch), or with ``probe`` (for a check with ``fails``)
    only whether any row fails (Boolean): a cheap reduction, where gathering row numbers costs
    several times as much even when nothing fails."""
    if probe and _probed(rc):
        return [rc.fails.fill_null(False).any().alias(f"__r{i}")]  # type: ignore[union-attr]
    if rc.key is not None:  # candidates are decided over the whole shard from the keys of every batch
        return [rc.key.implode().alias(f"__k{i}")]
    if rc.rows is not None:
        rows = rc.rows
    elif rc.fails is None:
        raise InternalError(f"row check {rc.check!r} has neither 'fails' nor 'rows'")
    elif rc.per_row:  # evaluated over the view's per-row aggregates (one row per row, unordered)
        rows = pl.col("__row").filter(rc.fails.fill_null(False)).sort()
    elif rc.view is not None:  # evaluated in the exploded frame: a row fails when any position does
        rows = pl.col("__row").filter(rc.fails.fill_null(False)).unique(maintain_order=True)
    else:
        rows = pl.int_range(pl.len(), dtype=pl.UInt32).filter(rc.fails.fill_null(False))
    return [rows.implode().alias(f"__r{i}")]


def _view_of(m: Stat | Payload) -> FlatView | None:
    """The flat view a measurement is evaluated in (payloads are always per row)."""
    return m.view if isinstance(m, Stat) else None


def _deferred(row_checks: list[RowCheck], stats: list[Stat | Payload], checks: list[int]) -> list[tuple[FlatView, list[int]]]:
    """The views of candidate rows (``FlatView.drop_others``) that ``checks`` read and no stat does,
    each with its checks: the probe asks first whether such a view holds any row, and its checks
    run only when it does (in the query that gathers failing rows). Building a view and its checks'
    expressions cost a fixed 7.5 ms a batch for the two candidate views of a clean token shard
    (``content.periodic_tokens``: 4.25 ms, ``labels.shift_mismatch``: 3.2 ms; 19 batches for 1 GiB
    of 128-token rows), where whether it holds a row is one reduction of its ``row_ok``."""
    read_by_stats = {v.key for st in stats if (v := _view_of(st)) is not None}
    out: dict[str, tuple[FlatView, list[int]]] = {}
    for i in checks:
        v = row_checks[i].view
        if v is not None and v.drop_others and v.key not in read_by_stats and _probed(row_checks[i]):
            out.setdefault(v.key, (v, []))[1].append(i)
    return list(out.values())


def _queries(lf: pl.LazyFrame, row_checks: list[RowCheck], stats: list[Stat | Payload],
             checks: list[int], stat_idx: list[int], with_len: bool = True, probe: bool = False,
             extra: list[pl.Expr] | None = None, direct: frozenset[int] = frozenset()) -> list[pl.LazyFrame]:
    """The shard's queries: one select over the rows, plus one per flat view. They all derive from
    the same scan (with the shared columns their row expressions read:
    :func:`~datacheck.checks.registry.shared_column`), and are collected together so that polars
    reads the data once. ``probe``: see :func:`_row_exprs`; the checks in ``direct`` gather their
    failing rows even so. ``extra``: more outputs (reductions) of the select over the rows."""
    main: list[pl.Expr] = ([pl.len().alias("__n")] if with_len else []) + list(extra or [])
    views: dict[str, tuple[FlatView, list[pl.Expr]]] = {}
    per_row: dict[str, tuple[dict[str, RowAgg], list[pl.Expr]]] = {}
    for i in checks:
        rc = row_checks[i]
        if rc.per_row and rc.view is not None:
            views.setdefault(rc.view.key, (rc.view, []))
            aggs, exprs = per_row.setdefault(rc.view.key, ({}, []))
            for a in rc.per_row:
                _add_agg(aggs, a, rc.check)
            exprs.extend(_row_exprs(i, rc, probe and i not in direct))
            continue
        target = main if rc.view is None or rc.key is not None else views.setdefault(rc.view.key, (rc.view, []))[1]
        target.extend(_row_exprs(i, rc, probe and i not in direct))
    for j in stat_idx:
        st = stats[j]
        sv = _view_of(st)
        target = main if sv is None else views.setdefault(sv.key, (sv, []))[1]
        target.append(st.expr.alias(f"__s{j}"))
    # the shared columns the rows' expressions and the views' row conditions read, computed once
    lf = with_shared_columns(lf, main + [view.row_ok() for view, _ in views.values()])
    out = [lf.select(main)] if main else []
    for key, (view, exprs) in views.items():
        flat = view.frame(lf)
        if exprs:
            out.append(flat.select(exprs))
        if key in per_row:
            aggs, row_exprs = per_row[key]
            out.append(_per_row_frame(flat, list(aggs.values())).select(row_exprs))
    return out


def _add_agg(aggs: dict[str, RowAgg], a: RowAgg, check: str) -> None:
    """Add ``a`` to a view's aggregates; the same name twice must be the same aggregate."""
    old = aggs.get(a.name)
    if old is None:
        aggs[a.name] = a
    elif old.how != a.how or not old.expr.meta.eq(a.expr):
        raise InternalError(f"row check {check!r}: per-row aggregate {a.name!r} is defined twice differently "
                            "in one flat view")


def _per_row_frame(flat: pl.LazyFrame, aggs: list[RowAgg]) -> pl.LazyFrame:
    """One row per row of the view (``__row`` and one column per aggregate): the positions'
    expressions become columns of the exploded frame, then one grouped aggregation by ``__row``
    (sorted: the view is in row order, which lets polars take its sorted-key path)."""
    cols = [a.expr.alias(a.name) for a in aggs]
    reduce = [getattr(pl.col(a.name), a.how)() for a in aggs]
    return (flat.select(pl.col("__row").set_sorted(), *cols)
            .group_by("__row").agg(reduce))


#: the polars engine of the fused query over one batch (an in-memory frame). Polars 2's default,
#: the streaming engine, splits a batch into morsels and sets up a pipeline per query: about 12 ms
#: more per batch here (40 batches of 50 rows: 1.02 vs 0.54 CPU s), and 0.57-0.59 vs 0.64-0.68 CPU s
#: for the 100,000 x 128 shard of benchmarks/bench_audit.py (5 batches)
QUERY_ENGINE: Final = "in-memory"


def _collect(queries: list[pl.LazyFrame]) -> pl.DataFrame:
    frames = (pl.collect_all(queries, engine=QUERY_ENGINE) if len(queries) > 1
              else [q.collect(engine=QUERY_ENGINE) for q in queries])
    return pl.concat(frames, how="horizontal") if len(frames) > 1 else frames[0]


def _first(df: pl.DataFrame, name: str) -> Any:
    v = df.get_column(name)[0]
    return v.to_list() if isinstance(v, pl.Series) else v


#: no failing row (int64, the dtype of every row array the engine keeps)
_NO_ROWS: Final = np.empty(0, dtype=np.int64)


def _row_array(rows: Any) -> np.ndarray:
    """``rows`` (a polars Series, a numpy array, a list or another iterable of row numbers) as a
    numpy int64 array: failing rows are held as arrays from the fused query to the report, never
    as Python ints (8 bytes a row where a list of ints took ~36: 10**6 empty strings failing two
    checks held ~230 MB of them, tracemalloc, and polars aborted under a 2 GiB address space)."""
    if rows is None:
        return _NO_ROWS
    if isinstance(rows, pl.Series):
        return rows.cast(pl.Int64).to_numpy() if rows.len() else _NO_ROWS
    if isinstance(rows, np.ndarray):
        return rows.astype(np.int64, copy=False)
    if isinstance(rows, (set, frozenset)):
        return np.fromiter(rows, dtype=np.int64, count=len(rows))
    return np.asarray(list(rows) if not isinstance(rows, list) else rows, dtype=np.int64).reshape(-1)


def _decided_rows(got: Any, earlier: dict[int, tuple[np.ndarray, np.ndarray]], i: int) -> np.ndarray:
    """The sorted failing rows (int64) of what check ``i``'s ``refine`` or ``from_payload`` returned;
    for :class:`~datacheck.checks.spec.Repeats`, the earlier row of each (sorted alike) is kept in
    ``earlier[i]`` for the finding's ``details.examples``."""
    if not isinstance(got, Repeats):
        return np.sort(_row_array(got))
    rows, first = _row_array(got.rows), _row_array(got.earlier)
    order = np.argsort(rows, kind="stable")
    earlier[i] = (rows[order], first[order])
    return rows[order]


def _earlier_examples(rows: np.ndarray, earlier: tuple[np.ndarray, np.ndarray], max_ex: int) -> list[dict[str, int]]:
    """``{"row", "first_row"}`` of the first ``max_ex`` of ``rows`` (sorted shard rows): the row each
    copy repeats (``earlier``: (sorted rows, their first rows))."""
    held, first = earlier
    ex = rows[:max_ex]
    at = np.searchsorted(held, ex)
    return [{"row": int(r), "first_row": int(first[k])} for r, k in zip(ex, at) if k < len(held) and held[k] == r]


def _row_series(rows: np.ndarray) -> pl.Series:
    """Shard rows (an int64 array) as the UInt32 Series ``__row`` is compared with."""
    return pl.Series(rows.astype(np.uint32), dtype=pl.UInt32)


@dataclass
class _Batch:
    """One batch's results: rows (0-based within the batch, numpy int64), keys, raw stat values,
    posted payloads, and what could not run on it."""

    n: int
    rows: dict[int, np.ndarray] = field(default_factory=dict)
    keys: dict[int, pl.Series] = field(default_factory=dict)
    stats: dict[int, Any] = field(default_factory=dict)
    payload: dict[int, Any] = field(default_factory=dict)
    broken_checks: dict[int, str] = field(default_factory=dict)
    broken_stats: dict[int, str] = field(default_factory=dict)


def _run_batch(lf: pl.LazyFrame, row_checks: list[RowCheck], measures: list[Stat | Payload],
               in_query: list[int], direct: frozenset[int] = frozenset()) -> _Batch:
    """The one fused query over one batch (a select over the rows, plus the flat views, collected
    together over one read) computing every row check, key, stat and payload. A row check with
    ``fails`` is first only probed (does any row fail?); the row numbers are gathered afterwards,
    in one more fused query over the same batch (in memory), for the checks that failed only: on a
    clean 100,000 x 128 token shard this took the fused query from 0.72 to 0.64 s CPU
    (``benchmarks/profile_audit.py``). The checks in ``direct`` (those that failed on the batch
    before: defects spread over a shard fail most batches), but those of a candidate view
    (:func:`_deferred`), gather their rows in the first query, so a batch is not evaluated twice
    for them; the shared passes (:func:`~datacheck.checks.registry.shared_pass`) of the first
    query serve the second too. On benchmarks/bench_peers.py's 200,000 x 256 shard (11 checks
    failing in each of its 13 batches) the second queries took 2.0 of 5.6 CPU s of the batches'
    queries, 0.13 s after. If it fails, find out whether reading or one check
    is at fault (that check alone cannot run). The shared passes it computes are kept: the caller
    forgets them (:func:`clear_shared_passes`) when it is done with the batch."""
    stats = measures
    none: set[int] = set()  # the checks of a candidate view without rows: they fail no row (no output)
    try:
        deferred = _deferred(row_checks, stats, in_query)
        later = {i for _, idx in deferred for i in idx}
        direct = direct - later  # a candidate view is still built only for a batch holding candidates
        anyrow = [v.row_ok().fill_null(False).any().alias(f"__v{k}") for k, (v, _) in enumerate(deferred)]
        df = _collect(_queries(lf, row_checks, stats, [i for i in in_query if i not in later],
                               list(range(len(stats))), probe=True, extra=anyrow, direct=direct))
        hit = [i for i in in_query if i not in later and i not in direct and _probed(row_checks[i])
               and bool(df.get_column(f"__r{i}")[0])]
        for k, (_, idx) in enumerate(deferred):
            if bool(df.get_column(f"__v{k}")[0]):
                hit.extend(idx)
            else:
                none.update(idx)
        if hit:  # the failing rows, only for the checks that have some (over the same in-memory batch)
            df = pl.concat([df.drop([f"__r{i}" for i in hit if i not in later]),
                            _collect(_queries(lf, row_checks, stats, hit, [], with_len=False))], how="horizontal")
        ok_checks = in_query
        ok_stats = list(range(len(stats)))
        broken_c: dict[int, str] = {}
        broken_s: dict[int, str] = {}
    except ENGINE_ERRORS as exc:  # isolate: the read itself, or one expression
        none.clear()  # every check below runs alone
        try:
            lf.select(pl.all().is_null().sum()).collect()
        except ENGINE_ERRORS as read_exc:
            raise Unreadable(f"reading the data failed: {str(read_exc).splitlines()[0]}") from None
        df_parts = [lf.select(pl.len().alias("__n")).collect()]
        ok_checks, ok_stats, broken_c, broken_s = [], [], {}, {}
        for i in in_query:
            try:
                df_parts.append(_collect(_queries(lf, row_checks, stats, [i], [], with_len=False)))
                ok_checks.append(i)
            except ENGINE_ERRORS as e:
                if ran_out_of_memory(e):  # even alone: the machine, not the check (OutOfMemory)
                    raise
                broken_c[i] = _first_line(e)
        for j in range(len(stats)):
            try:
                df_parts.append(_collect(_queries(lf, row_checks, stats, [], [j], with_len=False)))
                ok_stats.append(j)
            except ENGINE_ERRORS as e:
                if ran_out_of_memory(e):
                    raise
                broken_s[j] = _first_line(e)
        df = pl.concat(df_parts, how="horizontal")
        del exc
    out = _Batch(n=int(df["__n"][0]), broken_checks=broken_c, broken_stats=broken_s)
    dtypes = df.schema  # built once: a frame's schema is made anew on every access (0.2 ms for 25 outputs)
    for i in ok_checks:
        if row_checks[i].key is not None:
            out.keys[i] = df.get_column(f"__k{i}")[0]
        elif i in none or dtypes[f"__r{i}"] == pl.Boolean:  # a view without rows, or probed: no row fails
            out.rows[i] = _NO_ROWS
        else:
            out.rows[i] = _row_array(df.get_column(f"__r{i}")[0])
    for j in ok_stats:
        st = stats[j]
        if isinstance(st, Stat):
            out.stats[j] = _first(df, f"__s{j}")
        else:  # payloads stay polars objects (e.g. a Series of row hashes)
            out.payload[j] = st.post(df.get_column(f"__s{j}")[0])
    return out


#: decoded bytes of a key check's candidate rows (``RowCheck.key``: duplicate candidates) read again at
#: once, at most: the most the engine decodes in one read (:data:`ONE_BATCH_TARGETS` x
#: :data:`BATCH_TARGET_BYTES`, 128 MiB). Candidates of more are verified key group by key group, a batch
#: target of rows at a time (:func:`_refine_in_groups`)
REREAD_BYTES: Final = ONE_BATCH_TARGETS * BATCH_TARGET_BYTES


def _refine_in_groups(refine: Callable[[pl.DataFrame], Any], key: pl.Series, shared: np.ndarray,
                      read: Callable[[np.ndarray], pl.DataFrame | None], chunk: int) -> Any:
    """``refine`` (a key check's exact verification) over the candidate rows ``shared`` (sorted shard
    rows whose ``key`` value another row shares) in bounded memory: rows that repeat one another hold
    equal content, so equal keys (the key is a function of the content); each group of rows sharing a
    key value is verified apart, its rows read (``read``: the shard rows, with ``__row``, in row order)
    ``chunk`` at a time beside the distinct rows of the group met so far (each content's first row:
    every later copy of it is found against that row, which it names). Memory: a chunk and the group's
    distinct rows, where reading every candidate at once held them all (4 equal rows of 16 million
    int64 tokens: 2.6 GB peak RSS, 3.5 GB before the batches were let go).

    Returns :class:`Repeats` (every group's, rows in any order) when ``refine`` returns them, else the
    rows it returned, joined. Raises :class:`Unreadable` when a read fails."""
    frame = pl.DataFrame({"r": shared, "k": key.gather(pl.Series(shared))})
    groups = frame.group_by("k", maintain_order=True).agg("r")["r"]
    rows: list[np.ndarray] = []
    firsts: list[np.ndarray] = []
    repeats = False
    for group in groups:
        g = np.sort(np.asarray(group.to_numpy(), dtype=np.int64))
        distinct: pl.DataFrame | None = None
        for a in range(0, g.size, max(1, chunk)):
            got = read(g[a:a + max(1, chunk)])
            if got is None:
                raise Unreadable("reading the candidate rows again failed")
            both = pl.concat([distinct, got], how="vertical_relaxed") if distinct is not None else got
            res = refine(both)
            del both
            if isinstance(res, Repeats):
                repeats = True
                copies = _row_array(res.rows)
                firsts.append(_row_array(res.earlier))
            else:
                copies = _row_array(res)
            rows.append(copies)
            new = got.filter(~pl.col("__row").is_in(_row_series(copies).implode())) if copies.size else got
            distinct = pl.concat([distinct, new], how="vertical_relaxed") if distinct is not None else new
            del got, new
            if chunk < 1:  # rows over the batch target: their pages handed back before the next is read
                release_unused()
    out = np.concatenate(rows) if rows else _NO_ROWS
    if repeats or not rows:
        return Repeats(out, np.concatenate(firsts) if firsts else _NO_ROWS)
    return out


def _shown_prefix(values: pl.Series) -> pl.Series:
    """Example values as far as a report shows them: a list cut to its first
    :data:`~datacheck.model.constants.EXAMPLE_VALUE_MAX_CHARS` elements before it becomes a Python list
    (each element shows as at least one character and a ", ", so the text
    :func:`~datacheck.model.findings.show_value` cuts at that many characters is the same, "…" included).
    A row of 16 million tokens became a Python list of 16 million ints (about 0.5 GB a row, three example
    rows at once) to show 160 characters of it. Other values are taken whole."""
    if isinstance(values.dtype, pl.List):
        return values.list.head(EXAMPLE_VALUE_MAX_CHARS)
    return values


def _has_repeats(key: pl.Series) -> bool:
    """Whether a value of ``key`` (the candidate keys of a whole shard, one per row) occurs twice.
    Integer keys without nulls (the row hashes of ``dup.exact_in_shard``): one numpy sort of a copy
    and a comparison of neighbours, 18 ms CPU for 1,000,000 UInt64 keys where ``n_unique`` took 53
    ms (28 ms wall on two threads; ``is_duplicated().any()`` 125 ms); other keys: ``n_unique``."""
    if key.dtype.is_integer() and not key.null_count() and key.len() > 1:
        ordered = np.sort(key.to_numpy())
        return bool((ordered[1:] == ordered[:-1]).any())
    return key.n_unique() < key.len()


def _needed_columns(row_checks: list[RowCheck], stats: list[Stat | Payload], schema: dict[str, pl.DataType]) -> list[str]:
    """The columns any check, stat, example or detail of this shard reads (polars' own root names)."""
    exprs: list[pl.Expr] = []
    views: list[FlatView] = []
    if any(rc.refine is not None for rc in row_checks):
        return list(schema)  # a refine step may compare any column
    for rc in row_checks:
        exprs += [e for e in (rc.fails, rc.rows, rc.example, rc.key) if e is not None]
        if rc.view is None:
            exprs += list(rc.details.values())
        else:
            views.append(rc.view)
    for st in stats:
        sv = _view_of(st)
        if sv is None:
            exprs.append(st.expr)
        else:
            views.append(sv)
    names: set[str] = set()
    for e in exprs:
        try:
            names.update(e.meta.root_names())
        except Exception:  # noqa: BLE001 - an expression polars cannot introspect: read everything
            return list(schema)
    for v in views:
        names.update(v.cols)
        if v.where is not None:
            names.update(v.where.meta.root_names())
    names.update(shared_roots(exprs + [v.where for v in views if v.where is not None])[1])  # what shared columns read
    return [c for c in schema if c in names]


#: :func:`_needed_columns` of the plans used last, by the identity of their row checks and measures
#: and the schema's column names (the items are held, so their ids are not reused meanwhile): a
#: memoized plan (:func:`_plan_for`) serves a folder's shards, and walking its expressions cost
#: about 1 ms a shard (18 row checks, 7 measures)
_needed_memo: OrderedDict[tuple[Any, ...], tuple[list[RowCheck], list[Stat | Payload], list[str]]] = OrderedDict()


def _needed_for(row_checks: list[RowCheck], stats: list[Stat | Payload], schema: dict[str, pl.DataType]) -> list[str]:
    """:func:`_needed_columns`, memoized (:data:`_needed_memo`; a copy of the list is returned)."""
    key = (id(row_checks), tuple(id(m) for m in stats), tuple(schema))
    got = _needed_memo.get(key)
    if got is None or got[0] is not row_checks:
        got = (row_checks, list(stats), _needed_columns(row_checks, stats, schema))
        _needed_memo[key] = got
        while len(_needed_memo) > _PLANS_KEPT:
            _needed_memo.popitem(last=False)
    _needed_memo.move_to_end(key)
    return list(got[2])


def _read_all(lf: pl.LazyFrame, needed: list[str]) -> pl.LazyFrame:
    """A shard that fits in one batch: the columns the checks need, read once (the same read
    ``pl.read_parquet`` does, projected), so the fused query, the flat views and the second pass
    over failing rows all work in memory. Raises :class:`Unreadable` when the data cannot be decoded."""
    if not needed:
        return lf
    try:
        return lf.select(needed).collect().lazy()
    except ENGINE_ERRORS as exc:
        raise Unreadable(f"reading the data failed: {str(exc).splitlines()[0]}") from None


def _merged_details(rc: RowCheck) -> bool:
    """Whether every ``details`` key of ``rc`` declares how batches merge (see ``RowCheck.details_merge``)."""
    return bool(rc.details) and all(k in rc.details_merge for k in rc.details)


def _wanted_rows(rows: np.ndarray, rc: RowCheck, shown_before: int, max_ex: int, batched: bool = False) -> np.ndarray:
    """Of a check's failing ``rows`` (in order), those the second pass reads: every one for a check
    with ``details`` (aggregated over all its failing rows; on a multi-batch shard only when the
    details do not merge batch by batch), else the first ones still needed for its ``max_ex``
    examples (``shown_before``: failing rows of earlier batches). ``rows`` and the result: int64 arrays."""
    if rc.details and not (batched and _merged_details(rc)):
        return rows
    if rc.example is not None:
        return rows[:max(0, max_ex - shown_before)]
    return _NO_ROWS


#: the rows ``wanted`` of a batch starting at a shard row, ``__row`` first (None when reading fails)
_gather = gather_rows


#: why a failed check's details or example values could not be computed: check index -> {what: why},
#: ``what`` one of "details", "example values"; said in the finding's message (:func:`_unshown_note`)
Unshown = dict[int, dict[str, str]]


def _note(unshown: Unshown, i: int, what: str, exc: BaseException) -> None:
    """Record in ``unshown`` that ``what`` of check ``i`` raised ``exc`` (the first reason is kept).
    Re-raises ``exc`` when memory ran out (:func:`~datacheck.model.errors.ran_out_of_memory`): the
    machine, not the check, and :func:`audit_shard` makes it :class:`OutOfMemory`."""
    if ran_out_of_memory(exc):
        raise exc
    unshown.setdefault(i, {}).setdefault(what, f"{type(exc).__name__}: {_first_line(exc)}")


def _details_of(sub: pl.DataFrame, rc: RowCheck, i: int, unshown: Unshown) -> dict[str, Any]:
    """``rc.details`` evaluated over ``sub`` (its failing rows, with ``__row``); {} when they raise,
    with the reason noted in ``unshown`` under check index ``i``."""
    try:
        rows = with_shared_columns(sub.lazy(), [*rc.details.values()] + ([rc.view.row_ok()] if rc.view else []))
        frame = rows if rc.view is None else rc.view.frame(rows)
        got = frame.select([e.alias(k) for k, e in rc.details.items()]).collect()
        return {k: _first(got, k) for k in rc.details}
    except ENGINE_ERRORS as exc:
        _note(unshown, i, "details", exc)
        return {}


def _message(rc: RowCheck, count: int, n: int, details: dict[str, Any]) -> str:
    """The message of ``rc``'s finding: ``count`` of the shard's ``n`` rows fail (``details``
    evaluated); when every row fails, ``rc.message_all_rows``' text where it gives one."""
    if count == n and rc.message_all_rows is not None:
        whole = rc.message_all_rows(count, details)
        if whole is not None:
            return whole
    return rc.message(count, details)


def _unshown_note(rc: RowCheck, details: dict[str, Any], examples: dict[int, Any], ex_rows: list[int],
                  why: dict[str, str]) -> str:
    """The text a finding's message ends with when its details or example values are missing: which,
    and why (``why``: the reasons noted while they were computed; a row the second pass did not get
    back was not read again). "" when nothing is missing: details are missing when the check declares
    some and none came back; example values when the check has an example and a shown row has none."""
    missing = []
    if rc.details and not details:
        missing.append(("details", why.get("details", "its failing rows could not be read again")))
    if rc.example is not None and any(r not in examples for r in ex_rows):
        missing.append(("example values", why.get("example values", "its failing rows could not be read again")))
    if not missing:
        return ""
    if len(missing) == 2 and missing[0][1] == missing[1][1]:
        missing = [("details and example values", missing[0][1])]
    said = "; ".join(f"its {what} could not be computed ({reason})" for what, reason in missing)
    return f" [{said}; the count and rows are exact]"


def _rows_of(sub: pl.DataFrame, rows: np.ndarray) -> pl.DataFrame:
    """The rows of ``sub`` (with ``__row``, ascending, each once) whose ``__row`` is in ``rows`` (shard
    rows, any order), in ``sub``'s order: a slice of ``sub`` (no copy) when they are consecutive there,
    as every failing row is when all of them were read (3 example rows of 16 million int64 tokens: a
    384 MB copy), else a filter."""
    want = np.unique(rows)
    if want.size:
        have = sub.get_column("__row").to_numpy()
        pos = np.minimum(np.searchsorted(have, want), max(have.size - 1, 0))
        if have.size and int(pos[-1] - pos[0]) + 1 == want.size and bool((have[pos] == want).all()):
            return sub.slice(int(pos[0]), int(want.size))
    return sub.filter(pl.col("__row").is_in(_row_series(want).implode()))


def _shown_only(row_checks: list[RowCheck], late: list[int], results: dict[int, tuple[np.ndarray, Any]]) -> bool:
    """Whether the rows read again for the checks decided after the batches (``late``) serve only to show
    a column's value: each failing such check has no details and an example that is a column as read (a
    duplicate check's ``pl.col``). A row also gathered in the batches for another check is taken whole
    from there (the second pass keeps the first of a row's copies, and the batches' come first)."""
    for i in late:
        rc = row_checks[i]
        if not results[i][0].size:
            continue
        if rc.details or (rc.example is not None and not rc.example.meta.is_column()):
            return False
    return True


def _clipped_rows(read: Callable[[np.ndarray], pl.DataFrame | None], rows: np.ndarray,
                  held: np.ndarray) -> pl.DataFrame | None:
    """The shard rows ``rows`` (sorted) as ``read`` gives them (with ``__row``, in row order), each list
    column cut to what an example shows (:func:`_shown_prefix`), the rows not ``held`` (read again
    already) read one at a time: memory is one whole row, where reading them all at once held every one
    (3 example rows of 16 million int64 tokens: 384 MB, made resident again when shown). None when a
    read fails."""
    parts: list[pl.DataFrame] = []
    mine = rows[np.isin(rows, held)]
    for chunk in ([mine] if mine.size else []) + [rows[j:j + 1] for j in np.flatnonzero(~np.isin(rows, held))]:
        got = read(chunk)
        if got is None:
            return None
        parts.append(got.with_columns(_shown_prefix(got.get_column(c)) for c, t in got.schema.items()
                                      if isinstance(t, pl.List)))
        del got
        release_unused()
    return pl.concat(parts).sort("__row") if len(parts) > 1 else parts[0]


def _second_pass(sub: pl.DataFrame | None, failed: dict[int, np.ndarray], row_checks: list[RowCheck],
                 max_ex: int, done: frozenset[int] = frozenset(), unshown: Unshown | None = None
                 ) -> tuple[dict[int, dict[str, Any]], dict[int, dict[int, Any]]]:
    """Second pass, only when something failed: on ``sub`` (the failing rows the checks need, with
    ``__row``, in row order, gathered batch by batch), each failed check's ``details`` (aggregated
    over its failing rows; not for the checks in ``done``, whose details were merged batch by
    batch) and ``example`` values (its first ``max_ex`` rows) are evaluated. An expression that
    raises gives none of them, its reason noted in ``unshown``."""
    unshown = {} if unshown is None else unshown
    if sub is None or sub.height == 0:
        return {}, {}
    details: dict[int, dict[str, Any]] = {}
    examples: dict[int, dict[int, Any]] = {}
    for i, rows in failed.items():
        rc = row_checks[i]
        if rc.details and i not in done:
            part = sub if len(rows) == sub.height else _rows_of(sub, rows)
            details[i] = _details_of(part, rc, i, unshown)
        if rc.example is not None:
            part = _rows_of(sub, rows[:max_ex])
            try:
                if shared_roots([rc.example])[0]:  # it reads shared columns: computed over these rows
                    got = with_shared_columns(part.lazy(), [rc.example]).select(
                        pl.col("__row"), rc.example.alias("__e")).collect()
                else:
                    got = part.select(pl.col("__row"), rc.example.alias("__e"))
            except ENGINE_ERRORS as exc:
                _note(unshown, i, "example values", exc)
                continue
            examples[i] = dict(zip((int(r) for r in got["__row"].to_list()), _shown_prefix(got["__e"]).to_list()))
    return details, examples


def audit_shard(ds: DiscoveredShard, cfg: Config, content_hash: str, size: int, keep_rows: bool = False,
                cross_shard: bool = True) -> ShardResult:
    """Audit one shard. Never raises for bad data: an unreadable shard gets the registry's unreadable findings.
    Raises :class:`~datacheck.model.errors.OutOfMemory` when memory runs out while it is decoded or checked
    (a ``MemoryError``, also one a reader reported as an unreadable shard): the machine, not the data.

    With ``keep_rows``, ``ShardResult.failing_rows`` holds every failing row of every row check
    (for ``datacheck clean``); otherwise findings keep the first ``max_examples`` rows only.
    """
    try:
        try:
            # the reader, the text-column and null-role casts, the derivations the registered families read
            data: CheckInput = open_for_checks(ds, cfg, derive=needed_derivations())
        except Unreadable as exc:
            OutOfMemory.check(exc, ds.rel, size)
            return _unreadable(ds, content_hash, size, exc.reason)
        return _audit_data(data, cfg, ds.rel, ds.format, content_hash, size, keep_rows, cross_shard,
                           on_unreadable=lambda reason: _unreadable(ds, content_hash, size, reason))
    except MemoryError:
        raise OutOfMemory.decoding(ds.rel, size) from None


def _changed_reason(before: tuple[int, int, int, int], after: tuple[int, int, int, int]) -> str:
    what = (f"{before[0]} -> {after[0]} bytes" if before[0] != after[0]
            else "replaced by another file" if before[3] != after[3] else "rewritten, same size")
    return (f"the file changed while being read ({what}): its content hash and its rows may come from "
            "different versions, so nothing of it was checked and the result was not cached; audit it again "
            "once its writer has finished")


def audit_file(ds: DiscoveredShard, cfg: Config, *, keep_rows: bool = False, cross_shard: bool = True,
               lookup: Callable[[str], ShardResult | None] | None = None,
               known: tuple[tuple[Any, ...], str, int] | None = None) -> tuple[ShardResult, str]:
    """Hash and audit one shard file, making sure it did not change meanwhile (every verb that audits
    a file calls this: audit, inspect, clean).

    The file's state (:func:`datacheck.io.hashing.file_state`: size, mtime, ctime, inode) is taken
    before hashing and again after the audit; when it differs, a writer touched the file while it
    was read, so the hash covers one version and the rows another: the result is the registry's
    unreadable findings (``decode.unreadable``, "changed while being read"), with no rows.

    Args:
        ds: the discovered shard.
        cfg: the validated config.
        keep_rows: as :func:`audit_shard`.
        cross_shard: as :func:`audit_shard`.
        lookup: called with the content hash; a result it returns is used instead of auditing
            (the per-shard cache), provided the file did not change while it was hashed.
        known: (file state, content hash, size) the caller took a moment ago (it hashed the bytes
            already, to look the shard up in the cache): when the file's state is still that one,
            the bytes are not hashed again.

    Returns:
        (result, how): ``how`` is ``"audited"``, ``"cached"`` (from ``lookup``), ``"changed"`` or
        ``"unreadable"`` (the file cannot be read). Only an ``"audited"`` result may be cached.
    """
    try:
        before = file_state(ds.source)
        if known is not None and tuple(known[0]) == tuple(before):
            chash, size = known[1], known[2]
        else:
            chash, size = hash_shard(ds.source, ds.format)
    except OSError as exc:
        return _unreadable(ds, "", 0, f"cannot read file: {exc.strerror or exc}"), "unreadable"
    result = lookup(chash) if lookup is not None else None
    how = "cached" if result is not None else "audited"
    if result is None:
        result = audit_shard(ds, cfg, chash, size, keep_rows=keep_rows, cross_shard=cross_shard)
    try:
        after = file_state(ds.source)
    except OSError as exc:
        return _unreadable(ds, "", 0, f"cannot read file: {exc.strerror or exc} (it went away while being read)"), "changed"
    if after != before:
        return _unreadable(ds, "", after[0], _changed_reason(before, after)), "changed"
    return result, how


def audit_frame(df: pl.DataFrame | pl.LazyFrame, cfg: Config, name: str = "frame", keep_rows: bool = True,
                cross_shard: bool = False, read_as: str | None = None) -> ShardResult:
    """Audit an in-memory polars frame as one shard (no file: tests and library use).

    Args:
        df: the rows (0-based row index = position in the frame).
        cfg: the config (roles are resolved against the frame's schema as for a file).
        name: the shard name findings and skips carry.
        keep_rows: fill ``ShardResult.failing_rows`` with every failing row of every row check.
        cross_shard: compute the row-hash payload for the merge (off: one frame is one shard).
        read_as: the format of the shard the rows were read from (``megatron``, ...: the trace's
            rows of a step), which the checks see as :attr:`ShardContext.format`, as they do when
            that shard is audited; None: a frame of no format.

    Returns:
        The :class:`ShardResult` (``format`` "frame", no content hash). A frame the engine cannot
        evaluate gives the registry's unreadable findings, as a shard would.
    """
    def unreadable(reason: str) -> ShardResult:
        return ShardResult(path=name, format="frame", content_hash="", bytes=0, rows=None,
                           findings=unreadable_findings(name, "frame", reason))

    try:
        try:
            data = open_for_checks(df, cfg, derive=needed_derivations())  # the same casts and roles as a file
        except Unreadable as exc:
            OutOfMemory.check(exc, name, 0)
            return unreadable(exc.reason)
        return _audit_data(data, cfg, name, "frame", "", 0, keep_rows, cross_shard, on_unreadable=unreadable,
                           read_as=read_as)
    except MemoryError:
        raise OutOfMemory.decoding(name, 0) from None


_Run = tuple[int, dict[int, tuple[np.ndarray, dict[str, Any]]], dict[int, dict[int, Any]], dict[str, Any],
             dict[str, Any], list[Skipped], Unshown]


def _retyped_rows(data: CheckInput, cols: str | tuple[str, ...] | None) -> np.ndarray | None:
    """The sorted shard rows (int64) whose cell in one of ``cols`` (``RowCheck.not_retyped``) the reader
    read as null for a value it reported (``CheckInput.retyped``), or None when there are none."""
    names = (cols,) if isinstance(cols, str) else cols or ()
    held = [data.retyped[c] for c in names if c in data.retyped]
    return np.unique(np.concatenate(held)) if held else None


def _run_batches(data: CheckInput, row_checks: list[RowCheck], measures: list[Stat | Payload],
                 schema: dict[str, pl.DataType], max_ex: int, sampled: pl.DataFrame | None = None,
                 salt: str = "") -> _Run:
    """The shard's checks over its batches (:mod:`datacheck.formats.batches`: the opened shard's
    :class:`~datacheck.formats.base.ShardReader`, or slices of its frame), merged exactly:

    - row checks: each batch's failing rows offset by the batch's first row, concatenated (row order);
    - stats: each :class:`Stat`'s raw batch values combined by its ``merge``, then ``post`` once;
    - payloads: posted per batch, combined by the :class:`Payload`'s ``merge`` (concatenation);
    - ``from_payload`` checks: decided once on the merged payloads; ``key`` checks: candidates from
      the keys of every batch, verified by ``refine`` on the rows sharing a key (read again when the
      shard has several batches);
    - examples: the first ``max_ex`` failing rows of each check in row order; ``details``: evaluated
      once over every failing row of the check (those rows are kept, batch by batch, with only the
      columns the checks read);
    - a check (or stat) whose expression fails on any batch cannot run on the shard (one skipped
      entry, an error), as on a one-batch shard.

    A shard that fits in one batch is read once and checked exactly as before batching existed.
    ``sampled``: columns of every row the reader read already (the layout's sample, :class:`_Sampler`):
    the one read of a shard that fits in one batch decodes only the needed columns it lacks; the
    batches of a larger shard are read without them and take their rows from it (zero-copy slices).
    A payload's rows whose ``not_retyped`` cells the reader read as null for a reported value, and the
    rows it marks itself, are made to match no other row (``Payload.unmatched``, with ``salt``: the
    shard's content hash).
    Returns (rows, check results, example values, stat values, payload values, skipped, why details
    or example values of a failed check are missing: :data:`Unshown`).
    Raises :class:`Unreadable`.
    """
    needed = _needed_for(row_checks, measures, schema)
    in_query = [i for i, rc in enumerate(row_checks) if rc.from_payload is None]
    want = {c: schema[c] for c in needed}
    try:
        n_rows, per = batch_rows(data.lf, needed, data.stream) if needed else (0, None)
    except ENGINE_ERRORS as exc:
        raise Unreadable(f"reading the data failed: {_first_line(exc)}") from None
    except ValueError as exc:  # a bad $DATACHECK_BATCH_ROWS
        raise InternalError(str(exc)) from None
    # the opened shard's reader when it holds the needed columns, else slices of the opened frame
    reader = shard_reader(data.stream, data.lf, needed, n_rows)
    kept = [c for c in needed if c in sampled.columns] if sampled is not None and reader is data.stream \
        and sampled.height == n_rows else []
    if per is not None and len(kept) == len(needed):  # cannot be (the sampled columns fit in one batch)
        kept = []
    rest = [c for c in needed if c not in kept]
    single: pl.LazyFrame | None = None
    if per is None and n_rows > 0:  # the reader's own one read (parquet: pyarrow, half polars' CPU)
        if not rest:
            whole = sampled.select(needed)  # type: ignore[union-attr]
        else:
            whole = reader.read_all(rest, {c: want[c] for c in rest})
            if whole is not None and kept:
                whole = whole.hstack(sampled.select(kept).get_columns()).select(needed)  # type: ignore[union-attr]
        single = whole.lazy() if whole is not None else None  # None: polars' read below (it says why)
    if per is None and single is None:
        single = _read_all(data.lf, needed)
    ramp = forced_batch_rows() is None  # a forced batch size is kept exactly (tests cut shards with it)

    def frames() -> Iterator[pl.LazyFrame]:
        if single is not None:
            yield single
            return
        # each batch is let go (``del``) before the next is read: a loop variable would hold it while the
        # reader decodes the next one (two batches of rows over the target at once: 117 MB rows, +117 MB)
        if not kept:
            for df in reader.batches(needed, per or 1, want, ramp=ramp):
                yield df.lazy()
                del df
            return
        off = 0  # the sampled columns' rows of each batch of the others
        for df in reader.batches(rest, per or 1, {c: want[c] for c in rest}, ramp=ramp):
            h = df.height
            yield df.hstack(sampled.slice(off, h).select(kept).get_columns()).select(needed).lazy()  # type: ignore[union-attr]
            del df
            off += h

    n = 0
    rows_acc: dict[int, list[np.ndarray]] = {i: [] for i in in_query}
    keys: dict[int, list[pl.Series]] = {}
    stat_parts: dict[int, list[Any]] = {j: [] for j in range(len(measures))}
    broken_c: dict[int, str] = {}
    broken_s: dict[int, str] = {}
    subs: list[pl.DataFrame] = []
    detail_parts: dict[int, list[dict[str, Any]]] = {}
    unshown: Unshown = {}
    retyped = {i: got for i, rc in enumerate(row_checks) if (got := _retyped_rows(data, rc.not_retyped)) is not None}
    direct: frozenset[int] = frozenset()  # the probed checks that failed on the batch before
    for lf in frames():
        try:
            b = _run_batch(lf, row_checks, measures, in_query, direct)
            subs.extend(_batch_rows(lf, b, n, row_checks, rows_acc, detail_parts, max_ex, batched=single is None,
                                    unshown=unshown, retyped=retyped))
        finally:  # a pass shared by several checks (the batch's queries, its details) never outlives the batch
            clear_shared_passes()
        direct = frozenset(i for i, local in b.rows.items() if local.size and _probed(row_checks[i]))
        for i, why in b.broken_checks.items():
            broken_c.setdefault(i, why)
        for j, why in b.broken_stats.items():
            broken_s.setdefault(j, why)
        for i, k in b.keys.items():
            keys.setdefault(i, []).append(k)
        for j in range(len(measures)):
            if j in b.stats:
                stat_parts[j].append(b.stats[j])
            elif j in b.payload:
                stat_parts[j].append(b.payload[j])
        n += b.n
        del lf, b  # the batch and its query's results are not held while the next batch is read

    skipped: list[Skipped] = []
    for i, why in broken_c.items():
        rc = row_checks[i]
        skipped.append(Skipped(rc.check, f"could not run on this shard ({rc.column}): {why}", error=True))
    results: dict[int, tuple[np.ndarray, dict[str, Any]]] = {  # rows: int64 arrays, in row order
        i: (np.concatenate(parts) if len(parts) > 1 else parts[0] if parts else _NO_ROWS, {})
        for i, parts in rows_acc.items() if i not in broken_c and row_checks[i].key is None}
    stat_values: dict[str, Any] = {}
    payload: dict[str, Any] = {}
    for j, m in enumerate(measures):
        if j in broken_s:
            what = f"stats.{m.key}"
            skipped.append(Skipped(what, f"could not compute: {broken_s[j]}", error=True))
            continue
        parts = stat_parts[j]
        if isinstance(m, Payload):
            value = parts[0] if len(parts) == 1 else m.merge(parts)
            unread = [data.retyped[c] for c in m.not_retyped if c in data.retyped]
            if m.unmatched is not None:  # also with no unread cell: the payload may mark rows itself
                value = m.unmatched(value, np.unique(np.concatenate(unread)) if unread else _NO_ROWS, salt)
            payload[m.key] = value
        elif len(parts) == 1:
            stat_values[m.key] = m.post(parts[0])
        elif m.merge is None:
            skipped.append(Skipped(f"stats.{m.key}", "could not compute: this stat declares no merge "
                                   "across batches (Stat.merge) and the shard has several batches", error=True))
        else:
            stat_values[m.key] = m.post(m.merge(parts))

    held: list[pl.DataFrame] = []  # rows the reader read again (``__row`` and the needed columns)
    held_rows = _NO_ROWS  # their shard rows (sorted int64)

    def reread(wanted: np.ndarray) -> pl.DataFrame | None:
        """The rows ``wanted`` of the shard (with ``__row``, in row order), from memory or by the
        reader again; a row read again once (a duplicate candidate) is taken from memory when it is
        wanted again (its example), so a row group is decoded again at most once."""
        nonlocal held_rows
        if single is not None:
            return _gather(single, wanted)
        if not wanted.size:
            return reader.read_rows([], needed, want, per or 1)
        missing = np.setdiff1d(wanted, held_rows)
        if missing.size:
            got = reader.read_rows(missing.tolist(), needed, want, per or 1)
            if got is None:
                return None
            held.append(got)
            held_rows = np.union1d(held_rows, missing)
        mine = np.unique(wanted)
        if len(held) == 1 and held_rows.size == mine.size:  # every row held, in row order: no copy of them
            return held[0]
        frame = pl.concat(held) if len(held) > 1 else held[0]
        return frame.filter(pl.col("__row").is_in(_row_series(mine).implode())).sort("__row")

    late: list[int] = []
    earlier: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # duplicate checks: the row each copy repeats
    for i, parts in keys.items():  # key checks: candidates over the whole shard, verified exactly
        rc = row_checks[i]
        if i in broken_c or rc.refine is None:
            continue
        key = pl.concat(parts) if len(parts) > 1 else parts[0]
        rows = _NO_ROWS
        if _has_repeats(key):
            shared = _row_array(key.to_frame("k").with_row_index("r").filter(pl.col("k").is_duplicated())["r"])
            if i in retyped:  # a value the reader could not read is no candidate
                shared = shared[~np.isin(shared, retyped[i])]
            try:
                per_row = reader.size(needed)[1] if single is None else None
                verified: Any
                if per_row and shared.size * per_row > REREAD_BYTES:  # candidates of more than one read
                    verified = _refine_in_groups(
                        rc.refine, key, shared, lambda r: reader.read_rows(r.tolist(), needed, want, per or 1),
                        int(BATCH_TARGET_BYTES // per_row))
                else:
                    sub = reread(shared)
                    if sub is None:
                        raise Unreadable("reading the candidate rows again failed")
                    verified = rc.refine(sub)
                    del sub
                rows = _decided_rows(verified, earlier, i)
            except ENGINE_ERRORS as e:  # Unreadable included
                skipped.append(Skipped(rc.check, f"could not verify the candidates on this shard: "
                                       f"{e.reason if isinstance(e, Unreadable) else _first_line(e)}", error=True))
                continue
        results[i] = (rows, {})
        late.append(i)
    for i, rc in enumerate(row_checks):
        if rc.from_payload is None:
            continue
        try:
            decided = rc.from_payload(payload)
        except Exception as e:  # noqa: BLE001 - a missing payload makes the check unrunnable, not the audit
            skipped.append(Skipped(rc.check, f"could not run on this shard: {type(e).__name__}: {_first_line(e)}",
                                   error=True))
            continue
        results[i] = (_decided_rows(decided, earlier, i), {})
        late.append(i)
    late_parts = [_wanted_rows(results[i][0], row_checks[i], 0, max_ex) for i in late]
    wanted_late = np.unique(np.concatenate(late_parts)) if late_parts else _NO_ROWS
    if wanted_late.size:
        per_row = reader.size(needed)[1] if single is None else None
        if per_row and wanted_late.size * per_row > REREAD_BYTES and _shown_only(row_checks, late, results):
            sub = _clipped_rows(lambda r: reread(r) if np.isin(r, held_rows).all() else reader.read_rows(
                r.tolist(), needed, want, per or 1), wanted_late, held_rows)
        else:
            sub = reread(wanted_late)
        if sub is not None:
            subs.append(sub)
    failed = {i: rows for i, (rows, _) in results.items() if rows.size}
    sub_all = None
    if subs:
        sub_all = pl.concat(subs, how="vertical_relaxed") if len(subs) > 1 else subs[0]
        if len(subs) > 1:
            sub_all = sub_all.unique("__row", keep="first").sort("__row")
    merged: dict[int, dict[str, Any]] = {}
    for i, parts_d in detail_parts.items():
        rc = row_checks[i]
        if any(not d for d in parts_d):  # a batch's details could not be evaluated: none, as on one batch
            merged[i] = {}
            continue
        merged[i] = {k: rc.details_merge[k]([d[k] for d in parts_d]) for k in rc.details}
    fail_details, example_values = _second_pass(sub_all, failed, row_checks, max_ex, frozenset(merged), unshown)
    fail_details.update(merged)
    for i, pairs in earlier.items():  # the row each copy of a duplicate check repeats
        if i in results and results[i][0].size:
            fail_details.setdefault(i, {})["examples"] = _earlier_examples(results[i][0], pairs, max_ex)
    results = {i: (rows, fail_details.get(i, {})) for i, (rows, _) in results.items()}
    return n, results, example_values, stat_values, payload, skipped, unshown


def _batch_rows(lf: pl.LazyFrame, b: _Batch, n: int, row_checks: list[RowCheck], rows_acc: dict[int, list[np.ndarray]],
                detail_parts: dict[int, list[dict[str, Any]]], max_ex: int, batched: bool,
                unshown: Unshown | None = None, retyped: dict[int, np.ndarray] | None = None) -> list[pl.DataFrame]:
    """One batch's failing rows (``b``; the batch starts at shard row ``n``) added to ``rows_acc``;
    on a shard of several batches (``batched``) the details of its checks whose details merge batch
    by batch (:func:`_merged_details`) appended to ``detail_parts`` (``rows_acc``: check index -> the
    int64 arrays of shard rows of the batches so far) ({} where they raised: the
    reason noted in ``unshown``). A check's rows in ``retyped`` (check index -> sorted shard rows its
    ``RowCheck.not_retyped`` column's reader read as null for a value of another type) do not fail
    it. Returns the batch's rows the second pass reads (``__row`` and the batch's columns; [] for none).

    The rows are gathered once for every check of the batch, from the batch with the shared
    columns the details read (computed by the batch's query, still in memory): the details of a
    check then read those per-row values instead of computing the shared pass again over its rows
    (on benchmarks/bench_peers.py's shard, 65 gathers and 65 passes over a few hundred rows cost
    0.6 CPU s of 13 batches)."""
    unshown = {} if unshown is None else unshown
    wanted_parts: list[np.ndarray] = []
    merged: dict[int, np.ndarray] = {}
    for i, local in b.rows.items():
        if not local.size:
            continue
        rows = local + n
        if retyped and i in retyped:
            rows = rows[~np.isin(rows, retyped[i])]
            if not rows.size:
                continue
        rc = row_checks[i]
        wanted_parts.append(_wanted_rows(rows, rc, sum(a.size for a in rows_acc[i]), max_ex, batched=batched))
        rows_acc[i].append(rows)
        if batched and _merged_details(rc):  # details of this batch's failing rows, merged by the caller
            merged[i] = rows
    wanted = np.unique(np.concatenate(wanted_parts)) if wanted_parts else _NO_ROWS
    if not wanted.size and not merged:
        return []
    reads = [e for i in merged for e in row_checks[i].details.values()]
    reads += [v.row_ok() for i in merged if (v := row_checks[i].view) is not None]
    src = with_shared_columns(lf, reads)
    if src is not lf:  # whole chunks, as the batch's query had them: the shared passes it made serve again
        try:
            src = src.collect(engine=QUERY_ENGINE).lazy()
        except ENGINE_ERRORS as exc:  # the details compute what they can on their own rows (_details_of)
            if ran_out_of_memory(exc):
                raise
            src = lf
    columns = lf.collect_schema().names()
    every = np.unique(np.concatenate([wanted, *merged.values()]))
    part = _gather(src, every, n)
    for i, rows in merged.items():
        mine = part
        if part is not None and len(rows) < part.height:
            mine = part.filter(pl.col("__row").is_in(_row_series(rows).implode()))
        detail_parts.setdefault(i, []).append(_details_of(mine, row_checks[i], i, unshown) if mine is not None else {})
    if not wanted.size or part is None:
        return []
    if len(wanted) < part.height:
        part = part.filter(pl.col("__row").is_in(_row_series(wanted).implode()))
    return [part.select("__row", *columns)]


def _audit_data(data: CheckInput, cfg: Config, rel: str, fmt: str, content_hash: str, size: int, keep_rows: bool,
                cross_shard: bool, on_unreadable: Callable[[str], ShardResult], read_as: str | None = None) -> ShardResult:
    """Run the registry's plan for one opened shard: the fused query (batch by batch, merged),
    candidate refinement, the second pass for examples and details, then the after-query verdicts.
    The checks see ``read_as`` as the shard's format when given (a frame of rows read from a shard),
    else ``fmt``."""
    max_ex = cfg.report.max_examples
    schema, roles = dict(data.schema), data.roles
    sampler = _Sampler(data)
    layout = shard_layout(cfg.dataset.layout, cfg.dataset.schema_, schema, roles, sampler,
                          cfg.labels.ignore, spans=cfg.sft.response_template_ids is not None,
                          pad=cfg.tokens.pad_token_id, eos=cfg.tokens.eos_token_id)
    side = _padding_side(cfg, roles, schema, sampler)
    # the first rows sampled for the layout are let go before the shard is read (``held``, the columns
    # read whole, stays: the read takes them): at least one row, they were held through the whole read
    # (a row of 117 MB beside every batch of a shard of such rows)
    sampler.given.clear()
    plan, named = _plan_for(cfg, roles, schema, rel, cross_shard, data.unrendered_pairs, layout.name,
                            data.chat_template, read_as or fmt, side)
    row_checks, skipped = plan.row_checks, list(plan.skipped)
    measures: list[Stat | Payload] = [*plan.stats, *plan.payloads]
    try:
        run = _run_batches(data, row_checks, measures, schema, max_ex, sampled=sampler.held, salt=content_hash)
    except Unreadable as exc:
        OutOfMemory.check(exc, rel, size)
        return on_unreadable(exc.reason)
    n, results, example_values, stat_values, payload, more_skipped, unshown = run
    skipped += more_skipped
    findings: list[Finding] = list(data.decode_findings) + [named(f) for f in plan.findings]
    skipped = [named(x) for x in skipped]
    for i, (rows, details) in results.items():
        if not rows.size:
            continue
        rc = row_checks[i]
        ex_rows = rows[:max_ex].tolist()
        lines = data.lines_of(ex_rows)
        vals = example_values.get(i, {})
        examples = tuple(
            Example.of(r, vals[r], lines[k] if k < len(lines) else None) if r in vals
            else Example(row=r, value="", line=(lines[k] if k < len(lines) else None))
            for k, r in enumerate(ex_rows)
        )
        note = _unshown_note(rc, details, vals, ex_rows, unshown.get(i, {}))
        details = {k: v for k, v in details.items() if v is not None}
        findings.append(Finding(
            check=rc.check,
            severity=rc.severity or catalog.info(rc.check).severity,
            message=named(_message(rc, len(rows), n, details) + note),
            column=rc.column,
            count=len(rows),
            ratio=len(rows) / n if n else None,
            rows=tuple(ex_rows),
            lines=tuple(lines),
            examples=examples,
            details=_jsonable(details),
            rows_truncated=len(rows) > len(ex_rows),
        ))
    for verdict in plan.after:
        findings.extend(named(f) for f in verdict.decide(n))
    findings.sort(key=lambda f: (f.check, f.column or "", f.severity))
    failing_rows: dict[str, list[int]] = {}
    if keep_rows:
        for i, (rows, _) in results.items():
            if rows.size:
                rc = row_checks[i]
                key = str(RowsKey(rc.check, rc.column))
                failing_rows[key] = np.union1d(np.asarray(failing_rows.get(key, []), dtype=np.int64), rows).tolist()
    stat_values["rows"] = n
    return ShardResult(
        path=rel, format=fmt, content_hash=content_hash, bytes=size, rows=n,
        findings=findings, stats=_jsonable(stat_values), skipped=skipped, roles=roles.to_dict(),
        columns={c: str(sorted_fields(t)) for c, t in schema.items()}, failing_rows=failing_rows,
        payload={k: v for k, v in payload.items() if k not in {m.key for m in plan.payloads if m.shard_only}},
        layout=layout.to_dict(), not_applicable=list(plan.not_applicable),
    )


def _padding_side(cfg: Config, roles: Any, schema: dict[str, pl.DataType], sampler: _Sampler) -> tuple[str, bool]:
    """(where the shard's rows are padded, whether that was recognized): ``[tokens] padding_side``
    when set; else, for a shard with a list ``attention_mask``, the side its first
    :data:`SAMPLE_ROWS` rows are padded on (:func:`padding_side_of`: left only when some row is
    padded on the left only and none on the right only); ``"either"`` when none of those rows is
    padded (a shard sorted by length, or whose full-length rows come first: its left-padded rows
    were each ``mask.not_contiguous`` against an assumed right side), each row then judged on the
    side it is padded on; else ``"right"``. A left-padded shard (SmolLM2's tokenizer pads on the
    left) is then not ``mask.not_contiguous`` on every row, and ``sft.double_bos`` looks at its
    first real token."""
    if cfg.tokens.padding_side is not None:
        return cfg.tokens.padding_side, False
    mask = roles.attention_mask
    if mask is None or not is_list(schema.get(mask, pl.Null())):
        return "right", False
    sample = sampler.head([mask])
    if sample is None or mask not in sample.columns:
        return "right", False
    try:
        side, first0, last0 = padding_side_of(sample, mask)
    except pl.exceptions.PolarsError:  # a mask polars cannot compare with 0: the mask checks say why
        return "right", False
    if side is None and not first0 and not last0:
        return "either", False
    return (side, True) if side is not None else ("right", False)


class _Sampler:
    """The layout recognizer's sample: the first :data:`~datacheck.derive.layout.SAMPLE_ROWS` rows of
    the given columns, with the checked schema's dtypes; None when they cannot be read (the engine's
    own read then says why).

    When the opened shard's reader knows the decoded size of the sampled columns without reading
    rows (``ShardReader.size``: a parquet footer), they fit in one batch
    (:func:`~datacheck.formats.batches.batch_rows`) and the reader has a one-read path
    (``ShardReader.read_all``: parquet), they are read whole, once: the sample is their first rows,
    and the engine's read of the shard takes them from ``held`` instead of decoding them again
    (:func:`_run_batches`). A separate read of the first rows cost as much as a third of the
    shard's decode: polars' scan decodes a whole row group for a ``head``, 19 ms CPU of a 5,000 x
    256 token shard whose one read costs 40-50 ms. Otherwise (a streamed format, a shard of several
    batches, a failed read) the sample is the reader's own read of the first rows where it has a
    cheaper one (``ShardReader.first_rows``: parquet decodes only the first pages), else a
    pushed-down ``head`` of the opened frame (the streamed readers stop once they have the rows)."""

    def __init__(self, data: CheckInput):
        self.data = data
        #: the sampled columns read whole (every row, the checked schema's dtypes), or None
        self.held: pl.DataFrame | None = None
        #: the samples given so far (a later caller finds its columns in them before reading)
        self.given: list[pl.DataFrame] = []

    def _whole(self, cols: list[str]) -> pl.DataFrame | None:
        data = self.data
        reader = data.stream
        if reader is None or not cols or not reader.holds(cols) or reader.rescans:
            return None  # a streamed reader (rescans) has no one-read path: nothing to size for it
        rows, per_row = reader.size(cols)
        if rows is None or per_row is None:  # known only by reading rows (streamed formats): sampled apart
            return None
        try:
            n, per = batch_rows(data.lf, cols, reader)
        except ValueError:  # a bad $DATACHECK_BATCH_ROWS: the engine says so
            return None
        except ENGINE_ERRORS:  # an unreadable shard: the engine's own read says why
            return None
        if per is not None or n == 0:
            return None
        return reader.read_all(cols, {c: data.schema[c] for c in cols})

    def __call__(self, cols: list[str]) -> pl.DataFrame | None:
        whole = self._whole(cols)
        if whole is not None:
            self.held = whole
            got: pl.DataFrame | None = whole.head(SAMPLE_ROWS)
        else:
            got = self._first(cols)
        if got is not None:
            self.given.append(got)
        return got

    def head(self, cols: list[str]) -> pl.DataFrame | None:
        """The first rows of ``cols`` from a sample already given when one holds them all, else
        read as :meth:`__call__` reads a shard it does not hold whole (never a whole-column read,
        never ``held``)."""
        for got in self.given:
            if all(c in got.columns for c in cols):
                return got.select(cols)
        return self._first(cols)

    def _first(self, cols: list[str]) -> pl.DataFrame | None:
        data = self.data
        rows = self.rows(cols)
        if data.stream is not None and all(c in data.schema for c in cols):
            got = data.stream.first_rows(cols, rows, {c: data.schema[c] for c in cols})
            if got is not None:
                return got
        try:
            return data.lf.select(cols).head(rows).collect()
        except ENGINE_ERRORS:  # Unreadable included
            return None

    def rows(self, cols: list[str]) -> int:
        """Rows of the sample read apart: :data:`SAMPLE_ROWS`, fewer where the reader's size of a row of
        ``cols`` (``ShardReader.size``: a parquet footer with the first rows' decode, a JSONL or CSV first
        pass) says those hold more than :data:`LAYOUT_SAMPLE_BYTES`; at least 1. A reader that does not
        know it (an in-memory frame, already held) is read for :data:`SAMPLE_ROWS`."""
        reader = self.data.stream
        if reader is None or not cols:
            return SAMPLE_ROWS
        try:
            per_row = reader.size(cols)[1]
        except Exception:  # noqa: BLE001 - the read itself says what is wrong
            return SAMPLE_ROWS
        if not per_row or per_row * SAMPLE_ROWS <= LAYOUT_SAMPLE_BYTES:
            return SAMPLE_ROWS
        return max(1, int(LAYOUT_SAMPLE_BYTES // per_row))


#: The shard name a memoized plan is built with (:func:`_plan_for`): a text no path holds; every
#: text the plan's items give (finding messages and details, skip reasons, after-query verdicts, row
#: check messages) has it replaced by the shard's name.
SHARD_TOKEN: Final = "\x00datacheck-shard\x00"
#: Plans kept (the last ones used): a folder's shards usually share one schema, so one plan.
_PLANS_KEPT: Final = 8
_plans: OrderedDict[tuple[Any, ...], tuple[Config, ShardPlan]] = OrderedDict()


def _plan_for(cfg: Config, roles: Any, schema: dict[str, pl.DataType], rel: str, cross_shard: bool,
              unrendered: Any, layout: str | None, chat_template: Any,
              fmt: str | None = None, side: tuple[str, bool] = ("right", False)) -> tuple[ShardPlan, Callable[[Any], Any]]:
    """The registry's plan for a shard, built once per (config object, roles, schema, cross_shard,
    layout, chat template, format, registered checks) and reused for every shard of that kind: building it (every check function,
    its polars expressions) cost about 6.6 ms a shard (100 shards of 100 rows: 0.66 of 3.85 s).

    The memoized plan is built with :data:`SHARD_TOKEN` followed by the suffixes of the shard's file
    name (``.parquet``, ``.jsonl.gz``: part of the key, since a check may tell line formats by name)
    as the shard name; the returned ``named`` function puts the shard's name ``rel`` back into every
    text an item gives (checks use ``ShardContext.shard`` in messages, and its suffix). A shard with unrenderable preference
    pairs (data-dependent items) gets a plan of its own, built with its name."""
    if unrendered is not None:
        ctx = ShardContext(cfg=cfg, roles=roles, schema=schema, shard=rel, cross_shard=cross_shard,
                           unrendered_pairs=unrendered, layout=layout, chat_template=chat_template, format=fmt,
                           padding_side=side[0], padding_recognized=side[1])
        return shard_plan(ctx), _identity
    base = rel.rsplit("/", 1)[-1]
    suffixes = base[base.find("."):] if "." in base else ""  # ".jsonl.gz": a check may tell formats by name
    token = SHARD_TOKEN + suffixes
    key = (id(cfg), suffixes, fmt, repr(roles), tuple((c, repr(t)) for c, t in schema.items()), cross_shard, layout,
           repr(chat_template), side, tuple((cid, id(spec), id(spec.shard)) for cid, spec in CHECKS.items()))
    got = _plans.get(key)
    if got is None or got[0] is not cfg:  # the config object is held, so its id is not reused meanwhile
        ctx = ShardContext(cfg=cfg, roles=roles, schema=schema, shard=token, cross_shard=cross_shard, layout=layout,
                           chat_template=chat_template, format=fmt, padding_side=side[0], padding_recognized=side[1])
        got = (cfg, shard_plan(ctx))
        _plans[key] = got
        while len(_plans) > _PLANS_KEPT:
            _plans.popitem(last=False)
    _plans.move_to_end(key)
    return got[1], lambda v: _renamed(v, token, rel)


def _identity(v: Any) -> Any:
    return v


def _renamed(v: Any, token: str, rel: str) -> Any:
    """``v`` with ``token`` replaced by ``rel`` in every text: a str, the message and details of a
    :class:`Finding`, the reason of a :class:`Skipped`, lists, tuples and dicts."""
    if isinstance(v, str):
        return v.replace(token, rel) if SHARD_TOKEN in v else v
    if isinstance(v, Finding):
        return dataclasses.replace(v, message=_renamed(v.message, token, rel), details=_renamed(v.details, token, rel))
    if isinstance(v, Skipped):
        return dataclasses.replace(v, reason=_renamed(v.reason, token, rel))
    if isinstance(v, dict):
        return {_renamed(k, token, rel): _renamed(x, token, rel) for k, x in v.items()}
    if isinstance(v, list):
        return [_renamed(x, token, rel) for x in v]
    if isinstance(v, tuple):
        return tuple(_renamed(x, token, rel) for x in v)
    return v


#: the types :func:`_jsonable` returns as they are (exactly these types: subclasses take its checks)
_PLAIN: Final = frozenset({int, str, bool, type(None)})


def _jsonable(v: Any) -> Any:
    """Convert polars/numpy scalars and nested containers into JSON-serialisable values (a list's or
    dict's plain ints, strings, bools and None are taken as they are, without a call each: a
    shard's stats hold a few hundred of them)."""
    t = type(v)
    if t in _PLAIN:
        return v
    if t is list or t is tuple:
        return [x if type(x) in _PLAIN else _jsonable(x) for x in v]
    if t is dict:
        return {str(k): x if type(x) in _PLAIN else _jsonable(x) for k, x in v.items()}
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return str(v)
        return v
    if isinstance(v, (int, str, bool)) or v is None:
        return v
    if hasattr(v, "item"):
        return _jsonable(v.item())
    return str(v)
