"""pref: preference pairs (DPO, reward models): ``chosen`` and ``rejected`` per row.

Each column holds text (String), token ids (list of int), a message struct with a ``value`` or
``content`` field (LLaMA-Factory's ShareGPT preference layout), or a list of such messages.

With ``[tokens] tokenizer`` (a chat template) and a ``messages`` prompt, the read path renders
prompt + chosen and prompt + rejected as TRL's DPOTrainer does (:func:`datacheck.derive.pairs.render_pairs`):
``chosen_input_ids``/``rejected_input_ids`` (token ids, truncated at ``max_seq_len``) and the
response tokens each keeps; the rules below then also judge the pair the trainer sees. TRL's
implicit-prompt layout (``chosen`` and ``rejected`` whole conversations, no prompt column; also
LLaMA-Factory's ``chosen_messages`` / ``rejected_messages``) is cut into prompt + responses as TRL's
``maybe_extract_prompt`` does (:func:`datacheck.derive.pairs.extract_prompt`) and rendered the same way;
pairs it cannot render (no shared leading turn, a difference before the last assistant turn, a
template error, transformers missing) are skipped entries of these rules naming the rows.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np
import polars as pl

from datacheck.checks._expr import truncated
from datacheck.checks.registry import RowCheck, ShardContext, ShardItem, check, derives, max_parts, sum_parts
from datacheck.derive.messages import blank_content
from datacheck.derive.pairs import PAIR_COLUMNS, PairCut, UnrenderedPairs, extract_prompt
from datacheck.derive.read import PAIRS
from datacheck.derive.tokenizer import BlankPieces, blank_token_ids, blank_token_pieces
from datacheck.model.findings import Skipped
from datacheck.model.roles import message_fields

__all__ = ["identical_pair", "empty_response", "token_responses_blank"]

#: the read path's derivations this family reads: the pairs as the chat template renders them
derives(__name__, PAIRS)

_TEXT_FIELDS = ("content", "value", "text")


def _text_field(dtype: pl.DataType) -> str | None:
    if isinstance(dtype, pl.Struct):
        names = [f.name for f in dtype.fields]
        return next((f for f in _TEXT_FIELDS if f in names), None)
    return None


def _says_nothing(s: pl.Series, pieces: BlankPieces) -> pl.Series:
    """Per row of a struct ``{c: Boolean, ids: List(int)}``: ``c`` and the ids decode, joined as
    their bytes, to white space only (:meth:`BlankPieces.says_nothing`); rows without ``c`` are
    False and not decoded (they are a few: ids of blank and byte tokens only)."""
    cand = s.struct.field("c").fill_null(False)
    out = np.zeros(len(s), dtype=bool)
    at = cand.arg_true().to_numpy()
    if at.size:
        for k, row in zip(at, s.struct.field("ids").gather(at).to_list()):
            out[k] = pieces.says_nothing(row)
    return pl.Series(out)


def _empty(col: str, dtype: pl.DataType, blank_ids: tuple[int, ...] = (),
           pieces: BlankPieces | None = None) -> pl.Expr | None:
    """Per row: the response is null, empty or whitespace-only (None for a dtype it cannot judge).
    Token ids (a list of integers) are also empty when every id is one of ``blank_ids``
    (:func:`_blank_ids`: special ids and ids of whitespace tokens), or when they are such ids and
    byte tokens (``pieces``) whose bytes, joined, are white space only (U+3000 as ``ãĢ`` + ``Ģ``);
    byte tokens that make a real character (U+3042 as ``ãģ`` + ``Ĥ``) are not empty."""
    c = pl.col(col)
    if dtype == pl.String:
        return c.is_null() | (c.str.strip_chars().str.len_chars() == 0)
    if isinstance(dtype, pl.Struct):
        f = _text_field(dtype)
        if f is None:
            return None
        t = c.struct.field(f)
        return c.is_null() | t.is_null() | (t.cast(pl.String).str.strip_chars().str.len_chars() == 0)
    if isinstance(dtype, (pl.List, pl.Array)):
        inner = dtype.inner
        base = c.is_null() | (c.list.len() == 0)
        mf = message_fields(dtype) if isinstance(inner, pl.Struct) else None
        if mf is not None and mf.parts:  # content as parts (LLaMA-Factory v1: [{type, value}]): their text
            return base | blank_content(mf, c.list.last())
        if isinstance(inner, pl.Struct) and (f := _text_field(inner)) is not None:
            last = c.list.last().struct.field(f)
            return base | last.is_null() | (last.cast(pl.String).str.strip_chars().str.len_chars() == 0)
        has_pieces = pieces is not None and bool(pieces.pieces)
        if inner.is_integer() and (blank_ids or has_pieces):
            ids = pl.Series(blank_ids, dtype=pl.Int64).cast(inner, strict=False).drop_nulls()  # ids the dtype can hold
            lst = c.arr.to_list() if isinstance(dtype, pl.Array) else c
            out = base | lst.list.eval(pl.element().is_in(ids.implode()).fill_null(False)).list.all()
            if pieces is not None and pieces.pieces:
                pid = pl.Series(pieces.pieces, dtype=pl.Int64).cast(inner, strict=False).drop_nulls()
                only = lst.list.eval(pl.element().is_in(pl.concat([ids, pid]).implode()).fill_null(False)).list.all()
                some = lst.list.eval(pl.element().is_in(pid.implode()).fill_null(False)).list.any()
                out = out | pl.struct([(only & some).alias("c"), lst.alias("ids")]).map_batches(
                    lambda v, p=pieces: _says_nothing(v, p), return_dtype=pl.Boolean, is_elementwise=True)
            return out
        return base
    return None


def _blank_ids(ctx: ShardContext) -> tuple[tuple[int, ...], str | None]:
    """The ids a tokenized response may hold and still be empty, and what the rule lacks (None: nothing).

    The ids: ``[tokens]`` ``pad_token_id``, ``eos_token_id``, ``bos_token_id`` and ``eot_token_ids``
    (those set, or filled from ``[tokens] tokenizer``), plus, with ``[tokens] tokenizer``, every id
    whose token decodes to whitespace only (:func:`datacheck.derive.tokenizer.blank_token_ids`).
    The second value names the missing fact, None when nothing is missing: no tokenizer, or a
    tokenizer whose vocabulary is not read (a SentencePiece model only); the whitespace ids are then
    not known."""
    tok = ctx.cfg.tokens
    special = {i for i in (tok.pad_token_id, tok.eos_token_id, tok.bos_token_id, *(tok.eot_token_ids or ()))
               if i is not None}
    path = ctx.cfg.tokenizer_path()
    if path is None or tok.tokenizer is None:
        return tuple(sorted(special)), "no [tokens] tokenizer is set"
    blank = blank_token_ids(path, tok.tokenizer)
    if blank is None:
        return tuple(sorted(special)), (f"[tokens] tokenizer = {tok.tokenizer!r} is a SentencePiece model whose "
                                        "vocabulary datacheck does not read (save it with tokenizer.json)")
    return tuple(sorted(special | set(blank))), None


def _blank_pieces(ctx: ShardContext) -> BlankPieces | None:
    """The byte tokens of ``[tokens] tokenizer`` that hold part of a white-space character
    (:func:`datacheck.derive.tokenizer.blank_token_pieces`), None without a tokenizer."""
    path = ctx.cfg.tokenizer_path()
    if path is None or ctx.cfg.tokens.tokenizer is None:
        return None
    return blank_token_pieces(path, ctx.cfg.tokens.tokenizer)


def token_responses_blank(ctx: ShardContext) -> tuple[dict[str, pl.Expr], str | None]:
    """``pref.empty_response``'s blank rule for the preference responses (``chosen``, ``rejected``) that
    hold token ids (a list of integers), for the checks that leave blank rows to it (the ``dup.*``
    checks, :mod:`datacheck.checks.dup.blank`): so a tokenized pair of whitespace tokens is blank as a
    text pair of whitespace strings is.

    Returns:
        ({response column: per-row Boolean expression, True when the response is null, empty, or only
        special ids and, with ``[tokens] tokenizer``, whitespace tokens (:func:`_empty`)}, what the
        rule lacks: None, or the missing fact (no tokenizer, or one whose vocabulary is not read), in
        which case whitespace tokens are not known to be blank). Empty dict and None when no
        response holds token ids."""
    cols = [c for c in (ctx.roles.chosen, ctx.roles.rejected)
            if c is not None and isinstance(ctx.schema.get(c), (pl.List, pl.Array))
            and ctx.schema[c].inner.is_integer()]
    if not cols:
        return {}, None
    blank_ids, lacking = _blank_ids(ctx)
    pieces = _blank_pieces(ctx) if lacking is None else None
    out = {c: e for c in cols if (e := _empty(c, ctx.schema[c], blank_ids, pieces)) is not None}
    return out, lacking


def _rendered(ctx: ShardContext) -> tuple[str, str, str, str, str] | None:
    """The rendered pair columns (:data:`PAIR_COLUMNS <datacheck.derive.pairs.PAIR_COLUMNS>`) when the
    read path made them, else None."""
    if not all(c in ctx.roles.derived and c in ctx.schema for c in PAIR_COLUMNS):
        return None
    return PAIR_COLUMNS  # type: ignore[return-value]


def _rows_text(rows: tuple[int, ...], n: int) -> str:
    """``"3 of 10 row(s) (0-based: 1, 4, 7)"``, the first 10 rows listed."""
    shown = ", ".join(str(r) for r in rows[:10]) + (", ..." if len(rows) > 10 else "")
    return f"{len(rows)} of {n} row(s) (0-based: {shown})"


def _not_rendered(ctx: ShardContext, cid: str) -> Iterable[Skipped]:
    """The skipped entry of ``cid`` for the implicit-prompt pairs the read path did not render
    (:class:`~datacheck.derive.pairs.UnrenderedPairs`): why nothing was rendered, or which rows
    were not (no shared leading message, a difference before the last assistant turn, a pair the
    chat template rejects); nothing when every pair was rendered."""
    u: UnrenderedPairs | None = ctx.unrendered_pairs
    if u is None:
        return
    if u.why is not None:
        yield Skipped(cid, f"the pairs as the chat template renders them are not judged (only the conversations as "
                           f"data): {u.why}")
        return
    a, b, notes = u.chosen, u.rejected, []
    if u.no_prefix:
        notes.append(f"{_rows_text(u.no_prefix, u.rows)}: {a!r} and {b!r} share no leading message, so TRL's "
                     "extract_prompt gives an empty prompt (DPOTrainer fails on it); give both the same prompt turns")
    if u.diverged:
        notes.append(f"{_rows_text(u.diverged, u.rows)}: {a!r} and {b!r} differ before the last assistant turn, so "
                     "TRL's extract_prompt takes only the turns before the first difference as the prompt and "
                     "compares responses to different prompts; pair answers to one prompt")
    if u.template_rejected:
        notes.append(f"{_rows_text(u.template_rejected, u.rows)}: the chat template rejects the pair ({u.first_error})")
    if notes:
        yield Skipped(cid, "not judged as rendered pairs: " + "; ".join(notes))


def _cut(ctx: ShardContext) -> str:
    """The trainer's cut of the rendered pairs in words (:meth:`datacheck.derive.pairs.PairCut.describe`)."""
    return PairCut.of(ctx.cfg).describe()


