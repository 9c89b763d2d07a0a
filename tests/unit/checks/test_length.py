"""length.over_max / length.mismatch and the length stats, on inline frames and against plain-Python
references (the reference test of length.over_max and length.mismatch checks tokens.out_of_vocab on the same
random frames)."""
from __future__ import annotations

import math
import tempfile
from pathlib import Path

import polars as pl
import pytest
from checkhelp import audit_df, findings, one, shard_result, skipped_reason
from hostilegen import megatron_pair
from hypothesis import given
from hypothesis import strategies as st
from refs import SHARD_SETTINGS as SETTINGS
from refs import int_lists, masks, ref_length, rows_where, small_ints
from refs import n_rows as _rows
from refs import shard_failing as failing


@pytest.mark.parametrize(
    "ids, max_len, rows",
    [
        ([[1, 2, 3], [1], [1, 2, 3, 4, 5], [], None], 3, [2]),
        ([[1, 2], [1, 2, 3]], 2, [1]),
        ([[1]], 1, []),
    ],
)
def test_over_max(tmp_path, ids, max_len, rows):
    df = pl.DataFrame({"input_ids": ids}, schema={"input_ids": pl.List(pl.Int64)})
    rep = audit_df(tmp_path, df, {"tokens": {"max_seq_len": max_len}})
    got = findings(rep, "length.over_max", "input_ids")
    assert [(f.rows, f.severity) for f in got] == ([(tuple(rows), "warn")] if rows else [])
    if rows:
        assert f"longer than max_seq_len {max_len} (longest {max(len(x) for x in ids if x)})" in got[0].message
    shard = rep.shards[0]
    # the rate is over the rows that hold a sequence (null rows are empty.sequence)
    assert shard.stats["truncation_rate"] == pytest.approx(len(rows) / sum(x is not None for x in ids))


def test_over_max_skipped_without_max_seq_len(tmp_path):
    rep = audit_df(tmp_path, {"input_ids": [[1, 2]]})
    assert skipped_reason(rep, "length.over_max") == "[tokens] max_seq_len is not set"


@pytest.mark.parametrize(
    "cols, rows",
    [
        ({"input_ids": [[1, 2], [1, 2, 3], [1]], "attention_mask": [[1, 1], [1, 1], [1]],
          "labels": [[1, 2], [1, 2, 3], [1, 2]]}, [1, 2]),
        ({"input_ids": [[1, 2]], "attention_mask": [[1, 1]]}, []),
        ({"input_ids": [[1, 2], [3]], "token_type_ids": [[0], [0]]}, [0]),
    ],
)
def test_mismatch(tmp_path, cols, rows):
    rep = audit_df(tmp_path, cols)
    got = findings(rep, "length.mismatch")
    assert [(f.rows, f.column, f.severity) for f in got] == ([(tuple(rows), None, "error")] if rows else [])


def test_mismatch_example_names_lengths(tmp_path):
    rep = audit_df(tmp_path, {"input_ids": [[1, 2, 3]], "attention_mask": [[1, 1]]})
    assert one(rep, "length.mismatch").examples[0].value == "'input_ids=3, attention_mask=2'"


def test_mismatch_aligned_group(tmp_path):
    cols = {"tokens": [["a", "b"], ["c"]], "ner_tags": [[0, 1], [0, 0]]}
    rep = audit_df(tmp_path, cols, {"columns": {"aligned": [["tokens", "ner_tags"]]}})
    f = one(rep, "length.mismatch")
    assert f.rows == (1,)
    assert "['tokens', 'ner_tags']" in f.message


def test_mismatch_skipped_with_one_list_column(tmp_path):
    rep = audit_df(tmp_path, {"input_ids": [[1]]})
    assert skipped_reason(rep, "length.mismatch") == "fewer than two list columns that must align"


