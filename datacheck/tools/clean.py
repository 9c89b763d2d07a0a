"""``datacheck clean``: a cleaned copy of shards without the rows that fail chosen checks.

Guarantees:

- The originals are never modified: shards are only read.
- Everything is written into a temporary folder beside ``out`` and renamed to ``out`` at the end,
  so ``out`` either does not exist or is complete. ``out`` must not exist yet (or be an empty
  folder) and must not be the input folder, inside it, or contain it.
- Kept rows + quarantined rows == input rows, exactly: before the rename, both are read back from
  the written files and their per-row content hashes are compared with the input's, row by row
  (an :class:`~datacheck.model.errors.InternalError` otherwise, and nothing is renamed into place).

Layout of ``out``::

    OUT/<shard path relative to the input root>   cleaned shard, same format as the input
    OUT/.quarantine/<same relative path>           the dropped rows, same format, plus
                                                  _datacheck_row, _datacheck_line, _datacheck_shard,
                                                  _datacheck_checks (reasons), _datacheck_row_hash;
                                                  only for shards that lost rows
    OUT/index.json                                 data index of the cleaned shards
                                                  (:mod:`datacheck.io.dataindex` layout, as
                                                  ``datacheck index build`` writes it)
    OUT/<split>/state.json, dataset_info.json      Hugging Face ``save_to_disk`` metadata, updated
    OUT/dataset_dict.json                          to the cleaned files and row counts, so that
                                                  ``load_from_disk(OUT)`` loads the cleaned copy

The quarantine sits in a dot-folder so that ``datacheck audit OUT`` audits the cleaned shards only
(discovery skips dot-folders) and ``index.json`` is metadata discovery ignores.

Row units by format: parquet and Arrow (IPC file or stream) rows are read and written with
pyarrow (schema and its metadata, e.g. Hugging Face features, are kept); JSONL records are copied
as their original line bytes; CSV/TSV records are re-written with the same separator and quote
character. JSONL/CSV copies keep the input's line break (CRLF stays CRLF). JSONL/CSV records
that do not parse (``decode.bad_record``) are not rows: they are
kept as they were unless ``decode.bad_record`` is dropped (the default), and then quarantined
with their raw text (``_datacheck_raw``). Blank lines are not copied. A quarantined JSONL/CSV
record that is not valid UTF-8 is stored decoded with replacement characters (U+FFFD), and
its content hash is that of the record as decoded (a record that does not parse: of its bytes).

Row content hash (``"xxh3-128:<32 hex>"``): datacheck's one row encoding
(:func:`datacheck.io.rowhash.row_hash_series`, the same as the cross-shard duplicate checks) over
every column in order. Parquet/Arrow: the table's columns; JSONL: the records parsed as the reader
parses them, with the input's dtypes; CSV: the record's fields as strings. A record that does not
parse: the XXH3-128 of its raw line bytes (``datacheck.io.hashing.hash_bytes``). JSONL/CSV records
are split by :mod:`datacheck.formats.records` (the readers' own record reader); the Hugging Face
``state.json`` is parsed by :mod:`datacheck.io.hfmeta`.
"""
from __future__ import annotations

import contextlib
import csv
import glob
import gzip
import io
import json
import os
import re
import shutil
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from datacheck.engine.shard import audit_file
from datacheck.formats.arrowtypes import write_table
from datacheck.formats.discovery import discover
from datacheck.formats.records import RecordLayoutError, RecordSplit, csv_records, jsonl_records, strip_bom
from datacheck.formats.registry import REWRITABLE, read_table, rewrite_mode
from datacheck.io.dataindex import IndexEntry, build_index, write_index
from datacheck.io.discover import DiscoveredShard
from datacheck.io.hashing import hash_bytes, hash_file
from datacheck.io.hfmeta import read_state
from datacheck.io.outputs import make_temp_folder, os_error_message
from datacheck.io.rowhash import row_hash_series
from datacheck.io.safejson import JsonInputError, read_json_file
from datacheck.io.shardbytes import read_bytes
from datacheck.io.stores import is_url
from datacheck.model import catalog
from datacheck.model.config import Config
from datacheck.model.errors import DatacheckError, InternalError, UsageError

__all__ = ["CleanResult", "ShardClean", "clean", "default_drop", "row_hashes", "QUARANTINE_DIR",
           "META_COLUMNS", "INDEX_NAME"]

#: Folder (inside ``out``) of the quarantine files; a dot-folder, so discovery skips it.
QUARANTINE_DIR = ".quarantine"
#: Name of the data index written into ``out``.
INDEX_NAME = "index.json"
#: Columns added to quarantined rows.
META_COLUMNS = ("_datacheck_row", "_datacheck_line", "_datacheck_shard", "_datacheck_checks", "_datacheck_row_hash")
_RAW = "_datacheck_raw"  # raw text of a quarantined JSONL/CSV record that does not parse


