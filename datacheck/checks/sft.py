"""sft: supervision of fine-tuning rows (chat and completion).

Conversations before tokenization: the ``messages`` role (a list of turn structs; HF/OpenAI
``{role, content}``, ShareGPT ``{from, value}``, content a string or a list of ``{type, text|value}``
parts; :func:`datacheck.model.roles.message_fields`), judged per turn with list expressions
(:mod:`datacheck.derive.messages`) in the shard's one query: ``sft.role_order``, ``sft.empty_turn``,
``sft.no_assistant_turn``. Roles are canonical (ShareGPT ``human``/``gpt``/``function_call``/
``observation`` are ``user``/``assistant``/``tool_call``/``tool``; :data:`CHAT_ROLE_NAMES
<datacheck.model.roles.CHAT_ROLE_NAMES>`). Turn indexes in examples are 0-based.

Tokenized rows: ``input_ids`` and token ``labels`` (list of int, shape (rows, seq_len)), optionally
``assistant_mask`` (0/1 per token, Hugging Face's ``return_assistant_tokens_mask``) and
``attention_mask``. The position-wise rules run in the shard's flat position view
(:func:`datacheck.checks.mask.positions_view`), fused with every other check into the shard's
one query; a row fails when any of its positions does. Both label conventions are handled
(``[labels] shifted``): a token ``k`` is a supervised target when ``labels[k] != ignore_index``
(unshifted) or ``labels[k-1] != ignore_index`` (shifted).
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import polars as pl

from datacheck.checks._expr import as_int64, counts_to_pairs, supervised_count, value_counts
from datacheck.checks._flat import by_chunks
from datacheck.checks._pos import assistant_span, prev, supervised_token
from datacheck.checks._render import UNMARKED, cut_by_truncation, template_error, unmarked_template
from datacheck.checks.mask import position_pass, positions_view
from datacheck.checks.registry import (
    RowCheck,
    ShardContext,
    ShardItem,
    Stat,
    check,
    concat_parts,
    derives,
    measure,
    sum_parts,
)
from datacheck.checks.roledtype import problem
from datacheck.derive.chat import ChatTemplate
from datacheck.derive.messages import (
    ASSISTANT_ROLES,
    KNOWN_ROLES,
    blank_content,
    canonical_role,
    turn_roles,
)
from datacheck.derive.read import ALPACA, CHAT
from datacheck.model import layouts as lay
from datacheck.model.errors import InternalError
from datacheck.model.findings import Skipped
from datacheck.model.roles import MessageFields, inner_dtype, message_fields, seq2seq_layout

__all__ = ["role_order", "empty_turn", "no_assistant_turn", "assistant_mask_empty", "prompt_supervised", "eot_unsupervised", "truncated_response", "double_bos",
           "supervision_stats"]

#: the read path's derivations this family reads: the Alpaca layout's messages and the chat
#: template's token columns are role columns like the shard's own
derives(__name__, ALPACA, CHAT)

_NEEDS_LABELS = "needs a token labels column, input_ids and [labels] ignore_index"
_NO_STOP = "needs [tokens] eot_token_ids or eos_token_id (the end-of-turn ids)"


def _turns(ctx: ShardContext) -> tuple[str, MessageFields]:
    """The ``messages`` column and its fields (the registry skipped the check when its dtype cannot serve)."""
    col = ctx.roles.messages
    mf = message_fields(ctx.schema[col])
    if mf is None:  # the registry skips the check first (schema.dtype, from the same rule)
        raise InternalError(f"sft: {col!r} of dtype {ctx.schema[col]} reached a messages rule")
    return col, mf


def _preference(ctx: ShardContext) -> bool:
    """The shard holds preference pairs (a ``chosen`` or ``rejected`` column): its messages are prompts."""
    return ctx.roles.chosen is not None or ctx.roles.rejected is not None


def _first(flags: pl.Expr) -> pl.Expr:
    """Per row: the 0-based index of the first true element of a boolean list (null when none)."""
    return flags.list.eval(pl.arg_where(pl.element().fill_null(False)).first()).list.first()


#: the rules of ``sft.role_order`` a turn can break, in the order they are judged (the first that holds
#: names the turn's fault)
TURN_ORDER_RULES = ("null role", "unknown role", "system not first", "two user turns in a row",
                    "assistant before any user", "tool result without a tool call")
#: canonical role -> its code in :func:`turn_order_kinds` (5: a name outside :data:`KNOWN_ROLES`, 6: null)
_ROLE_CODES = {"system": 0, "user": 1, "assistant": 2, "tool_call": 3, "tool": 4}


def turn_order_kinds(roles: pl.Series) -> pl.Series:
    """Per row of ``roles`` (List(String): the canonical role of each turn, :func:`turn_roles`), the
    :data:`TURN_ORDER_RULES` entry its first faulty turn breaks (String; null when no turn breaks
    one, or the row is null). A turn breaks, in this order: a null role; a role outside
    :data:`KNOWN_ROLES`; ``system`` at a position > 0; ``user`` right after ``user``; an assistant
    turn or tool call with no ``user`` turn before it; ``tool`` not right after a tool call or
    another tool result. One vectorized pass over the flattened roles (the same rules as the
    per-turn expressions of :func:`role_order`'s examples: a property test holds it)."""
    n = len(roles)
    lens = roles.list.len().fill_null(0).to_numpy().astype(np.int64, copy=False)
    flat = roles.explode(empty_as_null=False, keep_nulls=False)
    codes = flat.replace_strict(_ROLE_CODES, default=5, return_dtype=pl.Int8).to_numpy().copy()
    codes[flat.is_null().to_numpy()] = 6  # replace_strict gives a null the default
    total = int(lens.sum())
    out = np.zeros(n, dtype=np.int8)
    if total:
        off = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lens, out=off[1:])
        row = np.repeat(np.arange(n), lens)
        idx = np.arange(total) - off[:-1][row]
        prev = np.empty(total, dtype=np.int8)
        prev[0] = -1
        prev[1:] = codes[:-1]
        prev[idx == 0] = -1
        user = codes == 1
        users = np.cumsum(user)
        users_upto = users - np.concatenate(([0], users))[off[:-1]][row]
        faults = [codes == 6, codes == 5, (codes == 0) & (idx > 0), user & (prev == 1),
                  ((codes == 2) | (codes == 3)) & (users_upto == 0), (codes == 4) & (prev != 3) & (prev != 4)]
        kind = np.zeros(total, dtype=np.int8)
        for k in range(len(faults), 0, -1):  # the first rule that holds wins
            kind[faults[k - 1]] = k
        bad = np.flatnonzero(kind)
        rows, first = np.unique(row[bad], return_index=True)
        out[rows] = kind[bad[first]]
    names = pl.Series([None, *TURN_ORDER_RULES], dtype=pl.String)
    return names.gather(pl.Series(out.astype(np.uint32)))


