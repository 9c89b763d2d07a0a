"""Indented JSON text, the bytes of the standard library's, at the speed of its C encoder.

``json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)`` is what reports
and data indexes are written as (their bytes are a contract: the golden report). With ``indent``
the standard library encodes every value in Python (its C encoder takes no indent): a 100-shard
report (1.7 MB, mostly length histograms, one number a line) took 56-100 ms CPU, about 12x its
compact encoding, and it is written after every shard is done, so the audit waits for it.

:func:`dumps_sorted_indented` gives the same text: containers are laid out here, and each container
whose items are all scalars (a histogram's counts, a dict of numbers and strings) is encoded by the
standard library's own C encoder in one call, its item separator being the newline and indentation
json.dumps would put between items. Every scalar (its number formatting, string escaping, the
``allow_nan=False`` error, a non-string key's conversion) is thus the standard library's;
``tests/unit/io/test_jsontext.py`` holds the output to ``json.dumps`` on random documents.
"""
from __future__ import annotations

import json
from typing import Any

__all__ = ["dumps_sorted_indented"]

#: the types encoded by the C encoder in one call per container (their subclasses, e.g. an IntEnum,
#: take the general path: the same text, value by value)
_SCALARS = frozenset({str, int, float, bool, type(None)})
_INDENT = "  "


def _flat(items: Any, depth: int) -> str:
    """A non-empty list or dict of scalars at ``depth``, as ``json.dumps(..., indent=2)`` writes it."""
    inner = "\n" + _INDENT * (depth + 1)
    text = json.dumps(items, sort_keys=True, ensure_ascii=False, allow_nan=False, separators=("," + inner, ": "))
    return text[0] + inner + text[1:-1] + "\n" + _INDENT * depth + text[-1]


def _rows(items: list[Any] | tuple[Any, ...], depth: int) -> str | None:
    """A non-empty list of non-empty lists of numbers, bools and None (a histogram's ``[value, count]``
    pairs) at ``depth``, as ``json.dumps(..., indent=2)`` writes it, from one compact encoding: with
    no string inside (no ``"``), its brackets and commas are all structure, and with ``[`` and ``]``
    only at its ends and between rows, every row is a flat list. None when ``items`` is not one."""
    if set(map(type, items)) != {list}:
        return None
    text = json.dumps(items, allow_nan=False, separators=(",", ":"))
    body = text[2:-2]  # "[[a,b],[c,d]]" -> "a,b],[c,d"
    seps = len(items) - 1
    if ('"' in text or "{" in text or "[]" in text
            or not body.count("],[") == body.count("[") == body.count("]") == seps):
        return None
    i0, i1, i2 = (_INDENT * (depth + k) for k in range(3))
    body = body.replace("],[", "\0").replace(",", ",\n" + i2).replace("\0", "\n" + i1 + "],\n" + i1 + "[\n" + i2)
    return "[\n" + i1 + "[\n" + i2 + body + "\n" + i1 + "]\n" + i0 + "]"


def _encode(obj: Any, depth: int, out: list[str]) -> None:
    if isinstance(obj, dict):
        if not obj:
            out.append("{}")
        elif set(map(type, obj.values())) <= _SCALARS:
            out.append(_flat(obj, depth))
        elif not all(type(k) is str for k in obj):  # keys the standard library converts: its own layout
            out.append(json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
                       .replace("\n", "\n" + _INDENT * depth))
        else:
            inner = "\n" + _INDENT * (depth + 1)
            out.append("{")
            for i, key in enumerate(sorted(obj)):
                out.append(("," if i else "") + inner + json.encoder.encode_basestring(key) + ": ")
                _encode(obj[key], depth + 1, out)
            out.append("\n" + _INDENT * depth + "}")
    elif isinstance(obj, (list, tuple)):
        if not obj:
            out.append("[]")
        elif set(map(type, obj)) <= _SCALARS:
            out.append(_flat(obj, depth))
        elif type(obj[0]) is list and (rows := _rows(obj, depth)) is not None:
            out.append(rows)
        else:
            inner = "\n" + _INDENT * (depth + 1)
            out.append("[")
            for i, item in enumerate(obj):
                out.append(("," if i else "") + inner)
                _encode(item, depth + 1, out)
            out.append("\n" + _INDENT * depth + "]")
    else:
        out.append(json.dumps(obj, ensure_ascii=False, allow_nan=False))


def dumps_sorted_indented(obj: Any) -> str:
    """``json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)``, the same
    text (no trailing newline).

    Args:
        obj: a JSON document of dicts (string keys; other keys are converted as the standard
            library converts them), lists, tuples, strings, ints, floats, bools and None.

    Raises:
        ValueError: a float NaN or infinity anywhere (``allow_nan=False``), as ``json.dumps``.
        TypeError: a value JSON cannot encode, or keys that cannot be sorted, as ``json.dumps``.
    """
    out: list[str] = []
    _encode(obj, 0, out)
    return "".join(out)
