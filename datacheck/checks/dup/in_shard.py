"""dup: repeated rows within a shard (cross-shard duplicates are decided in the merge).

Content: the role columns together (all columns when no role is declared or inferred); columns with
no role (an ``idx``) never make rows distinct. Null equals null; values are compared exactly. Rows
whose content is all blank (an empty text, an empty token sequence, a conversation of blank turns:
:mod:`datacheck.checks.dup.blank`) are the empty checks' findings, never repeats of each other.
When there is content besides the class label, repeats are decided from the 128-bit row content
hashes (plus the label) that the fused query computes anyway for the cross-shard checks
(dup/cross.py; canonical encoding, xxh3-128). Otherwise (the label is the only content) the fused
query finds candidates with polars' in-memory 64-bit hash (never stored), verified by exact
comparison, so a hash collision can never create a finding.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np
import polars as pl

from datacheck.checks.dup.blank import blank_rows, unjudged_responses
from datacheck.checks.dup.cross import CHARS_FIELD, ROWS_KEY, payload_wanted
from datacheck.checks.dup.stretch import stretch_copies
from datacheck.checks.registry import (
    Payload,
    Repeats,
    RowCheck,
    ShardContext,
    ShardItem,
    check,
    derives,
    first_part,
    measure,
)
from datacheck.derive.read import ALPACA, CHAT
from datacheck.model import layouts as lay
from datacheck.model.findings import Skipped
from datacheck.model.roles import content_gap, row_content

__all__ = ["exact_in_shard", "content_columns", "repeated_stretches", "UNREAD_KEY", "unread_reason"]

#: the payload key (``ShardResult.payload``) of a shard whose row content was not read (the reason):
#: the report's ``row_content`` leaves such a shard out (:func:`datacheck.report.build.build_report`)
UNREAD_KEY = "dup.unread"

#: the read path's derivations this family reads: the Alpaca layout's messages and the chat
#: template's token columns are role columns like the shard's own
derives(__name__, ALPACA, CHAT)


def content_columns(ctx: ShardContext) -> list[str]:
    """The shard's row content (:func:`datacheck.model.roles.row_content`), the class label included."""
    return row_content(ctx.roles.columns(), ctx.roles.label, list(ctx.schema), ctx.roles.of("target"))


def _shown_column(cols: list[str], schema: dict[str, pl.DataType]) -> str:
    """The column an example shows when the content has no string column: token ids, else the
    first list column, else the first column."""
    for c in cols:
        if c == "input_ids":
            return c
    for c in cols:
        if isinstance(schema.get(c), (pl.List, pl.Array)):
            return c
    return cols[0]


def _example_column(cols: list[str], ctx: ShardContext) -> str:
    """The column a finding's examples show: among the role columns of the content (the class label
    and the columns that only condition a row, such as ``tools`` or ``system``, left out when there
    are others), the first string column, else :func:`_shown_column` of them. A tool-calling row's
    example is its conversation, never its ``tools`` JSON string (``'[]'`` in most rows)."""
    roles = set(ctx.roles.columns())
    own = [c for c in cols if c in roles and c != ctx.roles.label] or cols
    return next((c for c in own if ctx.schema[c] == pl.String), None) or _shown_column(own, ctx.schema)


def _key_columns(cols: list[str], schema: dict[str, pl.DataType]) -> list[str]:
    """The content columns hashed into the duplicate-candidate key: every column that is not a list
    (a string or a number costs one hash a row: 2 ms for 200,000 rows) and the one list column that
    best tells rows apart (token ids, else the first list). Equal rows have equal values in all of
    them, so the key finds every duplicate candidate; the fewer rows share a key, the fewer are read
    again to be compared exactly. A key of one low-cardinality column (a short ``text`` of a few
    words before the token ids) made every row a candidate: 199,485 of the 200,000 rows of
    benchmarks/bench_peers.py's 200,000 x 256 shard, read again whole and compared (8.1 and 5.4 s
    under cProfile; peak RSS 3.1-3.5 GiB, about 1 GiB with this key). Further list columns (masks, labels: 3 of them cost 0.30 vs 0.09 CPU s there) are left
    to the exact comparison."""
    lists = [c for c in cols if isinstance(schema.get(c), (pl.List, pl.Array))]
    token = next((c for c in lists if c == "input_ids"), lists[0] if lists else None)
    return [c for c in cols if c not in lists or c == token]


