"""``datacheck plan`` and ``batch.no_supervised_tokens`` on causal-LM rows without a labels column:
the supervised tokens are those Hugging Face's ``DataCollatorForLanguageModeling(mlm=False)`` gives
(``labels = input_ids`` with every ``pad_token_id`` set to -100), and the plan says which rule it used.

Material: tinyshakespeare paragraphs (../shared/realdata/tinyshakespeare) tokenized with the real GPT-2
BPE (../shared/realdata/gpt2_tokenizer: 50,257 ids, eos 50256) with the eos appended, and pad = eos as
GPT-2 fine-tuning scripts set it. Expected counts come from transformers' collator itself, run over the
plan's own micro-batches."""
from __future__ import annotations

import polars as pl
import pytest
from gatehelp import plan_json

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from conftest import REALDATA  # noqa: E402

import datacheck  # noqa: E402

GPT2 = REALDATA / "gpt2_tokenizer"
EOS = 50256  # PROVENANCE.md: GPT-2's <|endoftext|>


def _tok():
    if not (GPT2 / "vocab.json").is_file():
        pytest.skip("../shared/realdata is not present")
    tokenizers = pytest.importorskip("tokenizers")
    bpe = tokenizers.ByteLevelBPETokenizer(str(GPT2 / "vocab.json"), str(GPT2 / "merges.txt"))
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>",
                                               pad_token="<|endoftext|>")
    assert tok.pad_token_id == EOS
    return tok


def _rows(tok, n: int) -> list[list[int]]:
    text = (REALDATA / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8")
    paras = [p for p in text.split("\n\n") if p.strip()][:n]
    return [tok(p)["input_ids"] + [EOS] for p in paras]


def test_causal_lm_rows_without_labels_count_as_the_collator_labels_them(tmp_path):
    tok = _tok()
    rows = _rows(tok, 10)
    rows[6] = rows[7] = [EOS]  # two rows of only the end of text: the collator supervises nothing in them
    d = tmp_path / "data"
    d.mkdir()
    pl.DataFrame({"input_ids": rows}).write_parquet(d / "train.parquet")
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(f"[tokens]\npad_token_id = {EOS}\n[batch]\nbatch_size = 2\nshuffle = false\n")
    collator = transformers.DataCollatorForLanguageModeling(tok, mlm=False)
    expected = []  # supervised tokens per micro-batch (world_size 1, grad_accum 1: step k = micro-batch k)
    for k in range(0, len(rows), 2):
        labels = collator([{"input_ids": r} for r in rows[k:k + 2]])["labels"]
        expected.append(int((labels != -100).sum()))
    assert expected[3] == 0 and all(expected[:3])
    res = plan_json(str(d), "--config", str(cfg))
    sup = res["plan"]["supervised"]
    assert (sup["min"], sup["zero"], sup["count"]) == (min(expected), expected.count(0), len(expected))
    assert sup["zero_micro_batches"] == [[0, 3, 0, 0]]
    assert any("DataCollatorForLanguageModeling(mlm=False)" in r and f"pad_token_id {EOS}" in r for r in sup["rule"])
    for step, want in enumerate(expected):
        assert plan_json(str(d), "--config", str(cfg), "--step", str(step))["step"]["supervised_tokens"] == want
    rep = datacheck.audit([str(d)], config=str(cfg))
    assert rep.shards[0].layout == "causal_lm"
    f = next(f for f in rep.findings if f.check == "batch.no_supervised_tokens")
    assert f.details["micro_batches"] == [[0, 3, 0, 0]] and "DataCollatorForLanguageModeling" in f.message
    assert "batch.no_supervised_tokens" not in {s["check"] for s in rep.skipped}


def test_without_a_pad_id_the_attention_mask_marks_the_padding(tmp_path):
    """No ``[tokens] pad_token_id``: the positions the mask zeroes are the padding the collator would
    have set to -100; the rule says so. Rows of one class label and no token labels stay unknown."""
    d = tmp_path / "data"
    d.mkdir()
    ids = [[5, 6, 7, 0, 0], [8, 9, 10, 11, 12], [1, 2, 0, 0, 0], [3, 4, 5, 6, 0]]
    mask = [[int(v != 0) for v in r] for r in ids]
    pl.DataFrame({"input_ids": ids, "attention_mask": mask}).write_parquet(d / "train.parquet")
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text("[batch]\nbatch_size = 2\nshuffle = false\n")
    sup = plan_json(str(d), "--config", str(cfg))["plan"]["supervised"]
    per_mb = [sum(map(sum, mask[k:k + 2])) for k in range(0, 4, 2)]
    assert (sup["min"], sup["count"]) == (min(per_mb), 2)
    assert "attention_mask" in sup["rule"][0] and "no [tokens] pad_token_id" in sup["rule"][0]
    cls = tmp_path / "cls"
    cls.mkdir()
    pl.DataFrame({"input_ids": ids, "attention_mask": mask, "label": [0, 1, 0, 1]}).write_parquet(cls / "train.parquet")
    assert plan_json(str(cls), "--config", str(cfg))["plan"]["supervised"] is None