@check("sft.role_order", layouts=frozenset({"chat_sft", "dpo"}), roles=("messages",))
def role_order(ctx: ShardContext) -> Iterable[ShardItem]:
    """``sft.role_order``: a conversation a chat template rejects or mis-renders (CHECKS.md). A row
    (``messages``: list of turn structs) fails when it has fewer than two turns, or a turn has an
    unknown or null role (not in :data:`CHAT_ROLE_NAMES <datacheck.model.roles.CHAT_ROLE_NAMES>`),
    a system turn is not first, a user turn follows a user turn, an assistant turn (or tool call)
    comes before any user turn, or a tool result does not follow a tool call or another tool result.
    The example names the first bad turn (0-based), the reason and the role as written. In
    preference data (``chosen``/``rejected`` present) the messages are the prompt: one turn is whole.

    With ``[tokens] tokenizer`` (messages rendered by its chat template, :mod:`datacheck.derive.chat`),
    a row also fails when the template rejects it (its ``raise_exception``, or a content it cannot
    render): the example is the template's error (first line), the reason "rejected by the chat
    template"; such a row has no tokens, so its tokenized ``sft.*`` rules are not judged (the
    message says so). Each failing row is counted once (the template's error shown first)."""
    col, mf = _turns(ctx)
    turn = pl.element()
    r = canonical_role(mf, turn)
    raw = turn.struct.field(mf.role)
    idx = pl.int_range(pl.len())
    before = r.shift(1)
    # the reasons' texts, per turn: evaluated only on the failing rows (the examples' second pass)
    texts = [
        (r.is_null(), pl.lit("null role")),
        (~r.is_in(KNOWN_ROLES), pl.format("unknown role '{}'", raw)),
        ((r == "system") & (idx > 0), pl.format("system turn at position {}, not first", idx)),
        ((r == "user") & (before == "user"), pl.lit("two user turns in a row")),
        (r.is_in(ASSISTANT_ROLES) & ((r == "user").cum_sum() == 0), pl.format("'{}' turn before any user turn", raw)),
        ((r == "tool") & ~before.is_in(["tool_call", "tool"]).fill_null(False),
         pl.format("tool result ('{}') with no tool call before it", raw)),
    ]
    e: Any = pl
    for cond, out in texts:
        e = e.when(cond).then(out)
    reasons = pl.col(col).list.eval(e.otherwise(pl.lit(None, dtype=pl.String)))
    # per row, the rule its first bad turn breaks: one numpy pass over the canonical roles
    first_kind = turn_roles(col, mf).map_batches(
        lambda s: by_chunks([s], lambda c: turn_order_kinds(c[0])), return_dtype=pl.String)
    n = pl.col(col).list.len()
    first = reasons.list.drop_nulls().list.first()
    # preference data (chosen/rejected beside the messages): the conversation is the prompt, one turn is whole
    short = (n < 2) if not _preference(ctx) else pl.lit(False)
    why = pl.when(short).then(pl.format("{} turn(s): a conversation needs at least two", n)).otherwise(first)
    kind = pl.when(short).then(pl.lit("fewer than two turns")).otherwise(first_kind)
    example = pl.when(short).then(why).otherwise(
        pl.format("turn {}: {}", _first(reasons.list.eval(pl.element().is_not_null())), why))
    fails = short | first_kind.is_not_null()
    err = template_error(ctx)
    if err is not None:  # rendered by the tokenizer's chat template: the rows it rejected
        rejected = pl.col(err).is_not_null()
        fails = rejected | fails
        kind = pl.when(rejected).then(pl.lit(_REJECTED)).otherwise(kind)
        example = pl.when(rejected).then(pl.format("the chat template rejects it: {}", pl.col(err))).otherwise(example)
    yield RowCheck(
        # the verdict from the rule names (the kernel's): polars 2.1 panics on pl.format inside list.eval
        # under a filter when a row is null; the formatted text is only evaluated on failing rows
        check="sft.role_order", column=col, fails=fails, example=example,
        details={"reasons": value_counts(kind)},
        message=lambda k, d, col=col: (f"{k} conversation(s) in {col!r} have a turn order a chat template rejects or "
                                       f"mis-renders ({', '.join(f'{v} x{c}' for v, c in counts_to_pairs(d.get('reasons')))}). "
                                       + _rejected_note(d) + "Fix or drop those conversations"),
    )


