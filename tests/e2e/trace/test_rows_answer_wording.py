"""The fourth answer ("the rows of that step") says what it rests on.

- Rows audited with a row check that could not run (``tokens.out_of_vocab`` without ``[tokens]
  vocab_size``: the first suspect of a run that crashed on an embedding's index) are not called sound
  without naming it: the answer lists the row checks that did not run (it once said "none fails a data
  check (the rows look sound)" over rows holding a token id past the vocabulary).
- Rows of an explicit ``--step`` on a log with no anomaly are that step's, not "the ledger's steps after
  the log's end" (it once said so with no ledger at all: the rows came from the plan).

A JSONL log of 8 finite steps (``step`` from 1, the count assumed); 64 token rows in two JSONL shards,
every row holding the id 200; ``[batch]`` batch 4, seed 0: log step ``N`` is optimizer step ``N - 1``,
the rows positions ``4 (N - 1) .. 4 (N - 1) + 3`` of ``torch.randperm(64)`` seeded 0 (torch's
DistributedSampler over one replica), computed here.
"""
from __future__ import annotations

import json

import pytest
from realruns import trace_json, write_shards

torch = pytest.importorskip("torch")

N, B, SEED, STEP = 64, 4, 0, 5


def _setup(root, vocab: int | None):
    rows = [{"input_ids": [1 + (i % 7), 200, 3], "labels": [1 + (i % 7), 200, 3]} for i in range(N)]
    write_shards(root / "data", rows, (32, 32))
    (root / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "loss": 3.0 - 0.1 * s}) + "\n"
                                                for s in range(1, 9)))
    cfg = f"[batch]\nbatch_size = {B}\nseed = {SEED}\n" + (f"[tokens]\nvocab_size = {vocab}\n" if vocab else "")
    (root / "datacheck.toml").write_text(cfg)


def _expected_rows() -> list[int]:
    g = torch.Generator()
    g.manual_seed(SEED)
    perm = torch.randperm(N, generator=g).tolist()
    return perm[(STEP - 1) * B:STEP * B]


def _trace(root):
    return trace_json(str(root / "metrics.jsonl"), "--data", str(root / "data"), "--config",
                      str(root / "datacheck.toml"), "--step", str(STEP))


def test_rows_clean_to_the_checks_that_ran_name_those_that_did_not(tmp_path):
    _setup(tmp_path, vocab=None)
    rc, res, err = _trace(tmp_path)
    assert rc == 0, err
    d = res["data"]
    assert d["rows"]["steps"][str(STEP)]["0"] == _expected_rows()
    assert d["rows"]["failing_rows"] == []
    assert "tokens.out_of_vocab" in {s["check"] for s in d["rows"]["skipped"]}
    answer = res["verdict"]["answers"]["rows"]["answer"]
    assert "the rows look sound to the checks that ran" in answer and "tokens.out_of_vocab" in answer
    assert "schema." not in answer  # the opt-in contract is no missing fact
    assert "the ledger's steps after the log's end" not in answer and "stopped with an error" not in answer


def test_with_the_fact_the_same_rows_fail(tmp_path):
    _setup(tmp_path, vocab=50)
    rc, res, err = _trace(tmp_path)
    assert rc == 1, err
    rows = res["data"]["rows"]
    assert rows["steps"][str(STEP)]["0"] == _expected_rows()
    assert sorted(int(r) for r in rows["row_checks"]) == sorted(_expected_rows())
    assert all(any(c.startswith("tokens.out_of_vocab") for c in v) for v in rows["row_checks"].values())
    assert "tokens.out_of_vocab" not in {s["check"] for s in rows["skipped"]}
