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

Findings: a text member (``txt``/``text``) that is not UTF-8 is ``decode.invalid_utf8`` naming the
sample, the member, the byte and its offset (the text read with replacement characters, as the line
formats read an invalid line); a member whose bytes do not decode under its extension (bad gzip,
invalid UTF-8 in JSON or a class, bad JSON, a non-integer class), or a key whose members are not consecutive (WebDataset then yields it as two
samples), or one extension twice in a sample (WebDataset raises): ``decode.bad_record`` naming the
sample and member; the other samples are still audited. A member that does not decode or is not read is
a null cell (never ``""``) recorded in ``ShardData.retyped`` (:func:`read_webdataset_cells`), so
``empty.text`` does not count it again. A file that is not a tar, a tar cut short
(no end-of-archive marker), or a compressed tar (gzip, bz2 or xz, told by the bytes as webdataset's
``r|*`` does, whatever the name) whose stream is cut before its end-of-stream marker or has a bad
checksum raises :class:`~datacheck.formats.base.FormatError` (``decode.unreadable``).
"""
from __future__ import annotations

import gzip
import io
import re
import tarfile
import zlib
from pathlib import Path
from typing import Any

import polars as pl

from datacheck.formats.base import Format, FormatError, Nulled, ReadOptions, read_whole
from datacheck.formats.findings import decode_utf8, utf8_rows_finding
from datacheck.io import safejson
from datacheck.io.bounded import NotRegular, human_bytes, open_regular
from datacheck.model.config import MAX_FILE_BYTES, MAX_MEMBER_BYTES, MAX_RECORD_BYTES
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


_INT64 = (-(2**63), 2**63 - 1)


def _inflate(ext: str, b: bytes, cap: int) -> bytes:
    """A member's bytes; a ``.gz`` member inflated as a stream to at most ``cap`` bytes. Raises
    ``ValueError`` (and ``OSError``/``EOFError`` for bad gzip) when it cannot be."""
    if ext.endswith(".gz"):
        with gzip.GzipFile(fileobj=io.BytesIO(b)) as g:
            b = g.read(cap + 1)
        if len(b) > cap:
            raise ValueError(f"inflates past {human_bytes(cap)} ([dataset] max_member_bytes)")
    return b


def _decode(ext: str, b: bytes, cap: int) -> Any:
    """The value of a member of extension ``ext`` (:func:`read_webdataset` reads a text member itself,
    with replacement characters for invalid UTF-8). Raises
    ``ValueError`` (and ``OSError``/``EOFError`` for bad gzip) on a value that does not decode."""
    b = _inflate(ext, b, cap)
    kind = _kind(ext)
    if kind == "text":
        return b.decode("utf-8")
    if kind == "json":
        text = b.decode("utf-8")
        safejson.loads(b)
        return text
    if kind == "int":
        text = b.decode("utf-8").strip()
        if len(text) > 20:
            raise ValueError(f"a class of {len(text)} characters is not an integer of 64 bits")
        v = int(text)
        if not _INT64[0] <= v <= _INT64[1]:
            raise ValueError(f"{v} is beyond a 64-bit integer")
        return v
    return b


def _limit(opts: ReadOptions, key: str, default: int) -> int:
    return int(getattr(opts.dataset, key, None) or default)


def _shown(name: str) -> str:
    """A member name as a report can show it (undecodable bytes as ``\\xff``)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _check_compressed_end(f: Any, end: int, n_samples: int, file_cap: int) -> None:
    """Reads the inflated stream ``f`` of a compressed tar from the end of its last member (``end``)
    to the end of the stream: the end-of-archive marker (two zero blocks) must follow, and the stream
    must end at its end-of-stream marker with a matching checksum (gzip's CRC32 and length, bz2's
    and xz's own), which is only checked once the decompressor reads it. The inflated bytes after
    the marker (a tar writer's zero padding) count against ``file_cap``.

    Raises:
        FormatError: no end-of-archive marker, a stream cut before its end-of-stream marker or with
            a bad checksum, or more than ``file_cap`` inflated bytes after the marker.
    """
    try:
        f.seek(end)
        marker = f.read(1024)
        if len(marker) < 1024 or marker.strip(b"\0"):
            raise FormatError(f"truncated tar: no end-of-archive marker after byte {end} of the inflated data "
                              f"({n_samples} complete sample(s) before it); a cut download or write, re-create "
                              "or re-download it")
        left = file_cap
        while b := f.read(min(1 << 20, left + 1)):
            left -= len(b)
            if left < 0:
                raise FormatError(f"the compressed tar inflates past {human_bytes(file_cap)} of bytes after its "
                                  "end-of-archive marker ([dataset] max_file_bytes); not read")
    except (EOFError, OSError, zlib.error, ValueError) as exc:
        if isinstance(exc, OSError) and exc.errno is not None:
            raise
        why = (str(exc).splitlines() or [type(exc).__name__])[0].rstrip(": ")
        raise FormatError(f"truncated or corrupt compressed tar ({why[:200]}): the stream does not end at its "
                          f"end-of-stream marker with a matching checksum ({n_samples} sample(s) read before "
                          "it); a cut download or write, re-create or re-download it") from None


