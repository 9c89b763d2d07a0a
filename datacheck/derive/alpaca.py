"""The Alpaca layout (String ``instruction``/``output`` columns) as the conversation it stands for:
a derived ``messages`` column, so the sft rules judge Alpaca rows like chat data.
"""
from __future__ import annotations

import polars as pl

__all__ = ["ALPACA_COLUMNS", "alpaca_messages"]

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
