"""dup.exact_in_shard, dup.shard and the shard-set checks index.numbering_gap / index.empty_shard /
index.temp_file."""
from __future__ import annotations

import shutil

import polars as pl
import pytest
from checkhelp import audit_df, findings, one, write_shard
from hypothesis import given
from hypothesis import strategies as st
from refs import SHARD_SETTINGS as SETTINGS
from refs import n_rows as _rows
from refs import shard_failing as failing

import datacheck


@pytest.mark.parametrize(
    "cols, rows",
    [
        ({"text": ["a", "b", "a", "a", None, None]}, [2, 3, 5]),
        # content = role columns (text + label); idx has no role and never makes rows distinct
        ({"text": ["a", "a", "a"], "label": [0, 1, 0], "idx": [0, 1, 2]}, [2]),
        ({"text": ["a", "A", "a "]}, []),  # exact: no case or whitespace folding
        ({"input_ids": [[1, 2], [1, 2], [2, 1], [], []]}, [1, 4]),
        ({"x": [1, 2, 1], "y": ["p", "q", "p"]}, [2]),  # no roles: all columns
    ],
)
def test_exact_in_shard(tmp_path, cols, rows):
    rep = audit_df(tmp_path, cols)
    got = findings(rep, "dup.exact_in_shard")
    assert [(f.rows, f.count, f.severity) for f in got] == ([(tuple(rows), len(rows), "warn")] if rows else [])


def test_exact_in_shard_message_names_content(tmp_path):
    rep = audit_df(tmp_path, {"text": ["a", "a"], "label": [1, 1], "idx": [0, 1]})
    f = one(rep, "dup.exact_in_shard")
    assert "(content: text, label)" in f.message
    assert f.examples[0].value == "'a'"
    assert f.ratio == pytest.approx(0.5)


def test_dup_shard_identical_bytes(tmp_path):
    p = write_shard(tmp_path, {"text": ["a", "b"]}, "part-0.parquet")
    shutil.copy(p, tmp_path / "part-1.parquet")
    (tmp_path / "sub").mkdir()
    shutil.copy(p, tmp_path / "sub" / "part-2.parquet")
    write_shard(tmp_path, {"text": ["c"]}, "part-3.parquet")
    rep = datacheck.audit(str(tmp_path))
    f = one(rep, "dup.shard")
    assert (f.count, f.severity) == (2, "error")
    assert f.shards == ("part-0.parquet", "part-1.parquet", "sub/part-2.parquet")


def test_zero_byte_shards_are_not_duplicates_of_each_other(tmp_path):
    (tmp_path / "a.parquet").write_bytes(b"")
    (tmp_path / "b.parquet").write_bytes(b"")
    rep = datacheck.audit(str(tmp_path))
    assert findings(rep, "dup.shard") == []
    assert len(findings(rep, "decode.unreadable")) == 2


@pytest.mark.parametrize(
    "names, count, missing",
    [
        (["train-00000-of-00004.parquet", "train-00001-of-00004.parquet", "train-00003-of-00004.parquet"], 1, [2]),
        (["train-00000-of-00002.parquet", "train-00001-of-00002.parquet"], 0, []),
        (["data-00000-of-00003.parquet"], 2, [1, 2]),
    ],
)
def test_numbering_gap(tmp_path, names, count, missing):
    for i, n in enumerate(names):
        write_shard(tmp_path, {"text": [f"row {i}"]}, n)
    rep = datacheck.audit(str(tmp_path))
    got = findings(rep, "index.numbering_gap")
    if not count:
        assert got == []
        return
    (f,) = got
    assert (f.count, f.severity, f.details["missing"]) == (count, "error", missing)
    width = len(names[0].split("-of-")[1].split(".")[0])
    n_total = int(names[0].split("-of-")[1].split(".")[0])
    prefix = names[0].split("-")[0]
    for m in missing:
        assert f"{prefix}-{m:0{width}d}-of-{n_total:0{width}d}.parquet" in f.message


def test_numbering_disagreeing_counts(tmp_path):
    write_shard(tmp_path, {"text": ["a"]}, "train-00000-of-00002.parquet")
    write_shard(tmp_path, {"text": ["b"]}, "train-00001-of-00003.parquet")
    rep = datacheck.audit(str(tmp_path))
    msgs = [f.message for f in findings(rep, "index.numbering_gap")]
    assert any("disagree on the shard count: -of-[2, 3]" in m for m in msgs)


def test_numbering_per_folder(tmp_path):
    write_shard(tmp_path, {"text": ["a"]}, "train/data-00000-of-00001.parquet")
    write_shard(tmp_path, {"text": ["b"]}, "test/data-00000-of-00001.parquet")
    rep = datacheck.audit(str(tmp_path))
    assert findings(rep, "index.numbering_gap") == []


def test_temp_file_does_not_count_as_present(tmp_path):
    write_shard(tmp_path, {"text": ["a"]}, "train-00000-of-00002.parquet")
    (tmp_path / "train-00001-of-00002.parquet.partial").write_bytes(b"PAR1")
    (tmp_path / ".~lock.train.parquet#").write_bytes(b"")
    rep = datacheck.audit(str(tmp_path))
    tmp = one(rep, "index.temp_file")
    assert (tmp.severity, tmp.count) == ("warn", 2)
    assert tmp.shards == (".~lock.train.parquet#", "train-00001-of-00002.parquet.partial")
    assert [s.path for s in rep.shards] == ["train-00000-of-00002.parquet"]
    gap = one(rep, "index.numbering_gap")
    assert gap.details["missing"] == [1]
    assert "train-00001-of-00002.parquet" in gap.message


