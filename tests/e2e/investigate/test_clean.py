"""``datacheck clean``: cleaned shards, quarantine with reasons, data index, refusals, and the
round-trip invariant kept + quarantined == input (a property test on random frames with defects)."""
from __future__ import annotations

import json
import math
import shutil
import tempfile
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from conftest import ROOT
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import datacheck
from datacheck.io.hashing import hash_file, index_hash
from datacheck.model.config import config_from_dict, load_config
from datacheck.model.errors import UsageError
from datacheck.tools.clean import INDEX_NAME, QUARANTINE_DIR, clean, default_drop, row_hashes

SAMPLE = ROOT / "sample_data"
SAMPLE_CFG = SAMPLE / "datacheck.toml"
CASES = ROOT.parent / "shared" / "cases"

from conftest import examples, run_cli  # noqa


def _hashes(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hash_file(p)[0] for p in sorted(folder.rglob("*")) if p.is_file()}


def _checks(report) -> set[tuple[str, str]]:
    return {(s.path, f.check) for s in report.shards for f in s.findings}


# What the default drop (every row-level check of severity error) removes from sample_data/defects,
# taken from the planted-defects table of sample_data/README.md: {shard: {check: rows dropped}}.
# Warnings (length.over_max, padding.token_not_pad, dup.exact_in_shard, dup.conflicting_labels),
# shard-level (tokens.dtype_overflow, index.empty_shard) and dataset-level findings (dup.split_overlap,
# dup.shard, dup.exact_across_shards, index.*) drop nothing. finite.fp16_overflow is one check ID: its
# rows 5 and 6 (errors) and row 7 (the half-max warning) all go.
SAMPLE_DROPPED = {
    "decode/records.jsonl": {"decode.bad_record": 2, "decode.invalid_utf8": 1},  # lines 2, 4; line 6
    "decode/rows_vs_lines.jsonl": {"decode.bad_record": 1, "labels.out_of_range": 1},  # line 2; row 1 (line 4)
    "dup/train.parquet": {},
    "empty/text.jsonl": {"empty.text": 3},  # rows 1, 3, 5
    "empty/tokens.parquet": {"empty.sequence": 1, "empty.all_padding": 1,  # row 1; row 3
                             "empty.no_supervised_tokens": 3},  # rows 1, 3, 5
    "finite/regression.parquet": {"finite.nan": 2, "finite.inf": 2, "finite.fp16_overflow": 3},  # 1,2; 3,4; 5,6,7
    "index/shards/part-00000-of-00004.parquet": {},
    "index/shards/part-00001-of-00004.parquet": {},
    "index/shards/part-00003-of-00004.parquet": {},
    "labels/classes.parquet": {"labels.out_of_range": 2, "labels.unexpected_sentinel": 1,  # rows 1, 3; row 5
                               "labels.null": 1},  # row 7
    "labels/token_labels.parquet": {"labels.out_of_range": 2, "labels.unexpected_sentinel": 1},  # rows 2, 4; 5
    "length/seqs.parquet": {"length.mismatch": 2},  # rows 3, 4
    "mask/batch.parquet": {"mask.non_binary": 1, "mask.not_contiguous": 1,  # row 1; row 3
                           "padding.label_not_ignored": 1},  # row 7
    "split/eval.parquet": {},
    "split/train.parquet": {},
    "tokens/ids.parquet": {"tokens.out_of_vocab": 3},  # rows 1, 3, 4
    "tokens/ids_int16.parquet": {"tokens.out_of_vocab": 1},  # row 2
}
# the quarantined rows (a row failing two checks is quarantined once); JSONL/CSV records that do not
# parse are not rows: counted apart (SAMPLE_BAD_RECORDS), and quarantined too by the default drop
SAMPLE_QUARANTINED = {
    "decode/records.jsonl": 1, "decode/rows_vs_lines.jsonl": 1, "empty/text.jsonl": 3, "empty/tokens.parquet": 3,
    "finite/regression.parquet": 7, "labels/classes.parquet": 4, "labels/token_labels.parquet": 3,
    "length/seqs.parquet": 2, "mask/batch.parquet": 3, "tokens/ids.parquet": 3, "tokens/ids_int16.parquet": 1,
}
# records that do not parse (README: records.jsonl lines 2 and 4, rows_vs_lines line 2): (records, quarantined)
SAMPLE_BAD_RECORDS = {"decode/records.jsonl": (2, 2), "decode/rows_vs_lines.jsonl": (1, 1)}
# decode.unreadable shards: not copied, with the reason (README: bad magic, no footer, zero bytes)
SAMPLE_UNREADABLE = {"decode/not_parquet.parquet": "not a parquet file: bad magic",
                     "decode/truncated.parquet": "truncated parquet file: no footer",
                     "decode/zero_bytes.parquet": "zero-byte file"}


