"""``datacheck inspect``: the offending rows of a shard, their values, and a small reproduction file.

Inspection reuses the audit machinery: shards are found with :func:`datacheck.formats.discovery.discover`,
audited with :func:`datacheck.engine.shard.audit_file` (``keep_rows=True``, so every failing row of
every row check is known), and the offending rows are then read back from the shard as the audit
read it (:func:`datacheck.derive.read.open_for_checks`: same reader, same casts). Row indices are 0-based
positions in the shard as read (header excluded for CSV); JSONL/CSV rows also carry their 1-based
line number.

For list columns the position of the first bad element is shown (e.g. the first token id
``>= vocab_size``), taken from the engine's structured examples (:class:`datacheck.model.findings.Example`
``position`` and ``length``); no check is re-derived here. With a tokenizer
(``tokenizer.json``; a GPT-2 style ``vocab.json`` + ``merges.txt`` pair; or a WordPiece
``vocab.txt``), the sequence is shown as tokens through the ``tokenizers`` package (the optional
``tokenizers`` extra: ``pip install "tokenizers>=0.15"``, or ``pip install -e ".[tokenizers]"`` in
the datacheck source folder).

:func:`export_rows` writes offending (or chosen) rows with their original row index, shard path
and shard content hash to a parquet or JSONL file, atomically, so a failure can be replayed on a
fixed batch.
"""
from __future__ import annotations

import decimal
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from datacheck.checks import all as _families  # noqa: F401 - every family registers its checks
from datacheck.derive.classlabel import DeclaredSource, as_declared, declared_source, with_declared_classes
from datacheck.derive.read import CheckInput, open_for_checks
from datacheck.derive.tokenizer import TOKENIZERS_INSTALL, TokenizerView, load_tokenizer, with_tokenizer_facts
from datacheck.engine.shard import audit_file
from datacheck.formats.discovery import discover
from datacheck.io.discover import DiscoveredShard
from datacheck.io.outputs import write_frame_atomic
from datacheck.io.shardbytes import Unreadable
from datacheck.model import catalog
from datacheck.model.config import Config, describe_label_facts, describe_tokenizer_facts
from datacheck.model.errors import OutOfMemory, UsageError
from datacheck.model.findings import Example, Finding, Skipped, show_value
from datacheck.model.layouts import Layout
from datacheck.model.roles import is_list, seq2seq_layout
from datacheck.model.supervision import IGNORED, PADDING, PADDING_SUPERVISED, classify_supervision

__all__ = [
    "OffendingRow",
    "ShardInspection",
    "TokenizerView",
    "load_tokenizer",
    "inspect_shards",
    "export_rows",
    "parse_row_list",
    "EXPORT_COLUMNS",
    "TOKENIZERS_INSTALL",
]

#: Columns :func:`export_rows` adds to the data columns (names chosen not to clash with data).
EXPORT_COLUMNS = ("_datacheck_row", "_datacheck_line", "_datacheck_shard", "_datacheck_shard_hash",
                  "_datacheck_checks")
#: Tokens shown on each side of the first bad position (a whole sequence of 2048 ids is unreadable).
TOKEN_WINDOW = 24
#: Characters shown per column of a row chosen with ``--rows`` (every column is shown).
ROW_VALUE_CHARS = 120
#: With ``--rows``, the engine keeps examples (values, first bad positions) of each check's first
#: failing rows up to the highest row chosen, but at most this many (the ``[report] max_examples``
#: bound); a chosen row past it is shown without its first bad position.
MAX_EXAMPLE_ROWS = 10_000


