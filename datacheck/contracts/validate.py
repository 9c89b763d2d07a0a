"""Holding a shard to a :class:`~datacheck.contracts.model.Contract`.

Two steps, as measured in ``benchmarks/bench_schema.py``:

1. **Structure** (no data read): column presence (``schema.missing_column``), dtypes
   (``schema.dtype``: Pandera's own dtype equivalence, ``Column.dtype.check``, plus the contract's
   dtype families), ``strict`` (extra columns) and ``require_any`` groups. Decided from the shard's
   polars schema.
2. **Data**: nullability (``schema.nullable``), every Pandera check of the contract and the list
   rules (``schema.check``) become :class:`~datacheck.checks.registry.RowCheck` expressions fused by the
   runner into the shard's ONE lazy query. A Pandera polars check is a function
   ``check_fn(PolarsData) -> LazyFrame`` that selects one boolean expression; the expression is
   taken from it here (:func:`check_expr`) so Pandera defines what a check means and the fused
   query runs it. A check that does more than select expressions runs as a Python UDF over the
   same query (correct, slower); an element-wise check through ``map_elements``.

NaN and inf: Pandera counts NaN as null and lets inf pass its range checks only sometimes. Here
``schema.nullable`` counts real nulls only, and non-finite float values never fail a
``schema.check``: they are ``finite.nan`` / ``finite.inf`` findings (reported once, by that family).

:func:`validate_with_pandera` runs the whole contract through Pandera itself
(``SCHEMA_AND_DATA`` depth, ``lazy=True``) and turns its failure cases into the same findings; the
benchmark compares the two and the tests check that they agree.
"""
from __future__ import annotations

import re
from dataclasses import replace
from functools import partial
from typing import Any, Iterable, Union

import polars as pl

from datacheck.checks._expr import any_element, first_bad
from datacheck.checks.registry import RowCheck
from datacheck.contracts.model import ColumnRule, Contract, dtype_kind
from datacheck.model.findings import Finding, Skipped
from datacheck.model.roles import Roles, inner_dtype, is_list

__all__ = ["structure_findings", "data_items", "check_expr", "check_name", "resolve_columns",
           "validate_with_pandera"]


def _is_regex(contract: Contract, key: str) -> bool:
    col = contract.schema.columns.get(key)
    if col is not None:
        return bool(col.regex)
    return key.startswith("^") or key.endswith("$")


def resolve_columns(contract: Contract, key: str, columns: Iterable[str]) -> list[str]:
    """The shard columns that schema key ``key`` names: itself, or every match of its regex
    (``re.search``, so write ``^...$`` for a whole-name match, as Pandera's docs do)."""
    cols = list(columns)
    if not _is_regex(contract, key):
        return [key] if key in cols else []
    rx = re.compile(key)
    return [c for c in cols if rx.search(c)]


def check_name(check: Any) -> str:
    """A Pandera check's name as users wrote it (``isin``, ``in_range``, or the custom name)."""
    return str(getattr(check, "name", None) or getattr(getattr(check, "_check_fn", None), "__name__", "check"))


class _Captured:
    def __init__(self, exprs: list[pl.Expr]):
        self.exprs = exprs


class _Capture:
    """Stands in for the LazyFrame a Pandera polars check selects from; records the expressions."""

    def select(self, *exprs: Any, **named: pl.Expr) -> _Captured:
        flat: list[pl.Expr] = []
        for e in exprs:
            flat.extend(e if isinstance(e, (list, tuple)) else [e])
        flat += [v.alias(k) for k, v in named.items()]
        if not flat or not all(isinstance(e, pl.Expr) for e in flat):
            raise TypeError("not a plain expression selection")
        return _Captured(flat)


def _udf(check: Any, key: str) -> pl.Expr:
    """Run a check that is not a plain expression selection as a Python UDF inside the query."""
    from pandera.api.polars.types import PolarsData

    fn = partial(check._check_fn, **check._check_kwargs)

    def run(s: pl.Series) -> pl.Series:
        df = s.struct.unnest()
        out = fn(PolarsData(df.lazy(), key))
        if isinstance(out, bool):
            return pl.Series([out] * df.height, dtype=pl.Boolean)
        out = out.collect() if isinstance(out, pl.LazyFrame) else out
        if out.width > 1:
            return out.select(pl.all_horizontal(pl.all())).to_series()
        return out.to_series().cast(pl.Boolean)

    return pl.struct(pl.all()).map_batches(run, return_dtype=pl.Boolean)


