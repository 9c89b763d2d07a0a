"""The Alpaca layout (String ``instruction``/``output`` columns) and TRL's prompt-completion layout
(``prompt``/``completion``) as the conversation each stands for: a derived ``messages`` column, so
the sft rules judge those rows like chat data.
"""
from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from datacheck.model.roles import message_fields

__all__ = ["ALPACA_COLUMNS", "alpaca_messages", "PROMPT_COMPLETION_COLUMNS", "PromptCompletion",
           "prompt_completion_messages"]

#: the Alpaca layout (Stanford Alpaca, LLaMA-Factory's ``alpaca`` format): the prompt is the
#: non-empty ones of ``instruction`` and ``input`` joined by a newline (LLaMA-Factory's converter:
#: ``"\n".join(query)``; "" when both are empty), the response ``output``; an optional ``system`` column opens
#: the conversation; an optional ``history`` column (``[[instruction, response], ...]``, the earlier
#: rounds) comes before the current round, each pair a user and an assistant turn, in order
#: (LLaMA-Factory's ``AlpacaDatasetConverter``).
ALPACA_COLUMNS = ("instruction", "input", "output", "system", "history")

_TURN = pl.Struct({"role": pl.String, "content": pl.String})


def _history_ok(dtype: pl.DataType | None) -> bool:
    """``history`` absent, all null, or a list of lists of String (each pair ``[prompt, response]``)."""
    if dtype is None or dtype == pl.Null:
        return True
    if not isinstance(dtype, pl.List):
        return False
    inner = dtype.inner
    return inner == pl.Null or (isinstance(inner, pl.List) and inner.inner in (pl.String, pl.Null))


def alpaca_messages(schema: dict[str, pl.DataType]) -> pl.Expr | None:
    """Per row: the conversation of an Alpaca row as ``List(Struct{role, content})`` (see
    :data:`ALPACA_COLUMNS`), or None when the shard is not that layout (String ``instruction`` and
    ``output`` columns; ``input`` and ``system``, when present, String; ``history``, when present, a
    list of ``[prompt, response]`` String lists).

    Order, as LLaMA-Factory's converter builds it: the ``system`` turn (when not empty), then each
    ``history`` pair as a user turn and an assistant turn, then the current user turn and the
    ``output``. A history pair that is not two strings gives null content for what it lacks (the
    converter would fail on it; ``sft.empty_turn`` reports it); a null or empty ``history`` adds no turn."""
    if schema.get("instruction") != pl.String or schema.get("output") != pl.String:
        return None
    if any(c in schema and schema[c] not in (pl.String, pl.Null) for c in ("input", "system")):
        return None
    if not _history_ok(schema.get("history")):
        return None
    def given(c: pl.Expr) -> pl.Expr:
        return pl.when(c.is_not_null() & (c != "")).then(c)

    # the converter's "\n".join of the non-empty instruction and input ("" when both are empty)
    parts = [given(pl.col("instruction"))] + ([given(pl.col("input").cast(pl.String))] if "input" in schema else [])
    user = pl.concat_str(parts, separator="\n", ignore_nulls=True)
    turn = lambda role, content: pl.struct(pl.lit(role).alias("role"), content.alias("content"))  # noqa: E731
    turns = [turn("user", user), turn("assistant", pl.col("output"))]
    if "history" in schema and schema["history"] != pl.Null:
        pair = pl.element().cast(pl.List(pl.String))
        rounds = pl.col("history").cast(pl.List(pl.List(pl.String))).list.eval(pl.concat_list([
            turn("user", pair.list.get(0, null_on_oob=True)), turn("assistant", pair.list.get(1, null_on_oob=True)),
        ]).explode())
        turns.insert(0, rounds.fill_null(pl.lit([], dtype=pl.List(_TURN))))
    body = pl.concat_list(turns)
    if "system" not in schema:
        return body
    sys_ = pl.col("system").cast(pl.String)
    return pl.when(sys_.is_null() | (sys_ == "")).then(body).otherwise(pl.concat_list([turn("system", sys_), *turns]))


#: TRL's prompt-completion layout (``SFTTrainer``'s "prompt-completion" dataset type): ``prompt`` and
#: ``completion`` both text (standard: tokenized as they are, no chat template) or both conversations
#: (conversational: the chat template renders prompt + completion, the loss on the completion)
PROMPT_COMPLETION_COLUMNS = ("prompt", "completion")

#: the columns beside which ``prompt``/``completion`` are another layout: preference pairs (DPO's
#: prompt), conversations or tokens of their own
_NOT_PROMPT_COMPLETION = ("chosen", "rejected", "messages", "conversations", "input_ids", "completion_input_ids")


@dataclass(frozen=True)
class PromptCompletion:
    """A prompt-completion row as a conversation (:func:`prompt_completion_messages`).

    Attributes:
        expr: per row, the conversation (``List(Struct)``): the prompt's turns (a text prompt: one
            user turn), then the completion's (a text completion: one assistant turn).
        dtype: the dtype of ``expr``.
        conversational: True when both columns are conversations (the trainer renders them with the
            chat template); False for text (TRL tokenizes them without one).
    """

    expr: pl.Expr
    dtype: pl.DataType
    conversational: bool


def prompt_completion_messages(schema: dict[str, pl.DataType]) -> PromptCompletion | None:
    """TRL's prompt-completion rows (:data:`PROMPT_COMPLETION_COLUMNS`) as a conversation, or None when
    the shard is not that layout: ``prompt`` and ``completion`` both String, or both lists of
    ``{role, content}`` structs with string content; no column of another layout beside them (a
    preference pair, a conversation, token ids) and no Boolean ``label`` (TRL's KTO rows). A null
    prompt or completion gives null content (``sft.empty_turn`` reports it, as an empty one)."""
    p, c = schema.get("prompt"), schema.get("completion")
    if p is None or c is None or any(k in schema for k in _NOT_PROMPT_COMPLETION):
        return None
    if any(schema.get(k) == pl.Boolean for k in ("label", "labels")):
        return None
    if p in (pl.String, pl.Null) and c in (pl.String, pl.Null) and pl.String in (p, c):
        turn = lambda role, col: pl.struct(pl.lit(role).alias("role"),  # noqa: E731
                                           pl.col(col).cast(pl.String).alias("content"))
        return PromptCompletion(pl.concat_list([turn("user", "prompt"), turn("assistant", "completion")]),
                                pl.List(_TURN), False)
    mp, mc = message_fields(p), message_fields(c)
    if mp is None or mc is None or mp.parts or mc.parts:
        return None
    if p == c:
        return PromptCompletion(pl.concat_list([pl.col("prompt"), pl.col("completion")]), p, True)

    def turns(col: str, role: str, content: str) -> pl.Expr:
        e = pl.element().struct
        return pl.col(col).list.eval(pl.struct(e.field(role).alias("role"),
                                               e.field(content).cast(pl.String).alias("content")))

    return PromptCompletion(pl.concat_list([turns("prompt", mp.role, mp.content),
                                            turns("completion", mc.role, mc.content)]), pl.List(_TURN), True)