# --------------------------------------------------------------------------------------------- inspection
@dataclass(frozen=True)
class OffendingRow:
    """One row (or, for ``decode.*`` findings, one line) that fails a check.

    Attributes:
        check: check ID, e.g. ``"tokens.out_of_vocab"``.
        column: the failing column, or None when the check concerns several.
        row: 0-based row index in the shard as read; None for a line that is not a row (bad record).
        line: 1-based line number (JSONL/CSV), else None.
        value: the failing column's value, shown truncated (``show_value``).
        position: for list columns, the 0-based position of the first bad element, else None.
        length: for list columns, the list length, else None.
        bad_value: the first bad element (list columns) as text, else None.
        detail: the check's own example text (e.g. ``"first at position 5 of 128: 30523"``).
        tokens: the sequence as tokens (a window around ``position``) when a tokenizer was given.
        byte_offset: 0-based byte offset of the line (decode findings), else None.
        supervision: with a tokenizer, the whole ``input_ids`` row as ``(token text, class)`` pairs,
            the class from :func:`~datacheck.model.supervision.classify_supervision` (``[labels]``/``[tokens]`` facts of the config).
        supervision_runs: the same row as ``(class, text)`` runs of consecutive tokens of one class,
            each run's text decoded from its joined ids (:meth:`TokenizerView.decode`); a run of one
            repeated padding token as ``token×N``.
        supervision_note: why a row with ``input_ids`` has no token supervision view (classification
            data: no token labels, its supervision is the row's scalar class label), else None.
        decoded: with ``supervision_note``, the row's ids decoded (padding collapsed), uncoloured.
        repeats: for a row a duplicate check names as a copy (``dup.exact_in_shard``), the 0-based
            shard row of the first row holding the same content (the engine's ``details.examples``
            ``first_row``, the earlier row its refinement found), else None.
    """

    check: str
    column: str | None
    row: int | None
    line: int | None
    value: str
    position: int | None = None
    length: int | None = None
    bad_value: str | None = None
    detail: str | None = None
    tokens: tuple[str, ...] | None = None
    byte_offset: int | None = None
    supervision: tuple[tuple[str, str], ...] | None = None
    supervision_runs: tuple[tuple[str, str], ...] | None = None
    supervision_note: str | None = None
    decoded: str | None = None
    repeats: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "column": self.column, "row": self.row, "line": self.line,
                "value": self.value, "position": self.position, "length": self.length,
                "bad_value": self.bad_value, "detail": self.detail,
                "tokens": list(self.tokens) if self.tokens is not None else None,
                "byte_offset": self.byte_offset,
                "supervision": (None if self.supervision is None else
                                [{"token": t, "class": c} for t, c in self.supervision]),
                "supervision_runs": (None if self.supervision_runs is None else
                                     [{"class": c, "text": t} for c, t in self.supervision_runs]),
                "supervision_note": self.supervision_note, "decoded": self.decoded, "repeats": self.repeats}


@dataclass
class ShardInspection:
    """What :func:`inspect_shards` learned about one shard.

    Attributes:
        shard: the discovered shard (absolute path, relative path, format).
        content_hash: ``"xxh3-128:<hex>"`` of the shard's bytes.
        bytes: file size in bytes.
        rows: rows read, or None when the shard is unreadable.
        unreadable: why the shard cannot be read and where (bad magic, truncated footer, ...), else None.
        failing: every failing row (0-based, sorted) per ``"check"`` / ``"check:column"`` (after ``--check``).
        shown: the offending rows shown (at most ``limit`` per check key, or the ``--rows`` asked for).
        decode: ``decode.*`` findings (bad lines, invalid UTF-8) with line numbers and byte offsets.
        skipped: checks that could not run on this shard, and why.
        notes: facts worth saying (e.g. ``vocab_size`` taken from the tokenizer, the ``[tokens]`` facts
            taken from ``[tokens] tokenizer``: :func:`~datacheck.model.config.describe_tokenizer_facts`).
        layout: the shard's layout as ``datacheck audit`` decides it with the same config
            (:func:`datacheck.derive.layout.shard_layout`, run by the audit of the shard that
            inspection is: ``[dataset] layout``, else the built-in schema's, else recognized); None
            for an unreadable shard. It decides whether ``labels`` align with ``input_ids`` in the
            token supervision view (not in ``seq2seq``: there they are the decoder's targets).
        not_applicable: the checks asked for (``--check``; all without it) that do not apply to the
            shard's layout or its form of it: not run, not skipped (IDs in the registry's order; the
            audit report's shard ``not_applicable`` is their count). The JSON's shard key of that name.
        repeats: ``{check key: {copy row: the first row with its content}}`` for the copies a
            duplicate check (``dup.exact_in_shard``) names in this shard, as far as the engine's
            examples reach (every copy shown; with ``inspect_shards(export=True)`` up to
            :data:`MAX_EXAMPLE_ROWS` copies): :func:`export_rows` exports each copy's first row too.
    """

    shard: DiscoveredShard
    content_hash: str
    bytes: int
    rows: int | None
    unreadable: str | None = None
    failing: dict[str, list[int]] = field(default_factory=dict)
    shown: list[OffendingRow] = field(default_factory=list)
    decode: list[Finding] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    layout: Layout | None = None
    not_applicable: list[str] = field(default_factory=list)
    repeats: dict[str, dict[int, int]] = field(default_factory=dict)

    @property
    def has_failures(self) -> bool:
        return self.unreadable is not None or bool(self.failing) or any(
            f.severity in ("error", "warn") for f in self.decode)

    def rows_failing(self) -> dict[int, list[str]]:
        """{row: sorted check keys it fails} over all kept check keys."""
        out: dict[int, list[str]] = {}
        for key, rows in self.failing.items():
            for r in rows:
                out.setdefault(r, []).append(key)
        return {r: sorted(v) for r, v in sorted(out.items())}

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.shard.rel, "format": self.shard.format, "content_hash": self.content_hash,
            "bytes": self.bytes, "rows": self.rows, "unreadable": self.unreadable,
            "failing": {k: {"count": len(v), "rows": v[:1000]} for k, v in sorted(self.failing.items())},
            "shown": [r.to_dict() for r in self.shown],
            "decode": [f.to_dict() for f in self.decode],
            "skipped": [s.to_dict() for s in self.skipped],
            "notes": list(self.notes),
            "layout": None if self.layout is None else self.layout.to_dict(),
            "not_applicable": list(self.not_applicable),
        }


