"""The rows the tokenizer's chat template rejected, for the checks that judge rendered tokens.

With ``[tokens] tokenizer`` the read path renders ``messages`` into ``input_ids``,
``assistant_mask`` and ``labels`` (:mod:`datacheck.derive.chat`); a conversation the template raises on
gets null token columns and its error in the ``chat_template_error`` column
(:data:`TEMPLATE_ERROR <datacheck.derive.chat.TEMPLATE_ERROR>`). ``sft.role_order`` reports those rows
with the template's message; the token rules (``empty.sequence``, ``empty.no_supervised_tokens``,
``labels.null``) leave them out, since their null columns are not the data's but the rendering's.
The rendering also keeps each row's assistant tokens before truncation at ``max_seq_len``
(:data:`UNTRUNCATED_ASSISTANT <datacheck.derive.chat.UNTRUNCATED_ASSISTANT>`), so a row whose answer
truncation cut is told from a template that marks no assistant token.
"""
from __future__ import annotations

import polars as pl

from datacheck.checks.registry import ShardContext
from datacheck.derive.chat import TEMPLATE_ERROR, UNTRUNCATED_ASSISTANT, ChatTemplate

__all__ = ["template_error", "rejected_by_template", "cut_by_truncation", "unmarked_template", "UNMARKED"]

#: the skip reason of a mask/label rule on rows rendered by a template without generation markers
UNMARKED = ("the chat template has no {% generation %} markers, so the rendered assistant_mask and labels mark "
            "nothing (one sft.assistant_mask_empty finding says what to add); these rows are judged once it has them")


def unmarked_template(ctx: ShardContext, col: str) -> ChatTemplate | None:
    """The chat template when ``col`` is a column the read path rendered with a template that has no
    ``{% generation %}`` markers (every rendered ``assistant_mask`` all zeros, every rendered label
    ``ignore_index``), else None."""
    t = ctx.chat_template
    if t is None or t.generation or col not in ctx.roles.derived:
        return None
    return t


def template_error(ctx: ShardContext) -> str | None:
    """The column of the chat template's errors when the read path rendered the messages
    (:data:`TEMPLATE_ERROR <datacheck.derive.chat.TEMPLATE_ERROR>`, possibly ``_``-prefixed when the shard
    has a column of that name), else None."""
    return next((c for c in ctx.roles.derived if c.lstrip("_") == TEMPLATE_ERROR and c in ctx.schema), None)


def rejected_by_template(ctx: ShardContext, col: str) -> pl.Expr:
    """Per row (Boolean, never null): ``col`` is a column the read path rendered and the chat
    template rejected the row's conversation (its rendered columns are null for that reason)."""
    err = template_error(ctx)
    if err is None or col not in ctx.roles.derived:
        return pl.lit(False)
    return pl.col(err).is_not_null()


def cut_by_truncation(ctx: ShardContext, col: str) -> pl.Expr | None:
    """Per row (Boolean, never null): ``col`` is a column the read path rendered and its whole
    rendering had assistant tokens (:data:`UNTRUNCATED_ASSISTANT
    <datacheck.derive.chat.UNTRUNCATED_ASSISTANT>` above 0), so a row of ``col`` with none lost them to
    truncation at ``max_seq_len``. None when the rows were not rendered (tokenized data as it is)."""
    whole = next((c for c in ctx.roles.derived if c.lstrip("_") == UNTRUNCATED_ASSISTANT and c in ctx.schema), None)
    if whole is None or col not in ctx.roles.derived:
        return None
    return (pl.col(whole) > 0).fill_null(False)
