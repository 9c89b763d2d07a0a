"""Row content hashes (the payload) and the cross-shard dup checks in the merge:
dup.exact_across_shards, dup.conflicting_labels, dup.split_overlap ([splits] and --against)."""
from __future__ import annotations

import json
import random
import struct

import polars as pl
import polars_hash as plh
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash
from conftest import run_cli
from dshelp import by_check, one, run, write

import datacheck
from datacheck.checks.dup.cross import CONTENT_KEY, ROWS_KEY, assign_splits
from datacheck.engine.shard import audit_shard
from datacheck.io.discover import DiscoveredShard
from datacheck.io.hashing import hash_file
from datacheck.io.rowhash import ROW_ENCODING, row_hash_series
from datacheck.model.config import config_from_dict

# ------------------------------------------------------------------ the canonical row encoding

IDS = pl.Series("input_ids", [[101, 7, 102], [], None, [1, None]], dtype=pl.List(pl.Int32))
TXT = pl.Series("text", ["héllo", "", None, "x"])
LAB = pl.Series("label", [0, 1, None, 2], dtype=pl.Int64)
#: pinned: a change of polars, polars-hash or this code that moves a hash must fail here.
#: datacheck-row-v2: the int32 ids hash as the same ids stored as int64, whose values are those of
#: v1 (rows 2 and 3, general path, are unchanged from v1 for any width; v1 gave rows 0 and 1 of the
#: int32 storage 0xa28935cd9ea91bac05fbc9d15e88e17e and 0xb7de6bf4544fd475e73ab550dd29fccc).
GOLDEN = [0x50991eb52086e811c6aaf68e9f7e3715, 0x536c821e7e1e96770c7d82d691df2321,
          0x0c3c847b586215e05fe8e38fcb2e8d39, 0x3f524fd47dcdd39647f019df4e2f7a26]


def test_row_hash_golden_values():
    assert row_hash_series([IDS, TXT, LAB]).to_list() == GOLDEN
    assert row_hash_series([IDS, TXT, LAB]).dtype == pl.UInt128


def _general(value, dtype) -> bytes:
    """hash_rows v1 encoding of one value (the plugin's frozen encoding), then its XXH3-128 digest."""
    enc = pl.DataFrame({"v": pl.Series([value], dtype=dtype)}).select(plh.hash_rows(pl.col("v"), version=1)).item()
    return xxhash.xxh3_128_digest(enc)


def _reference(row) -> int:
    """Plain-Python reference of the documented encoding (crossdup module docstring)."""
    ids, txt, lab = row
    parts = b""
    # v2: integer lists are encoded at int64 width (tag 0x10 + 4), whatever their storage width
    if ids is not None and None not in ids:
        parts += bytes([0x10 + 4]) + xxhash.xxh3_128_digest(struct.pack(f"<{len(ids)}q", *ids))
    else:
        parts += b"\x01" + _general(ids, pl.List(pl.Int64))
    parts += b"\x01" + _general(txt, pl.String)
    parts += b"\x01" + _general(lab, pl.Int64)
    return xxhash.xxh3_128_intdigest(parts)


def test_row_hash_matches_the_documented_encoding():
    rows = list(zip(IDS.to_list(), TXT.to_list(), LAB.to_list()))
    assert [_reference(r) for r in rows] == GOLDEN


