"""dup.exact_in_shard: inline frames and a plain-Python reference."""
from __future__ import annotations

import polars as pl
import pytest
from checkhelp import audit_df, findings, one
from hypothesis import given
from hypothesis import strategies as st
from refs import SHARD_SETTINGS as SETTINGS
from refs import n_rows as _rows
from refs import shard_failing as failing

from datacheck.checks.dup import in_shard as dup


@pytest.mark.parametrize(
    "cols, rows",
    [
        # null texts are empty.text's rows, never repeats of each other (checks/dup/blank.py)
        ({"text": ["a", "b", "a", "a", None, None]}, [2, 3]),
        # content = role columns (text + label); idx has no role and never makes rows distinct
        ({"text": ["a", "a", "a"], "label": [0, 1, 0], "idx": [0, 1, 2]}, [2]),
        ({"text": ["a", "A", "a "]}, []),  # exact: no case or whitespace folding
        ({"input_ids": [[1, 2], [1, 2], [2, 1], [], []]}, [1]),  # empty sequences: empty.sequence's
        ({"x": [1, 2, 1], "y": ["p", "q", "p"]}, [2]),  # no roles: all columns
    ],
)
def test_exact_in_shard(tmp_path, cols, rows):
    rep = audit_df(tmp_path, cols)
    got = findings(rep, "dup.exact_in_shard")
    assert [(f.rows, f.count, f.severity) for f in got] == ([(tuple(rows), len(rows), "warn")] if rows else [])


def test_exact_in_shard_message_names_content(tmp_path):
    rep = audit_df(tmp_path, {"text": ["a", "a"], "label": [1, 1], "idx": [0, 1]})
    f = one(rep, "dup.exact_in_shard")
    assert "(content: text, label)" in f.message
    assert f.examples[0].value == "'a'"
    assert f.ratio == pytest.approx(0.5)


def test_candidates_are_rows_sharing_text_and_token_ids(tmp_path, monkeypatch):
    """A short text of few distinct values before the token ids does not make every row a
    candidate: the rows compared exactly are those sharing the text and the token ids (rows 0, 3
    and 5: row 5 differs in its mask only), and the duplicate found is row 3."""

    seen: list[list[int]] = []
    real = dup._refine

    def spy(cols, *rest):
        inner = real(cols, *rest)

        def refine(sub):
            seen.append(sub["__row"].to_list())
            return inner(sub)

        return refine

    monkeypatch.setattr(dup, "_refine", spy)
    ids = [[1, 2, 3], [4, 5, 6], [7, 8, 9], [1, 2, 3], [2, 3, 4], [1, 2, 3]]
    rep = audit_df(tmp_path, {"text": ["a b", "a b", "a b", "a b", "a b", "a b"], "input_ids": ids,
                              "attention_mask": [[1, 1, 1]] * 5 + [[1, 1, 0]]})
    f = one(rep, "dup.exact_in_shard")
    assert f.rows == (3,) and f.count == 1
    assert seen == [[0, 3, 5]]


# ---------------------------------------------------------------- property tests against a plain-Python reference
def _blank(v) -> bool:
    """A text or token list that holds nothing (empty.text / empty.sequence: null, empty, blank)."""
    return v is None or (isinstance(v, str) and v.strip() == "") or v == []


def ref_dup_in_shard(rows: list[tuple], label_at: int | None = None) -> set[int]:
    """Rows whose content (a tuple of the role columns' values) equals an earlier row's; rows whose
    content other than the label (at ``label_at``) is all blank are no repeats."""
    seen: set = set()
    out = set()
    for i, r in enumerate(rows):
        if all(_blank(v) for k, v in enumerate(r) if k != label_at):
            continue
        key = tuple(tuple(v) if isinstance(v, list) else v for v in r)
        if key in seen:
            out.add(i)
        seen.add(key)
    return out


@SETTINGS
@given(data=st.data(), n=_rows(1, 20), with_ids=st.booleans())
def test_dup_in_shard_matches_reference(data, n, with_ids):
    text = data.draw(st.lists(st.one_of(st.none(), st.sampled_from(["", "a", "b", " a"])), min_size=n, max_size=n))
    label = data.draw(st.lists(st.one_of(st.none(), st.integers(0, 1)), min_size=n, max_size=n))
    idx = list(range(n))  # a column with no role never makes rows distinct
    cols = {"text": text, "label": label, "idx": idx}
    schema = {"text": pl.String, "label": pl.Int64, "idx": pl.Int64}
    content = list(zip(text, label))
    if with_ids:
        ids = data.draw(st.lists(st.one_of(st.none(), st.lists(st.integers(0, 1), max_size=2)), min_size=n, max_size=n))
        cols["input_ids"], schema["input_ids"] = ids, pl.List(pl.Int64)
        content = list(zip(text, label, ids))
    got = failing(pl.DataFrame(cols, schema=schema), {})
    assert got.get("dup.exact_in_shard", set()) | got.get("dup.exact_in_shard:text", set()) == ref_dup_in_shard(content, 1)


def _first_rows(rows: list[tuple]) -> list[tuple[int, int]]:
    """(row, the first row with the same content) of every row that repeats an earlier one."""
    first: dict = {}
    out = []
    for i, r in enumerate(rows):
        key = tuple(tuple(v) if isinstance(v, list) else v for v in r)
        if key in first:
            out.append((i, first[key]))
        first.setdefault(key, i)
    return out


@pytest.mark.parametrize("with_label", [False, True])  # without: the key + refine path; with: the row hashes
@pytest.mark.parametrize("batch_rows", [None, 7])      # 7: copies and their first rows in different batches
def test_each_copy_names_the_row_it_repeats(tmp_path, monkeypatch, with_label, batch_rows):
    if batch_rows is not None:
        monkeypatch.setenv("DATACHECK_BATCH_ROWS", str(batch_rows))
    texts = [f"t{(i * 7) % 11}" for i in range(40)]  # 11 distinct texts over 40 rows
    cols: dict = {"text": texts}
    if with_label:
        cols["label"] = [i % 2 for i in range(40)]
    content = list(zip(*cols.values()))
    want = _first_rows(content)
    max_ex = 5
    rep = audit_df(tmp_path, cols, {"report": {"max_examples": max_ex}})
    f = one(rep, "dup.exact_in_shard")
    assert f.count == len(want)
    assert [(e["row"], e["first_row"]) for e in f.details["examples"]] == want[:max_ex]
    row, first = want[0]
    assert f.message.endswith(f": row {row} repeats row {first}")
    assert all(content[r] == content[e] and e < r for r, e in want)