#: the ``sft.role_order`` reason of a row the tokenizer's chat template raised on
_REJECTED = "rejected by the chat template"


def _rejected_note(details: dict[str, Any]) -> str:
    """The message's sentence on the rows the chat template rejected ("" when none)."""
    n = dict(counts_to_pairs(details.get("reasons"))).get(_REJECTED)
    if not n:
        return ""
    return (f"{n} of them the chat template rejects (its error in the examples): they have no tokens, so the "
            "token rules (sft.assistant_mask_empty, sft.prompt_supervised, sft.eot_unsupervised, "
            "sft.truncated_response, sft.double_bos, empty.*, labels.*) do not judge them. ")


def _empty_rowcheck(col: str, mf: MessageFields, assistant: bool) -> RowCheck:
    turn = pl.element()
    role_ok = canonical_role(mf, turn).is_in(ASSISTANT_ROLES).fill_null(False)
    flags = pl.col(col).list.eval(blank_content(mf, turn) & (role_ok if assistant else ~role_ok))
    at = _first(flags)
    raw = pl.col(col).list.get(at, null_on_oob=True).struct.field(mf.role)
    which = "assistant" if assistant else "system/user/tool"
    return RowCheck(
        check="sft.empty_turn", column=col, fails=flags.list.any(), severity=None if assistant else "warn",
        example=pl.format("turn {} ('{}'): content empty or whitespace-only", at, raw),
        details={"turns": flags.list.sum().sum()},
        message=lambda k, d, col=col, which=which, assistant=assistant: (
            f"{k} conversation(s) in {col!r} have {d.get('turns')} {which} turn(s) whose content is null, empty or "
            "whitespace-only" + (": the model is trained to answer with nothing. Fill or drop them" if assistant
                                 else " (counted; the template renders them as empty turns)")),
    )


