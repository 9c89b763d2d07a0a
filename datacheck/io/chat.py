"""Chat conversations (the ``messages`` role): their normalization, shared by the sft rules, and
their rendering through the tokenizer's chat template (``[tokens] tokenizer``).

One normalization for every layout (:func:`datacheck.model.roles.message_fields`): the speaker
field (``role`` or ShareGPT ``from``) mapped to the canonical roles of
:data:`datacheck.model.roles.CHAT_ROLE_NAMES`, the content field (``content`` or ``value``) as a
string or a list of parts. Every expression is a polars list expression evaluated per row inside
the shard's one query (``list.eval``), never a Python loop over rows.

Rendering (:func:`render_chat`) is the one per-row Python step: each conversation goes through
transformers' ``apply_chat_template(..., tokenize=True, return_dict=True,
return_assistant_tokens_mask=True)`` exactly as a trainer calls it (batched, 512 conversations a
call), truncated at ``[tokens] max_seq_len`` on ``truncation_side`` when it is set. The result is
the columns a tokenized SFT shard has (``input_ids``, ``assistant_mask``, and ``labels``: the token
id on assistant tokens, ``ignore_index`` elsewhere, as assistant-only loss builds them), which the
read path adds to the shard so that the tokenized ``sft.*`` rules judge them unchanged.
transformers and jinja2 are the optional ``chat`` extra, imported lazily.
"""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import polars as pl
import pyarrow as pa

from datacheck.model.errors import UsageError
from datacheck.model.roles import CHAT_ROLE_NAMES, MessageFields, message_fields

__all__ = ["canonical_role", "blank_content", "turn_roles", "turn_blank", "KNOWN_ROLES", "ASSISTANT_ROLES",
           "INVISIBLE", "CHAT_INSTALL", "RENDERED_COLUMNS", "Rendered", "render_chat", "load_chat_tokenizer",
           "template_turns", "ALPACA_COLUMNS", "alpaca_messages", "TEMPLATE_ERROR", "template_error_column",
           "PAIR_COLUMNS", "response_turns", "RenderedPairs", "render_pairs", "UNTRUNCATED_ASSISTANT",
           "extract_prompt", "ImplicitPairs", "split_implicit_pairs"]

#: the install command of the optional ``chat`` extra (transformers renders chat templates)
CHAT_INSTALL = ('pip install "transformers>=4.45" "jinja2>=3.1" (or, in the datacheck source folder, '
                'pip install -e ".[chat]")')
#: the columns rendering adds (the roles of the same names)
RENDERED_COLUMNS = ("input_ids", "assistant_mask", "labels")
#: the column rendering adds beside them: per row, the first line of the error the chat template
#: (or the renderer) raised on the conversation (String; null where it rendered or the
#: conversation is null); ``sft.role_order`` fails those rows. Prefixed with ``_`` until the name
#: is free when the shard already has a column of that name (:func:`template_error_column`).
TEMPLATE_ERROR = "chat_template_error"
#: the column rendering adds beside them: per row, the assistant tokens (``{% generation %}``) of the
#: whole rendering, before truncation at ``max_seq_len`` (UInt32; null where the row has no tokens).
#: A row whose kept mask is all zero while this is above 0 lost its answer to truncation, not to the
#: template (``sft.assistant_mask_empty``, ``empty.no_supervised_tokens``). ``_``-prefixed like
#: :data:`TEMPLATE_ERROR` when the shard has a column of that name.
UNTRUNCATED_ASSISTANT = "chat_assistant_tokens_untruncated"
#: conversations per apply_chat_template call
_BATCH = 512

#: the canonical roles (values of CHAT_ROLE_NAMES)
KNOWN_ROLES = tuple(sorted(set(CHAT_ROLE_NAMES.values())))
#: canonical roles whose turns are trained on (an assistant answer, an assistant tool call)
ASSISTANT_ROLES = ("assistant", "tool_call")
#: characters that show nothing: Unicode whitespace (regex ``\s``) plus the zero-width and
#: invisible format characters U+200B-U+200D, U+2060 (word joiner), U+FEFF (byte order mark),
#: U+00AD (soft hyphen): a turn of only these renders as an empty turn.
INVISIBLE = r"[\s\x{200B}\x{200C}\x{200D}\x{2060}\x{FEFF}\x{00AD}]"


