"""The one JSONL/CSV record reader (formats/records) and the one state.json parser (io/hfmeta), and that
clean's row hashes are io/rowhash's."""
from __future__ import annotations

import json

import polars as pl
import pytest

from datacheck.formats.records import RecordLayoutError, csv_records, jsonl_records
from datacheck.io.hfmeta import hf_data_files, parse_state, read_state
from datacheck.io.rowhash import row_hash_series
from datacheck.model.errors import UsageError
from datacheck.tools.clean import row_hashes


def test_jsonl_records_lines_offsets_and_kinds():
    raw = b'\xef\xbb\xbf{"a": 1}\r\n\n[1]\n{"a": 2} {"a": 3}\n{"a": \xff}\n{"a": 4}'
    split = jsonl_records(raw)
    assert split.bom == b"\xef\xbb\xbf"
    assert split.blank == [(2, 13)]
    assert [(r.line, r.offset, r.row, r.error) for r in split.records] == [
        (1, 3, 0, None),  # the BOM is counted in the offsets, not in the line
        (3, 14, None, "a JSON array, not an object"),
        (4, 18, None, "two JSON values on one line (column 10)"),
        (5, 36, None, "Expecting value (column 7)"),
        (6, 45, 1, None),
    ]
    assert split.records[3].invalid_utf8 and split.records[3].text == '{"a": \ufffd}'
    assert [r.value for r in split.rows] == [{"a": 1}, {"a": 4}]


def test_csv_records_quoted_newline_wrong_width_and_names():
    raw = b'id,text\n1,"two\nlines"\n2,x,extra\n\n3,ok\n'
    split = csv_records(raw, ",", '"', True, None)
    assert split.header == split.header_fields == ["id", "text"]
    assert [(r.line, r.offset, r.row, r.value, r.error) for r in split.records] == [
        (2, 8, 0, ["1", "two\nlines"], None),
        (4, 22, None, None, "3 fields, expected 2"),
        (6, 33, 1, ["3", "ok"], None),
    ]
    assert split.records[0].raw == b'1,"two\nlines"'
    assert split.blank == [(5, 32)]
    renamed = csv_records(raw, ",", '"', True, ["k", "v"])
    assert (renamed.header, renamed.header_fields) == (["k", "v"], ["id", "text"])
    assert csv_records(b"1,a\n2,b\n", ",", '"', False, None).header == ["column_1", "column_2"]
    with pytest.raises(RecordLayoutError, match="names lists 3 column"):
        csv_records(raw, ",", '"', True, ["a", "b", "c"])


def test_state_json_parsed_once(tmp_path):
    state = {"_data_files": [{"filename": "data-00000-of-00002.arrow"}, {"filename": "data-00001-of-00002.arrow"}],
             "_split": "train", "_fingerprint": "abc"}
    (tmp_path / "state.json").write_text(json.dumps(state), encoding="utf-8")
    st = read_state(tmp_path)
    assert st is not None and st.split == "train" and st.state == state
    assert st.names == ("data-00000-of-00002.arrow", "data-00001-of-00002.arrow")
    assert hf_data_files(tmp_path) == {"data-00000-of-00002.arrow", "data-00001-of-00002.arrow"}
    # a name with a folder is not a plain list: discovery does not filter by it
    (tmp_path / "state.json").write_text(json.dumps({"_data_files": [{"filename": "../x.arrow"}]}), encoding="utf-8")
    assert read_state(tmp_path).names == ("../x.arrow",) and hf_data_files(tmp_path) is None
    assert parse_state({"other": 1}, "s") is None
    with pytest.raises(UsageError, match="_data_files must be a list"):
        parse_state({"_data_files": "data.arrow"}, "split/state.json")
    (tmp_path / "state.json").write_text("{not json", encoding="utf-8")
    assert read_state(tmp_path) is None and read_state(tmp_path / "nowhere") is None


def test_clean_row_hashes_are_the_rowhash_encoding():
    df = pl.DataFrame({"input_ids": [[1, 2], [3]], "text": ["a", None], "y": [0.5, float("nan")]})
    want = [f"xxh3-128:{h:032x}" for h in row_hash_series(df.get_columns()).to_list()]
    assert row_hashes(df) == want
    assert row_hashes(df.to_arrow()) == want
    assert len(set(want)) == 2
    assert row_hashes(df.with_columns(pl.col("text").fill_null("b")))[1] != want[1]
