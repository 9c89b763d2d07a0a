"""schema: the data contract (``[dataset] schema`` / ``--schema``) held against every shard, and the
shards held against each other.

- per shard: ``schema.missing_column``, ``schema.dtype`` (from the shard's schema, no data read),
  ``schema.nullable`` and ``schema.check`` (row checks fused into the shard's one query); see
  :mod:`datacheck.contracts.validate`;
- per dataset: ``schema.inconsistent`` (shards disagree on columns or dtypes, contract or not).
  (``tokens.dtype_overflow`` declared by the contract is the dataset stage of that check, in tokens.py.)
"""
from __future__ import annotations

import re
import shlex
from collections import Counter
from pathlib import PurePosixPath
from typing import Any, Iterable

import polars as pl

from datacheck.checks._expr import any_element, first_bad
from datacheck.checks.registry import RowCheck, ShardContext, ShardItem, check, derives, finding
from datacheck.checks.roledtype import problems
from datacheck.contracts import data_items, load_contract, structure_findings
from datacheck.contracts.validate import resolve_columns
from datacheck.derive.read import ALPACA, CHAT
from datacheck.model import layouts as lay
from datacheck.model.findings import Finding, Skipped
from datacheck.model.roles import KEY_COLUMNS, inner_dtype, is_list, stand_in_message

__all__ = ["missing_column", "dtype", "nullable", "contract_check", "schema_inconsistent", "feature_columns",
           "null_judged_features"]

#: the read path's derivations this family reads: the Alpaca layout's messages and the chat
#: template's token columns are role columns like the shard's own
derives(__name__, ALPACA, CHAT)

_NO_SCHEMA = "no schema given (set [dataset] schema or --schema)"
_memo: dict[str, Any] = {"ctx": None, "parts": None}


def _contract_parts(ctx: ShardContext) -> tuple[list[Finding], list[ShardItem]]:
    """(structure findings, data items) of the configured contract on this shard: one computation
    (schema only, no data read) shared by the four ``schema.*`` shard checks; ``([], [])`` without
    a contract.

    Raises:
        ConfigError: the configured schema cannot be loaded (also raised before any shard is read
            by :func:`datacheck.api.audit`).
    """
    if _memo["ctx"] is ctx:
        return _memo["parts"]
    spec = ctx.cfg.schema_spec()
    parts: tuple[list[Finding], list[ShardItem]] = ([], [])
    if spec is not None:

        contract = load_contract(spec)
        findings, skip = structure_findings(contract, ctx.schema, ctx.roles)
        parts = (findings, list(data_items(contract, ctx.schema, ctx.roles, skip)))
    _memo["ctx"], _memo["parts"] = ctx, parts
    return parts


def _contract_items(ctx: ShardContext, cid: str) -> list[ShardItem]:
    findings, items = _contract_parts(ctx)
    return [i for i in [*findings, *items] if i.check == cid]


@check("schema.missing_column", layouts=lay.ANY)
def missing_column(ctx: ShardContext) -> Iterable[ShardItem]:
    """``schema.missing_column`` (error, shard level): a column that ``[columns]`` names for a role,
    or that the data contract requires, is absent from the shard (the role's checks then skip, or run
    on the role's standard column where the shard holds one: ``Roles.stand_ins``, and the message
    says which)."""
    stood = {(r, c): used for r, c, used in ctx.roles.stand_ins}
    for role, col in ctx.roles.missing:
        used = stood.get((role, col))
        yield finding(
            "schema.missing_column", column=col,
            message=(stand_in_message(role, col, used, ctx.shard, None) if used is not None else
                     f"column {col!r} (role {role} in [columns]) is absent from {ctx.shard}; "
                     f"fix [columns] {role} or the data. The checks of this role did not run on this shard."),
            details={"role": role} if used is None else {"role": role, "read": used},
        )
    yield from _contract_items(ctx, "schema.missing_column")