def canonical_role(mf: MessageFields, turn: pl.Expr) -> pl.Expr:
    """Per turn (a message struct): its canonical role (String; null when the speaker is null; the
    speaker unchanged when it is not a known name). An assistant turn carrying a non-empty tool-call
    field (OpenAI ``tool_calls``) is ``tool_call``."""
    raw = turn.struct.field(mf.role)
    role = raw.replace(CHAT_ROLE_NAMES)
    if mf.tool_calls is not None:
        calls = turn.struct.field(mf.tool_calls)
        has = calls.is_not_null()
        if mf.tool_calls == "tool_calls":
            has = has & (calls.list.len() > 0)
        role = pl.when((role == "assistant") & has.fill_null(False)).then(pl.lit("tool_call")).otherwise(role)
    return role


def blank_content(mf: MessageFields, turn: pl.Expr) -> pl.Expr:
    """Per turn: True when its content is null, empty or only whitespace/invisible characters
    (:data:`INVISIBLE`). Content as parts: no part, or every part is a text part (``type`` absent or
    ``"text"``) whose text is blank; a part of another type (an image) is content."""
    content = turn.struct.field(mf.content)
    if not mf.parts:
        return content.is_null() | (content.str.replace_all(INVISIBLE, "") == "")
    part = pl.element()
    text = part.struct.field(mf.part_text or "text")
    empty_text = text.is_null() | (text.str.replace_all(INVISIBLE, "") == "")
    if mf.part_type:
        empty_text = empty_text & (part.struct.field("type").fill_null("text") == "text")
    all_blank = content.list.eval(empty_text).list.all()
    return content.is_null() | (content.list.len() == 0) | all_blank


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
    return _template_turns(pl.col(col), mf)


def _template_turns(turns: pl.Expr, mf: MessageFields) -> pl.Expr:
    turn = pl.element()
    role = canonical_role(mf, turn).replace({"tool_call": "assistant"})
    return turns.list.eval(pl.struct(role.alias("role"), _content_text(mf, turn).alias("content")))


def response_turns(col: str, dtype: pl.DataType) -> pl.Expr | None:
    """Per row: a preference response (``chosen`` or ``rejected``) as the turns that continue the
    prompt, ``List(Struct{role, content})`` as :func:`template_turns` gives them (null where the
    response is null), or None for a dtype that is not a response a chat template renders:

    - ``String``: the assistant's answer (one assistant turn);
    - a message struct (LLaMA-Factory's ShareGPT preference layout, ``{from, value}``): that turn;
    - a list of message structs (TRL's conversational layout): those turns.
    """
    c = pl.col(col)
    if dtype == pl.String:
        turn = pl.struct(pl.lit("assistant").alias("role"), c.alias("content"))
        return pl.when(c.is_not_null()).then(pl.concat_list([turn]))
    if isinstance(dtype, pl.Struct):
        mf = message_fields(pl.List(dtype))
        if mf is None:
            return None
        return pl.when(c.is_not_null()).then(_template_turns(pl.concat_list([c]), mf))
    mf = message_fields(dtype)
    return None if mf is None else _template_turns(c, mf)


def _import_transformers() -> Any:
    try:
        import transformers  # lazy: the optional ``chat`` extra
    except ImportError:
        return None
    return transformers


@functools.lru_cache(maxsize=4)
def _load(path: str, _stamp: float) -> Any:
    transformers = _import_transformers()
    try:
        return transformers.AutoTokenizer.from_pretrained(path)
    except Exception as exc:  # noqa: BLE001 - any loader failure is the config's tokenizer path
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise UsageError(f"[tokens] tokenizer = {path!r}: transformers cannot load a tokenizer there ({first}); "
                         "give a folder holding tokenizer.json and tokenizer_config.json") from None


def load_chat_tokenizer(path: str) -> tuple[Any, str | None]:
    """The tokenizer of ``[tokens] tokenizer`` (a folder, or a file inside it) for rendering, or
    (None, why) when it cannot render: transformers is not installed (the install command), or the
    tokenizer has no chat template. Loaded once per folder and modification time.

    Raises:
        UsageError: no such path, or transformers cannot load a tokenizer from it (exit 2).
    """
    p = Path(path)
    if not p.exists():
        raise UsageError(f"[tokens] tokenizer = {path!r}: no such file or folder; give the tokenizer's folder "
                         "(tokenizer.json, tokenizer_config.json and its chat template)")
    folder = p if p.is_dir() else p.parent
    if _import_transformers() is None:
        return None, f"rendering messages with [tokens] tokenizer needs transformers and jinja2: {CHAT_INSTALL}"
    stamp = max((f.stat().st_mtime for f in folder.iterdir() if f.is_file()), default=0.0)
    tok = _load(str(folder), stamp)
    if not getattr(tok, "chat_template", None):
        return None, (f"the tokenizer in {folder} has no chat template (set chat_template in tokenizer_config.json "
                      "or add chat_template.jinja): messages cannot be rendered as the trainer does")
    return tok, None