def test_row_hash_equality_semantics():
    h = row_hash_series
    # the same values hash alike, wherever they sit (slices, chunks)
    assert h([IDS.slice(1, 2), TXT.slice(1, 2), LAB.slice(1, 2)]).to_list() == GOLDEN[1:3]
    two = pl.concat([IDS.slice(0, 2), IDS.slice(2, 2)], rechunk=False)
    assert h([two, TXT, LAB]).to_list() == GOLDEN
    # scalars compare by value (Int32 1 == Int64 1); null list != empty list; null != ""
    assert h([LAB.cast(pl.Int32)]).to_list() == h([LAB]).to_list()
    assert len(set(h([pl.Series([None, [], [0]], dtype=pl.List(pl.Int64))]).to_list())) == 3
    assert len(set(h([pl.Series([None, ""])]).to_list())) == 2
    # column boundaries matter: ("ab", "c") != ("a", "bc")
    a, b = h([pl.Series(["ab"]), pl.Series(["c"])]), h([pl.Series(["a"]), pl.Series(["bc"])])
    assert a.to_list() != b.to_list()
    # values, not storage (datacheck-row-v2): list widths hash alike
    assert h([IDS.cast(pl.List(pl.Int64))]).to_list() == h([IDS]).to_list()
    # fixed-size Array columns hash like the same List
    arr = pl.Series([[1, 2], [3, 4]], dtype=pl.Array(pl.Int32, 2))
    assert h([arr]).to_list() == h([arr.cast(pl.List(pl.Int32))]).to_list()
    assert h([pl.Series([], dtype=pl.String)]).to_list() == []


def test_row_hash_property_equal_rows_iff_equal_hashes():
    rng = random.Random(7)
    rows = []
    for _ in range(400):
        ids = None if rng.random() < 0.05 else [rng.choice([0, 1, 2, None] if rng.random() < 0.1 else [0, 1, 2])
                                                for _ in range(rng.randint(0, 3))]
        rows.append((ids, rng.choice(["a", "b", "", None]), rng.choice([0, 1])))
    ids = pl.Series([r[0] for r in rows], dtype=pl.List(pl.Int16))
    txt = pl.Series([r[1] for r in rows], dtype=pl.String)
    lab = pl.Series([r[2] for r in rows], dtype=pl.Int8)
    hashes = row_hash_series([ids, txt, lab]).to_list()
    for i in range(0, 400, 7):
        for j in range(400):
            assert (hashes[i] == hashes[j]) == (rows[i] == rows[j]), (rows[i], rows[j])


def test_payload_shape(tmp_path):
    p = write(tmp_path, "a.parquet", {"text": ["x", "y", "x"], "label": [1, 0, 1], "idx": [0, 1, 2]})
    cfg = config_from_dict({})
    h, size = hash_file(p)
    res = audit_shard(DiscoveredShard(path=p, rel="a.parquet", format="parquet"), cfg, h, size)
    rows = res.payload[ROWS_KEY]
    assert isinstance(rows, pl.DataFrame)
    assert rows.schema == pl.Schema({"hash": pl.UInt128, "label": pl.Int64})
    assert rows["label"].to_list() == [1, 0, 1]
    hs = rows["hash"].to_list()
    assert hs[0] == hs[2] != hs[1]
    assert hs == row_hash_series([pl.Series(["x", "y", "x"])]).to_list()  # content = text, no idx, no label
    assert res.payload[CONTENT_KEY] == {"columns": ["text"], "label": "label", "encoding": ROW_ENCODING}
    # never in the report
    assert "crossdup" not in run(p).to_json()


# ------------------------------------------------------------------------- the merge checks


@pytest.fixture
def three(tmp_path):
    root = tmp_path / "ds"
    write(root, "s0.parquet", {"text": ["a", "b", "c", "d"], "label": [0, 1, 0, 1]})
    write(root, "s1.parquet", {"text": ["e", "a", "b", "b", "f"], "label": [0, 0, 0, 0, 1]})
    write(root, "s2.parquet", {"text": ["a", "g", "e", "h"], "label": [0, 1, 0, 1]})
    return root


