"""The row content of ``dup.*`` (datacheck.model.roles.row_content): a shard whose only roles are its
answers (a class label, or a regression target: a float ``label`` or ``[columns] target``) is compared
on its other columns, never on the answer alone. Two tabular rows with one target value and different
features are no duplicates (they were: ``dup.exact_in_shard`` on the target alone, a false alarm)."""
from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from checkhelp import audit_df
from conftest import SHARED
from tokenizers import Tokenizer

from datacheck.model.roles import row_content


def test_answers_alone_are_never_the_content():
    cols = ["x1", "x2", "label"]
    assert row_content(["label"], None, cols, ("label",)) == ["x1", "x2", "label"]
    assert row_content(["y"], None, ["x1", "y"], ("y",)) == ["x1", "y"]
    assert row_content(["label"], "label", cols) == ["x1", "x2", "label"]  # a class label, as before
    # a role that is no answer (text) makes the content the role columns, as before
    assert row_content(["text", "score"], None, ["text", "score", "idx"], ("score",)) == ["text", "score"]
    assert row_content(["y"], None, ["y"], ("y",)) == ["y"]  # the answer is the only column


def _tabular(n: int = 200) -> dict:
    """Rows of distinct float features whose float targets repeat (rounded to one decimal: a real
    tabular target such as a price or a score repeats)."""
    rng = np.random.default_rng(0)
    return {"x1": rng.normal(size=n).tolist(), "x2": rng.normal(size=n).tolist(),
            "target_col": np.round(rng.integers(0, 20, n) / 10, 1).tolist()}


@pytest.mark.parametrize("target, cfg", [
    ("label", {}),                                   # a float label: inferred as the regression target
    ("y", {"columns": {"target": ["y"]}}),           # a target the config names
])
def test_regression_rows_with_repeated_targets_are_no_duplicates(tmp_path, target, cfg):
    d = _tabular()
    rows = {"x1": d["x1"], "x2": d["x2"], target: d["target_col"]}
    assert len(set(rows[target])) < len(rows[target])  # the targets do repeat
    rep = audit_df(tmp_path, rows, cfg)
    assert rep.shards[0].layout == "regression"
    assert [f for f in rep.findings if f.check.startswith("dup.")] == []
    # a real repeat (features and target) is still found, at its row
    df = pl.DataFrame(rows)
    df = pl.concat([df, df[7]])
    rep = audit_df(tmp_path / "dup", df, cfg)
    f = next(f for f in rep.findings if f.check == "dup.exact_in_shard")
    assert (f.count, list(f.rows)) == (1, [df.height - 1])


def _fastchat_pref_rows() -> tuple[list[dict], int]:
    """TRL-tokenized preference rows (``DPOTrainer.tokenize_row``'s ``prompt_input_ids`` /
    ``chosen_input_ids`` / ``rejected_input_ids``) of FastChat's real dummy conversations with the real
    SmolLM tokenizer: the first human turn is the prompt, the first gpt turn the chosen answer, that
    answer's first half the rejected one. The dummy set answers many different prompts with one canned
    answer, so responses repeat under distinct prompts. Returns the rows and how many of them repeat an
    earlier row in all three columns (computed here)."""
    tok = Tokenizer.from_file(str(SHARED / "chat/tokenizers/smollm_135m/tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    conv = json.loads((SHARED / "chat/fastchat/dummy_conversation.json").read_text())
    rows = []
    for c in conv:
        turns = c["conversations"]
        if len(turns) < 2 or (turns[0]["from"], turns[1]["from"]) != ("human", "gpt"):
            continue
        answer = tok.encode(turns[1]["value"]).ids
        rows.append({"prompt_input_ids": tok.encode(turns[0]["value"]).ids, "chosen_input_ids": answer + [0],
                     "rejected_input_ids": answer[: max(1, len(answer) // 2)] + [0]})
    seen: set[tuple] = set()
    repeats = 0
    for r in rows:
        key = tuple(tuple(r[c]) for c in ("prompt_input_ids", "chosen_input_ids", "rejected_input_ids"))
        repeats += key in seen
        seen.add(key)
    return rows, repeats


def test_tokenized_preference_rows_differ_by_their_prompt(tmp_path):
    # the prompt conditions both responses: two pairs of one answer to different prompts are no
    # duplicates (they were: the content was chosen/rejected alone, a false alarm on ~300 real rows)
    rows, repeats = _fastchat_pref_rows()
    pairs = {(tuple(r["chosen_input_ids"]), tuple(r["rejected_input_ids"])) for r in rows}
    assert len(pairs) < len(rows) - repeats  # answers do repeat under other prompts
    rep = audit_df(tmp_path, pl.DataFrame(rows), {"tokens": {"vocab_size": 49153}})
    assert rep.shards[0].layout == "dpo"
    got = [f for f in rep.findings if f.check == "dup.exact_in_shard"]
    assert sum(f.count for f in got) == repeats
    assert row_content(["chosen_input_ids", "rejected_input_ids"], None,
                       ["prompt_input_ids", "chosen_input_ids", "rejected_input_ids"]) \
        == ["chosen_input_ids", "rejected_input_ids", "prompt_input_ids"]