def template_error_column(names: Any, name: str = TEMPLATE_ERROR) -> str:
    """The name of a column rendering adds (``name``: :data:`TEMPLATE_ERROR` or
    :data:`UNTRUNCATED_ASSISTANT`) among the columns ``names`` (an iterable of column names) of a
    shard: ``name``, prefixed with ``_`` until it is not one of them."""
    taken = set(names)
    while name in taken:
        name = "_" + name
    return name


@dataclass
class Rendered:
    """The result of :func:`render_chat`.

    Attributes:
        columns: ``input_ids`` (List(Int32), token ids), ``assistant_mask`` (List(Int8), 1 on tokens
            the template marks with ``{% generation %}``), ``labels`` (List(Int32): the id where the
            mask is 1, else ``ignore_index``), all three truncated at ``max_seq_len``;
            :data:`UNTRUNCATED_ASSISTANT` (UInt32: the mask's 1s before truncation) and
            :data:`TEMPLATE_ERROR`; one row per input row, null where the conversation is null or the
            template rejected it.
        rejected: rows (0-based) the template raised on, with the first error text.
        tokens: tokens rendered in all.
    """

    columns: pl.DataFrame
    rejected: list[int]
    first_error: str | None
    tokens: int


def _call(tok: Any, convs: list[Any]) -> dict[str, Any]:
    """The whole rendering (no truncation: :func:`render_chat` truncates, as TRL's SFTTrainer
    truncates the rendered ids after rendering)."""
    return tok.apply_chat_template(convs, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)


def _cut(seq: list[int], max_len: int | None, side: str) -> list[int]:
    """``seq`` truncated to ``max_len`` on ``side`` (right keeps the start, left the end)."""
    if max_len is None or len(seq) <= max_len:
        return seq
    return seq[:max_len] if side == "right" else seq[len(seq) - max_len:]


def _error_text(exc: Exception) -> str:
    """The first line of a rendering error, its type named (``TemplateError: Conversation roles must
    alternate ...``, ``TypeError: can only concatenate str ...``)."""
    first = (str(exc).splitlines() or [""])[0].strip()
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def render_chat(conversations: list[Any], tok: Any, max_seq_len: int | None, truncation_side: str,
                ignore_index: int) -> Rendered:
    """Render ``conversations`` (lists of ``{role, content}`` dicts as :func:`template_turns` gives
    them, or None) with ``tok``'s chat template, as the trainer does (see the module docstring): the
    whole conversation rendered, then its ids and mask truncated at ``max_seq_len`` on
    ``truncation_side`` (the assistant tokens before truncation kept in :data:`UNTRUNCATED_ASSISTANT`).
    A batch the template raises on is rendered row by row, so a good row of that batch is rendered
    (never blamed); the rows it still raises on (the template's ``raise_exception``, a content type
    the template cannot concatenate) have null token columns and their error in :data:`TEMPLATE_ERROR`.
    """
    tok.truncation_side = truncation_side
    n = len(conversations)
    ids: list[Any] = [None] * n
    masks: list[Any] = [None] * n
    whole: list[int | None] = [None] * n
    errors: list[str | None] = [None] * n
    rejected: list[int] = []
    first_error: str | None = None
    tlog = logging.getLogger("transformers")
    level = tlog.level
    tlog.setLevel(logging.ERROR)  # the "no {% generation %}" warning is what sft.assistant_mask_empty reports
    try:
        for start in range(0, n, _BATCH):
            rows = [i for i in range(start, min(start + _BATCH, n)) if conversations[i] is not None]
            if not rows:
                continue
            try:
                out = _call(tok, [conversations[i] for i in rows])
                for k, i in enumerate(rows):
                    ids[i], masks[i] = out["input_ids"][k], out["assistant_masks"][k]
            except Exception:  # noqa: BLE001 - find the rows the template rejects, one by one
                for i in rows:
                    try:
                        out = _call(tok, [conversations[i]])
                        ids[i], masks[i] = out["input_ids"][0], out["assistant_masks"][0]
                    except Exception as exc:  # noqa: BLE001 - a template's raise_exception, a bad value
                        rejected.append(i)
                        errors[i] = _error_text(exc)
                        first_error = first_error or errors[i]
    finally:
        tlog.setLevel(level)
    for i in range(n):
        if ids[i] is not None:
            whole[i] = int(sum(masks[i]))
            ids[i] = _cut(ids[i], max_seq_len, truncation_side)
            masks[i] = _cut(masks[i], max_seq_len, truncation_side)
    valid = np.array([x is not None for x in ids], dtype=bool)
    lens = np.array([len(x) if x is not None else 0 for x in ids], dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lens, out=offsets[1:])
    flat_ids = np.fromiter((t for x in ids if x is not None for t in x), dtype=np.int32, count=int(lens.sum()))
    flat_mask = np.fromiter((t for x in masks if x is not None for t in x), dtype=np.int8, count=int(lens.sum()))
    flat_labels = np.where(flat_mask == 1, flat_ids, np.int32(ignore_index)).astype(np.int32)
    nulls = pa.array(~valid)

    def lists(values: np.ndarray) -> pl.Series:
        return pl.from_arrow(pa.ListArray.from_arrays(pa.array(offsets), pa.array(values), mask=nulls))  # type: ignore[return-value]

    cols = pl.DataFrame([lists(flat_ids).alias("input_ids"), lists(flat_mask).alias("assistant_mask"),
                         lists(flat_labels).alias("labels"), pl.Series(UNTRUNCATED_ASSISTANT, whole, dtype=pl.UInt32),
                         pl.Series(TEMPLATE_ERROR, errors, dtype=pl.String)])
    return Rendered(columns=cols, rejected=rejected, first_error=first_error, tokens=int(lens.sum()))