def test_length_stats_exact_histogram(tmp_path):
    ids = [[1] * n for n in (1, 2, 2, 3, 3, 3, 10)]
    rep = audit_df(tmp_path, {"input_ids": ids}, {"tokens": {"max_seq_len": 3}})
    L = rep.shards[0].stats["lengths"]
    assert L["histogram"] == [[1, 1], [2, 2], [3, 3], [10, 1]]
    assert (L["min"], L["p50"], L["p90"], L["p99"], L["max"], L["count"]) == (1, 3, 10, 10, 10, 7)
    assert L["unit"] == "tokens" and L["column"] == "input_ids"
    assert rep.stats["lengths"]["histogram"] == L["histogram"]


def test_text_length_stats_in_chars(tmp_path):
    rep = audit_df(tmp_path, {"text": ["ab", "héé", None]})
    L = rep.shards[0].stats["lengths"]
    assert (L["unit"], L["histogram"]) == ("chars", [[0, 1], [2, 1], [3, 1]])


# ---------------------------------------------------------------- property tests against a plain-Python reference
def ref_out_of_vocab(ids, vocab: int) -> bool:
    """An id outside [0, vocab), or a null id (it has no embedding row)."""
    return ids is not None and any(x is None or x < 0 or x >= vocab for x in ids)


def ref_over_max(ids, max_len: int, mask=None) -> bool:
    n = ref_length(ids, mask)
    return n is not None and n > max_len


def ref_mismatch(*lists) -> bool:
    lens = [None if x is None else len(x) for x in lists]
    return any(n != lens[0] for n in lens[1:])


@SETTINGS
@given(data=st.data(), n=_rows(), vocab=st.sampled_from([3, 10, 1000]), max_len=st.integers(1, 5),
       dtype=st.sampled_from([pl.Int64, pl.Int32, pl.UInt32]))
def test_tokens_and_length_match_reference(data, n, vocab, max_len, dtype):
    elem = small_ints if dtype != pl.UInt32 else st.one_of(st.none(), st.integers(0, 12), st.just(1000))
    lists = st.one_of(st.none(), st.lists(elem, max_size=6))
    ids = data.draw(st.lists(lists, min_size=n, max_size=n))
    mask = data.draw(st.lists(masks, min_size=n, max_size=n))
    labels = data.draw(st.lists(int_lists, min_size=n, max_size=n))
    df = pl.DataFrame({"input_ids": ids, "attention_mask": mask, "labels": labels},
                      schema={"input_ids": pl.List(dtype), "attention_mask": pl.List(pl.Int64),
                              "labels": pl.List(pl.Int64)})
    # the rules on any rows of the layout they apply to (the recognizer's verdict on random rows is not tested here)
    got = failing(df, {"tokens": {"vocab_size": vocab, "max_seq_len": max_len}, "dataset": {"layout": "causal_lm"}})
    assert got.get("tokens.out_of_vocab:input_ids", set()) == rows_where(ids, lambda v: ref_out_of_vocab(v, vocab))
    assert got.get("length.over_max:input_ids", set()) == {i for i in range(n) if ref_over_max(ids[i], max_len, mask[i])}
    assert got.get("length.mismatch", set()) == {i for i in range(n) if ref_mismatch(ids[i], mask[i], labels[i])}


@SETTINGS
@given(data=st.data(), n=_rows(), max_len=st.integers(1, 4))
def test_length_stats_match_reference(data, n, max_len):
    """The exact length histogram, truncation rate and padding fraction equal plain-Python counts."""
    ids = data.draw(st.lists(int_lists, min_size=n, max_size=n))
    mask = [None if x is None else data.draw(st.lists(st.sampled_from([0, 1]), min_size=len(x), max_size=len(x)))
            for x in ids]
    df = pl.DataFrame({"input_ids": ids, "attention_mask": mask},
                      schema={"input_ids": pl.List(pl.Int64), "attention_mask": pl.List(pl.Int64)})
    with tempfile.TemporaryDirectory() as tmp:
        stats = shard_result(Path(tmp), df, {"tokens": {"max_seq_len": max_len}}).stats
    lens = [ref_length(x, m) for x, m in zip(ids, mask) if x is not None]  # attended tokens
    hist = sorted([v, lens.count(v)] for v in set(lens))
    assert stats["lengths"]["histogram"] == hist
    if lens:
        assert stats["lengths"]["max"] == max(lens) and stats["lengths"]["min"] == min(lens)
        ordered = sorted(lens)
        for q, key in ((0.5, "p50"), (0.9, "p90"), (0.99, "p99")):  # nearest rank: the ceil(q*n)-th smallest
            assert stats["lengths"][key] == ordered[max(1, math.ceil(q * len(ordered))) - 1]
        assert stats["truncation_rate"] == pytest.approx(sum(v > max_len for v in lens) / len(lens))
    flat = [v for m in mask if m is not None for v in m]
    if flat:
        assert stats["padding_fraction"] == pytest.approx(1 - sum(flat) / len(flat))