@check("schema.dtype", layouts=lay.ANY)
def dtype(ctx: ShardContext) -> Iterable[ShardItem]:
    """``schema.dtype`` (error, shard level): a role column whose dtype cannot serve its role (rules
    in :func:`datacheck.model.roles.role_dtype_problems`; message names the column, role, dtype
    found, dtype expected and the likely cause; ``details`` carry ``role``, ``expected``, ``actual``
    and ``source = "roles"``), and a column whose dtype differs from the data contract. A column the
    contract already reports is not reported again from its role. A ``[columns]`` column of a token,
    mask or conversation role whose dtype cannot serve it, replaced by the role's standard column
    (``Roles.stand_ins``), is reported once here (``details["read"]``: the column read instead)."""
    contract = _contract_items(ctx, "schema.dtype")
    yield from contract
    done = {f.column for f in contract if isinstance(f, Finding) and f.column is not None}
    for role, col, used in ctx.roles.stand_ins:
        t = ctx.schema.get(col)
        if t is None or col in done:
            continue  # absent: schema.missing_column's
        done.add(col)
        yield finding("schema.dtype", column=col, message=stand_in_message(role, col, used, ctx.shard, t),
                      details={"role": role, "expected": "the role's dtype", "actual": str(t), "source": "roles",
                               "read": used})
    for p in problems(ctx):
        if p.column in done:
            continue
        done.add(p.column)
        yield finding("schema.dtype", column=p.column, message=p.message,
                      details={"role": p.role, "expected": p.expected, "actual": p.found, "source": "roles"})
    if ctx.cfg.dataset.schema_ is None:
        yield Skipped("schema.dtype", _NO_SCHEMA)


#: the layouts whose rows are numeric features and an answer (a class label or a regression
#: target): their contract, the built-in ``tabular`` schema (``--schema tabular``), declares every
#: feature column non-nullable, with or without ``[dataset] schema``
_FEATURE_LAYOUTS = frozenset({"tabular", "regression"})


def feature_columns(ctx: ShardContext) -> list[str]:
    """The numeric feature columns of a ``tabular`` or ``regression`` shard (``[]`` in any other
    layout, and in a shard of unknown layout).

    ``[columns] features`` when given; else, when every role column of the shard is an answer (the
    class ``label``, the ``target`` columns: numeric columns and an answer, the rows the layout
    recognizer calls ``tabular``/``regression``), every other column but the reader's
    :data:`~datacheck.model.roles.KEY_COLUMNS` (the columns a model's ``X`` is made of, as
    :func:`~datacheck.model.roles.row_content` compares such rows); else none (a text regression
    row: the model reads the text, not its ``idx``). Of those, only numeric scalars and lists of
    numbers (integer, float, decimal); the answers are ``labels.null``'s.
    """
    if ctx.layout not in _FEATURE_LAYOUTS:
        return []
    roles = ctx.roles
    answers = {c for c in (roles.label, *roles.of("target"), roles.labels) if c is not None}
    cols = list(roles.of("features"))
    if not cols and all(c in answers for c in roles.columns()):
        cols = [c for c in ctx.schema if c not in answers and c not in KEY_COLUMNS]
    return [c for c in cols if c in ctx.schema and c not in answers and inner_dtype(ctx.schema[c]).is_numeric()]


def _contract_columns(ctx: ShardContext) -> set[str]:
    """The shard's columns the configured contract names (by name or regex key): its nullability
    decides theirs (``nullable: true`` accepts nulls in a feature column); empty without a contract."""
    spec = ctx.cfg.schema_spec()
    if spec is None:
        return set()
    contract = load_contract(spec)
    return {c for key in contract.schema.columns for c in resolve_columns(contract, key, ctx.schema)}


def _contract_accepts_nulls(ctx: ShardContext) -> dict[str, bool]:
    """``{column: whether the configured contract accepts its nulls}`` for the shard's columns it
    names: False when a key naming it (by name or regex) declares it non-nullable, as
    :func:`datacheck.contracts.validate.data_items` then reports its nulls; empty without a contract."""
    spec = ctx.cfg.schema_spec()
    if spec is None:
        return {}
    contract = load_contract(spec)
    out: dict[str, bool] = {}
    for key, col in contract.schema.columns.items():
        for c in resolve_columns(contract, key, ctx.schema):
            out[c] = out.get(c, True) and bool(col.nullable)
    return out


