"""UTF-16 and UTF-32 text given to the line formats (datacheck/formats/wide.py): one
``decode.unreadable`` finding per shard naming the encoding and the ``iconv`` command that converts it,
in every text reader (CSV/TSV, JSON Lines, JSON arrays, plain text; compressed; an object in a store),
and nothing of the NUL-interleaved text audited as rows; a UTF-8 byte order mark stays UTF-8, read as the
reference readers read it; a cp1252 file keeps its cp1252 advice.

The reference readers load nothing from such a file (run below where installed): pandas' ``read_csv``
and ``datasets.load_dataset("csv" | "json" | "text")`` raise ``UnicodeDecodeError`` on a UTF-16 BOM,
polars' ``read_csv`` a ``ComputeError`` (invalid UTF-8); without a BOM pandas and polars read column
names of NUL-interleaved characters (``'t\\x00e\\x00x\\x00t\\x00'``)."""
from __future__ import annotations

import codecs
import gzip
import json
import shutil
import subprocess
from pathlib import Path

import fsspec
import polars as pl
import pytest

import datacheck
from datacheck.formats import csv, jsonl, text
from datacheck.formats.registry import open_shard
from datacheck.formats.wide import wide_encoding
from datacheck.io.shardbytes import Unreadable
from datacheck.model.config import config_from_dict

RECORDS = [{"text": f"sample {i}: Grüße, café", "label": i % 3} for i in range(20)]
#: each file's UTF-8 text, by extension
TEXTS = {
    "jsonl": "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in RECORDS),
    "json": json.dumps(RECORDS, ensure_ascii=False, indent=1) + "\n",
    "csv": "text,label\n" + "".join(f"\"{r['text']}\",{r['label']}\n" for r in RECORDS),
    "tsv": "text\tlabel\n" + "".join(f"{r['text']}\t{r['label']}\n" for r in RECORDS),
    "txt": "".join(f"{r['text']}\n" for r in RECORDS),
}
#: (the file's encoding as the finding names it, its bytes written with Python's codecs, the name
#: ``iconv -f`` takes for it)
ENCODINGS = {
    "utf16le-bom": ("UTF-16LE", lambda s: codecs.BOM_UTF16_LE + s.encode("utf-16-le"), "UTF-16"),
    "utf16be-bom": ("UTF-16BE", lambda s: codecs.BOM_UTF16_BE + s.encode("utf-16-be"), "UTF-16"),
    "utf16le": ("UTF-16LE", lambda s: s.encode("utf-16-le"), "UTF-16LE"),
    "utf16be": ("UTF-16BE", lambda s: s.encode("utf-16-be"), "UTF-16BE"),
    "utf32le-bom": ("UTF-32LE", lambda s: codecs.BOM_UTF32_LE + s.encode("utf-32-le"), "UTF-32"),
    "utf32be-bom": ("UTF-32BE", lambda s: codecs.BOM_UTF32_BE + s.encode("utf-32-be"), "UTF-32"),
    "utf32le": ("UTF-32LE", lambda s: s.encode("utf-32-le"), "UTF-32LE"),
    "utf32be": ("UTF-32BE", lambda s: s.encode("utf-32-be"), "UTF-32BE"),
}


@pytest.mark.parametrize("kind", list(ENCODINGS))
@pytest.mark.parametrize("ext", list(TEXTS))
def test_wide_encoding_of_each_kind(ext, kind):
    enc, write, _ = ENCODINGS[kind]
    got = wide_encoding(write(TEXTS[ext]))
    assert got is not None and (got.encoding, got.bom) == (enc, kind.endswith("-bom"))


@pytest.mark.parametrize("data", [
    b"", b"a", b"text,label\nhi,1\n", codecs.BOM_UTF8 + b"text,label\nhi,1\n", "café\n".encode("cp1252"),
    b"\x00" * 4096,                                    # a zero-filled file: NULs at every offset
    b'{"a": 1}\n' + b"\x00" * 64,                      # a zero-filled tail after UTF-8 text
    "日本語のテキスト\n".encode("utf-8"),
])
def test_not_wide(data):
    assert wide_encoding(data) is None


def _audit(folder: Path) -> dict[str, dict]:
    """The report's shards of the files of ``folder``, by name (each named: a ``.txt`` in a folder of
    other shards is left out, as ``datasets`` loads a folder's most common format)."""
    rep = json.loads(datacheck.audit(sorted(str(p) for p in folder.iterdir())).to_json())
    return {Path(s["path"]).name: s for s in rep["shards"]}


def _unpacked(path: Path) -> bytes:
    return gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()