@check("sft.empty_turn", layouts=frozenset({"chat_sft", "dpo"}), roles=("messages",))
def empty_turn(ctx: ShardContext) -> Iterable[ShardItem]:
    """``sft.empty_turn``: a turn whose content is null, empty, or only whitespace and invisible
    characters (zero-width space, word joiner, BOM, soft hyphen: :data:`INVISIBLE
    <datacheck.derive.messages.INVISIBLE>`); content as parts is empty when every text part is (a
    non-text part such as an image is content). Assistant turns (and tool calls) fail the row with
    the catalog's severity (error); empty turns of other roles fail it as ``warn`` (counted, as
    CHECKS.md asks). The example names the first such turn (0-based) and its role as written."""
    col, mf = _turns(ctx)
    yield _empty_rowcheck(col, mf, assistant=True)
    yield _empty_rowcheck(col, mf, assistant=False)


@check("sft.no_assistant_turn", layouts=frozenset({"chat_sft"}), roles=("messages",))
def no_assistant_turn(ctx: ShardContext) -> Iterable[ShardItem]:
    """``sft.no_assistant_turn``: a conversation (``messages``, not null) with no assistant turn
    (canonical role ``assistant`` or ``tool_call``): nothing to train on. An empty list fails.
    Skipped for preference data (``chosen``/``rejected`` present: the messages are the prompt)."""
    if _preference(ctx):
        yield Skipped("sft.no_assistant_turn", "preference data (chosen/rejected): the messages are the prompt and "
                      "the responses are in chosen/rejected (pref.* rules)")
        return
    col, mf = _turns(ctx)
    roles = turn_roles(col, mf)
    yield RowCheck(
        check="sft.no_assistant_turn", column=col, fails=~roles.list.eval(pl.element().is_in(ASSISTANT_ROLES)).list.any(),
        example=pl.format("roles: [{}]", pl.col(col).list.eval(pl.element().struct.field(mf.role).fill_null("null"))
                          .list.join(", ")),
        message=lambda k, d, col=col: (f"{k} conversation(s) in {col!r} have no assistant turn: nothing in them is "
                                       "trained on. Drop them or add the response"),
    )


def _usable(ctx: ShardContext, *roles: str) -> bool:
    """Every role is present, list-typed and of a dtype that serves it (``schema.dtype`` otherwise)."""
    return all(getattr(ctx.roles, r) is not None and problem(ctx, r) is None for r in roles)


def _real(ctx: ShardContext) -> pl.Expr:
    """Per position in the view: the position is real content (attention_mask 1, or no mask)."""
    m = ctx.roles.attention_mask
    if m is None or problem(ctx, "attention_mask") is not None:
        return pl.lit(True)
    return (pl.col(m).cast(pl.Int64) == 1).fill_null(False)


@check("sft.assistant_mask_empty", layouts=lay.SFT, roles=("assistant_mask",))
def assistant_mask_empty(ctx: ShardContext) -> Iterable[ShardItem]:
    """``sft.assistant_mask_empty``: ``assistant_mask`` (list of 0/1, shape (rows, seq_len)) has at
    least one position and no 1 in a row. A chat template without ``{% generation %}`` markers makes
    ``apply_chat_template(return_assistant_tokens_mask=True)`` return all zeros: with assistant-only
    loss nothing of the row is trained. When the read path rendered the mask, a row whose whole
    rendering (before truncation at ``[tokens] max_seq_len``) has assistant tokens lost its answer to
    truncation (a prompt longer than ``max_seq_len``): the message and example say so for those
    rows and blame the template only for the others. A rendered conversation with no assistant turn
    is ``sft.no_assistant_turn``'s row, not this (the template is not to blame). Native list kernels
    (``list.max``).

    When the read path rendered the mask with a template that has no ``{% generation %}`` markers at
    all (:func:`~datacheck.checks._render.unmarked_template`), every row's mask is all zeros for that
    one reason: the finding's message is about the template (where it came from, what to add), and the
    other mask and label rules skip those rows."""
    col = ctx.roles.assistant_mask
    c = pl.col(col)
    if inner_dtype(ctx.schema[col]) == pl.Boolean:
        c = c.cast(pl.List(pl.Int8))
    fails = (c.list.len() > 0) & (c.list.max() == 0)
    m = ctx.roles.messages
    if col in ctx.roles.derived and m is not None and (mf := message_fields(ctx.schema[m])) is not None:
        # a rendered conversation without an assistant turn has nothing to mark: sft.no_assistant_turn's row
        fails = fails & turn_roles(m, mf).list.eval(pl.element().is_in(ASSISTANT_ROLES)).list.any().fill_null(False)
    unmarked = unmarked_template(ctx, col)
    if unmarked is not None:  # one cause for every rendered row: the finding is about the template
        yield RowCheck(check="sft.assistant_mask_empty", column=col, fails=fails,
                       example=pl.format("{} positions, none marked assistant", c.list.len()),
                       message=lambda n, d, t=unmarked, col=col: _unmarked_message(n, t, col))
        return
    cut = cut_by_truncation(ctx, col)
    tok = ctx.cfg.tokens
    trunc = f"truncation to max_seq_len {tok.max_seq_len} ({tok.truncation_side})"
    example = pl.format("{} positions, none marked assistant", c.list.len())
    details: dict[str, Any] = {}
    if cut is not None:
        example = pl.when(cut).then(pl.format(f"{{}} positions, none marked assistant: {trunc} cut the answer",
                                              c.list.len())).otherwise(example)
        details = {"cut_by_truncation": (fails & cut).sum()}
    yield RowCheck(
        check="sft.assistant_mask_empty", column=col, fails=fails, example=example, details=details,
        details_merge={"cut_by_truncation": sum_parts} if details else {},
        message=lambda n, d, col=col, trunc=trunc: _mask_empty_message(n, d.get("cut_by_truncation", 0), col, trunc),
    )


