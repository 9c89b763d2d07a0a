"""A blank turn content (``derive/messages._blank``: null, empty, or only whitespace and invisible
characters) found by searching for one visible character, against the definition it replaced:
every :data:`INVISIBLE` character deleted leaves "" (random strings over whitespace, invisible
format characters, control characters and letters)."""
from __future__ import annotations

import polars as pl
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from datacheck.derive.messages import INVISIBLE, _blank

#: whitespace of several kinds, the invisible format characters, controls that are not whitespace,
#: a no-break space, letters and a CJK ideograph
ALPHABET = " \t\n\r\x0b\x0c\x1c\x1f\x85\xa0\u1680\u2000\u2028\u3000\u200b\u200c\u200d\u2060\ufeff\u00ad\u180eaZ0\u4e00"


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(alphabet=ALPHABET, max_size=6)), max_size=20))
def test_blank_equals_deleting_every_invisible_character(texts):
    s = pl.Series("t", texts, dtype=pl.String)
    want = (s.is_null() | (s.str.replace_all(INVISIBLE, "") == "")).to_list()
    assert pl.select(_blank(pl.lit(s))).to_series().to_list() == want


def test_known_strings():
    s = pl.Series(["", " \t", "\u200b\ufeff", "\u00ad", None, "a", " a ", "\u4e00", "\x1c"])
    assert pl.select(_blank(pl.lit(s))).to_series().to_list() == [True, True, True, True, True, False, False, False,
                                                                  False]