#: the columns preference rendering adds (:func:`render_pairs`), beside :data:`TEMPLATE_ERROR`
PAIR_COLUMNS = ("chosen_input_ids", "rejected_input_ids", "chosen_response_tokens", "rejected_response_tokens")


@dataclass
class RenderedPairs:
    """The result of :func:`render_pairs`.

    Attributes:
        columns: one row per input row: ``chosen_input_ids`` / ``rejected_input_ids`` (List(Int32):
            prompt + response token ids, truncated at ``max_seq_len`` on ``truncation_side``),
            ``chosen_response_tokens`` / ``rejected_response_tokens`` (UInt32: the response's tokens
            left after that truncation) and :data:`TEMPLATE_ERROR` (String: the first line of the
            error the template raised on the row, else null). The token columns are null where the
            prompt or a response is null or the template rejected the row.
        rejected: rows (0-based) the template raised on, in row order.
        tokens: tokens rendered in all (prompt + chosen and prompt + rejected, before truncation).
    """

    columns: pl.DataFrame
    rejected: list[int]
    tokens: int


def _texts(tok: Any, convs: list[Any], generation_prompt: bool, errors: list[str | None]) -> list[str | None]:
    """``convs`` rendered to text (``tokenize=False``), 512 a call; a batch the template raises on
    is rendered row by row; a row it raises on is None and its error is set in ``errors`` (the first
    one kept). None conversations (and rows with an error already) are not rendered."""
    out: list[str | None] = [None] * len(convs)
    for start in range(0, len(convs), _BATCH):
        rows = [i for i in range(start, min(start + _BATCH, len(convs))) if convs[i] is not None and errors[i] is None]
        if not rows:
            continue
        try:
            got = tok.apply_chat_template([convs[i] for i in rows], tokenize=False,
                                          add_generation_prompt=generation_prompt)
            for k, i in enumerate(rows):
                out[i] = got[k]
        except Exception:  # noqa: BLE001 - find the rows the template rejects, one by one
            for i in rows:
                try:
                    out[i] = tok.apply_chat_template(convs[i], tokenize=False, add_generation_prompt=generation_prompt)
                except Exception as exc:  # noqa: BLE001 - a template's raise_exception, a bad value
                    errors[i] = _error_text(exc)
    return out


def _common_prefix(a: str, b: str) -> str:
    """The longest common prefix of two strings."""
    n = min(len(a), len(b))
    k = next((i for i in range(n) if a[i] != b[i]), n)
    return a[:k]


