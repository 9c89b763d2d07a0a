"""dup.exact_across_shards on a running text (.txt read by line or paragraph) follows the rule
dup.exact_in_shard follows (datacheck/checks/dup/stretch.py): a row is a copy when it lies in a stretch
of rows that repeats a stretch of an earlier shard in order and holds at least 200 characters together.
So a pasted passage of short lines is found across two files as within one, and short lines repeated
across files (a play's speaker names, headings) are not. Expected rows are computed here from the text
written (a plain-Python reference of the rule), never read back from datacheck. Real data:
tinyshakespeare (PROVENANCE.md: 1,115,394 B, 40,000 lines)."""
from __future__ import annotations

import pytest
from conftest import REALDATA, examples
from hypothesis import given, settings
from hypothesis import strategies as st

import datacheck
from datacheck.checks.spec import RUNNING_TEXT_MIN_CHARS

SHAKESPEARE = REALDATA / "tinyshakespeare" / "input.txt"
_GAP = "\0 a row between two shards, equal to none"


def _kept(rows: list[str], floor: int) -> dict[int, int]:
    """{row: the row it repeats} for the rows in a stretch repeating an earlier stretch in order, of
    ``floor`` characters or more: a stretch starts at a copy r (a row equal to an earlier one) not going
    on the one before, aligned with e (the first row equal to rows[r]); it goes on over rows[x] ==
    rows[x - (r - e)] and back over the copies just before r that equal their row r - e before. A row
    in two stretches keeps the row of the first."""
    first: dict[str, int] = {}
    copies: list[tuple[int, int]] = []
    for i, r in enumerate(rows):
        if r in first:
            copies.append((i, first[r]))
        else:
            first[r] = i
    is_copy = {r for r, _ in copies}
    runs: list[tuple[list[int], int]] = []
    for r, e in copies:
        if runs and r == runs[-1][0][-1] + 1 and rows[r] == rows[r - runs[-1][1]]:
            runs[-1][0].append(r)
        else:
            runs.append(([r], r - e))
    kept: dict[int, int] = {}
    for run, shift in runs:
        back = run[0] - 1
        while back in is_copy and back >= shift and rows[back] == rows[back - shift]:
            run.insert(0, back)
            back -= 1
        if sum(len(rows[x]) for x in run) >= floor:
            for x in run:
                kept.setdefault(x, x - shift)
    return kept


def _across(a: list[str], b: list[str], floor: int = RUNNING_TEXT_MIN_CHARS) -> list[tuple[int, int]]:
    """(row of b, row of a it repeats) for b's rows in a stretch repeating a stretch of a (a and b read
    as one sequence, a row equal to none between them), and b's rows of ``floor`` characters or more
    that occur in a (a stretch by themselves; the first such row of a) when their stretch above was
    aligned within b."""
    kept = _kept(a + [_GAP] + b, floor)
    n = len(a) + 1
    out = {x - n: y for x, y in kept.items() if x >= n and y < len(a)}
    for k, r in enumerate(b):
        if k not in out and len(r) >= floor and r in a:
            out[k] = a.index(r)
    return sorted(out.items())


def _audit(root, files: dict[str, str], cfg: dict | None = None):
    root.mkdir(parents=True)
    for name, body in files.items():
        (root / name).write_text(body, encoding="utf-8")
    return datacheck.audit([str(root)], config=cfg or {}, workers=1, fail_on="never")


def _by(rep, check: str) -> list:
    return [f for f in rep.findings if f.check == check]


def _play() -> list[str]:
    if not SHAKESPEARE.exists():
        pytest.skip("../shared/realdata is not present")
    raw = SHAKESPEARE.read_bytes()
    assert len(raw) == 1_115_394 and raw.count(b"\n") == 40_000  # PROVENANCE.md
    return raw.decode("utf-8").split("\n")[:-1]


def test_a_pasted_act_is_found_across_files_as_within_one(tmp_path):
    lines = _play()
    act = lines[3000:3400]
    head, tail = lines[:20000], act + lines[20000:]
    rows_a, rows_b = [ln for ln in head if ln.strip()], [ln for ln in tail if ln.strip()]
    want = _across(rows_a, rows_b)
    n_act = sum(1 for ln in act if ln.strip())
    assert [r for r, _ in want] == list(range(n_act))  # every non-blank line of the act, nothing else
    rep = _audit(tmp_path / "two", {"a.txt": "\n".join(head) + "\n", "b.txt": "\n".join(tail) + "\n"})
    (f,) = _by(rep, "dup.exact_across_shards")  # before: none (only rows of 200 characters were compared)
    assert f.count == n_act
    got = [(e["row"], e["first_row"]) for e in f.details["examples"]]
    assert got == want[:len(got)] and all(e["shard"] == "b.txt" and e["first_shard"] == "a.txt"
                                          for e in f.details["examples"])
    assert not _by(rep, "dup.exact_in_shard")
    # the same act pasted within one file: the same count, by the same rule
    one = _audit(tmp_path / "one", {"input.txt": "\n".join(head + tail) + "\n"})
    (g,) = _by(one, "dup.exact_in_shard")
    assert g.count == f.count and "in a shard and across shards alike" in g.message