@dataclass
class ShardClean:
    """The outcome for one input shard.

    Attributes:
        path: shard path relative to the input root (also its path inside ``out``).
        format: ``parquet`` | ``arrow`` | ``jsonl`` | ``csv`` | ``tsv``.
        input_rows: rows (plus unparseable records) read from the input.
        kept: rows (and records) written to the cleaned shard.
        dropped: rows (and records) written to the quarantine, by reason: {check ID: count}
            (a row failing two checks counts under both).
        quarantined: rows (and records) quarantined in total.
        unreadable: why the shard could not be read (it is then not copied), else None.
        blank_lines: blank lines of a JSONL/CSV input (not copied).
    """

    path: str
    format: str
    input_rows: int = 0
    kept: int = 0
    quarantined: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    unreadable: str | None = None
    blank_lines: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "format": self.format, "input_rows": self.input_rows, "kept": self.kept,
                "quarantined": self.quarantined, "dropped": dict(sorted(self.dropped.items())),
                "unreadable": self.unreadable, "blank_lines": self.blank_lines}


@dataclass
class CleanResult:
    """What :func:`clean` wrote. ``index`` is the data index of the cleaned shards; ``metadata`` the
    Hugging Face ``save_to_disk`` files written (``state.json``, ``dataset_info.json``,
    ``dataset_dict.json``; relative POSIX paths inside ``out``)."""

    out: Path
    quarantine: Path
    index_path: Path
    drop: tuple[str, ...]
    shards: list[ShardClean]
    index: dict[str, Any]
    metadata: tuple[str, ...] = ()

    @property
    def kept(self) -> int:
        return sum(s.kept for s in self.shards)

    @property
    def quarantined(self) -> int:
        return sum(s.quarantined for s in self.shards)

    @property
    def input_rows(self) -> int:
        return sum(s.input_rows for s in self.shards)

    def to_dict(self) -> dict[str, Any]:
        return {"out": str(self.out), "quarantine": str(self.quarantine), "index": str(self.index_path),
                "index_hash": self.index["index_hash"], "drop": list(self.drop),
                "input_rows": self.input_rows, "kept": self.kept, "quarantined": self.quarantined,
                "shards": [s.to_dict() for s in self.shards], "metadata": list(self.metadata)}


# --------------------------------------------------------------------------------------------- row hashes
def _hash_strings(df: pl.DataFrame) -> list[str]:
    """``"xxh3-128:<32 hex>"`` per row of ``df``: :func:`datacheck.io.rowhash.row_hash_series` over
    all its columns in order (a frame without columns: the hash of no bytes, per row)."""
    if df.width == 0:
        return [hash_bytes(b"")] * df.height
    return [f"xxh3-128:{h:032x}" for h in row_hash_series(df.get_columns()).to_list()]


def row_hashes(table: Any) -> list[str]:
    """Per-row content hashes of a pyarrow Table or polars DataFrame (``"xxh3-128:<hex>"``, one per row).

    The encoding is datacheck's one row encoding (:data:`datacheck.io.rowhash.ROW_ENCODING`, see
    :mod:`datacheck.io.rowhash`) over every column in column order: stable across library versions;
    dtypes matter (a float and an int of the same value differ; Int32 and Int64 do not).
    """
    return _hash_strings(table if isinstance(table, pl.DataFrame) else pl.from_arrow(table))


def _jsonl_hashes(texts: list[str], schema: dict[str, pl.DataType] | None) -> tuple[list[str], dict[str, pl.DataType] | None]:
    """Row hashes of JSON object texts parsed as the reader parses them (``pl.read_ndjson``), with
    ``schema`` when given (the input's, so a subset of rows gets the input's dtypes), else inferred
    over every row; returns (hashes, the schema used)."""
    if not texts:
        return [], schema
    data = "\n".join(texts).encode("utf-8")
    df = pl.read_ndjson(data, schema=schema) if schema is not None else pl.read_ndjson(data, infer_schema_length=None)
    return _hash_strings(df), dict(df.schema)


def _csv_hashes(rows: list[list[str]]) -> list[str]:
    """Row hashes of CSV records: their fields as String columns (the text as written, before any
    dtype inference)."""
    if not rows:
        return []
    width = len(rows[0])
    df = pl.DataFrame(rows, schema=[(f"c{i}", pl.String) for i in range(width)], orient="row")
    return _hash_strings(df)


