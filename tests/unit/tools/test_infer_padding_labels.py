"""``datacheck schema infer`` reads whether token labels are shifted at the attended positions only:
causal rows padded to 1,024 whose labels are the next ids, padded with the pad id 0 under padding
ids 0 (the loss trains on padding), agreed with the ids at nearly every position (0 = 0) and were
proposed as ``[labels] shifted = false``, under which every clean row fails the shift check.

Rows: the real T0 prompted AG News inputs (realdata PROVENANCE.md section 5) tokenized by the real
BERT WordPiece tokenizer (section 2: [PAD]=0)."""
from __future__ import annotations

import json

import polars as pl
from conftest import REALDATA
from tokenizers import Tokenizer

from datacheck.tools.infer import propose_layout

PAD, WIDTH = 0, 1024


def test_shifted_labels_padded_with_the_pad_id_are_read_as_shifted(tmp_path):
    tok = Tokenizer.from_file(str(REALDATA / "minilm_bert_tokenizer/tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    lines = (REALDATA / "agnews_prompts_jsonl/ag_news_classify_question_first.jsonl").read_text().splitlines()
    src = [tok.encode(json.loads(x)["inputs"]).ids for x in lines]
    assert len(src) == 100 and max(map(len, src)) < WIDTH  # PROVENANCE: 100 rows
    ids = [s + [PAD] * (WIDTH - len(s)) for s in src]
    mask = [[1] * len(s) + [0] * (WIDTH - len(s)) for s in src]
    labels = [row[1:] + [PAD] for row in ids]  # labels[i] = ids[i + 1]; padding labelled with the pad id
    # over all positions the labels equal the ids on over 90% (padding), the next ids everywhere
    assert sum(y == x for r, q in zip(labels, ids) for y, x in zip(r, q)) >= 0.9 * 100 * WIDTH
    # over the attended positions: the next id on every one, the id itself on few
    att = [(i, r, q) for r, q, m in zip(labels, ids, mask) for i in range(len(m)) if m[i]]
    assert all(r[i] == q[i + 1] for i, r, q in att)
    assert sum(r[i] == q[i] for i, r, q in att) < 0.9 * len(att)
    path = tmp_path / "shard.parquet"
    pl.DataFrame({"input_ids": ids, "attention_mask": mask, "labels": labels}).write_parquet(path)
    p = propose_layout([str(path)])
    assert p.facts["labels"]["shifted"] is True, (p.facts, p.notes)
    assert p.layout == "causal_lm", p.why
