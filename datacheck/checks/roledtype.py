"""roledtype: role columns whose dtype cannot serve the role (reported as ``schema.dtype`` by
:mod:`datacheck.checks.schema`).

A role column of the wrong type (``input_ids`` read as ``List(String)`` because JSONL lines mix
``1`` and ``"1"``, a ``List(Float64)`` of ids, a nested ``list<list<int>>``, a string class label
while ``num_classes`` is set, a text column holding numbers, ...) would otherwise switch the role's
checks off and let the shard pass. It is reported once per column, and every check that
needs the role lists the same reason under ``skipped`` (:func:`problems` is the one place that
decides it; the rules are in :func:`datacheck.model.roles.role_dtype_problems`).

A column that the configured data contract (``[dataset] schema``) already reports as
``schema.dtype`` is not reported again.
"""
from __future__ import annotations

from datacheck.checks.registry import ShardContext, derives
from datacheck.derive.read import ALPACA, CHAT
from datacheck.model.roles import RoleDtypeProblem, role_dtype_problems, role_problem

__all__ = ["problems", "problem"]

#: the read path's derivations this family reads: the Alpaca layout's messages and the chat
#: template's token columns are role columns like the shard's own
derives(__name__, ALPACA, CHAT)


def problems(ctx: ShardContext) -> list[RoleDtypeProblem]:
    """Every role column of ``ctx``'s shard whose dtype cannot serve its role (schema only, no data read)."""
    lab = ctx.cfg.labels
    return role_dtype_problems(ctx.roles, ctx.schema, num_classes=lab.num_classes,
                               classes=tuple(lab.classes) if lab.classes is not None else None, shard=ctx.shard)


def problem(ctx: ShardContext, role: str, column: str | None = None) -> RoleDtypeProblem | None:
    """The dtype problem of ``role`` (optionally of one of its columns) in ``ctx``'s shard, or None."""
    return role_problem(problems(ctx), role, column)
