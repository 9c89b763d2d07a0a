"""Unit tests of the fine-tuning rules on inline frames: each ID's failing rows, message values
and skipped reasons."""
from __future__ import annotations

import polars as pl
from conftest import SHARED

import datacheck
from datacheck.engine.shard import audit_frame
from datacheck.model.config import config_from_dict

IGN = -100


def run(df: dict | pl.DataFrame, cfg: dict | None = None):
    return audit_frame(pl.DataFrame(df) if isinstance(df, dict) else df, config_from_dict(cfg or {}))


def rows(res, key: str) -> list[int]:
    return res.failing_rows.get(key, [])


def skip(res, cid: str) -> str | None:
    return next((s.reason for s in res.skipped if s.check == cid), None)


def test_pref_identical_and_empty_text():
    res = run({"chosen": ["a good answer", "same", "  ", None], "rejected": ["bad", "same", "x", "y"]})
    assert rows(res, "pref.identical_pair") == [1]
    assert rows(res, "pref.empty_response:chosen") == [2, 3]
    assert rows(res, "pref.empty_response:rejected") == []


def test_pref_identical_after_truncation():
    df = pl.DataFrame({"chosen": [[1, 2, 3, 4], [1, 2, 3]], "rejected": [[1, 2, 3, 9], [1, 2, 4]]})
    assert rows(run(df), "pref.identical_pair") == []
    res = run(df, {"tokens": {"max_seq_len": 3}})
    assert rows(res, "pref.identical_pair") == [0]
    res = run(df, {"tokens": {"max_seq_len": 2, "truncation_side": "left"}})
    assert rows(res, "pref.identical_pair") == []


def test_pref_on_the_real_hh_rlhf_pairs_gives_no_false_alarm():
    # PROVENANCE.md: 2312 pairs, no identical pair
    rep = datacheck.audit(str(SHARED / "chat/hh_rlhf/harmless-base_test.jsonl.gz"))
    assert [s.rows for s in rep.shards] == [2312]
    assert not [s for s in rep.skipped if s["check"].startswith("pref.")]
    # the only pref finding: 4 chosen transcripts ending in an empty assistant turn, blank once TRL's
    # implicit prompt is cut off (test_pref_implicit.py::test_hh_rlhf_empty_answers_after_trls_implicit_prompt)
    assert [(f.check, f.count, f.details) for f in rep.findings if f.check.startswith("pref.")] == \
        [("pref.empty_response", 4, {"after_prompt": 4})]


def test_binary_out_of_range_hints_0_255():
    df = {"target": [0.0, 1.0, 255.0, 0.5], "text": ["a", "b", "c", "d"]}
    res = run(df, {"columns": {"target": "target"}, "labels": {"target_kind": "binary"}})
    assert rows(res, "labels.binary_out_of_range:target") == [2]
    res = run({"target": [[0.0, 255.0], [0.0, 0.0]]}, {"columns": {"target": "target"}, "labels": {"target_kind": "binary"}})
    f = next(f for f in res.findings if f.check == "labels.binary_out_of_range")
    assert f.rows == (0,) and "{0, 255}" in f.message and f.details["max"] == 255.0
    assert "regression" in skip(run(df, {"columns": {"target": "target"}}), "labels.binary_out_of_range")


def test_target_scale_from_shard_stats(tmp_path):
    pl.DataFrame({"price": [1e5, 3e5, 2e5], "text": ["a", "b", "c"]}).write_parquet(tmp_path / "a.parquet")
    rep = datacheck.audit(str(tmp_path), config={"columns": {"target": "price"}})
    got = [f for f in rep.findings if f.check == "dist.target_scale"]
    assert len(got) == 1 and got[0].details["mean"] == 2e5 and got[0].severity == "warn"
    rep = datacheck.audit(str(tmp_path), config={"columns": {"target": "price"}, "numeric": {"target_scale_warn": 1e6}})
    assert not [f for f in rep.findings if f.check == "dist.target_scale"]


def test_ctc_infeasible_counts_repeats():
    # 4 frames, downsample 2 -> 2 steps; labels [5, 5] need 3 (a blank between the repeats)
    df = pl.DataFrame({"input_lengths": [4, 6, 4], "labels": [[5, 5, IGN], [5, 5], [5, 6]]})
    res = run(df, {"labels": {"ctc_downsample": 2}})
    assert rows(res, "length.ctc_infeasible:labels") == [0]


def test_position_out_of_range_without_position_ids():
    df = pl.DataFrame({"input_ids": [[1] * 5, [1] * 3]})
    res = run(df, {"tokens": {"max_position_embeddings": 4}})
    assert rows(res, "tokens.position_out_of_range:input_ids") == [0]
    assert skip(run(df), "tokens.position_out_of_range") == "[tokens] max_position_embeddings is not set"


def test_packing_boundaries_seq_lens_and_cu_seqlens():
    df = pl.DataFrame({"input_ids": [[5] * 5, [5] * 5], "seq_lens": [[2, 3], [2, 2]],
                       "cu_seqlens": [[0, 2, 5], [0, 3, 2]]})
    res = run(df)
    assert rows(res, "packing.boundary_mismatch:seq_lens") == [1]
    assert rows(res, "packing.boundary_mismatch:cu_seqlens") == [1]
    res = run(pl.DataFrame({"input_ids": [[5]]}))
    assert "document_ids, seq_lens or cu_seqlens" in skip(res, "packing.boundary_mismatch")