def check_expr(check: Any, key: str) -> tuple[pl.Expr, bool]:
    """The per-row boolean expression (True = passes) of Pandera check ``check`` on column ``key``.

    Args:
        check: a ``pandera.Check`` (built-in, registered, or custom with a polars check function).
        key: the column name, or ``"*"`` for a dataframe-level check.

    Returns:
        ``(expr, native)``: ``native`` is False when the check had to run as a Python UDF.
    """
    import pandera.backends.polars.builtin_checks  # noqa: F401  (registers the polars built-in checks)
    from pandera.api.polars.types import PolarsData

    if getattr(check, "element_wise", False):
        fn = partial(check._check_fn, **check._check_kwargs)
        sel = pl.col(key) if key != "*" else pl.struct(pl.all())
        return sel.map_elements(fn, return_dtype=pl.Boolean), False
    try:
        out = check._check_fn(PolarsData(_Capture(), key), **check._check_kwargs)  # type: ignore[arg-type]
    except Exception:  # the check does more than select expressions: run it as a UDF
        return _udf(check, key), False
    if isinstance(out, _Captured):
        return (out.exprs[0] if len(out.exprs) == 1 else pl.all_horizontal(out.exprs)), True
    return _udf(check, key), False


def _compiles(expr: pl.Expr, schema: dict[str, pl.DataType]) -> str | None:
    """None when ``expr`` evaluates on an empty frame of ``schema``; else the error's first line."""
    try:
        pl.LazyFrame(schema=schema).select(expr.alias("x")).collect()
        return None
    except Exception as exc:  # a check written for another dtype
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def structure_findings(contract: Contract, schema: dict[str, pl.DataType], roles: Roles) -> tuple[list[Finding], set[str]]:
    """``schema.missing_column`` / ``schema.dtype`` / strict-mode findings, from the shard's schema.

    Args:
        contract: the loaded contract.
        schema: the shard's ``{column: polars dtype}``.
        roles: the shard's roles; a role column the config names but the shard lacks is already a
            ``schema.missing_column`` finding of the runner and is not reported twice.

    Returns:
        (findings, columns whose data checks must not run: absent or of the wrong dtype).
    """
    from pandera.engines import polars_engine

    findings: list[Finding] = []
    bad: set[str] = set()
    already_missing = {c for _, c in roles.missing}
    src = contract.name
    for key, col in contract.schema.columns.items():
        present = resolve_columns(contract, key, schema)
        if not present:
            if getattr(col, "required", True) and key not in already_missing:
                what = f"no column matches {key!r}" if col.regex else f"column {key!r} is absent"
                findings.append(Finding(
                    check="schema.missing_column", severity="error", column=key,
                    message=f"{what}, but schema {src} requires it; add the column or mark it `required: false`",
                    details={"schema": src}))
            continue
        rule = contract.rules.get(key, ColumnRule())
        for c in present:
            t = schema[c]
            if c in bad:
                continue  # already reported under another key of the schema (e.g. a regex)
            if col.dtype is not None:
                try:
                    ok = col.dtype.check(polars_engine.Engine.dtype(t))
                except (TypeError, ValueError):
                    ok = False
                if not ok:
                    bad.add(c)
                    findings.append(Finding(
                        check="schema.dtype", severity="error", column=c,
                        message=f"column {c!r} is {t}, schema {src} expects {col.dtype}",
                        details={"schema": src, "expected": str(col.dtype), "actual": str(t)}))
                    continue
            if rule.kind and not (dtype_kind(t) & set(rule.kind)):
                bad.add(c)
                findings.append(Finding(
                    check="schema.dtype", severity="error", column=c,
                    message=f"column {c!r} is {t}, schema {src} expects {' or '.join(rule.kind)}",
                    details={"schema": src, "expected": list(rule.kind), "actual": str(t)}))
    if contract.schema.strict:
        known = {c for key in contract.schema.columns for c in resolve_columns(contract, key, schema)}
        # columns the read path made (rendered tokens, Alpaca messages) are not the shard's own
        made = set(getattr(roles, "derived", ()))
        extra = [c for c in schema if c not in known and c not in made]
        if extra:
            findings.append(Finding(
                check="schema.check", severity="error", column=None,
                message=f"schema {src} is strict and the shard has column(s) it does not list: {extra}",
                details={"schema": src, "check": "strict", "columns": extra}))
    for group in contract.require_any:
        if not any(resolve_columns(contract, k, schema) for k in group):
            findings.append(Finding(
                check="schema.missing_column", severity="error", column=None,
                message=f"schema {src} needs at least one of {list(group)}; none is present",
                details={"schema": src, "any_of": list(group)}))
    return findings, bad


def _finite_guard(c: str, t: pl.DataType) -> pl.Expr | None:
    return pl.col(c).is_finite() if (not is_list(t) and t.is_float()) else None


def _message(src: str, name: str, error: str, col: str | None, finite_note: bool):
    where = f"of {col!r} " if col else ""
    note = " (non-finite values are finite.nan/finite.inf findings, not counted here)" if finite_note else ""
    return lambda n, d: f"{n} row(s) {where}fail check {name!r} of schema {src}: {error}{note}"