def parse_row_list(text: str) -> list[int]:
    """``"17,42,100-103"`` -> ``[17, 42, 100, 101, 102, 103]`` (0-based row indices, sorted, unique).

    Raises:
        UsageError: a part is not a non-negative integer or an ``A-B`` range with ``A <= B``.
    """
    out: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m or (m.group(2) is not None and int(m.group(2)) < int(m.group(1))):
            raise UsageError(f"--rows {text!r}: {part!r} is not a row index or A-B range "
                             "(0-based, e.g. --rows 17,42,100-103)")
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) is not None else a
        out.update(range(a, b + 1))
    if not out:
        raise UsageError(f"--rows {text!r}: no row index given (e.g. --rows 17,42)")
    return sorted(out)


def _check_ids(checks: list[str] | None) -> set[str] | None:
    if not checks:
        return None
    bad = [c for c in checks if not catalog.is_known(c)]
    if bad:
        raise UsageError(f"--check {bad[0]!r}: unknown check ID{catalog.unknown_hint(bad[0])}")
    dataset = [c for c in checks if catalog.info(c).level == "dataset"]
    if dataset:  # decided across shards: inspect (one shard's rows) would silently show nothing
        raise UsageError(f"--check {dataset[0]!r}: {dataset[0]} is a dataset-level check; run datacheck audit "
                         "(its finding names the shards and rows concerned)")
    return set(checks)


def _with_facts(cfg: Config, limit: int, tok: TokenizerView | None,
                rows: list[int] | None = None, export: bool = False) -> tuple[Config, list[str]]:
    """The config inspect audits with: ``max_examples`` raised to ``limit`` (and, with ``rows``, to
    cover the highest chosen row, at most :data:`MAX_EXAMPLE_ROWS`: a row's rank among a check's
    failing rows is at most its index; with ``export``, to :data:`MAX_EXAMPLE_ROWS`: the first rows
    of the duplicates exported), so the engine's examples hold every row shown; and
    ``vocab_size`` taken from the tokenizer when unset."""
    notes = []
    want = max(cfg.report.max_examples, limit)
    if rows:
        want = max(want, min(max(rows) + 1, MAX_EXAMPLE_ROWS))
    if export and rows is None:
        want = MAX_EXAMPLE_ROWS
    report = cfg.report.model_copy(update={"max_examples": want})
    update: dict[str, Any] = {"report": report}
    if tok is not None and cfg.tokens.vocab_size is None:
        update["tokens"] = cfg.tokens.model_copy(update={"vocab_size": tok.vocab_size})
        notes.append(f"[tokens] vocab_size not set: using the tokenizer's {tok.vocab_size} ({tok.source})")
    elif tok is not None and tok.vocab_size != cfg.tokens.vocab_size:
        v = cfg.tokens.vocab_size
        notes.append(f"the tokenizer has {tok.vocab_size} tokens but [tokens] vocab_size is {v}: rows are checked "
                     f"against {v}; " + (f"ids {tok.vocab_size}..{v - 1} pass the check but show as <oov:ID>"
                                         if v > tok.vocab_size else
                                         f"ids {v}..{tok.vocab_size - 1} decode but fail tokens.out_of_vocab")
                     + f" (a different tokenizer than the data's? {tok.source})")
    return cfg.model_copy(update=update), notes