def _filled(rendered: tuple[str, ...]) -> pl.Expr:
    """Per row of rendered pairs: the trainer's cut leaves no token of either response (the prompt
    fills the sequence): one cause, reported by ``pref.identical_pair`` (the two sequences are the
    prompt alone), which ``pref.empty_response`` leaves these rows to."""
    return ((pl.col(rendered[2]) == 0) & (pl.col(rendered[3]) == 0)).fill_null(False)


def _example(col: str, dtype: pl.DataType) -> pl.Expr | None:
    """The value to show: text cut to 200 characters, or the first 16 ids; a message (a struct, as
    LLaMA-Factory's sharegpt pairs write ``chosen: {from, value}``) or a list of them: the text of the
    message, or of the last one, cut alike (the response :func:`_empty` judges). None for content
    given as a list of parts, or a struct with no text field."""
    c = pl.col(col)
    if dtype == pl.String:
        return c.str.slice(0, 200)
    if isinstance(dtype, pl.Struct) and (f := _text_field(dtype)) is not None:
        return c.struct.field(f).cast(pl.String, strict=False).str.slice(0, 200)
    if isinstance(dtype, pl.List) and isinstance(dtype.inner, pl.Struct):
        mf = message_fields(dtype)
        if (mf is not None and mf.parts) or (f := _text_field(dtype.inner)) is None:
            return None
        return c.list.last().struct.field(f).cast(pl.String, strict=False).str.slice(0, 200)
    if isinstance(dtype, pl.List):
        return c.list.head(16)
    return None