def null_judged_features(ctx: ShardContext) -> list[str]:
    """The feature columns (:func:`feature_columns`) whose null values ``schema.nullable`` reports:
    by the layout's contract those the configured contract does not name, and those it names and
    declares non-nullable (``--schema tabular`` names every column so); a feature it declares
    nullable is not one. A null there is always a ``schema.nullable`` row (a null list of numbers
    too), so the dup.* checks leave rows of such nulls to it (:mod:`datacheck.checks.dup.blank`)."""
    accepts = _contract_accepts_nulls(ctx)
    return [c for c in feature_columns(ctx) if not accepts.get(c, False)]


def _feature_message(n: int, d: dict[str, Any], col: str, layout: str, listed: bool) -> str:
    what = "are null or hold a null element" if listed else "are null"
    return (f"{n} row(s) of feature column {col!r} {what} (an empty CSV cell, as pandas' to_csv writes NaN; a "
            "JSON or parquet null): pandas read_csv/read_parquet, numpy, polars to_numpy()/to_torch() and torch "
            f"read it as NaN, and a NaN feature makes the loss NaN. The {layout} layout's contract (the built-in "
            "`--schema tabular`) declares feature columns non-nullable; fill or drop these rows (`datacheck clean "
            "--drop schema.nullable`). A model that takes missing values natively (XGBoost, LightGBM, CatBoost) may "
            f"keep them: declare the column nullable in a schema (`{col}: {{nullable: true}}` under `columns:` of the "
            "file [dataset] schema names), or accept every such null with [policy] "
            "\"schema.nullable\" = { severity = \"info\" } (or ignore = true)")


def _feature_nulls(ctx: ShardContext) -> Iterable[RowCheck]:
    """``schema.nullable`` on the numeric feature columns of a ``tabular``/``regression`` shard
    (:func:`feature_columns`) that the configured contract does not name: a row fails when the value
    is null, or (a list of numbers, e.g. an embedding) any of its elements is; NaN is
    ``finite.nan``'s, a cell the reader read as null because it reported it (``schema.dtype``,
    ``decode.bad_record``) fails nothing here."""
    named = _contract_columns(ctx)
    for col in feature_columns(ctx):
        if col in named:
            continue
        t = ctx.schema[col]
        listed = is_list(t)
        c = pl.col(col)
        fails = (c.is_null() | any_element(col, t, lambda x: x.is_null()).fill_null(False)) if listed else c.is_null()
        yield RowCheck(
            check="schema.nullable", column=col, fails=fails, not_retyped=col,
            example=first_bad(col, t, lambda x: x.is_null(), null_text="null") if listed else c,
            message=lambda n, d, col=col, lo=ctx.layout or "", li=listed: _feature_message(n, d, col, lo, li),
        )


@check("schema.nullable", layouts=lay.ANY)
def nullable(ctx: ShardContext) -> Iterable[ShardItem]:
    """``schema.nullable``: a row fails when a column the contract declares non-nullable is null
    (NaN is not null here); fused into the shard's one query (:mod:`datacheck.contracts.validate`).

    The layout's contract too: in a ``tabular`` or ``regression`` shard a null in a numeric feature
    column (:func:`feature_columns`; an empty CSV cell, where pandas' ``to_csv`` wrote NaN) fails,
    with or without ``[dataset] schema``: every consumer (pandas ``read_csv``/``read_parquet``,
    numpy, polars ``to_numpy``/``to_torch``, torch) turns it into NaN and the loss into NaN, the
    rule the built-in ``tabular`` contract states (``--schema tabular``). A column the configured
    contract names is judged by that contract alone (``nullable: true`` keeps its nulls: XGBoost,
    LightGBM and CatBoost take missing values natively); ``[policy] "schema.nullable"`` sets the
    severity of them all. Without ``[dataset] schema`` the contract's own rules are still listed as
    skipped."""
    yield from _contract_items(ctx, "schema.nullable")
    yield from _feature_nulls(ctx)
    if ctx.cfg.dataset.schema_ is None:
        yield Skipped("schema.nullable", _NO_SCHEMA)