def _window(tokens: list[str], pos: int | None) -> tuple[str, ...]:
    """A readable slice of ``tokens``: around ``pos`` (marked with ⟦ ⟧), else the start."""
    if pos is None or pos < 0 or pos >= len(tokens):
        head = tokens[: 2 * TOKEN_WINDOW]
        return tuple(head + (["…"] if len(tokens) > len(head) else []))
    lo, hi = max(0, pos - TOKEN_WINDOW), min(len(tokens), pos + TOKEN_WINDOW + 1)
    out = (["…"] if lo > 0 else []) + tokens[lo:pos] + [f"⟦{tokens[pos]}⟧"] + tokens[pos + 1:hi]
    return tuple(out + (["…"] if hi < len(tokens) else []))


def _inspect_one(ds: DiscoveredShard, cfg: Config, checks: set[str] | None, rows: list[int] | None,
                 limit: int, tok: TokenizerView | None, notes: list[str]) -> ShardInspection:
    res = audit_file(ds, cfg, keep_rows=True)[0]
    chash, size = res.content_hash, res.bytes
    if not res.readable:
        reason = next((f.details.get("reason") for f in res.findings if f.check == "decode.unreadable"), None)
        return ShardInspection(shard=ds, content_hash=chash, bytes=size, rows=None,
                               unreadable=reason or "cannot be read")
    try:
        data = open_for_checks(ds, cfg)  # as the audit read it
    except Unreadable as exc:  # the file changed between the audit and now
        OutOfMemory.check(exc, ds.rel, size)
        return ShardInspection(shard=ds, content_hash=chash, bytes=size, rows=None, unreadable=exc.reason)
    failing = {k: v for k, v in res.failing_rows.items() if checks is None or k.split(":", 1)[0] in checks}
    decode = [f for f in res.findings if f.check.startswith("decode.") and (checks is None or f.check in checks)]
    layout = Layout.from_dict(res.layout)  # the audit's own decision for this shard and config
    out = ShardInspection(shard=ds, content_hash=chash, bytes=size, rows=res.rows, failing=failing,
                          decode=decode, skipped=[k for k in res.skipped if checks is None or k.check in checks
                                                    or any(c.startswith(k.check + ".") for c in checks)],
                          notes=list(notes), layout=layout,
                          not_applicable=[c for c in res.not_applicable if checks is None or c in checks])
    if rows is not None:
        beyond = [r for r in rows if r >= (res.rows or 0)]
        if beyond:
            out.notes.append(f"rows {','.join(map(str, beyond[:10]))} are past the last row ({(res.rows or 0) - 1})")
        wanted = {r: [] for r in rows if r < (res.rows or 0)}
        for key, rs in failing.items():
            s = set(rs)
            for r in wanted:
                if r in s:
                    wanted[r].append(key)
        pairs = [(key, r) for r, keys in wanted.items() for key in (sorted(keys) or [None])]
    else:
        pairs = [(key, r) for key, rs in sorted(failing.items()) for r in rs[:limit]]
    for (check, column, copy), first in _first_rows(res.findings).items():
        key = f"{check}:{column}" if column is not None else check
        if key in failing:
            out.repeats.setdefault(key, {})[copy] = first
    if not pairs:
        return out
    examples = {(f.check, f.column, e.row): e for f in res.findings for e in f.examples if e.row is not None}
    shown = _read_rows(data, pairs, examples, tok, cfg, layout.name)
    firsts = _first_rows(res.findings)
    out.shown = [replace(r, repeats=firsts.get((r.check, r.column, r.row))) if r.row is not None else r
                 for r in shown]
    return out


def _first_rows(findings: list[Finding]) -> dict[tuple[str, str | None, int], int]:
    """``(check, column, copy row) -> the first row with the copy's content`` from the findings'
    ``details.examples`` pairs (``{"row", "first_row"}``: the engine writes them for the rows a
    duplicate check's refinement returned as :class:`~datacheck.checks.spec.Repeats`, the first
    ``max_examples`` copies, which inspect raises to cover every row it shows: :func:`_with_facts`).
    Pairs naming another shard (``first_shard``) are not this shard's rows and are left out."""
    out: dict[tuple[str, str | None, int], int] = {}
    for f in findings:
        for ex in (f.details or {}).get("examples") or ():
            if (isinstance(ex, dict) and "first_shard" not in ex and isinstance(ex.get("row"), int)
                    and isinstance(ex.get("first_row"), int)):
                out[(f.check, f.column, ex["row"])] = ex["first_row"]
    return out


