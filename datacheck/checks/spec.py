"""The types a check module writes and the registry runs: what a check may know of a shard
(:class:`ShardContext`), what it yields (:class:`RowCheck` over an optional :class:`FlatView` with
:class:`RowAgg` aggregates, :class:`AfterQuery`, a :class:`~datacheck.model.findings.Finding` made by
:func:`finding` at the catalog's severity), what a measurement yields (:class:`Stat`, :class:`Payload`),
one ID's producer (:class:`CheckSpec`) and the config facts a check declares (:func:`fact_value`).

Registration and running are :mod:`datacheck.checks.registry`'s; the merge combinators of
multi-batch shards are :mod:`datacheck.checks.merge`'s.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Union

import numpy as np
import polars as pl

from datacheck.checks.merge import concat_parts
from datacheck.derive.chat import ChatTemplate
from datacheck.derive.pairs import UnrenderedPairs
from datacheck.model import catalog
from datacheck.model.config import Config
from datacheck.model.errors import InternalError
from datacheck.model.findings import Finding, Skipped
from datacheck.model.layouts import ANY as ANY_LAYOUT
from datacheck.model.layouts import optional_roles
from datacheck.model.roles import ROLE_SPECS, Roles, role_problem, token_id_columns

__all__ = [
    "ShardContext",
    "LOADER_PACKED_FORMATS",
    "RUNNING_TEXT_MIN_CHARS",
    "FlatView",
    "ROW_AGG_HOW",
    "RowAgg",
    "RowCheck",
    "RowNumbers",
    "Repeats",
    "Stat",
    "Payload",
    "AfterQuery",
    "RowsKey",
    "ShardItem",
    "MeasureItem",
    "ShardFn",
    "DatasetFn",
    "CheckSpec",
    "finding",
    "fact_value",
    "fact_unset",
    "unset_reason",
]


#: formats whose rows are documents that the training loader concatenates and cuts samples across:
#: format name -> why a row's length is no sample's length. Megatron-LM's GPTDataset
#: (megatron/core/datasets/gpt_dataset.py, ``_build_sample_index``) walks the shuffled documents of a
#: ``.bin``/``.idx`` pair and cuts samples of ``seq_length + 1`` tokens across document boundaries: a
#: document longer than that fills several samples, none is truncated, and positions restart in each.
#: The fewest characters a row of a running text must hold for the ``dup.*`` checks to compare it
#: (:attr:`ShardContext.running_text`): 50 tokens, the shortest repeat that Lee et al. 2022
#: ("Deduplicating Training Data Makes Language Models Better", ExactSubstr) count as duplicated
#: text, at about 4 characters per token of English text (OpenAI's rule of thumb for GPT-2/3 BPE).
#: Shorter lines repeat in any clean text (a play's speaker names, a wiki's section headings,
#: ``---`` separators, refrains).
RUNNING_TEXT_MIN_CHARS = 200

LOADER_PACKED_FORMATS: dict[str, str] = {
    "megatron": ("its rows are Megatron documents: Megatron's GPTDataset concatenates them and cuts samples of "
                 "seq_length + 1 tokens across document boundaries, so a long document fills several samples "
                 "and none is truncated"),
}


@dataclass(frozen=True)
class Repeats:
    """Rows that repeat an earlier row, each with the row it repeats: what ``refine`` and
    ``from_payload`` of a duplicate check return so its finding names the earlier row of each copy.

    ``rows``: 0-based shard rows of the copies (int64, shape (n,), any order); ``earlier``: for each,
    the 0-based shard row of the first occurrence of its content (int64, shape (n,), ``earlier[k] <
    rows[k]``). The engine sorts both by ``rows`` and writes the examples' pairs into the finding's
    ``details.examples`` (``{"row", "first_row"}``, as ``dup.exact_across_shards`` does with shards)."""

    rows: np.ndarray
    earlier: np.ndarray


#: 0-based shard row numbers a check's ``refine`` or ``from_payload`` returns: a list of ints, an
#: integer polars Series or a numpy integer array (the engine holds them as numpy int64), or
#: :class:`Repeats` (the rows with the earlier row each repeats)
RowNumbers = Union[list[int], pl.Series, np.ndarray, Repeats]


@dataclass(frozen=True)
class ShardContext:
    """What a shard check may know before reading data: config facts, roles, and the schema."""

    cfg: Config
    roles: Roles
    schema: dict[str, pl.DataType]
    shard: str
    #: False when the audit has a single shard and no splits or --against: nothing can repeat across
    #: shards, so the row-hash payload for the merge is not computed (it is the costliest item).
    cross_shard: bool = True
    #: implicit-prompt preference pairs the read path could not render (the pref family reports
    #: them as skipped entries), or None
    unrendered_pairs: UnrenderedPairs | None = None
    #: the chat template the read path rendered ``messages`` with (:class:`~datacheck.derive.chat.ChatTemplate`),
    #: or None when nothing was rendered
    chat_template: ChatTemplate | None = None
    #: the shard's layout name (:data:`datacheck.model.layouts.LAYOUTS`), or None when unknown: a
    #: check whose declared layouts leave it out is not applicable (not run, not skipped)
    layout: str | None = None
    #: the shard's format name (``parquet``, ``megatron``, ...: :data:`datacheck.formats.registry.FORMATS`),
    #: or None (a frame given in memory): a check whose meaning depends on how a format's loader
    #: turns rows into samples reads it
    format: str | None = None
    #: where the shard's rows are padded (``"right"`` or ``"left"``): ``[tokens] padding_side`` when
    #: the config sets it, else recognized from the shard's first rows
    #: (:func:`datacheck.derive.layout.padding_side_of`; right when they show both sides);
    #: ``"either"`` when none of them is padded (each row is then judged on its own side)
    padding_side: str = "right"
    #: True when :attr:`padding_side` was recognized from the rows (the config leaves it unset)
    padding_recognized: bool = False

    @property
    def token_label_bound(self) -> tuple[int | None, str]:
        """(the exclusive bound of the token labels' values, the fact it comes from) for this shard's
        layout (:meth:`Config.token_label_bound <datacheck.model.config.Config.token_label_bound>`:
        ``num_classes`` in a ``token_classification`` shard, else ``vocab_size``)."""
        return self.cfg.token_label_bound(self.layout)

    @property
    def running_text(self) -> int | None:
        """:data:`RUNNING_TEXT_MIN_CHARS` when the shard's rows are pieces of a running text that a
        pre-training pipeline packs (a plain-text shard read by line or paragraph, ``[dataset]
        sample_by``; :mod:`datacheck.formats.text`): the ``dup.*`` checks then compare only its rows of
        at least that many characters (text columns together); None when a row is a sample (every
        other format, and ``sample_by = "document"``: a duplicated file is a duplicated document)."""
        if self.format == "text" and self.cfg.dataset.sample_by != "document":
            return RUNNING_TEXT_MIN_CHARS
        return None

    @property
    def packed_by_loader(self) -> str | None:
        """Why a row's length is not a training sample's length (:data:`LOADER_PACKED_FORMATS`: the
        loader cuts samples across the rows of this format), or None (a row is a sample)."""
        return LOADER_PACKED_FORMATS.get(self.format or "")


@dataclass(frozen=True)
class FlatView:
    """A position-wise view of list columns that must align (e.g. input_ids, attention_mask, labels).

    The runner builds it once per shard from the same scan (polars shares the scan between the
    queries of one ``collect_all``): each list column exploded jointly, one row per position, plus
    ``__row`` (the 0-based row of the position). Rows where the lists differ in length, or where
    ``where`` is not true, contribute one null position (so they never fail a position-wise check).
    Checks and stats that carry this view are evaluated in it: their expressions see the columns
    as scalars (one element each).

    Attributes:
        key: identity of the view (items with equal keys share one exploded frame).
        cols: the list columns, exploded together.
        where: optional per-row condition (e.g. the mask is binary).
        drop_others: rows where ``where`` (or the lengths) fail contribute no position at all,
            instead of one null position: for a view of candidate rows (few or none on clean data),
            read only by its own check, whose expressions then run over the candidates' positions
            only (the rolling windows of ``content.periodic_tokens`` ran over one null position per
            row: about 12 of the 17 ms it cost a 38,917 x 128 batch without candidates).
    """

    key: str
    cols: tuple[str, ...]
    where: pl.Expr | None = None
    drop_others: bool = False

    def row_ok(self) -> pl.Expr:
        """Per row (list kernels): the row's positions are in the view (its lists have one length
        and ``where`` holds); other rows contribute one null position. A rule computed per row by
        list kernels instead of in the view uses it to judge the same rows."""
        first = pl.col(self.cols[0]).list.len()
        same = pl.all_horizontal([first == pl.col(c).list.len() for c in self.cols[1:]]) if len(self.cols) > 1 else first.is_not_null()
        if self.where is not None:
            same = same & self.where
        return same

    def frame(self, lf: pl.LazyFrame) -> pl.LazyFrame:
        """The exploded frame of ``lf`` (columns ``__row`` and ``cols``; ``__row`` is ``lf``'s own
        ``__row`` column when it has one, else the row's position in ``lf``)."""
        same = self.row_ok()
        # a frame of gathered rows (the second pass) carries the shard's row numbers in ``__row``:
        # keep them, so details name the shard's rows and not the positions in the gathered frame
        row = (pl.col("__row").cast(pl.UInt32) if "__row" in lf.collect_schema().names()
               else pl.int_range(pl.len(), dtype=pl.UInt32))
        # the condition is computed once per row as a column (inlined in each column's when/then,
        # polars evaluated it once per column: a candidate condition with n_unique costs that much)
        picked = lf.select([row.alias("__row"), same.alias("__keep"), *[pl.col(c) for c in self.cols]])
        if self.drop_others:
            return picked.filter(pl.col("__keep")).drop("__keep").explode(list(self.cols), empty_as_null=True)
        return (picked.select([pl.col("__row")] + [pl.when(pl.col("__keep")).then(pl.col(c)).alias(c) for c in self.cols])
                .explode(list(self.cols), empty_as_null=True))


#: the reducers a :class:`RowAgg` may use (polars' grouped aggregations of one column)
ROW_AGG_HOW = ("sum", "max", "min")


@dataclass(frozen=True)
class RowAgg:
    """A per-row aggregate over a :class:`FlatView`: ``how`` (``"sum"``, ``"max"`` or ``"min"``) of
    the per-position expression ``expr`` over the positions of each row.

    The engine evaluates every RowAgg of one view once per shard (the positions' expressions as
    columns of the exploded frame, then one grouped aggregation by ``__row``) and hands a row check
    one row per row of the view, with ``__row`` and a column per aggregate name: per-row sums and
    "last position where" without a window per row (``over``) or running sums in the position view.
    Two checks may share an aggregate by giving the same name and the same expression (a name given
    twice with different expressions is an InternalError).

    Attributes:
        name: the column name the row check's ``fails`` reads (unique per view).
        expr: per-position expression in the view (boolean or numeric; null is skipped by the reducer).
        how: the reducer.
    """

    name: str
    expr: pl.Expr
    how: str = "sum"

    def __post_init__(self) -> None:
        if self.how not in ROW_AGG_HOW:
            raise InternalError(f"row aggregate {self.name!r}: how must be one of {ROW_AGG_HOW}, not {self.how!r}")


@dataclass(frozen=True)
class RowCheck:
    """A row-level check as polars expressions.

    Attributes:
        check: check ID.
        column: the column concerned (None when several).
        fails: Boolean expression per row; True = the row fails; null counts as not failing.
            (May be None when ``rows`` is given.)
        message: ``f(count, details) -> str``; ``details`` holds the evaluated ``details`` exprs.
        example: per-row expression of the value to show; evaluated only on example rows.
        details: name -> aggregate expression, evaluated in the second pass over this check's
            failing rows only (never when nothing failed), so it costs nothing on clean data.
        severity: overrides the catalog's default severity.
        refine: with ``key``: ``f(sub) -> exact_rows``, where ``sub`` (a DataFrame with ``__row``,
            the 0-based shard row, and every column) holds every row whose ``key`` is shared with
            another row of the shard; it returns the rows that exactly repeat an earlier one (e.g.
            duplicates by a 64-bit in-memory hash, verified exactly here, so a collision never
            creates a finding).
        details_merge: per ``details`` key, how its values on each batch's failing rows merge
            (:func:`~datacheck.checks.merge.sum_parts`, :func:`~datacheck.checks.merge.max_parts`, ...). When every key has one, a multi-batch shard
            evaluates the details batch by batch and keeps none of the failing rows; otherwise the
            failing rows (the columns the checks read) are kept until the shard's last batch, so
            memory grows with the failing rows of such a check.
        key: instead of ``fails``, a per-row hash expression: the rows whose key repeats an earlier
            row's (over the whole shard, across batches) are candidates, verified by ``refine``.
        rows: instead of ``fails``, an aggregate expression giving the sorted failing row indices
            (UInt32).
        view: a :class:`FlatView`: ``fails`` (and ``details``) are then evaluated per position in
            that view, and a row fails when any of its positions does.
        from_payload: instead of ``fails``, ``f(payload) -> rows``: the failing rows decided after
            the fused query from the shard's :class:`Payload` values (e.g. in-shard duplicates from
            the 128-bit row hashes the query already computed for the merge). Both return
            :data:`RowNumbers`: an integer Series or numpy array keeps a million rows at 8 bytes each.
        per_row: with ``view``: the :class:`RowAgg` aggregates ``fails`` reads. ``fails`` is then
            evaluated over one row per row of the view (columns ``__row`` and the aggregate names),
            not per position; ``details`` stay per position.
        not_retyped: a column, or several: the rows the reader read as null in one of them because
            it reported their value (``CheckInput.retyped``: a value of another JSON type, reported as
            ``schema.dtype`` with row, line and value; bytes that did not decode, ``decode.bad_record``)
            do not fail this check (a check of missing values: they are not missing; with ``key``, a
            duplicate check: they are not candidates, a value not read is not known to be equal).
        message_all_rows: ``f(count, details) -> str | None``: the message when every row of the
            shard fails (a hint that the whole shard is of another kind); None (the function, or
            its result) keeps ``message``.
    """

    check: str
    column: str | None
    fails: pl.Expr | None
    message: Callable[[int, dict[str, Any]], str]
    example: pl.Expr | None = None
    details: dict[str, pl.Expr] = field(default_factory=dict)
    severity: str | None = None
    refine: Callable[[pl.DataFrame], RowNumbers] | None = None
    rows: pl.Expr | None = None
    view: FlatView | None = None
    from_payload: Callable[[dict[str, Any]], RowNumbers] | None = None
    key: pl.Expr | None = None
    details_merge: dict[str, Callable[[list[Any]], Any]] = field(default_factory=dict)
    per_row: tuple[RowAgg, ...] = ()
    message_all_rows: Callable[[int, dict[str, Any]], str | None] | None = None
    not_retyped: str | tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.per_row and self.view is None:
            raise InternalError(f"row check {self.check!r}: per-row aggregates need a flat view")


@dataclass(frozen=True)
class Stat:
    """An aggregate that goes into the shard's ``stats`` under ``key`` (after ``post``).

    A shard larger than one batch (:mod:`datacheck.formats.batches`) evaluates ``expr`` on each batch;
    ``merge`` combines the batches' values (as Python values, before ``post``, in row order) into
    the value ``expr`` has on the whole shard, and ``post`` runs once on it. Write ``expr`` as
    mergeable partial aggregates (counts, sums, exact value counts, min/max, moments) and derive
    ratios in ``post``. The combinators of :mod:`datacheck.checks.merge` (``sum_parts``,
    ``counts_parts``, ``fields_parts``, ...) merge exactly, except ``moments_parts`` (floating point).
    ``merge=None``: the stat cannot be merged and is a check error on a multi-batch shard.
    """

    key: str
    expr: pl.Expr
    post: Callable[[Any], Any] = lambda v: v
    view: FlatView | None = None
    merge: Callable[[list[Any]], Any] | None = None


@dataclass(frozen=True)
class Payload:
    """An aggregate computed in the fused query and kept on the shard result (``ShardResult.payload``)
    for the merge, but never written into the report (e.g. 128-bit row content hashes). The value
    stays a polars object (e.g. a Series), unlike a :class:`Stat`'s.

    On a multi-batch shard, ``post`` runs on each batch and ``merge`` combines the batches' posted
    values in row order (default :func:`concat_parts`: per-row payloads are concatenated).

    ``not_retyped`` / ``unmatched``: for a per-row payload that compares rows (content hashes), the
    columns whose cells the reader read as null for a value it reported (``ShardData.retyped``: a
    value of another JSON type, bytes that did not decode) and the function ``unmatched(value, rows,
    salt)`` that makes those rows (sorted int64 shard rows) match no other row, in this shard or
    another (``salt``: the shard's content hash), and any rows the value marks itself (the row
    hashes' rows of blank content, a running text's short rows); the engine applies it to every merged
    value (``rows`` empty when no cell was unread), before any check reads it.

    ``shard_only``: read by the shard's own ``from_payload`` checks only; not kept on the shard's
    result (never held for the merge, never cached), so its bytes a row do not add up over a dataset."""

    key: str
    expr: pl.Expr
    post: Callable[[Any], Any] = lambda v: v
    merge: Callable[[list[Any]], Any] = field(default=lambda parts: concat_parts(parts))
    not_retyped: tuple[str, ...] = ()
    unmatched: Callable[[Any, Any, str], Any] | None = None
    shard_only: bool = False


def finding(check_id: str, message: str, *, severity: str | None = None, **fields: Any) -> Finding:
    """A :class:`~datacheck.model.findings.Finding` of ``check_id`` at the catalog's default severity
    (:func:`datacheck.model.catalog.info`), unless ``severity`` names another; ``fields`` are the
    Finding's other attributes (``column``, ``count``, ``rows``, ``shards``, ``details``, ...). The
    policy's ``[policy]`` overrides apply later, to every finding alike.

    Raises:
        InternalError: ``check_id`` is not a catalog ID.
    """
    if not catalog.is_known(check_id):
        raise InternalError(f"finding of {check_id!r}: not a catalog ID (CHECKS.md)")
    return Finding(check=check_id, severity=severity or catalog.info(check_id).severity, message=message, **fields)


@dataclass(frozen=True)
class AfterQuery:
    """A shard-level verdict decided after the fused query from the shard's row count.

    Attributes:
        check: check ID.
        decide: ``f(rows) -> findings`` (``rows``: the shard's row count, an int >= 0).
    """

    check: str
    decide: Callable[[int], Iterable[Finding]]


@dataclass(frozen=True, order=True)
class RowsKey:
    """The key of one row check's failing rows (``ShardResult.failing_rows``): the check ID and the
    column it concerns (None when several). ``str(key)`` is ``"check"`` or ``"check:column"``."""

    check: str
    column: str | None = None

    def __str__(self) -> str:
        return self.check if self.column is None else f"{self.check}:{self.column}"


ShardItem = Union[RowCheck, Finding, Skipped, AfterQuery]
MeasureItem = Union[Stat, Payload]
ShardFn = Callable[[ShardContext], Iterable[ShardItem]]
DatasetFn = Callable[[Any], Iterable[Union[Finding, Skipped]]]


@dataclass(frozen=True)
class CheckSpec:
    """One check ID's producer: what it needs and the functions that compute it.

    Attributes:
        id: the catalog ID it emits (and no other).
        roles: roles it needs; ``"a|b"`` needs either. A role that must be present with a dtype that
            serves it (``dtype_roles``) skips the check with the ``schema.dtype`` reason otherwise.
        facts: config facts it needs, as ``section.key`` (``tokens.vocab_size``); unset (None) skips it;
            ``"a.x|a.y"``: either serves (skipped when all are unset).
        reasons: overrides of the derived skip reasons, by role or fact name.
        dtype_roles: the declared roles whose dtype must serve the role (default: every single role).
        shard: the shard-stage function, or None.
        dataset: the dataset-stage function, or None.
        module: the module that registered it.
        dataset_facts: config facts the dataset stage needs (its own declaration).
        layouts: the layouts (:data:`datacheck.model.layouts.LAYOUTS`) the check applies to; on a
            shard of another (known) layout it is not applicable.
        reads_tokens: it finds the token-id columns of the row itself
            (:func:`datacheck.model.roles.token_id_columns`) instead of declaring ``input_ids``.
        layout_roles: ``(layout, roles)`` pairs: in a shard of that layout the check needs these
            roles instead of ``roles`` (``padding.label_not_ignored`` reads the encoder's
            ``attention_mask`` everywhere but in ``seq2seq``, whose labels follow the decoder);
            its ``dtype_roles`` there are those of ``dtype_roles`` it still declares.
    """

    id: str
    roles: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()
    reasons: tuple[tuple[str, str], ...] = ()
    dtype_roles: tuple[str, ...] = ()
    shard: ShardFn | None = None
    dataset: DatasetFn | None = None
    module: str = ""
    dataset_facts: tuple[str, ...] = ()
    layouts: frozenset[str] = ANY_LAYOUT
    reads_tokens: bool = False
    layout_roles: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def roles_in(self, layout: str | None) -> tuple[str, ...]:
        """The roles the check needs in a shard of ``layout`` (:attr:`layout_roles`, else :attr:`roles`)."""
        return dict(self.layout_roles).get(layout or "", self.roles)

    def dtype_roles_in(self, layout: str | None) -> tuple[str, ...]:
        """The declared roles whose dtype must serve the role in a shard of ``layout``."""
        needed = {n for r in self.roles_in(layout) for n in r.split("|")}
        return tuple(r for r in self.dtype_roles if r in needed)

    def applies(self, layout: str | None) -> bool:
        """Whether the check applies to a shard of ``layout`` (None, unknown: every check applies)."""
        return layout is None or layout in self.layouts

    def other_form(self, ctx: "ShardContext") -> str | None:
        """The role that makes the check not apply to ``ctx``'s shard although its layout is declared,
        or None: the rows are the form of the layout without it
        (:func:`datacheck.model.layouts.optional_roles`): every alternative of one declared role
        is absent from the shard and optional in the layout (for a check that ``reads_tokens``,
        ``input_ids`` is present when any token-id column is). A role the read path could not make
        (``Roles.unavailable``), or one ``[columns]`` declares and the shard lacks (``Roles.missing``:
        a mistyped ``input_ids = "ids"`` on token rows of a text classifier), is a skip with its
        reason, never this."""
        present = self.present_roles(ctx)
        optional = optional_roles(ctx.layout, present)
        if not optional:
            return None
        unavailable = {r for r, _ in getattr(ctx.roles, "unavailable", ())} | {r for r, _ in ctx.roles.missing}
        for role in self.roles_in(ctx.layout):
            names = role.split("|")
            if all(n in optional and n not in unavailable and not present.has(n) for n in names):
                return role
        return None

    def present_roles(self, ctx: "ShardContext") -> Roles:
        """``ctx.roles`` as this check's declaration reads them: for a check that ``reads_tokens``, a
        shard without an ``input_ids`` column but with another token-id column
        (:func:`datacheck.model.roles.token_id_columns`: TRL's ``chosen_input_ids``, ...) has the role
        (the first such column stands for it; the check finds every column itself)."""
        if not self.reads_tokens or ctx.roles.input_ids is not None:
            return ctx.roles
        cols = token_id_columns(ctx.roles, ctx.schema)
        return replace(ctx.roles, input_ids=cols[0]) if cols else ctx.roles

    def reason(self, name: str, default: str) -> str:
        return dict(self.reasons).get(name, default)

    def unmet_dataset(self, cfg: Config) -> str | None:
        """Why the dataset stage cannot run (an unset ``dataset_facts`` entry), or None."""
        for fact in self.dataset_facts:
            if fact_unset(cfg, fact):
                return self.reason(fact, unset_reason(fact))
        return None

    def unmet(self, roles: Roles, cfg: Config, problems: Any = None, layout: str | None = None) -> str | None:
        """Why this check cannot run (the first unmet declaration), or None.

        Args:
            roles: the shard's roles (None at the dataset stage: roles are not checked there).
            cfg: the config.
            problems: ``() -> list[RoleDtypeProblem]`` of the shard (called only when needed).
            layout: the shard's layout name (None: unknown): the roles it needs there
                (:meth:`roles_in`).
        """
        if roles is not None:
            for role in self.roles_in(layout):
                names = role.split("|")
                if not any(roles.has(r) for r in names):
                    why = next((w for r, w in getattr(roles, "unavailable", ()) if r in names), None)
                    if why is not None:  # the read path could not make the role (e.g. rendering needs a package)
                        return why
                    lost = next(((r, c) for r, c in roles.missing if r in names), None)
                    if lost is not None:  # declared, absent: the column schema.missing_column names
                        return (f"[columns] {lost[0]} names {lost[1]!r}, which this shard lacks "
                                "(schema.missing_column)")
                    default = (ROLE_SPECS[names[0]].missing_reason if len(names) == 1 else
                               f"no {' or '.join(names)} column (set [columns] {' or '.join(names)})")
                    return self.reason(role, default)
        for fact in self.facts:
            if fact_unset(cfg, fact):
                return self.reason(fact, unset_reason(fact))
        dtype_roles = self.dtype_roles_in(layout)
        if roles is not None and dtype_roles and problems is not None:
            probs = problems()
            for role in dtype_roles:
                p = role_problem(probs, role)
                if p is not None:
                    return p.skip_reason
        return None


def fact_unset(cfg: Config, fact: str) -> bool:
    """Whether fact ``section.key`` is unset; ``"a.x|a.y"`` (either fact serves) is unset when all are."""
    return all(fact_value(cfg, f) is None for f in fact.split("|"))


def unset_reason(fact: str) -> str:
    parts = [f.split(".", 1) for f in fact.split("|")]
    return "; ".join(f"[{section}] {key} is not set" for section, key in parts)


def fact_value(cfg: Config, fact: str) -> Any:
    """The value of config fact ``section.key`` (``labels.ignore_index`` is the effective ignore
    index: None when unset). Raises InternalError for a fact the config does not have."""
    section, key = fact.split(".", 1)
    sec = getattr(cfg, section, None)
    if sec is None:
        raise InternalError(f"check declares fact {fact!r}, but the config has no [{section}] section")
    if section == "labels" and key == "ignore_index":
        return sec.ignore
    if key == "schema" and section == "dataset":
        return sec.schema_
    if key not in type(sec).model_fields:
        raise InternalError(f"check declares fact {fact!r}, but [{section}] has no key {key!r}")
    return getattr(sec, key)
