"""Chat-template rendering of conversations (the ``messages`` role) through the tokenizer of
``[tokens] tokenizer``, as a trainer renders them: the tokenized SFT columns derived from chat data.

:func:`render_chat` is the one per-row Python step: each conversation goes through
transformers' ``apply_chat_template(..., tokenize=True, return_dict=True,
return_assistant_tokens_mask=True)`` exactly as a trainer calls it (batched, 512 conversations a
call), truncated at ``[tokens] max_seq_len`` on ``truncation_side`` when it is set. The result is
the columns a tokenized SFT shard has (``input_ids``, ``assistant_mask``, and ``labels``: the token
id on assistant tokens, ``ignore_index`` elsewhere, as assistant-only loss builds them), which the
read path (:mod:`datacheck.derive.read`) adds to the shard so that the tokenized ``sft.*`` rules
judge them unchanged. The tokenizer loader (:func:`load_chat_tokenizer`), the template-error column
and the error text are shared with the preference pair rendering (:mod:`datacheck.derive.pairs`).
transformers and jinja2 are the optional ``chat`` extra, imported lazily.
"""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from datacheck.model.errors import UsageError

__all__ = ["CHAT_INSTALL", "RENDERED_COLUMNS", "TEMPLATE_ERROR", "UNTRUNCATED_ASSISTANT", "Rendered", "render_chat",
           "load_chat_tokenizer", "template_error_column", "error_text"]

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
        # never the data's code (auto_map), never a prompt asking whether to run it, never the network
        return transformers.AutoTokenizer.from_pretrained(path, trust_remote_code=False, local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - any loader failure is the config's tokenizer path
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise UsageError(f"[tokens] tokenizer = {path!r}: transformers cannot load a tokenizer there ({first}); "
                         "give a folder holding tokenizer.json and tokenizer_config.json") from None


def load_chat_tokenizer(path: str) -> tuple[Any, str | None]:
    """The tokenizer of ``[tokens] tokenizer`` (a folder, or a file inside it) for rendering, or
    (None, why) when it cannot render: transformers is not installed (the install command), or the
    tokenizer has no chat template. Loaded once per folder and modification time.

    The load passes ``trust_remote_code=False`` (a ``tokenizer_config.json`` whose ``auto_map`` names
    a Python file is refused, never imported, and transformers never asks whether to run it) and
    ``local_files_only=True`` (nothing is downloaded).

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


def error_text(exc: Exception) -> str:
    """The first line of a rendering error, its type named (``TemplateError: Conversation roles must
    alternate ...``, ``TypeError: can only concatenate str ...``)."""
    first = (str(exc).splitlines() or [""])[0].strip()
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def render_chat(conversations: list[Any], tok: Any, max_seq_len: int | None, truncation_side: str,
                ignore_index: int) -> Rendered:
    """Render ``conversations`` (lists of ``{role, content}`` dicts as :func:`~datacheck.derive.messages.template_turns` gives
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
                        errors[i] = error_text(exc)
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
