"""Auditing one shard: every check of the shard fused into ONE lazy polars query over the scan,
then a second, small pass that gathers example values only for the checks that failed.

The engine knows no check ID: it runs whatever the registry (:mod:`datacheck.checks.registry`)
plans for the shard: row checks, stats, payloads, schema-level findings and after-query verdicts,
and asks the registry's unreadable hook when a shard cannot be read."""
from __future__ import annotations

from typing import Any, Callable

import polars as pl

from datacheck.checks import all as _families  # noqa: F401 - every family registers its checks
from datacheck.checks.registry import (
    FlatView,
    Payload,
    RowAgg,
    RowCheck,
    RowsKey,
    ShardContext,
    ShardPlan,
    Stat,
    shard_plan,
    unreadable_findings,
)
from datacheck.io.discover import DiscoveredShard
from datacheck.io.hashing import file_state, hash_shard
from datacheck.io.read import CheckInput, open_for_checks
from datacheck.io.readers import Unreadable
from datacheck.model import catalog
from datacheck.model.config import Config
from datacheck.model.errors import ENGINE_ERRORS, InternalError
from datacheck.model.findings import Example, Finding, Skipped
from datacheck.model.results import ShardResult

__all__ = ["ShardResult", "audit_shard", "audit_file", "audit_frame"]






def _unreadable(ds: DiscoveredShard, chash: str, size: int, reason: str) -> ShardResult:
    return ShardResult(path=ds.rel, format=ds.format, content_hash=chash, bytes=size, rows=None,
                       findings=unreadable_findings(ds.rel, ds.format, reason))


def _first_line(exc: BaseException) -> str:
    """The first line of an exception's message (polars puts its plan below it)."""
    lines = str(exc).splitlines()
    return lines[0] if lines else ""


def _row_exprs(i: int, rc: RowCheck) -> list[pl.Expr]:
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


def _queries(lf: pl.LazyFrame, row_checks: list[RowCheck], stats: list[Stat | Payload],
             checks: list[int], stat_idx: list[int], with_len: bool = True) -> list[pl.LazyFrame]:
    """The shard's queries: one select over the rows, plus one per flat view. They all derive from
    the same scan, and are collected together so that polars reads the data once."""
    main: list[pl.Expr] = [pl.len().alias("__n")] if with_len else []
    views: dict[str, tuple[FlatView, list[pl.Expr]]] = {}
    per_row: dict[str, tuple[dict[str, RowAgg], list[pl.Expr]]] = {}
    for i in checks:
        rc = row_checks[i]
        if rc.per_row and rc.view is not None:
            views.setdefault(rc.view.key, (rc.view, []))
            aggs, exprs = per_row.setdefault(rc.view.key, ({}, []))
            for a in rc.per_row:
                _add_agg(aggs, a, rc.check)
            exprs.extend(_row_exprs(i, rc))
            continue
        target = main if rc.view is None else views.setdefault(rc.view.key, (rc.view, []))[1]
        target.extend(_row_exprs(i, rc))
    for j in stat_idx:
        st = stats[j]
        sv = _view_of(st)
        target = main if sv is None else views.setdefault(sv.key, (sv, []))[1]
        target.append(st.expr.alias(f"__s{j}"))
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


def _collect(queries: list[pl.LazyFrame]) -> pl.DataFrame:
    frames = pl.collect_all(queries) if len(queries) > 1 else [q.collect() for q in queries]
    return pl.concat(frames, how="horizontal") if len(frames) > 1 else frames[0]


def _first(df: pl.DataFrame, name: str) -> Any:
    v = df.get_column(name)[0]
    return v.to_list() if isinstance(v, pl.Series) else v