@check("schema.check", layouts=lay.ANY, facts=("dataset.schema",), reasons={"dataset.schema": _NO_SCHEMA})
def contract_check(ctx: ShardContext) -> Iterable[ShardItem]:
    """``schema.check``: a row fails a user-defined Pandera check of the contract (or the list
    rules); strict-mode extra columns are a shard-level finding of the same ID."""
    return _contract_items(ctx, "schema.check")


def _shape(columns: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(columns.items()))


_LABEL_ROLES = ("label", "labels", "target")


#: formats whose column dtypes are inferred from the values (a CSV/TSV header without rows reads as
#: String columns: the dtypes of such a shard with no row are no evidence of its preprocessing)
_VALUE_TYPED_FORMATS = ("csv", "tsv")


#: formats whose number columns are Int64 or Float64 by their values (CSV/TSV text; JSON, whose one
#: number type R and JavaScript write as ``2`` for 2.0): a column all of whose values in a shard are
#: whole numbers is Int64 there, Float64 where one value has a fraction
_NUMBER_INFERRED_FORMATS = ("csv", "tsv", "jsonl", "json")


def _effective_columns(shards: list[Any]) -> dict[str, dict[str, str]]:
    """Each shard's columns (path -> {column: dtype}) as :func:`schema_inconsistent` compares them: a
    shard of :data:`_VALUE_TYPED_FORMATS` with no row takes, for each of its columns, the dtype most
    shards with rows (or of a declared-type format) give that column (the first such shard in path
    order on a tie), so only its column names are compared; a shard of
    :data:`_NUMBER_INFERRED_FORMATS` whose column, not a label column (:func:`_label_columns`), is
    Int64 where another shard's is Float64 takes Float64 (its whole numbers are values of that
    float column: the same column of one table, as the row hashes compare them); every other shard
    as read. A label read as Float64 in one shard and Int64 in another stays a difference (a float
    class target is read as probabilities or a regression target), as does a typed format's Int64
    (a parquet writer's dtype) next to floats."""
    untyped = {s.path for s in shards if s.format in _VALUE_TYPED_FORMATS and s.rows == 0}
    labels = _label_columns(shards)
    floats = {c for s in shards if s.path not in untyped for c, t in s.columns.items()
              if t == "Float64" and c not in labels}
    widened = {s.path for s in shards if s.format in _NUMBER_INFERRED_FORMATS and s.path not in untyped
               and any(s.columns.get(c) == "Int64" for c in floats)}
    seen: dict[str, Counter[str]] = {}
    first: dict[tuple[str, str], int] = {}
    for i, s in enumerate(shards):
        if s.path in untyped:
            continue
        for c, t in s.columns.items():
            seen.setdefault(c, Counter())[t] += 1
            first.setdefault((c, t), i)
    vote = {c: max(ts, key=lambda t, c=c: (ts[t], -first[(c, t)])) for c, ts in seen.items()}
    out = {s.path: ({c: vote.get(c, t) for c, t in s.columns.items()} if s.path in untyped else
                    {c: "Float64" if t == "Int64" and c in floats else t for c, t in s.columns.items()}
                    if s.path in widened else dict(s.columns))
           for s in shards}
    return _null_typed(shards, _typed_widths(shards, out, untyped))


#: an integer or float dtype name inside a polars dtype's text (``Int32``, ``UInt16``, ``Float32``)
_NUMBER_NAME = re.compile(r"\b(U?Int|Float)(8|16|32|64)\b")


def _number_kind(dtype: str) -> str:
    """``dtype`` with every number width left out: ``List(Int32)`` and ``List(Int64)`` both give
    ``List(Int)``; ``Float32`` gives ``Float`` (signedness too: ``UInt16`` gives ``Int``)."""
    return _NUMBER_NAME.sub(lambda m: "Int" if m[1].endswith("Int") else "Float", dtype)