def test_the_play_cut_in_two_files_gives_no_finding(tmp_path):
    lines = _play()
    rows_a = [ln for ln in lines[:20000] if ln.strip()]
    rows_b = [ln for ln in lines[20000:] if ln.strip()]
    shared = {ln for ln in rows_a} & {ln for ln in rows_b}
    assert len(shared) > 50 and _across(rows_a, rows_b) == []  # speaker names repeat: no stretch of 200
    rep = _audit(tmp_path / "d", {"a.txt": "\n".join(lines[:20000]) + "\n", "b.txt": "\n".join(lines[20000:]) + "\n"})
    assert list(rep.findings) == []


# rows of 1 to 90 characters (a long row alone is no stretch; four or five together are) and one of 200+
_ROWS = st.sampled_from(["ROMEO:", "JULIET:", "A" * 60, "B" * 45, "C" * 90, "The End.", "D" * 75,
                         "E" * 210, "F" * 30])


@settings(max_examples=examples(40), deadline=None)
@given(a=st.lists(_ROWS, min_size=1, max_size=14), b=st.lists(_ROWS, min_size=1, max_size=14),
       by=st.sampled_from(["line", "paragraph"]))
def test_across_two_files_equals_the_plain_python_rule(tmp_path_factory, a, b, by):
    sep = "\n" if by == "line" else "\n\n"
    rep = _audit(tmp_path_factory.mktemp("x") / "d", {"a.txt": sep.join(a) + "\n", "b.txt": sep.join(b) + "\n"},
                 {"dataset": {"sample_by": by}})
    # by paragraph the file's last paragraph keeps the file's final line break (datasets' text.py)
    rows_a, rows_b = (a, b) if by == "line" else (a[:-1] + [a[-1] + "\n"], b[:-1] + [b[-1] + "\n"])
    want = _across(rows_a, rows_b)
    fs = _by(rep, "dup.exact_across_shards")
    if not want:
        assert fs == []
        return
    (f,) = fs
    assert f.count == len(want)
    assert [(e["row"], e["first_row"]) for e in f.details["examples"]] == want[:len(f.details["examples"])]


def test_a_passage_of_the_training_split_in_the_test_split_is_a_leak(tmp_path):
    """dup.split_overlap follows the same rule: the training split's shards read first, then the test
    split's; a test row counts when its stretch repeats a stretch of the training split."""
    lines = _play()
    act = lines[3000:3400]
    train, test = lines[:20000], act + lines[20000:]
    rows_train, rows_test = [ln for ln in train if ln.strip()], [ln for ln in test if ln.strip()]
    want = _across(rows_train, rows_test)
    assert len(want) == sum(1 for ln in act if ln.strip())
    rep = _audit(tmp_path / "leak", {"train.txt": "\n".join(train) + "\n", "test.txt": "\n".join(test) + "\n"})
    (f,) = _by(rep, "dup.split_overlap")  # the Hub's split names: train.txt and test.txt
    assert f.count == len(want)  # before: 0 (only rows of 200 characters were compared)
    assert [(e["row"], e["train_row"]) for e in f.details["examples"]] == want[:len(f.details["examples"])]
    clean = _audit(tmp_path / "clean", {"train.txt": "\n".join(train) + "\n", "test.txt": "\n".join(lines[20000:]) + "\n"})
    assert list(clean.findings) == []


def test_a_running_text_in_no_split_is_compared_with_the_splits(tmp_path):
    """a_extra.txt (no [splits] glob matches it, it sorts first) holds a passage of short train lines
    (200+ characters together): its lines are the copies, found by the rule of two files (train read
    first); before, a shard in no split was compared with no split's shard."""
    train = [f"line {i} of the training text, short" for i in range(40)]
    test = [f"held-out line {i}, short as well" for i in range(10)]
    extra = ["an extra line of its own"] + train[10:18] + ["another line of its own"]
    assert sum(len(x) for x in train[10:18]) >= RUNNING_TEXT_MIN_CHARS
    want = _across(train, extra)
    assert [r for r, _ in want] == list(range(1, 9))
    rep = _audit(tmp_path / "d", {"train.txt": "\n".join(train) + "\n", "test.txt": "\n".join(test) + "\n",
                                  "a_extra.txt": "\n".join(extra) + "\n"},
                 {"splits": {"train": "train.txt", "test": "test.txt"}})
    (f,) = _by(rep, "dup.exact_across_shards")
    assert f.count == len(want)
    assert [(e["shard"], e["row"], e["first_shard"], e["first_row"]) for e in f.details["examples"]] == [
        ("a_extra.txt", r, "train.txt", t) for r, t in want][:len(f.details["examples"])]
    assert not _by(rep, "dup.split_overlap")