def test_exact_across_shards(three):
    f = one(run(three), "dup.exact_across_shards")
    # s1 row 1 = s0 row 0 ("a",0); s2 row 0 = s0 row 0; s2 row 2 = s1 row 0 ("e",0).
    # ("b",0) in s1 differs from ("b",1) in s0 by its label: not an exact repeat.
    assert f.count == 3
    assert f.severity == "warn"
    assert f.shards == ("s0.parquet", "s1.parquet", "s2.parquet")
    assert [e.value for e in f.examples] == ["s1.parquet row 1 = s0.parquet row 0", "s2.parquet row 0 = s0.parquet row 0",
                                            "s2.parquet row 2 = s1.parquet row 0"]
    assert f.details["per_shard"] == {"s1.parquet": 1, "s2.parquet": 2}


def test_conflicting_labels(three):
    f = one(run(three), "dup.conflicting_labels")
    # "b": label 1 in s0, 0 in s1 (twice) -> one content with two labels
    assert f.count == 1
    assert f.details["rows"] == 3
    assert f.column == "label"
    assert [(e["shard"], e["row"], e["label"]) for e in f.details["examples"]] == [("s0.parquet", 1, 1), ("s1.parquet", 2, 0)]


def test_conflicting_labels_within_one_shard_and_nulls(tmp_path):
    p = write(tmp_path, "a.parquet", {"sentence": ["x", "x", "y", "y", "z", "z"], "label": [0, 1, 1, 1, None, 0]})
    f = one(run(p), "dup.conflicting_labels")
    assert f.count == 1  # "x"; "y" agrees; "z" has one non-null label
    assert by_check(run(p), "dup.exact_across_shards") == []


def test_no_label_role_skips_conflicting_labels(tmp_path):
    p = write(tmp_path, "a.parquet", {"text": ["x", "x"]})
    # stated as classification rows: the label the layout needs is missing, so the check is skipped
    rep = run(p, {"dataset": {"layout": "text_classification"}})
    assert by_check(rep, "dup.conflicting_labels") == []
    assert any(s["check"] == "dup.conflicting_labels" for s in rep.skipped)
    # recognized as a corpus before tokenization (raw_text): a label check does not apply, never skipped
    rep = run(p)
    assert by_check(rep, "dup.conflicting_labels") == []
    assert not any(s["check"] == "dup.conflicting_labels" for s in rep.skipped)


def test_tokenized_rows_across_shards(tmp_path):
    ids = [[1, 2, 3], [4, 5], [1, 2, 3]]
    write(tmp_path, "a.parquet", pl.DataFrame({"input_ids": ids[:2], "attention_mask": [[1, 1, 1], [1, 1]]}))
    write(tmp_path, "b.parquet", pl.DataFrame({"input_ids": [[1, 2, 3], [1, 2, 3]], "attention_mask": [[1, 1, 1], [1, 1, 0]]}))
    f = one(run(tmp_path), "dup.exact_across_shards")
    assert f.count == 1
    assert [e.value for e in f.examples] == ["b.parquet row 0 = a.parquet row 0"]


@pytest.fixture
def splits(tmp_path):
    root = tmp_path / "ds"
    write(root, "train/a.parquet", {"text": ["a", "b", "c"], "label": [0, 1, 0]})
    write(root, "train/b.parquet", {"text": ["d", "e", "a"], "label": [1, 0, 0]})
    write(root, "test/t.parquet", {"text": ["x", "b", "e", "y"], "label": [0, 0, 0, 1]})
    write(root, "val/v.parquet", {"text": ["c", "z"], "label": [0, 0]})
    return root


def test_split_overlap_with_splits(splits):
    rep = run(splits, {"splits": {"test": "test/*", "train": "train/*", "validation": "val/*"}})
    fs = sorted(by_check(rep, "dup.split_overlap"), key=lambda f: f.details["split"])
    assert [(f.details["split"], f.count) for f in fs] == [("test", 2), ("validation", 1)]
    t = fs[0]
    assert t.severity == "error" and t.fails_policy is False  # fail_on="never" in these runs
    # label excluded: test "b" (label 0) leaks train "b" (label 1)
    assert t.details["examples"] == [
        {"shard": "test/t.parquet", "row": 1, "train_shard": "train/a.parquet", "train_row": 1},
        {"shard": "test/t.parquet", "row": 2, "train_shard": "train/b.parquet", "train_row": 1}]
    assert t.shards == ("test/t.parquet",)
    # within train, "a" repeats across two shards (same split): exact_across_shards; across splits: not
    f = one(rep, "dup.exact_across_shards")
    assert f.count == 1 and [e.value for e in f.examples] == ["train/b.parquet row 2 = train/a.parquet row 0"]


