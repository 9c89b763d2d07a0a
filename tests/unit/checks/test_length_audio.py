"""``length.mismatch`` on audio rows: the attention mask of a waveform covers its samples, the
labels are the transcript. Rows collated as Hugging Face's wav2vec2 CTC fine-tuning recipe collates
them (``Wav2Vec2Processor``: the feature extractor pads ``input_values`` with 0.0 and returns an
``attention_mask`` over the samples; the ``Wav2Vec2CTCTokenizer``'s padded ``input_ids`` become the
``labels``, -100 on padding) were ``length.mismatch`` (error) in every row: the mask (16,000
samples) against the labels (28 characters). Real material: tinyshakespeare lines as transcripts;
lengths computed here from the collated arrays."""
from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from checkhelp import findings
from conftest import REALDATA

import datacheck

transformers = pytest.importorskip("transformers")
SHAKES = REALDATA / "tinyshakespeare" / "input.txt"
pytestmark = pytest.mark.skipif(not SHAKES.is_file(), reason="shared real data not present")


def _collated(tmp_path, n: int = 24) -> pl.DataFrame:
    lines = [ln.strip().lower() for ln in SHAKES.read_text(encoding="utf-8").splitlines() if len(ln.strip()) > 20][:n]
    chars = sorted({c for ln in lines for c in ln} - {" "})
    vocab = {"[PAD]": 0, "[UNK]": 1, "|": 2, **{c: i + 3 for i, c in enumerate(chars)}}
    (tmp_path / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    tok = transformers.Wav2Vec2CTCTokenizer(str(tmp_path / "vocab.json"), unk_token="[UNK]", pad_token="[PAD]",
                                            word_delimiter_token="|")
    fe = transformers.Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000, padding_value=0.0,
                                               do_normalize=True, return_attention_mask=True)
    rng = np.random.default_rng(0)
    rows: list[dict] = []
    for start in range(0, n, 8):
        waves = [rng.normal(0, 0.1, int(rng.integers(8000, 16000))).astype(np.float32) for _ in range(8)]
        batch = fe(waves, sampling_rate=16000, padding=True, return_tensors="np")
        lab = tok(lines[start:start + 8], padding=True, return_tensors="np")
        labels = np.where(lab["attention_mask"] == 1, lab["input_ids"], -100)
        for k in range(8):
            rows.append({"input_values": batch["input_values"][k].tolist(),
                         "attention_mask": batch["attention_mask"][k].tolist(), "labels": labels[k].tolist()})
    return pl.DataFrame(rows)


def test_collated_wav2vec2_ctc_rows_pass(tmp_path):
    df = _collated(tmp_path)
    # the collator's own shapes: the mask as long as the padded audio, the labels as the padded text
    assert all(len(v) == len(m) for v, m in zip(df["input_values"].to_list(), df["attention_mask"].to_list()))
    assert all(len(m) != len(lab) for m, lab in zip(df["attention_mask"].to_list(), df["labels"].to_list()))
    df.write_parquet(tmp_path / "train.parquet")
    rep = datacheck.audit([str(tmp_path / "train.parquet")])
    assert rep.shards[0].layout == "ctc"
    assert rep.findings == [] and rep.passed, [(f.check, f.message) for f in rep.findings]


def test_a_mask_that_does_not_cover_its_audio_is_found(tmp_path):
    df = _collated(tmp_path)
    masks = df["attention_mask"].to_list()
    masks[5] = masks[5][:-100]  # a mask cut short: no longer one entry a sample
    df = df.with_columns(pl.Series("attention_mask", masks))
    want = [i for i, (v, m) in enumerate(zip(df["input_values"].to_list(), masks)) if len(v) != len(m)]
    assert want == [5]
    df.write_parquet(tmp_path / "train.parquet")
    rep = datacheck.audit([str(tmp_path / "train.parquet")])
    (f,) = findings(rep, "length.mismatch")
    assert list(f.rows) == want and "['input_values', 'attention_mask']" in f.message
