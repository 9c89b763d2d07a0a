"""The one bounded JSON loader: nesting is counted before any parser runs."""
from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from datacheck.io.safejson import MAX_JSON_DEPTH, JsonInputError, loads, max_depths, max_line_depth, read_json_file


def _ref_depth(line: str) -> int:
    """Plain-Python reference: max nesting of [ and { outside strings."""
    depth = best = 0
    in_str = esc = False
    for ch in line:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            best = max(best, depth)
        elif ch in "]}":
            depth -= 1
    return best


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(alphabet='ab"\\[]{}\n'),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(alphabet='a"[{\\', max_size=3), c, max_size=3),
                     max_leaves=20)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(_json, min_size=1, max_size=5))
def test_max_depths_matches_reference(values):
    lines = [json.dumps(v) for v in values]
    got = max_depths(("\n".join(lines) + "\n").encode()).tolist()
    assert got == [_ref_depth(ln) for ln in lines]


def test_brackets_inside_strings_do_not_hide_depth():
    line = '{"a": "]]]]]]]]\\"]]]", "b": ' + "[" * 70 + "]" * 70 + "}"
    assert max_depths(line.encode()).tolist() == [71]


def test_deep_nesting_refused_before_parsing():
    with pytest.raises(JsonInputError, match=f"nested 5000 levels deep .*at most {MAX_JSON_DEPTH}"):
        loads(b"[" * 5000 + b"]" * 5000)


def test_huge_integer_is_a_json_input_error():
    with pytest.raises(JsonInputError, match="not readable JSON"):
        loads(b'{"n": ' + b"9" * 5000 + b"}")


def test_syntax_error_names_line_and_column(tmp_path):
    p = tmp_path / "state.json"
    p.write_bytes(b'{\n "a": [1,\n}')
    with pytest.raises(JsonInputError, match=r"at line 3, column 1"):
        read_json_file(p)


def test_fifo_is_not_read(tmp_path):
    import os

    p = tmp_path / "index.json"
    os.mkfifo(p)
    with pytest.raises(JsonInputError, match="not a regular file"):
        read_json_file(p)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(_json, min_size=1, max_size=5), st.integers(0, 80))
def test_max_line_depth_decides_the_limit_like_the_exact_scan(values, extra):
    from datacheck.io.safejson import max_line_depth

    lines = [json.dumps(v) for v in values] + ["[" * extra + "]" * extra]
    data = ("\n".join(lines) + "\n").encode()
    exact = int(max_depths(data).max())
    got = max_line_depth(data)
    assert got >= exact and (got > MAX_JSON_DEPTH) == (exact > MAX_JSON_DEPTH)


def _dense_depths(data: bytes, per_line: bool = True) -> list[int]:
    """The byte-by-byte scan max_depths used before it looked only at the bytes that matter: int64 prefix sums over every byte (about 40 bytes of memory per byte). Lines whose
    brackets only close gave a negative depth there; the lean scan says 0 (both are "within the bound")."""
    buf = np.frombuffer(data, dtype=np.uint8)
    n = buf.size
    if n == 0:
        return []
    idx = np.arange(n, dtype=np.int64)
    bs = buf == 92
    quote = buf == 34
    if bs.any():
        last_non_bs = np.maximum.accumulate(np.where(bs, -1, idx))
        prev = np.concatenate(([-1], last_non_bs[:-1]))
        quote &= (((idx - 1) - prev) & 1) == 0
    nl = (buf == 10) if per_line else np.zeros(n, dtype=bool)
    cq = np.cumsum(quote, dtype=np.int64)
    outside = ((cq - np.maximum.accumulate(np.where(nl, cq, 0))) & 1) == 0
    delta = ((buf == 91) | (buf == 123)).astype(np.int8) - ((buf == 93) | (buf == 125)).astype(np.int8)
    delta[~outside] = 0
    d = np.cumsum(delta, dtype=np.int64)
    starts = np.concatenate(([0], np.flatnonzero(nl) + 1)) if per_line else np.zeros(1, dtype=np.int64)
    starts = starts[starts < n]
    base = np.where(starts > 0, d[np.maximum(starts - 1, 0)], 0)
    line_id = np.cumsum(np.concatenate(([False], nl[:-1]))) if per_line else np.zeros(n, dtype=np.int64)
    return [max(int(x), 0) for x in np.maximum.reduceat(d - base[line_id], starts)]


@settings(max_examples=examples(500), deadline=None)
@given(st.lists(st.sampled_from(list(b'ab"\\[]{}\n ,:')), max_size=80).map(bytes),
       st.sampled_from([0, 1, 62, 63, 64, 65, 70]))
def test_lean_scan_matches_the_dense_scan(text, deep):
    """Arbitrary bytes of the classes that matter (unbalanced, escaped, unterminated strings), plus
    a run of ``deep`` brackets around the bound: per line, per text, and max_line_depth's verdict."""
    data = text + b"[" * deep + b"]" * deep + b"\n" + text
    assert max_depths(data).tolist() == _dense_depths(data)
    assert max_depths(data, per_line=False).tolist() == _dense_depths(data, per_line=False)
    exact = max(_dense_depths(data), default=0)
    assert max_line_depth(data, limit=0) == exact  # no line within 0 brackets: the exact scan
    got = max_line_depth(data)
    assert got >= exact and (got > MAX_JSON_DEPTH) == (exact > MAX_JSON_DEPTH)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(_json, min_size=0, max_size=6), st.integers(0, 8), st.booleans())
def test_max_line_depth_bound_decides_any_limit_like_the_exact_scan(values, limit, final_newline):
    lines = [json.dumps(v) for v in values]
    text = "\n".join(lines) + ("\n" if final_newline and lines else "")
    data = text.encode()
    exact = max((_ref_depth(ln) for ln in lines), default=0)
    opens = max((ln.count("[") + ln.count("{") for ln in lines), default=0)
    got = max_line_depth(data, limit)
    assert got >= exact and (got > limit) == (exact > limit)
    assert got == (opens if opens <= limit else exact)  # the cheap count where it decides, else the scan
