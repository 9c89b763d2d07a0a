"""dist.length_drift, dist.label_drift (PSI over exact histograms, minimum counts, single-class
shards), on small multi-shard folders."""
from __future__ import annotations

import math

import numpy as np
import pytest
from dshelp import by_check, one, run, write

from datacheck.checks.dist import MIN_ROWS, PSI_THRESHOLD, _decile_edges, psi


def test_psi_reference_values():
    assert psi([50, 50], [50, 50]) == 0.0
    expect = (0.9 - 0.5) * math.log(0.9 / 0.5) + (0.1 - 0.5) * math.log(0.1 / 0.5)
    assert psi([90, 10], [50, 50]) == pytest.approx(expect)
    assert psi([10, 0], [5, 5]) == pytest.approx((1 - 0.5) * math.log(1 / 0.5) + (1e-4 - 0.5) * math.log(1e-4 / 0.5))
    assert psi([], []) == 0.0 and psi([0, 0], [1, 1]) == 0.0


def test_decile_edges_of_an_integer_histogram():
    assert _decile_edges({k: 1 for k in range(1, 101)}, 10) == [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    assert _decile_edges({5: 100}, 10) == [5]  # ties make fewer bins
    assert _decile_edges({1: 50, 9: 50}, 10) == [1, 9]


def _texts(rng, n, lo, hi):
    return ["x" * int(k) for k in rng.integers(lo, hi, size=n)]


def test_length_drift_flags_only_the_odd_shard(tmp_path):
    rng = np.random.default_rng(0)
    for i in range(3):
        write(tmp_path, f"s{i}.parquet", {"text": _texts(rng, 300, 10, 60)})
    write(tmp_path, "s3.parquet", {"text": _texts(rng, 300, 200, 260)})  # another preprocessing
    rep = run(tmp_path)
    f = one(rep, "dist.length_drift")
    assert f.shards == ("s3.parquet",)
    assert f.details["psi"] > PSI_THRESHOLD
    assert f.count == 300 and f.severity == "warn" and f.column == "text"
    assert "chars" in f.message


def test_length_drift_no_verdict_below_min_rows(tmp_path):
    rng = np.random.default_rng(1)
    write(tmp_path, "a.parquet", {"text": _texts(rng, 300, 10, 60)})
    write(tmp_path, "b.parquet", {"text": _texts(rng, 300, 10, 60)})
    write(tmp_path, "c.parquet", {"text": _texts(rng, MIN_ROWS - 1, 500, 600)})  # odd, but too small
    rep = run(tmp_path)
    assert by_check(rep, "dist.length_drift") == []
    [sk] = [s for s in rep.skipped if s["check"] == "dist.length_drift"]
    assert "c.parquet" in sk["reason"] and f"fewer than {MIN_ROWS}" in sk["reason"]


def test_label_drift_psi(tmp_path):
    rng = np.random.default_rng(2)
    for i in range(3):
        write(tmp_path, f"s{i}.parquet", {"text": [f"{i}-{k}" for k in range(400)],
                                          "label": rng.choice(3, size=400, p=[0.5, 0.3, 0.2]).tolist()})
    write(tmp_path, "s3.parquet", {"text": [f"3-{k}" for k in range(400)],
                                   "label": rng.choice(3, size=400, p=[0.1, 0.1, 0.8]).tolist()})
    rep = run(tmp_path, {"labels": {"num_classes": 3}})
    f = one(rep, "dist.label_drift")
    assert f.shards == ("s3.parquet",) and f.details["psi"] > PSI_THRESHOLD


def test_single_class_shard_is_label_drift(tmp_path):
    write(tmp_path, "a.parquet", {"text": [f"a{k}" for k in range(40)], "label": [0, 1] * 20})
    write(tmp_path, "b.parquet", {"text": [f"b{k}" for k in range(40)], "label": [0, 1] * 20})
    write(tmp_path, "c.parquet", {"text": [f"c{k}" for k in range(12)], "label": [1] * 12})  # 0.5**12 < 0.001
    write(tmp_path, "d.parquet", {"text": [f"d{k}" for k in range(5)], "label": [0] * 5})  # 0.5**5: chance
    rep = run(tmp_path)
    f = one(rep, "dist.label_drift")
    assert f.shards == ("c.parquet",)
    assert f.details["single_class"] == 1 and f.details["rows"] == 12
    assert f.details["chance"] == pytest.approx((40 / 85) ** 12)


def test_drift_compares_within_each_split(tmp_path):
    rng = np.random.default_rng(3)
    for i in range(2):
        write(tmp_path, f"train/s{i}.parquet", {"text": _texts(rng, 300, 10, 60)})
        write(tmp_path, f"test/s{i}.parquet", {"text": _texts(rng, 300, 200, 260)})
    # mixed together, the splits differ
    assert by_check(run(tmp_path, {"dataset": {"infer_splits": False}}), "dist.length_drift") != []
    rep = run(tmp_path, {"splits": {"train": "train/*", "test": "test/*"}})
    assert by_check(rep, "dist.length_drift") == []
    # the folder names are the Hub's split names: the same splits without [splits]
    assert by_check(run(tmp_path), "dist.length_drift") == []


def test_token_length_drift(tmp_path):
    import polars as pl

    def shard(n, lo, hi, seed):
        r = np.random.default_rng(seed)
        return pl.DataFrame({"input_ids": [list(range(int(k))) for k in r.integers(lo, hi, size=n)]})

    write(tmp_path, "a.parquet", shard(250, 5, 30, 0))
    write(tmp_path, "b.parquet", shard(250, 5, 30, 1))
    write(tmp_path, "c.parquet", shard(250, 60, 64, 2))
    f = one(run(tmp_path), "dist.length_drift")
    assert f.shards == ("c.parquet",) and "tokens" in f.message


# ------------------------------------------------- Only like shards are compared


@pytest.mark.slow
def test_length_drift_never_mixes_tokens_and_chars(tmp_path):
    """A tokenized shard (lengths in tokens of input_ids) and text shards (lengths in characters)
    are not compared; like shards still are."""
    rng = np.random.default_rng(7)
    for i in range(2):
        write(tmp_path, f"txt{i}.parquet", {"text": _texts(rng, 300, 10, 60)})
    ids = [[1] * int(k) for k in rng.integers(300, 400, size=300)]  # far longer, but in tokens
    write(tmp_path, "tok.parquet", {"input_ids": ids})
    rep = run(tmp_path)
    assert by_check(rep, "dist.length_drift") == []
    [sk] = [s for s in rep.skipped if s["check"] == "dist.length_drift" and "differently" in s["reason"]]
    assert "tokens of 'input_ids' in 1 shard(s)" in sk["reason"] and "chars of 'text' in 2 shard(s)" in sk["reason"]
    # a third text shard of another length is still flagged among the text shards
    write(tmp_path, "txt2.parquet", {"text": _texts(rng, 300, 200, 260)})
    write(tmp_path, "txt3.parquet", {"text": _texts(rng, 300, 10, 60)})
    assert one(run(tmp_path), "dist.length_drift").shards == ("txt2.parquet",)


def test_label_drift_never_mixes_class_names_and_ids(tmp_path):
    """'NOT'/'OFF' labels in one shard and 0/1 in others are two label domains, not a drift."""
    rng = np.random.default_rng(8)
    for i in range(2):
        write(tmp_path, f"ids{i}.parquet", {"text": [f"{i}-{k}" for k in range(300)],
                                            "label": rng.choice(2, size=300).tolist()})
    write(tmp_path, "names.parquet", {"text": [f"n-{k}" for k in range(300)],
                                      "label": rng.choice(["NOT", "OFF"], size=300).tolist()})
    rep = run(tmp_path)
    assert by_check(rep, "dist.label_drift") == []
    [sk] = [s for s in rep.skipped if s["check"] == "dist.label_drift" and "differently" in s["reason"]]
    assert "int labels in 'label' in 2 shard(s)" in sk["reason"] and "str labels in 'label' in 1 shard(s)" in sk["reason"]


def test_single_class_message_lists_only_classes_of_the_rest(tmp_path):
    """The rest has classes 0 and 1 (a -1 sentinel of this shard is no class): the message lists two."""
    write(tmp_path, "a.parquet", {"text": [f"a{k}" for k in range(300)], "label": [0, 1] * 150})
    write(tmp_path, "b.parquet", {"text": [f"b{k}" for k in range(60)], "label": [1] * 59 + [-1]})
    f = one(run(tmp_path), "dist.label_drift")
    assert f.shards == ("b.parquet",)
    assert "rest of the dataset has 2 classes (0: 50%, 1: 50%)" in f.message
    assert "-1:" not in f.message