def _run_fused(lf: pl.LazyFrame, row_checks: list[RowCheck], measures: list[Stat | Payload]
               ) -> tuple[int, dict[int, tuple[list[int], dict[str, Any]]], dict[str, Any], dict[str, Any], list[Skipped]]:
    """The one fused query (a select over the rows, plus the flat views, collected together over one
    scan) computing every row check, stat and payload. If it fails, find out whether reading or one
    check is at fault. Returns (rows, check results, stat values, payload values, skipped)."""
    stats = measures
    skipped: list[Skipped] = []
    post_checks = [i for i, rc in enumerate(row_checks) if rc.from_payload is not None]
    in_query = [i for i, rc in enumerate(row_checks) if rc.from_payload is None]
    try:
        df = _collect(_queries(lf, row_checks, stats, in_query, list(range(len(stats)))))
        ok_checks = in_query
        ok_stats = list(range(len(stats)))
    except ENGINE_ERRORS as exc:  # isolate: the read itself, or one expression
        try:
            lf.select(pl.all().is_null().sum()).collect()
        except ENGINE_ERRORS as read_exc:
            raise Unreadable(f"reading the data failed: {str(read_exc).splitlines()[0]}") from None
        df_parts = [lf.select(pl.len().alias("__n")).collect()]
        ok_checks, ok_stats = [], []
        for i in in_query:
            rc = row_checks[i]
            try:
                df_parts.append(_collect(_queries(lf, row_checks, stats, [i], [], with_len=False)))
                ok_checks.append(i)
            except ENGINE_ERRORS as e:
                skipped.append(Skipped(rc.check, f"could not run on this shard ({rc.column}): {_first_line(e)}",
                                       error=True))
        for j, s in enumerate(stats):
            try:
                df_parts.append(_collect(_queries(lf, row_checks, stats, [], [j], with_len=False)))
                ok_stats.append(j)
            except ENGINE_ERRORS as e:
                skipped.append(Skipped(f"stats.{s.key}", f"could not compute: {_first_line(e)}", error=True))
        df = pl.concat(df_parts, how="horizontal")
        del exc
    n = int(df["__n"][0])
    results: dict[int, tuple[list[int], dict[str, Any]]] = {}
    for i in ok_checks:
        results[i] = (_first(df, f"__r{i}") or [], {})
    # payloads stay polars objects (e.g. a Series of row hashes), stats become Python values
    stat_values = {stats[j].key: stats[j].post(_first(df, f"__s{j}")) for j in ok_stats if isinstance(stats[j], Stat)}
    payload = {stats[j].key: stats[j].post(df.get_column(f"__s{j}")[0]) for j in ok_stats
               if isinstance(stats[j], Payload)}
    for i in post_checks:
        rc = row_checks[i]
        try:
            rows = rc.from_payload(payload)  # type: ignore[misc]
        except Exception as e:  # noqa: BLE001 - a missing payload makes the check unrunnable, not the audit
            skipped.append(Skipped(rc.check, f"could not run on this shard: {type(e).__name__}: {_first_line(e)}",
                                   error=True))
            continue
        results[i] = (sorted(int(r) for r in rows), {})
    return n, results, stat_values, payload, skipped


def _needed_columns(row_checks: list[RowCheck], stats: list[Stat | Payload], schema: dict[str, pl.DataType]) -> list[str]:
    """The columns any check, stat, example or detail of this shard reads (polars' own root names)."""
    exprs: list[pl.Expr] = []
    views: list[FlatView] = []
    if any(rc.refine is not None for rc in row_checks):
        return list(schema)  # a refine step may compare any column
    for rc in row_checks:
        exprs += [e for e in (rc.fails, rc.rows, rc.example) if e is not None]
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
    return [c for c in schema if c in names]


def _materialize(lf: pl.LazyFrame, row_checks: list[RowCheck], stats: list[Stat | Payload],
                 schema: dict[str, pl.DataType]) -> pl.LazyFrame:
    """Read the columns the checks need once (the same read ``pl.read_parquet`` does, projected),
    so the fused query, the flat views and the second pass over failing rows all work in memory
    and no shard is ever read twice. Raises :class:`Unreadable` when the data cannot be decoded."""
    needed = _needed_columns(row_checks, stats, schema)
    if not needed:
        return lf
    try:
        return lf.select(needed).collect().lazy()
    except ENGINE_ERRORS as exc:
        raise Unreadable(f"reading the data failed: {str(exc).splitlines()[0]}") from None