@pytest.mark.slow
def test_sample_defects_default_drop_and_reaudit(tmp_path):
    src = tmp_path / "in"
    shutil.copytree(SAMPLE / "defects", src)
    before = _hashes(src)
    cfg = load_config(SAMPLE_CFG)
    res = clean([str(src)], tmp_path / "out", cfg)
    assert _hashes(src) == before  # originals untouched
    by = {s.path: s for s in res.shards}
    assert {p: s.dropped for p, s in by.items() if s.unreadable is None} == SAMPLE_DROPPED
    assert {p: s.quarantined for p, s in by.items() if s.quarantined} == SAMPLE_QUARANTINED
    assert {p: (s.bad_records, s.bad_records_quarantined) for p, s in by.items() if s.bad_records} == SAMPLE_BAD_RECORDS
    assert sorted(p for p, s in by.items() if s.unreadable) == sorted(SAMPLE_UNREADABLE)
    for p, why in SAMPLE_UNREADABLE.items():
        assert by[p].unreadable.startswith(why), by[p].unreadable
    assert (by["tokens/ids.parquet"].kept, by["tokens/ids.parquet"].quarantined) == (3, 3)
    # blank lines are counted, not copied and not quarantined (README: records.jsonl line 5, rows_vs_lines line 3)
    assert {p: s.blank_lines for p, s in by.items() if s.blank_lines} == {"decode/records.jsonl": 1,
                                                                          "decode/rows_vs_lines.jsonl": 1}
    assert res.input_rows == res.kept + res.quarantined
    # quarantine: the dropped rows with reasons and original row index
    q = pl.read_parquet(res.out / QUARANTINE_DIR / "labels/classes.parquet")
    assert q["_datacheck_row"].to_list() == [1, 3, 5, 7]
    assert q["_datacheck_checks"].to_list() == [["labels.out_of_range:label"], ["labels.out_of_range:label"],
                                                ["labels.unexpected_sentinel:label"], ["labels.null:label"]]
    assert set(q["_datacheck_shard"]) == {"labels/classes.parquet"}
    qj = [json.loads(x) for x in (res.out / QUARANTINE_DIR / "decode/rows_vs_lines.jsonl").read_text().splitlines()]
    assert [(r["_datacheck_row"], r["_datacheck_line"], r["_datacheck_checks"]) for r in qj] == [
        (None, 2, ["decode.bad_record"]), (1, 4, ["labels.out_of_range:label"])]
    # only shards with dropped rows get a quarantine file
    assert sorted(p.relative_to(res.out / QUARANTINE_DIR).as_posix()
                  for p in (res.out / QUARANTINE_DIR).rglob("*") if p.is_file()) == sorted(SAMPLE_QUARANTINED)
    # re-auditing the output shows none of the dropped findings
    again = datacheck.audit([str(res.out)], cfg)
    dropped = set(res.drop)
    assert not [(p, c) for p, c in _checks(again) if c in dropped]
    assert ("dup/train.parquet", "dup.exact_in_shard") in _checks(again)


