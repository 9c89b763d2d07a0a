"""Rows whose content is all blank (an empty or whitespace-only text, an empty token sequence, a
conversation with no turn or only blank turns) are the empty checks' findings, once: never
dup.exact_in_shard / dup.exact_across_shards / dup.split_overlap repeats of each other. Real repeats
of non-blank content stay repeats. Expected rows are computed here from the data."""
from __future__ import annotations

import json

import pytest
from dshelp import by_check, one, run, write

import datacheck

#: blank texts both Python's str.strip and Unicode White_Space agree on, U+3000 and U+00A0 included
BLANKS = ["", "  ", "\t\n", "\u3000", "\u00a0 ", "  "]


def _repeats(values: list) -> list[int]:
    """Rows whose (hashable) value occurs in an earlier row."""
    seen, out = set(), []
    for k, v in enumerate(values):
        if v in seen:
            out.append(k)
        seen.add(v)
    return out


def _blank(t: str | None) -> bool:
    return t is None or t.strip() == ""


TEXTS = ["a cat", *BLANKS[:3], "a cat", BLANKS[3], "dog", BLANKS[4], "dog", BLANKS[5], "a cat"]


@pytest.mark.parametrize("labelled", [False, True])  # no label: the fused key path; a label: the row hashes
def test_blank_texts_are_empty_text_only_and_real_repeats_stay(tmp_path, labelled):
    data = {"text": TEXTS, **({"label": [0] * len(TEXTS)} if labelled else {})}
    write(tmp_path, "t.parquet", data)
    rep = run(tmp_path)
    blank = [k for k, t in enumerate(TEXTS) if _blank(t)]
    real = [k for k in _repeats(TEXTS) if not _blank(TEXTS[k])]
    assert one(rep, "empty.text").rows == tuple(blank)
    assert one(rep, "dup.exact_in_shard").rows == tuple(real) == (4, 8, 10)


def test_empty_token_sequences_are_empty_sequence_only(tmp_path):
    ids = [[5, 6], [], [], [7], [5, 6], [], [7]]
    write(tmp_path, "t.parquet", {"input_ids": ids, "attention_mask": [[1] * len(r) for r in ids]})
    rep = run(tmp_path)
    assert one(rep, "empty.sequence").rows == tuple(k for k, r in enumerate(ids) if not r)
    key = [tuple(r) for r in ids]
    assert one(rep, "dup.exact_in_shard").rows == tuple(k for k in _repeats(key) if ids[k]) == (4, 6)


def test_chat_rows_with_no_or_only_blank_turns_are_not_repeats(tmp_path):
    hi = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    blank_turns = [{"role": "user", "content": " "}, {"role": "assistant", "content": "\u3000"}]
    half = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""}]
    convs = [hi, [], blank_turns, [], blank_turns, hi, half, half]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"messages": m}) + "\n" for m in convs))
    rep = run(tmp_path)
    all_blank = [k for k, m in enumerate(convs) if all(_blank(t["content"]) for t in m)]
    key = [json.dumps(m) for m in convs]
    # a conversation with a real turn (hi + an empty answer) repeated is a repeat as well
    assert one(rep, "dup.exact_in_shard").rows == tuple(k for k in _repeats(key) if k not in all_blank) == (5, 7)
    assert set(all_blank) <= (set(one(rep, "sft.no_assistant_turn").rows) | set(by_check(rep, "sft.empty_turn")[0].rows))


def test_blank_rows_match_nothing_across_shards_and_splits(tmp_path):
    a = ["x1", "", "  ", "x2"]
    b = ["x2", "", "\u3000", "  ", "x3"]
    write(tmp_path / "d", "a.parquet", {"text": a})
    write(tmp_path / "d", "b.parquet", {"text": b})
    rep = run(tmp_path / "d")
    f = one(rep, "dup.exact_across_shards")
    real = [k for k, t in enumerate(b) if t in a and not _blank(t)]
    assert f.count == len(real) == 1 and [e.row for e in f.examples] == real
    assert not by_check(rep, "dup.exact_in_shard")
    # --against: the blank eval rows are no train/eval leak
    e = ["  ", "x3", "", "x2", "\u3000"]
    write(tmp_path / "eval", "e.parquet", {"text": e})
    rep = datacheck.audit(str(tmp_path / "eval"), config={}, against=str(tmp_path / "d"), fail_on="never")
    s = one(rep, "dup.split_overlap")
    leaked = [k for k, t in enumerate(e) if t in a + b and not _blank(t)]
    assert s.count == len(leaked) == 2 and sorted(x.row for x in s.examples) == leaked


def test_a_blank_text_beside_real_tokens_is_content(tmp_path):
    """Not every content column blank: the token ids hold the row's content, so repeats are repeats."""
    write(tmp_path, "t.parquet", {"text": ["", "", " "], "input_ids": [[3, 4], [3, 4], [9]]})
    rep = run(tmp_path)
    assert one(rep, "dup.exact_in_shard").rows == (1,)