def test_megatron_documents_are_never_over_max(tmp_path):
    """Megatron's GPTDataset cuts samples across its documents: a document longer than max_seq_len
    fills several samples and is not truncated. The same rows as parquet (a row is a sample) are."""
    import datacheck

    docs = [[1] * 3, [2] * 9, [3] * 5]
    max_len = 4
    longer = [i for i, d in enumerate(docs) if len(d) > max_len]
    assert longer == [1, 2]
    cfg = {"tokens": {"max_seq_len": max_len, "max_position_embeddings": max_len}}
    megatron_pair(tmp_path / "meg", docs)
    rep = datacheck.audit([str(tmp_path / "meg")], config=cfg, fail_on="warn", workers=1)
    assert [s.format for s in rep.shards] == ["megatron"] and rep.shards[0].rows == len(docs)
    assert findings(rep, "length.over_max", "input_ids") == []
    assert "GPTDataset" in skipped_reason(rep, "length.over_max")
    # nor does a long document run past the position table: each sample's positions restart
    assert findings(rep, "tokens.position_out_of_range") == []
    assert "GPTDataset" in skipped_reason(rep, "tokens.position_out_of_range")
    assert "truncation_rate" not in rep.shards[0].stats
    assert rep.summary["status"] == "pass"
    # the same rows in a parquet shard: each row is a sample, and the long ones are truncated
    pl.DataFrame({"input_ids": docs}, schema={"input_ids": pl.List(pl.UInt16)}).write_parquet(tmp_path / "p.parquet")
    rep = datacheck.audit([str(tmp_path / "p.parquet")], config=cfg, fail_on="warn", workers=1)
    assert [f.rows for f in findings(rep, "length.over_max", "input_ids")] == [tuple(longer)]
    assert [f.rows for f in findings(rep, "tokens.position_out_of_range")] == [tuple(longer)]
    assert rep.shards[0].stats["truncation_rate"] == pytest.approx(len(longer) / len(docs))


def test_megatron_rows_of_a_traced_step_are_never_over_max(tmp_path):
    """``trace --data`` audits the rows of the bad step as a frame read from the Megatron shard: the
    checks see the shard's format there too (before: every long document of the step was over_max)."""
    pytest.importorskip("torch")
    import json

    from conftest import run_cli

    docs = [[1] * 3, [2] * 9, [3] * 5]
    max_len = 4
    assert any(len(d) > max_len for d in docs)
    megatron_pair(tmp_path / "data", docs)
    (tmp_path / "datacheck.toml").write_text(
        f"[tokens]\nmax_seq_len = {max_len}\n[batch]\nbatch_size = {len(docs)}\nshuffle = false\nepochs = 2\n"
        'loader = "torch"\n')  # every document in one step (Megatron's own order would cut samples across them)
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "loss": 2.5}\n{"step": 2, "loss": NaN}\n')
    r = run_cli("trace", str(tmp_path / "metrics.jsonl"), "--data", str(tmp_path / "data"), "--config",
                str(tmp_path / "datacheck.toml"), "--first-step", "1", "--format", "json")
    assert r.returncode == 1, r.stderr
    rows = json.loads(r.stdout)["result"]["data"]["rows"]
    assert rows["audited_rows"] == len(docs) and rows["failing_rows"] == [] and rows["findings"] == []
    assert any(s["check"] == "length.over_max" and "GPTDataset" in s["reason"] for s in rows["skipped"])
