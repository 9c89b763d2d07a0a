"""roledtype: role columns whose dtype cannot serve the role (``schema.dtype``, shard level).

A role column of the wrong type (``input_ids`` read as ``List(String)`` because JSONL lines mix
``1`` and ``"1"``, a ``List(Float64)`` of ids, a nested ``list<list<int>>``, a string class label
while ``num_classes`` is set, a text column holding numbers, ...) would otherwise switch the role's
checks off and let the shard pass. It is reported here, once per column, and every check that
needs the role lists the same reason under ``skipped`` (:func:`problems` is the one place that
decides it; the rules are in :func:`datacheck.roles.role_dtype_problems`).

A column that the configured data contract (``[dataset] schema``) already reports as
``schema.dtype`` is not reported again.
"""
from __future__ import annotations

from typing import Iterable

from datacheck.checks.registry import ShardContext, ShardItem, shard_checks
from datacheck.model.findings import Finding
from datacheck.model.roles import RoleDtypeProblem, role_dtype_problems, role_problem

__all__ = ["problems", "problem", "role_dtype_checks"]


def problems(ctx: ShardContext) -> list[RoleDtypeProblem]:
    """Every role column of ``ctx``'s shard whose dtype cannot serve its role (schema only, no data read)."""
    lab = ctx.cfg.labels
    return role_dtype_problems(ctx.roles, ctx.schema, num_classes=lab.num_classes,
                               classes=tuple(lab.classes) if lab.classes is not None else None, shard=ctx.shard)


def problem(ctx: ShardContext, role: str, column: str | None = None) -> RoleDtypeProblem | None:
    """The dtype problem of ``role`` (optionally of one of its columns) in ``ctx``'s shard, or None."""
    return role_problem(problems(ctx), role, column)


def _contract_dtype_columns(ctx: ShardContext) -> set[str]:
    """Columns the configured contract already reports as ``schema.dtype`` on this shard."""
    spec = ctx.cfg.dataset.schema_
    if spec is None:
        return set()
    from datacheck.contracts import load_contract, structure_findings

    found, _skip = structure_findings(load_contract(spec), ctx.schema, ctx.roles)
    return {f.column for f in found if f.check == "schema.dtype" and f.column is not None}


@shard_checks("schema")
def role_dtype_checks(ctx: ShardContext) -> Iterable[ShardItem]:
    """``schema.dtype`` (error, shard level) for each role column whose dtype cannot serve its role.

    The finding names the column, the role, the dtype found, the dtype expected and the likely
    cause (e.g. "JSONL lines disagree on the type of 'input_ids': some hold strings"); ``details``
    carry ``role``, ``expected``, ``actual`` and ``source = "roles"``.
    """
    probs = problems(ctx)
    if not probs:
        return
    done = _contract_dtype_columns(ctx)
    for p in probs:
        if p.column in done:
            continue
        done.add(p.column)
        yield Finding(check="schema.dtype", severity="error", column=p.column, message=p.message,
                      details={"role": p.role, "expected": p.expected, "actual": p.found, "source": "roles"})