# ------------------------------------------------------------------ tabular rows of no feature value
#: a tabular table as pandas' to_csv writes it: an empty cell for a missing value (NaN / None)
TAB = [(1.5, 2.0, 0), (None, None, None), (3.25, 4.0, 1), (None, None, None), (1.5, 2.0, 0),
       (None, None, 1), (None, None, 1), (None, 7.0, 1), (None, 7.0, 1)]


def _csv(rows: list[tuple]) -> str:
    cell = lambda v: "" if v is None else str(v)  # noqa: E731
    return "x1,x2,y\n" + "".join(",".join(cell(v) for v in r) + "\n" for r in rows)


def _no_feature(r: tuple) -> bool:
    return r[0] is None and r[1] is None


@pytest.mark.parametrize("schema", [None, "tabular"])  # the layout's rule, or the built-in contract's
@pytest.mark.parametrize("answer", ["label", "target"])  # a class label (row hashes) or a regression target
def test_all_null_tabular_rows_are_schema_nullable_only(tmp_path, answer, schema):
    """A row whose every feature is null (its label too, or not) is schema.nullable's row (and
    labels.null's when its answer is null), once: never a dup.exact_in_shard repeat of another such
    row. A row with one feature filled in repeats as any row does."""
    (tmp_path / "t.csv").write_text(_csv(TAB))
    rep = run(tmp_path, {"dataset": {"layout": "tabular" if answer == "label" else "regression",
                                     **({"schema": schema} if schema else {})},
                         "columns": {answer: "y"}})
    x1_null = tuple(k for k, r in enumerate(TAB) if r[0] is None)
    assert [f.rows for f in by_check(rep, "schema.nullable") if f.column == "x1"] == [x1_null]
    real = [k for k in _repeats(TAB) if not _no_feature(TAB[k])]
    assert one(rep, "dup.exact_in_shard").rows == tuple(real) == (4, 8)


def test_all_null_tabular_rows_match_nothing_across_shards_and_splits(tmp_path):
    a = [(1.5, 2.0, 0), (None, None, None), (None, None, 1), (9.5, 1.0, 1)]
    b = [(None, None, None), (9.5, 1.0, 1), (None, None, 1), (8.0, 8.5, 0)]
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.csv").write_text(_csv(a))
    (tmp_path / "d" / "b.csv").write_text(_csv(b))
    cfg = {"dataset": {"layout": "tabular"}, "columns": {"label": "y"}}
    rep = run(tmp_path / "d", cfg)
    f = one(rep, "dup.exact_across_shards")
    real = [k for k, r in enumerate(b) if r in a and not _no_feature(r)]
    assert f.count == len(real) == 1 and [e.row for e in f.examples] == real
    assert not by_check(rep, "dup.exact_in_shard") and not by_check(rep, "dup.conflicting_labels")
    # --against: the eval rows of no feature are no train/eval leak
    e = [(None, None, None), (8.0, 8.5, 0), (None, None, 0), (2.0, 2.0, 1)]
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "e.csv").write_text(_csv(e))
    rep = datacheck.audit(str(tmp_path / "eval"), config=cfg, against=str(tmp_path / "d"), fail_on="never")
    s = one(rep, "dup.split_overlap")
    train = {r[:2] for r in a + b}
    leaked = [k for k, r in enumerate(e) if r[:2] in train and not _no_feature(r)]
    assert s.count == len(leaked) == 1 and [x.row for x in s.examples] == leaked


def test_tabular_rows_of_nan_features_are_finite_nan_only(tmp_path):
    """NaN features (a parquet written from float arrays keeps NaN) are finite.nan's rows: a row of
    nothing but NaN features repeats no row; NaN beside a real feature value is content, and NaN
    equals NaN (any bits) when rows are compared."""
    nan, neg_nan = float("nan"), -float("nan")
    x1 = [nan, neg_nan, nan, neg_nan, 0.5]
    x2 = [nan, nan, 1.0, 1.0, 0.5]
    write(tmp_path, "t.parquet", {"x1": x1, "x2": x2, "y": [0, 0, 1, 1, 0]})
    rep = run(tmp_path, {"dataset": {"layout": "tabular"}, "columns": {"label": "y"}})
    assert [f.rows for f in by_check(rep, "finite.nan") if f.column == "x1"] == [(0, 1, 2, 3)]
    assert one(rep, "dup.exact_in_shard").rows == (3,)


def test_rows_of_nulls_a_contract_accepts_stay_repeats(tmp_path):
    """A contract declaring the features nullable (XGBoost takes missing values) reports no such
    null: rows of them are rows like any other, and their copies are repeats."""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "t.csv").write_text(_csv(TAB))
    schema = tmp_path / "boost.yaml"
    schema.write_text("columns:\n  x1:\n    nullable: true\n  x2:\n    nullable: true\n", encoding="utf-8")
    rep = run(tmp_path / "d", {"dataset": {"layout": "tabular", "schema": str(schema)}, "columns": {"label": "y"}})
    assert not by_check(rep, "schema.nullable")
    assert one(rep, "dup.exact_in_shard").rows == tuple(_repeats(TAB))