def test_position_ids_not_reset_negative_ids_and_no_wrap_with_seq_lens():
    """seq_lens path (list kernels on the ids' own dtype): a negative id fails its row even when the
    count of +1 steps happens to match ([0, -1, 0, 1]: the start step -1 -> 0 is +1), and Int32 ids
    whose difference wraps (MAX -> MIN is a +1 step in Int32 arithmetic) are not taken as a step."""
    i32 = 2**31
    df = pl.DataFrame({"position_ids": [[0, 1, 0, 1], [0, -1, 0, 1], [0, i32 - 1, -i32, 0]],
                       "seq_lens": [[2, 2], [2, 2], [3, 1]]},
                      schema={"position_ids": pl.List(pl.Int32), "seq_lens": pl.List(pl.Int32)})
    assert rows(run(df), "packing.position_ids_not_reset:position_ids") == [1, 2]
    u64 = df.with_columns(pl.Series("position_ids", [[0, 1, 0, 1], [0, 1, 0, 2], [0, 1, 2**40, 0]],
                                    dtype=pl.List(pl.UInt64)))
    assert rows(run(u64), "packing.position_ids_not_reset:position_ids") == [1, 2]

def test_packing_efficiency_stat():
    df = pl.DataFrame({"input_ids": [[5, 5, 5, 0], [5, 5, 5, 5]], "attention_mask": [[1, 1, 1, 0], [1, 1, 1, 1]],
                       "document_ids": [[0, 0, 1, 1], [0, 1, 2, 3]]})
    st = run(df).stats
    assert st["packing"] == {"documents": 6, "slots": 8, "real_tokens": 7, "efficiency": 7 / 8}


def test_sft_skips_name_the_missing_fact():
    df = pl.DataFrame({"input_ids": [[1, 2]], "labels": [[1, 2]]})
    res = run(df)
    assert "assistant_mask" in skip(res, "sft.prompt_supervised")
    assert "eot_token_ids" in skip(res, "sft.eot_unsupervised")
    assert skip(res, "sft.double_bos") == "[tokens] bos_token_id is not set"
    assert skip(res, "sft.truncated_response") == "[tokens] max_seq_len is not set"


def test_sft_supervised_token_counts_for_every_row():
    df = pl.DataFrame({"input_ids": [[1, 5, 2], [1, 5, 6]], "labels": [[IGN, 5, 2], [IGN, IGN, IGN]],
                       "assistant_mask": [[0, 1, 1], [0, 1, 1]]})
    st = run(df, {"tokens": {"eos_token_id": 2}}).stats["supervised_tokens"]
    assert st["per_row"] == [2, 0] and st["zero_rows"] == 1 and st["total"] == 2


def test_periodic_tokens_details():
    row = [9, 8] + [4, 7, 7] * 40
    res = run(pl.DataFrame({"input_ids": [row, list(range(100))]}))
    f = next(f for f in res.findings if f.check == "content.periodic_tokens")
    assert f.rows == (0,)
    run0 = f.details["runs"][0]
    assert run0["row"] == 0 and run0["run"]["period"] == 3 and run0["run"]["start"] == 2 and run0["run"]["repeats"] == 40


def test_truncated_response_rows_and_last_ids():
    """Only rows whose mask reaches max_seq_len are judged; the details give the cut last ids."""
    df = pl.DataFrame({"input_ids": [[5, 6, 7, 8], [5, 6, 2, 0], [5, 6, 7, 9], [5, 6, 2, 2], [5, 6, 7, 8]],
                       "labels": [[IGN, 6, 7, 8], [IGN, 6, 2, IGN], [IGN, 6, 7, 9], [IGN, 6, 2, IGN], [IGN] * 4],
                       "attention_mask": [[1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]]})
    res = run(df, {"tokens": {"eot_token_ids": [2], "max_seq_len": 4}})
    assert rows(res, "sft.truncated_response:labels") == [0, 2]  # 3 ends supervised on 2; 4 has no target
    f = next(f for f in res.findings if f.check == "sft.truncated_response")
    assert f.details["last_ids"] == [{"labels": 8, "count": 1}, {"labels": 9, "count": 1}]


def test_truncated_response_leaves_rows_of_other_checks():
    """A row whose lists differ in length (length.mismatch) or whose mask is not binary is not judged."""
    df = pl.DataFrame({"input_ids": [[5, 6, 7], [5, 6, 7, 8], [5, 6, 7, 8]],
                       "labels": [[IGN, 6, 7, 8], [IGN, 6, 7, 8], [IGN, 6, 7, 8]],
                       "attention_mask": [[1, 1, 1, 1], [1, 2, 1, 1], [1, 1, 1, 1]]})
    res = run(df, {"tokens": {"eot_token_ids": [2], "max_seq_len": 4}})
    assert rows(res, "sft.truncated_response:labels") == [2]
