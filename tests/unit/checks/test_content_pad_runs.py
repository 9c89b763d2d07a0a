"""``content.periodic_tokens`` on rows padded with ``pad_token_id`` and stored without an attention
mask (labels -100 at the padding, the collator builds the mask): the padding is no content, as the
positions with attention mask 0 are not where there is a mask. Every right-padded real SFT row was a
"run of 1 token repeated 200+ times" (a false alarm on clean data). A run inside the content is still
found, and each run's start is its position in its own row (the second row's start was counted from
the first row's first position)."""
from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import SHARED
from refs import run
from tokenizers import Tokenizer

from datacheck.checks.content import periodic_rows

TOK = SHARED / "chat/tokenizers/smollm_135m"
PAD = 49152  # SmolLM's added [PAD] (chat/PROVENANCE.md), beyond the 49152 ids of the base vocabulary
L = 256


def _padded_rows() -> list[list[int]]:
    """FastChat's real first human + gpt turns, tokenized by the real SmolLM tokenizer (its fixed
    padding and truncation off), eos 0 appended, right-padded with [PAD] to L ids."""
    tok = Tokenizer.from_file(str(TOK / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    assert tok.token_to_id("[PAD]") == PAD
    conv = json.loads((SHARED / "chat/fastchat/dummy_conversation.json").read_text())
    rows = []
    for c in conv[:60]:
        t = c["conversations"]
        ids = tok.encode(t[0]["value"] + " " + t[1]["value"]).ids + [0]
        if len(ids) <= L - 32:  # room for a pad run long enough to count as one
            rows.append(ids + [PAD] * (L - len(ids)))
    return rows


def _ref(ids: list[int], pad: int) -> bool:
    """A run of a period of 1..13 repeated 32 times among the ids other than ``pad``, both ends real."""
    for p in range(1, 14):
        n = 0
        for j in range(len(ids) - p):
            n = n + 1 if ids[j] == ids[j + p] and ids[j] != pad and ids[j + p] != pad else 0
            if n >= 31 * p:
                return True
    return False


@pytest.mark.parametrize("with_labels", [False, True])
def test_pad_runs_without_a_mask_are_no_content(with_labels):
    rows = _padded_rows()
    assert len(rows) > 20 and all(r[-32:] == [PAD] * 32 for r in rows)
    assert not any(_ref(r, PAD) for r in rows)
    cols = {"input_ids": rows}
    if with_labels:  # the shard's shared position pass (labels and ignore_index)
        cols["labels"] = [[x if x != PAD else -100 for x in r] for r in rows]
    res = run(pl.DataFrame(cols), {"tokens": {"pad_token_id": PAD, "vocab_size": PAD + 1}})
    assert [f for f in res.findings if f.check == "content.periodic_tokens"] == []


def test_a_run_inside_padded_rows_is_still_found_at_its_row_position():
    rows = _padded_rows()
    content = [i for i, x in enumerate(rows[3]) if x != PAD]
    bad = rows[3][: len(content)] + [77] * 40
    rows[3] = (bad + [PAD] * L)[:L]
    rows[5] = (rows[5][:10] + [88, 99] * 40 + [PAD] * L)[:L]
    assert [i for i, r in enumerate(rows) if _ref(r, PAD)] == [3, 5]
    res = run(pl.DataFrame({"input_ids": rows}), {"tokens": {"pad_token_id": PAD, "vocab_size": PAD + 1}})
    (f,) = [f for f in res.findings if f.check == "content.periodic_tokens"]
    assert f.rows == (3, 5)
    got = {r["row"]: (r["run"]["start"], r["run"]["period"]) for r in f.details["runs"]}
    assert got == {3: (len(content), 1), 5: (10, 2)}
    assert "row 5: from position 10, period 2" in f.message


def test_periodic_rows_leaves_pad_out():
    rows = [[5, 6] + [PAD] * 40, [5, 6] + [7] * 40]
    s = pl.Series("input_ids", rows, dtype=pl.List(pl.Int64))
    assert periodic_rows(s, pad=PAD).to_list() == [False, True]
    assert periodic_rows(s).to_list() == [True, True]  # no pad id known: a run like any other


def test_run_starts_are_row_positions_with_several_rows():
    rows = [list(range(50)) + [7] * 40, list(range(100, 130)) + [5] * 40 + [1, 2], list(range(200, 260))]
    res = run(pl.DataFrame({"input_ids": rows}))
    (f,) = [f for f in res.findings if f.check == "content.periodic_tokens"]
    assert [(r["row"], r["run"]["start"]) for r in f.details["runs"]] == [(0, 50), (1, 30)]