def _converted(folder: Path, command: str, name: str, frm: str) -> bytes:
    """The UTF-8 bytes (decompressed) the finding's ``command`` writes from the file ``name`` of ``folder``:
    run by the shell where iconv and gzip are installed, else its meaning in Python's codecs (``UTF-16``,
    ``UTF-32``: the byte order read from the BOM, which is dropped, as iconv does)."""
    if shutil.which("iconv") and shutil.which("gzip"):
        subprocess.run(command, shell=True, cwd=folder, check=True)
        return _unpacked(folder / command.rpartition("> ")[2])
    return _unpacked(folder / name).decode(frm).encode("utf-8")


@pytest.mark.parametrize("kind", list(ENCODINGS))
def test_every_text_reader_refuses_wide_text_naming_it(tmp_path, kind):
    """One ``decode.unreadable`` per shard (no rows, no bad-record storm, no column of NUL-interleaved
    names, no dup finding), naming the encoding, how it was found and a command whose output is the
    file's UTF-8 text, which then audits clean with every record a row."""
    enc, write, frm = ENCODINGS[kind]
    data = tmp_path / "data"
    data.mkdir()
    for ext, s in TEXTS.items():
        (data / f"a.{ext}").write_bytes(write(s))
    (data / "b.jsonl.gz").write_bytes(gzip.compress(write(TEXTS["jsonl"])))
    shards = _audit(data)
    assert set(shards) == {"a.jsonl", "a.json", "a.csv", "a.tsv", "a.txt", "b.jsonl.gz"}  # the .json sniffed too
    out = tmp_path / "utf8"
    out.mkdir()
    for name, shard in shards.items():
        assert shard["rows"] is None
        (f,) = shard["findings"]
        assert f["check"] == "decode.unreadable" and f["severity"] == "error"
        msg = f["message"]
        assert f"the file is {enc} text, not UTF-8" in msg
        mark = {"UTF-16LE": "FF FE", "UTF-16BE": "FE FF", "UTF-32LE": "FF FE 00 00", "UTF-32BE": "00 00 FE FF"}[enc]
        assert (f"byte order mark {mark})" in msg) == kind.endswith("-bom")
        assert f"iconv -f {frm} -t UTF-8" in msg
        command = msg.split("Re-encode it as UTF-8: ")[1].removesuffix(". The other shards were still audited.")
        utf8 = _converted(data, command, name, frm)
        assert utf8 == TEXTS[name.split(".")[1]].encode("utf-8")
        (out / name).write_bytes(gzip.compress(utf8) if name.endswith(".gz") else utf8)
    for name, shard in _audit(out).items():
        assert shard["rows"] == len(RECORDS), name
        assert not [f for f in shard["findings"] if f["check"].startswith("decode.")], name


def test_the_trial_files_excel_unicode_text_and_pandas_utf16(tmp_path):
    """The trial's inputs: an Excel "Unicode Text" TSV (UTF-16LE, BOM FF FE, CRLF) and pandas'
    ``to_csv(encoding="utf-16")``, and pandas' own reading of them."""
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"text": ["Grüße aus Köln", "hello", "naïve café"], "label": [0, 1, 0]})
    df.to_csv(tmp_path / "pandas.csv", index=False, encoding="utf-16")
    (tmp_path / "excel.tsv").write_bytes(codecs.BOM_UTF16_LE + "text\tlabel\r\nGrüße\t0\r\nhello\t1\r\n".encode("utf-16-le"))
    for name in ("pandas.csv", "excel.tsv"):
        with pytest.raises(UnicodeDecodeError):  # the reference reads nothing of it
            pd.read_csv(tmp_path / name, sep="\t" if name.endswith(".tsv") else ",")
        with pytest.raises(pl.exceptions.ComputeError):
            pl.read_csv(tmp_path / name)
    assert list(pd.read_csv(tmp_path / "pandas.csv", encoding="utf-16").columns) == ["text", "label"]
    shards = _audit(tmp_path)
    for name in ("pandas.csv", "excel.tsv"):
        (f,) = shards[name]["findings"]
        assert f["check"] == "decode.unreadable"
        assert "UTF-16LE text, not UTF-8 (it starts with the UTF-16 byte order mark FF FE)" in f["message"]
        assert f"iconv -f UTF-16 -t UTF-8 {name} > {name.replace('.', '.utf8.')}" in f["message"]
        assert "cp1252" not in f["message"]


def test_a_wide_shard_in_a_store_is_refused_alike(tmp_path):
    data = ENCODINGS["utf16le-bom"][1](TEXTS["jsonl"])
    fsspec.filesystem("memory").pipe("/wide-test/w.jsonl", data)
    (tmp_path / "w.jsonl").write_bytes(data)
    ds = config_from_dict({}).dataset
    with pytest.raises(Unreadable) as here:
        open_shard(tmp_path / "w.jsonl", "jsonl", ds, 5)
    with pytest.raises(Unreadable) as there:
        open_shard("memory://wide-test/w.jsonl", "jsonl", ds, 5)
    assert there.value.reason == here.value.reason and "UTF-16LE" in here.value.reason


