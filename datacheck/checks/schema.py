"""schema: the data contract (``[dataset] schema`` / ``--schema``) held against every shard, and the
shards held against each other.

- per shard: ``schema.missing_column``, ``schema.dtype`` (from the shard's schema, no data read),
  ``schema.nullable`` and ``schema.check`` (row checks fused into the shard's one query); see
  :mod:`datacheck.contracts.validate`;
- per dataset: ``schema.inconsistent`` (shards disagree on columns or dtypes, contract or not) and
  ``tokens.dtype_overflow`` when the contract declares an id type too narrow for ``vocab_size``
  and no shard already reported it from its own storage type.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

import polars as pl

from datacheck.checks.registry import ShardContext, ShardItem, dataset_checks, shard_checks
from datacheck.checks._expr import id_storage_cap
from datacheck.model.findings import Finding, Skipped
from datacheck.model.roles import inner_dtype

__all__ = ["schema_checks", "schema_inconsistent", "contract_dtype_overflow"]

_ROW_IDS = ("schema.dtype", "schema.nullable", "schema.check")


@shard_checks("schema")
def schema_checks(ctx: ShardContext) -> Iterable[ShardItem]:
    """The contract's structure findings and data row checks for this shard.

    Raises:
        ConfigError: the configured schema cannot be loaded (also raised before any shard is read
            by :func:`datacheck.api.audit`).
    """
    spec = ctx.cfg.dataset.schema_
    if spec is None:
        for cid in _ROW_IDS:
            yield Skipped(cid, "no schema given (set [dataset] schema or --schema)")
        return
    from datacheck.contracts import data_items, load_contract, structure_findings

    contract = load_contract(spec)
    findings, skip = structure_findings(contract, ctx.schema, ctx.roles)
    yield from findings
    yield from data_items(contract, ctx.schema, ctx.roles, skip)


def _shape(columns: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(columns.items()))


@dataset_checks("schema")
def schema_inconsistent(dctx: Any) -> Iterable[Finding]:
    """``schema.inconsistent``: readable shards whose columns or dtypes differ from the majority.

    The majority layout (most shards; ties broken by the first shard in path order) is the
    reference; every other layout is one finding listing its shards, the missing and extra columns
    and the dtypes that differ.
    """
    shards = [s for s in dctx.readable_shards() if s.columns]
    if len(shards) < 2:
        return
    counts = Counter(_shape(s.columns) for s in shards)
    if len(counts) == 1:
        return
    order = {_shape(s.columns): i for i, s in reversed(list(enumerate(shards)))}
    ref = max(counts, key=lambda k: (counts[k], -order[k]))
    ref_cols = dict(ref)
    for shape, _n in sorted(counts.items(), key=lambda kv: order[kv[0]]):
        if shape == ref:
            continue
        cols = dict(shape)
        names = sorted(s.path for s in shards if _shape(s.columns) == shape)
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
        yield Finding(
            check="schema.inconsistent", severity="error", column=None, count=len(names),
            message=(f"{len(names)} shard(s) differ from the other {counts[ref]} shard(s) of the dataset: "
                     f"{'; '.join(parts)}. Mixed preprocessing; re-export these shards"),
            shards=tuple(names),
            details={"missing": missing, "extra": extra, "dtypes": differ, "reference_shards": counts[ref]})


@dataset_checks("schema")
def contract_dtype_overflow(dctx: Any) -> Iterable[Finding]:
    """``tokens.dtype_overflow`` decided from the contract: the schema declares the ``input_ids``
    element type (e.g. ``List(UInt16)``, max 65535) too narrow for ``[tokens] vocab_size - 1``.

    Reported once for the dataset, and only when no shard already reported it from its own storage
    type (tokens family), so the defect is never counted twice.
    """
    cfg = dctx.cfg
    vocab = cfg.tokens.vocab_size
    spec = cfg.dataset.schema_
    if spec is None or vocab is None:
        return
    if any(f.check == "tokens.dtype_overflow" for s in dctx.shards for f in s.findings):
        return
    from datacheck.contracts import load_contract

    contract = load_contract(spec)
    ids_cols = {s.roles.get("input_ids", {}).get("columns") for s in dctx.readable_shards()} - {None}
    for col in sorted(ids_cols):
        c = contract.schema.columns.get(col)
        if c is None or c.dtype is None:
            continue
        declared = getattr(c.dtype, "type", None)
        if not isinstance(declared, pl.DataType):
            continue
        inner = inner_dtype(declared)
        cap = id_storage_cap(declared, vocab)
        if cap is not None:
            yield Finding(
                check="tokens.dtype_overflow", severity="error", column=col,
                message=(f"schema {contract.name} declares {col!r} as {declared} (max {cap}) but vocab_size is "
                         f"{vocab}: data that follows this contract wraps ids above {cap}. Declare int32 ids"),
                shards=tuple(sorted(s.path for s in dctx.readable_shards())),
                details={"dtype": str(inner), "dtype_max": cap, "vocab_size": vocab, "source": "schema"})
