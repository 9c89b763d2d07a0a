"""Auditing one shard: every check of the shard fused into ONE lazy polars query over the scan,
then a second, small pass that gathers example values only for the checks that failed."""
from __future__ import annotations

from typing import Any

import polars as pl

from datacheck.model import catalog
from datacheck.checks.registry import SHARD_CHECKS, FlatView, Payload, RowCheck, ShardContext, Stat, load_families
from datacheck.model.config import Config
from datacheck.model.errors import ENGINE_ERRORS, ReportVersionError, UsageError
from datacheck.model.findings import Example, Finding, Skipped, show_value
from datacheck.model.results import ShardResult
from datacheck.io.discover import DiscoveredShard
from datacheck.io.readers import ShardData, Unreadable, open_shard
from datacheck.model.roles import Roles, null_role_casts, resolve_roles, text_column_names

__all__ = ["ShardResult", "audit_shard"]






def _unreadable(ds: DiscoveredShard, chash: str, size: int, reason: str) -> ShardResult:
    f = Finding(check="decode.unreadable", severity="error",
                message=f"{ds.rel}: {reason}. The other shards were still audited.",
                details={"reason": reason, "format": ds.format})
    return ShardResult(path=ds.rel, format=ds.format, content_hash=chash, bytes=size, rows=None, findings=[f])


def _missing_column_findings(roles: Roles, shard: str) -> list[Finding]:
    out = []
    for role, col in roles.missing:
        out.append(Finding(
            check="schema.missing_column", severity="error", column=col,
            message=(f"column {col!r} (role {role} in [columns]) is absent from {shard}; "
                     f"fix [columns] {role} or the data. The checks of this role did not run on this shard."),
            details={"role": role},
        ))
    return out


def _collect_items(ctx: ShardContext) -> tuple[list[RowCheck], list[Stat], list[Finding], list[Skipped]]:
    """Every family's items for this shard. Payloads travel as Stats with a ``payload:`` key prefix."""
    load_families()
    rows, stats, findings, skipped = [], [], [], []
    for family, fn in SHARD_CHECKS:
        try:
            items = list(fn(ctx))
        except (UsageError, ReportVersionError):  # bad input the check found: the user's error (exit 2)
            raise
        except Exception as exc:  # noqa: BLE001 - a raising check function is a check error, not a crash
            skipped.append(Skipped(family, f"check function {getattr(fn, '__name__', fn)!r} raised "
                                           f"{type(exc).__name__}: {_first_line(exc)}", error=True))
            continue
        for item in items:
            if isinstance(item, RowCheck):
                rows.append(item)
            elif isinstance(item, Stat):
                stats.append(item)
            elif isinstance(item, Payload):
                stats.append(Stat(key="payload:" + item.key, expr=item.expr, post=item.post))
            elif isinstance(item, Finding):
                findings.append(item)
            elif isinstance(item, Skipped):
                skipped.append(item)
    return rows, stats, findings, skipped


def _first_line(exc: BaseException) -> str:
    """The first line of an exception's message (polars puts its plan below it)."""
    lines = str(exc).splitlines()
    return lines[0] if lines else ""


def _row_exprs(i: int, rc: RowCheck) -> list[pl.Expr]:
    if rc.view is not None:  # evaluated in the exploded frame: a row fails when any position does
        rows = pl.col("__row").filter(rc.fails.fill_null(False)).unique(maintain_order=True)
    elif rc.rows is not None:
        rows = rc.rows
    else:
        rows = pl.int_range(pl.len(), dtype=pl.UInt32).filter(rc.fails.fill_null(False))
    return [rows.implode().alias(f"__r{i}")]


def _queries(lf: pl.LazyFrame, row_checks: list[RowCheck], stats: list[Stat],
             checks: list[int], stat_idx: list[int], with_len: bool = True) -> list[pl.LazyFrame]:
    """The shard's queries: one select over the rows, plus one per flat view. They all derive from
    the same scan, and are collected together so that polars reads the data once."""
    main: list[pl.Expr] = [pl.len().alias("__n")] if with_len else []
    views: dict[str, tuple[FlatView, list[pl.Expr]]] = {}
    for i in checks:
        rc = row_checks[i]
        target = main if rc.view is None else views.setdefault(rc.view.key, (rc.view, []))[1]
        target.extend(_row_exprs(i, rc))
    for j in stat_idx:
        st = stats[j]
        target = main if st.view is None else views.setdefault(st.view.key, (st.view, []))[1]
        target.append(st.expr.alias(f"__s{j}"))
    out = [lf.select(main)] if main else []
    out += [view.frame(lf).select(exprs) for view, exprs in views.values()]
    return out


def _collect(queries: list[pl.LazyFrame]) -> pl.DataFrame:
    frames = pl.collect_all(queries) if len(queries) > 1 else [q.collect() for q in queries]
    return pl.concat(frames, how="horizontal") if len(frames) > 1 else frames[0]


