"""Dictionary-encoded text (Arrow ``dictionary<string>``, pandas ``category``,
polars ``Categorical``/``Enum``) is text: read as strings, so the text checks run on it."""
from __future__ import annotations

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import datacheck
from datacheck.derive.read import open_for_checks
from datacheck.model.config import config_from_dict


def _dict_parquet(path, texts):
    pq.write_table(pa.table({"text": pa.array(texts).dictionary_encode(), "label": list(range(len(texts)))}), path)
    return path


@pytest.mark.parametrize("config", [{}, {"columns": {"text": "text"}}])
def test_dictionary_text_is_audited_as_text(tmp_path, config):
    path = _dict_parquet(tmp_path / "cat.parquet", ["good film", "", "bad film", "  "])
    rep = datacheck.audit(str(path), config=config, fail_on="never")
    assert rep.roles["text"]["columns"] == ["text"]
    assert not [f for f in rep.findings if f.check == "schema.dtype"], [f.message for f in rep.findings]
    (empty,) = [f for f in rep.findings if f.check == "empty.text"]
    assert empty.rows == (1, 3)
    assert "empty.text" not in {s["check"] for s in rep.skipped if s["shards"]}


def test_dictionary_text_reads_as_string_for_every_verb(tmp_path):
    cfg = config_from_dict({})
    frame = pl.DataFrame({"text": ["a", "b", "a"], "sentence": [["x"], ["y", "x"], []]},
                         schema={"text": pl.Categorical, "sentence": pl.List(pl.Enum(["x", "y"]))})
    got = open_for_checks(frame, cfg)
    assert got.schema["text"] == pl.String and got.schema["sentence"] == pl.List(pl.String)
    assert got.roles.text == ("text", "sentence")
    assert got.lf.collect()["text"].to_list() == ["a", "b", "a"]