def _element(value: Any, pos: int) -> str | None:
    """The element at 0-based ``pos`` of ``value``'s flattened list (nested lists in row order), as
    text (``"null"`` for a null element); None when there is none."""
    flat: list[Any] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, (list, tuple)):
            stack.extend(reversed(v))
        else:
            flat.append(v)
    if not isinstance(value, (list, tuple)) or not 0 <= pos < len(flat):
        return None
    return "null" if flat[pos] is None else str(flat[pos])


def _as_list(v: Any) -> list[Any] | None:
    v = v.to_list() if isinstance(v, pl.Series) else v
    return v if isinstance(v, list) else None


def _read_rows(data: CheckInput, pairs: list[tuple[str | None, int]],
               examples: dict[tuple[str, str | None, int], Example],
               tok: TokenizerView | None, cfg: Config | None = None, layout: str | None = None) -> list[OffendingRow]:
    """Values, first bad positions (the engine's examples), tokens and the tokens' supervision
    classes of the (check key, row) pairs, in one read of the shard as the audit read it.
    ``layout``: the shard's layout name as the audit decided it (None: unknown); in ``seq2seq`` the
    labels are the decoder's targets, so no token supervision view is built."""
    cfg = cfg or Config()
    schema, roles = data.schema, data.roles
    keys = sorted({k for k, _ in pairs if k is not None})
    want_rows = sorted({r for _, r in pairs})
    exprs: list[pl.Expr] = [pl.col("__row")]
    value_cols = sorted({k.split(":", 1)[1] for k in keys if ":" in k and k.split(":", 1)[1] in schema})
    seq_col = roles.input_ids if tok is not None else None
    text_col = roles.text[0] if (tok is not None and roles.text and seq_col is None) else None
    # encoder-decoder labels are the target sequence, not per input token: no supervision view there
    s2s = seq2seq_layout(cfg.dataset.schema_, schema, layout) is not None  # the rule the audit's checks apply
    sup_cols = ([c for c in (roles.attention_mask, roles.labels, roles.assistant_mask)
                 if c is not None and is_list(schema[c])] if seq_col is not None and not s2s else [])
    # a scalar class label (classification): the row's supervision when there are no token labels
    label_col = roles.label if seq_col is not None and roles.label is not None and roles.label in schema else None
    # seq2seq: the decoder's targets, shown decoded beside the encoder's tokens
    target_col = roles.labels if s2s and seq_col is not None and roles.labels in schema and is_list(schema[roles.labels]) else None
    extra = [c for c in (seq_col, text_col, *sup_cols, label_col, target_col) if c is not None and c not in value_cols]
    extra = list(dict.fromkeys(extra))
    whole_rows = any(k is None for k, _ in pairs)  # --rows: a chosen row is shown with every column
    if whole_rows:
        extra += [c for c in schema if c not in value_cols and c not in extra]
    exprs += [pl.col(c) for c in value_cols + extra]
    df = data.lf.with_row_index("__row").filter(pl.col("__row").is_in(want_rows)).select(exprs).collect()
    by_row = {int(r): i for i, r in enumerate(df["__row"].to_list())}
    written = _as_written(data, [c for c in value_cols if c in data.clipped], want_rows)
    lines = data.lines_of(want_rows)
    line_of = dict(zip(want_rows, lines)) if lines else {}
    shown: list[OffendingRow] = []
    for key, r in pairs:
        i = by_row.get(r)
        if i is None:
            continue
        check, column = (key.split(":", 1) + [None])[:2] if key is not None else ("(none)", None)
        if key is not None and ":" not in key:
            column = None
        value = df[column][i] if column is not None and column in df.columns else None
        read_as = None
        if column in written:  # integers beyond 64 bits: shown as the file holds them, not at Int64's bounds
            read_as, value = value, written[column].get(r)
        if isinstance(value, pl.Series):
            value = value.to_list()
        if column is not None:
            shown_value = show_value(value)
        else:
            shown_value = _row_summary(df, i, list(schema) if whole_rows else value_cols + extra,
                                       per_column=ROW_VALUE_CHARS if whole_rows else 60)
        detail = pos = length = bad = None
        ex = examples.get((check, column, r)) if key is not None else None
        if ex is not None:
            detail, pos, length = ex.value, ex.position, ex.length
            if read_as is not None and detail == show_value(read_as.to_list() if isinstance(read_as, pl.Series)
                                                            else read_as):
                detail = None  # the value as the checks read it (at Int64's bound): the value as written is shown
            if pos is not None and column is not None:
                bad = _element(value, pos)
        tokens = supervision = sup_runs = note = decoded = None
        if seq_col is not None and seq_col in df.columns:
            ids = _as_list(df[seq_col][i])
            if ids and not isinstance(ids[0], list):
                texts = tok.tokens(ids)
                tokens = _window(texts, pos if column == seq_col else None)
            targets = _as_list(df[target_col][i]) if target_col is not None else None
            if targets is not None and not (targets and isinstance(targets[0], list)):
                kept = [t for t in targets if t is not None and t != cfg.labels.ignore]
                note = (f"seq2seq: {target_col!r} holds the decoder's targets ({len(kept)} supervised of "
                        f"{len(targets)}), not one label per input token; the input tokens are shown uncoloured, "
                        "the targets decoded below")
                decoded = tok.decode(kept)
            if ids and not isinstance(ids[0], list) and not s2s:
                def col_of(c: str | None) -> list[Any] | None:
                    return _as_list(df[c][i]) if c is not None and c in sup_cols else None

                token_labels, amask = col_of(roles.labels), col_of(roles.assistant_mask)
                classes = classify_supervision(
                    ids, attention_mask=col_of(roles.attention_mask), labels=token_labels,
                    assistant_mask=amask, ignore_index=cfg.labels.ignore,
                    shifted=cfg.labels.shifted, pad_token_id=cfg.tokens.pad_token_id,
                    padding_side=cfg.tokens.padding_side or "right")
                if token_labels is None and amask is None and label_col is not None:
                    # classification: the loss is on the row's class label, no token is a target
                    value_of = df[label_col][i] if label_col in df.columns else None
                    note = (f"no token labels: supervision is per row (the class label {label_col!r}"
                            + (f" = {value_of!r}" if label_col in df.columns else "") + "); tokens shown uncoloured")
                    decoded = "".join(t for _, t in _decoded_runs(tok, ids, [c if c == PADDING else IGNORED
                                                                              for c in classes]))
                else:
                    supervision = tuple(zip(texts, classes))
                    sup_runs = tuple(_decoded_runs(tok, ids, classes))
        elif text_col is not None and isinstance(df[text_col][i], str):
            tokens = _window(tok.encode(df[text_col][i]), None)
        shown.append(OffendingRow(check=check, column=column, row=r, line=line_of.get(r), value=shown_value,
                                  position=pos, length=length, bad_value=bad, detail=detail,
                                  tokens=tokens, supervision=supervision, supervision_runs=sup_runs,
                                  supervision_note=note, decoded=decoded))
    return shown