# --------------------------------------------------------------------------------------------- drop set
def default_drop(cfg: Config) -> tuple[str, ...]:
    """The row-level checks (CHECKS.md level ``row``) whose severity is ``error`` after ``[policy]``."""
    out = []
    for cid, info in catalog.CATALOG.items():
        if info.level != "row":
            continue
        entry = cfg.policy.get(cid)
        if entry is not None and entry.ignore:
            continue
        sev = entry.severity if entry is not None and entry.severity is not None else info.severity
        if sev == "error":
            out.append(cid)
    return tuple(sorted(out))


def _drop_ids(drop: list[str] | None, cfg: Config) -> tuple[str, ...]:
    if not drop:
        return default_drop(cfg)
    for cid in drop:
        if not catalog.is_known(cid):
            raise UsageError(f"--drop {cid!r}: unknown check ID (`datacheck checks` lists the IDs)")
        if catalog.info(cid).level != "row":
            rows = ", ".join(c for c, i in catalog.CATALOG.items() if i.level == "row")
            raise UsageError(f"--drop {cid!r}: a {catalog.info(cid).level}-level check names no rows to drop; "
                             f"row-level checks: {rows}")
    return tuple(sorted(set(drop)))


# --------------------------------------------------------------------------------------------- paths
def _inside(a: Path, b: Path) -> bool:
    return a == b or a.is_relative_to(b)


def _check_out(out: Path, inputs: list[Path], root: Path | None) -> None:
    """Refuse ``out`` when it is an input folder, inside one, contains one, or holds files (``root``
    None: the inputs are in an object store, never a local folder)."""
    for src in {*([root] if root is not None else []), *inputs}:
        folder = src if src.is_dir() else src.parent
        if _inside(out, folder) or _inside(folder, out):
            raise UsageError(f"--out {out}: refusing to write into the input folder {folder} (or a folder "
                             "inside it or containing it); choose a folder outside the input data")
    if out.exists():
        if not out.is_dir():
            raise UsageError(f"--out {out}: exists and is not a folder; refusing to overwrite it")
        if any(out.iterdir()):
            raise UsageError(f"--out {out}: the folder is not empty; refusing to write over existing files "
                             "(choose a new folder)")


# --------------------------------------------------------------------------------------------- formats
def _compress(path_name: str, data: bytes) -> bytes:
    name = path_name.lower()
    if name.endswith(".gz"):
        return gzip.compress(data, mtime=0)
    if name.endswith(".zst"):
        import zstandard

        return zstandard.ZstdCompressor().compress(data)
    return data


def _fsync_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


@dataclass
class _Record:
    """One JSONL/CSV record (:class:`datacheck.formats.records.LineRecord`) with its content hash: a row's
    :func:`row_hashes` hash, or for a record that does not parse the hash of its bytes."""

    line: int  # 1-based first line
    raw: bytes  # original bytes (JSONL: the line; CSV: the record's lines)
    text: str  # decoded (lossy for invalid UTF-8)
    value: Any  # JSONL: parsed object; CSV: list of fields; None for a bad record
    row: int | None
    invalid_utf8: bool
    hash: str = ""


def _records(split: RecordSplit, hashes: list[str]) -> list[_Record]:
    """The split's records with hashes: ``hashes`` for the rows (in order), bytes hashes for the rest."""
    it = iter(hashes)
    return [_Record(r.line, r.raw, r.text, r.value, r.row, r.invalid_utf8,
                    next(it) if r.value is not None else hash_bytes(r.raw)) for r in split.records]


def _jsonl_records(raw: bytes, schema: dict[str, pl.DataType] | None = None
                   ) -> tuple[list[_Record], int, dict[str, pl.DataType] | None]:
    """(records, blank lines, row schema) of a JSONL shard, split by :func:`datacheck.formats.records.jsonl_records`."""
    split = jsonl_records(raw)
    hashes, schema = _jsonl_hashes([r.text for r in split.rows], schema)
    return _records(split, hashes), len(split.blank), schema


def _csv_dialect(fmt: str, cfg: Config) -> tuple[str, str | None]:
    sep = cfg.dataset.separator or ("\t" if fmt == "tsv" else ",")
    quote = cfg.dataset.quote_char if cfg.dataset.quote_char else None
    return sep, quote