def _first(df: pl.DataFrame, name: str) -> Any:
    v = df.get_column(name)[0]
    return v.to_list() if isinstance(v, pl.Series) else v


def _run_fused(lf: pl.LazyFrame, row_checks: list[RowCheck], stats: list[Stat]) -> tuple[int, dict[int, tuple[list[int], dict]], dict[str, Any], list[Skipped]]:
    """The one fused query (a select over the rows, plus the flat views, collected together over one
    scan). If it fails, find out whether reading or one check is at fault."""
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
    results: dict[int, tuple[list[int], dict]] = {}
    for i in ok_checks:
        results[i] = (_first(df, f"__r{i}") or [], {})
    # payloads stay polars objects (e.g. a Series of row hashes), stats become Python values
    stat_values = {stats[j].key: stats[j].post(df.get_column(f"__s{j}")[0] if stats[j].key.startswith("payload:")
                                               else _first(df, f"__s{j}")) for j in ok_stats}
    payload = {k[len("payload:"):]: v for k, v in stat_values.items() if k.startswith("payload:")}
    for i in post_checks:
        rc = row_checks[i]
        try:
            rows = rc.from_payload(payload)  # type: ignore[misc]
        except Exception as e:  # noqa: BLE001 - a missing payload makes the check unrunnable, not the audit
            skipped.append(Skipped(rc.check, f"could not run on this shard: {type(e).__name__}: {_first_line(e)}",
                                   error=True))
            continue
        results[i] = (sorted(int(r) for r in rows), {})
    return n, results, stat_values, skipped


def _needed_columns(row_checks: list[RowCheck], stats: list[Stat], schema: dict[str, pl.DataType]) -> list[str]:
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
        if st.view is None:
            exprs.append(st.expr)
        else:
            views.append(st.view)
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


def _materialize(lf: pl.LazyFrame, row_checks: list[RowCheck], stats: list[Stat],
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
    """Audit one shard. Never raises for bad data: an unreadable shard is a ``decode.unreadable`` finding.

    With ``keep_rows``, ``ShardResult.failing_rows`` holds every failing row of every row check
    (for ``datacheck clean``); otherwise findings keep the first ``max_examples`` rows only.
    """
    max_ex = cfg.report.max_examples
    try:
        data: ShardData = open_shard(ds.path, ds.format, cfg.dataset, max_ex,
                                     string_columns=text_column_names(cfg.columns))
        schema = dict(data.lf.collect_schema())
    except Unreadable as exc:
        return _unreadable(ds, content_hash, size, exc.reason)
    roles = resolve_roles(cfg.columns, schema)
    casts = null_role_casts(roles, schema)  # all-null role columns (dtype Null) get the role's dtype
    if casts:
        data.lf = data.lf.with_columns([pl.col(c).cast(t) for c, t in casts.items()])
        schema.update(casts)
    ctx = ShardContext(cfg=cfg, roles=roles, schema=schema, shard=ds.rel, cross_shard=cross_shard)
    row_checks, stats, shard_findings, skipped = _collect_items(ctx)
    try:
        data.lf = _materialize(data.lf, row_checks, stats, schema)
        n, results, stat_values, more_skipped = _run_fused(data.lf, row_checks, stats)
    except Unreadable as exc:
        return _unreadable(ds, content_hash, size, exc.reason)
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
    findings: list[Finding] = list(data.decode_findings) + _missing_column_findings(roles, ds.rel) + shard_findings
    for i, (rows, details) in results.items():
        if not rows:
            continue
        rc = row_checks[i]
        ex_rows = rows[:max_ex]
        lines = data.lines_of(ex_rows)
        vals = example_values.get(i, {})
        examples = tuple(
            Example(row=r, value=show_value(vals[r]) if r in vals else "", line=(lines[k] if k < len(lines) else None))
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
        ))
    if n == 0:
        findings.append(Finding(check="index.empty_shard", severity="warn",
                                message=f"{ds.rel} is readable but holds 0 rows"))
    findings.sort(key=lambda f: (f.check, f.column or "", f.severity))
    failing_rows: dict[str, list[int]] = {}
    if keep_rows:
        for i, (rows, _) in results.items():
            if rows:
                rc = row_checks[i]
                key = rc.check if rc.column is None else f"{rc.check}:{rc.column}"
                failing_rows[key] = sorted(set(failing_rows.get(key, [])) | set(int(r) for r in rows))
    payload = {k[len("payload:"):]: stat_values.pop(k) for k in list(stat_values) if k.startswith("payload:")}
    stat_values["rows"] = n
    return ShardResult(
        path=ds.rel, format=ds.format, content_hash=content_hash, bytes=size, rows=n,
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