def test_index_of_output(tmp_path):
    res = clean([str(SAMPLE / "defects/tokens")], tmp_path / "out", load_config(SAMPLE_CFG))
    idx = json.loads((res.out / INDEX_NAME).read_text())
    assert idx["format"] == "datacheck-index" and idx["format_version"] == 1 and idx["hash_algorithm"] == "xxh3-128"
    assert [(e["path"], e["rows"]) for e in idx["shards"]] == [("ids.parquet", 3), ("ids_int16.parquet", 3)]
    for e in idx["shards"]:
        assert (e["content_hash"], e["bytes"]) == hash_file(res.out / e["path"])
    assert idx["index_hash"] == index_hash([(e["path"], e["content_hash"]) for e in idx["shards"]])
    # the same key the audit of the output computes
    assert datacheck.audit([str(res.out)], load_config(SAMPLE_CFG)).index_hash == idx["index_hash"]


def test_explicit_drop_dup(tmp_path):
    res = clean([str(SAMPLE / "defects/dup/train.parquet")], tmp_path / "o", load_config(SAMPLE_CFG),
                drop=["dup.exact_in_shard"])
    assert res.drop == ("dup.exact_in_shard",)
    q = pq.read_table(res.out / QUARANTINE_DIR / "train.parquet").to_pydict()
    assert q["_datacheck_row"] == [4, 6, 7]  # sample_data/README.md: row 4 repeats 0; 6 and 7 repeat 2
    assert res.shards[0].kept == res.shards[0].input_rows - 3 == pl.read_parquet(res.out / "train.parquet").height


def test_keeps_schema_metadata_and_stream_format(tmp_path):
    import pyarrow as pa

    table = pa.table({"text": ["a", "", "b"], "label": pa.array([0, 1, 1], pa.int64())}).replace_schema_metadata(
        {"huggingface": '{"info": {"features": {}}}'})
    src = tmp_path / "in" / "data-00000-of-00001.arrow"
    src.parent.mkdir()
    with pa.OSFile(str(src), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    res = clean([str(src.parent)], tmp_path / "out", config_from_dict({}))
    out = res.out / "data-00000-of-00001.arrow"
    assert out.read_bytes()[:6] != b"ARROW1"  # still an IPC stream (Hugging Face save_to_disk layout)
    got = pa.ipc.open_stream(pa.memory_map(str(out))).read_all()
    assert got.schema.metadata == table.schema.metadata and got.schema.field("text").type == pa.string()
    assert got.to_pydict() == {"text": ["a", "b"], "label": [0, 1]}


def test_csv_and_gz_jsonl_keep_format(tmp_path):
    import gzip

    src = tmp_path / "in"
    src.mkdir()
    (src / "t.tsv").write_text("text\tlabel\nok\t0\n\t1\nfine\t7\n")
    with gzip.open(src / "r.jsonl.gz", "wt") as f:
        f.write('{"text": "a", "label": 0}\n{"text": "", "label": 1}\n')
    res = clean([str(src)], tmp_path / "out", config_from_dict({"labels": {"num_classes": 2}}))
    assert (res.out / "t.tsv").read_text() == "text\tlabel\nok\t0\n"
    assert gzip.decompress((res.out / "r.jsonl.gz").read_bytes()) == b'{"text": "a", "label": 0}\n'
    q = (res.out / QUARANTINE_DIR / "t.tsv").read_text().splitlines()
    assert q[0].split("\t") == ["_datacheck_row", "_datacheck_line", "_datacheck_shard", "_datacheck_checks",
                                "_datacheck_row_hash", "_datacheck_raw", "text", "label"]
    assert [x.split("\t")[:4] for x in q[1:]] == [["1", "3", "t.tsv", "empty.text:text"],
                                                   ["2", "4", "t.tsv", "labels.out_of_range:label"]]


# ------------------------------------------------------------------------------------------ refusals
def test_refuses_input_folder_inside_containing_and_nonempty(tmp_path):
    src = tmp_path / "data"
    shutil.copytree(SAMPLE / "defects/tokens", src)
    cfg = load_config(SAMPLE_CFG)
    for out in (src, src / "clean", tmp_path):
        with pytest.raises(UsageError, match="refusing to write into the input folder"):
            clean([str(src)], out, cfg)
    with pytest.raises(UsageError, match="refusing to write over the input file"):  # the file itself
        clean([str(src / "ids.parquet")], src / "ids.parquet", cfg)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "ids.parquet").write_bytes(b"keep me")
    with pytest.raises(UsageError, match="not empty; refusing to write over existing files"):
        clean([str(src)], tmp_path / "busy", cfg)
    assert (tmp_path / "busy" / "ids.parquet").read_bytes() == b"keep me"
    (tmp_path / "afile").write_text("x")
    with pytest.raises(UsageError, match="not a folder"):
        clean([str(src)], tmp_path / "afile", cfg)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "busy", "data"]  # no temp folder left