def test_training_split_is_first_listed_without_train(splits):
    rep = run(splits, {"splits": {"base": "train/*", "test": "test/*"}})
    assert [(f.details["train_split"], f.count) for f in by_check(rep, "dup.split_overlap")] == [("base", 2)]


def test_split_overlap_no_train_shards(splits):
    rep = run(splits, {"splits": {"train": "nothing/*", "test": "test/*"}})
    assert by_check(rep, "dup.split_overlap") == []
    assert any(s["check"] == "dup.split_overlap" and "training split" in s["reason"] for s in rep.skipped)


def test_split_overlap_against(splits):
    rep = run(splits / "test", against=splits / "train")
    f = one(rep, "dup.split_overlap")
    assert f.count == 2
    assert [e.value for e in f.examples] == ["t.parquet row 1 = against:a.parquet row 1",
                                            "t.parquet row 2 = against:b.parquet row 1"]


def test_split_overlap_against_cli(splits, tmp_path):
    out = tmp_path / "r.json"
    p = run_cli("audit", str(splits / "test"), "--against", str(splits / "train"), "--against", str(splits / "val"),
                "--no-cache", "--report-dir", str(tmp_path / "rep"), "--output", str(out), "--no-progress")
    assert p.returncode == 1, p.stderr
    import json

    d = json.loads(out.read_text())
    [f] = [f for f in d["findings"] if f["check"] == "dup.split_overlap"]
    assert f["count"] == 2 and f["fails_policy"] is True


def test_assign_splits():
    paths = ["train/a.parquet", "train/x/b.parquet", "test/t.parquet", "other.parquet"]
    assert assign_splits(paths, {"train": "train/*", "test": "./test/*"}) == {
        "train/a.parquet": "train", "train/x/b.parquet": "train", "test/t.parquet": "test"}


# ------------------------------------------------------------------------------ real data


def test_realdata_dkhate_mbert_split_overlap(realdata):
    root = realdata / "dkhate_danish_offensive" / "dkhate_mbert"
    rep = run(root, {"splits": {"train": "train/*", "test": "test/*"}})
    f = one(rep, "dup.split_overlap")
    assert f.count == 9
    assert f.details["split"] == "test" and f.details["train_split"] == "train"
    assert f.details["examples"][0] == {"shard": "test/data-00000-of-00001.arrow", "row": 8,
                                        "train_shard": "train/data-00000-of-00001.arrow", "train_row": 33}
    assert by_check(rep, "dup.exact_across_shards") == []  # across splits it is leakage, not a repeat
    # the same leak through --against
    rep2 = run(root / "test", against=root / "train")
    assert one(rep2, "dup.split_overlap").count == 9


def test_realdata_sst2_conflicting_labels(realdata):
    p = realdata / "sst2_vi_glue_parquet" / "train-00000-of-00001.parquet"
    rep = run(p, {"columns": {"text": "sentence", "label": "label"}})
    f = one(rep, "dup.conflicting_labels")
    assert f.count == 149
    assert f.column == "label"
    hashes = pl.read_parquet(p).group_by("sentence").agg(pl.col("label").n_unique().alias("k")).filter(pl.col("k") > 1)
    assert hashes.height == 149  # independent count with polars


def test_split_overlap_against_with_unreadable_shard(splits):
    (splits / "train" / "broken.parquet").write_bytes(b"PAR1 not really")
    rep = run(splits / "test", against=splits / "train")
    assert one(rep, "dup.split_overlap").count == 2  # the broken shard matches nothing, no crash


