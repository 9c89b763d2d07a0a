"""A JSONL line longer than ``[dataset] max_row_bytes`` is one ``decode.bad_record`` naming its line, byte
offset and length, never held nor parsed (as a parquet row group whose rows average more is refused from
its footer); the other lines are audited exactly as in the file without it, whatever the chunk size."""
from __future__ import annotations

import json

import pytest

import datacheck
from datacheck.formats import jsonvalues

LIMIT = 200


def _lines() -> list[bytes]:
    texts = ["a", "", "b" * 50, "c" * 1000, "a", "  ", "d" * 300, "e"]
    return [json.dumps({"text": t, "label": i % 2}).encode() for i, t in enumerate(texts)]


def _audit(path):
    cfg = {"dataset": {"max_row_bytes": LIMIT}, "columns": {"text": "text", "label": "label"},
           "labels": {"num_classes": 2}}
    return datacheck.audit([str(path)], config=cfg).shards[0]


def _others(shard) -> list[tuple]:
    return sorted((f.check, f.column, f.count, f.rows) for f in shard.findings if not f.check.startswith("decode."))


@pytest.mark.parametrize("chunk", [16, 700, 1 << 24])
def test_long_lines_are_bad_records_and_the_rest_is_audited(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(jsonvalues, "JSONL_CHUNK_BYTES", chunk)
    lines = _lines()
    long = [i for i, ln in enumerate(lines) if len(ln) > LIMIT]
    assert long == [3, 6]
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    shard = _audit(path)
    bad = [f for f in shard.findings if f.check == "decode.bad_record"]
    assert len(bad) == 1
    offsets = [sum(len(ln) + 1 for ln in lines[:i]) for i in long]
    assert bad[0].count == 2 and bad[0].lines == tuple(i + 1 for i in long)
    assert bad[0].details["byte_offsets"] == offsets
    assert f"line {long[0] + 1}, byte offset {offsets[0]}: a line of {len(lines[3]):,} bytes, more than the " \
           f"{LIMIT} bytes a row datacheck decodes ([dataset] max_row_bytes): not parsed" in bad[0].message
    assert shard.rows == len(lines) - len(long)
    # the other lines: the same findings as the file that never held the long ones
    kept = tmp_path / "kept.jsonl"
    kept.write_bytes(b"\n".join(ln for i, ln in enumerate(lines) if i not in long) + b"\n")
    alone = _audit(kept)
    assert not [f for f in alone.findings if f.check.startswith("decode.")]
    assert _others(shard) == _others(alone) and _others(shard)


def test_short_lines_are_untouched_at_the_default(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"\n".join(_lines()) + b"\n")
    rep = datacheck.audit([str(path)], config={"columns": {"text": "text"}})
    assert not [f for f in rep.shards[0].findings if f.check.startswith("decode.")]
    assert rep.shards[0].rows == len(_lines())


def _values_lines() -> list[bytes]:
    """Lines of token lists; line 3 holds 80 ints (``1,`` each: 180 bytes, within LIMIT's 200 bytes but
    not its 25 values of 8 bytes), line 5 a text holding 150 commas (one string: 2 values in the line)
    and line 6 30 strings of 1 letter (32 values in the line)."""
    out = [json.dumps({"ids": [1, 2, 3], "text": "a"}).encode() for _ in range(8)]
    out[3] = b'{"ids":[' + b",".join([b"1"] * 80) + b'],"text":"x"}'
    out[5] = json.dumps({"ids": [4], "text": "," * 150}).encode()
    out[6] = json.dumps({"ids": [5], "text": "y", "more": ["z"] * 30}).encode()
    return out


@pytest.mark.parametrize("chunk", [16, 700, 1 << 24])
def test_a_line_of_more_values_than_the_bound_is_a_bad_record_before_any_parse(tmp_path, monkeypatch, chunk):
    """A line within ``max_row_bytes`` bytes whose values decode to more (8 bytes a value: LIMIT // 8 = 25
    values; a list of 63 million small ints is a 126 MB line, within 128 MiB, that polars' parser took past
    5 GB): decode.bad_record naming its line and values; commas inside strings are not values; the other
    lines audited. The value count is computed here from the line (its commas outside strings, plus one)."""
    monkeypatch.setattr(jsonvalues, "JSONL_CHUNK_BYTES", chunk)
    lines = _values_lines()
    path = tmp_path / "v.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    cfg = {"dataset": {"max_row_bytes": LIMIT}}
    shard = datacheck.audit([str(path)], config=cfg).shards[0]
    bad = [f for f in shard.findings if f.check == "decode.bad_record"]
    values = lines[3].count(b",") + 1
    assert values * 8 > LIMIT and max(len(ln) for ln in lines) <= LIMIT
    too_many = [i for i, ln in enumerate(lines)
                if (ln.replace(b'"' + b"," * 150 + b'"', b'""').count(b",") + 1) * 8 > LIMIT]
    assert too_many == [3, 6]
    assert len(bad) == 1 and bad[0].lines == tuple(i + 1 for i in too_many), bad
    assert f"a line of {values:,} JSON values, more than the {LIMIT // 8:,} a row datacheck parses" in bad[0].message
    assert shard.rows == len(lines) - 2


def test_a_chunk_with_a_line_of_many_values_takes_the_per_line_path(monkeypatch):
    """A line of more than FAST_VALUES values is not handed to polars' parser (about 130 bytes a value
    there): its chunk is parsed line by line, to the same rows."""
    monkeypatch.setattr(jsonvalues, "FAST_VALUES", 10)
    data = b'{"ids": [1, 2, 3]}\n{"ids": [' + b",".join([b"7"] * 11) + b"]}\n"
    assert jsonvalues._fast_chunk(data) is None
    monkeypatch.setattr(jsonvalues, "FAST_VALUES", 11)
    df = jsonvalues._fast_chunk(data)
    assert df is not None and df["ids"].to_list() == [[1, 2, 3], [7] * 11]
