"""The partitioned (bounded-memory) cross-shard duplicate pass gives the same findings as the
in-memory one (datacheck/io/hashspill.py, checks/dup/cross.py ``_candidates_partitioned``)."""
from __future__ import annotations

import json
import os
import random
import tempfile

import numpy as np
import polars as pl
import pytest
from conftest import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import datacheck
from datacheck.checks.dup.cross import _candidates_in_memory, _candidates_partitioned
from datacheck.checks.dup.near import ShardSignatures, clusters, shard_clusters, signatures
from datacheck.io.hashspill import ENV_SPILL_ROWS, SpillFolder, partitions, spill_rows
from datacheck.io.rowhash import row_hash_series

DUP = ("dup.exact_across_shards", "dup.conflicting_labels", "dup.split_overlap", "dup.exact_in_shard")


def _frames(shards: list[list[tuple[str, int | None]]], labelled: bool = True) -> list[pl.DataFrame]:
    out = []
    for rows in shards:
        h = row_hash_series([pl.Series([t for t, _ in rows], dtype=pl.String)]).alias("hash")
        cols = {"hash": h}
        if labelled:
            cols["label"] = pl.Series([lab for _, lab in rows], dtype=pl.Int64)
        out.append(pl.DataFrame(cols))
    return out


shard_sets = st.lists(st.lists(st.tuples(st.sampled_from("abcdefgh"), st.sampled_from([0, 1, None])),
                               min_size=0, max_size=12), min_size=1, max_size=6)


@settings(max_examples=examples(60), deadline=None)
@given(shard_sets, st.sampled_from([1, 2, 8, 64]), st.booleans())
def test_partitioned_candidates_equal_in_memory(shards, parts, labelled):
    frames = _frames(shards, labelled)
    want = _candidates_in_memory(frames, labelled)
    folder = SpillFolder()
    try:  # half the shards spilled to files, half in memory: both kinds mix in one pass
        mixed = [folder.spill(f) if k % 2 else f for k, f in enumerate(frames)]
        got = _candidates_partitioned(mixed, labelled)
    finally:
        folder.close()
    if want.height == 0:
        assert got.height == 0
    else:
        assert got.equals(want), (got, want)
    # every row lands in exactly one partition
    total = sum(p.height for p in partitions(frames, parts=parts, buffer_rows=5))
    assert total == sum(f.height for f in frames)


def test_partitions_keep_equal_hashes_together():
    frames = _frames([[("a", 0), ("b", 1)], [("a", 1), ("c", 0)], [("b", 0), ("a", 0)]])
    seen: dict[int, int] = {}
    for k, part in enumerate(partitions(frames, parts=4, buffer_rows=1)):
        for h in part["hash"].unique().to_list():
            assert h not in seen  # one partition per hash value
            seen[h] = k
    assert len(seen) == 3


def test_spill_rows_env(monkeypatch):
    monkeypatch.setenv(ENV_SPILL_ROWS, "12")
    assert spill_rows() == 12
    monkeypatch.setenv(ENV_SPILL_ROWS, "-1")
    with pytest.raises(ValueError, match=ENV_SPILL_ROWS):
        spill_rows()


def _dup_findings(root, cfg) -> str:
    rep = datacheck.audit(str(root), cfg, workers=1)
    fs = sorted((f.to_dict() for f in rep.findings if f.check in DUP), key=lambda d: json.dumps(d, sort_keys=True))
    sk = sorted(json.dumps(s, sort_keys=True, default=str) for s in rep.to_dict()["skipped"]
                if s.get("check") in DUP)
    return json.dumps([fs, sk], sort_keys=True, default=str)


texts = st.sampled_from(["alpha", "beta", "gamma", "delta", "eps", "zeta"])
dataset = st.fixed_dictionaries({
    "train": st.lists(st.lists(st.tuples(texts, st.sampled_from([0, 1])), min_size=1, max_size=8), min_size=1,
                      max_size=3),
    "test": st.lists(st.lists(st.tuples(texts, st.sampled_from([0, 1])), min_size=1, max_size=8), min_size=0,
                     max_size=2),
})


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(dataset)
def test_audit_spilled_equals_in_memory(tmp_path_factory, monkeypatch, data):
    """A whole audit (``[splits]``, labels) with every payload spilled and the partitioned pass
    (``DATACHECK_SPILL_ROWS=0``) reports the same dup findings and skips as in memory."""
    root = tmp_path_factory.mktemp("ds")
    for split, shards in data.items():
        (root / split).mkdir()
        for k, rows in enumerate(shards):
            pl.DataFrame({"text": [t for t, _ in rows], "label": [lab for _, lab in rows]}) \
                .write_parquet(root / split / f"s{k}.parquet")
    cfg = {"splits": {"train": "train/*", "test": "test/*"}} if data["test"] else {}
    monkeypatch.delenv(ENV_SPILL_ROWS, raising=False)
    want = _dup_findings(root, cfg)
    monkeypatch.setenv(ENV_SPILL_ROWS, "0")
    # a temp folder of this test's own: other tests running at the same time (pytest -n) make and
    # remove spill and part folders in the shared one
    private = tmp_path_factory.mktemp("tmp")
    monkeypatch.setenv("TMPDIR", str(private))
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    got = _dup_findings(root, cfg)
    assert got == want
    leftover = [n for n in os.listdir(private) if n.startswith(("datacheck-spill-", "datacheck-parts-"))]
    assert not leftover  # the spill folders are removed after the audit