def test_a_file_path_may_be_cleaned_into_a_folder_beside_it(tmp_path):
    """``clean data/f --out data/clean``: the input is the file, not its folder; the copy lands beside it,
    the folder's other files untouched, and a folder PATH still refuses an --out inside it."""
    src = tmp_path / "data"
    shutil.copytree(SAMPLE / "defects/tokens", src)
    before = {p.name: p.read_bytes() for p in src.iterdir()}
    cfg = load_config(SAMPLE_CFG)
    res = clean([str(src / "ids.parquet")], src / "clean", cfg)
    assert (src / "clean" / "ids.parquet").is_file()
    rows_in = pl.read_parquet(src / "ids.parquet").height
    kept = pl.read_parquet(src / "clean" / "ids.parquet").height
    q = src / "clean" / QUARANTINE_DIR / "ids.parquet"
    assert kept + (pl.read_parquet(q).height if q.exists() else 0) == rows_in
    assert {p.name: p.read_bytes() for p in src.iterdir() if p.name != "clean"} == before
    assert res.out == (src / "clean").resolve()
    p = run_cli("clean", str(src / "ids.parquet"), "--out", str(src / "clean2"), "--config", str(SAMPLE_CFG))
    assert p.returncode in (0, 1) and (src / "clean2" / "ids.parquet").is_file(), p.stderr
    with pytest.raises(UsageError, match="refusing to write into the input folder"):
        clean([str(src)], src / "clean3", cfg)


def test_cli_refusals_exit_2(tmp_path):
    src = tmp_path / "data"
    shutil.copytree(SAMPLE / "defects/tokens", src)
    p = run_cli("clean", str(src), "--out", str(src / "x"), "--config", str(SAMPLE_CFG))
    assert p.returncode == 2 and "refusing to write into the input folder" in p.stderr
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "f").write_text("")
    p = run_cli("clean", str(src), "--out", str(tmp_path / "o"), "--config", str(SAMPLE_CFG))
    assert p.returncode == 2 and "refusing to write over existing files" in p.stderr
    p = run_cli("clean", str(src), "--out", str(tmp_path / "n"), "--drop", "index.numbering_gap")
    assert p.returncode == 2 and "clean cannot drop the rows of this dataset-level check" in p.stderr
    assert "dup.split_overlap, dup.exact_across_shards, dup.shard" in p.stderr
    p = run_cli("clean", str(src), "--out", str(tmp_path / "n"), "--drop", "nope.x")
    assert p.returncode == 2 and "unknown check ID" in p.stderr


def test_cli_summary_and_unreadable_exit_1(tmp_path):
    p = run_cli("clean", str(CASES / "shard_gap_and_empty_file/data"), "--out", str(tmp_path / "o"))
    assert p.returncode == 1, p.stderr
    assert "train-00004-of-00005.parquet: UNREADABLE, not copied: zero-byte file" in p.stdout
    assert "total: 9 in = 9 kept + 0 quarantined" in p.stdout


