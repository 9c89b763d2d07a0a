"""WebDataset tar shards: members grouped into samples by key, decoded by extension.

Read with Python's ``tarfile`` (the maintained reader of the container). The grouping follows
WebDataset's own rule (``webdataset/tariterators.py``: ``base_plus_ext`` and ``group_by_keys``):
a member ``dir/name.ext1.ext2`` has key ``dir/name`` (up to the first dot of the file name) and
extension ``ext1.ext2``; consecutive members with one key form one sample; names without a dot and
names starting with ``__`` or a dot are skipped. The ``webdataset`` package itself is not imported:
its ``__init__`` imports torch when it is installed, and the rule above is all datacheck needs.

Columns: ``__key__`` (String) and one column per extension seen, decoded by WebDataset's default
handlers: ``txt``/``text`` (UTF-8 String), ``json``/``jsn`` (the JSON text, String), ``cls``/``cls2``/
``index``/``inx``/``id`` (Int64); a trailing ``.gz`` is gunzipped first; any other extension is Binary.
A sample lacking an extension that others have holds null there.

Findings: a member whose bytes do not decode under its extension (bad gzip, invalid UTF-8, bad JSON,
a non-integer class), or a key whose members are not consecutive (WebDataset then yields it as two
samples), or one extension twice in a sample (WebDataset raises): ``decode.bad_record`` naming the
sample and member; the other samples are still audited. A file that is not a tar, or a tar cut short,
raises :class:`~datacheck.formats.base.FormatError` (``decode.unreadable``).
"""
from __future__ import annotations

import gzip
import json
import re
import tarfile
from pathlib import Path
from typing import Any

import polars as pl

from datacheck.formats.base import Format, FormatError, read_whole
from datacheck.model.findings import Example, Finding

__all__ = ["WDS_SUFFIXES", "split_key", "read_webdataset", "FORMAT"]

#: file name endings of WebDataset shards
WDS_SUFFIXES = (".tar", ".tar.gz", ".tgz")
_KEY = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")  # webdataset.tariterators.base_plus_ext
_TEXT = {"txt", "text"}
_JSON = {"json", "jsn"}
_INT = {"cls", "cls2", "index", "inx", "id"}


def split_key(name: str) -> tuple[str, str] | None:
    """(key, extension) of a member name by WebDataset's rule, or None when it has no extension."""
    m = _KEY.match(name)
    return (m.group(1), m.group(2)) if m else None


def _kind(ext: str) -> str:
    base = ext[:-3] if ext.endswith(".gz") else ext
    last = base.rsplit(".", 1)[-1].lower()
    return "text" if last in _TEXT else "json" if last in _JSON else "int" if last in _INT else "binary"


def _decode(ext: str, b: bytes) -> Any:
    if ext.endswith(".gz"):
        b = gzip.decompress(b)
    kind = _kind(ext)
    if kind == "text":
        return b.decode("utf-8")
    if kind == "json":
        text = b.decode("utf-8")
        json.loads(text)
        return text
    if kind == "int":
        return int(b.decode("utf-8").strip())
    return b


def read_webdataset(path: Path, max_examples: int) -> tuple[pl.DataFrame, list[Finding]]:
    """Read one WebDataset tar shard: one row per sample.

    Returns:
        (frame, findings): ``decode.bad_record`` (error) for members that do not decode, keys split
        over non-consecutive members, or an extension repeated in a sample.

    Raises:
        FormatError: not a tar file, or the tar is truncated.
    """
    samples: list[dict[str, Any]] = []
    bad: list[tuple[int, str]] = []
    seen_keys: dict[str, int] = {}
    try:
        with tarfile.open(path, mode="r:*") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                parts = split_key(member.name)
                base = member.name.rsplit("/", 1)[-1]
                if parts is None or base.startswith("__") or base.startswith("."):
                    continue
                key, ext = parts
                f = tar.extractfile(member)
                raw = f.read() if f is not None else b""
                if not samples or samples[-1]["__key__"] != key:
                    if key in seen_keys:
                        bad.append((len(samples), f"key {key!r} resumes after other samples (first at sample "
                                                  f"{seen_keys[key]}): WebDataset yields it as two samples"))
                    seen_keys.setdefault(key, len(samples))
                    samples.append({"__key__": key})
                sample = samples[-1]
                if ext in sample:
                    bad.append((len(samples) - 1, f"{member.name}: extension {ext!r} twice in sample {key!r}"))
                    continue
                try:
                    sample[ext] = _decode(ext, raw)
                except (OSError, EOFError, ValueError, UnicodeDecodeError) as exc:
                    sample[ext] = None
                    bad.append((len(samples) - 1, f"{member.name}: does not decode as .{ext}: {exc}"))
            end = tar.offset
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise FormatError(f"not a readable tar file ({exc}); a WebDataset shard is a tar archive, re-create or "
                          "re-download it") from None
    if path.name.lower().endswith(".tar"):
        # tarfile stops quietly at a header cut in half; a complete archive ends with two zero blocks
        with open(path, "rb") as f:
            f.seek(end)
            marker = f.read(1024)
        if len(marker) < 1024 or marker.strip(b"\0"):
            raise FormatError(f"truncated tar: no end-of-archive marker after byte {end} ({len(samples)} complete "
                              "sample(s) before it); a cut download or write, re-create or re-download it")
    exts = sorted({k for s in samples for k in s if k != "__key__"})
    cols: dict[str, pl.Series] = {"__key__": pl.Series("__key__", [s["__key__"] for s in samples], dtype=pl.String)}
    for ext in exts:
        kind = _kind(ext)
        dtype = pl.String if kind in ("text", "json") else pl.Int64 if kind == "int" else pl.Binary
        cols[ext] = pl.Series(ext, [s.get(ext) for s in samples], dtype=dtype)
    findings = []
    if bad:
        bad.sort()
        findings.append(Finding(
            check="decode.bad_record", severity="error", count=len(bad), ratio=len(bad) / max(1, len(samples)),
            rows=tuple(sorted({r for r, _ in bad})[:max_examples]),
            examples=tuple(Example(row=r, value=msg) for r, msg in bad[:max_examples]),
            message=(f"{len(bad)} tar member(s) break the WebDataset sample rules (first: sample {bad[0][0]}, {bad[0][1]}); "
                     "the other samples were audited"),
            rows_truncated=len(bad) > max_examples,
        ))
    return pl.DataFrame(cols), findings


FORMAT = Format(names=("webdataset",), open=read_whole(lambda path, opts: read_webdataset(path, opts.max_examples)), extensions=tuple((e, "webdataset") for e in WDS_SUFFIXES),
                refusals={"webdataset": "its writer owns the layout (a sample is the tar members sharing a "
                                        "key); rebuild it with webdataset's TarWriter"})