def _typed_widths(shards: list[Any], cols: dict[str, dict[str, str]], untyped: set[str]) -> dict[str, dict[str, str]]:
    """``cols`` with each column of a :data:`_NUMBER_INFERRED_FORMATS` shard whose dtype holds only
    the reader's own widths (``Int64``, ``Float64``: JSON and CSV numbers carry none) taken as the
    dtype the typed shards (parquet, Arrow, ...) give that column when it differs from it by number
    widths alone (``List(Int64)`` of a JSONL copy next to a parquet ``List(Int32)``; ``Int64`` next to
    ``Int32``): the text holds the same values, its width is no evidence of another preprocessing.
    The typed dtype most typed shards give wins (the first in path order on a tie). A different
    kind (an integer next to a float, a list next to a scalar) stays a difference, as do two typed
    shards of different widths (their writers chose them)."""
    typed: dict[str, Counter[str]] = {}
    first: dict[tuple[str, str], int] = {}
    for i, s in enumerate(shards):
        if s.format in _NUMBER_INFERRED_FORMATS or s.path in untyped:
            continue
        for c, t in cols[s.path].items():
            typed.setdefault(c, Counter())[t] += 1
            first.setdefault((c, t), i)
    if not typed:
        return cols
    out = dict(cols)
    for s in shards:
        if s.format not in _NUMBER_INFERRED_FORMATS or s.path in untyped:
            continue
        mine = dict(cols[s.path])
        for c, t in mine.items():
            names = [m[0] for m in _NUMBER_NAME.finditer(t)]
            if not names or not set(names) <= {"Int64", "Float64"} or c not in typed:
                continue
            same = [u for u in typed[c] if _number_kind(u) == _number_kind(t)]
            if same:
                mine[c] = max(same, key=lambda u, c=c: (typed[c][u], -first[(c, u)]))
        out[s.path] = mine
    return out