def _implicit_text(ctx: ShardContext) -> bool:
    """Text pairs in TRL's implicit-prompt layout: ``chosen`` and ``rejected`` both String and no
    ``prompt`` column (``maybe_extract_prompt`` then cuts the shared start off as the prompt)."""
    a, b = ctx.roles.chosen, ctx.roles.rejected
    return "prompt" not in ctx.schema and ctx.schema[a] == pl.String and ctx.schema[b] == pl.String


def _blank_after_cut(a: str, b: str, side: int) -> pl.Expr:
    """Per row: the response of side ``side`` (0 chosen, 1 rejected) that TRL's implicit-prompt
    cut leaves (:func:`datacheck.derive.pairs.extract_prompt`) is whitespace-only (``str.isspace`` or
    empty); False where either text is null or empty (the plain rule judges those rows)."""
    def run(s: list[pl.Series]) -> pl.Series:
        out = []
        for x, y in zip(s[0].to_list(), s[1].to_list()):
            cut = extract_prompt(x, y) if x and y else None
            out.append(cut is not None and not cut[1 + side].strip())
        return pl.Series(out, dtype=pl.Boolean)
    return pl.map_batches([pl.col(a), pl.col(b)], run, return_dtype=pl.Boolean)


@check("pref.empty_response", layouts=frozenset({"dpo"}), roles=("chosen", "rejected"))
def empty_response(ctx: ShardContext) -> Iterable[ShardItem]:
    """``pref.empty_response``: ``chosen`` or ``rejected`` is null, empty or whitespace-only (text:
    after stripping; token ids: an empty list; a message struct: its content/value; a list of
    messages: empty, or its last message's content empty; content given as a list of parts: no
    part, or every text part blank, :func:`datacheck.derive.messages.blank_content`). Text pairs with no
    ``prompt`` column are TRL's implicit-prompt layout (Anthropic HH-RLHF's whole transcripts): a
    row also fails when the response TRL's ``extract_prompt`` leaves after cutting off the shared
    start is whitespace-only (a transcript whose last assistant turn is empty); ``after_prompt``
    counts those rows. One finding per column. With rendered
    pairs (module docstring) a row also fails when the trainer's cut leaves no token of this response
    but some of the other (``{chosen,rejected}_response_tokens`` 0 on one side only); ``cut`` counts
    those rows. A cut that leaves no token of either response is one cause, the prompt filling the
    sequence: ``pref.identical_pair`` reports it (``prompt_fills``), not this.

    Token ids (TRL's tokenized ``chosen_input_ids`` / ``rejected_input_ids``) are also empty when
    they hold no id but special ids (``[tokens]`` pad, eos, bos and eot ids) and, with ``[tokens]
    tokenizer``, ids whose token decodes to whitespace only (GPT-2's ``[220, 50256]``, ``" "`` +
    eos): one ``is_in`` over the ids against a set built once from the vocabulary
    (:func:`datacheck.derive.tokenizer.blank_token_ids`). Without a tokenizer the whitespace part is
    not judged and a skipped entry says so (and without special ids, only empty lists are judged).
    A whitespace character split over byte tokens (U+3000 as ``ãĢ`` + ``Ģ`` in byte-level BPE, or
    ``<0xE3><0x80><0x80>`` in a SentencePiece byte-fallback vocabulary) is white space too: ids of
    such byte tokens (:func:`datacheck.derive.tokenizer.blank_token_pieces`) and blank ids whose
    bytes, joined, decode to white space only make an empty response; byte tokens that make a real
    character do not."""
    rendered = _rendered(ctx)
    ids_cols = [c for c in (ctx.roles.chosen, ctx.roles.rejected)
                if isinstance(ctx.schema[c], (pl.List, pl.Array)) and ctx.schema[c].inner.is_integer()]
    blank_ids, lacking = _blank_ids(ctx) if ids_cols else ((), None)
    if lacking is not None:
        judged = (f"a response of no id, or of special ids {list(blank_ids)} only, is judged empty" if blank_ids else
                  "only a response of no id is judged empty (no [tokens] eos_token_id, pad_token_id or bos_token_id "
                  "is known either)")
        yield Skipped("pref.empty_response", f"{' and '.join(map(repr, ids_cols))} hold token ids and {lacking}: "
                      f"{judged}, but not one of whitespace tokens (GPT-2's [220, 50256], ' ' + eos), since which "
                      "ids decode to whitespace is the tokenizer's vocabulary's fact"
                      + ("; set [tokens] tokenizer" if ctx.cfg.tokens.tokenizer is None else ""))
    pieces = _blank_pieces(ctx) if ids_cols and lacking is None else None
    for k, col in enumerate((ctx.roles.chosen, ctx.roles.rejected)):
        bad = _empty(col, ctx.schema[col], blank_ids, pieces)
        if bad is None:
            yield Skipped("pref.empty_response", f"{col!r} has dtype {ctx.schema[col]}: not text, token ids or messages")
            continue
        if rendered is None and _implicit_text(ctx):
            cut = _blank_after_cut(ctx.roles.chosen, ctx.roles.rejected, k) & ~bad.fill_null(False)
            yield RowCheck(
                check="pref.empty_response", column=col, fails=bad | cut,
                example=pl.when(cut).then(pl.concat_str([pl.lit(f"{col!r} blank after TRL's implicit prompt: ..."),
                                                          pl.col(col).str.slice(-60)]))
                .otherwise(_example(col, ctx.schema[col])),
                details={"after_prompt": cut.sum()}, details_merge={"after_prompt": sum_parts},
                message=lambda n, d, col=col: (
                    f"{n} row(s) have an empty {col!r} response (null, empty or whitespace-only, or blank once TRL's "
                    f"implicit prompt, the text chosen and rejected share, is cut off: {d.get('after_prompt', 0)} "
                    "row(s)): the pair teaches nothing or the wrong thing"))
            continue
        if rendered is None:
            what = ("null, empty or whitespace-only" if col not in ids_cols or not blank_ids else
                    "null, empty, or only special and whitespace tokens" if lacking is None else
                    "null, empty, or only special ids")
            yield RowCheck(check="pref.empty_response", column=col, fails=bad, example=_example(col, ctx.schema[col]),
                           message=lambda n, d, col=col, what=what: (
                               f"{n} row(s) have an empty {col!r} response ({what}): the pair teaches nothing or "
                               "the wrong thing"))
            continue
        ids, kept = pl.col(rendered[k]), pl.col(rendered[2 + k])
        cut = (kept == 0).fill_null(False) & ~_filled(rendered)  # both cut away: pref.identical_pair's prompt_fills
        text = _example(col, ctx.schema[col])
        yield RowCheck(
            check="pref.empty_response", column=col, fails=bad | cut,
            example=pl.when(cut & ~bad.fill_null(False)).then(pl.format(
                "prompt + response {} tokens rendered; none of the response left after truncation", ids.list.len()))
            .otherwise(text if text is not None else pl.lit(None, dtype=pl.String)),
            details={"cut": (cut & ~bad.fill_null(False)).sum()}, details_merge={"cut": sum_parts},
            message=lambda n, d, col=col, how=_cut(ctx): (
                f"{n} row(s) have an empty {col!r} response (null, empty or whitespace-only, or rendered with the chat "
                f"template none of its tokens is left after {how}: {d.get('cut', 0)} row(s)): the "
                "pair teaches nothing or the wrong thing. Raise max_seq_len or shorten the prompts"))
    yield from _not_rendered(ctx, "pref.empty_response")


