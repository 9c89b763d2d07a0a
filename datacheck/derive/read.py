"""The one read path: a shard opened exactly as the checks see it, for every verb: open (the
format's reader), casts and roles, then the derived columns the checks need.

``audit``, ``inspect`` (values and ``--export``), ``clean``, ``index build|verify`` (row counts),
``schema infer`` and ``audit --against`` all call :func:`open_for_checks`, so they read the same
columns with the same dtypes:

1. the format's reader (:func:`datacheck.formats.registry.open_shard`, the one reader of each format;
   a local parquet, JSONL, CSV/TSV or Arrow IPC shard hands the engine its reader,
   ``CheckInput.stream``, whose batches and re-read rows come straight from the file (JSONL, CSV/TSV
   and Arrow IPC read the file in a streaming pass at open; their ``lf`` is a scan that reads the
   file again when collected); a shard in an object store is copied and read by the same reader, its rows
   held in memory): CSV/TSV text columns
   (:func:`datacheck.model.roles.text_column_names`: ``[columns] text`` plus the inferred text
   names) are kept as strings even when every value looks like a number; fixed-size lists become
   lists;
2. the roles are resolved against the read schema (:func:`datacheck.model.roles.resolve_roles`);
3. the Alpaca layout (String ``instruction``/``output``, optional ``input``/``system``; no
   ``messages`` column) gets a derived ``messages`` column, the conversation it stands for
   (:func:`datacheck.derive.alpaca.alpaca_messages`), so the ``sft.*`` rules judge it like chat data;
   so does TRL's prompt-completion layout (``prompt``/``completion``, both text or both
   conversations: :func:`datacheck.derive.alpaca.prompt_completion_messages`), whose text form is
   never rendered by a chat template (TRL tokenizes it without one: :data:`PLAIN_PROMPT_COMPLETION`);
4. with ``[tokens] tokenizer`` and a ``messages`` role but no tokenized columns, each conversation
   is rendered through the tokenizer's chat template (:func:`datacheck.derive.chat.render_chat`,
   transformers' ``apply_chat_template``, truncated at ``max_seq_len``) into ``input_ids``,
   ``assistant_mask`` and ``labels`` columns, and the roles are resolved again: the tokenized
   ``sft.*`` rules then judge what the trainer would see; a ``chat_assistant_tokens_untruncated``
   column holds each row's assistant tokens before truncation
   (:data:`datacheck.derive.chat.UNTRUNCATED_ASSISTANT`); a ``chat_template_error`` column holds
   the error of each conversation the template rejects (``sft.role_order`` fails those rows;
   :data:`datacheck.derive.chat.TEMPLATE_ERROR`). Preference data (``chosen``/``rejected`` beside the
   ``messages`` prompt) is rendered as TRL's DPOTrainer does (:func:`datacheck.derive.pairs.render_pairs`)
   into ``chosen_input_ids``/``rejected_input_ids`` (prompt + response, truncated) and the response
   tokens each keeps, which the ``pref.*`` rules judge, and so are pairs whose prompt is a ``prompt``
   column of messages (TRL's conversational form with an explicit prompt, :func:`explicit_prompt_column`);
   so are pairs in TRL's implicit-prompt layout
   (no ``messages`` prompt; ``chosen``/``rejected`` whole conversations, or LLaMA-Factory's
   ``chosen_messages``/``rejected_messages``), their prompt cut as TRL's ``maybe_extract_prompt``
   cuts it (:func:`datacheck.derive.pairs.split_implicit_pairs`; the rows it cannot render, or why
   nothing was rendered, are ``CheckInput.unrendered_pairs``, which the pref family reports). When it cannot render (transformers not
   installed, no chat template), those roles are ``unavailable`` with the reason (their checks are
   skipped with it);
5. role columns whose values are all null (dtype ``Null`` / ``List(Null)``) are cast to the role's
   dtype (:func:`datacheck.model.roles.null_role_casts`), and dictionary-encoded text columns
   (``Categorical``/``Enum``: Arrow ``dictionary<string>``, pandas ``category``) to ``String``
   (:func:`datacheck.model.roles.text_casts`), and integer role columns read as 128-bit integers
   (a JSON or CSV value beyond 64 bits) to the role's 64-bit dtype, a value beyond it clipped to
   Int64's nearest bound, never null (:func:`datacheck.model.roles.wide_int_casts`,
   :func:`datacheck.model.roles.cast_expr`), lazily.

Steps 3 and 4 are the derivations (:data:`DERIVATIONS`): a caller names those it needs (the engine:
the ones the registered check families declare, ``checks.registry.needed_derivations``); a
derivation not asked for is not run (its columns are absent, the checks that read them skipped
as for any shard without them). Every other verb asks for all of them (the default).

No other module calls ``open_shard`` (a test walks the package's syntax trees for it).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import polars as pl

from datacheck.derive.alpaca import alpaca_messages, prompt_completion_messages
from datacheck.derive.chat import (
    RENDERED_COLUMNS,
    TEMPLATE_ERROR,
    UNTRUNCATED_ASSISTANT,
    ChatTemplate,
    load_chat_tokenizer,
    render_chat,
    template_error_column,
    template_of,
)
from datacheck.derive.messages import template_turns
from datacheck.derive.pairs import (
    PAIR_COLUMNS,
    PairCut,
    UnrenderedPairs,
    render_pairs,
    response_turns,
    split_implicit_pairs,
)
from datacheck.formats.base import ShardData, ShardReader, normalize_frame
from datacheck.formats.registry import open_shard
from datacheck.io.discover import DiscoveredShard
from datacheck.io.shardbytes import Unreadable
from datacheck.io.stores import is_url
from datacheck.model.config import Config
from datacheck.model.errors import ENGINE_ERRORS
from datacheck.model.findings import Finding
from datacheck.model.roles import (
    Roles,
    cast_expr,
    decimal_casts,
    float_vector_labels,
    message_fields,
    null_role_casts,
    resolve_roles,
    text_casts,
    text_column_names,
    wide_int_casts,
)

__all__ = ["CheckInput", "open_for_checks", "count_rows", "ALPACA", "CHAT", "PAIRS", "DERIVATIONS", "UNTOKENIZED_CHAT",
           "PROMPT_COLUMN", "explicit_prompt_column", "PLAIN_PROMPT_COMPLETION"]

#: the Alpaca layout's conversation as a ``messages`` column (:func:`datacheck.derive.alpaca.alpaca_messages`)
ALPACA = "alpaca"
#: ``messages`` rendered by the chat template: ``input_ids``, ``assistant_mask``, ``labels`` and the
#: template-error and untruncated-assistant columns (:func:`datacheck.derive.chat.render_chat`)
CHAT = "chat"
#: preference pairs rendered as TRL's DPOTrainer does (:func:`datacheck.derive.pairs.render_pairs`)
PAIRS = "pairs"
#: every derivation the read path can run
DERIVATIONS: frozenset[str] = frozenset({ALPACA, CHAT, PAIRS})


@dataclass
class CheckInput:
    """A shard (or an in-memory frame) as the checks read it.

    Attributes:
        lf: the rows, casts applied (0-based row index = position in this frame).
        schema: ``{column: dtype}`` of ``lf`` (after the casts).
        roles: the resolved roles (``[columns]`` plus inference over ``schema``).
        casts: ``{column: dtype}`` of the all-null role columns and dictionary-encoded text columns
            that were cast (empty when none).
        decode_findings: ``decode.*`` findings found while opening (line formats).
        line_format: True for JSONL/CSV (rows then also have 1-based line numbers).
        line_of_row: ``(rows,)`` int64, the 1-based line of each row, or None when it is ``row + line_base``.
        line_base: the line of row 0 when ``line_of_row`` is None.
        path: the shard file (None for an in-memory frame).
        stream: the opened shard's reader (``ShardData.stream``, a
            :class:`~datacheck.formats.base.ShardReader`: a local parquet, JSONL, CSV/TSV or Arrow IPC
            shard's batches and rows read again straight from the file, the whole decoded shard never
            held), else None (:mod:`datacheck.formats.batches` slices ``lf``).
        format: the shard's format (``"frame"`` for an in-memory frame).
        unrendered_pairs: implicit-prompt preference pairs the read path could not render (rows not
            rendered, or why nothing was rendered), or None; the pref family reports it.
        chat_template: the chat template ``messages`` were rendered with (where it came from, whether
            it has ``{% generation %}`` markers), or None when nothing was rendered.
        retyped: ``{column: rows}`` the reader read as null for a value of another JSON type
            (``ShardData.retyped``; its ``schema.dtype`` finding names them).
        clipped: the role columns of integers wider than 64 bits (128-bit integers, integral
            decimals: :func:`~datacheck.model.roles.wide_int_casts`) ``lf`` reads at Int64's bounds;
            ``uncast`` (not None when there are some) is ``lf`` before the casts, where ``inspect``
            reads their values as written.
    """

    lf: pl.LazyFrame
    schema: dict[str, pl.DataType]
    roles: Roles
    casts: dict[str, pl.DataType] = field(default_factory=dict)
    decode_findings: list[Finding] = field(default_factory=list)
    line_format: bool = False
    line_of_row: np.ndarray | None = None
    line_base: int = 1
    path: Path | None = None
    format: str = "frame"
    stream: ShardReader | None = None
    unrendered_pairs: UnrenderedPairs | None = None
    chat_template: ChatTemplate | None = None
    retyped: dict[str, np.ndarray] = field(default_factory=dict)
    clipped: tuple[str, ...] = ()
    uncast: pl.LazyFrame | None = None

    def lines_of(self, rows: list[int]) -> list[int]:
        """1-based line numbers of the 0-based ``rows`` (line formats), else ``[]``."""
        return ShardData(lf=self.lf, line_format=self.line_format, line_of_row=self.line_of_row,
                         line_base=self.line_base).lines_of(rows)


def open_for_checks(source: DiscoveredShard | pl.DataFrame | pl.LazyFrame, cfg: Config,
                    derive: frozenset[str] = DERIVATIONS) -> CheckInput:
    """Open ``source`` as every verb reads it (see the module docstring).

    Args:
        source: a discovered shard (path, format), or an in-memory polars frame (tests, the Python
            API: no decode findings, no line numbers).
        cfg: the validated config: ``[dataset]`` (CSV options), ``[columns]`` (roles, text columns),
            ``[report] max_examples`` (examples of decode findings).
        derive: the derivations to run (:data:`DERIVATIONS`, the default: all of them).

    Returns:
        The :class:`CheckInput`; nothing is collected except the schema (parquet/Arrow stay lazy scans).

    Raises:
        Unreadable: the shard cannot be opened or parsed, or its schema cannot be read (the reason
            says why and where; the audit turns it into ``decode.unreadable``).
        TypeError: ``source`` is none of the accepted types.
    """
    if isinstance(source, (pl.DataFrame, pl.LazyFrame)):
        data = normalize_frame(source.lazy())
    elif isinstance(source, DiscoveredShard):
        data = open_shard(source.source, source.format, cfg.dataset, cfg.report.max_examples,
                          string_columns=text_column_names(cfg.columns))
    else:
        raise TypeError(f"open_for_checks reads a DiscoveredShard or a polars DataFrame/LazyFrame, "
                        f"not {type(source).__name__}")
    try:
        schema = dict(data.lf.collect_schema())
    except Exception as exc:  # noqa: BLE001 - any reader failure on the schema is an unreadable shard
        raise Unreadable(f"cannot read the schema: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    vectors = _label_vectors(data.lf, schema, cfg)
    roles = _resolve(cfg, schema, vectors)
    lf = data.lf
    derived: list[str] = []
    unrendered: UnrenderedPairs | None = None
    template: ChatTemplate | None = None
    wanted = roles.messages is None and cfg.columns.messages is None and ALPACA in derive
    alpaca = alpaca_messages(schema) if wanted else None
    pc = prompt_completion_messages(schema) if wanted and alpaca is None else None
    if alpaca is not None and "messages" not in schema:
        lf = lf.with_columns(alpaca.alias("messages"))
        schema["messages"] = pl.List(pl.Struct({"role": pl.String, "content": pl.String}))
        roles = _resolve(cfg, schema, vectors)
        derived.append("messages")
    elif pc is not None and "messages" not in schema:
        lf = lf.with_columns(pc.expr.alias("messages"))
        schema["messages"] = pc.dtype
        roles = _resolve(cfg, schema, vectors)
        derived.append("messages")
    if pc is not None and not pc.conversational and roles.messages == "messages" and "messages" in derived:
        roles = replace(roles, unavailable=tuple((c, PLAIN_PROMPT_COMPLETION) for c in RENDERED_COLUMNS))
    elif _renders(cfg, roles, schema) and (roles.chosen is not None or roles.rejected is not None):
        why = ("preference data (chosen/rejected): the messages are prompts; prompt + chosen and prompt + "
               "rejected are rendered as chosen_input_ids/rejected_input_ids for the pref.* rules")
        if _renders_pairs(roles, schema) and PAIRS in derive:
            err = template_error_column(schema)
            lf, schema, cannot = _render_pairs(lf, schema, roles, cfg, err)
            derived += [c for c in (*PAIR_COLUMNS, err) if c in schema]
            roles = _resolve(cfg, schema, vectors)
            why = cannot or why
        elif not _renders_pairs(roles, schema):
            why = ("preference data (chosen/rejected): the messages are prompts, and chosen/rejected are not "
                   "responses a chat template renders (text, a message, or a list of messages, in both)")
        roles = replace(roles, unavailable=tuple((c, why) for c in RENDERED_COLUMNS))
    elif cfg.tokens.tokenizer is not None and roles.messages is None and _renders_pairs(roles, schema) \
            and (prompt := explicit_prompt_column(roles, schema)) is not None:
        if PAIRS in derive:
            err = template_error_column(schema)
            lf, schema, cannot = _render_pairs(lf, schema, roles, cfg, err, prompt)
            derived += [c for c in (*PAIR_COLUMNS, err) if c in schema]
            roles = _resolve(cfg, schema, vectors)
            if cannot is not None:
                unrendered = UnrenderedPairs(roles.chosen, roles.rejected, 0, why=cannot)  # type: ignore[arg-type]
    elif cfg.tokens.tokenizer is not None and roles.messages is None and _renders_pairs(roles, schema) \
            and all(isinstance(schema[c], pl.List) for c in (roles.chosen, roles.rejected)):
        if PAIRS in derive:
            err = template_error_column(schema)
            lf, schema, unrendered = _render_implicit_pairs(lf, schema, roles, cfg, err)
            derived += [c for c in (*PAIR_COLUMNS, err) if c in schema]
            roles = _resolve(cfg, schema, vectors)
    elif _renders(cfg, roles, schema) and CHAT in derive:
        err = template_error_column(schema)
        whole = template_error_column(schema, UNTRUNCATED_ASSISTANT)
        lf, schema, roles, template = _render(lf, schema, roles, cfg, err, whole)
        derived += [c for c in (*RENDERED_COLUMNS, whole, err) if c in schema]
    elif _untokenized_chat(cfg, roles, schema):
        roles = replace(roles, unavailable=tuple((c, UNTOKENIZED_CHAT) for c in RENDERED_COLUMNS))
    if derived:
        roles = replace(roles, derived=tuple(derived))
    clipped = tuple(wide_int_casts(roles, schema))
    uncast = lf if clipped else None
    casts = {**null_role_casts(roles, schema), **text_casts(roles, schema), **wide_int_casts(roles, schema),
             **decimal_casts(roles, schema)}
    if casts:  # the rule of each batch's cast too (formats.base.cast_frame)
        lf = lf.with_columns([cast_expr(c, schema[c], t) for c, t in casts.items()])
        schema.update(casts)
    where = (source.path, source.format) if isinstance(source, DiscoveredShard) else (None, "frame")
    return CheckInput(lf=lf, schema=schema, roles=roles, casts=casts, decode_findings=list(data.decode_findings),
                      line_format=data.line_format, line_of_row=data.line_of_row, line_base=data.line_base,
                      path=where[0], format=where[1], stream=data.stream, unrendered_pairs=unrendered,
                      chat_template=template, retyped=dict(data.retyped), clipped=clipped, uncast=uncast)


#: the skip reason of a check of token ids, token labels or the assistant mask on TRL's text
#: prompt-completion rows (their ``messages`` derived: :func:`datacheck.derive.alpaca.prompt_completion_messages`)
PLAIN_PROMPT_COMPLETION = ("text prompt-completion rows: TRL tokenizes the prompt and the completion as they are, "
                           "without a chat template, so no token columns are rendered from them (tokenize the rows "
                           "to audit their tokens)")


#: the skip reason of a check of token ids, token labels or the assistant mask on conversations no
#: tokenizer renders: the missing fact is ``[tokens] tokenizer`` (a ``[columns]`` key names nothing:
#: the rows hold no token column)
UNTOKENIZED_CHAT = ("the conversations are not tokenized: set [tokens] tokenizer (a tokenizer folder whose chat "
                    "template renders them into input_ids, assistant_mask and labels, as the trainer will)")


def _untokenized_chat(cfg: Config, roles: Roles, schema: dict[str, pl.DataType]) -> bool:
    """Conversations a tokenizer would render (:func:`_renders`: a usable ``messages`` column and none
    of the rendered columns, here or in ``[columns]``) but ``[tokens] tokenizer`` is unset, and no
    preference pair beside them (their prompts are rendered by the pair rule, with its own reason)."""
    if cfg.tokens.tokenizer is not None or roles.chosen is not None or roles.rejected is not None:
        return False
    if roles.messages is None or message_fields(schema[roles.messages]) is None:
        return False
    return not any(c in schema or getattr(cfg.columns, c) is not None for c in RENDERED_COLUMNS)


def _renders(cfg: Config, roles: Roles, schema: dict[str, pl.DataType]) -> bool:
    """Render when a tokenizer is configured, the shard has a usable ``messages`` column, and none
    of the rendered columns exists or is named in ``[columns]`` (tokenized data is judged as it is)."""
    if cfg.tokens.tokenizer is None or roles.messages is None or message_fields(schema[roles.messages]) is None:
        return False
    return not any(c in schema or getattr(cfg.columns, c) is not None for c in RENDERED_COLUMNS)


def _render(lf: pl.LazyFrame, schema: dict[str, pl.DataType], roles: Roles,
            cfg: Config, err: str, whole: str) -> tuple[pl.LazyFrame, dict[str, pl.DataType], Roles, ChatTemplate | None]:
    """The rendered columns added to the rows (the template-error column named ``err``, the
    assistant tokens before truncation ``whole``), and the template they were rendered with."""
    tok, why = load_chat_tokenizer(cfg.tokenizer_path() or "")
    if tok is None:
        return lf, schema, replace(roles, unavailable=tuple((c, why or "") for c in RENDERED_COLUMNS)), None
    col = roles.messages
    mf = message_fields(schema[col])
    try:
        df = lf.collect()
        convs = df.select(template_turns(col, mf).alias("t")).get_column("t").to_list()  # type: ignore[arg-type]
    except Exception as exc:  # noqa: BLE001 - the data cannot be read: the shard is unreadable
        raise Unreadable(f"reading the data failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    ign = cfg.labels.ignore if cfg.labels.ignore is not None else -100
    out = render_chat(convs, tok, cfg.tokens.max_seq_len, cfg.tokens.truncation_side, ign)
    df = df.hstack(out.columns.rename({TEMPLATE_ERROR: err, UNTRUNCATED_ASSISTANT: whole}))
    schema = dict(df.schema)
    return df.lazy(), schema, _resolve(cfg, schema), template_of(tok, cfg.tokenizer_path() or "")


def _renders_pairs(roles: Roles, schema: dict[str, pl.DataType]) -> bool:
    """Preference pairs are rendered when ``chosen`` and ``rejected`` are both responses a chat
    template renders (:func:`datacheck.derive.pairs.response_turns`) and none of the rendered pair
    columns exists (a tokenized shard is judged as it is)."""
    if roles.chosen is None or roles.rejected is None or any(c in schema for c in PAIR_COLUMNS):
        return False
    return all(response_turns(c, schema[c]) is not None for c in (roles.chosen, roles.rejected))


#: the column of TRL's explicit prompt in conversational preference data (``{"prompt": [{"role": "user",
#: ...}], "chosen": [{"role": "assistant", ...}], "rejected": [...]}``, TRL's "conversational, explicit
#: prompt" form, which DPOTrainer renders as prompt + chosen and prompt + rejected)
PROMPT_COLUMN = "prompt"


def explicit_prompt_column(roles: Roles, schema: dict[str, pl.DataType]) -> str | None:
    """The column holding each pair's prompt as messages (:data:`PROMPT_COLUMN`, a list of
    ``{role, content}`` structs) beside ``chosen``/``rejected``, or None. Such pairs were read as TRL's
    implicit-prompt layout (two whole conversations), which they are not: their responses share no
    leading turn, so no pair was rendered and every rendered id column was null (``empty.sequence``
    on every row of clean data)."""
    col = PROMPT_COLUMN
    if col not in schema or col in (roles.chosen, roles.rejected) or not isinstance(schema[col], pl.List):
        return None
    return col if message_fields(schema[col]) is not None else None


def _render_pairs(lf: pl.LazyFrame, schema: dict[str, pl.DataType], roles: Roles, cfg: Config,
                  err: str, prompt: str | None = None) -> tuple[pl.LazyFrame, dict[str, pl.DataType], str | None]:
    """The rendered pair columns (:func:`datacheck.derive.pairs.render_pairs`) added to the rows, or the
    reason it cannot render (transformers missing, no chat template). The prompts are the ``messages``
    role's conversations, or the column ``prompt`` names (:func:`explicit_prompt_column`)."""
    tok, why = load_chat_tokenizer(cfg.tokenizer_path() or "")
    if tok is None:
        return lf, schema, why
    col, a, b = prompt or roles.messages, roles.chosen, roles.rejected
    mf = message_fields(schema[col])
    try:
        df = lf.collect()
        parts = df.select(template_turns(col, mf).alias("p"), response_turns(a, schema[a]).alias("c"),  # type: ignore[arg-type, union-attr]
                          response_turns(b, schema[b]).alias("r"))  # type: ignore[union-attr]
    except Exception as exc:  # noqa: BLE001 - the data cannot be read: the shard is unreadable
        raise Unreadable(f"reading the data failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    out = render_pairs(parts["p"].to_list(), parts["c"].to_list(), parts["r"].to_list(), tok, PairCut.of(cfg))
    df = df.hstack(out.columns.rename({TEMPLATE_ERROR: err}))
    return df.lazy(), dict(df.schema), None


def _render_implicit_pairs(lf: pl.LazyFrame, schema: dict[str, pl.DataType], roles: Roles, cfg: Config,
                           err: str) -> tuple[pl.LazyFrame, dict[str, pl.DataType], UnrenderedPairs | None]:
    """Preference pairs in TRL's implicit-prompt layout (``chosen`` and ``rejected`` whole
    conversations, lists of messages, no prompt column; LLaMA-Factory's ``chosen_messages`` /
    ``rejected_messages``): the prompt cut as TRL's ``maybe_extract_prompt`` does
    (:func:`datacheck.derive.pairs.split_implicit_pairs`), then rendered like an explicit prompt
    (:func:`datacheck.derive.pairs.render_pairs`). Returns the rows with the pair columns added, and
    what was not rendered (None when every pair was): why nothing was rendered (transformers
    missing, no chat template), or the rows not rendered (no shared leading turn, a difference
    before the last assistant turn, a conversation the template rejects)."""
    a, b = roles.chosen, roles.rejected
    tok, why = load_chat_tokenizer(cfg.tokenizer_path() or "")
    if tok is None:
        return lf, schema, UnrenderedPairs(a, b, 0, why=why or "")  # type: ignore[arg-type]
    try:
        df = lf.collect()
        parts = df.select(response_turns(a, schema[a]).alias("c"), response_turns(b, schema[b]).alias("r"))  # type: ignore[union-attr]
    except Exception as exc:  # noqa: BLE001 - the data cannot be read: the shard is unreadable
        raise Unreadable(f"reading the data failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    split = split_implicit_pairs(parts["c"].to_list(), parts["r"].to_list())
    out = render_pairs(split.prompts, split.chosen, split.rejected, tok, PairCut.of(cfg))
    df = df.hstack(out.columns.rename({TEMPLATE_ERROR: err}))
    if not (split.no_prefix or split.diverged or out.rejected):
        return df.lazy(), dict(df.schema), None
    first = out.columns[TEMPLATE_ERROR][out.rejected[0]] if out.rejected else None
    return df.lazy(), dict(df.schema), UnrenderedPairs(
        a, b, df.height, no_prefix=tuple(split.no_prefix), diverged=tuple(split.diverged),  # type: ignore[arg-type]
        template_rejected=tuple(out.rejected), first_error=first)


def _resolve(cfg: Config, schema: dict[str, pl.DataType], vectors: bool = False) -> Roles:
    return resolve_roles(cfg.columns, schema,
                         class_domain=cfg.labels.num_classes is not None or cfg.labels.classes is not None,
                         label_vectors=vectors)


#: rows read to tell a float ``labels`` list beside token ids (:func:`_label_vectors`)
VECTOR_SAMPLE_ROWS = 1000


def _label_vectors(lf: pl.LazyFrame, schema: dict[str, pl.DataType], cfg: Config) -> bool:
    """Whether a float-list ``labels`` column beside the token ids (:func:`datacheck.model.roles.float_vector_labels`)
    is a per-row target vector (multi-label classification's one float per class: the tokenized
    rows of Hugging Face's multi-label recipe) rather than token labels written as floats: in the
    first :data:`VECTOR_SAMPLE_ROWS` rows with both lists, every ``labels`` list has one length and
    it differs from the ids' in more than half of them (token labels align with the ids in every
    row; a row where they do not is ``length.mismatch``). Reads two list lengths of those rows only
    when the schema asks (no config role for them); False when they cannot be read."""
    ids = cfg.columns.input_ids or "input_ids"
    if (cfg.columns.labels is not None or cfg.columns.target is not None or not float_vector_labels(schema)
            or not isinstance(schema.get(ids), (pl.List, pl.Array))):
        return False
    try:
        df = (lf.select(pl.col("labels").list.len().alias("n"), pl.col(ids).list.len().alias("m"))
              .head(VECTOR_SAMPLE_ROWS).collect().drop_nulls())
    except Exception:  # noqa: BLE001 - unreadable rows tell nothing: the schema's rule stands
        return False
    return bool(df.height) and df["n"].n_unique() == 1 and 2 * int((df["n"] != df["m"]).sum()) > df.height


def count_rows(path: Path | str, fmt: str, cfg: Config) -> int | None:
    """Rows of one shard, read through :func:`open_for_checks` with no derivation (a derived column
    never changes the rows), as little as the format allows: the count its reader knows once opened
    (``ShardData.stream.size``: parquet's footer, the first pass of JSONL, CSV and text, the record
    batches of an Arrow file, the engine's numbering of rows is the same), else every row read. None
    when unreadable. ``path`` may be the URL of an object in a store."""
    try:
        url = str(path) if is_url(str(path)) else None
        data = open_for_checks(DiscoveredShard(path=Path(path), rel=Path(path).name, format=fmt, url=url), cfg,
                               derive=frozenset())
        known = data.stream.size([])[0] if data.stream is not None else None
        if known is not None:
            return int(known)
        return int(data.lf.select(pl.len()).collect().item())
    except (Unreadable, *ENGINE_ERRORS):  # an unreadable shard has no row count (the audit reports it)
        return None