def _second_pass(lf: pl.LazyFrame, failed: dict[int, list[int]], row_checks: list[RowCheck],
                 max_ex: int) -> tuple[dict[int, dict[str, Any]], dict[int, dict[int, Any]]]:
    """Second pass, only when something failed: one filtered read of the failing rows, then each
    failed check's ``details`` (aggregated over its failing rows) and ``example`` values (its first
    ``max_ex`` rows) are evaluated on that small frame."""
    need: set[int] = set()
    for i, rows in failed.items():
        rc = row_checks[i]
        if rc.details:
            need.update(rows)
        elif rc.example is not None:
            need.update(rows[:max_ex])
    if not need:
        return {}, {}
    wanted = pl.Series(sorted(need), dtype=pl.UInt32)
    try:
        sub = lf.with_row_index("__row").filter(pl.col("__row").is_in(wanted.implode())).collect()
    except ENGINE_ERRORS:
        return {}, {}
    details: dict[int, dict[str, Any]] = {}
    examples: dict[int, dict[int, Any]] = {}
    for i, rows in failed.items():
        rc = row_checks[i]
        if rc.details:
            part = sub if len(rows) == sub.height else sub.filter(
                pl.col("__row").is_in(pl.Series(rows, dtype=pl.UInt32).implode()))
            try:
                frame = part.lazy() if rc.view is None else rc.view.frame(part.lazy())
                got = frame.select([e.alias(k) for k, e in rc.details.items()]).collect()
                details[i] = {k: _first(got, k) for k in rc.details}
            except ENGINE_ERRORS:
                details[i] = {}
        if rc.example is not None:
            first = rows[:max_ex]
            part = sub.filter(pl.col("__row").is_in(pl.Series(first, dtype=pl.UInt32).implode()))
            try:
                got = part.select(pl.col("__row"), rc.example.alias("__e"))
            except ENGINE_ERRORS:
                continue
            examples[i] = dict(zip((int(r) for r in got["__row"].to_list()), got["__e"].to_list()))
    return details, examples


def audit_shard(ds: DiscoveredShard, cfg: Config, content_hash: str, size: int, keep_rows: bool = False,
                cross_shard: bool = True) -> ShardResult:
    """Audit one shard. Never raises for bad data: an unreadable shard gets the registry's unreadable findings.

    With ``keep_rows``, ``ShardResult.failing_rows`` holds every failing row of every row check
    (for ``datacheck clean``); otherwise findings keep the first ``max_examples`` rows only.
    """
    try:
        data: CheckInput = open_for_checks(ds, cfg)  # the reader, the text-column and null-role casts
    except Unreadable as exc:
        return _unreadable(ds, content_hash, size, exc.reason)
    return _audit_data(data, cfg, ds.rel, ds.format, content_hash, size, keep_rows, cross_shard,
                       on_unreadable=lambda reason: _unreadable(ds, content_hash, size, reason))


def _changed_reason(before: tuple[int, int, int, int], after: tuple[int, int, int, int]) -> str:
    what = (f"{before[0]} -> {after[0]} bytes" if before[0] != after[0]
            else "replaced by another file" if before[3] != after[3] else "rewritten, same size")
    return (f"the file changed while being read ({what}): its content hash and its rows may come from "
            "different versions, so nothing of it was checked and the result was not cached; audit it again "
            "once its writer has finished")