def _null_typed(shards: list[Any], cols: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """``cols`` with each column of a :data:`_NUMBER_INFERRED_FORMATS` shard whose dtype holds
    ``Null`` (every value of the column in that shard is null: JSON ``null``, read as ``Null`` or
    ``List(Null)``) taken as the dtype most other shards give that column where ``Null`` stands for
    any type (``String`` for ``Null``; ``List(Int64)`` for ``List(Null)``): a JSON shard whose
    ``input`` is null in every row (Alpaca data, as ``datasets`` reads and casts it) is no other
    preprocessing than one holding strings there. Nulls themselves are the null checks' concern
    (``labels.null``, ``schema.nullable``)."""
    seen: dict[str, Counter[str]] = {}
    for s in shards:
        for c, t in cols[s.path].items():
            if "Null" not in t:
                seen.setdefault(c, Counter())[t] += 1
    out = dict(cols)
    for s in shards:
        if s.format not in _NUMBER_INFERRED_FORMATS or not any("Null" in t for t in cols[s.path].values()):
            continue
        mine = dict(cols[s.path])
        for c, t in mine.items():
            if "Null" not in t or c not in seen:
                continue
            shape = re.compile(".+".join(re.escape(part) for part in t.split("Null")))
            fits = [u for u in seen[c] if shape.fullmatch(u)]
            if fits:
                mine[c] = max(fits, key=lambda u, c=c: seen[c][u])
        out[s.path] = mine
    return out


def _label_columns(shards: list[Any]) -> set[str]:
    """The columns any shard uses as a label (roles ``label``, ``labels``, ``target``)."""
    out: set[str] = set()
    for s in shards:
        for role in _LABEL_ROLES:
            cols = (s.roles or {}).get(role, {}).get("columns")
            if isinstance(cols, str):
                out.add(cols)
            elif cols:
                out.update(c for c in cols if isinstance(c, str))
    return out


def _differences(shards: list[Any], shape_of: Any, where: str) -> Iterable[Finding]:
    """The majority layout of ``shards`` (by ``shape_of``; ties: the first shard in path order) and
    one finding per other layout."""
    counts = Counter(shape_of(s) for s in shards)
    if len(counts) <= 1:
        return
    order = {shape_of(s): i for i, s in reversed(list(enumerate(shards)))}
    ref = max(counts, key=lambda k: (counts[k], -order[k]))
    ref_cols = dict(ref)
    for shape, _n in sorted(counts.items(), key=lambda kv: order[kv[0]]):
        if shape == ref:
            continue
        cols = dict(shape)
        names = sorted(s.path for s in shards if shape_of(s) == shape)
        missing = sorted(set(ref_cols) - set(cols))
        extra = sorted(set(cols) - set(ref_cols))
        differ = {c: {"expected": ref_cols[c], "actual": cols[c]} for c in sorted(set(cols) & set(ref_cols))
                  if cols[c] != ref_cols[c]}
        parts = []
        if missing:
            parts.append(f"missing {missing}")
        if extra:
            parts.append(f"extra {extra}")
        if differ:
            parts.append("dtypes " + ", ".join(f"{c}: {v['actual']} (others {v['expected']})" for c, v in differ.items()))
        yield finding(
            "schema.inconsistent", column=None, count=len(names),
            message=(f"{len(names)} shard(s) differ from the other {counts[ref]} shard(s) {where}: "
                     f"{'; '.join(parts)}. Mixed preprocessing; re-export these shards"),
            shards=tuple(names),
            details={"missing": missing, "extra": extra, "dtypes": differ, "reference_shards": counts[ref]})


#: roles whose presence makes a shard raw (text or conversations, before tokenization)
_RAW_ROLES = ("text", "messages")


def _stage(shard: Any) -> str | None:
    """``"tokenized"`` (an ``input_ids`` role and no ``messages``: token ids are what the trainer
    reads, a kept ``text`` column or not), ``"raw"`` (a ``text`` or ``messages`` role: the data
    before tokenization; token ids rendered from ``messages`` by the read path do not count),
    else None (features, targets, preference pairs: no stage told)."""
    roles = shard.roles or {}
    if roles.get("input_ids") and not roles.get("messages"):
        return "tokenized"
    if any(roles.get(r) for r in _RAW_ROLES):
        return "raw"
    return None


def _audit_command(root: Any, mine: list[str], others: list[str]) -> str:
    """A ``datacheck audit`` command line that takes the shards ``mine`` (paths relative to the
    audited ``root``) and none of ``others``: their common folder when it holds no other shard, else
    a recursive glob per extension when no other shard has it, else the shard files themselves."""
    base = PurePosixPath(str(root)) if root is not None else None

    def at(rel: str) -> str:
        return str(base / rel) if base is not None else rel

    parents = [PurePosixPath(p).parent for p in mine]
    common = parents[0]
    while any(common != q and common not in q.parents for q in parents):
        common = common.parent
    if str(common) != "." and not any(common in PurePosixPath(o).parents for o in others):
        return "datacheck audit " + shlex.quote(at(str(common)))
    exts = sorted({"".join(PurePosixPath(p).suffixes) for p in mine})
    if all(e and not any(o.endswith(e) for o in others) for e in exts):
        return "datacheck audit " + " ".join(shlex.quote(at(f"**/*{e}")) for e in exts)
    return "datacheck audit " + " ".join(shlex.quote(at(p)) for p in mine)


def _stages_finding(shards: list[Any], by_stage: dict[str, list[Any]], where: str, root: Any) -> Finding:
    """One finding for raw and tokenized shards audited together (see :func:`schema_inconsistent`)."""
    ref = max(by_stage, key=lambda k: (len(by_stage[k]), -shards.index(by_stage[k][0])))
    layouts = []
    for stage, members in by_stage.items():
        shapes: dict[tuple[str, ...], list[str]] = {}
        for s in members:
            shapes.setdefault(tuple(sorted(s.columns)), []).append(s.path)
        for cols, paths in shapes.items():
            layouts.append({"stage": stage, "columns": list(cols), "shards": sorted(paths)})
    def named(paths: list[str]) -> str:
        return ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")

    text = "; ".join(f"{x['stage']}: columns {', '.join(x['columns'])} in {len(x['shards'])} shard(s) "
                     f"({named(x['shards'])})" for x in layouts)
    every = sorted(s.path for s in shards)
    commands = [_audit_command(root, sorted(s.path for s in members), [p for p in every if p not in
                                                                       {s.path for s in members}])
                for members in by_stage.values()]
    differ = sorted(s.path for stage, members in by_stage.items() if stage != ref for s in members)
    return finding(
        "schema.inconsistent", column=None, count=len(differ),
        message=("raw and tokenized data in one audit: audit each as its own dataset ("
                 + "; ".join(f"`{c}`" for c in commands) + f"). The shards {where}: {text}. These are two "
                 "preprocessing stages (the same data before and after tokenization, or two datasets), not "
                 "shards of one dataset: a trainer reads one of them, and checks across shards (duplicates, "
                 "drift) cannot compare them"),
        shards=tuple(every),
        details={"layouts": layouts, "reference_stage": ref, "commands": commands})


def _inconsistent(members: list[Any], shape_of: Any, where: str, root: Any) -> Iterable[Finding]:
    """:func:`_differences` of ``members``; raw and tokenized shards among them are one finding
    for the mix, then compared only with shards of their own stage."""
    by_stage: dict[str, list[Any]] = {}
    for s in members:
        by_stage.setdefault(_stage(s) or "", []).append(s)
    if not {"raw", "tokenized"} <= set(by_stage):
        yield from _differences(members, shape_of, where)
        return
    yield _stages_finding(members, {k or "other": v for k, v in by_stage.items()}, where, root)
    for stage_members in by_stage.values():
        yield from _differences(stage_members, shape_of, where)


@check("schema.inconsistent", layouts=lay.ANY, level="dataset")
def schema_inconsistent(dctx: Any) -> Iterable[Finding]:
    """``schema.inconsistent``: readable shards whose columns or dtypes differ from the majority.

    The majority layout (most shards; ties broken by the first shard in path order) is the
    reference (a CSV/TSV shard without rows is compared by its column names only, and a CSV/TSV/JSONL
    column other than a label that is Int64 in one shard and Float64 in another, its values whole
    numbers in the one, is one column: :func:`_effective_columns`; a CSV/TSV/JSONL column read as
    Int64/Float64 is the typed shards' column of the same kind at their width, ``List(Int64)`` next to
    parquet's ``List(Int32)``: :func:`_typed_widths`; a JSON column null in every row of its shard,
    read as ``Null``, is the others' column: :func:`_null_typed`); every other layout is one
    finding listing its shards, the missing and extra columns and the dtypes that differ.

    With ``[splits]``, the shards of each split (and those in no split) are compared among
    themselves; across splits the label columns (roles ``label``, ``labels``, ``target`` in any
    shard) are left out of the comparison, since a split without labels (an unlabeled test split)
    is a normal layout, and every other column must agree.

    Raw and tokenized shards compared together (a ``text``/``messages`` shard next to an
    ``input_ids`` shard, :func:`_stage`: the same data before and after tokenization, or two
    datasets) are not mixed preprocessing of one dataset: they are one finding (count = the shards
    outside the stage with the most shards) whose message and ``details`` give each column set with
    its stage and shards (``layouts``) and the ``datacheck audit`` command lines that audit each stage
    as its own dataset (``commands``: the stage's folder, else a glob per extension, else its files);
    the shards of each stage are then compared among themselves as above. The config has no key that
    names datasets within one audit (``[splits]`` are splits of one dataset), so separate audits are
    the remedy.
    """
    shards = [s for s in dctx.readable_shards() if s.columns]
    if len(shards) < 2:
        return
    cols = _effective_columns(shards)
    groups: dict[str | None, list[Any]] = {}
    for s in shards:
        groups.setdefault(dctx.splits.get(s.path), []).append(s)
    where = "of the dataset" if len(groups) == 1 else "of their split"
    reported: set[str] = set()
    root = getattr(dctx, "root", None)
    for name, members in groups.items():
        for f in _inconsistent(members, lambda s: _shape(cols[s.path]),
                               where if name is None or len(groups) == 1 else f"of split {name!r}", root):
            reported.update(f.shards)
            yield f
    if len(groups) > 1:  # each shard once: those already reported within their split are left out
        labels = _label_columns(shards)
        rest = [s for s in shards if s.path not in reported]
        yield from _inconsistent(rest, lambda s: _shape({c: t for c, t in cols[s.path].items() if c not in labels}),
                                 f"of the other splits (label columns {sorted(labels)} left out)", root)
