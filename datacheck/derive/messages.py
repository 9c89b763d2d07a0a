"""Chat conversations (the ``messages`` role) normalized for every layout, as polars expressions:
shared by the sft and pref rules and by the chat-template rendering (:mod:`datacheck.derive.chat`,
:mod:`datacheck.derive.pairs`).

One normalization for every layout (:func:`datacheck.model.roles.message_fields`): the speaker
field (``role`` or ShareGPT ``from``) mapped to the canonical roles of
:data:`datacheck.model.roles.CHAT_ROLE_NAMES`, the content field (``content`` or ``value``) as a
string or a list of parts. Every expression is a polars list expression evaluated per row inside
the shard's one query (``list.eval``), never a Python loop over rows.
"""
from __future__ import annotations

import polars as pl

from datacheck.model.roles import CHAT_ROLE_NAMES, MessageFields

__all__ = ["KNOWN_ROLES", "ASSISTANT_ROLES", "INVISIBLE", "canonical_role", "has_tool_calls", "blank_content", "turn_roles",
           "turn_blank", "template_turns", "turns_for_template"]

#: the canonical roles (values of CHAT_ROLE_NAMES)
KNOWN_ROLES = tuple(sorted(set(CHAT_ROLE_NAMES.values())))
#: canonical roles whose turns are trained on (an assistant answer, an assistant tool call)
ASSISTANT_ROLES = ("assistant", "tool_call")
#: characters that show nothing: Unicode whitespace (regex ``\s``) plus the zero-width and
#: invisible format characters U+200B-U+200D, U+2060 (word joiner), U+FEFF (byte order mark),
#: U+00AD (soft hyphen): a turn of only these renders as an empty turn.
INVISIBLE = r"[\s\x{200B}\x{200C}\x{200D}\x{2060}\x{FEFF}\x{00AD}]"
#: one character that shows something (not in :data:`INVISIBLE`): a text is blank when it holds none.
#: The search stops at the first such character (10-40x less CPU than deleting the invisible ones and
#: comparing with "", which rewrote every text).
_VISIBLE = "[^" + INVISIBLE[1:]


def _blank(text: pl.Expr) -> pl.Expr:
    """Per string: True when null, empty or only :data:`INVISIBLE` characters."""
    return text.is_null() | ~text.str.contains(_VISIBLE)


def canonical_role(mf: MessageFields, turn: pl.Expr) -> pl.Expr:
    """Per turn (a message struct): its canonical role (String; null when the speaker is null; the
    speaker unchanged when it is not a known name). An assistant turn carrying a non-empty tool-call
    field (OpenAI ``tool_calls``) is ``tool_call``."""
    raw = turn.struct.field(mf.role)
    role = raw.replace(CHAT_ROLE_NAMES)
    if mf.tool_calls is not None:
        role = pl.when((role == "assistant") & has_tool_calls(mf, turn)).then(pl.lit("tool_call")).otherwise(role)
    return role


def has_tool_calls(mf: MessageFields, turn: pl.Expr) -> pl.Expr:
    """Per turn: True when its tool-call field (OpenAI ``tool_calls``: a non-empty list; legacy
    ``function_call``: not null) holds a call; False when the struct has no such field."""
    if mf.tool_calls is None:
        return pl.lit(False)
    calls = turn.struct.field(mf.tool_calls)
    has = calls.is_not_null()
    if mf.tool_calls == "tool_calls":
        has = has & (calls.list.len() > 0)
    return has.fill_null(False)


def blank_content(mf: MessageFields, turn: pl.Expr) -> pl.Expr:
    """Per turn: True when its content is null, empty or only whitespace/invisible characters
    (:data:`INVISIBLE`) and it carries no tool call (:func:`has_tool_calls`: an OpenAI assistant
    message with ``tool_calls`` and ``content`` null is a call, not an empty turn). Content as parts:
    no part, or every part is a text part (``type`` absent or ``"text"``) whose text is blank; a part
    of another type (an image) is content."""
    content = turn.struct.field(mf.content)
    call = has_tool_calls(mf, turn)
    if not mf.parts:
        return _blank(content) & ~call
    part = pl.element()
    text = part.struct.field(mf.part_text or "text")
    empty_text = _blank(text)
    if mf.part_type:
        empty_text = empty_text & (part.struct.field("type").fill_null("text") == "text")
    all_blank = content.list.eval(empty_text).list.all()
    return (content.is_null() | (content.list.len() == 0) | all_blank) & ~call


def turn_roles(col: str, mf: MessageFields) -> pl.Expr:
    """Per row: the canonical role of each turn (List(String))."""
    return pl.col(col).list.eval(canonical_role(mf, pl.element()))


def turn_blank(col: str, mf: MessageFields) -> pl.Expr:
    """Per row: whether each turn's content is blank (List(Boolean), see :func:`blank_content`)."""
    return pl.col(col).list.eval(blank_content(mf, pl.element()))


def _content_text(mf: MessageFields, turn: pl.Expr) -> pl.Expr:
    """Per turn: the content as one string (parts: their text fields joined; null parts skipped)."""
    content = turn.struct.field(mf.content)
    if not mf.parts:
        return content.cast(pl.String)
    return content.list.eval(pl.element().struct.field(mf.part_text or "text").drop_nulls()).list.join("")


def template_turns(col: str, mf: MessageFields) -> pl.Expr:
    """Per row: the conversation as a chat template reads it, ``List(Struct{role, content})`` with
    roles ``system``/``user``/``assistant``/``tool`` (a tool call is an assistant turn; ShareGPT
    names mapped as :data:`CHAT_ROLE_NAMES`; an unknown name is passed as written) and content a
    string (text parts joined)."""
    return turns_for_template(pl.col(col), mf)


def turns_for_template(turns: pl.Expr, mf: MessageFields) -> pl.Expr:
    """Per row: the list of message structs ``turns`` as a chat template reads it (see
    :func:`template_turns`, which applies it to a column)."""
    turn = pl.element()
    role = canonical_role(mf, turn).replace({"tool_call": "assistant"})
    return turns.list.eval(pl.struct(role.alias("role"), _content_text(mf, turn).alias("content")))
