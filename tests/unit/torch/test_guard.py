"""BatchGuard on collated batches: each check ID, the three on_error modes, the weights_only dump."""
from __future__ import annotations

import json
import warnings

import pytest

torch = pytest.importorskip("torch")

from datacheck.torch import BatchGuard, BatchValidationError  # noqa: E402 - the documented names (docs/torch.md)

FACTS = {"tokens": {"vocab_size": 10}, "labels": {"ignore_index": -100}, "numeric": {"compute_dtype": "fp16"}}


def sample(ids=(1, 2, 3), labels=(1, 2, 3), mask=(1, 1, 1), x=0.5):
    return {"input_ids": torch.tensor(ids), "labels": torch.tensor(labels), "attention_mask": torch.tensor(mask),
            "x": torch.tensor([x, 0.0])}


@pytest.mark.parametrize("bad,cid", [
    (sample(ids=(1, 10, 3)), "tokens.out_of_vocab"),
    (sample(ids=(-1, 2, 3)), "tokens.out_of_vocab"),
    (sample(labels=(1, 12, 3)), "labels.out_of_range"),
    (sample(labels=(1, -1, 3)), "labels.unexpected_sentinel"),
    (sample(labels=(-100, -100, -100)), "empty.no_supervised_tokens"),
    (sample(mask=(1, 2, 1)), "mask.non_binary"),
    (sample(mask=(0, 0, 0)), "empty.all_padding"),
    (sample(x=float("nan")), "finite.nan"),
    (sample(x=float("inf")), "finite.inf"),
    (sample(x=70000.0), "finite.fp16_overflow"),
])
def test_each_check_names_the_row(bad, cid):
    g = BatchGuard(facts=FACTS)
    assert g.check(g.collate_fn([sample(), sample()])) == {}
    with pytest.raises(BatchValidationError) as ei:
        g([sample(), bad, sample()])
    assert ei.value.failures[cid] == [1] and ei.value.batch == 0
    assert f"batch 0 (rank 0, counted from the guard's first batch) fails: {cid} (rows [1])" in str(ei.value)


def test_whole_batch_and_length_mismatch():
    g = BatchGuard(facts=FACTS)
    unsup = sample(labels=(-100, -100, -100))
    assert g.check(g.collate_fn([unsup, unsup]))["batch.no_supervised_tokens"] == []
    assert "batch.no_supervised_tokens" not in g.check(g.collate_fn([unsup, sample()]))
    mismatch = {"input_ids": torch.ones(2, 4, dtype=torch.long), "labels": torch.ones(2, 3, dtype=torch.long)}
    assert g.check(mismatch) == {"length.mismatch": []}


def test_unset_facts_leave_their_checks_out():
    g = BatchGuard(facts={})  # no vocab_size, fp32: out-of-vocab ids and 70000.0 pass
    assert g.check(g.collate_fn([sample(ids=(1, 99, 3), x=70000.0)])) == {}


def test_warn_skip_and_dump(tmp_path):
    bad = sample(ids=(1, 10, 3))
    g = BatchGuard(facts=FACTS, on_error="warn", dump_dir=tmp_path)
    with pytest.warns(RuntimeWarning, match="tokens.out_of_vocab"):
        out = g([sample(), bad])
    assert out["input_ids"].shape == (2, 3)
    dump = torch.load(tmp_path / "batch-r0-w0-000000.pt", weights_only=True)
    assert dump["meta"]["failures"] == {"tokens.out_of_vocab": [1]}
    assert torch.equal(dump["tensors"]["input_ids"][1], torch.tensor([1, 10, 3]))
    g = BatchGuard(facts=FACTS, on_error="skip")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = g([sample(), bad, sample(ids=(4, 5, 6))])
    assert out["input_ids"].tolist() == [[1, 2, 3], [4, 5, 6]]
    assert g([bad]) is None and (g.batches, g.failed) == (2, 2)
    with pytest.raises(Exception, match="on_error must be"):
        BatchGuard(on_error="ignore")


def test_the_tokenizers_vocabulary_bounds_the_ids(realdata):
    """Given only ``[tokens] tokenizer`` (GPT-2: vocab.json holds 50,257 entries, read here), the guard
    checks ids against its vocabulary, as the audit does; a config's own vocab_size wins."""
    folder = realdata / "gpt2_tokenizer"
    vocab = len(json.loads((folder / "vocab.json").read_text(encoding="utf-8")))
    assert vocab == 50257
    g = BatchGuard(facts={"tokens": {"tokenizer": str(folder)}, "labels": {"ignore_index": -100}})
    top, past = sample(ids=(0, vocab - 1, 5)), sample(ids=(0, vocab, 5))
    assert g.check(g.collate_fn([top, top])) == {}
    assert g.check(g.collate_fn([top, past])) == {"tokens.out_of_vocab": [1]}
    own = BatchGuard(facts={"tokens": {"tokenizer": str(folder), "vocab_size": vocab + 1}})
    assert own.check(own.collate_fn([top, past])) == {}


@pytest.mark.parametrize("given", [{"layout": "token_classification"}, {"schema": "token_classification"}])
def test_token_classification_tags_are_held_to_num_classes(given):
    """NER tags in a 2-D labels tensor are class ids: with the layout named in the facts, a tag
    >= num_classes fails though it is < vocab_size (the audit's labels.out_of_range rule)."""
    facts = {"dataset": given, "tokens": {"vocab_size": 30522}, "labels": {"num_classes": 3}}
    tags = [(-100, 0, 2), (-100, 5, 1), (-100, 1, -100)]  # BERT's [CLS] ignored; 5 is no tag of 3
    want = [i for i, t in enumerate(tags) if any(v >= 3 for v in t if v != -100)]
    g = BatchGuard(facts=facts)
    got = g.check(g.collate_fn([sample(ids=(101, 7, 8), labels=t) for t in tags]))
    assert got == {"labels.out_of_range": want}
    # a language model's token labels (no layout named): the vocabulary bounds them, 5 is a token id
    g = BatchGuard(facts={"tokens": {"vocab_size": 30522}, "labels": {"num_classes": 3}})
    assert g.check(g.collate_fn([sample(ids=(101, 7, 8), labels=t) for t in tags])) == {}