def test_temp_files_listed(tmp_path):
    write_shard(tmp_path, {"text": ["a"]}, "a.parquet")
    for name in ("b.parquet.tmp", "c.jsonl.incomplete", "d.parquet.crdownload"):
        (tmp_path / name).write_bytes(b"x")
    rep = datacheck.audit(str(tmp_path))
    f = one(rep, "index.temp_file")
    assert f.shards == ("b.parquet.tmp", "c.jsonl.incomplete", "d.parquet.crdownload")
    assert "not audited" in f.message


def test_empty_shard(tmp_path):
    write_shard(tmp_path, pl.DataFrame({"text": []}, schema={"text": pl.String}), "a.parquet")
    (tmp_path / "b.jsonl").write_text("")
    write_shard(tmp_path, {"text": ["x"]}, "c.parquet")
    rep = datacheck.audit(str(tmp_path))
    got = [(s.path, s.rows, [f.check for f in s.findings]) for s in rep.shards]
    assert got == [("a.parquet", 0, ["index.empty_shard"]), ("b.jsonl", 0, ["index.empty_shard"]),
                   ("c.parquet", 1, [])]
    assert all(f.severity == "warn" for f in findings(rep, "index.empty_shard"))


def test_numbering_gap_names_missing_shards_like_the_present_ones(tmp_path):
    for name in ("part-0-of-4.parquet", "part-1-of-4.parquet", "part-3-of-4.parquet"):
        write_shard(tmp_path, {"text": [name]}, name)
    f = one(datacheck.audit(str(tmp_path)), "index.numbering_gap")
    assert "part-2-of-4.parquet" in f.message
    for name in ("train-000000-of-000003.parquet",):
        write_shard(tmp_path / "six", {"text": [name]}, name)
    f = one(datacheck.audit(str(tmp_path / "six")), "index.numbering_gap")
    assert "train-000001-of-000003.parquet, train-000002-of-000003.parquet" in f.message


def test_cross_shard_findings_name_the_content_columns_of_the_shards_involved(tmp_path):
    """The text shard a.parquet sorts first, but the repeats are between the
    token-only shards b and c: the messages name input_ids, not a.parquet's text."""
    d = tmp_path / "data"
    d.mkdir()
    pl.DataFrame({"text": ["x", "y"], "label": [0, 1]}).write_parquet(d / "a.parquet")
    pl.DataFrame({"input_ids": [[1, 2], [3, 4]], "label": [0, 1]}).write_parquet(d / "b.parquet")
    pl.DataFrame({"input_ids": [[1, 2], [3, 4], [5]], "label": [0, 0, 1]}).write_parquet(d / "c.parquet")
    rep = datacheck.audit(str(d), {}, workers=1)
    by = {f.check: f for f in rep.dataset_findings}
    exact, conflict = by["dup.exact_across_shards"], by["dup.conflicting_labels"]
    assert (exact.count, exact.shards) == (1, ("b.parquet", "c.parquet"))  # [1, 2] with label 0
    assert "(content: input_ids, label)" in exact.message
    assert (conflict.count, conflict.shards) == (1, ("b.parquet", "c.parquet"))  # [3, 4]: labels 1 and 0
    assert "(content: input_ids)" in conflict.message
    # shards hashed over different content columns never repeat each other
    pl.DataFrame({"input_ids": [[9]], "text": ["x"], "label": [0]}).write_parquet(d / "d.parquet")
    pl.DataFrame({"input_ids": [[9]], "label": [0]}).write_parquet(d / "e.parquet")
    rep = datacheck.audit([str(d / "d.parquet"), str(d / "e.parquet")], {}, workers=1)
    assert [f.check for f in rep.dataset_findings if f.check.startswith("dup.")] == []  # different content, no repeat


# ---------------------------------------------------------------- property tests against a plain-Python reference
def ref_dup_in_shard(rows: list[tuple]) -> set[int]:
    """Rows whose content (a tuple of the role columns' values) equals an earlier row's."""
    seen: set = set()
    out = set()
    for i, r in enumerate(rows):
        key = tuple(tuple(v) if isinstance(v, list) else v for v in r)
        if key in seen:
            out.add(i)
        seen.add(key)
    return out


@SETTINGS
@given(data=st.data(), n=_rows(1, 20), with_ids=st.booleans())
def test_dup_in_shard_matches_reference(data, n, with_ids):
    text = data.draw(st.lists(st.one_of(st.none(), st.sampled_from(["", "a", "b", " a"])), min_size=n, max_size=n))
    label = data.draw(st.lists(st.one_of(st.none(), st.integers(0, 1)), min_size=n, max_size=n))
    idx = list(range(n))  # a column with no role never makes rows distinct
    cols = {"text": text, "label": label, "idx": idx}
    schema = {"text": pl.String, "label": pl.Int64, "idx": pl.Int64}
    content = list(zip(text, label))
    if with_ids:
        ids = data.draw(st.lists(st.one_of(st.none(), st.lists(st.integers(0, 1), max_size=2)), min_size=n, max_size=n))
        cols["input_ids"], schema["input_ids"] = ids, pl.List(pl.Int64)
        content = list(zip(text, label, ids))
    got = failing(pl.DataFrame(cols, schema=schema), {})
    assert got.get("dup.exact_in_shard", set()) | got.get("dup.exact_in_shard:text", set()) == ref_dup_in_shard(content)
