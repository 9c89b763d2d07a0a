"""``datacheck clean`` of plain-text shards (``.txt``): the copy is the input's bytes without the lines
of the dropped rows, read by the same ``[dataset] sample_by`` as the audit (line, paragraph,
document), written atomically beside the originals, which stay byte for byte; the dropped rows go to
``.quarantine/<shard>.jsonl``. Re-auditing the copy finds none of the removed duplicates. Expected rows
are computed here from the text written. Real data: tinyshakespeare (PROVENANCE.md: 1,115,394 B,
40,000 lines)."""
from __future__ import annotations

import json

import pytest
from conftest import REALDATA, run_cli

import datacheck
from datacheck.formats import text
from datacheck.io.hashing import hash_file
from datacheck.model.config import config_from_dict
from datacheck.tools.clean import QUARANTINE_DIR, clean

SHAKESPEARE = REALDATA / "tinyshakespeare" / "input.txt"
DUPS = ["dup.exact_in_shard", "dup.exact_across_shards"]


def _play() -> str:
    if not SHAKESPEARE.exists():
        pytest.skip("../shared/realdata is not present")
    raw = SHAKESPEARE.read_bytes()
    assert len(raw) == 1_115_394 and raw.count(b"\n") == 40_000  # PROVENANCE.md
    return raw.decode("utf-8")


def _rows(path, sample_by: str) -> list[str]:
    return text.open_text(path, sample_by).lf.collect()[text.COLUMN].to_list()


def _units(body: str, sample_by: str) -> list[str]:
    """The non-blank rows of ``body`` by ``sample_by`` (lines, or pieces split on a blank line)."""
    parts = body.split("\n") if sample_by == "line" else body.split("\n\n")
    return [p for p in parts if p.strip()]


def _dup_checks(rep) -> list[str]:
    return sorted(f.check for f in rep.findings if f.check.startswith("dup."))


