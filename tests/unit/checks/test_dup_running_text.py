"""dup.* on a running text (a .txt read by line or paragraph: ShardContext.running_text): a stretch of
rows that repeats an earlier stretch in order and holds 200 characters or more is a duplicate
(dup.exact_in_shard); shorter repeats (a play's speaker names, section headings, separators) are
not; across shards and splits only rows of 200 characters or more are compared. A row of a JSONL
corpus, or a .txt read by document, is a sample: every repeat counts.

Expected counts are computed here from the text written (plain Python), never read back from datacheck."""
from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from conftest import REALDATA, examples
from hypothesis import given, settings
from hypothesis import strategies as st

import datacheck
from datacheck.checks.dup.cross import CHARS_FIELD, ROWS_KEY
from datacheck.checks.dup.in_shard import repeated_stretches
from datacheck.checks.spec import RUNNING_TEXT_MIN_CHARS, Repeats
from datacheck.engine.shard import audit_shard
from datacheck.io.discover import DiscoveredShard
from datacheck.model.config import config_from_dict

SHAKESPEARE = REALDATA / "tinyshakespeare" / "input.txt"


def _reference(rows: list[str], floor: int) -> list[int]:
    """The copies in a stretch repeating an earlier stretch in order, of ``floor`` characters or more:
    a stretch starts at a copy r not going on the one before, aligned with e (the first row equal to
    rows[r]), goes on over rows[x] == rows[x - (r - e)] and back over the copies just before r that
    equal their row r - e before."""
    return sorted(_reference_aligned(rows, floor))


def _reference_aligned(rows: list[str], floor: int) -> dict[int, int]:
    """:func:`_reference`'s copies, each with the row it repeats in its stretch (the copy less the
    stretch's shift; a copy in two stretches keeps the first one's)."""
    first: dict[str, int] = {}
    copies: list[tuple[int, int]] = []
    for i, r in enumerate(rows):
        if r in first:
            copies.append((i, first[r]))
        else:
            first[r] = i
    is_copy = {r for r, _ in copies}
    kept: dict[int, int] = {}
    runs: list[tuple[list[int], int]] = []
    for r, e in copies:
        if runs and r == runs[-1][0][-1] + 1 and rows[r] == rows[r - runs[-1][1]]:
            runs[-1][0].append(r)
        else:
            runs.append(([r], r - e))
    for run, shift in runs:
        back = run[0] - 1
        while back in is_copy and back >= shift and rows[back] == rows[back - shift]:
            run.insert(0, back)
            back -= 1
        if sum(len(rows[x]) for x in run) >= floor:
            for x in run:
                kept.setdefault(x, x - shift)
    return kept


def _stretches(rows: list[str], floor: int) -> list[int]:
    first: dict[str, int] = {}
    reps, earlier = [], []
    for i, r in enumerate(rows):
        if r in first:
            reps.append(i)
            earlier.append(first[r])
        else:
            first[r] = i
    hashes = [hash(r) & (2**64 - 1) for r in rows]  # any equal-for-equal key: exact on these small alphabets
    high = np.array([len(r) for r in rows], dtype=np.uint64)
    low = np.array(hashes, dtype=np.uint64)
    chars = np.array([len(r) for r in rows], dtype=np.uint32)
    got = repeated_stretches(Repeats(np.array(reps, dtype=np.int64), np.array(earlier, dtype=np.int64)),
                             high, low, chars, floor)
    aligned = _reference_aligned(rows, floor)
    assert got.earlier.tolist() == [aligned[r] for r in got.rows.tolist()]  # the row each repeats in its stretch
    assert all(rows[e] == rows[r] and e < r for r, e in zip(got.rows.tolist(), got.earlier.tolist()))
    return got.rows.tolist()


