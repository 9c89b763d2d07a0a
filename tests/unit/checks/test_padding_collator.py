"""``padding.eos_unsupervised`` on causal-LM rows without a labels column: Hugging Face's
``DataCollatorForLanguageModeling(mlm=False)`` makes their labels (``labels = input_ids`` with every
``pad_token_id`` set to -100), so with pad = eos (GPT-2 and Llama fine-tunes that set
``tokenizer.pad_token = tokenizer.eos_token``) every eos is masked and the model never learns to stop.
The check applies there under the rule ``datacheck plan`` counts supervised tokens by
(:func:`datacheck.checks.batch.collator_columns`), and names it.

Material: tinyshakespeare paragraphs (../shared/realdata/tinyshakespeare) tokenized with the real GPT-2
BPE (../shared/realdata/gpt2_tokenizer: 50,257 ids, eos 50256 per PROVENANCE.md), the eos appended and
padded to one length by the tokenizer itself. Expected counts come from transformers' collator run over
the rows."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from checkhelp import findings, one, skipped_reason, write_shard  # noqa: E402
from conftest import REALDATA  # noqa: E402

import datacheck  # noqa: E402
from datacheck.execute.plan import build_plan  # noqa: E402
from datacheck.model.config import config_from_dict  # noqa: E402

GPT2 = REALDATA / "gpt2_tokenizer"
EOS = 50256  # PROVENANCE.md: GPT-2's <|endoftext|>
N = 12


def _tok(pad: str = "<|endoftext|>"):
    if not (GPT2 / "vocab.json").is_file():
        pytest.skip("../shared/realdata is not present")
    tokenizers = pytest.importorskip("tokenizers")
    bpe = tokenizers.ByteLevelBPETokenizer(str(GPT2 / "vocab.json"), str(GPT2 / "merges.txt"))
    bpe.add_special_tokens(["<|endoftext|>"])
    return transformers.PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>", pad_token=pad)


def _padded(tok) -> dict[str, list[list[int]]]:
    """N paragraphs + eos, padded right to the longest with the tokenizer's pad id (as a dataset saved
    after ``tokenizer(..., padding="longest")`` holds them)."""
    text = (REALDATA / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8")
    paras = [p + "<|endoftext|>" for p in text.split("\n\n") if p.strip()][:N]
    enc = tok(paras, padding="longest")
    return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}


def _collated_eos(tok, rows: dict[str, list[list[int]]]) -> tuple[int, int, int]:
    """(eos of real content, of those supervised, rows holding one) by the collator's own labels."""
    batch = transformers.DataCollatorForLanguageModeling(tok, mlm=False)(
        [{"input_ids": i, "attention_mask": m} for i, m in zip(rows["input_ids"], rows["attention_mask"])])
    content = (batch["input_ids"] == tok.eos_token_id) & (batch["attention_mask"] == 1)
    return int(content.sum()), int((content & (batch["labels"] != -100)).sum()), int(content.any(dim=1).sum())


def test_pad_equal_eos_without_labels_is_eos_unsupervised(tmp_path):
    tok = _tok()
    assert tok.pad_token_id == tok.eos_token_id == EOS
    rows = _padded(tok)
    total, supervised, with_eos = _collated_eos(tok, rows)
    assert (total, supervised, with_eos) == (N, 0, N)  # one eos ends each paragraph; the collator masks each
    d = tmp_path / "data"
    d.mkdir()
    write_shard(d, rows, "train.parquet")
    cfg = {"tokens": {"pad_token_id": EOS, "eos_token_id": EOS}, "batch": {"batch_size": 4}}
    rep = datacheck.audit(str(d), config=cfg)
    assert rep.shards[0].layout == "causal_lm"
    f = one(rep, "padding.eos_unsupervised")
    assert (f.count, f.severity, f.shards) == (with_eos, "error", ("train.parquet",))
    assert f.details == {"eos_tokens": total, "eos_supervised": supervised, "ratio": 0.0}
    # the message names the rule, in the words datacheck plan prints it
    (rule,) = build_plan([str(d)], config_from_dict(cfg)).supervision
    assert "DataCollatorForLanguageModeling(mlm=False)" in rule and f"pad_token_id {EOS} set to -100" in rule
    assert rule in f.message
    assert "padding.eos_unsupervised" not in {s["check"] for s in rep.skipped}