def _as_written(data: CheckInput, columns: list[str], rows: list[int]) -> dict[str, dict[int, Any]]:
    """``{column: {row: value}}`` of ``columns`` (role columns the read path clips to Int64:
    ``CheckInput.clipped``) at ``rows`` as the file holds them (``CheckInput.uncast``): 128-bit
    integers as Python ints, integral decimals as ints, in lists too. {} when there are none."""
    if not columns or data.uncast is None:
        return {}
    raw = (data.uncast.with_row_index("__row").filter(pl.col("__row").is_in(rows))
           .select(pl.col("__row"), *(pl.col(c) for c in columns)).collect())
    at = [int(r) for r in raw["__row"].to_list()]
    return {c: dict(zip(at, (_whole(v) for v in raw[c].to_list()))) for c in columns}


def _whole(v: Any) -> Any:
    """``v`` with every integral ``Decimal`` (a decimal(38, 0) column's value) an ``int``, in lists too."""
    if isinstance(v, list):
        return [_whole(x) for x in v]
    if isinstance(v, decimal.Decimal) and v.is_finite() and v == v.to_integral_value():
        return int(v)
    return v


def _decoded_runs(tok: TokenizerView, ids: list[Any], classes: list[str]) -> list[tuple[str, str]]:
    """``(class, text)`` runs of consecutive tokens of one class, each run's text decoded from its
    joined ids (:meth:`TokenizerView.decode`); a padding run of one repeated id as ``token×N``."""
    out: list[tuple[str, str]] = []
    start = 0
    for j in range(1, len(ids) + 1):
        if j < len(ids) and classes[j] == classes[start]:
            continue
        run, cls = ids[start:j], classes[start]
        if cls in (PADDING, PADDING_SUPERVISED) and len(run) > 1 and len(set(run)) == 1:
            out.append((cls, f"{tok.tokens(run[:1])[0]}×{len(run)}"))
        else:
            out.append((cls, tok.decode(run)))
        start = j
    return out