@check("pref.identical_pair", layouts=frozenset({"dpo"}), roles=("chosen", "rejected"))
def identical_pair(ctx: ShardContext) -> Iterable[ShardItem]:
    """``pref.identical_pair``: ``chosen`` equals ``rejected``: exact text (or message) equality, or
    for token-id lists equality after truncation to ``max_seq_len`` on ``truncation_side`` (when
    set). The DPO loss of such a pair is the constant ln 2 with zero gradient. Null pairs are
    ``pref.empty_response``, not this. With rendered pairs (module docstring) a row also fails
    when ``chosen_input_ids`` equals ``rejected_input_ids`` (prompt + response as the chat template
    renders them, cut as the trainer cuts them) with some response token left; ``only_rendered``
    counts the rows equal only so. ``prompt_fills`` counts the rows whose cut leaves no token of either response (the
    prompt fills the sequence: both sequences are the prompt alone; ``prompt_tokens``, the longest
    such prompt, tokens before any cut), said in the message with what the trainer does with them.

    The cut is the trainer's (:class:`datacheck.derive.pairs.PairCut`, ``[pref]``): TRL's
    ``truncation_mode = "keep_start"`` (``truncation_side = "right"``) with a prompt of at least
    ``max_length`` tokens (after TRL <= 0.28's ``max_prompt_length``): TRL 0.29-1.8 trains the pair
    at the constant loss ln 2 with zero gradient, TRL 1.9 and later drops it before training; TRL's
    ``keep_end`` keeps the responses' ends, and LLaMA-Factory's ``infer_seqlen`` gives them their
    share of ``cutoff_len``, so a long prompt does not fill those (no finding: their cut keeps the
    pair meaningful). Without rendered pairs and with ``max_seq_len`` set, a skipped entry says that
    whether a prompt fills the sequence is not judged."""
    a, b = ctx.roles.chosen, ctx.roles.rejected
    ta, tb = ctx.schema[a], ctx.schema[b]
    if ta != tb:
        yield Skipped("pref.identical_pair", f"{a!r} ({ta}) and {b!r} ({tb}) have different dtypes")
        yield from _not_rendered(ctx, "pref.identical_pair")
        return
    tok = ctx.cfg.tokens
    if isinstance(ta, pl.List) and ta.inner.is_integer():
        ea, eb = truncated(a, tok.max_seq_len, tok.truncation_side), truncated(b, tok.max_seq_len, tok.truncation_side)
        how = f" after truncation to max_seq_len={tok.max_seq_len} ({tok.truncation_side})" if tok.max_seq_len else ""
    else:
        ea, eb, how = pl.col(a), pl.col(b), ""
    same = (ea == eb).fill_null(False)
    example = _example(a, ta)
    details = {}
    rendered = _rendered(ctx)
    merge: dict = {}
    fills = ""
    if rendered is not None:  # the pair as the trainer sees it: rendered, tokenized, truncated
        ca, cb = pl.col(rendered[0]), pl.col(rendered[1])
        filled = _filled(rendered)  # no response token left: the sequences are the prompt alone
        equal_ids = (ca == cb).fill_null(False) & ~filled  # equal with some response token left
        tokens_same = equal_ids | filled
        only = equal_ids & ~same
        details = {"only_rendered": only.sum(), "prompt_fills": (filled & ~same).sum(),
                   "prompt_tokens": pl.col(rendered[4]).filter(filled).max()}
        merge = {"prompt_tokens": max_parts}
        example = (pl.when(filled & ~same).then(pl.format(
                       "prompt {} tokens (with the generation prompt) fills max_seq_len {}: no token of chosen or "
                       "rejected left", pl.col(rendered[4]), pl.lit(PairCut.of(ctx.cfg).max_length)))
                   .when(only).then(pl.format("{} tokens, the same ids for chosen and rejected", ca.list.len()))
                   .otherwise(example if example is not None else pl.lit(None, dtype=pl.String)))
        same = same | tokens_same
        how = f" (as text, or as the chat template renders them cut by {_cut(ctx)})"
        fills = _fills_text(PairCut.of(ctx.cfg))
    elif ctx.cfg.tokens.max_seq_len is not None and ctx.unrendered_pairs is None and isinstance(ta, (pl.String, pl.List)) \
            and not (isinstance(ta, pl.List) and ta.inner.is_integer()):
        yield Skipped("pref.identical_pair", "the pairs are not rendered as the trainer tokenizes them (that needs "
                      "[tokens] tokenizer with a chat template and a messages prompt beside text or message "
                      "responses), so whether a prompt fills max_seq_len (both sequences then the prompt alone) is "
                      "not judged")

    def message(n: int, d: dict, how: str = how, fills: str = fills) -> str:
        head = f"{n} pair(s) have chosen equal to rejected{how}"
        if d.get("only_rendered"):
            head += f", {d['only_rendered']} only as rendered tokens"
        if d.get("prompt_fills"):
            head += (f", {d['prompt_fills']} because the prompt fills the sequence (up to {d.get('prompt_tokens')} "
                     f"prompt tokens): no token of chosen or rejected is left. {fills}")
            return head
        return head + ": the DPO loss is the constant ln 2 with zero gradient. Drop them or fix the pairing"

    yield RowCheck(check="pref.identical_pair", column=None, fails=same, example=example,
                   details=details, details_merge={k: merge.get(k, sum_parts) for k in details}, message=message)
    yield from _not_rendered(ctx, "pref.identical_pair")


def _fills_text(cut: PairCut) -> str:
    """What the trainer does with a pair whose prompt fills the sequence, and the fix."""
    if cut.trainer == "llamafactory":
        return ("LLaMA-Factory's infer_seqlen gives the responses 0 tokens: every label is IGNORE_INDEX and the pair "
                "compares nothing. Shorten the prompts or raise cutoff_len")
    return ("TRL's DPOTrainer 0.29-1.8 trains such a pair at the constant loss ln 2 with zero gradient, and 1.9 and "
            "later drop it before training ('Dropping fully truncated examples'): either way it teaches nothing. "
            "Shorten the prompts or raise max_seq_len (max_length); TRL <= 0.28 kept the responses with "
            "max_prompt_length below max_length, or truncation_mode keep_end ([pref] max_prompt_length, [tokens] "
            "truncation_side = \"left\")")
