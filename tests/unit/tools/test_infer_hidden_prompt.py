"""`datacheck schema infer` and the audit's recognizer count the rows that hide a prompt from the
loss the same way: an attended token (attention_mask 1) before the first supervised label. A new
user's left-padded SmolLM2 ChatML shard with one all-zero mask row read "124 of 125 sample rows"
from schema infer and "123 of 125" from the audit: infer counted the padding of the all-zero row as
attended. A row that attends nothing hides no prompt (the audit's count is the true one)."""
from __future__ import annotations

import re

import polars as pl

from datacheck.tools.infer import propose_layout

PAD = 2  # SmolLM2-135M-Instruct: pad == eos == <|im_end|> (2), padding_side left (PROVENANCE.md)
IM_START = 1  # <|im_start|>
WIDTH = 24


def _shard(tmp_path, n: int = 125, all_zero: int = 60, unprompted: int = 7):
    """Left-padded ChatML rows: padding (mask 0, label -100), the user turn and the assistant header
    (mask 1, label -100), the answer (labels = ids). Row ``all_zero`` has an all-0 mask (its labels as
    built); row ``unprompted`` is an answer alone (nothing attended before its first label)."""
    ids, mask, labels = [], [], []
    for i in range(n):
        prompt = [IM_START, 4093, 198, 100 + i, 200 + i, PAD, 198, IM_START, 520, 9531, 198]
        answer = [300 + i, 400 + (i % 7), PAD]
        if i == unprompted:
            prompt = []
        pad = WIDTH - len(prompt) - len(answer)
        ids.append([PAD] * pad + prompt + answer)
        mask.append([0] * WIDTH if i == all_zero else [0] * pad + [1] * (len(prompt) + len(answer)))
        labels.append([-100] * (pad + len(prompt)) + answer)
    path = tmp_path / "sft.parquet"
    pl.DataFrame({"input_ids": ids, "attention_mask": mask, "labels": labels}).write_parquet(path)
    return path, ids, mask, labels


def _hidden(mask: list[list[int]], labels: list[list[int]]) -> int:
    """Plain Python: rows with an attended position before their first supervised label."""
    out = 0
    for m, y in zip(mask, labels):
        first = next((i for i, v in enumerate(y) if v != -100), None)
        out += first is not None and any(m[i] for i in range(first))
    return out


def test_schema_infer_and_the_audit_count_hidden_prompts_alike(tmp_path):
    path, _, mask, labels = _shard(tmp_path)
    expected = _hidden(mask, labels)
    assert expected == 123  # 125 rows, less the all-zero mask row and the answer-only row
    p = propose_layout([str(path)])
    assert p.layout == "sft_tokenized"
    said = re.search(r"(\d+) of (\d+) sample rows ignore attended tokens", p.why)
    assert said is not None, p.why
    assert (int(said[1]), int(said[2])) == (expected, 125)
    assert p.rows is not None
    seen = re.search(r"(\d+) of (\d+) sample rows hide a prompt", p.rows.why)
    assert seen is not None and (int(seen[1]), int(seen[2])) == (expected, 125), p.rows.why