def _unmarked_message(n: int, t: ChatTemplate, col: str) -> str:
    """``sft.assistant_mask_empty``'s message for ``n`` rows rendered with the template ``t``, which has
    no ``{% generation %}`` markers: the one cause, where the template came from, what to add."""
    return (f"the chat template of {t.source} has no {{% generation %}} ... {{% endgeneration %}} markers, so "
            f"transformers marks no assistant token: the rendered {col!r} is all zeros on every one of the {n} "
            "rendered row(s) with an assistant turn, and assistant-only loss trains nothing. Wrap each assistant "
            "message's content in the template: {% generation %}{{ message['content'] }}{% endgeneration %} (the "
            "other mask and label rules skip these rows until then)")


def _mask_empty_message(n: int, cut: int, col: str, trunc: str) -> str:
    """``sft.assistant_mask_empty``'s message: ``cut`` of the ``n`` rows lost their answer to
    truncation; the template is blamed for the rest only."""
    head = (f"{n} row(s) have an {col!r} of all zeros: no assistant token is marked, so assistant-only loss trains "
            "nothing on them. ")
    blame = "The chat template lacks {% generation %} ... {% endgeneration %} around the assistant content"
    if not cut:
        return head + blame
    text = (f"{cut} of them have assistant tokens in the whole rendering: {trunc} cut the answer off (the prompt "
            "fills max_seq_len); raise max_seq_len, shorten or drop those rows")
    rest = n - cut
    if rest:
        text += f". For the other {rest}: " + blame[0].lower() + blame[1:]
    return head + text


@check("sft.prompt_supervised", layouts=lay.SFT, roles=("labels", "input_ids"), facts=("labels.ignore_index",),
       reasons={"labels": _NEEDS_LABELS, "input_ids": _NEEDS_LABELS, "labels.ignore_index": _NEEDS_LABELS})