def render_pairs(prompts: list[Any], chosen: list[Any], rejected: list[Any], tok: Any, max_seq_len: int | None,
                 truncation_side: str) -> RenderedPairs:
    """Render preference pairs as TRL's DPOTrainer does with a conversational dataset
    (``maybe_apply_chat_template`` then ``tokenize_row``):

    1. the prompt (turns as :func:`template_turns` gives them) rendered with
       ``add_generation_prompt=True``; prompt + chosen and prompt + rejected rendered whole;
    2. the prompt text is the common prefix of the rendered prompt and the rendered prompt + chosen
       (TRL: a template whose generation prompt differs from the start of the answer, e.g. an
       inserted ``<think>``); each response is its rendered conversation after that prefix;
    3. prompt and responses tokenized separately without special tokens (``add_special_tokens=False``);
    4. each sequence (prompt + response) truncated at ``max_seq_len`` on ``truncation_side``
       (TRL's ``max_length`` with ``truncation_mode`` keep_start = right, keep_end = left).

    TRL (0.12-0.19) also appends the eos id to both responses: the same id on both sides, it
    changes neither equality nor emptiness, and is not added here.

    Args:
        prompts: per row, the prompt turns (list of ``{role, content}`` dicts) or None.
        chosen, rejected: per row, the response turns (:func:`response_turns`) or None.
        tok: a transformers tokenizer with a chat template (:func:`load_chat_tokenizer`).
        max_seq_len: the trainer's maximum length (tokens), or None (no truncation).
        truncation_side: ``"right"`` (keep the start) or ``"left"`` (keep the end).
    """
    n = len(prompts)
    errors: list[str | None] = [None] * n
    tlog = logging.getLogger("transformers")
    level = tlog.level
    tlog.setLevel(logging.ERROR)
    try:
        full_c = _texts(tok, [p + c if p is not None and c is not None else None for p, c in zip(prompts, chosen)],
                        False, errors)
        full_r = _texts(tok, [p + r if p is not None and r is not None else None for p, r in zip(prompts, rejected)],
                        False, errors)
        head = _texts(tok, list(prompts), True, errors)
    finally:
        tlog.setLevel(level)
    ok = [i for i in range(n) if errors[i] is None and None not in (head[i], full_c[i], full_r[i])]
    texts_p, texts_c, texts_r = [], [], []
    for i in ok:
        p = _common_prefix(head[i], full_c[i])  # type: ignore[arg-type]
        texts_p.append(p)
        texts_c.append(full_c[i][len(p):])  # type: ignore[index]
        texts_r.append(full_r[i][len(p):])  # type: ignore[index]

    def ids(texts: list[str]) -> list[list[int]]:
        return tok(texts, add_special_tokens=False)["input_ids"] if texts else []

    p_ids, c_ids, r_ids = ids(texts_p), ids(texts_c), ids(texts_r)
    seq_c: list[Any] = [None] * n
    seq_r: list[Any] = [None] * n
    kept_c: list[int | None] = [None] * n
    kept_r: list[int | None] = [None] * n
    total = 0
    for k, i in enumerate(ok):
        for resp, seqs, kept in ((c_ids[k], seq_c, kept_c), (r_ids[k], seq_r, kept_r)):
            full = p_ids[k] + resp
            total += len(full)
            seqs[i], kept[i] = _truncate(full, len(p_ids[k]), max_seq_len, truncation_side)
    cols = pl.DataFrame([
        pl.Series(PAIR_COLUMNS[0], seq_c, dtype=pl.List(pl.Int32)),
        pl.Series(PAIR_COLUMNS[1], seq_r, dtype=pl.List(pl.Int32)),
        pl.Series(PAIR_COLUMNS[2], kept_c, dtype=pl.UInt32),
        pl.Series(PAIR_COLUMNS[3], kept_r, dtype=pl.UInt32),
        pl.Series(TEMPLATE_ERROR, errors, dtype=pl.String),
    ])
    return RenderedPairs(columns=cols, rejected=[i for i in range(n) if errors[i] is not None], tokens=total)


def _truncate(full: list[int], prompt_len: int, max_len: int | None, side: str) -> tuple[list[int], int]:
    """(``full`` truncated at ``max_len`` on ``side``, the response tokens it keeps): the response is
    ``full[prompt_len:]``; right truncation keeps the start, left the end."""
    resp = len(full) - prompt_len
    if max_len is None or len(full) <= max_len:
        return full, resp
    if side == "left":
        return full[len(full) - max_len:], min(resp, max_len)
    return full[:max_len], max(0, max_len - prompt_len)