def read_webdataset_cells(path: Path, opts: ReadOptions) -> tuple[pl.DataFrame, list[Finding], Nulled]:
    """Read one WebDataset tar shard: one row per sample.

    Bounds (``[dataset]`` keys): a member over ``max_member_bytes`` (its header's size, sparse and pax
    sizes included, checked before a byte of it is read; a ``.gz`` member inflated past it) and a
    member that would take its sample over ``max_record_bytes`` are ``decode.bad_record`` findings
    naming the member, never read; members adding up past ``max_file_bytes`` stop the read
    (``decode.unreadable``). A member name that is not UTF-8 is a ``decode.bad_record`` naming it
    (its bytes escaped).

    Returns:
        (frame, findings): ``decode.bad_record`` (error) for members that do not decode, keys split
        over non-consecutive members, an extension repeated in a sample, or a bound passed.

    Raises:
        FormatError: not a tar file, the tar is truncated (for ``.tar.gz``/``.tgz``: also a compressed
            stream cut before its end-of-stream marker or with a bad checksum, :func:`_check_compressed_end`),
            a member declares more bytes than the file holds, or the members pass ``max_file_bytes``.
    """
    member_cap = _limit(opts, "max_member_bytes", MAX_MEMBER_BYTES)
    record_cap = _limit(opts, "max_record_bytes", MAX_RECORD_BYTES)
    file_cap = _limit(opts, "max_file_bytes", MAX_FILE_BYTES)
    samples: list[dict[str, Any]] = []
    sizes: list[int] = []
    bad: list[tuple[int, str]] = []
    nulled: Nulled = {}  # the cells read as null for a decode.bad_record
    bad_utf8: list[tuple[int, str, int, bytes]] = []
    seen_keys: dict[str, int] = {}
    plain = True  # an uncompressed tar; set from what tarfile opened (a .tar may hold a gzip stream, as webdataset reads it)
    total = 0
    try:
        raw = open_regular(path)
    except NotRegular as exc:
        raise FormatError(exc.reason) from None
    except OSError as exc:
        raise FormatError(f"cannot read file: {exc.strerror or exc}") from None
    try:
        file_size = raw.seek(0, 2)
        raw.seek(0)
        with raw, tarfile.open(fileobj=raw, mode="r:*", encoding="utf-8", errors="surrogateescape") as tar:
            plain = tar.fileobj is raw  # "r:*" wraps a gzip, bz2 or xz stream whatever the name says
            for member in tar:
                if not member.isfile():
                    continue
                shown = _shown(member.name)
                if plain and member.offset_data + member.size > file_size and not member.issparse():
                    raise FormatError(f"member '{shown}' declares {member.size} bytes at byte {member.offset_data} "
                                      f"but the file holds {file_size}: a corrupt or hostile header")
                parts = split_key(member.name)
                base = member.name.rsplit("/", 1)[-1]
                if parts is None or base.startswith("__") or base.startswith("."):
                    continue
                key, ext = parts
                if not samples or samples[-1]["__key__"] != key:
                    if key in seen_keys:
                        bad.append((len(samples), f"key {_shown(key)!r} resumes after other samples (first at "
                                                  f"sample {seen_keys[key]}): WebDataset yields it as two samples"))
                    seen_keys.setdefault(key, len(samples))
                    samples.append({"__key__": key})
                    sizes.append(0)
                row = len(samples) - 1
                sample = samples[-1]
                if shown != member.name:
                    bad.append((row, f"member '{shown}': its name is not UTF-8; the member was not read"))
                    continue
                if member.size > member_cap:
                    nulled.setdefault(ext, []).append(row)
                    bad.append((row, f"member '{shown}': {member.size} bytes, over the limit of "
                                     f"{human_bytes(member_cap)} ([dataset] max_member_bytes); not read"))
                    continue
                if sizes[row] + member.size > record_cap:
                    nulled.setdefault(ext, []).append(row)
                    bad.append((row, f"member '{shown}': takes sample {key!r} to {sizes[row] + member.size} bytes, "
                                     f"over the limit of {human_bytes(record_cap)} ([dataset] max_record_bytes); "
                                     "not read"))
                    continue
                total += member.size
                if total > file_cap:
                    raise FormatError(f"the members up to '{shown}' add up to {total} bytes, over the limit of "
                                      f"{human_bytes(file_cap)} ([dataset] max_file_bytes)")
                f = tar.extractfile(member)
                data = f.read(member.size) if f is not None else b""
                sizes[row] += len(data)
                if ext in sample:
                    bad.append((row, f"{shown}: extension {ext!r} twice in sample {key!r}"))
                    continue
                try:
                    if _kind(ext) == "text":  # invalid UTF-8: decode.invalid_utf8, the text read with U+FFFD
                        raw_text = _inflate(ext, data, member_cap)
                        sample[ext], off = decode_utf8(raw_text)
                        if off is not None:
                            bad_utf8.append((row, f"member '{shown}'", off, raw_text))
                    else:
                        sample[ext] = _decode(ext, data, member_cap)
                except (OSError, EOFError, ValueError, UnicodeDecodeError, zlib.error) as exc:
                    sample[ext] = None
                    nulled.setdefault(ext, []).append(row)
                    bad.append((row, f"{shown}: does not decode as .{ext}: {str(exc)[:200]}"))
            end = tar.offset
            if not plain:
                _check_compressed_end(tar.fileobj, end, len(samples), file_cap)
    except (tarfile.TarError, EOFError, OSError, UnicodeError, ValueError, zlib.error) as exc:
        why = (str(exc).splitlines() or [type(exc).__name__])[0].rstrip(": ")
        if why.startswith("file could not be opened successfully"):  # tarfile's "r:*" tried every method
            why = "no tar header at its start, and not a gzip, bz2 or xz stream either"
        raise FormatError(f"not a readable tar file ({why[:200]}); a WebDataset shard is a tar archive, "
                          "re-create or re-download it") from None
    if plain:
        # tarfile stops quietly at a header cut in half; a complete archive ends with two zero blocks
        with open(path, "rb") as fh:
            fh.seek(end)
            marker = fh.read(1024)
        if len(marker) < 1024 or marker.strip(b"\0"):
            raise FormatError(f"truncated tar: no end-of-archive marker after byte {end} ({len(samples)} complete "
                              "sample(s) before it); a cut download or write, re-create or re-download it")
    for s_ in samples:
        s_["__key__"] = _shown(s_["__key__"])
    exts = sorted({k for s in samples for k in s if k != "__key__"})
    cols: dict[str, pl.Series] = {"__key__": pl.Series("__key__", [s["__key__"] for s in samples], dtype=pl.String)}
    for ext in exts:
        kind = _kind(ext)
        dtype = pl.String if kind in ("text", "json") else pl.Int64 if kind == "int" else pl.Binary
        cols[ext] = pl.Series(ext, [s.get(ext) for s in samples], dtype=dtype)
    findings = []
    max_examples = opts.max_examples
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
    if bad_utf8:
        findings.append(utf8_rows_finding(bad_utf8, len(samples), max_examples, "WebDataset sample(s)"))
    return pl.DataFrame(cols), findings, nulled


def read_webdataset(path: Path, opts: ReadOptions) -> tuple[pl.DataFrame, list[Finding]]:
    """One WebDataset shard read whole: the frame and its findings of :func:`read_webdataset_cells`."""
    df, findings, _ = read_webdataset_cells(path, opts)
    return df, findings


FORMAT = Format(names=("webdataset",), open=read_whole(read_webdataset_cells), extensions=tuple((e, "webdataset") for e in WDS_SUFFIXES),
                refusals={"webdataset": "its writer owns the layout (a sample is the tar members sharing a "
                                        "key); rebuild it with webdataset's TarWriter"})