def _pandera_row_check(contract: Contract, check: Any, c: str, t: pl.DataType | None) -> tuple[RowCheck, bool]:
    """The row check of one Pandera check, and whether it is a native expression (not a UDF)."""
    ok, native = check_expr(check, c if t is not None else "*")
    fails = ok.not_() if getattr(check, "ignore_na", True) else ok.not_().fill_null(True)
    guard = _finite_guard(c, t) if t is not None else None
    if guard is not None:
        fails = fails & guard
    name = check_name(check)
    error = str(getattr(check, "error", None) or name)
    return RowCheck(
        check="schema.check", column=c if t is not None else None, fails=fails,
        example=pl.col(c) if t is not None else None,
        message=_message(contract.name, name, error, c if t is not None else None, guard is not None),
        details={}), native


def _rule_checks(contract: Contract, rule: ColumnRule, c: str, t: pl.DataType) -> list[tuple[str, RowCheck]]:
    out: list[tuple[str, RowCheck]] = []
    src = contract.name
    flt = inner_dtype(t).is_float()

    def finite(x: pl.Expr, p: pl.Expr) -> pl.Expr:
        return (p & x.is_finite()) if flt else p

    if is_list(t) and (rule.min_length is not None or rule.max_length is not None):
        L = pl.col(c).list.len()
        lo, hi = rule.min_length, rule.max_length
        f = (L < lo if lo is not None else pl.lit(False)) | (L > hi if hi is not None else pl.lit(False))
        rng = f"[{lo if lo is not None else ''}, {hi if hi is not None else ''}]"
        out.append(("length_between", RowCheck(
            check="schema.check", column=c, fails=f, example=L,
            message=lambda n, d, c=c, rng=rng: f"{n} row(s) of {c!r} fail check 'length_between' of schema {src}: "
                                               f"list length outside {rng} (shown: the length)")))
    if rule.min_value is not None or rule.max_value is not None:
        lo, hi = rule.min_value, rule.max_value

        def outside(x: pl.Expr, lo: Any = lo, hi: Any = hi) -> pl.Expr:
            p = (x < lo if lo is not None else pl.lit(False)) | (x > hi if hi is not None else pl.lit(False))
            return finite(x, p)

        rng = f"[{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}]"
        out.append(("values_between", RowCheck(
            check="schema.check", column=c, fails=any_element(c, t, outside), example=first_bad(c, t, outside),
            message=lambda n, d, c=c, rng=rng: f"{n} row(s) of {c!r} fail check 'values_between' of schema {src}: "
                                               f"value(s) outside {rng}")))
    if rule.values is not None:
        allowed = list(rule.values)

        def not_in(x: pl.Expr, allowed: list = allowed) -> pl.Expr:
            return finite(x, x.is_in(pl.Series(allowed).cast(inner_dtype(t), strict=False).implode()).not_())

        out.append(("values_in", RowCheck(
            check="schema.check", column=c, fails=any_element(c, t, not_in), example=first_bad(c, t, not_in),
            message=lambda n, d, c=c, a=allowed: f"{n} row(s) of {c!r} fail check 'values_in' of schema {src}: "
                                                 f"value(s) not in {a}")))
    return out


def _covered_groups(roles: Roles, schema: dict[str, pl.DataType]) -> list[set[str]]:
    """List-column groups whose lengths ``length.mismatch`` already compares (not compared twice)."""
    base = {c for c in (roles.input_ids, roles.attention_mask, roles.labels, roles.token_type_ids)
            if c is not None and is_list(schema[c])}
    return [base] + [set(g) for g in roles.aligned]


ShardItemT = Union[RowCheck, Skipped]