def test_datasets_refuses_utf16(tmp_path):
    """``datasets``' builders (the references of the JSON Lines, CSV and text readers) load nothing
    from a UTF-16 file."""
    load_dataset = pytest.importorskip("datasets").load_dataset
    for ext, builder in (("jsonl", "json"), ("csv", "csv"), ("txt", "text")):
        path = tmp_path / f"u.{ext}"
        path.write_bytes(TEXTS[ext].encode("utf-16"))
        with pytest.raises(Exception) as err:  # DatasetGenerationError, its cause UnicodeDecodeError
            load_dataset(builder, data_files=str(path), split="train", cache_dir=str(tmp_path / "hf"))
        cause: BaseException | None = err.value
        while cause is not None and not isinstance(cause, UnicodeDecodeError):
            cause = cause.__cause__ or cause.__context__
        assert isinstance(cause, UnicodeDecodeError), ext


@pytest.mark.parametrize("ext", ["jsonl", "csv", "txt"])
def test_cp1252_keeps_its_cp1252_advice(tmp_path, ext):
    (tmp_path / f"c.{ext}").write_bytes(TEXTS[ext].encode("cp1252"))
    (shard,) = _audit(tmp_path).values()
    assert shard["rows"] == len(RECORDS)
    (f,) = [f for f in shard["findings"] if f["check"].startswith("decode.")]
    assert f["check"] == "decode.invalid_utf8" and f["details"]["likely_encoding"] == "cp1252"
    assert "iconv -f cp1252 -t utf-8" in f["message"]


def test_a_utf8_bom_is_utf8_read_as_the_references_read_it(tmp_path):
    """EF BB BF is UTF-8: no finding; the CSV header names and the first JSON Lines record without it (as
    pandas' ``read_csv`` and ``datasets``' json builder read them), plain text keeps it at the start of the
    first row (as ``datasets``' text builder, ``open(encoding="utf-8")``, does)."""
    for ext in ("csv", "jsonl", "txt"):
        (tmp_path / f"b.{ext}").write_bytes(codecs.BOM_UTF8 + TEXTS[ext].encode())
    ds = config_from_dict({}).dataset
    got = {ext: open_shard(tmp_path / f"b.{ext}", fmt, ds, 5) for ext, fmt in (("csv", "csv"), ("jsonl", "jsonl"),
                                                                                ("txt", "text"))}
    assert all(not d.decode_findings for d in got.values())
    first_line = TEXTS["txt"].splitlines()[0]
    assert got["csv"].lf.collect_schema().names() == ["text", "label"]
    assert got["jsonl"].lf.collect().row(0, named=True) == RECORDS[0]
    assert got["txt"].lf.collect()[text.COLUMN][0] == "\ufeff" + first_line
    pd = pytest.importorskip("pandas")
    assert list(pd.read_csv(tmp_path / "b.csv").columns) == ["text", "label"]
    datasets = pytest.importorskip("datasets")
    hf = {ext: datasets.load_dataset(b, data_files=str(tmp_path / f"b.{ext}"), split="train",
                                     cache_dir=str(tmp_path / "hf"))[0]
          for ext, b in (("jsonl", "json"), ("txt", "text"), ("csv", "csv"))}
    assert hf["jsonl"] == RECORDS[0] and hf["txt"] == {"text": "\ufeff" + first_line}
    assert list(hf["csv"]) == ["text", "label"]


def test_the_readers_refuse_before_reading(tmp_path):
    """Each reader's own entry point (not only the audit) refuses the file."""
    w = ENCODINGS["utf16be"][1]
    (tmp_path / "a.csv").write_bytes(w(TEXTS["csv"]))
    (tmp_path / "a.jsonl").write_bytes(w(TEXTS["jsonl"]))
    (tmp_path / "a.json").write_bytes(w(TEXTS["json"]))
    (tmp_path / "a.txt").write_bytes(w(TEXTS["txt"]))
    ds = config_from_dict({}).dataset
    for call in (lambda: csv.open_csv(tmp_path / "a.csv", "csv", ds, 5, ()),
                 lambda: jsonl.open_jsonl(tmp_path / "a.jsonl", 5),
                 lambda: jsonl.open_json_array(tmp_path / "a.json", 5),
                 lambda: text.open_text(tmp_path / "a.txt")):
        with pytest.raises(Unreadable, match="UTF-16BE text, not UTF-8"):
            call()
    assert jsonl.sniff(tmp_path / "a.json") == "json"
