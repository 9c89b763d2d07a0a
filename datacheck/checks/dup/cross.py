"""Cross-shard duplicates, label conflicts and split leakage, decided in the merge from 128-bit row
content hashes that every shard computes in its ONE fused query (no shard is read twice).

Row content (CHECKS.md "dup"): the role columns together, except the class ``label`` role, with
the columns that condition a sample (``prompt``, ``system``, ``tools``, media:
:data:`datacheck.model.roles.CONTEXT_COLUMNS`); all columns, sorted by name, when no role is
declared or inferred. Other columns with no role (an ``idx``) never make rows distinct. Null equals null; values are compared exactly (no case or whitespace folding);
a row whose content is all blank matches no other row (:mod:`datacheck.checks.dup.blank`).

Row content hashes: :mod:`datacheck.io.rowhash` (the one row-hash module).

Payload (``ShardResult.payload``; for the merge and for a per-shard result cache; never in the
report):

- ``"crossdup.rows"``: ``polars.DataFrame`` with one row per shard row, in shard order:
  ``hash`` (``UInt128``: the row content hash above, label excluded) and, when the shard has a class
  ``label`` role, ``label`` (that column's values, native dtype). 16 bytes per row plus the label.
  A row whose content is all blank (:mod:`datacheck.checks.dup.blank`: the empty checks report it)
  and a row with a cell the reader could not read hold a hash no other row has
  (:func:`unmatched_rows`): they are never repeats, leaks or label conflicts.
  For a running text (a ``.txt`` read by line or paragraph:
  :attr:`~datacheck.checks.spec.ShardContext.running_text`) also ``chars`` (``UInt32``: the row's
  characters, 4 bytes a row): its rows are judged by stretches (:mod:`datacheck.checks.dup.stretch`),
  in the shard (``dup.exact_in_shard``), across shards (``dup.exact_across_shards``) and between
  splits (``dup.split_overlap``) alike: a row is a copy when it lies in a stretch of rows that repeats
  an earlier stretch in order and holds at least 200 characters together. Compared one by one (the
  ``--against`` dataset), only its rows of 200 characters or more take part.
- ``"crossdup.content"``: JSON-able ``{"columns": [...], "label": str | None, "encoding": ROW_ENCODING}``.

Checks in the merge:

- ``dup.exact_across_shards``: a row whose content and label occur in an earlier shard (path order;
  with ``[splits]``, an earlier shard of the same split: across splits it is ``dup.split_overlap``);
  a row of a running text: one in a stretch of 200 characters or more that repeats a stretch of an
  earlier shard (the shards of a split read one after another, no stretch across a boundary).
  count = such rows; examples name both shards and rows.
- ``dup.conflicting_labels``: the same content with more than one distinct real label (null,
  ``ignore_index`` and negative sentinel labels are "no label").
  count = distinct contents with more than one label (within a shard or across shards).
- ``dup.split_overlap``: rows of a split other than the training split whose content (label
  excluded) occurs in the training split (``[splits]``: the split named ``train``, else the first
  listed), or in the ``--against`` dataset; a row of a running text: one in a stretch of 200
  characters or more that repeats a stretch of the training split (its shards read first, then the
  compared split's). count = such rows; examples give both sides.

Merge memory: one array of the low 64 bits of every row hash (8 B/row), sorted in place, finds
the hash values that repeat (a sort, no hash table over all rows); only the rows holding
such a value (candidates) are gathered with shard, row, full hash and label, and checked on all
128 bits. All three checks share this one candidate pass (``--against`` adds one over both datasets).

Bounded memory (many rows): past :func:`~datacheck.io.hashspill.spill_rows` rows (default 8M,
``$DATACHECK_SPILL_ROWS``) an audit writes each shard's payload to a temp file as it arrives
(:class:`~datacheck.io.hashspill.SpilledRows`) and the candidate pass is then partitioned by hash
(:func:`_candidates_partitioned`): one shard, then one of 64 partitions, in memory at a time.
(``datacheck merge`` of part reports, whose payloads arrive in memory, keeps the in-memory pass.)
The findings are the same either way (``tests/unit/checks/test_dup_cross_partitioned.py``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import polars as pl
import xxhash

from datacheck.checks.dup.blank import blank_rows, unjudged_responses
from datacheck.checks.dup.stretch import stretch_copies
from datacheck.checks.registry import Payload, ShardContext, ShardItem, check, derives, finding, first_part, measure
from datacheck.checks.spec import RUNNING_TEXT_MIN_CHARS
from datacheck.derive.read import ALPACA, CHAT
from datacheck.io.cardsplits import CARD, dataset_loader_splits
from datacheck.io.discover import declared_splits
from datacheck.io.hashspill import SpilledRows, partitions, rows_frame
from datacheck.io.hfmeta import DATASET_DICT_NAME
from datacheck.io.hubsplits import HubSplits, glob_matches
from datacheck.io.rowhash import ROW_ENCODING, row_hash_expr
from datacheck.model import layouts as lay
from datacheck.model.findings import Example, Finding, Skipped
from datacheck.model.roles import KEY_COLUMNS, content_gap, row_content

__all__ = [
    "ROWS_KEY",
    "CONTENT_KEY",
    "content_spec",
    "crossdup_payload",
    "unmatched_rows",
    "exact_across_shards",
    "conflicting_labels",
    "split_overlap",
    "assign_splits",
    "across_shard_copies",
    "split_overlap_rows",
]

#: the read path's derivations this family reads: the Alpaca layout's messages and the chat
#: template's token columns are role columns like the shard's own
derives(__name__, ALPACA, CHAT)

ROWS_KEY = "crossdup.rows"
#: the :data:`ROWS_KEY` column of a running text's rows (:attr:`ShardContext.running_text`): each row's
#: characters (UInt32), which decide the stretches of :mod:`datacheck.checks.dup.stretch`
CHARS_FIELD = "chars"
CONTENT_KEY = "crossdup.content"
#: the payload's per-row Boolean field marking rows of blank content (:mod:`datacheck.checks.dup.blank`):
#: :func:`unmatched_rows` makes them rows that match none and drops it, before any check reads it
BLANK_FIELD = "__blank"
_MAX_EXAMPLES_BOTH = 20


def content_spec(ctx: ShardContext) -> tuple[list[str], str | None]:
    """(content columns without the class label, the class label column or None)."""
    label = ctx.roles.label
    cols = ctx.roles.columns()
    cols = (row_content(cols, label, list(ctx.schema), ctx.roles.of("target")) if cols else
            sorted(c for c in ctx.schema if c not in KEY_COLUMNS) or sorted(ctx.schema))
    return [c for c in cols if c != label], label


def _rows_post(v: Any) -> pl.DataFrame:
    """The imploded struct of (hash, label) as the ``crossdup.rows`` DataFrame (zero-copy unnest)."""
    s = v if isinstance(v, pl.Series) else pl.Series(v)
    if s.dtype == pl.Struct:
        return s.struct.unnest()
    return s.to_frame("hash")


def payload_wanted(ctx: ShardContext) -> bool:
    """Whether the merge can use this shard's row hashes: rows may repeat across shards (more than
    one shard, [splits] or --against), or a class label can conflict within the shard; or the rows are
    pieces of a running text (:attr:`ShardContext.running_text`), whose in-shard repeats are decided
    from these hashes and their characters (:mod:`datacheck.checks.dup.stretch`)."""
    return ctx.cross_shard or ctx.roles.label is not None or ctx.running_text is not None


@measure("crossdup")
def crossdup_payload(ctx: ShardContext) -> Iterable[Payload]:
    """The row content hashes (and labels) of the shard, as a :class:`Payload` (see the module docstring)."""
    if not payload_wanted(ctx):
        return  # one shard, no splits, no --against, no class label: nothing for the merge to find
    cols, label = content_spec(ctx)
    if not cols or content_gap(ctx.roles, cols) is not None:
        return  # listed as skipped by the shard stage of the three checks (_no_content)
    h = row_hash_expr(cols).alias("hash")
    fields = [h] + ([pl.col(label).alias("label")] if label is not None else [])
    blank = blank_rows(ctx, cols)
    if blank is not None:  # rows of blank content match no other row (unmatched_rows): the empty checks' rows
        fields.append(blank.alias(BLANK_FIELD))
    floor = ctx.running_text
    texts = [c for c in cols if ctx.schema.get(c) == pl.String]
    if floor is not None and texts:  # a running text's rows are judged by stretches: each row's characters
        chars = pl.sum_horizontal([pl.col(c).str.len_chars().fill_null(0) for c in texts]).cast(pl.UInt32)
        fields.append(chars.alias(CHARS_FIELD))
    yield Payload(key=ROWS_KEY, expr=pl.struct(fields).implode(), post=_rows_post, not_retyped=tuple(cols),
                  unmatched=unmatched_rows)
    spec = {"columns": cols, "label": label, "encoding": ROW_ENCODING}
    yield Payload(key=CONTENT_KEY, expr=pl.lit(0), post=lambda _v, spec=spec: dict(spec), merge=first_part)


def unmatched_rows(df: pl.DataFrame, rows: np.ndarray, salt: str) -> pl.DataFrame:
    """The ``crossdup.rows`` frame with each of ``rows`` (sorted int64 shard rows) given a hash no other
    row has: a content cell of theirs is null only because the reader could not read its value, which it
    reported (``decode.bad_record``, ``schema.dtype``), so two such rows are not known to be equal. The
    hash: xxh3-128 of a tag no row encoding starts with, ``salt`` (the shard's content hash) and the row.
    So are the rows the frame's :data:`BLANK_FIELD` marks (content all blank: :mod:`.blank`), whose
    field is then dropped."""
    if BLANK_FIELD in df.columns:
        blank = np.flatnonzero(df[BLANK_FIELD].to_numpy())
        df = df.drop(BLANK_FIELD)
        rows = np.union1d(np.asarray(rows, dtype=np.int64), blank.astype(np.int64))
    if len(rows) == 0:
        return df
    new = [int.from_bytes(xxhash.xxh3_128_digest(f"datacheck-unread-cell\0{salt}\0{int(r)}".encode()), "big")
           for r in rows]
    return df.with_columns(df["hash"].scatter(rows, pl.Series(new, dtype=pl.UInt128)))


def _no_content(ctx: ShardContext, cid: str) -> Iterable[ShardItem]:
    """Shard stage shared by the three merge checks: a shard whose rows would be hashed for the
    merge but have no content besides the label cannot take part, nor one whose content cannot tell
    its samples apart (:func:`~datacheck.model.roles.content_gap`: a declared content column it lacks,
    e.g. a mistyped ``[columns] input_ids``; the skipped entry names it and the fix); one whose blank
    rows cannot all be told (:func:`~datacheck.checks.dup.blank.unjudged_responses`) says what is
    compared as content."""
    if not payload_wanted(ctx):
        return
    cols = content_spec(ctx)[0]
    if not cols:
        yield Skipped(cid, "no content column besides the label")
    elif (gap := content_gap(ctx.roles, cols)) is not None:
        yield Skipped(cid, gap)
    elif (unjudged := unjudged_responses(ctx, cols)) is not None:
        yield Skipped(cid, unjudged)  # whitespace-token responses are compared as content


@check("dup.exact_across_shards", layouts=lay.ANY)
def _across_shard_stage(ctx: ShardContext) -> Iterable[ShardItem]:
    return _no_content(ctx, "dup.exact_across_shards")


@check("dup.conflicting_labels", layouts=lay.CLASSIFICATION | {"kto"})
def _conflicting_shard_stage(ctx: ShardContext) -> Iterable[ShardItem]:
    return _no_content(ctx, "dup.conflicting_labels")


@check("dup.split_overlap", layouts=lay.ANY)
def _overlap_shard_stage(ctx: ShardContext) -> Iterable[ShardItem]:
    return _no_content(ctx, "dup.split_overlap")


# ----------------------------------------------------------------------------------------- merge


def _shard_frames(shards: list[Any]) -> tuple[list[Any], list[pl.DataFrame | SpilledRows]]:
    keep, frames = [], []
    for s in shards:
        df = getattr(s, "payload", {}).get(ROWS_KEY)
        if isinstance(df, (pl.DataFrame, SpilledRows)) and df.height == (s.rows or 0):
            keep.append(s)
            frames.append(df)
    return keep, frames


_LOW64 = 2**64 - 1


def _low64(h: pl.Series) -> np.ndarray:
    """The low 64 bits of ``UInt128`` hashes as a ``uint64`` numpy array (8 bytes per row)."""
    return h.to_frame("h").select(pl.col("h").and_(pl.lit(_LOW64, dtype=pl.UInt128)).cast(pl.UInt64)) \
        .to_series().to_numpy()


def _candidates(frames: list[pl.DataFrame | SpilledRows], with_label: bool) -> pl.DataFrame:
    """Rows whose 128-bit hash occurs more than once over all ``frames``: the partitioned pass
    (:func:`_candidates_partitioned`, bounded memory, its files in the spill folder) when the audit
    spilled payloads to disk (past :func:`~datacheck.io.hashspill.spill_rows` rows, in a folder
    outside the audited data), else the in-memory one (:func:`_candidates_in_memory`). Both give
    the same frame."""
    spilled = [f for f in frames if isinstance(f, SpilledRows)]
    if spilled:
        return _candidates_partitioned(frames, with_label, folder=Path(spilled[0].path).parent)
    return _candidates_in_memory([rows_frame(f) for f in frames], with_label)


def _split_running(cand: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """(the candidates the hash checks compare one by one, the candidate rows of running texts): a
    running text's rows (those with :data:`CHARS_FIELD`) of fewer than
    :data:`~datacheck.checks.spec.RUNNING_TEXT_MIN_CHARS` characters are left out of the first (they
    count only in a repeated stretch, :func:`_running_copies`); the second holds all of them, None when
    no shard is a running text."""
    if CHARS_FIELD not in cand.columns:
        return cand, None
    chars = pl.col(CHARS_FIELD)
    main = cand.filter(chars.is_null() | (chars >= RUNNING_TEXT_MIN_CHARS)).drop(CHARS_FIELD)
    return main, cand.filter(chars.is_not_null())


def _with_labels(frames: list[pl.DataFrame | SpilledRows], picks: list[tuple[int, pl.Series]],
                 with_label: bool) -> pl.DataFrame:
    """The candidate frame from (shard index, its candidate rows ascending), shard by shard: the
    label gathered from each shard's payload; shards that disagree on the label dtype compare labels
    as text."""
    parts = []
    with_chars = any(CHARS_FIELD in f.columns for f in frames)
    for i, rows in picks:
        f = rows_frame(frames[i])
        cols = {"shard": pl.Series([i] * rows.len(), dtype=pl.UInt32), "row": rows.cast(pl.UInt32),
                "hash": f.get_column("hash").gather(rows)}
        if with_label:
            cols["label"] = (f.get_column("label").gather(rows) if "label" in f.columns
                             else pl.Series([None] * rows.len()))
        if with_chars:  # a running text's rows: their characters (null for the rows of other shards)
            cols[CHARS_FIELD] = (f.get_column(CHARS_FIELD).gather(rows) if CHARS_FIELD in f.columns
                                 else pl.Series([None] * rows.len(), dtype=pl.UInt32))
        parts.append(pl.DataFrame(cols))
    try:
        return pl.concat(parts, how="vertical_relaxed")
    except Exception:  # shards disagree on the label dtype: compare labels as text
        return pl.concat([p.with_columns(pl.col("label").cast(pl.String)) if "label" in p.columns else p
                          for p in parts], how="vertical_relaxed")


def _empty_candidates(frames: list[Any]) -> pl.DataFrame:
    """No candidate row: the columns every candidate frame has (``chars`` when a frame has it)."""
    schema: dict[str, Any] = {"shard": pl.UInt32, "row": pl.UInt32, "hash": pl.UInt128}
    if any(CHARS_FIELD in f.columns for f in frames):
        schema[CHARS_FIELD] = pl.UInt32
    return pl.DataFrame(schema=schema)


def _candidates_partitioned(frames: list[pl.DataFrame | SpilledRows], with_label: bool,
                            folder: Path | None = None) -> pl.DataFrame:
    """:func:`_candidates_in_memory`'s frame, in bounded memory: every shard's hashes are split by
    hash into :data:`~datacheck.io.hashspill.PARTITIONS` partition files
    (:func:`~datacheck.io.hashspill.partitions`, a temp folder in ``folder`` removed afterwards), then each
    partition is grouped by hash on its own; the labels of the few candidate rows are then gathered
    shard by shard. Memory: one shard's payload, the write buffers, one partition, the candidates."""
    empty = _empty_candidates(frames)
    found = [p.filter(pl.len().over("hash") > 1).select("shard", "row") for p in partitions(frames, folder=folder)]
    found = [f for f in found if f.height]
    if not found:
        return empty
    cand = pl.concat(found).sort(["shard", "row"])
    picks = [(int(k[0]), g.get_column("row")) for k, g in cand.group_by("shard", maintain_order=True)]
    return _with_labels(frames, picks, with_label)


def _candidates_in_memory(frames: list[pl.DataFrame], with_label: bool) -> pl.DataFrame:
    """Rows whose 128-bit hash occurs more than once over all ``frames``, with ``shard`` (index into
    ``frames``), ``row``, ``hash`` and (``with_label``) ``label``.

    Memory: one array of the low 64 bits of every hash (8 B/row), sorted in place, finds the values
    that repeat (a sort, no hash table over all rows); then, one shard at a time, the rows holding
    such a value are gathered and checked on all 128 bits. A 64-bit coincidence only adds a
    candidate, never a finding.
    """
    empty = _empty_candidates(frames)
    if not frames:
        return empty
    allv = np.empty(sum(f.height for f in frames), dtype=np.uint64)
    at = 0
    for f in frames:
        allv[at:at + f.height] = _low64(f.get_column("hash"))
        at += f.height
    allv.sort()
    rep = allv[1:][allv[1:] == allv[:-1]]
    del allv
    if rep.size == 0:
        return empty
    rep = pl.Series(np.unique(rep))
    picks = []
    for i, f in enumerate(frames):  # the low bits again, one shard at a time (memory over speed)
        rows = pl.Series(_low64(f.get_column("hash"))).is_in(rep.implode()).arg_true()
        if rows.len():
            picks.append((i, rows))
    return _with_labels(list(frames), picks, with_label).filter(pl.len().over("hash") > 1)


def _cache(dctx: Any) -> dict:
    """Per-audit memo on the DatasetContext, so the three checks share one candidate pass."""
    memo = getattr(dctx, "_crossdup_memo", None)
    if memo is None:
        memo = {}
        try:
            setattr(dctx, "_crossdup_memo", memo)
        except AttributeError:
            pass
    return memo


def _merge(dctx: Any) -> tuple[list[Any], pl.DataFrame]:
    memo = _cache(dctx)
    if "audited" not in memo:
        shards, frames = _shard_frames(dctx.readable_shards())
        with_label = any("label" in f.columns for f in frames)
        main, running = _split_running(_candidates(frames, with_label))
        memo["audited"] = (shards, _with_content_group(main, shards))
        memo["running"] = _with_content_group(running, shards) if running is not None else None
    return memo["audited"]


def _content_key(shard: Any) -> tuple[str, ...]:
    """What a shard's row hashes are made of: the roles of its content columns, in order
    (:func:`_signature`; a column without a role by its name). Two shards' hashes are comparable
    only when their keys are equal: a row hash covers its columns and nothing names them, so hashes
    over different column sets never match (a duplicate would be missed silently) and, with
    coinciding values, could match by accident (a false alarm)."""
    sig = _signature(shard)
    return sig[1] if sig is not None else ()


def _group_keys(shards: list[Any]) -> list[tuple[str, ...]]:
    """:func:`_content_key` of each shard; a shard without roles (the ``--against`` side keeps hash
    payloads only) takes the key of a shard with roles whose row hashes cover the same column names."""
    by_cols = {sig[0]: sig[1] for s in shards if s.roles and (sig := _signature(s)) is not None}
    return [by_cols.get(sig[0], sig[1]) if not s.roles and (sig := _signature(s)) is not None else _content_key(s)
            for s in shards]


def _with_content_group(cand: pl.DataFrame, shards: list[Any]) -> pl.DataFrame:
    """``cand`` with a ``content`` column (UInt32): the index of its shard's :func:`_content_key`
    among the distinct keys; every comparison of hashes joins on (``hash``, ``content``)."""
    own = _group_keys(shards)
    keys = sorted(set(own))
    code = pl.Series("content", [keys.index(k) for k in own], dtype=pl.UInt32)
    if cand.height == 0:
        return cand.with_columns(pl.lit(None, dtype=pl.UInt32).alias("content")).clear()
    return cand.with_columns(code.gather(cand["shard"]).alias("content"))


def _content_groups(shards: list[Any]) -> str:
    """``"input_ids, attention_mask (a.parquet); input_ids, attention_mask, labels (b.parquet, c.parquet)"``:
    the shards by the columns their row hashes cover (at most 3 paths a group)."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for s in shards:
        groups.setdefault(tuple((s.payload.get(CONTENT_KEY) or {}).get("columns") or ()), []).append(s.path)
    return "; ".join(f"{', '.join(cols) or '(none)'} ({', '.join(paths[:3])}{f' and {len(paths) - 3} more' if len(paths) > 3 else ''})"
                     for cols, paths in groups.items())


def _mixed_content(cid: str, shards: list[Any], what: str) -> Iterable[Skipped]:
    """A skipped entry when ``shards`` hash rows over more than one column set: ``what`` is not
    compared across those groups (see :func:`_content_key`)."""
    if len({_content_key(s) for s in shards}) > 1:
        yield Skipped(cid, (
            f"the shards' row contents are made of different columns, so {what} only among shards of "
            f"the same columns, never across groups: {_content_groups(shards)}; give every shard the same "
            "roles ([columns]) or audit each layout as its own dataset"))


def _content_columns(shards: list[Any]) -> list[str]:
    for s in shards:
        spec = s.payload.get(CONTENT_KEY)
        if spec:
            return list(spec["columns"])
    return []


def _content_of(shards: list[Any], label: bool) -> str:
    """The content columns of ``shards`` (the shards a finding involves) for its message: the
    columns hashed as row content (:data:`CONTENT_KEY`), plus ``label`` when it is part of the
    compared content; shards hashed over different columns are named by group
    (``"input_ids, label (b.parquet, c.parquet); text, label (a.parquet)"``)."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for s in shards:
        spec = s.payload.get(CONTENT_KEY) or {}
        cols = list(spec.get("columns") or [])
        if label and spec.get("label") and spec["label"] not in cols:
            cols.append(spec["label"])
        groups.setdefault(tuple(cols), []).append(s.path)
    if len(groups) == 1:
        return ", ".join(next(iter(groups)))
    return "; ".join(f"{', '.join(cols)} ({', '.join(paths[:3])}{' ...' if len(paths) > 3 else ''})"
                     for cols, paths in groups.items())


def _removed_frame(shards: list[Any], removed: dict[str, Any] | None,
                   among: set[int] | None = None) -> pl.DataFrame | None:
    """``removed`` ({shard path: 0-based rows}) as a (``shard`` index into ``shards``, ``row``) frame;
    ``among``: only the shards of these indices (the audited side, when ``shards`` also holds the
    ``--against`` dataset's shards, whose paths may repeat the audited ones)."""
    if not removed:
        return None
    at = {s.path: i for i, s in enumerate(shards) if among is None or i in among}
    pairs = [(at[p], int(r)) for p, rows in removed.items() if p in at for r in rows]
    return pl.DataFrame(pairs, schema={"shard": pl.UInt32, "row": pl.UInt32}, orient="row")


def _without(cand: pl.DataFrame, gone: pl.DataFrame | None) -> pl.DataFrame:
    """The candidate rows minus ``gone`` (rows taken out of the data, e.g. dropped by ``clean``)."""
    if gone is None or gone.height == 0 or cand.height == 0:
        return cand
    return cand.join(gone, on=["shard", "row"], how="anti")


def _copies(dctx: Any, removed: dict[str, Any] | None = None) -> tuple[list[Any], pl.DataFrame, list[str]]:
    """(shards, copies, keys): every row whose content (and label) occurs in an earlier shard of the
    same split, as ``shard``, ``row``, ``first_shard``, ``first_row`` (indices into ``shards``;
    ``shard`` and ``row`` ascending); a running text's rows by its stretches (:func:`_running_copies`).
    ``removed`` rows are taken out before comparing."""
    shards, cand = _merge(dctx)
    gone = _removed_frame(shards, removed)
    cand = _without(cand, gone)
    keys = ["hash", "content", "label"] if "label" in cand.columns else ["hash", "content"]
    empty = pl.DataFrame(schema={"shard": pl.UInt32, "row": pl.UInt32, "first_shard": pl.UInt32,
                                 "first_row": pl.UInt32})
    if len(shards) < 2:
        return shards, empty, keys
    splits = getattr(dctx, "splits", {}) or {}
    code = [0] * len(shards)
    if splits:  # across splits, a repeat is dup.split_overlap (leakage), not a repeat within the data
        names = sorted({v for v in splits.values()})
        code = [names.index(splits[s.path]) + 1 if s.path in splits else 0 for s in shards]
        cand = cand.with_columns(pl.Series("grp", code, dtype=pl.UInt32).gather(cand["shard"]))
        keys = keys + ["grp"]
    hits = empty
    if cand.height:
        hits = _first_copies(cand.sort(["shard", "row"]), keys, code)
    running = _running_copies(shards, _cache(dctx).get("running"), gone, code)
    if running.height:  # a row both ways (a row of 200+ characters) names the row its stretch repeats
        hits = (pl.concat([running, hits]).unique(["shard", "row"], keep="first", maintain_order=True)
                .sort(["shard", "row"]))
    return shards, hits, keys


def _first_copies(c: pl.DataFrame, keys: list[str], code: list[int]) -> pl.DataFrame:
    """The rows of ``c`` (candidates sorted by shard and row; with ``[splits]`` a ``grp`` column, the
    split code of each row's shard, 0 for a shard in no split) whose ``keys`` occur in an earlier row
    of another shard they are compared with: ``shard``, ``row``, ``first_shard``, ``first_row``.

    A shard of a split is compared with the shards of its split and the shards in no split; a shard
    in no split (one no ``[splits]`` glob matches, one the Hub's file names put in no split) with
    every shard: its rows belong to no split, so a row it shares with the training split is neither
    ``dup.split_overlap`` nor silently dropped. Between a split's shard and a shard in no split, the
    latter's row is the copy whatever the path order (the split's row is the one a loader reads:
    ``clean`` keeps it)."""
    cols = ["shard", "row", "first_shard", "first_row"]

    def firsts(sub: pl.DataFrame, on: list[str]) -> pl.DataFrame:
        return sub.with_columns(pl.col("shard").first().over(on).alias("first_shard"),
                                pl.col("row").first().over(on).alias("first_row"))

    if "grp" not in c.columns or 0 not in code:
        got = firsts(c, keys)
        return got.filter(pl.col("shard") != pl.col("first_shard")).select(cols)
    plain = [k for k in keys if k != "grp"]
    c = c.sort([pl.col("grp") == 0, "shard", "row"])  # the shards of a split first, those in no split after
    parts = [firsts(c, plain).filter((pl.col("grp") == 0) & (pl.col("shard") != pl.col("first_shard")))]
    for g in sorted(set(code) - {0}):
        sub = firsts(c.filter(pl.col("grp").is_in([0, g])), plain)
        parts.append(sub.filter((pl.col("grp") == g) & (pl.col("shard") != pl.col("first_shard"))))
    return pl.concat([p.select(cols) for p in parts]).sort(["shard", "row"])


_STRETCH_SCHEMA = {"shard": pl.UInt32, "row": pl.UInt32, "first_shard": pl.UInt32, "first_row": pl.UInt32}


def _running_copies(shards: list[Any], cand: pl.DataFrame | None, gone: pl.DataFrame | None,
                    group: list[int]) -> pl.DataFrame:
    """The rows of running texts (a ``.txt`` read by line or paragraph) that lie in a stretch repeating
    a stretch of an earlier shard of the same split (``group``: a code per shard; a shard in no split,
    code 0, is compared with every split, read after its shards) and content
    (:func:`_stretch_pass` over their shards in path order): ``shard``, ``row``, ``first_shard``,
    ``first_row`` (the row each repeats in that stretch), indices into ``shards``, ascending."""
    if cand is None or cand.height == 0:
        return pl.DataFrame(schema=_STRETCH_SCHEMA)
    by_group: dict[tuple[int, int], list[int]] = {}
    for i, k in cand.select("shard", "content").unique().sort("shard").iter_rows():
        by_group.setdefault((group[int(i)], int(k)), []).append(int(i))
    for (g, k), members in list(by_group.items()):  # a shard in no split (0) is compared with every split,
        if g and (0, k) in by_group:                 # read after the split's shards (its rows are the copies)
            by_group[(g, k)] = members + by_group[(0, k)]
    out = [_stretch_pass(shards, cand, gone, members) for members in by_group.values() if len(members) > 1]
    out = [o for o in out if o.height]
    if not out:
        return pl.DataFrame(schema=_STRETCH_SCHEMA)
    return pl.concat(out).unique(["shard", "row"], keep="first", maintain_order=True).sort(["shard", "row"])


def _running_overlap(shards: list[Any], cand: pl.DataFrame | None, gone: pl.DataFrame | None,
                     test_idx: set[int], train_idx: set[int]) -> pl.DataFrame:
    """``dup.split_overlap``'s rows of running texts: the rows of a ``test_idx`` shard that lie in a
    stretch repeating a stretch of the training split (:func:`_stretch_pass` over the training shards,
    then the compared split's, each in path order, per content): ``shard``, ``row``, ``train_shard``,
    ``train_row``."""
    empty = pl.DataFrame(schema={"shard": pl.UInt32, "row": pl.UInt32, "train_shard": pl.UInt32, "train_row": pl.UInt32})
    if cand is None or cand.height == 0:
        return empty
    content = dict(cand.select("shard", "content").unique().iter_rows())
    out = []
    for k in sorted(set(content.values())):
        train = sorted(i for i in train_idx if content.get(i) == k)
        test = sorted(i for i in test_idx if content.get(i) == k)
        if not train or not test:
            continue
        got = _stretch_pass(shards, cand, gone, train + test)
        got = got.filter(pl.col("shard").is_in(test) & pl.col("first_shard").is_in(train))
        if got.height:
            out.append(got.rename({"first_shard": "train_shard", "first_row": "train_row"}))
    return pl.concat(out).sort(["shard", "row"]) if out else empty


def _stretch_pass(shards: list[Any], cand: pl.DataFrame, gone: pl.DataFrame | None, members: list[int]) -> pl.DataFrame:
    """The rows of the shards ``members`` (indices into ``shards``, read in this order as one sequence)
    that lie in a stretch repeating a stretch of another of them, read earlier
    (:mod:`datacheck.checks.dup.stretch`, floor :data:`~datacheck.checks.spec.RUNNING_TEXT_MIN_CHARS`):
    ``shard``, ``row``, ``first_shard``, ``first_row`` (the row each repeats in its stretch).

    ``gone`` rows (taken out of the data) are left out of the sequence, and one row that matches
    nothing sits between two shards, so no stretch runs across a boundary. Only the candidate rows
    (``cand``: hashes that occur more than once, with ``chars``) are held: a stretch's rows and the
    rows they repeat are all among them. Memory: the candidates, never a shard's rows."""
    empty = pl.DataFrame(schema=_STRETCH_SCHEMA)
    cand = _without(cand.filter(pl.col("shard").is_in(members)), gone)
    if cand.height == 0:
        return empty
    dropped: dict[int, np.ndarray] = {}
    if gone is not None and gone.height:
        for (i,), g in gone.group_by(["shard"]):
            dropped[int(i)] = np.sort(g.get_column("row").to_numpy().astype(np.int64))
    none = np.empty(0, dtype=np.int64)
    parts = []
    at = 0
    for i in members:  # a gap row after each shard
        g = cand.filter(pl.col("shard") == i)
        rows = g.get_column("row").to_numpy().astype(np.int64)
        pos = at + rows - np.searchsorted(dropped.get(i, none), rows)
        parts.append(g.select("shard", "row", "hash", CHARS_FIELD).with_columns(pl.Series("pos", pos)))
        at += (shards[i].rows or 0) - dropped.get(i, none).size + 1
    g = pl.concat(parts).sort("pos").with_columns(pl.col("pos").first().over("hash").alias("first"))
    pos = g.get_column("pos").to_numpy()
    first = g.get_column("first").to_numpy()
    high = g.select((pl.col("hash") // pl.lit(2**64, dtype=pl.UInt128)).cast(pl.UInt64)).to_series().to_numpy()
    low = _low64(g.get_column("hash"))
    chars = g.get_column(CHARS_FIELD).fill_null(0).to_numpy().astype(np.int64)
    shard = g.get_column("shard").to_numpy()
    row = g.get_column("row").to_numpy()

    def same(x: int, y: int) -> bool:
        a, b = int(np.searchsorted(pos, x)), int(np.searchsorted(pos, y))
        return bool(b < pos.size and pos[b] == y and high[a] == high[b] and low[a] == low[b])

    copy = pos != first
    kept, _earlier, aligned = stretch_copies(pos[copy], first[copy], same,
                                             lambda xs: chars[np.searchsorted(pos, xs)], RUNNING_TEXT_MIN_CHARS)
    ix, ia = np.searchsorted(pos, kept), np.searchsorted(pos, aligned)
    across = shard[ix] != shard[ia]
    if not across.any():
        return empty
    return pl.DataFrame({"shard": shard[ix][across], "row": row[ix][across], "first_shard": shard[ia][across],
                         "first_row": row[ia][across]}, schema=_STRETCH_SCHEMA).sort(["shard", "row"])


def across_shard_copies(dctx: Any, removed: dict[str, Any] | None = None) -> dict[str, list[int]]:
    """The rows ``dup.exact_across_shards`` counts, every one (not only the examples): {shard path:
    0-based rows (ascending)} of each row whose content and label occur in an earlier shard (path
    order) of the same split. The first copy is never listed, so dropping these rows keeps exactly
    one copy of each content. ``removed`` ({shard path: rows}) are rows taken out of the data first
    (rows another check drops): a copy whose only earlier occurrence is removed is then the first."""
    shards, hits, _keys = _copies(dctx, removed)
    out: dict[str, list[int]] = {}
    for (i,), g in hits.group_by(["shard"], maintain_order=True):
        out[shards[int(i)].path] = g.get_column("row").to_list()
    return out


@check("dup.exact_across_shards", level="dataset")
def exact_across_shards(dctx: Any) -> Iterable[Finding | Skipped]:
    """``dup.exact_across_shards``: a row whose content (label included) occurs in an earlier shard
    (of the same split, with ``[splits]``: repeats across splits are ``dup.split_overlap``; a shard in
    no split, one no ``[splits]`` glob matches or the Hub's file names put in none, is compared with
    every shard).

    count = such rows (path order decides which copy is "earlier", but a shard in no split comes
    after the shards of a split: its row is the copy); rows and examples: the first
    ``[report] max_examples`` such rows (``rows``: the copy's 0-based row, ``details.examples``: its
    shard and the first occurrence's shard and row). Within-shard repeats are ``dup.exact_in_shard``,
    not counted here.

    A running text (a ``.txt`` read by line or paragraph) follows ``dup.exact_in_shard``'s rule
    (:mod:`datacheck.checks.dup.stretch`): a row counts when it lies in a stretch of rows, 200
    characters or more together, that repeats a stretch of an earlier shard in order (a row of 200
    characters or more is a stretch by itself); ``first_row`` is the row it repeats in that stretch.
    A passage of short lines copied into another file is found as it is within one file; short lines
    that recur across files (speaker names, headings) are not.
    """
    if len(dctx.readable_shards()) < 2:
        return  # a single shard: nothing to compare across shards (its repeats are dup.exact_in_shard)
    shards, hits, keys = _copies(dctx)
    # a shard whose own skipped entry says why it takes no part (no content besides the label, a
    # content column it lacks: _no_content) is not said again to have failed
    lacking = [s.path for s in dctx.readable_shards() if s not in shards
               and not any(k.check == "dup.exact_across_shards" and not k.error for k in getattr(s, "skipped", ()))]
    if lacking:
        yield Skipped("dup.exact_across_shards", f"{len(lacking)} shard(s) have no row hashes (their check could not "
                                                 f"run), so they were not compared: {', '.join(lacking[:5])}")
    if len(shards) >= 2:
        yield from _mixed_content("dup.exact_across_shards", shards, "rows are compared")
    if hits.height == 0:
        return
    max_ex = dctx.cfg.report.max_examples
    ex = hits.head(max_ex)
    examples = tuple(Example(row=int(r["row"]), value=(f"{shards[r['shard']].path} row {r['row']} = "
                                                         f"{shards[r['first_shard']].path} row {r['first_row']}"))
                     for r in ex.iter_rows(named=True))
    per_shard = hits.group_by("shard").len().sort("shard")
    involved = sorted({shards[i].path for i in per_shard["shard"].to_list()}
                      | {shards[i].path for i in hits["first_shard"].unique().to_list()})
    total = sum(s.rows or 0 for s in shards)
    content = _content_of([s for s in shards if s.path in involved], "label" in keys)
    yield finding(
        "dup.exact_across_shards", count=hits.height,
        ratio=hits.height / total if total else None, shards=tuple(involved), examples=examples,
        rows=tuple(e.row for e in examples), rows_truncated=hits.height > len(examples),
        message=(f"{hits.height} row(s) repeat a row of an earlier shard exactly (content: "
                 f"{content}); these samples are seen "
                 "more than once per epoch"),
        details={"per_shard": {shards[i].path: n for i, n in per_shard.iter_rows()},
                 "examples": [{"shard": shards[r["shard"]].path, "row": int(r["row"]),
                               "first_shard": shards[r["first_shard"]].path, "first_row": int(r["first_row"])}
                              for r in ex.iter_rows(named=True)]},
    )


def _has_label(dtype: pl.DataType, ignore: int | None) -> pl.Expr:
    """True for rows that carry a real class label: not null, not ``ignore`` (``[labels]
    ignore_index``) and not a negative integer (a sentinel such as the ``-1`` of an unlabelled GLUE
    test split: "no label", never a class). String labels that spell such an integer (labels compared
    as text when shards disagree on the dtype) count as sentinels too."""
    lab = pl.col("label")
    keep = lab.is_not_null()
    if dtype.is_integer() or dtype.is_float():
        keep = keep & (lab >= 0)
        if ignore is not None:
            keep = keep & (lab != ignore)
    elif dtype == pl.String:
        keep = keep & ~lab.str.strip_chars().str.contains(r"^-\d+$")
        if ignore is not None:
            keep = keep & (lab.str.strip_chars() != str(ignore))
    return keep


@check("dup.conflicting_labels", level="dataset")
def conflicting_labels(dctx: Any) -> Iterable[Finding | Skipped]:
    """``dup.conflicting_labels``: the same content (label excluded) carries different labels.

    count = distinct contents with more than one distinct real label (within or across shards): null,
    ``ignore_index`` and negative integer labels mean "no label" and never conflict (see
    :func:`_has_label`); examples: one row per label of the first such contents.
    """
    if dctx.readable_shards() and not any(s.roles.get("label") for s in dctx.readable_shards()):
        yield Skipped("dup.conflicting_labels", "no class label column (set [columns] label)")
        return
    shards, cand = _merge(dctx)
    if not shards:
        return
    if "label" not in cand.columns and not any(s.payload.get(CONTENT_KEY, {}).get("label") for s in shards):
        yield Skipped("dup.conflicting_labels", "no class label column (set [columns] label)")
        return
    yield from _mixed_content("dup.conflicting_labels", [s for s in shards if (s.payload.get(CONTENT_KEY) or {}).get("label")],
                              "labels of equal contents are compared")
    if cand.height == 0 or "label" not in cand.columns:
        return
    c = cand.filter(_has_label(cand.schema["label"], dctx.cfg.labels.ignore)).sort(["shard", "row"])
    groups = (c.group_by(["hash", "content"], maintain_order=True)
              .agg(pl.col("label").n_unique().alias("k"), pl.col("shard").first().alias("s0"),
                   pl.col("row").first().alias("r0"))
              .filter(pl.col("k") > 1).sort(["s0", "r0"]))
    if groups.height == 0:
        return
    max_ex = dctx.cfg.report.max_examples
    first = groups.head(max_ex)
    rows = (c.join(first.select("hash", "content", "s0", "r0"), on=["hash", "content"]).sort(["s0", "r0", "shard", "row"])
            .unique(subset=["hash", "content", "label"], keep="first", maintain_order=True))
    examples = tuple(Example(row=int(r["row"]), value=f"{shards[r['shard']].path} row {r['row']}: label {r['label']!r}")
                     for r in rows.head(max_ex).iter_rows(named=True))
    involved = sorted({shards[i].path for i in c.join(groups.select("hash", "content"), on=["hash", "content"])["shard"]
                       .unique().to_list()})
    # the label column of the labelled shards (an unlabeled split's shards have none)
    label_col = next((s.payload[CONTENT_KEY]["label"] for s in shards
                      if (s.payload.get(CONTENT_KEY) or {}).get("label")), None)
    total_rows = int(c.join(groups.select("hash", "content"), on=["hash", "content"]).height)
    yield finding(
        "dup.conflicting_labels", column=label_col, count=groups.height,
        shards=tuple(involved), examples=examples, rows=tuple(e.row for e in examples),
        rows_truncated=total_rows > len(examples),
        message=(f"{groups.height} distinct content(s) ({total_rows} rows) occur with more than one label "
                 f"in {label_col!r} (content: {_content_of([s for s in shards if s.path in involved], False)}): "
                 "label noise"),
        details={"rows": total_rows,
                 "examples": [{"shard": shards[r["shard"]].path, "row": int(r["row"]), "label": r["label"]}
                              for r in rows.head(max_ex).iter_rows(named=True)]},
    )


def _train_split(splits: dict[str, str]) -> str | None:
    if not splits:
        return None
    return "train" if "train" in splits else next(iter(splits))


def _overlap_hits(cand: pl.DataFrame, test_idx: set[int], train_idx: set[int]) -> pl.DataFrame:
    """Every row of a ``test_idx`` shard whose hash occurs in a ``train_idx`` shard: ``shard``, ``row``
    (ascending), ``train_shard``, ``train_row`` (its first occurrence there; indices into the shards of
    ``cand``, the candidate rows: hashes occurring more than once)."""
    empty = pl.DataFrame(schema={"shard": pl.UInt32, "row": pl.UInt32, "train_shard": pl.UInt32,
                                 "train_row": pl.UInt32})
    if cand.height == 0:
        return empty
    tr = pl.Series("s", sorted(train_idx), dtype=pl.UInt32)
    te = pl.Series("s", sorted(test_idx), dtype=pl.UInt32)
    train = (cand.filter(pl.col("shard").is_in(tr.implode())).sort(["shard", "row"])
             .group_by(["hash", "content"], maintain_order=True).agg(pl.col("shard").first().alias("train_shard"),
                                                                    pl.col("row").first().alias("train_row")))
    hits = (cand.filter(pl.col("shard").is_in(te.implode())).join(train, on=["hash", "content"], how="inner")
            .sort(["shard", "row"]))
    return hits.select("shard", "row", "train_shard", "train_row") if hits.height else empty


def _with_running_overlap(dctx: Any, train: str, shards: list[Any], hits: pl.DataFrame, gone: pl.DataFrame | None,
                          test_idx: set[int], train_idx: set[int]) -> pl.DataFrame:
    """``hits`` (:func:`_overlap_hits`) with the rows of running texts that lie in a stretch repeating a
    stretch of the training split (:func:`_running_overlap`; a row found both ways names the row of
    its stretch). The ``--against`` side (``train == "against"``) keeps the row-by-row comparison."""
    if train == "against":
        return hits
    running = _running_overlap(shards, _cache(dctx).get("running"), gone, test_idx, train_idx)
    if running.height == 0:
        return hits
    return (pl.concat([running, hits.cast(running.schema)]).unique(["shard", "row"], keep="first", maintain_order=True)
            .sort(["shard", "row"]))


def _signature(shard: Any) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(content columns, what each one is) of a shard's row hashes, or None without hashes. A
    column is named by its role (``text``, ``input_ids``, ...), else by its name: rows of two shards
    can be equal only when their content columns play the same roles in the same order (a ``text``
    column and a ``sentence`` column both inferred as text compare)."""
    spec = shard.payload.get(CONTENT_KEY)
    if not spec:
        return None
    cols = tuple(spec["columns"])
    role_of: dict[str, str] = {}
    for role, v in (shard.roles or {}).items():
        got = v.get("columns") if isinstance(v, dict) else None
        for c in ([got] if isinstance(got, str) else [x for g in (got or []) for x in (g if isinstance(g, list) else [g])]):
            role_of.setdefault(c, role)
    return cols, tuple(role_of.get(c, c) for c in cols)


def _incomparable(sh: list[Any], test_idx: set[int], train_idx: set[int]) -> tuple[list[str], list[str]] | None:
    """(test content columns, train content columns) when no shard of one side hashes the same
    roles, or the same column names, as any shard of the other (no row can ever match), else None."""
    a = {sig for i in test_idx if (sig := _signature(sh[i])) is not None}
    b = {sig for i in train_idx if (sig := _signature(sh[i])) is not None}
    if not a or not b or {x[1] for x in a} & {x[1] for x in b} or {x[0] for x in a} & {x[0] for x in b}:
        return None
    return list(sorted(a)[0][0]), list(sorted(b)[0][0])


#: one comparison of dup.split_overlap: (split compared, training split or "against", the shards of
#: ``cand``, ``cand``, indices of the compared split's shards, indices of the training side's shards)
_Comparison = tuple[str, str, list[Any], pl.DataFrame, set[int], set[int]]


def _comparisons(dctx: Any) -> Iterable[_Comparison | Skipped]:
    """The comparisons ``dup.split_overlap`` makes (each split other than the training split with the
    training split, the audited data with ``--against``), and a skipped entry for each one that
    cannot be made or is made only in part (see :func:`split_overlap`)."""
    against = getattr(dctx, "against", None)
    shards, cand = _merge(dctx)
    comparisons: list[_Comparison] = []
    if against is not None:
        memo = _cache(dctx)
        if "against" not in memo:
            ts, tf = _shard_frames(dctx.readable_shards())
            rs, rf = _shard_frames([s for s in against if s.readable])
            main, _running = _split_running(_candidates(tf + rf, with_label=False))
            memo["against"] = (ts + rs, _with_content_group(main, ts + rs), len(ts))
        both, cand2, k = memo["against"]
        comparisons.append(("audited", "against", both, cand2, set(range(k)), set(range(k, len(both)))))
        unread = [s for s in against if not s.readable]
        if unread:  # their rows are compared with nothing: a leak into them would pass silently
            names = ", ".join(s.path for s in unread[:5]) + (f" and {len(unread) - 5} more" if len(unread) > 5 else "")
            why = next((str(f.details.get("reason")) for f in unread[0].findings
                        if f.check == "decode.unreadable" and f.details.get("reason")), None)
            yield Skipped("dup.split_overlap", (
                f"{len(unread)} shard(s) of the --against dataset could not be read, so their rows were not "
                f"compared: {names}" + (f" ({unread[0].path}: {why})" if why else "; audit them to see why")))
    splits: dict[str, str] = dict(getattr(dctx, "splits", {}) or {})
    if dctx.cfg.splits:
        train = _train_split(dict(dctx.cfg.splits))
        by_split: dict[str, set[int]] = {}
        for i, s in enumerate(shards):
            name = splits.get(s.path)
            if name is not None:
                by_split.setdefault(name, set()).add(i)
        shared = _hub_shared(dctx)
        at = {s.path: i for i, s in enumerate(shards)}
        for path, names in shared.items():  # datasets loads it into each split its name names
            for name in names:
                if path in at:
                    by_split.setdefault(name, set()).add(at[path])
        matched = set(splits.values()) | {n for ns in shared.values() for n in ns}
        sample = ", ".join(s.path for s in dctx.shards[:3]) + (" ..." if len(dctx.shards) > 3 else "")
        for name, pat in dctx.cfg.splits.items():  # a typo in a glob must not pass silently
            if name not in matched:
                yield Skipped("dup.split_overlap", (
                    f"[splits] {name} = {pat!r} matches no shard, so "
                    f"{'the training split' if name == train else 'split'} {name!r} is not checked; globs match "
                    f"paths relative to the audited root (shards here: {sample}){_hidden_hint(pat)}"))
            elif not isinstance(pat, str):  # a list: each of its globs must match, else its files go unchecked
                for one in pat:
                    if not any(glob_matches(sh.path, one) for sh in dctx.shards):
                        yield Skipped("dup.split_overlap", (
                            f"[splits] {name}: the glob {one!r} matches no shard, so the files it was meant to "
                            f"add to {'the training split' if name == train else 'split'} {name!r} are not "
                            f"checked; globs match paths relative to the audited root (shards here: {sample})"
                            f"{_hidden_hint(one)}"))
        outside = [s.path for s in dctx.shards if s.path not in splits and s.path not in shared]
        if outside and not _hub_inferred(dctx):  # the Hub's rule's: index.extra_shard names them
            yield Skipped("dup.split_overlap", (
                f"{len(outside)} shard(s) are in no [splits] entry, so their rows were not compared with any "
                f"split for leakage: {_names(outside)}; add them to a split's globs if they are training or "
                "evaluation data (dup.exact_across_shards still compares their rows with every shard)"))
        if train not in by_split:
            if train in matched:
                yield Skipped("dup.split_overlap", f"no readable shard of the training split {train!r} "
                                                   f"({dctx.cfg.splits[train]!r}) has row hashes")
        else:
            for name in dctx.cfg.splits:
                if name != train and name in by_split:
                    comparisons.append((name, train, shards, cand, by_split[name], by_split[train]))
            if not any(name != train for name in by_split) and all(name in matched for name in dctx.cfg.splits):
                taken = "" if train == "train" else " (the first split, taken as the training split: none is named 'train')"
                yield Skipped("dup.split_overlap", (
                    f"the only split holding shards is {train!r}{taken}"
                    f"{_source_words(dctx)}: no other split to compare it with"))
    if not comparisons:
        if against is None and not dctx.cfg.splits:
            root = getattr(dctx, "root", None)
            unused = declared_splits(Path(root), list(dctx.shard_lists))[1] if root is not None else []
            why = unused[0][1] if unused else _hub_note(dctx)
            yield Skipped("dup.split_overlap", "no [splits] in the config and no --against dataset" + (
                f" ({why})" if why else ""))
        return
    for comp in comparisons:
        name, train, sh, _c, test_idx, train_idx = comp
        side = "the --against dataset" if train == "against" else f"split {train!r}"
        what = "the audited data" if name == "audited" else f"split {name!r}"
        apart = _incomparable(sh, test_idx, train_idx)
        if apart is not None:  # 0 overlap would be a pass by accident
            yield Skipped("dup.split_overlap", (
                f"{what} (content columns {apart[0]}) and {side} (content columns {apart[1]}) share no content "
                "columns of the same role, so no row can match and leakage cannot be measured; give both "
                "sides the same roles ([columns]) or compare datasets of the same layout"))
            continue
        gk = _group_keys(sh)
        alone = {gk[i] for i in test_idx} - {gk[i] for i in train_idx}
        if alone:  # these shards' rows can match no row of the other side: say so, never a silent 0
            lone = [sh[i] for i in sorted(test_idx) if gk[i] in alone]
            yield Skipped("dup.split_overlap", (
                f"{len(lone)} shard(s) of {what} hash rows over columns no shard of {side} has, so their rows "
                f"were not compared: {_content_groups(lone)} (other side: "
                f"{_content_groups([sh[i] for i in sorted(train_idx)])}); give both sides the same roles ([columns])"))
        yield comp


def _names(paths: list[str], shown: int = 5) -> str:
    return ", ".join(paths[:shown]) + (f" and {len(paths) - shown} more" if len(paths) > shown else "")


def _hub_inferred(dctx: Any) -> HubSplits | None:
    """The splits ``datasets.load_dataset`` gives the audited shards (the dataset card's ``configs``,
    else the Hub's file names: :func:`datacheck.io.cardsplits.loader_splits`) when they are the
    audit's ``[splits]`` (inferred, or the same entries written by hand) and no ``dataset_dict.json``
    declares the splits; else None."""
    if not dctx.cfg.splits or any(p.rpartition("/")[2] == DATASET_DICT_NAME for p in getattr(dctx, "shard_lists", ())):
        return None
    hub = dataset_loader_splits(dctx)
    return hub if hub.splits and hub.splits == dict(dctx.cfg.splits) else None


def _hidden_hint(pattern: str | list[str]) -> str:
    """``"; ..."`` when a ``[splits]`` glob names a hidden file or folder (a part starting with ``.``,
    as a card's ``data_files`` may: ``data/.extra/*``): discovery does not look into those unless
    they are named as PATHs; "" otherwise."""
    pats = [pattern] if isinstance(pattern, str) else pattern
    hidden = sorted({part for p in pats for part in p.split("/") if part.startswith(".") and set(part) != {"."}})
    if not hidden:
        return ""
    return (f"; it names hidden files or folders ({', '.join(hidden[:3])}), which discovery does not look into: "
            "name them as PATHs too (datacheck audit DATA DATA/.hidden_folder) to read them")


def _source_words(dctx: Any) -> str:
    """`` (the dataset card's configs name no other)`` or `` ([splits] name no other)``: where the
    audit's ``[splits]`` came from, for a skipped entry."""
    hub = _hub_inferred(dctx)
    if hub is not None and hub.source == CARD:
        return " (the dataset card's configs name no other split that holds an audited shard)"
    return " ([splits] name no other split that holds a shard)"


def _hub_shared(dctx: Any) -> dict[str, tuple[str, ...]]:
    """{shard path: its splits} of the shards whose names name several splits when the audit's
    ``[splits]`` are the Hub's (:func:`_hub_inferred`, :attr:`datacheck.io.hubsplits.HubSplits.shared`):
    each is in every split it names, not only in the first one whose glob matches it
    (:func:`assign_splits`, the rule of a hand-written config)."""
    hub = _hub_inferred(dctx)
    return dict(hub.shared) if hub is not None else {}


def _leak_hits(dctx: Any, train: str, sh: list[Any], c: pl.DataFrame, test_idx: set[int], train_idx: set[int],
               gone: pl.DataFrame | None) -> pl.DataFrame:
    """``dup.split_overlap``'s rows (``shard``, ``row``, ``train_shard``, ``train_row``; ``shard`` and
    ``row`` ascending): of the shards of the compared split only, those whose content occurs in the
    training side (:func:`_overlap_hits`, :func:`_with_running_overlap`); of a shard in both splits
    (:func:`_hub_shared`), every row (not in ``gone``), its training row being itself."""
    both = test_idx & train_idx
    alone = test_idx - both
    hits = _with_running_overlap(dctx, train, sh, _overlap_hits(_without(c, gone), alone, train_idx), gone,
                                 alone, train_idx)
    if not both:
        return hits
    own = []
    for i in sorted(both):
        rows = pl.DataFrame({"shard": pl.Series([i] * (sh[i].rows or 0), dtype=pl.UInt32),
                             "row": pl.Series(range(sh[i].rows or 0), dtype=pl.UInt32)})
        if gone is not None and gone.height:
            rows = rows.join(gone, on=["shard", "row"], how="anti")
        own.append(rows.with_columns(pl.col("shard").alias("train_shard"), pl.col("row").alias("train_row")))
    return pl.concat([hits.cast(own[0].schema), *own]).sort(["shard", "row"])


def _hub_note(dctx: Any) -> str | None:
    """Why ``datasets.load_dataset`` of the folder gave no splits although the dataset card's
    ``configs`` or a shard's name names one (:func:`datacheck.io.cardsplits.loader_splits`), or that
    ``[dataset] infer_splits = false`` left the splits they name unused; None when neither names a
    split or a ``dataset_dict.json`` declares the splits."""
    if any(p.rpartition("/")[2] == DATASET_DICT_NAME for p in dctx.shard_lists):
        return None
    hub = dataset_loader_splits(dctx)
    given = "the dataset card's configs" if hub.source == CARD else "the file names"
    if hub.splits:
        if dctx.cfg.dataset.infer_splits:  # a caller that did not fill [splits] (setup.with_declared_splits does)
            return None
        return f"[dataset] infer_splits = false: the splits {given} give ({', '.join(hub.splits)}) were not used"
    return hub.note


def split_overlap_rows(dctx: Any, removed: dict[str, Any] | None = None,
                       in_both: bool = False) -> dict[str, list[int]]:
    """The rows ``dup.split_overlap`` counts, every one (not only the examples): {shard path of the
    audited data: 0-based rows (ascending)} of each row of a split other than the training split
    whose content occurs in the training split (or in the ``--against`` dataset). The training
    side's rows are never listed: dropping these rows removes the leak and keeps the training data;
    so the rows of a shard in both splits (its name names both, :func:`_hub_shared`) are listed only
    with ``in_both`` (what is left of the leak when they are kept). ``removed`` ({shard path: rows})
    are rows taken out of the data first (rows another check drops)."""
    out: dict[str, set[int]] = {}
    for comp in _comparisons(dctx):
        if isinstance(comp, Skipped):
            continue
        _name, _train, sh, c, test_idx, train_idx = comp
        among = test_idx | train_idx if _train != "against" else test_idx
        gone = _removed_frame(sh, removed, among)
        hits = _leak_hits(dctx, _train, sh, c, test_idx, train_idx, gone)
        if not in_both:  # a shard in both splits is training data too: dropping its rows drops training rows
            hits = hits.filter(~pl.col("shard").is_in(pl.Series(sorted(test_idx & train_idx), dtype=pl.UInt32).implode()))
        for i, r in hits.select("shard", "row").iter_rows():
            out.setdefault(sh[i].path, set()).add(int(r))
    return {p: sorted(rows) for p, rows in sorted(out.items())}


@check("dup.split_overlap", level="dataset")
def split_overlap(dctx: Any) -> Iterable[Finding | Skipped]:
    """``dup.split_overlap``: rows of an eval/test split whose content (label excluded) occurs in the
    training split (``[splits]``), or in the ``--against`` dataset.

    count = such rows (each split other than the training split is compared with the training split);
    a shard in both splits (the Hub's file names name both, ``train_test.parquet``: ``datasets`` loads
    it into each; :attr:`datacheck.io.hubsplits.HubSplits.shared`) counts every row, its training row
    being itself, and is named in the message and ``details.in_both_splits``. Shards in no ``[splits]``
    entry of a hand-written config are compared with no split: a skipped entry names them. Rows and examples: the first ``[report] max_examples`` of them (``rows``: the eval side's 0-based
    row; ``details.examples``: the row on both sides, shard and row). When the two sides share no content
    column of the same role (e.g. ``text`` against ``input_ids``), no row can match: that comparison
    is a skipped entry naming both column sets, never a pass with 0 overlap (not exit 2: the other
    comparisons and checks of the audit still run and report). An audited shard with the same bytes
    as a shard of the ``--against`` dataset (equal content hashes: a copy under another name) is named
    first in the message and listed in ``details.same_bytes`` (``shard``, ``against_shard``,
    ``content_hash``), a hard link or a followed file symlink under another path too; the same path on
    both sides is refused before the audit reads anything
    (:func:`datacheck.execute.audit.refuse_shared_files`, exit 2).

    A running text (a ``.txt`` read by line or paragraph) follows ``dup.exact_in_shard``'s rule
    (:mod:`datacheck.checks.dup.stretch`): the training split's shards are read first, then the
    compared split's, and a row counts when it lies in a stretch of rows, 200 characters or more
    together, that repeats a stretch of the training split; against ``--against`` its rows of 200
    characters or more are compared one by one.
    """
    max_ex = dctx.cfg.report.max_examples
    for comp in _comparisons(dctx):
        if isinstance(comp, Skipped):
            yield comp
            continue
        name, train, sh, c, test_idx, train_idx = comp
        side = "the --against dataset" if train == "against" else f"split {train!r}"
        what = "the audited data" if name == "audited" else f"split {name!r}"
        hits = _leak_hits(dctx, train, sh, c, test_idx, train_idx, None)
        count = hits.height
        if not count:
            continue
        per_shard = {sh[i].path: n for i, n in hits.group_by("shard").len().sort("shard").iter_rows()}
        examples = [{"shard": sh[r["shard"]].path, "row": int(r["row"]),
                     "train_shard": ("against:" if train == "against" else "") + sh[r["train_shard"]].path,
                     "train_row": int(r["train_row"])} for r in hits.head(max_ex).iter_rows(named=True)]
        total = sum(sh[i].rows or 0 for i in test_idx)
        details: dict[str, Any] = {"split": name, "train_split": train, "per_shard": per_shard, "examples": examples}
        same = _same_bytes(sh, test_idx, train_idx) if train == "against" else []
        if same:
            details["same_bytes"] = same
        both = sorted(sh[i].path for i in test_idx & train_idx)
        if both:
            details["in_both_splits"] = both
        yield finding(
            "dup.split_overlap", count=count, ratio=count / total if total else None,
            shards=tuple(sorted(per_shard)),
            examples=tuple(Example(row=e["row"], value=f"{e['shard']} row {e['row']} = {e['train_shard']} row {e['train_row']}")
                           for e in examples),
            rows=tuple(e["row"] for e in examples),
            message=(_same_bytes_text(same) + _in_both_text(both, what, side, _hub_inferred(dctx)) + f"{count} row(s) of {what} also "
                     f"occur in {side} (content: {', '.join(_content_columns([sh[i] for i in test_idx]))}; label "
                     "excluded): leakage, evaluation is optimistic"),
            details=details,
            rows_truncated=count > len(examples),
        )


def _same_bytes(sh: list[Any], test_idx: set[int], train_idx: set[int]) -> list[dict[str, str]]:
    """``{"shard", "against_shard", "content_hash"}`` of each audited shard whose bytes are those of a
    shard of the ``--against`` dataset (equal content hashes; an ``--against`` shard has one only when
    its file has an audited shard's size, see :func:`datacheck.execute.audit.hash_shards`), in path order."""
    theirs: dict[str, list[str]] = {}
    for j in sorted(train_idx):
        if sh[j].content_hash:
            theirs.setdefault(sh[j].content_hash, []).append(sh[j].path)
    return [{"shard": sh[i].path, "against_shard": p, "content_hash": sh[i].content_hash}
            for i in sorted(test_idx, key=lambda k: sh[k].path) for p in theirs.get(sh[i].content_hash, [])]


def _in_both_text(both: list[str], what: str, side: str, hub: HubSplits | None = None) -> str:
    """The message's sentence naming the shards in both splits (the Hub's file names name both, or two
    splits' patterns of the dataset card's configs match them: datasets loads such a file into each),
    "" when none."""
    if not both:
        return ""
    if hub is not None and hub.source == CARD:
        return (f"{len(both)} shard(s) are in both {what} and {side}, as the dataset card's data_files patterns of "
                f"both splits match them and datasets.load_dataset loads such a file into each ({_names(both)}): "
                "every row of them counts; fix the card's patterns so each file is in one split. ")
    return (f"{len(both)} shard(s) are in both {what} and {side}, as their names name both splits and "
            f"datasets.load_dataset loads such a file into each ({_names(both)}): every row of them counts; "
            "rename them so each names one split. ")


def _same_bytes_text(same: list[dict[str, str]]) -> str:
    """The message's first sentence, naming the shards of both sides with the same bytes ("" when none)."""
    if not same:
        return ""
    shown = "; ".join(f"{x['shard']} = against:{x['against_shard']} ({x['content_hash']})" for x in same[:5])
    more = f"; and {len(same) - 5} more" if len(same) > 5 else ""
    n = len({x["shard"] for x in same})
    return (f"{n} audited shard(s) have the same bytes as a shard of the --against dataset ({shown}{more}): "
            "every row of them is in both sets. ")


def assign_splits(paths: list[str], splits: Mapping[str, str | list[str]]) -> dict[str, str]:
    """Split name of each shard path: the first ``[splits]`` entry (config order) whose glob, or one
    of whose list of globs, matches.

    Globs are ``fnmatch`` patterns over the POSIX path relative to the audited root (``*`` also
    crosses ``/``). Shards matching no glob belong to no split.
    """
    out: dict[str, str] = {}
    for p in paths:
        for name, pat in splits.items():
            if glob_matches(p, pat):
                out[p] = name
                break
    return out