def _fingerprint(col: str, dtype: pl.DataType | None) -> pl.Expr:
    """A cheap per-row key with equal values for equal rows. Lists: (length, sum, min, max, first,
    second, third, second-to-last, last) from native list kernels (hashing whole lists costs ~3x
    more); other types: the value. The 2nd, 3rd and 2nd-to-last values cost about 3 % more than the
    six reductions alone and tell apart the rows those confuse: right-padded rows share length,
    max and last (the pad id), so only sum, min and first differed, and 2 of the 2,581,110 random
    rows of benchmarks/bench_audit.py's 4 GiB x 128 shard shared them; every candidate is verified
    exactly (:func:`_refine`), but it makes the engine read its rows again (``_run_batches``)."""
    c = pl.col(col)
    if isinstance(dtype, pl.Array):
        c = c.arr.to_list()
        dtype = pl.List(dtype.inner)
    if isinstance(dtype, pl.List) and dtype.inner.is_numeric():
        return pl.struct(c.list.len().alias("n"), c.list.sum().alias("s"), c.list.min().alias("lo"),
                         c.list.max().alias("hi"), c.list.first().alias("a"), c.list.last().alias("z"),
                         c.list.get(1, null_on_oob=True).alias("b"), c.list.get(2, null_on_oob=True).alias("c"),
                         c.list.get(-2, null_on_oob=True).alias("y")).hash(seed=7)
    return c.hash(seed=7)


def _row_key(cols: list[str], schema: dict[str, pl.DataType] | None = None) -> pl.Expr:
    """The XOR of the columns' seeded fingerprint hashes, combined as a balanced tree: the same key as a
    left-to-right chain (XOR is associative), but an expression of depth log2(columns), where a chain
    of one XOR per column made polars' planning of the fused query super-linear (a TSV of 2,000
    columns: 5.7 s and 1.4 GB for two rows; 8,334 columns did not end in 8 minutes)."""
    schema = schema or {}
    keys = [_fingerprint(c, schema.get(c)).hash(seed=i + 1) for i, c in enumerate(cols)]
    while len(keys) > 1:
        keys = [keys[i] ^ keys[i + 1] if i + 1 < len(keys) else keys[i] for i in range(0, len(keys), 2)]
    return keys[0]


#: list elements a row's list cell is compared in at a time when a candidate row holds more
#: (:func:`_repeats_in_slices`): 1,048,576 (8 MiB of int64 ids a row per slice)
SLICE_ELEMENTS = 1 << 20
#: decoded bytes of the candidate rows (polars' ``estimated_size``) under which they are compared
#: whole without looking at their lists' lengths: 64 MiB
SLICED_ABOVE_BYTES = 64 << 20


def _longest_list(df: pl.DataFrame, lists: list[str]) -> int:
    """The most elements a cell of the list columns ``lists`` of ``df`` holds (0 when none)."""
    got = df.select(pl.max_horizontal([pl.col(c).list.len().max() for c in lists])).item()
    return int(got or 0)