def prompt_supervised(ctx: ShardContext) -> Iterable[ShardItem]:
    """``sft.prompt_supervised``: a token outside the assistant spans is a supervised target.

    The spans come from ``assistant_mask`` (1 = assistant token), else from
    ``[sft] response_template_ids`` up to and including the next end-of-turn id. A position fails
    when its token is a supervised target (see the module docstring for both label conventions),
    it is real content (attention_mask 1 or no mask; padding is ``padding.label_not_ignored``), it
    is outside the spans, and it is not the end-of-turn/eos id right after a span (templates that
    leave ``<|im_end|>`` outside ``{% generation %}`` while the trainer supervises it are right).
    Skipped without spans: "needs assistant_mask or [sft] response_template_ids" (the dataset-level
    "every row 100% supervised" variant of CHECKS.md is not built). With spans from an
    integer/boolean ``assistant_mask`` the per-row counts come from the pass over the flat buffers
    shared with ``sft.eot_unsupervised`` and the ``eos`` stat
    (:func:`datacheck.checks.mask.position_pass`); with ``response_template_ids`` from the position view,
    and the message says how many failing rows hold no match of the template at all (no span: ids
    that differ from the template as the tokenizer encodes it inside a conversation).
    """
    if ctx.roles.assistant_mask is not None and unmarked_template(ctx, ctx.roles.assistant_mask) is not None:
        yield Skipped("sft.prompt_supervised", UNMARKED)
        return
    span = assistant_span(ctx)
    if span is None:
        yield Skipped("sft.prompt_supervised", "needs an assistant_mask column or [sft] response_template_ids "
                      "(the token ids that open an assistant turn) to know the assistant spans")
        return
    asst, source = span
    r, ign, tok = ctx.roles, ctx.cfg.labels.ignore, ctx.cfg.tokens
    def msg(n: int, d: dict[str, Any], source: str = source) -> str:
        return (f"{n} row(s) supervise tokens outside the assistant spans ({source}; {d.get('positions')} "
                "positions): system/user tokens are trained on. Set their labels to ignore_index")

    fast = position_pass(ctx)
    if fast is not None and fast[1] is not None and fast[1] == r.assistant_mask:
        # spans from assistant_mask: the per-row counts of the shared pass over the flat buffers
        count = fast[0].struct.field("prompt")
        yield RowCheck(check="sft.prompt_supervised", column=r.labels, fails=count > 0,
                       details={"positions": count.cast(pl.Int64).sum()}, details_merge={"positions": sum_parts},
                       message=msg)
        return
    sup = supervised_token(r.labels, ign, ctx.cfg.labels.shifted)
    stop = tok.stop_ids
    after_span = (pl.col(r.input_ids).is_in(list(stop)) & prev(asst).fill_null(False)) if stop else pl.lit(False)
    bad = sup & _real(ctx) & ~asst & ~after_span.fill_null(False)
    tmpl = list(ctx.cfg.sft.response_template_ids or ()) if r.assistant_mask is None else []
    # failing rows where the template never matches: no span at all (ids that differ from the template as
    # the tokenizer encodes it in context: a leading space or newline changes them)
    spanless = pl.col("__row").filter(bad & (asst.cast(pl.Int8).max().over("__row") == 0)).n_unique()

    def tmsg(n: int, d: dict[str, Any]) -> str:
        none = d.get("spanless") or 0
        fix = ("give the ids as the tokenizer encodes the template inside a conversation (a leading space or "
               "newline changes them)")
        if none and none == n:  # the template matches nowhere: no span, not a prompt trained on
            return (f"{n} row(s) hold no match of [sft] response_template_ids {tmpl}: no assistant span, so "
                    f"each supervised token is outside one ({d.get('positions')} positions); {fix}")
        return msg(n, d) + (f"; {none} of them hold no match of [sft] response_template_ids {tmpl} (no "
                            f"assistant span at all): {fix}" if none else "")

    if not tmpl:  # spans from an assistant_mask the shared pass does not read
        yield RowCheck(check="sft.prompt_supervised", column=r.labels, fails=bad, view=positions_view(ctx),
                       details={"positions": bad.sum()}, details_merge={"positions": sum_parts}, message=msg)
        return
    yield RowCheck(
        check="sft.prompt_supervised", column=r.labels, fails=bad, view=positions_view(ctx),
        details={"positions": bad.sum(), "spanless": spanless},
        details_merge={"positions": sum_parts, "spanless": sum_parts}, message=tmsg,
    )


@check("sft.eot_unsupervised", layouts=lay.SFT, roles=("labels", "input_ids"), facts=("labels.ignore_index",),
       reasons={"labels": _NEEDS_LABELS, "input_ids": _NEEDS_LABELS, "labels.ignore_index": _NEEDS_LABELS})