def test_payload_survives_the_result_cache(splits, tmp_path, monkeypatch):
    import datacheck.engine.shard as api

    cfg = {"splits": {"train": "train/*", "test": "test/*"}}
    first = run(splits, cfg, cache_dir=tmp_path / "cache")
    audited: list[str] = []
    real = api.audit_shard
    monkeypatch.setattr(api, "audit_shard", lambda ds, *a, **k: audited.append(ds.rel) or real(ds, *a, **k))
    again = run(splits, cfg, cache_dir=tmp_path / "cache")
    assert audited == []  # every shard (and its row hashes) answered from the cache
    for rep in (first, again):
        assert one(rep, "dup.split_overlap").count == 2
        # train's "a" in two shards, and val/v.parquet (in no split here) repeating train's ("c", 0):
        # a shard in no split is compared with every split, never left out
        f = one(rep, "dup.exact_across_shards")
        assert [e.value for e in f.examples] == ["train/b.parquet row 2 = train/a.parquet row 0",
                                                 "val/v.parquet row 0 = train/a.parquet row 2"]


def test_a_shard_in_no_split_is_compared_with_every_split_and_is_the_copy(tmp_path):
    """extra/e.parquet, matched by no [splits] glob (it sorts before test/ and train/), repeats a train
    row, a test row, and a row in both: each of its three rows is a copy of the split's row (the
    split's row is the one a loader reads), and the test row in train stays dup.split_overlap only."""
    root = tmp_path / "ds"
    train = {"text": ["a", "b", "c", "shared"], "label": [0, 1, 0, 1]}
    test = {"text": ["t1", "shared", "t2"], "label": [0, 1, 1]}
    extra = {"text": ["b", "t2", "shared", "own"], "label": [1, 1, 1, 0]}
    write(root, "train/a.parquet", train)
    write(root, "test/t.parquet", test)
    write(root, "extra/e.parquet", extra)
    rep = run(root, {"splits": {"train": "train/*", "test": "test/*"}})
    pairs = lambda d: list(zip(d["text"], d["label"]))  # noqa: E731
    # expected: each extra row whose (text, label) is in train or test, with the first such split row
    # in path order (test/ sorts before train/)
    want = []
    for i, key in enumerate(pairs(extra)):
        hit = [("test/t.parquet", j) for j, k in enumerate(pairs(test)) if k == key]
        hit += [("train/a.parquet", j) for j, k in enumerate(pairs(train)) if k == key]
        if hit:
            want.append((i, hit[0]))
    f = one(rep, "dup.exact_across_shards")
    assert f.count == len(want) == 3
    assert [(e["row"], (e["first_shard"], e["first_row"])) for e in f.details["examples"]] == want
    assert f.details["per_shard"] == {"extra/e.parquet": 3}
    leak = [t for t in test["text"] if t in train["text"]]
    assert one(rep, "dup.split_overlap").count == len(leak) == 1


# ------------------------------------------- A [splits] glob that matches nothing


def test_split_glob_matching_nothing_is_a_skip_naming_split_and_glob(splits):
    rep = run(splits, {"splits": {"train": "train/*", "eval": "eval*"}})
    reasons = [s["reason"] for s in rep.skipped if s["check"] == "dup.split_overlap"]
    assert any("[splits] eval = 'eval*' matches no shard" in r and "split 'eval' is not checked" in r for r in reasons)
    assert by_check(rep, "dup.split_overlap") == []
    # the text output shows it too
    p = run_cli("audit", str(splits), "--config", str(_toml(splits.parent, 'train = "train/*"\neval = "eval*"')),
                "--no-cache", "--report-dir", str(splits.parent / "r"), "--no-progress")
    assert "[splits] eval = 'eval*' matches no shard" in p.stdout


def _toml(folder, splits_body: str):
    path = folder / "cfg.toml"
    path.write_text("[splits]\n" + splits_body + "\n")
    return path


