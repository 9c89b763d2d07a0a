"""dup: rows with no content, which the dup.* checks leave to the empty checks.

A row whose trained-on content is all blank (an empty or whitespace-only text, an empty token
sequence, a conversation of no turn or only blank turns, a tabular row whose every feature is null
or NaN) is one defect, reported by the check of its kind (``empty.text``, ``empty.sequence``,
``sft.empty_turn`` / ``sft.no_assistant_turn``, ``pref.empty_response``; a feature's null by
``schema.nullable``, its NaN by ``finite.nan``). Such rows equal each other, but they are not
repeated samples: reporting them again as ``dup.exact_in_shard`` (or across shards, or as a split
leak, or as a label conflict of the empty text) counts one cause twice and buries the real repeats
among them. So the dup.* checks treat each such row as matching no other row. Real repeats of
non-blank content stay repeats (a tabular row with one feature filled in is content).
"""
from __future__ import annotations

import polars as pl

from datacheck.checks.empty import blank_text
from datacheck.checks.pref import token_responses_blank
from datacheck.checks.schema import null_judged_features
from datacheck.checks.spec import ShardContext
from datacheck.derive.messages import blank_content
from datacheck.model.roles import CONTEXT_COLUMNS, message_fields, token_id_columns

__all__ = ["blank_rows", "unjudged_responses"]


def _text_blank(col: str, dtype: pl.DataType) -> pl.Expr | None:
    """A text value's blank rule (``empty.text``'s): String null or blank; a list of strings null or
    holding no non-blank string; None for another dtype."""
    c = pl.col(col)
    if dtype == pl.String:
        return blank_text(c)
    if isinstance(dtype, pl.List) and dtype.inner == pl.String:
        return c.is_null() | c.list.eval(blank_text(pl.element()).not_()).list.any().not_()
    return None


def _messages_blank(col: str, dtype: pl.DataType) -> pl.Expr | None:
    """A conversation with no turn, or only turns of blank content (``sft.empty_turn``'s rule:
    :func:`datacheck.derive.messages.blank_content`); None when ``dtype`` holds no conversation."""
    mf = message_fields(dtype)
    if mf is None:
        return None
    c = pl.col(col)
    return c.is_null() | (c.list.len() == 0) | c.list.eval(blank_content(mf, pl.element())).list.all()


def _column_blank(col: str, dtype: pl.DataType, responses: set[str], features: set[str]) -> pl.Expr:
    """Any content column's blank rule: text and conversations as above (a preference response of
    String dtype by ``pref.empty_response``'s rule: nothing left after ``str.strip_chars``; one of
    token ids by that check's rule too, :func:`blank_rows`), a tabular feature column of ``features``
    (:func:`datacheck.checks.schema.null_judged_features`) null, or NaN when it is a float scalar
    (``schema.nullable``'s and ``finite.nan``'s rows: an empty list of numbers there is a value, which
    neither reports), a list of numbers (token ids, a mask, token labels) null or of length 0, any
    other value null."""
    c = pl.col(col)
    if col in features:
        return (c.is_null() | c.is_nan()) if dtype.is_float() else c.is_null()
    if col in responses and dtype == pl.String:
        return c.is_null() | (c.str.strip_chars().str.len_chars() == 0)
    got = _text_blank(col, dtype) if dtype == pl.String or isinstance(dtype, pl.List) else None
    if got is None and isinstance(dtype, pl.List) and isinstance(dtype.inner, pl.Struct):
        got = _messages_blank(col, dtype)
    if got is not None:
        return got
    if isinstance(dtype, pl.List):
        return c.is_null() | (c.list.len() == 0)
    return c.is_null()


def _judged(ctx: ShardContext, features: set[str]) -> set[str]:
    """The columns an empty check judges blank by the rules above: the text role (String or list of
    strings: ``empty.text``), the token-id lists (``empty.sequence``), the conversation
    (``sft.empty_turn``, ``sft.no_assistant_turn``), a preference pair's responses
    (``pref.empty_response``) and a tabular shard's ``features`` (``schema.nullable`` /
    ``finite.nan``)."""
    r, s = ctx.roles, ctx.schema
    out = set(features)
    out |= {c for c in r.text if _text_blank(c, s[c]) is not None}
    out |= {c for c in token_id_columns(r, s) if isinstance(s[c], pl.List)}
    for c in (r.messages, r.chosen, r.rejected):
        if c is not None and c in s:
            out.add(c)
    return out


def blank_rows(ctx: ShardContext, cols: list[str]) -> pl.Expr | None:
    """Per row (Boolean): the row's content ``cols`` holds nothing but blanks, so an empty check
    reports it and the dup.* checks match it with no other row.

    The columns judged are ``cols`` less the class label and regression targets (what a row
    answers, not what it holds) and the conditioning columns that are not role columns
    (:data:`datacheck.model.roles.CONTEXT_COLUMNS`: a ``prompt``, ``system`` or ``tools`` repeated
    beside an empty response conditions nothing trained on). A row is blank when every one of them
    is blank by its dtype (:func:`_column_blank`) and at least one is a column an empty check
    judges (:func:`_judged`), so the row is always reported there: in a ``tabular`` or
    ``regression`` shard, a row whose every feature is null or NaN, whatever its label or target
    (``schema.nullable`` / ``finite.nan`` report it; ``labels.null`` a null answer). Returns None
    when no column of the content is such a column (e.g. a text regression shard's numeric
    columns, a feature column a contract declares nullable): no row is left out.
    """
    answers = {ctx.roles.label, *ctx.roles.of("target")}
    roles = set(ctx.roles.columns())
    own = [c for c in cols if c not in answers and (c in roles or c not in CONTEXT_COLUMNS)]
    features = set(null_judged_features(ctx))
    if not own or not set(own) & _judged(ctx, features):
        return None
    responses = {c for c in (ctx.roles.chosen, ctx.roles.rejected) if c is not None}
    tokenized = token_responses_blank(ctx)[0] if responses & set(own) else {}
    # one n-ary node, not a chain of one & per column (a chain's depth made polars' planning super-linear)
    return pl.all_horizontal([tokenized[c] if c in tokenized else _column_blank(c, ctx.schema[c], responses,
                                                                                    features)
                              for c in own]).fill_null(False)


def unjudged_responses(ctx: ShardContext, cols: list[str]) -> str | None:
    """What :func:`blank_rows` cannot judge in the content ``cols``, for a dup.* check's skipped entry:
    preference responses of token ids whose whitespace tokens are not known (no ``[tokens] tokenizer``,
    or one whose vocabulary is not read: :func:`datacheck.checks.pref.token_responses_blank`), so a
    pair of whitespace-token responses (GPT-2's ``[220]``), blank as a text pair of ``" "`` is, is
    compared as content. None when nothing is left unjudged."""
    rules, lacking = token_responses_blank(ctx)
    judged = [c for c in rules if c in cols]
    if lacking is None or not judged or blank_rows(ctx, cols) is None:
        return None
    return (f"{' and '.join(map(repr, judged))} hold token ids and {lacking}: a pair whose responses are only "
            "whitespace tokens (GPT-2's [220], ' ') is not known to be blank, so such pairs are compared as "
            "content (a text pair of whitespace responses is left to pref.empty_response); set [tokens] "
            "tokenizer")