def _csv_records(raw: bytes, fmt: str, cfg: Config) -> tuple[list[str] | None, list[_Record], int]:
    """(header line fields, records, blank lines) of a CSV/TSV shard, split by
    :func:`datacheck.formats.records.csv_records` (as the reader splits it)."""
    sep, quote = _csv_dialect(fmt, cfg)
    try:
        split = csv_records(raw, sep, quote, cfg.dataset.header, list(cfg.dataset.names) if cfg.dataset.names else None)
    except RecordLayoutError as exc:
        raise InternalError(f"the audit read this CSV but it does not split into records now: {exc}") from None
    return split.header_fields, _records(split, _csv_hashes([r.value for r in split.rows])), len(split.blank)


def _newline(raw: bytes) -> bytes:
    """The line break of a JSONL/CSV file: ``b"\r\n"`` when its first line ends with CRLF, else ``b"\n"``
    (copies keep the input's line endings)."""
    nl = raw.find(b"\n")
    return b"\r\n" if nl > 0 and raw[nl - 1:nl] == b"\r" else b"\n"


def _csv_bytes(header: list[str] | None, rows: list[list[str]], fmt: str, cfg: Config,
               newline: bytes = b"\n") -> bytes:
    sep, quote = _csv_dialect(fmt, cfg)
    buf = io.StringIO()
    w = csv.writer(buf, delimiter=sep, quotechar=quote or '"', lineterminator=newline.decode("ascii"),
                   quoting=csv.QUOTE_MINIMAL if quote else csv.QUOTE_NONE, escapechar=None if quote else "\\")
    if header is not None:
        w.writerow(header)
    w.writerows(rows)
    return buf.getvalue().encode("utf-8")