def _repeats_in_slices(df: pl.DataFrame, cols: list[str], lists: list[str], row: str, longest: int) -> Repeats:
    """:func:`_repeats_of` for rows of long lists (cells of up to ``longest`` elements in the list
    columns ``lists``): two rows are equal exactly when every slice ``[k * SLICE_ELEMENTS, (k + 1) *
    SLICE_ELEMENTS)`` of their lists is equal (a shorter list's slices end sooner, so lists of different
    lengths differ in some slice; a null list stays null in every slice) and their other columns are.
    Each slice labels every row with the first row holding the same values there (polars' own equality,
    as on whole rows); rows with the same labels in every slice repeat each other. Where the whole rows
    were row-encoded at once (2 rows of 16 million int64 tokens: about 1 GB over the rows themselves),
    one slice of each row is (``SLICE_ELEMENTS``)."""
    first = pl.col(row).cast(pl.Int64).first()
    labels = df.select(pl.col(row))
    for k, start in enumerate(range(0, max(longest, 1), SLICE_ELEMENTS)):
        part = [pl.col(c).list.slice(start, SLICE_ELEMENTS) if c in lists else pl.col(c) for c in cols]
        if k and len(part) > len(lists):  # the other columns count once, in the first slice
            part = [p for c, p in zip(cols, part) if c in lists]
        key = pl.struct(part) if len(part) > 1 else part[0]
        labels = labels.with_columns(df.select(first.over(key).alias(f"__s{k}")))
    return _repeats_of(labels, [c for c in labels.columns if c != row], row)


def _repeats_of(df: pl.DataFrame, cols: list[str], row: str) -> Repeats:
    """The rows of ``df`` (shard rows in column ``row``, ascending) whose values in ``cols`` repeat
    an earlier row's, each with the first row holding those values (null equals null). The first
    rows are looked up only when some row repeats (a clean shard costs one ``is_first_distinct``).
    Rows of lists longer than :data:`SLICE_ELEMENTS` are compared a slice of their lists at a time
    (:func:`_repeats_in_slices`), with the same result."""
    lists = [c for c in cols if isinstance(df.schema[c], pl.List)]
    if lists and df.height > 1 and df.estimated_size() > SLICED_ABOVE_BYTES:
        longest = _longest_list(df, lists)
        if longest > SLICE_ELEMENTS:
            return _repeats_in_slices(df, cols, lists, row, longest)
    key = pl.struct(cols) if len(cols) > 1 else pl.col(cols[0])
    copies = df.select(key.is_first_distinct().not_().alias("copy"))["copy"]
    if not copies.any():
        return Repeats(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))
    got = df.select(pl.col(row).cast(pl.Int64).alias("row"),
                    pl.col(row).cast(pl.Int64).first().over(key).alias("first")).filter(copies)
    return Repeats(got["row"].to_numpy(), got["first"].to_numpy())


def _refine(cols: list[str], blank: pl.Expr | None = None):
    def refine(sub: pl.DataFrame) -> Repeats:
        """``sub``: every row (with ``__row``, in row order) whose key is shared with another row.
        Returns the repeats' shard rows with the first row each repeats (int64 arrays: never a list of
        a million Python ints); rows of blank content (``blank``) are no repeats. Candidates of more
        than :data:`SLICED_ABOVE_BYTES` are copied without their blank rows only when some row is
        blank (a filter copies every row it keeps: 2 rows of 16 million int64 ids, 256 MB)."""
        if blank is not None:
            if sub.estimated_size() <= SLICED_ABOVE_BYTES:
                sub = sub.filter(~blank)
            else:
                kept = sub.select((~blank).alias("kept")).to_series()
                if kept.null_count() or not kept.all():
                    sub = sub.filter(kept)
        return _repeats_of(sub, cols, "__row")

    return refine