@pytest.mark.parametrize("sample_by", ["line", "paragraph"])
def test_cleaned_copy_reaudits_without_the_removed_duplicates(tmp_path, sample_by):
    play = _play()
    units = play.split("\n") if sample_by == "line" else play.split("\n\n")
    sep = "\n" if sample_by == "line" else "\n\n"
    a_units = units[:len(units) // 2]
    own = units[len(units) // 2:len(units) // 2 + len(units) // 4]
    copied = units[len(units) // 10:len(units) // 10 + 60]  # a passage of a, pasted into b
    repeated = own[40:100]  # a passage of b, pasted again later in b
    end = ["THE END OF THE SECOND FILE."]
    a = sep.join(a_units + ["THE END OF THE FIRST FILE."]) + "\n"
    b = sep.join(copied + own + repeated + end) + "\n"
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text(a, encoding="utf-8")
    (data / "b.txt").write_text(b, encoding="utf-8")
    before = {p.name: hash_file(p) for p in data.iterdir()}
    cfg = config_from_dict({"dataset": {"sample_by": sample_by}})
    rep = datacheck.audit([str(data)], cfg, workers=1, fail_on="never")
    n_copied, n_repeated = len(_units(sep.join(copied), sample_by)), len(_units(sep.join(repeated), sample_by))
    counts = {f.check: f.count for f in rep.findings if f.check in DUPS}
    assert counts == {"dup.exact_across_shards": n_copied, "dup.exact_in_shard": n_repeated}

    res = clean([str(data)], tmp_path / "out", cfg, drop=DUPS)
    assert {p.name: hash_file(p) for p in data.iterdir()} == before  # the originals, untouched
    assert (res.out / "a.txt").read_bytes() == a.encode()  # nothing dropped: the same bytes
    assert _rows(res.out / "b.txt", sample_by) == _units(sep.join(own + end) + "\n", sample_by)
    by = {s.path: s for s in res.shards}
    assert by["b.txt"].dropped == {"dup.exact_across_shards": n_copied, "dup.exact_in_shard": n_repeated}
    q = [json.loads(x) for x in (res.out / QUARANTINE_DIR / "b.txt.jsonl").read_text(encoding="utf-8").splitlines()]
    b_rows = _rows(data / "b.txt", sample_by)
    assert len(q) == n_copied + n_repeated and all(b_rows[r["_datacheck_row"]] == r["text"] for r in q)
    again = datacheck.audit([str(res.out)], cfg, workers=1, fail_on="never")
    assert _dup_checks(again) == [] and again.passed


def test_lone_cr_and_crlf_breaks_stay_as_they_were(tmp_path):
    verse = [f"line {i} of a verse long enough to be pasted, with its own words {i * 7}" for i in range(6)]
    assert sum(len(v) for v in verse) >= 200
    body = "\r".join(["head", *verse, "middle", *verse, "tail"]) + "\r"
    data = tmp_path / "data"
    data.mkdir()
    (data / "mac.txt").write_bytes(body.encode())
    rep = datacheck.audit([str(data)], {}, workers=1, fail_on="never")
    (f,) = [f for f in rep.findings if f.check == "dup.exact_in_shard"]
    assert f.count == len(verse) and f.lines[0] == len(verse) + 3  # head, verse, middle, then the copy
    res = clean([str(data)], tmp_path / "out", config_from_dict({}), drop=["dup.exact_in_shard"])
    out = (res.out / "mac.txt").read_bytes()
    assert out == ("\r".join(["head", *verse, "middle", "tail"]) + "\r").encode() and b"\n" not in out
    assert _dup_checks(datacheck.audit([str(res.out)], {}, workers=1, fail_on="never")) == []


def test_a_dropped_document_is_not_written_and_the_copy_has_one(tmp_path):
    doc = "A short story.\n\nIt ends here.\n"
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text(doc)
    (data / "b.txt").write_text(doc)
    (data / "c.txt").write_text("Another story.\n")
    cfg = config_from_dict({"dataset": {"sample_by": "document"}})
    res = clean([str(data)], tmp_path / "out", cfg, drop=["dup.exact_across_shards"])
    assert sorted(p.name for p in res.out.glob("*.txt")) == ["a.txt", "c.txt"]
    assert res.left_in_place == ()  # b.txt is no shard of the copy: no index.empty_shard there
    q = [json.loads(x) for x in (res.out / QUARANTINE_DIR / "b.txt.jsonl").read_text().splitlines()]
    assert [(r["_datacheck_row"], r["text"], r["_datacheck_checks"]) for r in q] == [(0, doc, ["dup.exact_across_shards"])]
    again = datacheck.audit([str(res.out)], cfg, workers=1, fail_on="never")
    assert _dup_checks(again) == [] and sum(s.rows for s in again.shards) == 2


def test_the_cli_cleans_a_txt_corpus(tmp_path):
    para = "A paragraph long enough to count as a duplicated piece of a document rather than a heading. " * 3
    data = tmp_path / "corpus.txt"
    data.write_text("\n".join(["intro", para, "x", para, "outro"]) + "\n")
    got = run_cli("clean", str(data), "--out", str(tmp_path / "clean"), "--drop", "dup.exact_in_shard")
    assert got.returncode == 0, got.stderr
    assert _rows(tmp_path / "clean" / "corpus.txt", "line") == ["intro", para, "x", "outro"]


def test_drop_split_overlap_removes_a_pasted_training_passage_from_the_test_split(tmp_path):
    lines = _play().split("\n")[:-1]
    act = lines[3000:3400]
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.txt").write_text("\n".join(lines[:20000]) + "\n")
    (data / "test.txt").write_text("\n".join(lines[20000:22000] + act + lines[22000:]) + "\n")
    cfg = config_from_dict({})
    res = clean([str(data)], tmp_path / "out", cfg, drop=["dup.split_overlap"])
    by = {s.path: s for s in res.shards}
    assert by["test.txt"].dropped == {"dup.split_overlap": sum(1 for ln in act if ln.strip())}
    assert _rows(res.out / "test.txt", "line") == [ln for ln in lines[20000:] if ln.strip()]
    again = datacheck.audit([str(res.out)], cfg, workers=1, fail_on="never")
    assert _dup_checks(again) == []
