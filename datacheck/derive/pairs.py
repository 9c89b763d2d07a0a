"""Preference pairs (``chosen`` / ``rejected``) rendered as TRL's DPOTrainer renders them: the
prompt + response token ids of each side (``chosen_input_ids`` / ``rejected_input_ids``) and the
response tokens each keeps after truncation; and TRL's implicit-prompt rule
(:func:`extract_prompt`, :func:`split_implicit_pairs`) for pairs given as two whole
conversations. The chat template and its tokenizer are :mod:`datacheck.derive.chat`'s.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Sequence

import polars as pl

from datacheck.derive.chat import TEMPLATE_ERROR, bounded_templates, error_text
from datacheck.derive.messages import turns_for_template
from datacheck.model.config import Config
from datacheck.model.roles import message_fields

__all__ = ["PAIR_COLUMNS", "response_turns", "PairCut", "infer_seqlen", "RenderedPairs", "render_pairs",
           "extract_prompt", "ImplicitPairs", "split_implicit_pairs", "UnrenderedPairs"]

#: conversations per apply_chat_template call
_BATCH = 512

#: the columns preference rendering adds (:func:`render_pairs`), beside :data:`~datacheck.derive.chat.TEMPLATE_ERROR`
PAIR_COLUMNS = ("chosen_input_ids", "rejected_input_ids", "chosen_response_tokens", "rejected_response_tokens",
                "pair_prompt_tokens")


def infer_seqlen(source_len: int, target_len: int, cutoff_len: int) -> tuple[int, int]:
    """LLaMA-Factory's split of ``cutoff_len`` tokens between a prompt of ``source_len`` tokens and
    a response of ``target_len`` (its ``infer_seqlen``, hiyouga/LLaMA-Factory
    ``src/llamafactory/data/processor/processor_utils.py``; the pairwise processor calls it with the
    longer of chosen and rejected and keeps the first ``new_source_len`` prompt tokens and the first
    ``new_target_len`` tokens of each response): a response shorter than half of ``cutoff_len`` is
    kept whole, else a prompt shorter than half keeps its length, else each gets its proportional
    share, ``int(cutoff_len * target_len / (source_len + target_len))`` for the response.

    Returns:
        (new_source_len, new_target_len), tokens.
    """
    if target_len * 2 < cutoff_len:
        max_target_len = cutoff_len
    elif source_len * 2 < cutoff_len:
        max_target_len = cutoff_len - source_len
    else:
        max_target_len = int(cutoff_len * (target_len / (source_len + target_len)))
    new_target_len = min(max_target_len, target_len)
    new_source_len = min(max(cutoff_len - new_target_len, 0), source_len)
    return new_source_len, new_target_len


@dataclass(frozen=True)
class PairCut:
    """How a preference trainer cuts a pair's token ids to its maximum length (``[pref]``,
    :class:`datacheck.model.config.PrefSection`).

    Attributes:
        trainer: ``"trl"`` or ``"llamafactory"``.
        max_length: tokens of prompt + response at most (``[tokens] max_seq_len``); None: no cut.
        keep_end: TRL's ``truncation_mode = "keep_end"`` (``[tokens] truncation_side = "left"``);
            False: ``"keep_start"``.
        max_prompt_length, max_completion_length: TRL <= 0.28's cuts of the prompt (its last tokens
            kept) and of each response (its first tokens kept) before the sequence cut; None: none.

    TRL, the rule of ``DPOTrainer`` (huggingface/trl): 0.12-0.28 ``tokenize_row`` cuts
    ``prompt_input_ids[-max_prompt_length:]`` and ``chosen_input_ids[:max_completion_length]``, then
    ``concatenated_forward`` cuts the concatenated sequence ``[:max_length]`` (keep_start) or
    ``[-max_length:]`` (keep_end) (0.19.1 ``trl/trainer/dpo_trainer.py`` lines 698-702 and 1245-1262;
    DPOConfig defaults max_length 1024, max_prompt_length 512, truncation_mode "keep_end");
    0.29 and later have no prompt or completion cut and default to keep_start (1.16.0
    ``DataCollatorForPreference.torch_call``, lines 152-163). With keep_start a prompt of at least
    ``max_length`` tokens leaves no response token: TRL 0.29-1.8 trains such a pair at the constant
    loss ln 2; TRL 1.9 and later drops it from the dataset before training (1.16.0
    ``_prepare_dataset``, lines 1134-1140: ``len(example["prompt_ids"]) < args.max_length``).
    LLaMA-Factory: :func:`infer_seqlen` (its pairwise processor, ``pairwise.py``
    ``_encode_data_example``)."""

    trainer: str = "trl"
    max_length: int | None = None
    keep_end: bool = False
    max_prompt_length: int | None = None
    max_completion_length: int | None = None

    @classmethod
    def of(cls, cfg: Config) -> PairCut:
        """The cut ``cfg`` describes (``[tokens] max_seq_len`` and ``truncation_side``, ``[pref]``)."""
        pref, tok = cfg.pref, cfg.tokens
        return cls(trainer=pref.trainer, max_length=tok.max_seq_len, keep_end=tok.truncation_side == "left",
                   max_prompt_length=pref.max_prompt_length, max_completion_length=pref.max_completion_length)

    def describe(self) -> str:
        """The cut in words, for messages: ``"TRL's truncation at max_length=1024 (keep_start)"``."""
        if self.max_length is None:
            return "no max_seq_len"
        if self.trainer == "llamafactory":
            return f"LLaMA-Factory's infer_seqlen with cutoff_len={self.max_length}"
        extra = "".join(f", {k}={v}" for k, v in (("max_prompt_length", self.max_prompt_length),
                                                  ("max_completion_length", self.max_completion_length)) if v)
        return f"TRL's truncation at max_length={self.max_length} ({'keep_end' if self.keep_end else 'keep_start'}{extra})"

    def cut(self, prompt: list[int], chosen: list[int], rejected: list[int]) \
            -> tuple[list[int], list[int], int, int]:
        """(prompt + chosen, prompt + rejected, chosen tokens kept, rejected tokens kept) after the cut."""
        if self.trainer == "llamafactory":
            if self.max_length is None:
                return prompt + chosen, prompt + rejected, len(chosen), len(rejected)
            src, tgt = infer_seqlen(len(prompt), max(len(chosen), len(rejected)), self.max_length)
            p, c, r = prompt[:src], chosen[:tgt], rejected[:tgt]
            return p + c, p + r, len(c), len(r)
        p = prompt[-self.max_prompt_length:] if self.max_prompt_length else prompt
        out: list[Any] = []
        for resp in (chosen, rejected):
            resp = resp[:self.max_completion_length] if self.max_completion_length else resp
            out.append(_truncate(p + resp, len(p), self.max_length, "left" if self.keep_end else "right"))
        return out[0][0], out[1][0], out[0][1], out[1][1]



def response_turns(col: str, dtype: pl.DataType) -> pl.Expr | None:
    """Per row: a preference response (``chosen`` or ``rejected``) as the turns that continue the
    prompt, ``List(Struct{role, content})`` as :func:`~datacheck.derive.messages.template_turns` gives them (null where the
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
        return pl.when(c.is_not_null()).then(turns_for_template(pl.concat_list([c]), mf))
    mf = message_fields(dtype)
    return None if mf is None else turns_for_template(c, mf)


@dataclass
class RenderedPairs:
    """The result of :func:`render_pairs`.

    Attributes:
        columns: one row per input row: ``chosen_input_ids`` / ``rejected_input_ids`` (List(Int32):
            prompt + response token ids, cut as the trainer cuts them, :class:`PairCut`),
            ``chosen_response_tokens`` / ``rejected_response_tokens`` (UInt32: the response's tokens
            left after that cut), ``pair_prompt_tokens`` (UInt32: the prompt's tokens before any cut) and :data:`~datacheck.derive.chat.TEMPLATE_ERROR` (String: the first line of the
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
    with bounded_templates():  # each conversation under the time and size bounds of derive.chat
        _texts_into(tok, convs, generation_prompt, errors, out)
    return out


def _texts_into(tok: Any, convs: list[Any], generation_prompt: bool, errors: list[str | None],
                out: list[str | None]) -> None:
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
                    errors[i] = error_text(exc)


def _common_prefix(a: str, b: str) -> str:
    """The longest common prefix of two strings."""
    n = min(len(a), len(b))
    k = next((i for i in range(n) if a[i] != b[i]), n)
    return a[:k]


def render_pairs(prompts: list[Any], chosen: list[Any], rejected: list[Any], tok: Any, cut: PairCut) -> RenderedPairs:
    """Render preference pairs as TRL's DPOTrainer does with a conversational dataset
    (``maybe_apply_chat_template`` then ``tokenize_row``):

    1. the prompt (turns as :func:`~datacheck.derive.messages.template_turns` gives them) rendered with
       ``add_generation_prompt=True``; prompt + chosen and prompt + rejected rendered whole;
    2. the prompt text is the common prefix of the rendered prompt and the rendered prompt + chosen
       (TRL: a template whose generation prompt differs from the start of the answer, e.g. an
       inserted ``<think>``); each response is its rendered conversation after that prefix;
    3. prompt and responses tokenized separately without special tokens (``add_special_tokens=False``);
    4. each pair cut as the trainer cuts it (:class:`PairCut`: TRL's ``max_length`` with
       ``truncation_mode`` keep_start = right, keep_end = left, and TRL <= 0.28's
       ``max_prompt_length`` / ``max_completion_length``; or LLaMA-Factory's :func:`infer_seqlen`).

    TRL (0.12-0.19) also appends the eos id to both responses: the same id on both sides, it
    changes neither equality nor emptiness, and is not added here.

    Args:
        prompts: per row, the prompt turns (list of ``{role, content}`` dicts) or None.
        chosen, rejected: per row, the response turns (:func:`response_turns`) or None.
        tok: a transformers tokenizer with a chat template (:func:`~datacheck.derive.chat.load_chat_tokenizer`).
        cut: how the trainer cuts each pair to its maximum length.
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
    prompt_len: list[int | None] = [None] * n
    total = 0
    for k, i in enumerate(ok):
        total += 2 * len(p_ids[k]) + len(c_ids[k]) + len(r_ids[k])
        seq_c[i], seq_r[i], kept_c[i], kept_r[i] = cut.cut(p_ids[k], c_ids[k], r_ids[k])
        prompt_len[i] = len(p_ids[k])
    cols = pl.DataFrame([
        pl.Series(PAIR_COLUMNS[0], seq_c, dtype=pl.List(pl.Int32)),
        pl.Series(PAIR_COLUMNS[1], seq_r, dtype=pl.List(pl.Int32)),
        pl.Series(PAIR_COLUMNS[2], kept_c, dtype=pl.UInt32),
        pl.Series(PAIR_COLUMNS[3], kept_r, dtype=pl.UInt32),
        pl.Series(PAIR_COLUMNS[4], prompt_len, dtype=pl.UInt32),
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

    Turns compare as whole values (here the ``{role, content}`` dicts of :func:`~datacheck.derive.messages.template_turns`;
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


@dataclass(frozen=True)
class UnrenderedPairs:
    """What the read path could not render of a shard's pairs in TRL's implicit-prompt layout
    (:func:`split_implicit_pairs` then :func:`render_pairs`): the pref family reports it as skipped
    entries of the rules that judge rendered pairs.

    Attributes:
        chosen, rejected: the two conversation columns.
        rows: the shard's rows (0 when ``why`` is set: nothing was read).
        why: set when nothing was rendered: the reason (transformers not installed, no chat template).
        no_prefix: rows (0-based) whose conversations share no leading message.
        diverged: rows whose conversations differ before the last assistant turn.
        template_rejected: rows the chat template raised on, in row order.
        first_error: the error text of the first of ``template_rejected``.
    """

    chosen: str
    rejected: str
    rows: int
    why: str | None = None
    no_prefix: tuple[int, ...] = ()
    diverged: tuple[int, ...] = ()
    template_rejected: tuple[int, ...] = ()
    first_error: str | None = None
