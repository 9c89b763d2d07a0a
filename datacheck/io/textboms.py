"""Byte order marks of UTF-16 and UTF-32 text (standard library only): how a file whose first bytes
are one of them is named, by the line formats that refuse it (:mod:`datacheck.formats.wide`) and by
the dataset card reader (:func:`datacheck.io.hfmeta.card_text_problem`).

Source: the Unicode Standard, 23.8 "Specials" (U+FEFF as each encoding writes it); the names are those
``iconv`` takes.
"""
from __future__ import annotations

__all__ = ["WIDE_BOMS", "wide_bom"]

#: (mark, encoding), longest first: ``FF FE 00 00`` is UTF-32LE's mark, which starts with UTF-16LE's
WIDE_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32LE"), (b"\x00\x00\xfe\xff", "UTF-32BE"),
             (b"\xff\xfe", "UTF-16LE"), (b"\xfe\xff", "UTF-16BE"))


def wide_bom(head: bytes) -> tuple[bytes, str] | None:
    """(mark, encoding) of the UTF-16/UTF-32 byte order mark ``head`` starts with, or None (none of
    them can start UTF-8 text: ``FF`` and ``FE`` are never UTF-8 bytes, and UTF-8 text does not start
    with two NULs)."""
    for mark, enc in WIDE_BOMS:
        if head.startswith(mark):
            return mark, enc
    return None
