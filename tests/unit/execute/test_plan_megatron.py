"""The plan of Megatron .bin/.idx pairs is Megatron's own order (GPTDataset + MegatronPretrainingSampler),
never torch's DistributedSampler over the documents; a missing fact is said, never guessed."""
from __future__ import annotations

import struct
from pathlib import Path

import megatronref as ref
import numpy as np
import polars as pl
import pytest

from datacheck.execute.plan import BatchPlan, MegatronPlan, build_plan, rows_of_step
from datacheck.model.config import config_from_dict
from datacheck.model.errors import UsageError

FACTS = {"batch": {"batch_size": 2, "world_size": 2, "grad_accum": 2},
         "megatron": {"seq_length": 6, "train_iters": 5, "seed": 11, "split": "1"}}


def _pair(folder: Path, name: str, docs: list[list[list[int]]]) -> list[list[int]]:
    """Write ``folder/name.{bin,idx}`` (MMIDIDX v1, uint16; each document a list of sequences, as
    preprocess_data.py --split-sentences writes them). Returns the sequences in order."""
    folder.mkdir(parents=True, exist_ok=True)
    seqs = [s for d in docs for s in d]
    lens = np.array([len(s) for s in seqs], dtype=np.int32)
    ptrs = np.concatenate([[0], np.cumsum(lens[:-1].astype(np.int64) * 2)]).astype(np.int64)
    doc_idx = np.concatenate([[0], np.cumsum([len(d) for d in docs])]).astype(np.int64)
    (folder / f"{name}.idx").write_bytes(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(seqs), len(doc_idx))
                                         + lens.tobytes() + ptrs.tobytes() + doc_idx.tobytes())
    (folder / f"{name}.bin").write_bytes(np.array([t for s in seqs for t in s], dtype=np.uint16).tobytes())
    return seqs


def _docs(rng: np.random.Generator, n_docs: int) -> list[list[list[int]]]:
    out, t = [], 1
    for _ in range(n_docs):
        doc = []
        for _ in range(int(rng.integers(1, 4))):
            k = int(rng.integers(0, 9))
            doc.append(list(range(t, t + k)))
            t += k
        out.append(doc)
    return out


def test_rows_are_the_documents_megatrons_samples_read(tmp_path):
    docs = _docs(np.random.default_rng(5), 12)
    seqs = _pair(tmp_path / "d", "x", docs)
    cfg = config_from_dict(FACTS)
    plan = build_plan([str(tmp_path / "d")], cfg)
    assert isinstance(plan, MegatronPlan) and plan.run_steps == 5
    doc_tokens = [[t for s in d for t in s] for d in docs]  # a row's tokens, as the document is read
    sizes = [len(s) for s in seqs]
    for step in range(5):
        rows = rows_of_step(plan, step)
        want = ref.step_reads(sizes, 6, 11, "1", 1, 2, 2, 2, 5 * 8, step)
        assert [(r.rank, r.micro_batch, r.sample) for r in rows] == [(w[0], w[1], w[2]) for w in want]
        for r, (_, _, _, seq, a, b) in zip(rows, want):
            # the row's token range holds exactly the sequence's tokens the sample reads
            assert r.shard == "x.bin" and r.global_index == r.row
            assert doc_tokens[r.row][r.tokens[0]:r.tokens[1]] == seqs[seq][a:b]
        # each sample reads seq_length + 1 tokens
        per_sample: dict[int, int] = {}
        for r in rows:
            per_sample[r.sample] = per_sample.get(r.sample, 0) + r.tokens[1] - r.tokens[0]
        assert sorted(per_sample) == list(range(step * 8, step * 8 + 8)) and set(per_sample.values()) == {7}
    # one rank, one micro-batch
    only = rows_of_step(plan, 2, rank=1, micro_batch=0)
    assert {(r.rank, r.micro_batch) for r in only} == {(1, 0)} and {r.sample for r in only} == {2 * 8 + 2, 2 * 8 + 3}
    with pytest.raises(UsageError, match="steps 0..4"):
        rows_of_step(plan, 5)


@pytest.mark.parametrize("section, key", [("megatron", "seq_length"), ("megatron", "train_iters"),
                                          ("batch", "batch_size")])
def test_a_missing_fact_is_said_never_torch(tmp_path, section, key):
    _pair(tmp_path / "d", "x", _docs(np.random.default_rng(1), 5))
    facts = {k: dict(v) for k, v in FACTS.items()}
    facts[section].pop(key)
    with pytest.raises(UsageError, match=key):
        build_plan([str(tmp_path / "d")], config_from_dict(facts))


def test_loader_torch_is_the_documented_way_back_to_torch(tmp_path):
    pytest.importorskip("torch")
    _pair(tmp_path / "d", "x", _docs(np.random.default_rng(2), 9))
    plan = build_plan([str(tmp_path / "d")], config_from_dict({"batch": {"batch_size": 2, "loader": "torch"}}))
    assert isinstance(plan, BatchPlan) and plan.space.n_rows == 9


@pytest.mark.parametrize("extra, message", [
    ({"megatron": {"dataloader_type": "cyclic", "data_sharding": False}}, "no-data-sharding"),
    ({"batch": {"max_tokens": 100}}, "max_tokens"),
])
def test_what_is_not_simulated_is_refused(tmp_path, extra, message):
    _pair(tmp_path / "d", "x", _docs(np.random.default_rng(3), 6))
    facts = {k: {**v, **extra.get(k, {})} for k, v in FACTS.items()}
    with pytest.raises(UsageError, match=message):
        build_plan([str(tmp_path / "d")], config_from_dict(facts))


