"""The format protocol end to end, for every registered format: the opened shard's reader
(``ShardData.stream``, else slices of its frame: :func:`datacheck.formats.batches.shard_reader`)
gives batches and rows read again equal to the shard's full read; ``clean``'s rewrite keeps
exactly the kept rows (JSONL/CSV records byte for byte, parquet/Arrow rows as tables); a format
that cannot rewrite is refused with a message naming it."""
from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from conftest import SHARED

from datacheck.formats import jsonvalues, text
from datacheck.formats.batches import FrameReader, shard_reader
from datacheck.formats.registry import FORMATS, open_shard, read_table, refusal, rewrite_mode, rewriter
from datacheck.formats.rewrite import META_COLUMNS, RewriteJob, RewriteRefused
from datacheck.model.config import config_from_dict

REAL = SHARED / "realdata"
DATASET = config_from_dict({}).dataset

ROWS = [{"text": f"row {i}" + "!" * (i % 4), "label": i % 3, "score": i / 8} for i in range(23)]


def _local(tmp_path: Path, fmt: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A shard of ``ROWS`` in format ``fmt`` written under ``tmp_path``."""
    df = pl.DataFrame(ROWS)
    if fmt == "parquet":
        path = tmp_path / "s.parquet"
        df.write_parquet(path, row_group_size=5)
    elif fmt == "arrow":
        path = tmp_path / "s.arrow"
        df.write_ipc(path)
    elif fmt == "arrow-stream":
        path = tmp_path / "s2.arrow"
        df.write_ipc_stream(path)
    elif fmt in ("jsonl", "jsonl-chunks"):
        if fmt == "jsonl-chunks":
            monkeypatch.setattr(jsonvalues, "JSONL_CHUNK_BYTES", 64)  # several chunks: a streamed source
        path = tmp_path / f"{fmt}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    elif fmt == "json":
        path = tmp_path / "s.json"
        path.write_text(json.dumps(ROWS, indent=1))
    elif fmt in ("csv", "tsv"):
        path = tmp_path / f"s.{fmt}"
        df.write_csv(path, separator="," if fmt == "csv" else "\t")
    elif fmt in ("text", "text-chunks"):
        if fmt == "text-chunks":  # several chunks, read again from the file (nothing kept from pass 1)
            monkeypatch.setattr(text, "TEXT_CHUNK_BYTES", 16)
            monkeypatch.setattr(text, "KEEP_BYTES", 0)
        path = tmp_path / f"{fmt}.txt"
        path.write_text("".join(str(r["text"]) + ("\n\n" if i % 5 == 0 else "\n") for i, r in enumerate(ROWS)))
    else:
        raise AssertionError(fmt)
    return path


_REAL = {
    "megatron": REAL / "megatron_gpt2_openwebtext" / "meg-gpt2-openwebtext_text_document.bin",
    "mds": REAL / "mds_fixtures" / "joining_sample_dataset" / "x" / "shard.00000.mds",
    "webdataset": REAL / "webdataset_text" / "testgz.tar",
    "litdata": REAL / "litdata_images_partial" / "chunk-0-0.bin",
}
_LOCAL = ["parquet", "arrow", "arrow-stream", "jsonl", "jsonl-chunks", "json", "csv", "tsv", "text", "text-chunks"]
#: the formats whose opened shard carries its own reader (the rest are held as a frame)
_STREAMED = {"parquet", "arrow", "arrow-stream", "jsonl-chunks", "csv", "tsv", "text", "text-chunks"}


def test_every_registered_format_is_covered():
    names = {n for f in FORMATS for n in f.names}
    assert names == {"parquet", "arrow", "jsonl", "json", "csv", "tsv", "text"} | set(_REAL)


@pytest.mark.parametrize("case", _LOCAL + sorted(_REAL))
@pytest.mark.parametrize("per", [1, 4, 7, 1000])
def test_batches_and_rows_equal_the_full_read(tmp_path, monkeypatch, case, per):
    if case in _REAL:
        path = _REAL[case]
        if not path.exists():
            pytest.skip("../shared/realdata is not present")
        fmt = case
    else:
        path = _local(tmp_path, case, monkeypatch)
        fmt = {"arrow-stream": "arrow", "jsonl-chunks": "jsonl", "text-chunks": "text"}.get(case, case)
    data = open_shard(path, fmt, DATASET, 5)
    full = data.lf.collect()
    cols, n, want = full.columns, full.height, dict(full.schema)
    assert n > 0
    reader = shard_reader(data.stream, data.lf, cols, n)
    if case in _STREAMED:
        assert reader is data.stream and not isinstance(reader, FrameReader)
    else:
        assert data.stream is None and isinstance(reader, FrameReader)
    parts = list(reader.batches(cols, per, want))
    assert [p.height for p in parts[:-1]] == [per] * (len(parts) - 1) and 0 < parts[-1].height <= per
    assert pl.concat(parts).equals(full)
    assert pl.concat(list(reader.batches(cols, per, want, ramp=True))).equals(full)  # parquet: short first/last
    picks = sorted({0, n // 3, n // 2, n - 1})
    got = reader.read_rows(picks, cols, want, per)
    assert got is not None
    assert got.equals(full.with_row_index("__row").filter(pl.col("__row").is_in(picks)))
    # a subset of the columns, in the engine's order
    some = cols[-1:]
    assert pl.concat(list(shard_reader(data.stream, data.lf, some, n).batches(some, per, want))).equals(full.select(some))


def test_a_reader_lacking_a_column_gives_way_to_slices_of_the_frame(tmp_path, monkeypatch):
    data = open_shard(_local(tmp_path, "csv", monkeypatch), "csv", DATASET, 5)
    lf = data.lf.with_columns(pl.col("label").alias("derived"))
    reader = shard_reader(data.stream, lf, ["derived"], len(ROWS))
    assert isinstance(reader, FrameReader) and reader.rescan  # the CSV frame reads the file again: read once
    assert pl.concat(list(reader.batches(["derived"], 5))).to_series().to_list() == [r["label"] for r in ROWS]


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _job(path: Path, fmt: str, rows: int, reasons: dict[int, list[str]], drop: tuple[str, ...] = ()) -> RewriteJob:
    return RewriteJob(source=path, fmt=fmt, rel=path.name, rows=rows, reasons=reasons, drop=drop, dataset=DATASET)


def test_jsonl_rewrite_copies_the_kept_records_byte_for_byte(tmp_path):
    lines = [b'{"a": 1, "t": "x"}', b'{"t":"y",  "a":2}', b'{"a": 3, "t": "\\u00e9"}', b"not json", b"",
             b'{"a": 4, "t": "z"}  ']
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\r\n".join(lines) + b"\r\n")
    out, q = tmp_path / "out" / "in.jsonl", tmp_path / "q" / "in.jsonl"
    got = rewriter("jsonl")(_job(src, "jsonl", 4, {1: ["x.check"]}, drop=("decode.bad_record",)), out, q, _write)
    assert out.read_bytes() == b"".join(lines[i] + b"\r\n" for i in (0, 2, 5))
    assert (got.input_rows, got.kept, got.kept_rows, got.quarantined, got.blank_lines) == (5, 3, 3, 2, 1)
    assert got.reasons == [["x.check"], ["decode.bad_record"]]
    quarantined = [json.loads(x) for x in q.read_text().splitlines()]
    assert [(r["_datacheck_row"], r["_datacheck_line"]) for r in quarantined] == [(1, 2), (None, 4)]


def test_csv_rewrite_keeps_the_kept_records_byte_for_byte(tmp_path):
    lines = [b"text,label", b"a,1", b"b b,2", b"c,3", b"d,4"]
    src = tmp_path / "in.csv"
    src.write_bytes(b"\n".join(lines) + b"\n")
    out, q = tmp_path / "out.csv", tmp_path / "q.csv"
    got = rewriter("csv")(_job(src, "csv", 4, {0: ["x.check"], 2: ["y.check"]}), out, q, _write)
    assert out.read_bytes() == b"".join(lines[i] + b"\n" for i in (0, 2, 4))
    assert (got.kept, got.quarantined) == (2, 2)
    assert q.read_text().splitlines()[0].split(",") == [*META_COLUMNS, "_datacheck_raw", "text", "label"]


@pytest.mark.parametrize("case", ["parquet", "arrow", "arrow-stream"])
def test_table_rewrite_keeps_exactly_the_kept_rows(tmp_path, monkeypatch, case):
    src = _local(tmp_path, case, monkeypatch)
    out, q = tmp_path / "out" / src.name, tmp_path / "q" / src.name
    drop = {1: ["x.check"], 7: ["x.check", "y.check"], 22: ["y.check"]}
    got = rewriter("parquet" if case == "parquet" else "arrow")(_job(src, case, len(ROWS), drop), out, q, _write)
    fmt = "parquet" if case == "parquet" else "arrow"
    kept, kind = read_table(out, fmt)
    assert kind == read_table(src, fmt)[1]
    keep = [i for i in range(len(ROWS)) if i not in drop]
    assert pl.from_arrow(kept).equals(pl.DataFrame(ROWS)[keep])  # type: ignore[union-attr]
    qt, _ = read_table(q, fmt)
    assert qt.column("_datacheck_row").to_pylist() == sorted(drop)
    assert qt.drop_columns(list(META_COLUMNS)).equals(pa.Table.from_pylist([ROWS[i] for i in sorted(drop)],
                                                                             schema=qt.drop_columns(list(META_COLUMNS)).schema))
    assert (got.kept, got.quarantined, got.reasons) == (len(keep), 3, [drop[i] for i in sorted(drop)])


@pytest.mark.parametrize("fmt", ["megatron", "mds", "webdataset", "litdata", "xlsx"])
def test_a_format_that_cannot_rewrite_is_refused_by_name(fmt):
    assert rewrite_mode(fmt) is None
    why = refusal(fmt)
    assert why is not None and f"format {fmt!r}" in why
    with pytest.raises(RewriteRefused, match=f"format '{fmt}'"):
        rewriter(fmt)


def test_rewritable_formats_have_no_refusal():
    assert [refusal(f) for f in ("parquet", "arrow", "jsonl", "json", "csv", "tsv", "text")] == [None] * 7


@pytest.mark.parametrize("case", ["text", "text-chunks"])
@pytest.mark.parametrize("sample_by", ["line", "paragraph"])
def test_text_rewrite_keeps_exactly_the_kept_rows(tmp_path, monkeypatch, case, sample_by):
    src = _local(tmp_path, case, monkeypatch)
    rows = text.open_text(src, sample_by).lf.collect()[text.COLUMN].to_list()
    out, q = tmp_path / "out" / src.name, tmp_path / "q" / src.name
    drop = {1: ["x.check"], len(rows) // 2: ["x.check", "y.check"], len(rows) - 1: ["y.check"]}
    job = RewriteJob(source=src, fmt="text", rel=src.name, rows=len(rows), reasons=drop,
                     dataset=DATASET.model_copy(update={"sample_by": sample_by}))
    got = rewriter("text")(job, out, q, _write)
    assert text.open_text(out, sample_by).lf.collect()[text.COLUMN].to_list() == [
        r for i, r in enumerate(rows) if i not in drop]
    quarantined = [json.loads(x) for x in (q.parent / (q.name + ".jsonl")).read_text().splitlines()]
    assert [(r["_datacheck_row"], r["text"], r["_datacheck_checks"]) for r in quarantined] == [
        (i, rows[i], drop[i]) for i in sorted(drop)]
    assert (got.kept, got.quarantined) == (len(rows) - len(drop), len(drop))