# --------------------------------------------------------------------------------------------- per shard
def _reasons(failing_rows: dict[str, list[int]], drop: tuple[str, ...]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for key, rows in failing_rows.items():
        if key.split(":", 1)[0] in drop:
            for r in rows:
                out.setdefault(int(r), []).append(key)
    return {r: sorted(v) for r, v in out.items()}


def _count(sc: ShardClean, reasons: list[str]) -> None:
    for cid in sorted({k.split(":", 1)[0] for k in reasons}):
        sc.dropped[cid] = sc.dropped.get(cid, 0) + 1


def _take(table, idx: list[int]):
    """Rows ``idx`` (sorted) of a pyarrow Table, as slices of contiguous runs: works for every
    column type (``take`` has no kernel for e.g. ``string_view``, which polars writes to Arrow IPC)."""
    import pyarrow as pa

    runs: list[tuple[int, int]] = []
    for i in idx:
        if runs and runs[-1][1] == i:
            runs[-1] = (runs[-1][0], i + 1)
        else:
            runs.append((i, i + 1))
    if not runs:
        return table.slice(0, 0)
    return pa.concat_tables([table.slice(a, b - a) for a, b in runs]).combine_chunks()


def _clean_table(ds: DiscoveredShard, reasons: dict[int, list[str]], rows: int, stage: Path, sc: ShardClean) -> None:
    import pyarrow as pa

    table, kind = read_table(ds.source, ds.format)
    if table.num_rows != rows:
        raise InternalError(f"{ds.rel}: pyarrow reads {table.num_rows} rows but the audit read {rows}")
    hashes = row_hashes(table)
    drop_idx = sorted(reasons)
    keep_idx = [i for i in range(rows) if i not in reasons]
    kept = _take(table, keep_idx)
    write_table(kept, stage / ds.rel, kind)
    q = _take(table, drop_idx)
    meta = {
        "_datacheck_row": pa.array(drop_idx, type=pa.int64()),
        "_datacheck_line": pa.array([None] * len(drop_idx), type=pa.int64()),
        "_datacheck_shard": pa.array([ds.rel] * len(drop_idx), type=pa.string()),
        "_datacheck_checks": pa.array([reasons[i] for i in drop_idx], type=pa.list_(pa.string())),
        "_datacheck_row_hash": pa.array([hashes[i] for i in drop_idx], type=pa.string()),
    }
    for name, arr in meta.items():
        q = q.append_column(name, arr)
    if drop_idx:  # a quarantine file only for a shard that lost rows
        write_table(q, stage / QUARANTINE_DIR / ds.rel, kind)
    for i in drop_idx:
        _count(sc, reasons[i])
    sc.input_rows, sc.kept, sc.quarantined = rows, len(keep_idx), len(drop_idx)
    # proof: read back what was written and compare per-row content hashes with the input, in order
    back, _ = read_table(stage / ds.rel, ds.format)
    qback = read_table(stage / QUARANTINE_DIR / ds.rel, ds.format)[0] if drop_idx else q
    got_q = row_hashes(qback.drop_columns(list(META_COLUMNS)))
    _verify(ds.rel, hashes, keep_idx, row_hashes(back), drop_idx, got_q,
            qback.column("_datacheck_row").to_pylist())


def _verify(rel: str, hashes: list[str], keep_idx: list[int], got_kept: list[str], drop_idx: list[int],
            got_q: list[str], q_rows: list[int]) -> None:
    if len(got_kept) + len(got_q) != len(hashes) or sorted(keep_idx + list(q_rows)) != list(range(len(hashes))):
        raise InternalError(f"{rel}: kept {len(got_kept)} + quarantined {len(got_q)} != {len(hashes)} input rows")
    for k, (i, h) in enumerate(zip(keep_idx, got_kept)):
        if hashes[i] != h:
            raise InternalError(f"{rel}: kept row {k} (input row {i}) differs from the input after writing")
    for i, h in zip(q_rows, got_q):
        if hashes[i] != h:
            raise InternalError(f"{rel}: quarantined input row {i} differs from the input after writing")


def _quarantine_obj(rec: _Record, rel: str, reasons: list[str]) -> dict[str, Any]:
    base = dict(rec.value) if isinstance(rec.value, dict) else {_RAW: rec.text}
    base.update({"_datacheck_row": rec.row, "_datacheck_line": rec.line, "_datacheck_shard": rel,
                 "_datacheck_checks": reasons, "_datacheck_row_hash": rec.hash})
    return base


def _record_reasons(rec: _Record, reasons: dict[int, list[str]], drop: tuple[str, ...]) -> list[str]:
    out = list(reasons.get(rec.row, [])) if rec.row is not None else []
    if rec.row is None and "decode.bad_record" in drop:
        out.append("decode.bad_record")
    if rec.invalid_utf8 and "decode.invalid_utf8" in drop:
        out.append("decode.invalid_utf8")
    return sorted(out)


def _clean_lines(ds: DiscoveredShard, cfg: Config, reasons: dict[int, list[str]], rows: int,
                 drop: tuple[str, ...], stage: Path, sc: ShardClean) -> int:
    """Clean one JSONL/CSV shard into ``stage``; returns the rows (parsed records) kept."""
    raw = read_bytes(ds.source)
    schema = None
    if ds.format == "jsonl":
        header = None
        recs, blank, schema = _jsonl_records(raw)
    else:
        header, recs, blank = _csv_records(raw, ds.format, cfg)
    nrows = sum(1 for r in recs if r.row is not None)
    if nrows != rows:
        raise InternalError(f"{ds.rel}: {nrows} records parse here but the audit read {rows} rows")
    kept, quar = [], []
    for rec in recs:
        why = _record_reasons(rec, reasons, drop)
        (quar if why else kept).append((rec, why))
    name = ds.rel
    nl = _newline(raw)
    if ds.format == "jsonl":
        body = b"".join(rec.raw + nl for rec, _ in kept)
        qbody = "".join(json.dumps(_quarantine_obj(rec, ds.rel, why), ensure_ascii=False) + "\n"
                        for rec, why in quar).encode("utf-8")
    else:
        body = _csv_bytes(header, [rec.value if rec.value is not None else rec.text.split(_csv_dialect(ds.format, cfg)[0])
                                   for rec, _ in kept], ds.format, cfg, nl)
        cols = list(header) if header is not None else [f"column_{i + 1}" for i in range(len(
            next((r.value for r in recs if r.value is not None), [])))]
        qheader = [*META_COLUMNS, _RAW, *cols]
        qrows = []
        for rec, why in quar:
            fields = rec.value if rec.value is not None else [""] * len(cols)
            qrows.append(["" if rec.row is None else str(rec.row), str(rec.line), ds.rel, ";".join(why), rec.hash,
                          "" if rec.value is not None else rec.text, *fields])
        qbody = _csv_bytes(qheader, qrows, ds.format, cfg, nl)
    bom = raw[:len(raw) - len(strip_bom(raw)[0])]  # the input's UTF-8 byte order mark (or b""), kept
    _fsync_write(stage / name, _compress(name, bom + body))
    if quar:  # a quarantine file only for a shard that lost rows
        _fsync_write(stage / QUARANTINE_DIR / name, _compress(name, qbody))
    for _rec, why in quar:
        _count(sc, why)
    sc.input_rows, sc.kept, sc.quarantined, sc.blank_lines = len(recs), len(kept), len(quar), blank
    kept_rows = sum(1 for rec, _ in kept if rec.row is not None)
    # proof: read back and compare record hashes with the input, in order
    back = read_bytes(stage / name)
    qback = read_bytes(stage / QUARANTINE_DIR / name) if quar else b""
    if ds.format == "jsonl":
        got, _, _ = _jsonl_records(back, schema)
        lossy = {rec.line for rec, _ in quar if rec.invalid_utf8}
        qgot = []
        qrows: list[tuple[int, str]] = []  # (line, object text without the meta columns)
        for line in qback.decode("utf-8").splitlines():
            obj = json.loads(line)
            meta = {k: obj.pop(k) for k in META_COLUMNS}
            if _RAW in obj:  # a record that does not parse: its raw text (lossy only for invalid UTF-8)
                h = (meta["_datacheck_row_hash"] if meta["_datacheck_line"] in lossy
                     else hash_bytes(obj[_RAW].encode("utf-8")))
                qgot.append((meta["_datacheck_line"], h))
            else:
                qrows.append((meta["_datacheck_line"], json.dumps(obj, ensure_ascii=False)))
        qhashes, _ = _jsonl_hashes([t for _, t in qrows], schema)
        qgot += [(ln, h) for (ln, _), h in zip(qrows, qhashes)]
    else:
        _h, got, _b = _csv_records(back, ds.format, cfg)
        qcfg = cfg.model_copy(update={"dataset": cfg.dataset.model_copy(update={"names": None, "header": True})})
        _qh, qrecs, _qb = _csv_records(qback, ds.format, qcfg)
        raw_of = {rec.line: rec for rec, _ in quar if rec.value is None}
        qgot = []
        qfields: list[tuple[int, list[str]]] = []
        for rec in qrecs:
            v = rec.value
            line, stored, raw_text, fields = int(v[1]), v[4], v[5], v[6:]
            if line in raw_of:  # a record that does not parse: compare its raw text
                ok = raw_of[line].invalid_utf8 or raw_of[line].text == raw_text
                qgot.append((line, stored if ok else hash_bytes(raw_text.encode("utf-8"))))
            else:
                qfields.append((line, fields))
        qgot += [(ln, h) for (ln, _), h in zip(qfields, _csv_hashes([f for _, f in qfields]))]
    want_kept = [rec.hash for rec, _ in kept if rec.row is not None]
    got_kept = [rec.hash for rec in got if rec.row is not None]
    want_q = [(rec.line, rec.hash) for rec, _ in quar]
    if want_kept != got_kept or sorted(want_q) != sorted(qgot) or len(got) != len(kept):
        raise InternalError(f"{ds.rel}: the written records differ from the input (kept {len(kept)}, "
                            f"quarantined {len(quar)} of {len(recs)})")
    return kept_rows


# --------------------------------------------------------------------------------------------- HF metadata
def _json_obj(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, or None when it cannot be read or is not an object."""
    try:
        data = read_json_file(path)
    except (OSError, JsonInputError):
        return None
    return data if isinstance(data, dict) else None


def _json_out(obj: dict[str, Any]) -> bytes:
    """JSON as ``datasets`` writes its metadata: 2-space indent, key order kept, UTF-8."""
    return json.dumps(obj, indent=2, ensure_ascii=False).encode("utf-8")


def _hf_metadata(root: Path, stage: Path, kept_rows: dict[str, int]) -> list[str]:
    """Write the Hugging Face ``save_to_disk`` metadata of the cleaned splits into ``stage``.

    For each folder under ``root`` whose ``state.json`` lists ``_data_files`` (a split saved with
    ``Dataset.save_to_disk``) and of which at least one listed file was written:

    - ``state.json``: as in the input, with ``_data_files`` reduced to the listed files that were
      written (an unreadable shard is not copied, so it is not listed);
    - ``dataset_info.json``: as in the input, with ``splits.<split>.num_examples`` set to the kept
      rows of that split, for every split of the same ``DatasetDict`` that was cleaned here (the
      split is ``state.json`` ``_split``, else the folder name); copied unchanged when it is not a
      JSON object;
    - ``dataset_dict.json`` of the folder holding such splits: copied, its ``splits`` reduced to
      the split folders written.

    Args:
        root: the audited input root (relative shard paths are relative to it).
        stage: the output folder being written.
        kept_rows: {relative shard path: rows written to the cleaned shard}, for every shard written.

    Returns:
        The metadata files written, as POSIX paths relative to ``stage`` (sorted).
    """
    splits: list[tuple[str, Path, dict[str, Any], str]] = []  # (folder rel, input folder, new state, split)
    counts: dict[tuple[str, str], int] = {}  # (parent folder rel, split name) -> kept rows
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        if "state.json" not in filenames:
            continue
        here = Path(dirpath)
        st = read_state(here)
        if st is None:
            continue
        rel = here.relative_to(root).as_posix()
        prefix = "" if rel == "." else rel + "/"
        listed = [(f, name) for f, name in zip(st.files, st.names) if name is not None and prefix + name in kept_rows]
        if not listed:
            continue
        split = st.split or here.name
        parent = Path(rel).parent.as_posix() if rel != "." else ".."
        counts[(parent, split)] = sum(kept_rows[prefix + name] for _f, name in listed)
        splits.append((rel, here, {**st.state, "_data_files": [f for f, _name in listed]}, split))
    written: list[str] = []

    def put(rel_path: str, data: bytes) -> None:
        _fsync_write(stage / rel_path, data)
        written.append(rel_path)

    for rel, here, state, _split in splits:
        prefix = "" if rel == "." else rel + "/"
        put(prefix + "state.json", _json_out(state))
        info_path = here / "dataset_info.json"
        if not info_path.is_file():
            continue
        info = _json_obj(info_path)
        parent = Path(rel).parent.as_posix() if rel != "." else ".."
        if info is not None and isinstance(info.get("splits"), dict):
            info["splits"] = {name: ({**entry, "num_examples": counts[(parent, name)]}
                                     if isinstance(entry, dict) and (parent, name) in counts else entry)
                              for name, entry in info["splits"].items()}
            put(prefix + "dataset_info.json", _json_out(info))
        else:
            put(prefix + "dataset_info.json", info_path.read_bytes())
    parents = {Path(rel).parent.as_posix(): [] for rel, *_ in splits if rel != "."}
    for rel, *_ in splits:
        if rel != ".":
            parents[Path(rel).parent.as_posix()].append(Path(rel).name)
    for parent, names in sorted(parents.items()):
        src = (root / parent / "dataset_dict.json") if parent != "." else root / "dataset_dict.json"
        if not src.is_file():
            continue
        dd = _json_obj(src)
        target = "dataset_dict.json" if parent == "." else f"{parent}/dataset_dict.json"
        keep = dd.get("splits") if dd is not None else None
        if isinstance(keep, list) and all(isinstance(s, str) for s in keep) and not set(keep) <= set(names):
            put(target, _json_out({**dd, "splits": [s for s in keep if s in names]}))
        else:
            put(target, src.read_bytes())
    return sorted(written)


# --------------------------------------------------------------------------------------------- index
def _output_index(folder: Path, shards: list[tuple[str, int]]) -> dict[str, Any]:
    """The data index (``datacheck.io.dataindex`` layout, the same as ``datacheck index build``) of the
    cleaned shards under ``folder``: (relative POSIX path, rows) of each written shard."""

    entries = []
    for rel, rows in sorted(shards):
        chash, size = hash_file(folder / rel)
        entries.append(IndexEntry(path=rel, bytes=size, rows=rows, content_hash=chash))
    return build_index(entries)


# --------------------------------------------------------------------------------------------- clean
def _remove_stale_stages(out: Path) -> None:
    """Remove ``.OUT.tmp-PID-*`` staging folders next to ``out`` left by a killed ``clean`` (the process
    PID is gone); a folder of a live process (a concurrent clean) is left alone."""
    for d in out.parent.glob(f".{glob.escape(out.name)}.tmp-*"):
        m = re.match(rf"^\.{re.escape(out.name)}\.tmp-(\d+)-", d.name)
        if m is None or not d.is_dir() or d.is_symlink():
            continue
        try:
            os.kill(int(m.group(1)), 0)
            continue  # alive
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except (PermissionError, OverflowError, ValueError):
            continue


@contextlib.contextmanager
def _sigterm_as_exit() -> Iterator[None]:
    """While active, SIGTERM raises ``SystemExit(143)`` (128 + SIGTERM, the shell's convention) instead
    of killing the process outright, so the ``except BaseException`` cleanup of :func:`clean` removes
    its temporary output folder, as it does on Ctrl-C. The previous handler is restored on exit.
    Only in the main thread (Python delivers signals there); elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _exit(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, _exit)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


#: the shard formats ``clean`` rewrites (row units: see the module docstring): the registry's
#: rewritable format names (:data:`datacheck.formats.registry.REWRITABLE`)
CLEANABLE_FORMATS = tuple(REWRITABLE)


def _refuse_unwritable_formats(shards: list[DiscoveredShard]) -> None:
    """Refuse (before anything is written) shards whose format ``clean`` cannot rewrite: a JSON array
    file, and the read-only formats (Megatron ``.bin/.idx``, MosaicML MDS, WebDataset tar, litdata
    chunks), whose writers own their layout (offsets, index files, sample keys).

    Raises:
        UsageError: naming up to 5 such shards, their format and the remedy.
    """
    bad = [ds for ds in shards if ds.format not in CLEANABLE_FORMATS]
    if not bad:
        return
    if all(ds.format == "json" for ds in bad):
        raise UsageError(f"{bad[0].rel}: datacheck clean rewrites JSON Lines, CSV, parquet and Arrow shards, not a "
                         "JSON array file; convert it to JSON Lines first (one object per line)")
    names = ", ".join(f"{ds.rel} ({ds.format})" for ds in bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
    raise UsageError(f"datacheck clean rewrites parquet, Arrow, JSON Lines and CSV/TSV shards only; {len(bad)} shard(s) "
                     f"are in a format it reads but cannot write: {names}. Audit them with `datacheck audit`, list "
                     "the failing rows with `datacheck inspect --export rows.parquet`, and rebuild the shards with "
                     "the tool that wrote them (Megatron preprocess_data.py, MosaicML MDSWriter, webdataset's "
                     "TarWriter, litdata optimize); or pass only the cleanable shards to clean")


@_sigterm_as_exit()
def clean(paths: list[str] | str, out: str | Path, cfg: Config, *, drop: list[str] | None = None) -> CleanResult:
    """Write cleaned copies of the shards under ``paths`` into ``out``, quarantining dropped rows.

    Args:
        paths: shard files, folders (recursive) or globs, as ``datacheck audit`` takes them.
        out: the output folder; must not exist yet (or be empty), and must be outside the input
            folder (not inside it, not containing it).
        cfg: the validated config (roles and facts decide which rows fail).
        drop: check IDs whose failing rows are dropped; row-level checks only. Default: every
            row-level check whose severity (after ``[policy]``) is ``error`` (:func:`default_drop`).

    Returns:
        The :class:`CleanResult` (per shard: input rows, kept, quarantined, counts per reason;
        the Hugging Face ``save_to_disk`` metadata files written, see :func:`_hf_metadata`).
        A shard that cannot be read is listed with ``unreadable`` set and not copied.

    Raises:
        UsageError: a shard in a format clean cannot write (:data:`CLEANABLE_FORMATS`; nothing is written);
            unknown or non-row-level ``drop`` ID; ``out`` is inside/contains the input
            folder, is not empty, or is not writable; no shard found.
        InternalError: the written rows do not equal the input (nothing is renamed into place).
        SystemExit: SIGTERM arrived during the run (code 143); as on Ctrl-C (KeyboardInterrupt) the
            temporary output folder is removed and ``out`` is not created.
    """
    if isinstance(paths, (str, Path)):
        paths = [str(paths)]
    drop_ids = _drop_ids(drop, cfg)
    disc = discover([str(p) for p in paths], cfg.dataset.format)
    _refuse_unwritable_formats(disc.shards)
    out = Path(out).resolve()
    _check_out(out, [Path(p).resolve() for p in paths if "*" not in str(p) and not is_url(str(p))],
               None if disc.url_root is not None else disc.root)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_stages(out)
        stage = make_temp_folder(out.parent, f".{out.name}.tmp-{os.getpid()}-")  # 0o777 minus the umask
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot create it: {exc.strerror or exc}") from None
    try:
        results: list[ShardClean] = []
        written: list[tuple[str, int]] = []
        for ds in disc.shards:
            sc = ShardClean(path=ds.rel, format=ds.format)
            results.append(sc)
            res = audit_file(ds, cfg, keep_rows=True)[0]
            if not res.readable:
                sc.unreadable = next((f.details.get("reason") for f in res.findings
                                      if f.check == "decode.unreadable"), None) or "cannot be read"
                continue
            reasons = _reasons(res.failing_rows, drop_ids)
            if rewrite_mode(ds.format) == "table":
                _clean_table(ds, reasons, res.rows or 0, stage, sc)
                written.append((ds.rel, sc.kept))
            else:
                written.append((ds.rel, _clean_lines(ds, cfg, reasons, res.rows or 0, drop_ids, stage, sc)))
        metadata = _hf_metadata(disc.root, stage, dict(written))
        index = _output_index(stage, written)
        write_index(index, stage / INDEX_NAME)
        if out.exists():
            out.rmdir()  # empty (checked above)
        os.replace(stage, out)
    except BaseException as exc:
        shutil.rmtree(stage, ignore_errors=True)
        msg = os_error_message(f"--out {out}", exc) if isinstance(exc, Exception) else None
        if msg is not None and not isinstance(exc, DatacheckError):  # disk full, quota, permission
            raise UsageError(f"{msg} (the cleaned copy was not made; nothing partial is left)") from None
        raise
    return CleanResult(out=out, quarantine=out / QUARANTINE_DIR, index_path=out / INDEX_NAME, drop=drop_ids,
                       shards=results, index=index, metadata=tuple(metadata))