@pytest.mark.parametrize("rows, floor, copies", [
    (["NAME:", "line one", "NAME:", "line two"], 6, []),  # a repeated short row alone: under the floor
    (["NAME:", "line one", "NAME:", "line two"], 5, [2]),
    (["a", "bb", "ccc", "x", "a", "bb", "ccc"], 6, [4, 5, 6]),  # a pasted passage of short rows
    (["a", "bb", "ccc", "x", "a", "bb", "ccc"], 7, []),
    (["h", "a", "bb", "h", "z", "h", "a", "bb"], 4, [5, 6, 7]),  # "h" first at 0: the stretch follows rows 0..2
    (["h", "a", "bb", "h", "z", "h", "a", "bb"], 5, []),
    (["-", "-", "-", "-"], 3, [1, 2, 3]),  # a run of one repeated row repeats itself shifted by one
    (["a", "b", "c", "b", "a", "b"], 2, [4, 5]),  # rows 4-5 repeat 0-1; back to row 3 (shift 4): no row -1
    # a pasted speech whose speaker line first occurs elsewhere: the stretch goes back over it
    (["GLOUCESTER:", "a", "x", "GLOUCESTER:", "speech one", "z", "GLOUCESTER:", "speech one"], 20, [6, 7]),
    (["GLOUCESTER:", "a", "x", "GLOUCESTER:", "speech one", "z", "GLOUCESTER:", "speech one"], 22, []),
])
def test_stretch_table(rows, floor, copies):
    assert _reference(rows, floor) == copies
    assert _stretches(rows, floor) == copies


@settings(max_examples=examples(300), deadline=None)
@given(rows=st.lists(st.sampled_from(["a", "bb", "ccc", "NAME:", "-" * 10, "x y z"]), max_size=60),
       floor=st.integers(1, 40))
def test_stretches_equal_the_plain_python_reference(rows, floor):
    assert _stretches(rows, floor) == _reference(rows, floor)


def _audit(tmp_path, files: dict[str, str], cfg: dict | None = None):
    root = tmp_path / "data"
    root.mkdir(parents=True)
    for name, body in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(body, encoding="utf-8")
    return datacheck.audit([str(root)], config=cfg or {}, workers=1)


def _checks(rep) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in rep.findings:  # the shards' findings and the dataset's
        out.setdefault(f.check, []).append(f)
    return out


def _play() -> list[str]:
    if not SHAKESPEARE.exists():
        pytest.skip("../shared/realdata is not present")
    return SHAKESPEARE.read_text(encoding="utf-8").split("\n")


@pytest.mark.parametrize("sample_by", ["line", "paragraph", "document"])
def test_clean_tinyshakespeare_gives_no_finding(tmp_path, sample_by):
    lines = _play()
    repeated = len([ln for ln in lines if ln.strip()]) - len({ln for ln in lines if ln.strip()})
    assert repeated == 7_056  # the speaker names and the play's own refrains: repeats of a clean text
    rep = _audit(tmp_path, {"input.txt": "\n".join(lines)}, {"dataset": {"sample_by": sample_by}})
    assert _checks(rep) == {} and rep.passed


def test_a_pasted_act_is_found_line_by_line(tmp_path):
    lines = _play()
    act = lines[3000:3400]
    pasted = lines[:20000] + act + lines[20000:]
    rep = _audit(tmp_path, {"input.txt": "\n".join(pasted)})
    (f,) = _checks(rep)["dup.exact_in_shard"]
    at = [i + 1 for i, ln in enumerate(pasted) if ln.strip()]  # the line of each row
    assert f.count == sum(1 for ln in act if ln.strip())  # every non-blank line of the pasted act
    assert f.lines[0] == next(20001 + i for i, ln in enumerate(act) if ln.strip())
    assert at[f.rows[0]] == f.lines[0]
    assert "200 characters" in f.message
    # each copy names the row of the act it repeats, not the first occurrence of its line (a new user's
    # trial: a pasted speech's "MENENIUS:" named the play's first MENENIUS, not the speech's)
    row_of_line = {line: k for k, line in enumerate(at)}
    ex = f.details["examples"]
    assert len(ex) >= 3
    for e in ex:
        copied = at[e["row"]] - 1 - 20000  # the 0-based index into act of the copy's line
        assert at[e["first_row"]] == 3001 + copied, e
    assert any(e["first_row"] != row_of_line[min(i + 1 for i, ln in enumerate(pasted) if ln == pasted[at[e["row"]] - 1])]
               for e in ex)  # at least one example's line first occurs before the act