def _row_summary(df: pl.DataFrame, i: int, cols: list[str], per_column: int = 60) -> str:
    """``col=value, ...`` of row ``i`` (each value shown with :func:`show_value`, at most
    ``per_column`` characters; the whole text at most ``max(200, 4 * per_column)`` characters)."""
    cols = [c for c in cols if c in df.columns]
    if not cols:
        return ""
    parts = []
    for c in cols:
        v = df[c][i]
        parts.append(f"{c}={show_value(v.to_list() if isinstance(v, pl.Series) else v, per_column)}")
    text = ", ".join(parts)
    limit = max(200, 4 * per_column)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def inspect_shards(paths: list[str], cfg: Config, *, checks: list[str] | None = None,
                   rows: list[int] | None = None, limit: int = 20,
                   tokenizer: TokenizerView | None = None, export: bool = False) -> list[ShardInspection]:
    """Inspect the shards under ``paths``: every failing row per check, and the first ones with values.

    Args:
        paths: shard files, folders (searched recursively; e.g. a Hugging Face ``save_to_disk``
            split folder) or globs, as ``datacheck audit`` takes them.
        cfg: the validated config (roles and facts such as ``vocab_size``); the facts it leaves
            unset are taken from ``[tokens] tokenizer`` as the audit takes them
            (:func:`datacheck.derive.tokenizer.with_tokenizer_facts`).
        checks: only these check IDs (None: every check).
        rows: show these 0-based rows (with the checks they fail) instead of the failing ones.
        limit: at most this many rows shown per check key (default 20).
        tokenizer: shows ``input_ids`` (else the first text column) as tokens; when ``[tokens]
            vocab_size`` is not set (in the config, nor by ``[tokens] tokenizer``), the tokenizer's
            vocabulary size is used.
        export: the rows will be exported (:func:`export_rows`): the first row of each duplicate is
            learnt for up to :data:`MAX_EXAMPLE_ROWS` copies per check (``ShardInspection.repeats``),
            not only for those shown.

    Returns:
        One :class:`ShardInspection` per shard, in path order. An unreadable shard is returned
        with ``unreadable`` set to the reason (never raised).

    Raises:
        UsageError: a path does not exist, no shard was found, an unknown or dataset-level
            ``--check`` ID (decided across shards: ``datacheck audit`` reports it), ``limit < 1``,
            or a row of ``rows`` is past the last row of every readable shard (the message names
            each file and its row count; a row only some shards have is a note on the others);
            ``[tokens] tokenizer`` cannot be loaded, or its count exceeds ``[tokens] vocab_size``
            (ConfigError).
    """
    if limit < 1:
        raise UsageError(f"--limit must be at least 1, got {limit}")
    wanted = _check_ids(checks)
    cfg, notes = _with_facts(with_tokenizer_facts(cfg), limit, tokenizer, rows, export)  # [tokens] tokenizer's facts first
    if cfg.tokenizer_facts is not None:
        notes.insert(0, describe_tokenizer_facts(cfg.tokenizer_facts))
    disc = discover([str(p) for p in paths], cfg.dataset.format)
    cfg = with_declared_classes(cfg, disc)  # a ClassLabel's class count as [labels] num_classes, as the audit takes it
    if (label_note := describe_label_facts(cfg.label_facts)):
        notes.append(label_note)
    out = [_inspect_one(ds, cfg, wanted, rows, limit, tokenizer, notes) for ds in disc.shards]
    _rows_exist(rows, out)
    return out