def _repeats_from_hashes(payload: dict) -> Repeats:
    """Rows whose (128-bit content hash, label) repeats an earlier row (see dup/cross.py's encoding),
    each with the first row of that (hash, label)."""

    df = payload[ROWS_KEY]
    if len(df.columns) == 1:
        return _repeats_of(df.with_row_index("__r"), df.columns, "__r")
    # a (hash, label) that repeats has a repeated hash, and so a repeated low 64 bits of it: the
    # struct (row-encoded by polars: +1.5 GB on 8M rows) is compared on those candidate rows only.
    # The repeated low words come from a sort (8 bytes a row twice; polars' is_duplicated kept
    # ~65 bytes a row); the first of each group among the candidates is the first in the shard.
    low = df.select(pl.col(df.columns[0]).cast(pl.UInt64, wrap_numerical=True)).to_series().to_numpy()
    ordered = np.sort(low)
    repeated = np.unique(ordered[1:][ordered[1:] == ordered[:-1]])
    del ordered
    if repeated.size == 0:
        return Repeats(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))
    cand = df.with_row_index("__r").filter(pl.Series(np.isin(low, repeated)))
    return _repeats_of(cand, df.columns, "__r")


def _high_low(h: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """The high and low 64 bits of UInt128 hashes as two uint64 arrays (8 bytes a row each)."""
    frame = h.to_frame("h")
    low = frame.select(pl.col("h").cast(pl.UInt64, wrap_numerical=True)).to_series().to_numpy()
    high = frame.select((pl.col("h") // pl.lit(2**64, dtype=pl.UInt128)).cast(pl.UInt64)).to_series().to_numpy()
    return high, low


def repeated_stretches(rep: Repeats, high: np.ndarray, low: np.ndarray, chars: np.ndarray, floor: int) -> Repeats:
    """The copies of ``rep`` that lie in a stretch repeating an earlier stretch of ``floor`` characters
    or more (the rows of a running text: :attr:`ShardContext.running_text`), by the one rule of
    :mod:`datacheck.checks.dup.stretch` (``dup.exact_across_shards`` applies it across shards).

    Args:
        rep: the copies (``rows``) and the first row of each one's content (``earlier``), int64.
        high, low: the halves of every row's content hash (uint64, shape (shard rows,)).
        chars: every row's characters (shape (shard rows,)).
        floor: the fewest characters of a stretch that counts.

    Returns:
        The copies kept, in row order, each with the row it repeats in its stretch as ``earlier`` (the
        row ``shift`` rows before it, of the same content: a pasted passage names the passage it copies,
        not the first occurrence of each of its lines, such as a speaker's name at the play's start)."""
    def same(x: int, y: int) -> bool:
        return bool(y >= 0 and high[x] == high[y] and low[x] == low[y])

    rows, _first, aligned = stretch_copies(rep.rows, rep.earlier, same, lambda r: chars[r], floor)
    return Repeats(rows, aligned)


def _running_repeats(floor: int):
    def decide(payload: dict) -> Repeats:
        """In-shard repeats of a running text: :func:`repeated_stretches` over the row hashes and the
        rows' characters (``crossdup.rows``)."""
        df = payload[ROWS_KEY]
        rep = _repeats_from_hashes({ROWS_KEY: df.select("hash")})
        if not rep.rows.size:
            return rep
        high, low = _high_low(df["hash"])
        return repeated_stretches(rep, high, low, df[CHARS_FIELD].to_numpy(), floor)

    return decide


def _message(n: int, d: dict, cols: list[str], floor: int | None = None) -> str:
    """The finding's message, naming the earlier row of the first copy when the details hold it, and
    the rows compared when the shard is a running text (``floor``: :attr:`ShardContext.running_text`)."""
    first = (d.get("examples") or [None])[0]
    which = f": row {first['row']} repeats row {first['first_row']}" if first else ""
    only = (f" (the rows are lines or paragraphs of a running text: only stretches of rows that repeat an earlier "
            f"stretch in order and hold at least {floor} characters are counted, in a shard and across shards "
            "alike; shorter ones repeat in any text)") if floor is not None else ""
    return f"{n} row(s) repeat an earlier row of this shard exactly (content: {', '.join(cols)}){which}{only}"


def unread_reason(ctx: ShardContext, cols: list[str]) -> str | None:
    """Why the shard's row content ``cols`` (:func:`content_columns`) is not compared, or None: it is
    the class label alone, or it cannot tell samples apart
    (:func:`~datacheck.model.roles.content_gap`: a declared content column the shard lacks)."""
    if cols == [ctx.roles.label]:
        return "no content column besides the label (set [columns] text or features to the columns a row is made of)"
    return content_gap(ctx.roles, cols)  # e.g. text = ["title", "body"] without body: the title is no sample


@measure("rowcontent")
def unread_payload(ctx: ShardContext) -> Iterable[Payload]:
    """:data:`UNREAD_KEY` (the reason, a string) on a shard whose row content is not read
    (:func:`unread_reason`); nothing on any other shard."""
    cols = content_columns(ctx)
    why = unread_reason(ctx, cols) if cols else None
    if why is not None:
        yield Payload(key=UNREAD_KEY, expr=pl.lit(0), post=lambda _v, why=why: why, merge=first_part)


@check("dup.exact_in_shard", layouts=lay.ANY)
def exact_in_shard(ctx: ShardContext) -> Iterable[ShardItem]:
    """``dup.exact_in_shard``: a row whose content repeats an earlier row of the same shard.
    count = extra copies; rows = the copies (never the first occurrence); ``details.examples``: for
    each example, ``{"row": copy, "first_row": the first row with that content}`` (on a running text:
    the row it repeats in its stretch, as ``dup.exact_across_shards`` names it; the message names the
    first pair). Rows of blank content are no repeats (:mod:`datacheck.checks.dup.blank`: a
    preference pair of whitespace-token responses as of whitespace text, by ``pref.empty_response``'s
    rule; without ``[tokens] tokenizer`` a skipped entry says whitespace tokens are not judged). On a running text (:attr:`ShardContext.running_text`: a ``.txt`` read by line or
    paragraph) a copy counts only in a stretch of rows that repeats an earlier stretch in order and
    holds at least that many characters (:func:`repeated_stretches`): a pasted passage of short verse
    lines is found, a play's repeated speaker names are not. A shard whose content cannot tell its
    samples apart (:func:`~datacheck.model.roles.content_gap`: a declared content column it lacks, such
    as a mistyped ``[columns] input_ids``, leaves only masks and labels) is skipped, naming the column."""
    cols = content_columns(ctx)
    if not cols:
        return
    unread = unread_reason(ctx, cols)
    if unread is not None:
        yield Skipped("dup.exact_in_shard", unread)
        return
    unjudged = unjudged_responses(ctx, cols)
    if unjudged is not None:
        yield Skipped("dup.exact_in_shard", unjudged)
    key_cols = _key_columns(cols, ctx.schema)
    shown = [_example_column(cols, ctx)]

    floor = ctx.running_text
    if floor is not None and any(ctx.schema.get(c) == pl.String for c in cols):
        yield RowCheck(
            check="dup.exact_in_shard", column=cols[0] if len(cols) == 1 else None, fails=None,
            from_payload=_running_repeats(floor), example=pl.col(shown[0]),
            message=lambda n, d, cols=cols, floor=floor: _message(n, d, cols, floor),
        )
        return
    if payload_wanted(ctx) and [c for c in cols if c != ctx.roles.label]:
        # The fused query already computes 128-bit content hashes of every row (label excluded) for
        # the cross-shard checks (dup/cross.py); (hash, label) decides in-shard repeats at no extra scan.
        yield RowCheck(
            check="dup.exact_in_shard", column=cols[0] if len(cols) == 1 else None, fails=None,
            from_payload=_repeats_from_hashes, example=pl.col(shown[0]),
            message=lambda n, d, cols=cols: _message(n, d, cols),
        )
        return
    yield RowCheck(
        check="dup.exact_in_shard", column=cols[0] if len(cols) == 1 else None, fails=None,
        key=_row_key(key_cols, ctx.schema),
        example=pl.col(shown[0]),
        refine=_refine(cols, blank_rows(ctx, cols)), not_retyped=tuple(cols),
        message=lambda n, d, cols=cols: _message(n, d, cols),
    )