def audit_file(ds: DiscoveredShard, cfg: Config, *, keep_rows: bool = False, cross_shard: bool = True,
               lookup: Callable[[str], ShardResult | None] | None = None) -> tuple[ShardResult, str]:
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

    Returns:
        (result, how): ``how`` is ``"audited"``, ``"cached"`` (from ``lookup``), ``"changed"`` or
        ``"unreadable"`` (the file cannot be read). Only an ``"audited"`` result may be cached.
    """
    try:
        before = file_state(ds.source)
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
                cross_shard: bool = False) -> ShardResult:
    """Audit an in-memory polars frame as one shard (no file: tests and library use).

    Args:
        df: the rows (0-based row index = position in the frame).
        cfg: the config (roles are resolved against the frame's schema as for a file).
        name: the shard name findings and skips carry.
        keep_rows: fill ``ShardResult.failing_rows`` with every failing row of every row check.
        cross_shard: compute the row-hash payload for the merge (off: one frame is one shard).

    Returns:
        The :class:`ShardResult` (``format`` "frame", no content hash). A frame the engine cannot
        evaluate gives the registry's unreadable findings, as a shard would.
    """
    def unreadable(reason: str) -> ShardResult:
        return ShardResult(path=name, format="frame", content_hash="", bytes=0, rows=None,
                           findings=unreadable_findings(name, "frame", reason))

    try:
        data = open_for_checks(df, cfg)  # the same casts and roles as a file
    except Unreadable as exc:
        return unreadable(exc.reason)
    return _audit_data(data, cfg, name, "frame", "", 0, keep_rows, cross_shard, on_unreadable=unreadable)


def _audit_data(data: CheckInput, cfg: Config, rel: str, fmt: str, content_hash: str, size: int, keep_rows: bool,
                cross_shard: bool, on_unreadable: Callable[[str], ShardResult]) -> ShardResult:
    """Run the registry's plan for one opened shard: the fused query, candidate refinement, the
    second pass for examples and details, then the after-query verdicts."""
    max_ex = cfg.report.max_examples
    schema, roles = dict(data.schema), data.roles
    ctx = ShardContext(cfg=cfg, roles=roles, schema=schema, shard=rel, cross_shard=cross_shard)
    plan: ShardPlan = shard_plan(ctx)
    row_checks, skipped = plan.row_checks, list(plan.skipped)
    measures: list[Stat | Payload] = [*plan.stats, *plan.payloads]
    try:
        data.lf = _materialize(data.lf, row_checks, measures, schema)
        n, results, stat_values, payload, more_skipped = _run_fused(data.lf, row_checks, measures)
    except Unreadable as exc:
        return on_unreadable(exc.reason)
    skipped += more_skipped
    # refine candidates (exact verification of hash-based candidates)
    for i, (rows, details) in list(results.items()):
        rc = row_checks[i]
        if rows and rc.refine is not None:
            try:
                results[i] = (rc.refine(data.lf, rows), details)
            except ENGINE_ERRORS as e:
                del results[i]
                skipped.append(Skipped(rc.check, f"could not verify the candidates on this shard: {_first_line(e)}",
                                       error=True))
    failed = {i: rows for i, (rows, _) in results.items() if rows}
    fail_details, example_values = _second_pass(data.lf, failed, row_checks, max_ex)
    results = {i: (rows, fail_details.get(i, {})) for i, (rows, _) in results.items()}
    findings: list[Finding] = list(data.decode_findings) + plan.findings
    for i, (rows, details) in results.items():
        if not rows:
            continue
        rc = row_checks[i]
        ex_rows = rows[:max_ex]
        lines = data.lines_of(ex_rows)
        vals = example_values.get(i, {})
        examples = tuple(
            Example.of(r, vals[r], lines[k] if k < len(lines) else None) if r in vals
            else Example(row=r, value="", line=(lines[k] if k < len(lines) else None))
            for k, r in enumerate(ex_rows)
        )
        details = {k: v for k, v in details.items() if v is not None}
        findings.append(Finding(
            check=rc.check,
            severity=rc.severity or catalog.info(rc.check).severity,
            message=rc.message(len(rows), details),
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
        findings.extend(verdict.decide(n))
    findings.sort(key=lambda f: (f.check, f.column or "", f.severity))
    failing_rows: dict[str, list[int]] = {}
    if keep_rows:
        for i, (rows, _) in results.items():
            if rows:
                rc = row_checks[i]
                key = str(RowsKey(rc.check, rc.column))
                failing_rows[key] = sorted(set(failing_rows.get(key, [])) | set(int(r) for r in rows))
    stat_values["rows"] = n
    return ShardResult(
        path=rel, format=fmt, content_hash=content_hash, bytes=size, rows=n,
        findings=findings, stats=_jsonable(stat_values), skipped=skipped, roles=roles.to_dict(),
        columns={c: str(t) for c, t in schema.items()}, failing_rows=failing_rows, payload=payload,
    )


def _jsonable(v: Any) -> Any:
    """Convert polars/numpy scalars and nested containers into JSON-serialisable values."""
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