# --------------------------------- "no label" values never conflict with a label


@pytest.mark.parametrize("cfg, other, conflict", [
    ({}, -1, False),  # a negative sentinel (unlabelled GLUE test rows)
    ({}, -100, False),  # the default ignore_index
    ({"labels": {"ignore_index": 7}}, 7, False),  # a configured ignore_index
    ({}, None, False),  # null
    ({}, 1, True),  # a real second label
])
def test_conflicting_labels_ignores_no_label_values(tmp_path, cfg, other, conflict):
    write(tmp_path, "a.parquet", {"text": ["same", "x"], "label": [0, 1]})
    write(tmp_path, "b.parquet", pl.DataFrame({"text": ["same", "y"], "label": [other, 0]}, schema={"text": pl.String, "label": pl.Int64}))
    got = by_check(run(tmp_path, cfg), "dup.conflicting_labels")
    assert [f.count for f in got] == ([1] if conflict else [])


def test_conflicting_labels_string_sentinels_when_dtypes_differ(tmp_path):
    """Shards disagreeing on the label dtype compare labels as text; "-1" is still no label."""
    write(tmp_path, "a.parquet", {"text": ["same", "other"], "label": ["0", "1"]})
    write(tmp_path, "b.parquet", {"text": ["same", "more"], "label": [-1, 0]})
    assert by_check(run(tmp_path), "dup.conflicting_labels") == []


@pytest.mark.parametrize("ignore", [-100, -1])
def test_realdata_sst2_all_splits_conflicting_labels(realdata, ignore):
    """train + validation + test (test labels are all -1): the conflicts are train's 149, with the
    default ignore_index and with ignore_index = -1."""
    root = realdata / "sst2_vi_glue_parquet"
    rep = run(root, {"columns": {"text": "sentence", "label": "label"}, "labels": {"ignore_index": ignore}})
    f = one(rep, "dup.conflicting_labels")
    assert f.count == 149
    assert set(f.shards) == {"train-00000-of-00001.parquet"}


# ------------------------------------------------------------------ Values, not storage
@pytest.mark.parametrize("a, b", [
    (pl.Series([[1, 2], [3], None, [4, None]], dtype=pl.List(pl.Int32)),
     pl.Series([[1, 2], [3], None, [4, None]], dtype=pl.List(pl.Int64))),
    (pl.Series([[1, 2], [3]], dtype=pl.List(pl.UInt16)), pl.Series([[1, 2], [3]], dtype=pl.List(pl.Int64))),
    (pl.Series([[1, 2], [3, 4]], dtype=pl.Array(pl.Int32, 2)), pl.Series([[1, 2], [3, 4]], dtype=pl.List(pl.Int64))),
    (pl.Series([[1, 2], [3]], dtype=pl.List(pl.UInt64)), pl.Series([[1, 2], [3]], dtype=pl.List(pl.Int64))),
    (pl.Series([[0.5, 1.0]], dtype=pl.List(pl.Float32)), pl.Series([[0.5, 1.0]], dtype=pl.List(pl.Float64))),
    (pl.Series(["a", "b", None], dtype=pl.Categorical), pl.Series(["a", "b", None], dtype=pl.String)),
    (pl.Series(["a", "b"], dtype=pl.Enum(["b", "a"])), pl.Series(["a", "b"], dtype=pl.String)),
    (pl.Series([1, 2, None], dtype=pl.Int16), pl.Series([1, 2, None], dtype=pl.Int64)),
    (pl.Series([[[1], [2, 3]]], dtype=pl.List(pl.List(pl.Int8))), pl.Series([[[1], [2, 3]]], dtype=pl.List(pl.List(pl.Int64)))),
])
def test_row_hash_depends_on_values_not_storage(a, b):
    assert row_hash_series([a]).to_list() == row_hash_series([b]).to_list()