def extract_prompt(chosen: Sequence[Any], rejected: Sequence[Any]) -> tuple[Any, Any, Any] | None:
    """TRL's implicit-prompt rule: ``(prompt, chosen, rejected)`` where the prompt is the shared
    start of ``chosen`` and ``rejected`` (two lists of turns, or two strings) and each response is
    what follows it; None where TRL raises (``chosen`` or ``rejected`` empty: its loop index is
    never bound).

    The rule of ``trl.data_utils.extract_prompt`` (huggingface/trl, ``trl/data_utils.py`` @
    00cc012a666746bd34df2caddae86912287a48e9; ``maybe_extract_prompt`` calls it when a preference
    example has no ``prompt``, and DPOTrainer maps it over the dataset before applying the chat
    template), with its quirks kept:

    - the cut ``k`` is the first index ``< min(len(chosen), len(rejected))`` where the two differ;
      when ``chosen[k - 1] == " "`` the cut moves one back (text: the space goes to the response;
      at ``k = 0`` this reads ``chosen[-1]``, the last element, as Python indexing does);
    - when they never differ over that range (equal, or one a prefix of the other) the cut is the
      last index of the range, ``min(len) - 1``, not ``min(len)``: the last shared turn becomes
      the responses' first turn (equal conversations give equal one-turn responses).

    Turns compare as whole values (here the ``{role, content}`` dicts of :func:`template_turns`;
    TRL compares the dataset's message dicts).
    """
    n = min(len(chosen), len(rejected))
    if n == 0:
        return None
    if isinstance(chosen, str) and isinstance(rejected, str):
        k = _first_difference(chosen, rejected, n)
    else:
        k = next((i for i in range(n) if chosen[i] != rejected[i]), None)
    if k is None:
        k = n - 1
    elif chosen[k - 1] == " ":
        k -= 1
    return chosen[:k], chosen[k:], rejected[k:]


def _first_difference(a: str, b: str, n: int) -> int | None:
    """The first index ``< n`` where two strings differ (None when their first ``n`` characters
    are equal), by bisection on prefix equality: O(log n) slice comparisons instead of a Python
    loop over characters (transcripts are thousands of characters)."""
    if a[:n] == b[:n]:
        return None
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


@dataclass
class ImplicitPairs:
    """The result of :func:`split_implicit_pairs` (one entry per row).

    Attributes:
        prompts, chosen, rejected: the prompt turns and the two responses' turns of each row as
            :func:`extract_prompt` cuts them (lists of ``{role, content}`` dicts), None on a row
            not rendered: a null or empty conversation (``pref.empty_response`` judges it), or a row
            listed below.
        no_prefix: rows (0-based) whose conversations share no leading turn: TRL's prompt is empty
            and its chat-template step fails on it (an empty prompt has no last role).
        diverged: rows (0-based) whose conversations differ before the last assistant turn of
            either: TRL takes the shared turns as the prompt and trains on "responses" that hold
            other turns (two answers to different prompts).
    """

    prompts: list[Any]
    chosen: list[Any]
    rejected: list[Any]
    no_prefix: list[int]
    diverged: list[int]


def _last_assistant(turns: list[Any]) -> int:
    """Index of the last ``assistant`` turn (-1 when none)."""
    return max((i for i, t in enumerate(turns) if t.get("role") == "assistant"), default=-1)


def split_implicit_pairs(chosen: list[Any], rejected: list[Any]) -> ImplicitPairs:
    """Cut each row's two whole conversations into prompt + responses with TRL's rule
    (:func:`extract_prompt`).

    Args:
        chosen, rejected: per row, the conversation's turns (``{role, content}`` dicts as
            :func:`response_turns` gives them for a list of messages) or None.

    A row is ``no_prefix`` when the cut is 0, ``diverged`` when the cut lies before the index of the
    last assistant turn of either conversation (the responses then start before the answer being
    compared); neither kind is rendered (see :class:`ImplicitPairs`).
    """
    n = len(chosen)
    out = ImplicitPairs([None] * n, [None] * n, [None] * n, [], [])
    for i, (c, r) in enumerate(zip(chosen, rejected)):
        cut = extract_prompt(c, r) if c is not None and r is not None else None
        if cut is None:
            continue
        p = cut[0]
        if not p:
            out.no_prefix.append(i)
        elif len(p) < max(_last_assistant(c), _last_assistant(r)):
            out.diverged.append(i)
        else:
            out.prompts[i], out.chosen[i], out.rejected[i] = cut
    return out


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