def eot_unsupervised(ctx: ShardContext) -> Iterable[ShardItem]:
    """``sft.eot_unsupervised`` (warn): the end-of-turn token closing an assistant turn is not a
    supervised target, so the model never learns to stop.

    A closing end-of-turn is an ``eot_token_ids``/``eos_token_id`` position of real content that is
    inside an assistant span or right after one (spans from ``assistant_mask`` or
    ``response_template_ids``); without spans, one right after a supervised token. The message
    gives the share of rows. With spans from an integer/boolean ``assistant_mask`` (or none) the
    per-row counts come from the pass over the flat buffers shared with ``sft.prompt_supervised``
    and the ``eos`` stat (:func:`datacheck.checks.mask.position_pass`); else from the position view.
    """
    stop = ctx.cfg.tokens.stop_ids
    if not stop:
        yield Skipped("sft.eot_unsupervised", _NO_STOP)
        return
    if ctx.roles.assistant_mask is not None and unmarked_template(ctx, ctx.roles.assistant_mask) is not None:
        yield Skipped("sft.eot_unsupervised", UNMARKED)
        return
    s2s = seq2seq_layout(ctx.cfg.dataset.schema_, ctx.schema, ctx.layout)
    if s2s is not None:  # only with [dataset] layout naming another layout: labels follow the decoder
        yield Skipped("sft.eot_unsupervised", f"seq2seq layout ({s2s}): labels follow the decoder, not input_ids")
        return
    r, ign = ctx.roles, ctx.cfg.labels.ignore
    def msg(n: int, d: dict[str, Any], stop: tuple[int, ...] = stop) -> str:
        return (f"{n} row(s) do not supervise the end-of-turn id ({', '.join(map(str, stop))}) that closes an "
                f"assistant turn ({d.get('positions')} positions): the model never learns to stop. Keep the label "
                "of the end-of-turn token")

    span = assistant_span(ctx)
    fast = position_pass(ctx)
    from_mask = r.assistant_mask is not None and fast is not None and fast[1] == r.assistant_mask
    if fast is not None and (from_mask or (span is None and fast[1] is None)):
        # spans from assistant_mask (or none): the per-row counts of the shared pass over the flat buffers
        count = fast[0].struct.field("eot")
        yield RowCheck(check="sft.eot_unsupervised", column=r.labels, fails=count > 0,
                       details={"positions": count.cast(pl.Int64).sum()}, details_merge={"positions": sum_parts},
                       message=msg)
        return
    sup = supervised_token(r.labels, ign, ctx.cfg.labels.shifted)
    is_stop = pl.col(r.input_ids).is_in(list(stop)).fill_null(False)
    if span is None:
        closing = is_stop & prev(sup).fill_null(False)
    else:
        asst = span[0]
        closing = is_stop & (asst | prev(asst).fill_null(False))
    bad = closing & _real(ctx) & ~sup
    yield RowCheck(
        check="sft.eot_unsupervised", column=r.labels, fails=bad, view=positions_view(ctx),
        details={"positions": bad.sum()}, details_merge={"positions": sum_parts}, message=msg,
    )


@check("sft.truncated_response", layouts=lay.SFT, roles=("labels",), facts=("labels.ignore_index", "tokens.max_seq_len"),
       reasons={"labels": _NEEDS_LABELS})
def truncated_response(ctx: ShardContext) -> Iterable[ShardItem]:
    """``sft.truncated_response`` (warn): the row is ``max_seq_len`` long (its real content: the
    attention_mask's 1s when there is a mask, else the list length) and its last supervised
    target (the last label other than ``ignore_index``; with either convention the label value is
    the target token id) is not an end-of-turn/eos id: the response was cut. Rows with no
    supervised label are ``empty.no_supervised_tokens``, not this. Rows whose lists differ in
    length or whose mask is not binary are judged by those checks, not this (as in the position
    view). By list kernels, no explode: the rows whose mask sum (or length) reaches
    ``max_seq_len`` (:func:`_long_enough`), their last label other than ``ignore_index`` against
    the end-of-turn/eos ids. That label is looked for in the last :data:`_TAIL` labels of each
    judged row first (a response ends near the row's end), and in the whole row only for the rows
    whose tail has none (padding, a long unsupervised tail): the same label, exactly. Where the
    shared pass over the flat buffers applies (:func:`datacheck.checks.mask.position_pass`) it
    decides which rows fail; the details still come from the list kernels, on failing rows only."""
    stop = ctx.cfg.tokens.stop_ids
    if not stop:
        yield Skipped("sft.truncated_response", _NO_STOP)
        return
    r, ign, max_len = ctx.roles, ctx.cfg.labels.ignore, ctx.cfg.tokens.max_seq_len
    # only rows of the position view (one length, binary mask) that reach max_seq_len
    judged = positions_view(ctx).row_ok() & _long_enough(ctx, max_len)
    lab = pl.when(judged).then(pl.col(r.labels))

    def last_sup(x: pl.Expr) -> pl.Expr:
        """Per row: the last label other than ignore_index (null when none; null labels are not)."""
        return x.list.eval(pl.element().filter((pl.element() != ign).fill_null(False)).last()).list.first()

    # the tail first (a few labels per row), the whole row only where the tail has no supervised label
    tail = last_sup(lab.list.tail(_TAIL))
    last = pl.coalesce(tail, last_sup(pl.when(tail.is_null()).then(lab))).alias(r.labels)
    fails = (~last.is_in(list(stop))).fill_null(False)
    fast = position_pass(ctx)
    if fast is not None:  # the same rows, from the shared pass over the flat buffers
        fails = fast[0].struct.field("trunc") > 0
    yield RowCheck(
        check="sft.truncated_response", column=r.labels, fails=fails,
        details={"last_ids": last.filter(fails).value_counts(sort=True, name="count").head(5).implode()},
        message=lambda n, d, m=max_len: (f"{n} row(s) are max_seq_len={m} long and their last supervised token is "
                                         "not an end-of-turn/eos id: the response was cut. Raise max_seq_len or "
                                         "drop/split the long conversations"),
    )