def test_a_long_line_repeated_is_found_and_a_short_one_is_not(tmp_path):
    para = "The committee met on the third day and, after a long debate, voted to adopt the plan " * 3
    assert len(para) >= RUNNING_TEXT_MIN_CHARS
    body = "\n".join([" = Heading = ", para, "", " = Heading = ", "another paragraph", "", para, "---", "---"])
    (f,) = _checks(_audit(tmp_path, {"a.txt": body}))["dup.exact_in_shard"]
    assert (f.count, f.rows, f.lines) == (1, (4,), (7,))


def test_across_shards_and_splits_only_long_rows_are_compared(tmp_path):
    para = "A paragraph long enough to be a duplicated piece of a document rather than a heading or a name. " * 3
    train = "\n".join([" = = Reception = = ", "train text", "", para, ""])
    test = "\n".join([" = = Reception = = ", "test text", "", para, ""])
    rep = _audit(tmp_path, {"train.txt": train, "test.txt": test})
    got = _checks(rep)
    (f,) = got["dup.split_overlap"]  # the Hub's split names: train.txt and test.txt
    assert f.count == 1 and "dup.exact_across_shards" not in got
    rep = _audit(tmp_path / "short", {"train.txt": train.replace(para, "x"), "test.txt": test.replace(para, "y")})
    assert _checks(rep) == {}


def test_a_jsonl_corpus_row_is_a_sample_every_repeat_counts(tmp_path):
    rows = ["ROMEO:", "a line", "ROMEO:"]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"text": r}) + "\n" for r in rows))
    rep = datacheck.audit([str(tmp_path / "c.jsonl")], workers=1)
    (f,) = _checks(rep)["dup.exact_in_shard"]
    assert (f.count, f.rows) == (1, (2,))


def test_by_document_a_repeated_file_is_a_duplicated_document(tmp_path):
    doc = "Short.\n"
    rep = _audit(tmp_path, {"a.txt": doc, "b/c.txt": doc}, {"dataset": {"sample_by": "document"}})
    got = _checks(rep)
    assert "dup.shard" in got and "dup.exact_across_shards" in got
    assert pl.Series([f.count for f in got["dup.exact_across_shards"]]).sum() == 1


def test_the_stretch_payload_is_the_row_hashes_with_4_bytes_a_row(tmp_path):
    """A running text's rows for the merge: crossdup.rows (hash) and each row's characters (UInt32, 4
    bytes a row), which decide the stretches in the shard and across shards alike; no other payload."""
    p = tmp_path / "a.txt"
    p.write_text("one line\nanother line\none line\n")
    r = audit_shard(DiscoveredShard(path=p, rel=p.name, format="text"), config_from_dict({}), "x", p.stat().st_size)
    assert r.rows == 3 and not any(k.startswith("crossdup.running") for k in r.payload)
    df = r.payload[ROWS_KEY]
    assert df.columns == ["hash", CHARS_FIELD] and df[CHARS_FIELD].dtype == pl.UInt32
    assert df[CHARS_FIELD].to_list() == [len("one line"), len("another line"), len("one line")]
    assert df["hash"][0] == df["hash"][2]  # the short rows' hashes as they are: a stretch decides


def test_near_duplicates_of_a_running_text_are_rows_of_200_characters_or_more(tmp_path):
    lines = _play()
    near = {"dup": {"near": True}}
    # clean: short lines near-repeat in any text ("What is the matter?" / "What is the matter")
    assert "What is the matter?" in lines and "What is the matter" in lines
    assert _checks(_audit(tmp_path / "clean", {"input.txt": "\n".join(lines)}, near)) == {}
    para = "The committee met on the third day and, after a long debate, voted to adopt the plan. " * 3
    edited = para.replace("third", "fourth", 1)  # one word of 50 changed
    assert len(para) >= RUNNING_TEXT_MIN_CHARS and para != edited
    (f,) = _checks(_audit(tmp_path / "edited", {"a.txt": "\n".join([para, "", *lines[:50], "", edited])},
                          near))["dup.near_duplicate"]
    assert f.count == 1