def _rows_exist(rows: list[int] | None, inspections: list[ShardInspection]) -> None:
    """Refuse ``--rows`` that no readable shard has.

    Raises:
        UsageError: a row of ``rows`` is at or past the row count of every readable shard (the
            message names the rows, each file and its row count).
    """
    read = [i for i in inspections if i.rows is not None]
    if not rows or not read:
        return
    most = max(i.rows or 0 for i in read)
    missing = sorted({r for r in rows if r >= most})
    if not missing:
        return
    shown = ",".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
    sizes = "; ".join(f"{i.shard.rel} has {i.rows:,} row(s)" + (f" (0..{i.rows - 1})" if i.rows else "")
                      for i in read[:5]) + (f"; {len(read) - 5} more shard(s)" if len(read) > 5 else "")
    raise UsageError(f"--rows {shown}: past the end: {sizes}. Rows are 0-based per shard: give rows below "
                     f"{most:,}")


# --------------------------------------------------------------------------------------------- export
def export_rows(inspections: list[ShardInspection], out: str | Path, cfg: Config,
                rows: list[int] | None = None) -> tuple[Path | None, int]:
    """Write the offending rows (or the ``rows`` given) of each shard to ``out``, for replay.

    Each exported row holds every data column as read, plus ``_datacheck_row`` (0-based row index,
    int64), ``_datacheck_line`` (1-based line for JSONL/CSV, else null), ``_datacheck_shard`` (path
    relative to the inspected root), ``_datacheck_shard_hash`` (``xxh3-128:…`` of the shard's bytes,
    so the replay can prove it reads the same data) and ``_datacheck_checks`` (list of the check
    keys the row fails, ``"check"`` or ``"check:column"``; empty for a chosen row that passes).
    Without ``rows``, the row each exported duplicate repeats (``ShardInspection.repeats``: the first
    row with its content, e.g. of ``dup.exact_in_shard``) is exported too, with the checks it fails
    (none when it is only the first copy), so the export audited alone replays the duplicate.
    Shards with different columns are combined with missing columns as null.

    A parquet export keeps what the shards' own files declare (:func:`~datacheck.derive.classlabel.as_declared`): each data column
    the type the parquet or Arrow shard's file gives it (``string``, not polars' ``large_string``;
    ``int16``), but for a column the audit reads clipped to Int64 (wider than 64 bits), and the
    schema metadata (``datasets``' ``huggingface`` features: a ``ClassLabel``'s names, so an audit of
    the export alone knows the classes; a ``save_to_disk`` split's ``dataset_info.json`` features when
    its file holds none). A JSONL export holds the values only.

    Returns:
        (the written path, rows written); (None, 0) when there was nothing to write (no file is made).

    Raises:
        UsageError: ``out`` has an extension other than .parquet/.jsonl or cannot be written, or
            rows of different shards cannot be combined (same column, incompatible types).
    """
    frames = []
    sources: list[DeclaredSource] = []
    for ins in inspections:
        if ins.rows is None:
            continue
        failing = ins.rows_failing()
        if rows is not None:
            sel = [r for r in rows if r < ins.rows]
        else:  # a duplicate goes with the row it repeats: alone it is no duplicate
            sel = sorted(set(failing) | {first for key, pairs in ins.repeats.items() for copy, first in pairs.items()
                                         if copy in failing})
        if not sel:
            continue
        data = open_for_checks(ins.shard, cfg)  # the rows with the dtypes the audit judged
        df = (data.lf.with_row_index("_datacheck_row").filter(pl.col("_datacheck_row").is_in(sel)).collect())
        got = df["_datacheck_row"].to_list()
        lines = data.lines_of(got)
        df = df.with_columns(
            pl.col("_datacheck_row").cast(pl.Int64),
            pl.Series("_datacheck_line", lines if lines else [None] * len(got), dtype=pl.Int64),
            pl.lit(ins.shard.rel, dtype=pl.String).alias("_datacheck_shard"),
            pl.lit(ins.content_hash, dtype=pl.String).alias("_datacheck_shard_hash"),
            pl.Series("_datacheck_checks", [failing.get(r, []) for r in got], dtype=pl.List(pl.String)),
        )
        data_cols = [c for c in df.columns if c not in EXPORT_COLUMNS]
        frames.append(df.select([*EXPORT_COLUMNS, *data_cols]))
        sources.append(declared_source(ins.shard, data.clipped))
    if not frames:
        return None, 0
    try:
        df = pl.concat(frames, how="diagonal_relaxed")
    except Exception as exc:
        raise UsageError(f"--export: the shards' rows cannot go into one file ({str(exc).splitlines()[0]}); "
                         "export one shard at a time") from None
    table = as_declared(df, sources)
    return (write_frame_atomic(df, out, (lambda f: pq.write_table(table, f)) if table is not None else None),
            df.height)
