"""Which .txt files are plain-text shards (datacheck/formats/discovery.py): a folder of them, as Hugging
Face datasets loads it with its text builder; not a .txt file found beside shards of another format
(datasets loads only the folder's most common format); always one named as a PATH; tokenizer and
licence files never; wikitext's .raw/.tokens with [dataset] format = "text"."""
from __future__ import annotations

import polars as pl
import pytest

from datacheck.formats.discovery import RULES, TEXT_BESIDE_REASON, discover, format_of
from datacheck.model.errors import UsageError


def test_a_folder_of_text_files_is_a_text_dataset(tmp_path):
    (tmp_path / "train.txt").write_text("a\nb\n")
    (tmp_path / "valid.txt.gz").write_bytes(b"")
    for meta in ("merges.txt", "vocab.txt", "requirements.txt", "LICENSE.txt", "gpt2-tiny-merges.txt",
                 "bert-base-uncased-vocab.txt"):
        (tmp_path / meta).write_text("x\n")
    disc = discover([str(tmp_path)])
    assert [(s.rel, s.format) for s in disc.shards] == [("train.txt", "text"), ("valid.txt.gz", "text")]
    assert disc.ignored_data == []


def test_a_text_file_beside_shards_of_another_format_is_listed_not_audited(tmp_path):
    pl.DataFrame({"text": ["a"]}).write_parquet(tmp_path / "train-00000-of-00001.parquet")
    (tmp_path / "notes.txt").write_text("how this data was made\n")
    disc = discover([str(tmp_path)])
    assert [s.rel for s in disc.shards] == ["train-00000-of-00001.parquet"]
    assert disc.ignored_data == [{"path": "notes.txt", "reason": TEXT_BESIDE_REASON.format(formats="parquet")}]
    # named as a PATH, it is audited
    disc = discover([str(tmp_path), str(tmp_path / "notes.txt")])
    assert sorted((s.rel, s.format) for s in disc.shards) == [("notes.txt", "text"),
                                                              ("train-00000-of-00001.parquet", "parquet")]
    # with format = "text", the .txt files only
    assert [s.rel for s in discover([str(tmp_path)], "text").shards] == ["notes.txt"]


def test_wikitext_names_need_the_text_format(tmp_path):
    assert format_of(tmp_path / "wiki.train.raw") is None
    assert "text" in (RULES.why_not("wiki.train.raw", "auto") or "")
    assert format_of(tmp_path / "wiki.train.raw", "text") == "text"
    assert format_of(tmp_path / "wiki.valid.tokens.gz", "text") == "text"
    assert format_of(tmp_path / "s.parquet", "text") is None


def test_text_files_beside_an_unpaired_megatron_bin_are_no_corpus(tmp_path):
    """A Megatron folder whose .idx is missing: its GPTDataset cache's description .txt files are not
    audited as a corpus; the usage error names the .bin's reason."""
    (tmp_path / "doc.bin").write_bytes(b"\0" * 8)
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "abc-GPTDataset-train-description.txt").write_text('{"class": "GPTDataset"}\n')
    with pytest.raises(UsageError, match="neither a Megatron .idx"):
        discover([str(tmp_path)])