def test_row_hash_keeps_the_int64_encoding_of_v1():
    # int64 lists, strings and int64 scalars hash as in datacheck-row-v1 (the pinned values of that
    # version for the same values stored as int64): only other storage moved to them
    ids64 = IDS.cast(pl.List(pl.Int64))
    assert ROW_ENCODING == "datacheck-row-v5"
    assert row_hash_series([ids64, TXT, LAB]).to_list() == GOLDEN


def test_leakage_across_storage_widths_is_found(tmp_path):
    (tmp_path / "train").mkdir()
    (tmp_path / "eval").mkdir()
    pq.write_table(pa.table({"input_ids": pa.array([[1, 2, 3], [4, 5]], pa.list_(pa.int32())),
                             "text": pa.array(["a", "b"], pa.string())}), tmp_path / "train" / "t.parquet")
    pq.write_table(pa.table({"input_ids": pa.array([[1, 2, 3], [9]], pa.large_list(pa.int64())),
                             "text": pa.array(["a", "z"], pa.large_string())}),
                   tmp_path / "eval" / "e.parquet")
    rep = datacheck.audit(str(tmp_path / "eval"), config={}, against=str(tmp_path / "train"))
    (f,) = [f for f in rep.findings if f.check == "dup.split_overlap"]
    assert f.count == 1 and f.examples[0].row == 0
    assert rep.row_content["encoding"] == "datacheck-row-v5"


def test_leakage_of_chat_messages_across_jsonl_and_parquet_is_found(tmp_path):
    """datacheck-row-v3: a struct's fields are hashed in name order. The JSONL reader gives struct
    fields in name order ({content, role}), a parquet file its writer's ({role, content}); the same
    conversation in both is the same row (v2 hashed the field orders differently: a silent miss)."""
    (tmp_path / "train").mkdir()
    (tmp_path / "eval").mkdir()
    conv = [[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
            [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]]
    pq.write_table(pa.table({"messages": conv}), tmp_path / "train" / "t.parquet")
    assert pq.read_schema(tmp_path / "train" / "t.parquet").field("messages").type.value_type.names == ["role", "content"]
    lines = [json.dumps({"messages": [{"role": "user", "content": "other"}, {"role": "assistant", "content": "x"}]}),
             json.dumps({"messages": conv[1]})]
    (tmp_path / "eval" / "e.jsonl").write_text("\n".join(lines) + "\n")
    rep = datacheck.audit(str(tmp_path / "eval"), config={}, against=str(tmp_path / "train"))
    (f,) = [f for f in rep.findings if f.check == "dup.split_overlap"]
    assert f.count == 1 and f.examples[0].row == 1
    a = pl.Series("m", conv)
    b = pl.Series("m", [[{"content": m["content"], "role": m["role"]} for m in c] for c in conv])
    assert a.dtype != b.dtype and row_hash_series([a]).to_list() == row_hash_series([b]).to_list()


def test_jsonl_and_parquet_chat_shards_are_one_schema(tmp_path):
    """Shards are compared on dtypes with a struct's fields in name order: a JSONL shard's messages
    ({content, role}, sorted by the reader) and a parquet shard's ({role, content}, as written) are
    one layout (no schema.inconsistent), and the report names both dtypes alike."""
    conv = [[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]]
    pq.write_table(pa.table({"messages": conv}), tmp_path / "a.parquet")
    (tmp_path / "b.jsonl").write_text(json.dumps({"messages": [{"role": "user", "content": "yo"},
                                                               {"role": "assistant", "content": "hey"}]}) + "\n")
    rep = datacheck.audit(str(tmp_path), config={})
    assert not [f for f in rep.findings if f.check == "schema.inconsistent"]
    dtypes = {s["path"]: s["columns"]["messages"] for s in rep.to_dict()["shards"]}
    assert len(set(dtypes.values())) == 1 and "{'content': String, 'role': String}" in dtypes["a.parquet"]


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