def data_items(contract: Contract, schema: dict[str, pl.DataType], roles: Roles, skip: set[str]) -> list[ShardItemT]:
    """The contract's data checks as fused-query row checks (or ``Skipped`` with the reason).

    Args:
        contract: the loaded contract.
        schema: the shard's ``{column: dtype}``.
        roles: the shard's roles. Nulls of the label column are ``labels.null`` and nulls of text
            columns ``empty.text``: not reported again as ``schema.nullable``.
        skip: columns absent or of the wrong dtype (from :func:`structure_findings`).

    Returns:
        ``schema.nullable`` (a row fails when the value is null; NaN is not null here) and
        ``schema.check`` row checks (a row fails a check when its value, or any list element, fails;
        non-finite floats never fail).
    """
    items: list[ShardItemT] = []
    src = contract.name
    nulls_elsewhere = {roles.label, *roles.text} - {None}
    null_checked: set[str] = set()  # a column several keys match (a name and a regex) is checked once
    for key, col in contract.schema.columns.items():
        rule = contract.rules.get(key, ColumnRule())
        for c in resolve_columns(contract, key, schema):
            if c in skip:
                continue
            t = schema[c]
            if not col.nullable and c not in nulls_elsewhere and c not in null_checked:
                null_checked.add(c)
                items.append(RowCheck(
                    check="schema.nullable", column=c, fails=pl.col(c).is_null(), example=pl.col(c),
                    message=lambda n, d, c=c: (f"{n} row(s) of {c!r} are null, but schema {src} declares it "
                                               "non-nullable (NaN is not null here: see finite.nan)")))
            named: list[tuple[str, RowCheck, bool]] = []
            if getattr(col, "unique", False):
                named.append(("unique", True, RowCheck(
                    check="schema.check", column=c, fails=pl.col(c).is_duplicated(), example=pl.col(c),
                    message=lambda n, d, c=c: f"{n} row(s) of {c!r} fail check 'unique' of schema {src}: repeated values")))
            for chk in col.checks:
                rc, native = _pandera_row_check(contract, chk, c, t)
                named.append((check_name(chk), native, rc))
            named += [(n, True, rc) for n, rc in _rule_checks(contract, rule, c, t)]
            for name, native, rc in named:
                # a UDF cannot be probed on an empty frame (it may need rows); the runner isolates it
                err = _compiles(rc.fails, schema) if native else None
                if err is None:
                    items.append(replace(rc, details={**rc.details, "check": pl.lit(name), "schema": pl.lit(src)}))
                else:
                    items.append(Skipped("schema.check", f"check {name!r} of schema {src} cannot run on column "
                                                         f"{c!r} ({t}): {err}"))
    for chk in contract.schema.checks:
        rc, native = _pandera_row_check(contract, chk, "*", None)
        err = _compiles(rc.fails, schema) if native else None
        items.append(rc if err is None else Skipped("schema.check", f"dataframe check {check_name(chk)!r} of "
                                                                     f"schema {src} cannot run: {err}"))
    uniq = contract.schema.unique
    if uniq:
        cols = [uniq] if isinstance(uniq, str) else list(uniq)
        if all(c in schema for c in cols):
            items.append(RowCheck(
                check="schema.check", column=None, fails=pl.struct(cols).is_duplicated(),
                message=lambda n, d, cols=cols: f"{n} row(s) fail check 'unique' of schema {src}: {cols} repeat together"))
    covered = _covered_groups(roles, schema)
    for group in contract.aligned:
        present = [c for k in group for c in resolve_columns(contract, k, schema) if c not in skip and is_list(schema[c])]
        present = list(dict.fromkeys(present))
        if len(present) < 2 or any(set(present) <= g for g in covered):
            continue
        lens = [pl.col(c).list.len() for c in present]
        items.append(RowCheck(
            check="schema.check", column=None,
            fails=pl.any_horizontal([x.ne_missing(lens[0]) for x in lens[1:]]),
            example=pl.concat_str([pl.format("{}={}", pl.lit(c), pl.col(c).list.len()) for c in present], separator=", "),
            message=lambda n, d, p=present: f"{n} row(s) fail check 'aligned' of schema {src}: lengths of {p} differ"))
    return items


def validate_with_pandera(contract: Contract, lf: pl.LazyFrame) -> dict[tuple[str, str | None, str], list[int]]:
    """Validate ``lf`` through Pandera itself (``SCHEMA_AND_DATA`` depth, ``lazy=True``).

    Used by the benchmark and by tests as the reference. Only Pandera's part of the contract runs
    (not the ``datacheck:`` list rules), with Pandera's semantics (NaN counts as null).

    Returns:
        ``{(check_id, column, pandera_check): sorted failing row indices}`` (empty when valid).
    """
    import pandera.polars as pa
    from pandera.config import ValidationDepth, config_context

    with config_context(validation_depth=ValidationDepth.SCHEMA_AND_DATA):
        try:
            contract.schema.validate(lf, lazy=True)
            return {}
        except pa.errors.SchemaErrors as exc:
            fc = exc.failure_cases
    out: dict[tuple[str, str | None, str], set[int]] = {}
    for row in fc.iter_rows(named=True):
        chk = str(row["check"])
        if chk == "column_in_dataframe":
            key = ("schema.missing_column", row["failure_case"], chk)
        elif chk.startswith("dtype("):
            key = ("schema.dtype", row["column"], chk)
        elif chk == "not_nullable":
            key = ("schema.nullable", row["column"], chk)
        else:
            key = ("schema.check", row["column"], chk)
        s = out.setdefault(key, set())
        if row.get("index") is not None:
            s.add(int(row["index"]))
    return {k: sorted(v) for k, v in out.items()}