def test_several_prefixes_need_the_runs_data_path(tmp_path):
    _pair(tmp_path / "d", "a", _docs(np.random.default_rng(3), 6))
    _pair(tmp_path / "d", "b", _docs(np.random.default_rng(4), 6))
    with pytest.raises(UsageError, match="2 Megatron pairs .* blend.*set \\[megatron\\] data_path"):
        build_plan([str(tmp_path / "d")], config_from_dict(FACTS))


@pytest.mark.parametrize("weights", [[0.3, 0.7], None])
def test_blend_rows_are_the_documents_of_each_prefix(tmp_path, weights):
    docs_a, docs_b = _docs(np.random.default_rng(7), 10), _docs(np.random.default_rng(8), 14)
    seqs_a = _pair(tmp_path / "d", "a", docs_a)
    seqs_b = _pair(tmp_path / "d" / "sub", "b", docs_b)
    # the run's folders are not the planned ones: the prefixes name the pairs by file name
    words = ["/run/data/b", "/run/data/a"] if weights is None else ["0.7", "/run/data/b", "0.3", "/run/data/a"]
    facts = {"batch": FACTS["batch"], "megatron": {**FACTS["megatron"], "data_path": words}}
    plan = build_plan([str(tmp_path / "d")], config_from_dict(facts))
    assert isinstance(plan, MegatronPlan)
    shards = [sp.path for sp in plan.space.shards]
    assert shards == ["a.bin", "sub/b.bin"] and [sp.path for sp in plan.spans] == ["sub/b.bin", "a.bin"]
    n_a = len(docs_a)  # the 10 rows (documents) of a.bin come first in the row space
    sizes = [[len(s) for s in seqs_b], [len(s) for s in seqs_a]]
    seqs = [seqs_b, seqs_a]
    docs = [[[t for s in d for t in s] for d in docs_b], [[t for s in d for t in s] for d in docs_a]]
    seq_doc = [[k for k, d in enumerate(dd) for _ in d] for dd in (docs_b, docs_a)]
    w = None if weights is None else [0.7, 0.3]
    for step in range(plan.run_steps):
        rows = rows_of_step(plan, step)
        want = ref.blend_step_reads(sizes, w, 6, 11, "1", 1, 2, 2, 2, 5 * 8, step)
        assert [(r.rank, r.micro_batch, r.sample) for r in rows] == [(x[0], x[1], x[2]) for x in want]
        for r, (_, _, _, d, seq, a, b) in zip(rows, want):
            assert r.shard == ["sub/b.bin", "a.bin"][d] and r.row == seq_doc[d][seq]
            assert r.global_index == r.row + (n_a if d == 0 else 0)
            assert docs[d][r.row][r.tokens[0]:r.tokens[1]] == seqs[d][seq][a:b]
    # both prefixes are read by the run's first steps
    assert {r.shard for s in range(plan.run_steps) for r in rows_of_step(plan, s)} == {"a.bin", "sub/b.bin"}
    summary = plan.summary()
    assert [b["shard"] for b in summary["blend"]] == ["sub/b.bin", "a.bin"]
    assert [b["weight"] for b in summary["blend"]] == ([0.7, 0.3] if weights else [None, None])


@pytest.mark.parametrize("words, message", [
    (["0.5", "/x/a", "0.5", "/x/c"], "'/x/c' names none of the planned"),
    (["/x/a"], "sub/b.bin: planned, but in no prefix"),
    (["0.5", "/x/a", "0.5"], "WEIGHT PREFIX|names none"),
])
def test_a_blend_that_does_not_name_the_planned_pairs_is_refused(tmp_path, words, message):
    _pair(tmp_path / "d", "a", _docs(np.random.default_rng(3), 6))
    _pair(tmp_path / "d" / "sub", "b", _docs(np.random.default_rng(4), 6))
    facts = {"batch": FACTS["batch"], "megatron": {**FACTS["megatron"], "data_path": words}}
    with pytest.raises(UsageError, match=message):
        build_plan([str(tmp_path / "d")], config_from_dict(facts))


def test_same_file_name_in_two_folders_needs_more_of_the_path(tmp_path):
    _pair(tmp_path / "d" / "p", "x", _docs(np.random.default_rng(3), 6))
    _pair(tmp_path / "d" / "q", "x", _docs(np.random.default_rng(4), 6))
    facts = {"batch": FACTS["batch"], "megatron": {**FACTS["megatron"], "data_path": ["1", "/r/x", "1", "/r/q/x"]}}
    with pytest.raises(UsageError, match="'/r/x' names p/x.bin and q/x.bin equally well"):
        build_plan([str(tmp_path / "d")], config_from_dict(facts))
    facts["megatron"]["data_path"] = ["1", "/r/p/x", "1", "/r/q/x"]
    plan = build_plan([str(tmp_path / "d")], config_from_dict(facts))
    assert isinstance(plan, MegatronPlan) and [sp.path for sp in plan.spans] == ["p/x.bin", "q/x.bin"]


def test_mixed_shards_need_the_loader_named(tmp_path):
    _pair(tmp_path / "d", "a", _docs(np.random.default_rng(3), 6))
    pl.DataFrame({"input_ids": [[1, 2], [3]]}).write_parquet(tmp_path / "d" / "p.parquet")
    with pytest.raises(UsageError, match="mix Megatron .* set \\[batch\\] loader"):
        build_plan([str(tmp_path / "d")], config_from_dict(FACTS))
    facts = {**FACTS, "batch": {**FACTS["batch"], "loader": "megatron"}}
    with pytest.raises(UsageError, match="p.parquet is not a Megatron"):
        build_plan([str(tmp_path / "d")], config_from_dict(facts))
