"""``schema infer`` bounds id columns by the vocabulary and the ``[tokens]`` facts, or leaves them out
with a note; never by the observed min/max of token ids (the next shard holding a rarer token would
fail)."""
from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml
from conftest import run_cli  # noqa: E402

import datacheck
from datacheck.model.config import config_from_dict
from datacheck.tools.infer import infer_contract

L = pl.List(pl.Int64)


def _write(tmp_path: Path, name: str, ids: list[list[int]]) -> Path:
    d = tmp_path / name
    d.mkdir()
    n = [len(x) for x in ids]
    pl.DataFrame({"input_ids": pl.Series(ids, dtype=L),
                  "attention_mask": pl.Series([[1] * k for k in n], dtype=L),  # all ones here
                  "labels": pl.Series([[-100] + x[1:] for x in ids], dtype=L),
                  "token_type_ids": pl.Series([[0] * k for k in n], dtype=L),
                  "position_ids": pl.Series([list(range(k)) for k in n], dtype=L)}).write_parquet(d / "s.parquet")
    return d


def _rules(data):
    return data["datacheck"]["columns"]


def test_bounds_come_from_the_facts_not_the_sample(tmp_path):
    d = _write(tmp_path, "a", [[5, 9, 17], [3, 4, 7]])
    cfg = config_from_dict({"tokens": {"vocab_size": 50257, "type_vocab_size": 2, "max_position_embeddings": 1024}})
    data, notes = infer_contract([str(d)], cfg)
    r = _rules(data)
    assert (r["input_ids"]["min_value"], r["input_ids"]["max_value"]) == (0, 50256)
    assert (r["labels"]["min_value"], r["labels"]["max_value"]) == (-100, 50256)  # ignore_index -100
    assert (r["attention_mask"]["min_value"], r["attention_mask"]["max_value"]) == (0, 1)  # observed was 1..1
    assert (r["token_type_ids"]["min_value"], r["token_type_ids"]["max_value"]) == (0, 1)
    assert (r["position_ids"]["min_value"], r["position_ids"]["max_value"]) == (0, 1023)
    assert notes == []


def test_without_facts_id_bounds_are_left_out_with_notes(tmp_path):
    d = _write(tmp_path, "a", [[5, 9, 17], [3, 4, 7]])
    data, notes = infer_contract([str(d)], config_from_dict({}))
    r = _rules(data)
    for c in ("input_ids", "labels", "token_type_ids", "position_ids"):
        assert "min_value" not in r[c] and "max_value" not in r[c], c
    assert (r["attention_mask"]["min_value"], r["attention_mask"]["max_value"]) == (0, 1)
    assert sorted(n.split(":")[0] for n in notes) == [
        "column 'input_ids' (input_ids)", "column 'labels' (labels)", "column 'position_ids' (position_ids)",
        "column 'token_type_ids' (token_type_ids)"]
    # a vocabulary given directly (what --tokenizer passes) bounds the ids
    data, _ = infer_contract([str(d)], config_from_dict({}), vocab_size=30522)
    assert _rules(data)["input_ids"]["max_value"] == 30521


def test_next_shard_with_a_rarer_token_passes_the_inferred_contract(tmp_path):
    first = _write(tmp_path, "first", [[5, 9, 17], [3, 4, 7]])
    nxt = _write(tmp_path, "next", [[5, 40000, 2], [0, 0, 0]])  # id 40000 never seen in the first shard
    cfg_file = tmp_path / "datacheck.toml"
    cfg_file.write_text("[tokens]\nvocab_size = 50257\n")
    out = tmp_path / "contract.yaml"
    r = run_cli("schema", "infer", str(first), "-o", str(out), "--config", str(cfg_file))
    assert r.returncode == 0, r.stderr
    rep = datacheck.audit([str(nxt)], {"tokens": {"vocab_size": 50257}, "dataset": {"schema": str(out)}})
    assert not [f for s in rep.shards for f in s.findings if f.check.startswith("schema.")]
    bad = _write(tmp_path, "bad", [[5, 50257, 2]])  # outside the vocabulary: the contract catches it
    rep = datacheck.audit([str(bad)], {"tokens": {"vocab_size": 50257}, "dataset": {"schema": str(out)}},
                          fail_on="never")
    got = sorted((f.column, f.rows) for s in rep.shards for f in s.findings if f.check == "schema.check")
    assert got == [("input_ids", (0,)), ("labels", (0,))]  # labels hold the same ids


def test_cli_tokenizer_gives_the_vocabulary(tmp_path):
    pytest.importorskip("tokenizers")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "b", "c"]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    d = _write(tmp_path, "a", [[2, 4, 3], [2, 5, 3]])
    r = run_cli("schema", "infer", str(d), "--tokenizer", str(tmp_path / "vocab.txt"), "--config",
                str(_empty_cfg(tmp_path)))
    assert r.returncode == 0, r.stderr
    rules = yaml.safe_load(r.stdout)["datacheck"]["columns"]
    assert (rules["input_ids"]["min_value"], rules["input_ids"]["max_value"]) == (0, len(vocab) - 1)
    assert json.dumps(rules)  # plain values


def _empty_cfg(tmp_path: Path) -> Path:
    p = tmp_path / "empty.toml"
    p.write_text("")
    return p