def test_default_drop_follows_policy():
    d = default_drop(config_from_dict({"policy": {"empty.text": {"severity": "warn"},
                                                  "dup.exact_in_shard": {"severity": "error"}}}))
    assert "empty.text" not in d and "dup.exact_in_shard" in d and "tokens.out_of_vocab" in d
    assert "dup.shard" not in d  # dataset-level


# ------------------------------------------------------------------------------------------ shared cases
ROW_CASES = ["all_padding_sample", "corrupt_jsonl_lines", "empty_text", "label_equals_num_classes",
             "nan_regression_target", "negative_label_sentinel", "padding_supervised", "repeated_samples",
             "truncation_leaves_no_supervised_tokens"]


@pytest.mark.skipif(not CASES.is_dir(), reason="../shared/cases is not present")
@pytest.mark.parametrize("case", ROW_CASES)
def test_shared_cases_clean_removes_expected_findings(tmp_path, case):
    expect = json.loads((CASES / case / "expect.json").read_text())["expect"]
    cfg = load_config(CASES / case / "datacheck.toml")
    drop = sorted({e["check"] for e in expect})
    res = clean([str(CASES / case / "data")], tmp_path / "out", cfg, drop=drop)
    assert res.input_rows == res.kept + res.quarantined
    for e in expect:
        s = next(s for s in res.shards if s.path == e["shard"])
        want = len(e.get("rows") or e.get("lines") or [])
        assert s.dropped.get(e["check"], 0) == want, (e, s)
    again = datacheck.audit([str(res.out)], cfg)
    assert not [c for _p, c in _checks(again) if c in drop and c != "decode.bad_record"] and not [
        f for sh in again.shards for f in sh.findings if f.check == "decode.bad_record" and f.severity == "error"]


# ------------------------------------------------------------------------------------------ property
_TEXT = st.sampled_from(["a", "b", "hello", "", "   ", None, "<b>x</b>", "é"])
_Y = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=32), st.none(),
               st.sampled_from([1.0, 1e5, -0.0]))
_LABEL = st.one_of(st.integers(-3, 4), st.none(), st.just(-100))
_IDS = st.lists(st.integers(-2, 12), min_size=0, max_size=5)


@st.composite
def frames(draw):
    n = draw(st.integers(0, 25))
    rows = draw(st.lists(st.tuples(_TEXT, _LABEL, _Y, _IDS), min_size=n, max_size=n))
    if rows and draw(st.booleans()):  # plant exact duplicates
        rows += [rows[i] for i in draw(st.lists(st.integers(0, len(rows) - 1), max_size=4))]
    fmt = draw(st.sampled_from(["parquet", "jsonl", "arrow"]))
    drop = draw(st.sampled_from([None, ["dup.exact_in_shard"], ["labels.out_of_range", "finite.nan", "empty.text"]]))
    return rows, fmt, drop


def _frame(rows) -> pl.DataFrame:
    return pl.DataFrame({"text": [r[0] for r in rows], "label": [r[1] for r in rows],
                         "y": [r[2] for r in rows], "input_ids": [r[3] for r in rows]},
                        schema={"text": pl.String, "label": pl.Int64, "y": pl.Float32,
                                "input_ids": pl.List(pl.Int32)})


def _read(path: Path, fmt: str) -> pl.DataFrame:
    if fmt == "parquet":
        return pl.read_parquet(path)
    if fmt == "arrow":
        return pl.read_ipc(path)
    return pl.read_ndjson(path, schema_overrides={"input_ids": pl.List(pl.Int32)})


