"""UTF-16 and UTF-32 text given to a line format (CSV/TSV, JSON Lines, a JSON array, plain text):
found from the file's first bytes and refused as a whole, before any record is read.

Excel's "Unicode Text" (a TSV), pandas' ``to_csv(encoding="utf-16")``, PowerShell's ``Out-File`` (5.x)
and Notepad's "Unicode" write UTF-16 with a byte order mark. Read as UTF-8, such a file is no data at
all: every ASCII character is itself and a NUL byte, so the column names, the JSON and every cell come out
as NUL-interleaved garbage, the BOM bytes are "invalid UTF-8" that looks like cp1252, and the rows are
audited as if they were data (bogus ``dup.exact_in_shard`` on the NUL lines, one ``decode.bad_record``
a JSON line). The reference readers load nothing from it: ``datasets.load_dataset("csv" | "json" |
"text")`` and ``pandas.read_csv`` raise ``UnicodeDecodeError`` (``'utf-8' codec can't decode byte 0xff
in position 0``), ``polars.read_csv``/``read_ndjson`` raise ``ComputeError`` (invalid UTF-8); without a
BOM (valid UTF-8 bytes: a NUL is a character) pandas and polars read columns named ``t\\x00e\\x00x\\x00t\\x00``
and ``datasets`` fails on them (``tests/unit/formats/test_wide_text.py`` runs them).

So such a file is ``decode.unreadable`` (:func:`refuse_wide`), naming the encoding and the command
that converts it (``iconv -f UTF-16 -t UTF-8``): not ``decode.invalid_utf8``, whose scope is a row (a
line or field not UTF-8, audited with replacement characters, ``clean`` dropping its lines), when
nothing of the file is a row, and a BOM-less UTF-16 file of ASCII text is valid UTF-8.

Found by (:func:`wide_encoding`, over the first :data:`HEAD_BYTES` bytes, decompressed):

- a byte order mark: ``FF FE 00 00`` UTF-32LE, ``00 00 FE FF`` UTF-32BE (tested first: the UTF-32LE
  mark starts with the UTF-16LE one), ``FF FE`` UTF-16LE, ``FE FF`` UTF-16BE. None of them can start
  UTF-8 text (``FF``, ``FE`` are never UTF-8 bytes; a UTF-8 file does not start with two NULs).
- without one, the NULs of ASCII text in a wider encoding: UTF-32 when one byte of every four is
  nearly never NUL and the other three nearly always are (:data:`_MOSTLY`, :data:`_RARELY`); UTF-16
  when the high byte of each unit is NUL for at least :data:`_HALF` of the units and the low byte
  nearly never (:data:`_RARELY`). UTF-8 text holds no NUL in practice; a file of NULs (a zero-filled
  tail) has them at every offset and is not taken for UTF-16. Text of mostly non-Latin characters
  without a BOM is not found (few NULs); its bytes are then mostly invalid UTF-8 and reported so.

A UTF-8 byte order mark (``EF BB BF``) is UTF-8 and is not refused: each reader reads it as its
reference does (CSV header names and the first JSON Lines record without it; plain text keeps it at
the start of the first row, as ``datasets``' text builder does).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from datacheck.io.shardbytes import Unreadable, head_bytes
from datacheck.io.textboms import wide_bom

__all__ = ["HEAD_BYTES", "WideText", "refuse_wide", "wide_encoding", "wide_reason"]

#: bytes of the file's start judged (decompressed)
HEAD_BYTES = 4096
#: without a BOM: the share of the NUL-holding byte positions that must be NUL (UTF-16: the high byte
#: of a unit; ASCII text, digits, separators and JSON punctuation are all such units)
_HALF = 0.5
#: UTF-32 without a BOM: the share of its two high bytes' positions that must be NUL (plane 0 and ASCII)
_MOSTLY = 0.9
#: without a BOM: the largest share of NULs at the low byte's position (U+xx00 characters are rare)
_RARELY = 0.05


@dataclass(frozen=True)
class WideText:
    """The wide encoding a file's first bytes show.

    Attributes:
        encoding: ``UTF-16LE``, ``UTF-16BE``, ``UTF-32LE`` or ``UTF-32BE``.
        bom: whether the file starts with its byte order mark.
        evidence: what showed it, in words (the mark's bytes, or the NULs counted).
    """

    encoding: str
    bom: bool
    evidence: str

    @property
    def iconv_from(self) -> str:
        """The name ``iconv -f`` takes: ``UTF-16``/``UTF-32`` with a BOM (iconv reads the byte order
        from it and does not copy it), the endian-specific name without one (glibc's ``UTF-16`` then
        assumes big-endian)."""
        return self.encoding[:6] if self.bom else self.encoding


def _nul_shares(sample: bytes, width: int) -> list[float]:
    """The share of NUL bytes at each offset modulo ``width`` of ``sample`` (cut to whole units)."""
    n = len(sample) // width * width
    units = n // width
    return [sample[k:n:width].count(0) / units for k in range(width)]


def wide_encoding(head: bytes) -> WideText | None:
    """The UTF-16/UTF-32 encoding of a file whose first bytes are ``head`` (see the module docstring
    for the rules), or None (UTF-8, a UTF-8 BOM, or not text this can tell)."""
    bom = wide_bom(head)
    if bom is not None:
        mark, enc = bom
        return WideText(enc, True, f"it starts with the {enc[:6]} byte order mark {mark.hex(' ').upper()}")
    sample = head[:HEAD_BYTES]
    if b"\x00" not in sample or len(sample) < 4:
        return None
    if len(sample) >= 8:
        s = _nul_shares(sample, 4)
        for enc, low, high in (("UTF-32LE", 0, (1, 2, 3)), ("UTF-32BE", 3, (0, 1, 2))):
            if s[low] <= _RARELY and min(s[k] for k in high) >= _MOSTLY:
                return WideText(enc, False, f"no byte order mark, but 3 of every 4 bytes of its first {len(sample):,} "
                                            "are NUL: ASCII text as UTF-32 writes it")
    even, odd = _nul_shares(sample, 2)
    for enc, lows, highs in (("UTF-16LE", even, odd), ("UTF-16BE", odd, even)):
        if lows <= _RARELY and highs >= _HALF:
            where = "odd" if enc == "UTF-16LE" else "even"
            return WideText(enc, False, f"no byte order mark, but {highs:.0%} of the bytes at {where} offsets of its "
                                        f"first {len(sample) // 2 * 2:,} are NUL and {lows:.0%} of the others: ASCII "
                                        f"text as {enc} writes it")
    return None


def _convert_command(name: str, frm: str) -> str:
    """The shell command that writes a UTF-8 copy of the file ``name`` (decompressed and compressed
    again for ``.gz``/``.zst``) from the encoding ``frm``."""
    low = name.lower()
    for ext, unpack, pack in ((".gz", "gzip -dc", "gzip"), (".zst", "zstd -dc", "zstd")):
        if low.endswith(ext):
            stem = name[: -len(ext)]
            base, dot, suffix = stem.rpartition(".")
            out = f"{base}.utf8.{suffix}{ext}" if dot else f"{stem}.utf8{ext}"
            return f"{unpack} {name} | iconv -f {frm} -t UTF-8 | {pack} > {out}"
    base, dot, suffix = name.rpartition(".")
    out = f"{base}.utf8.{suffix}" if dot and base else f"{name}.utf8"
    return f"iconv -f {frm} -t UTF-8 {name} > {out}"


def wide_reason(name: str, wide: WideText) -> str:
    """The ``decode.unreadable`` reason of the file ``name`` (its base name) found to be ``wide``."""
    return (f"the file is {wide.encoding} text, not UTF-8 ({wide.evidence}), so none of it was read (as UTF-8 "
            f"its text is NUL bytes between the characters). Re-encode it as UTF-8: "
            f"{_convert_command(name, wide.iconv_from)}")


def refuse_wide(path: Path) -> None:
    """Raise :class:`Unreadable` when the file ``path`` (``.gz``/``.zst`` decompressed; a store object's
    local copy, which keeps the object's name) is UTF-16 or UTF-32 text (:func:`wide_encoding` over its
    first :data:`HEAD_BYTES` bytes). A head that cannot be read passes (the reader then says why)."""
    wide = wide_encoding(head_bytes(path, HEAD_BYTES))
    if wide is not None:
        raise Unreadable(wide_reason(path.name, wide))