def test_audit_spilled_planted(tmp_path, monkeypatch):
    """Planted repeats across shards and splits, and a label conflict, found on the spilled path."""
    (tmp_path / "train").mkdir()
    (tmp_path / "test").mkdir()
    pl.DataFrame({"text": ["a", "b", "c"], "label": [0, 1, 0]}).write_parquet(tmp_path / "train" / "a.parquet")
    pl.DataFrame({"text": ["d", "a", "b"], "label": [1, 0, 0]}).write_parquet(tmp_path / "train" / "b.parquet")
    pl.DataFrame({"text": ["x", "c", "d"], "label": [0, 0, 0]}).write_parquet(tmp_path / "test" / "t.parquet")
    monkeypatch.setenv(ENV_SPILL_ROWS, "0")
    rep = datacheck.audit(str(tmp_path), {"splits": {"train": "train/*", "test": "test/*"}}, workers=1)
    by = {f.check: f for f in rep.findings}
    assert by["dup.exact_across_shards"].count == 1  # train/b row 1 ("a", 0) = train/a row 0
    assert by["dup.exact_across_shards"].details["examples"] == [
        {"shard": "train/b.parquet", "row": 1, "first_shard": "train/a.parquet", "first_row": 0}]
    assert by["dup.conflicting_labels"].count == 2  # "b": 1 in a, 0 in b; "d": 1 in train/b, 0 in test
    assert by["dup.split_overlap"].count == 2  # test "c" and "d"
    assert [(e["row"], e["train_shard"], e["train_row"]) for e in by["dup.split_overlap"].details["examples"]] == [
        (1, "train/a.parquet", 2), (2, "train/b.parquet", 0)]


# ------------------------------------------------------------------ near duplicates, shard by shard

def _near_docs(seed: int, n_base: int, copies: int) -> list[str]:
    rng = random.Random(seed)
    docs = []
    for _ in range(n_base):
        base = "".join(rng.choice("abcdefgh ") for _ in range(rng.randint(3, 120)))
        docs.append(base)
        for _ in range(copies):
            v = list(base)
            for _ in range(rng.randint(0, 8)):
                if v:
                    v[rng.randrange(len(v))] = rng.choice("abcdefgh ")
            docs.append("".join(v))
    rng.shuffle(docs)
    return docs


@settings(max_examples=examples(25), deadline=None)
@given(st.integers(0, 10_000), st.lists(st.integers(0, 12), min_size=1, max_size=5), st.sampled_from([0.5, 0.8]))
def test_shard_clusters_equal_clusters(seed, sizes, threshold):
    """LSH over per-shard signature arrays (spilled column-major files, or arrays) == over one array."""
    docs = _near_docs(seed, 12, 2)
    vals, lens = [], []
    for d in docs:
        vals.extend(ord(c) for c in d)
        lens.append(len(d))
    sig, counts = signatures(np.array(vals, dtype=np.uint32), np.array(lens))
    want = clusters(sig, counts > 0, threshold)
    cuts = np.cumsum([0, *sizes])
    cuts = np.unique(np.clip(np.concatenate([cuts, [len(docs)]]), 0, len(docs)))
    folder = SpillFolder()
    try:
        parts = [sig[a:b] for a, b in zip(cuts[:-1], cuts[1:])]
        parts = [folder.spill_array(p) if k % 2 else p for k, p in enumerate(parts)]
        got = shard_clusters(ShardSignatures(parts, counts > 0), threshold)
    finally:
        folder.close()
    for w, g in zip(want, got):
        assert np.array_equal(w, g)


def test_near_duplicate_spilled_equals_in_memory(tmp_path, monkeypatch):
    """A whole audit with ``[dup] near`` and splits: spilled signatures (column-major files) give the same
    dup.near_duplicate finding as signatures in memory."""
    docs = _near_docs(5, 30, 2)
    (tmp_path / "train").mkdir()
    (tmp_path / "test").mkdir()
    for k in range(4):
        split = "test" if k == 3 else "train"
        pl.DataFrame({"text": docs[k::4]}).write_parquet(tmp_path / split / f"s{k}.parquet")
    cfg = {"dup": {"near": True}, "splits": {"train": "train/*", "test": "test/*"}}
    monkeypatch.delenv(ENV_SPILL_ROWS, raising=False)
    want = [f.to_dict() for f in datacheck.audit(str(tmp_path), cfg, workers=1).findings
            if f.check == "dup.near_duplicate"]
    monkeypatch.setenv(ENV_SPILL_ROWS, "0")
    got = [f.to_dict() for f in datacheck.audit(str(tmp_path), cfg, workers=1).findings
           if f.check == "dup.near_duplicate"]
    assert want and want[0]["count"] > 0
    assert got == want