#: labels at the end of a row searched first for its last supervised label (``sft.truncated_response``);
#: a speed choice, not a rule: rows whose tail holds none are searched whole
_TAIL = 256


def _long_enough(ctx: ShardContext, max_len: int) -> pl.Expr:
    """Per row, by list kernels (no explode): the row's real content can be ``max_len`` long (the
    mask's sum, or the labels' length without a usable mask): the rows ``sft.truncated_response``
    judges. Only meaningful with :meth:`~datacheck.checks.registry.FlatView.row_ok` (a binary mask)."""
    m = ctx.roles.attention_mask
    if m is None or problem(ctx, "attention_mask") is not None:
        return (pl.col(ctx.roles.labels).list.len() >= max_len).fill_null(False)
    mask = pl.col(m)
    if not inner_dtype(ctx.schema[m]).is_integer():  # boolean, or a float mask that is 0/1 (else not in the view)
        mask = mask.cast(pl.List(pl.Int8), strict=False)
    return (mask.list.sum() >= max_len).fill_null(False)


@check("sft.double_bos", layouts=lay.SFT, roles=("input_ids",), facts=("tokens.bos_token_id",))
def double_bos(ctx: ShardContext) -> Iterable[ShardItem]:
    """``sft.double_bos`` (warn): the sequence starts with ``bos_token_id`` twice (the chat template
    and the tokenizer both add it). With left padding (``[tokens] padding_side``, or recognized from
    the shard's rows where unset) and an attention_mask, the sequence starts at its first real
    position (``len - sum(mask)``). Native list kernels (``list.get``)."""
    r, tok = ctx.roles, ctx.cfg.tokens
    ids, bos = pl.col(r.input_ids), tok.bos_token_id
    start: pl.Expr | int = 0
    if ctx.padding_side == "left" and _usable(ctx, "attention_mask"):
        m = as_int64(r.attention_mask, ctx.schema[r.attention_mask])
        start = ids.list.len() - m.list.sum()
    first = ids.list.get(start, null_on_oob=True)
    second = ids.list.get(start + 1, null_on_oob=True)
    yield RowCheck(
        check="sft.double_bos", column=r.input_ids, fails=(first == bos) & (second == bos),
        example=ids.list.head(4),
        message=lambda n, d, bos=bos: (f"{n} row(s) start with bos_token_id {bos} twice: the chat template and the "
                                       "tokenizer both add it. Tokenize the rendered text with add_special_tokens=False"),
    )


@measure("sft")
def supervision_stats(ctx: ShardContext) -> Iterable[Stat]:
    """``supervised_tokens``: per-row supervised-token counts of every row (list of int, one per
    row, in row order; a supervised token is a label other than ``ignore_index`` and null; a row
    whose labels are null (a conversation the chat template rejected) is None), with their
    total, min and max; only for shards with token labels and an assistant_mask or ``[sft]``.
    The query computes the per-row counts once (list kernels) and hands them over as one list; the
    total, min, max and rows with none are derived from it once per shard (:func:`_supervision`):
    polars does not share a sub-expression between the fields of one struct, it computed the
    counts once per field."""
    r, ign = ctx.roles, ctx.cfg.labels.ignore
    if ign is None or not _usable(ctx, "labels"):
        return
    if r.assistant_mask is None and ctx.cfg.sft.response_template_ids is None:
        return
    # a null label is not a supervised token (as in the position rules); a null row stays None
    per_row = supervised_count(r.labels, ign)
    yield Stat(key="supervised_tokens", expr=per_row.implode(), post=_supervision, merge=concat_parts)


def _supervision(per_row: list[int] | None) -> dict[str, Any] | None:
    """The ``supervised_tokens`` stat from the shard's per-row counts (in row order): ``per_row``
    (None for a row whose labels are null: a conversation the chat template rejected), ``total``,
    ``min``, ``max`` over the other rows (None without any), ``zero_rows`` (rows with no supervised
    token) and ``null_rows`` (rows with null labels)."""
    if per_row is None:
        return None
    known = [c for c in per_row if c is not None]
    return {"per_row": per_row, "total": sum(known), "min": min(known, default=None),
            "max": max(known, default=None), "zero_rows": known.count(0), "null_rows": len(per_row) - len(known)}