def test_unpadded_rows_without_a_mask(tmp_path):
    """Rows stored unpadded (the collator pads them): every eos is content, every one masked."""
    tok = _tok()
    rows = _padded(tok)
    ids = [[t for t, m in zip(i, mk) if m] for i, mk in zip(rows["input_ids"], rows["attention_mask"])]
    total, supervised, with_eos = _collated_eos(tok, {"input_ids": ids, "attention_mask": [[1] * len(i) for i in ids]})
    write_shard(tmp_path, {"input_ids": ids}, "train.parquet")
    rep = datacheck.audit(str(tmp_path), config={"tokens": {"pad_token_id": EOS, "eos_token_id": EOS}})
    f = one(rep, "padding.eos_unsupervised")
    assert f.details == {"eos_tokens": total, "eos_supervised": supervised, "ratio": 0.0} and f.count == with_eos


def test_a_pad_other_than_eos_or_own_labels_pass(tmp_path):
    # a pad token of its own: the collator keeps every eos as a target
    tok = _tok(pad="!")
    rows = _padded(tok)
    total, supervised, _ = _collated_eos(tok, rows)
    assert supervised == total == N
    pad = tok.pad_token_id
    write_shard(tmp_path, rows, "train.parquet")
    rep = datacheck.audit(str(tmp_path), config={"tokens": {"pad_token_id": pad, "eos_token_id": EOS}})
    assert findings(rep, "padding.eos_unsupervised") == []
    # pad = eos, but the rows carry labels that keep the eos (the trainer's own labels, not the collator's)
    tok = _tok()
    rows = _padded(tok)
    labels = [[t if m else -100 for t, m in zip(i, mk)] for i, mk in zip(rows["input_ids"], rows["attention_mask"])]
    write_shard(tmp_path, {**rows, "labels": labels}, "train.parquet")
    rep = datacheck.audit(str(tmp_path), config={"tokens": {"pad_token_id": EOS, "eos_token_id": EOS}})
    assert findings(rep, "padding.eos_unsupervised") == []


def test_rows_without_token_supervision_are_not_guessed_at(tmp_path):
    """Token ids with one class label (text_classification): no collator makes LM labels of them."""
    write_shard(tmp_path, {"input_ids": [[5, 2, 2], [6, 7, 2]], "attention_mask": [[1, 1, 0], [1, 1, 1]],
                           "label": [0, 1]}, "a.parquet")
    rep = datacheck.audit(str(tmp_path), config={"tokens": {"pad_token_id": 2, "eos_token_id": 2}})
    assert findings(rep, "padding.eos_unsupervised") == []
    assert "padding.eos_unsupervised" not in {s["check"] for s in rep.skipped} or \
        "token labels" in skipped_reason(rep, "padding.eos_unsupervised")


def test_megatron_documents_are_not_collator_rows():
    """A Megatron .bin/.idx pair (../shared/realdata/megatron_toy_duplicates: GPT-2 ids, a real
    preprocess_data.py output) is read by Megatron's GPTDataset, whose labels are the next tokens (the
    eod among them): no DataCollatorForLanguageModeling, no eos_unsupervised with pad = eos."""
    src = REALDATA / "megatron_toy_duplicates" / "my-gpt2_text_document.bin"
    if not src.is_file():
        pytest.skip("../shared/realdata is not present")
    rep = datacheck.audit(str(src), config={"tokens": {"vocab_size": 50_257, "pad_token_id": EOS, "eos_token_id": EOS}})
    assert rep.shards[0].format == "megatron" and rep.shards[0].layout == "causal_lm"
    assert findings(rep, "padding.eos_unsupervised") == []
