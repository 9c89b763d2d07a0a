"""``datacheck clean`` counts rows as the audit reads them (in = kept + quarantined, kept = the
cleaned shard's rows in ``OUT/index.json``) and counts the JSONL lines / CSV records that do not parse
apart, saying what it did with them: quarantined when ``decode.bad_record`` is dropped (the default)
or their shard is a dropped duplicate, else copied as they are, and then named as left in the copy.

Material: the shared case ``corrupt_jsonl_lines`` (a truncated object, two objects on one line, a
blank line) and dair-ai emotion's CSV with one planted record of too many fields; the expected counts
are taken from the bytes here (``json.loads`` per line, the field count per line)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import CASES, REALDATA, run_cli

CASE = CASES / "corrupt_jsonl_lines"


def _jsonl_truth(path: Path) -> tuple[list[bytes], list[int], list[bytes]]:
    """(lines that parse as one JSON object, 1-based numbers of the non-blank lines that do not, those
    lines' bytes)."""
    good, bad_lines, bad = [], [], []
    for i, line in enumerate(path.read_bytes().split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            ok = isinstance(json.loads(line), dict)
        except ValueError:
            ok = False
        if ok:
            good.append(line)
        else:
            bad_lines.append(i)
            bad.append(line)
    return good, bad_lines, bad


def _clean(data: Path, out: Path, config: Path, *drop: str) -> tuple[int, dict, str]:
    args = ["clean", str(data), "--out", str(out), "--config", str(config), *[a for d in drop for a in ("--drop", d)]]
    j = run_cli(*args, "--format", "json")
    shutil.rmtree(out)
    t = run_cli(*args)
    assert "Traceback" not in j.stderr + t.stderr, j.stderr + t.stderr
    return t.returncode, json.loads(j.stdout)["result"], t.stdout


@pytest.fixture
def case(tmp_path):
    if not CASE.is_dir():
        pytest.skip("../shared/cases is not present")
    return CASE / "data", CASE / "datacheck.toml"


def test_unparseable_lines_are_not_rows_and_are_kept_visibly(case, tmp_path):
    data, cfg = case
    good, bad_lines, bad = _jsonl_truth(data / "train.jsonl")
    assert len(good) == 2 and bad_lines == [2, 4]  # the case's README: lines 2 and 4 do not parse
    rc, res, text = _clean(data, tmp_path / "out", cfg, "empty.text")
    assert rc == 0
    (s,) = res["shards"]
    assert (s["input_rows"], s["kept"], s["quarantined"]) == (len(good), len(good), 0)
    assert (res["input_rows"], res["kept"], res["quarantined"]) == (len(good), len(good), 0)
    assert (s["bad_records"], s["bad_records_quarantined"], s["bad_record_lines"]) == (len(bad), 0, bad_lines)
    assert (res["bad_records"], res["bad_records_quarantined"]) == (len(bad), 0)
    idx = json.loads((tmp_path / "out" / "index.json").read_text())
    assert [e["rows"] for e in idx["shards"]] == [s["kept"]]  # in = out (index) + dropped
    assert s["input_rows"] == idx["shards"][0]["rows"] + s["quarantined"]
    # the lines that do not parse are copied byte for byte, in place; no quarantine file
    assert (tmp_path / "out" / "train.jsonl").read_bytes().split(b"\n")[:-1] == [
        ln for ln in (data / "train.jsonl").read_bytes().split(b"\n") if ln.strip()]
    assert not (tmp_path / "out" / ".quarantine").exists()
    assert (f"  train.jsonl: {len(good)} in, {len(good)} kept, 0 quarantined (nothing dropped); {len(bad)} line(s) "
            f"that do not parse as JSON (decode.bad_record: line {', '.join(map(str, bad_lines))}): copied as they "
            "are (--drop decode.bad_record quarantines them); 1 blank line(s) not copied") in text.splitlines()
    assert (f"total: {len(good)} in = {len(good)} kept + 0 quarantined (verified by per-row content hashes); "
            f"{len(bad)} record(s) that do not parse, not rows: {len(bad)} copied as they are, 0 quarantined"
            ) in text.splitlines()
    # said as left in the copy, which still fails the gate on them (the copy's own audit agrees)
    (left,) = res["left_in_place"]
    assert (left["check"], left["left"], left["still_fails"]) == ("decode.bad_record", len(bad), True)
    assert "the cleaned copy still FAILS the gate (--fail-on error) on: decode.bad_record" in text
    again = run_cli("audit", str(tmp_path / "out"), "--config", str(cfg), "--no-cache", "--format", "json",
                    "--report-dir", str(tmp_path / "r"))
    assert again.returncode == 1
    rep = json.loads(again.stdout)
    assert rep["shards"][0]["rows"] == s["kept"]
    assert [f["count"] for f in rep["shards"][0]["findings"]
            if f["check"] == "decode.bad_record" and f["severity"] == "error"] == [len(bad)]


def test_default_drop_quarantines_unparseable_lines_counted_apart(case, tmp_path):
    data, cfg = case
    good, bad_lines, bad = _jsonl_truth(data / "train.jsonl")
    rc, res, text = _clean(data, tmp_path / "out", cfg)
    assert rc == 0
    (s,) = res["shards"]
    assert (s["input_rows"], s["kept"], s["quarantined"]) == (len(good), len(good), 0)
    assert (s["bad_records"], s["bad_records_quarantined"], s["dropped"]) == (len(bad), len(bad),
                                                                              {"decode.bad_record": len(bad)})
    assert res["left_in_place"] == []
    q = [json.loads(x) for x in (tmp_path / "out" / ".quarantine" / "train.jsonl").read_text().splitlines()]
    assert [(r["_datacheck_row"], r["_datacheck_line"], r["_datacheck_raw"].encode()) for r in q] == [
        (None, ln, raw) for ln, raw in zip(bad_lines, bad)]
    assert (tmp_path / "out" / "train.jsonl").read_bytes().split(b"\n")[:-1] == good
    assert (f"{len(bad)} line(s) that do not parse as JSON (decode.bad_record: line "
            f"{', '.join(map(str, bad_lines))}): quarantined") in text
    assert "left in place" not in text


def test_a_dropped_duplicate_shard_quarantines_its_unparseable_lines(case, tmp_path):
    """``--drop dup.shard`` without ``decode.bad_record``: the duplicate shard is not written, so its
    lines that do not parse go to the quarantine with its rows (never lost); the first copy keeps them."""
    data, cfg = case
    good, bad_lines, bad = _jsonl_truth(data / "train.jsonl")
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(data / "train.jsonl", d / "a.jsonl")
    shutil.copy(data / "train.jsonl", d / "b.jsonl")
    rc, res, _text = _clean(d, tmp_path / "out", cfg, "dup.shard")
    assert rc == 0
    a, b = res["shards"]
    assert (a["bad_records"], a["bad_records_quarantined"], a["kept"]) == (len(bad), 0, len(good))
    assert (b["duplicate_of"], b["input_rows"], b["kept"], b["quarantined"]) == ("a.jsonl", len(good), 0, len(good))
    assert (b["bad_records"], b["bad_records_quarantined"]) == (len(bad), len(bad))
    q = [json.loads(x) for x in (tmp_path / "out" / ".quarantine" / "b.jsonl").read_text().splitlines()]
    assert sorted(r["_datacheck_line"] for r in q) == sorted(bad_lines + [
        i for i, ln in enumerate((data / "train.jsonl").read_bytes().split(b"\n"), start=1) if ln in good])
    assert not (tmp_path / "out" / "b.jsonl").exists()


def test_csv_records_that_do_not_parse(tmp_path):
    """A real CSV (dair-ai emotion, ``;``) with one planted record of three fields among two-field
    records: counted apart from the rows and copied as it is."""
    if not REALDATA.is_dir():
        pytest.skip("../shared/realdata is not present")
    lines = (REALDATA / "emotion" / "val.txt").read_text(encoding="utf-8").splitlines()[:31]
    lines.insert(21, "this line;has;three fields")
    d = tmp_path / "in"
    d.mkdir()
    (d / "val.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text('[dataset]\nseparator = ";"\n[columns]\ntext = ["text"]\nlabel = "label_name"\n', encoding="utf-8")
    bad_lines = [i for i, ln in enumerate(lines, start=1) if ln.count(";") != 1]
    rows = len(lines) - 1 - len(bad_lines)  # the header is not a row
    assert bad_lines == [22]
    rc, res, text = _clean(d, tmp_path / "out", cfg, "empty.text")
    (s,) = res["shards"]
    assert (s["input_rows"], s["kept"], s["quarantined"]) == (rows, rows, 0)
    assert (s["bad_records"], s["bad_records_quarantined"], s["bad_record_lines"]) == (1, 0, bad_lines)
    assert "1 record(s) that do not parse (decode.bad_record: line 22): copied as they are" in text
    assert "this line;has;three fields" in (tmp_path / "out" / "val.csv").read_text(encoding="utf-8")