_CFG = {"columns": {"text": ["text"], "label": "label", "target": ["y"], "input_ids": "input_ids"},
        "tokens": {"vocab_size": 10}, "labels": {"num_classes": 3}, "numeric": {"compute_dtype": "fp16"}}


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames())
def test_property_kept_plus_quarantined_equals_input(case):
    rows, fmt, drop = case
    df = _frame(rows)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in" / f"s.{'jsonl' if fmt == 'jsonl' else fmt}"
        src.parent.mkdir()
        if fmt == "parquet":
            df.write_parquet(src)
        elif fmt == "arrow":
            df.write_ipc(src)
        else:
            # JSONL cannot hold NaN/inf: write them as null there
            df.with_columns(pl.when(pl.col("y").is_finite()).then(pl.col("y")).alias("y")).write_ndjson(src)
            df = pl.read_ndjson(src, schema_overrides={"input_ids": pl.List(pl.Int32)}) if rows else df
        before = src.read_bytes()
        cfg = config_from_dict(_CFG)
        res = clean([str(src.parent)], Path(tmp) / "out", cfg, drop=drop)
        assert src.read_bytes() == before
        s = res.shards[0]
        assert s.input_rows == len(rows) == s.kept + s.quarantined
        event(f"{fmt}: {'some rows quarantined' if s.quarantined else 'nothing quarantined'}")
        kept = _read(res.out / src.name, fmt) if s.kept else df.clear()
        q = _read(res.out / QUARANTINE_DIR / src.name, fmt) if s.quarantined else None
        qrows = q["_datacheck_row"].to_list() if q is not None else []
        keep_idx = [i for i in range(len(rows)) if i not in set(qrows)]
        data_cols = list(df.columns)
        src_df = _read(src, fmt) if rows else df
        want = row_hashes(src_df.select(data_cols))
        assert row_hashes(kept.select(data_cols)) == [want[i] for i in keep_idx]
        if q is not None:
            assert row_hashes(q.select(data_cols)) == [want[i] for i in qrows]
            assert q["_datacheck_row_hash"].to_list() == [want[i] for i in qrows] or fmt == "jsonl"
        # and the output no longer has the dropped findings
        if s.kept:
            again = datacheck.audit([str(res.out)], cfg)
            left = {f.check for sh in again.shards for f in sh.findings}
            assert not left & set(res.drop)
        # NaN rows are found by the reference: every row with a NaN y is quarantined when finite.nan is dropped
        if drop is None or "finite.nan" in drop:
            nan_rows = [i for i, r in enumerate(rows) if isinstance(r[2], float) and math.isnan(r[2])]
            if fmt != "jsonl":
                assert set(nan_rows) <= set(qrows)


@pytest.mark.parametrize("sub", ["megatron_gpt2_openwebtext", "mds_fixtures", "webdataset_text", "litdata_images_partial"])
def test_read_only_formats_are_refused_before_anything_is_written(tmp_path, realdata, sub):
    """Megatron, MDS, WebDataset and litdata shards are read by audit but clean cannot rewrite them: it
    said "internal error: ... N records parse here but the audit read M rows" (exit 3), having parsed
    the binary shard as text lines. Now exit 2 naming the shard and its format, and no --out."""
    p = run_cli("clean", str(realdata / sub), "--out", str(tmp_path / "o"))
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "cannot write" in p.stderr and "internal error" not in p.stderr
    fmt = {"megatron_gpt2_openwebtext": "megatron", "mds_fixtures": "mds", "webdataset_text": "webdataset",
           "litdata_images_partial": "litdata"}[sub]
    assert f"({fmt})" in p.stderr
    assert not (tmp_path / "o").exists() and list(tmp_path.iterdir()) == []


def test_read_only_format_among_cleanable_shards_is_refused(tmp_path, realdata):
    """A JSONL shard next to its Megatron tokenization (agnews_prompts_jsonl): refused as a whole (exit 2),
    naming only the Megatron shard, rather than a cleaned copy missing one of them."""
    p = run_cli("clean", str(realdata / "agnews_prompts_jsonl"), "--out", str(tmp_path / "o"))
    assert p.returncode == 2, p.stderr
    assert "1 shard(s) are in a format it reads but cannot write: ag_news_prompt_text_document.bin (megatron)" in p.stderr
    assert not (tmp_path / "o").exists()
