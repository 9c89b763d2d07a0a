"""``datacheck clean`` outputs: Hugging Face ``save_to_disk`` metadata kept loadable, quarantine files
only for shards that lost rows, and JSONL/CSV copies that keep their line endings."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import ROOT

from datacheck.model.config import config_from_dict
from datacheck.tools.clean import INDEX_NAME, QUARANTINE_DIR, clean

MBERT = ROOT.parent / "shared" / "realdata" / "dkhate_danish_offensive" / "dkhate_mbert"

from conftest import run_cli  # noqa: E402


def _stream(path: Path) -> pa.Table:
    with pa.memory_map(str(path)) as src:
        return pa.ipc.open_stream(src).read_all()


def _write_stream(path: Path, table: pa.Table) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)


def _oov_rows(table: pa.Table, vocab: int) -> int:
    """Reference: rows with an id < 0 or >= vocab (plain Python over the list column)."""
    return sum(1 for ids in table.column("input_ids").to_pylist() if ids and (max(ids) >= vocab or min(ids) < 0))


# ------------------------------------------------------------------------------------------ HF save_to_disk
@pytest.mark.skipif(not MBERT.is_dir(), reason="../shared/realdata is not present")
def test_dkhate_mbert_output_is_a_consistent_save_to_disk_dataset(tmp_path):
    src = tmp_path / "dkhate_mbert"
    shutil.copytree(MBERT, src)
    res = clean([str(src)], tmp_path / "out", config_from_dict({"tokens": {"vocab_size": 30522}}),
                drop=["tokens.out_of_vocab"])
    out = res.out
    assert res.metadata == ("dataset_dict.json", "test/dataset_info.json", "test/state.json",
                            "train/dataset_info.json", "train/state.json")
    assert (out / "dataset_dict.json").read_bytes() == (src / "dataset_dict.json").read_bytes()
    kept = {}
    for split in ("train", "test"):
        table_in = _stream(src / split / "data-00000-of-00001.arrow")
        table_out = _stream(out / split / "data-00000-of-00001.arrow")
        # mBERT ids (vocab 119547) against a 30522 vocab: the reference count of dropped rows
        assert table_out.num_rows == table_in.num_rows - _oov_rows(table_in, 30522)
        assert _oov_rows(table_out, 30522) == 0
        assert table_out.schema.metadata == table_in.schema.metadata  # HF features kept
        kept[split] = table_out.num_rows
        state_in = json.loads((src / split / "state.json").read_text())
        state_out = json.loads((out / split / "state.json").read_text())
        assert state_out["_data_files"] == [{"filename": "data-00000-of-00001.arrow"}]
        assert all((out / split / f["filename"]).is_file() for f in state_out["_data_files"])
        assert state_out == state_in  # nothing else changed (the listing is the same file)
    assert kept == {"train": 2960 - 2773, "test": 329 - 303}
    for split in ("train", "test"):
        info_in = json.loads((src / split / "dataset_info.json").read_text())
        info_out = json.loads((out / split / "dataset_info.json").read_text())
        # every split of the DatasetDict that was cleaned gets its kept row count
        assert {k: v["num_examples"] for k, v in info_out["splits"].items()} == kept
        for k in info_in["splits"]:
            info_in["splits"][k]["num_examples"] = kept[k]
        assert info_out == info_in  # the rest of the JSON as it was
        assert list(info_out) == list(info_in)  # key order kept
    # the output audits with the shipped-list checks consistent: no index.* finding
    import datacheck

    again = datacheck.audit([str(out)], config_from_dict({"tokens": {"vocab_size": 30522}}))
    assert not [f.check for f in again.dataset_findings if f.check.startswith("index.")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dkhate_mbert", "out"]  # no temporary folder left


def test_save_to_disk_listing_drops_unreadable_shard_and_missing_split(tmp_path):
    src = tmp_path / "ds"
    t = pa.table({"text": ["a", "", "b", "c"], "label": pa.array([0, 1, 0, 1], pa.int64())})
    _write_stream(src / "train" / "data-00000-of-00002.arrow", t)
    (src / "train" / "data-00001-of-00002.arrow").write_bytes(b"")  # unreadable: not copied
    state = {"_data_files": [{"filename": "data-00000-of-00002.arrow"}, {"filename": "data-00001-of-00002.arrow"}],
             "_fingerprint": "abc", "_split": "train"}
    (src / "train" / "state.json").write_text(json.dumps(state, indent=2))
    info = {"builder_name": "x", "splits": {"train": {"name": "train", "num_examples": 4},
                                            "validation": {"name": "validation", "num_examples": 9}}}
    (src / "train" / "dataset_info.json").write_text(json.dumps(info, indent=2))
    (src / "dataset_dict.json").write_text('{"splits": ["train", "validation"]}')
    res = clean([str(src / "train")], tmp_path / "o1", config_from_dict({}))
    # cleaning one split folder: its metadata sits at the output root; the empty text row is dropped
    assert res.metadata == ("dataset_info.json", "state.json")
    assert json.loads((res.out / "state.json").read_text()) == {
        "_data_files": [{"filename": "data-00000-of-00002.arrow"}], "_fingerprint": "abc", "_split": "train"}
    assert json.loads((res.out / "dataset_info.json").read_text())["splits"] == {
        "train": {"name": "train", "num_examples": 3}, "validation": {"name": "validation", "num_examples": 9}}
    # the whole DatasetDict: dataset_dict.json lists only the split folders written
    res = clean([str(src)], tmp_path / "o2", config_from_dict({}))
    assert res.metadata == ("dataset_dict.json", "train/dataset_info.json", "train/state.json")
    assert json.loads((res.out / "dataset_dict.json").read_text()) == {"splits": ["train"]}
    assert _stream(res.out / "train" / "data-00000-of-00002.arrow").num_rows == 3


def test_plain_folder_gets_no_metadata(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text('{"text": "x"}\n')
    res = clean([str(tmp_path / "in")], tmp_path / "out", config_from_dict({}))
    assert res.metadata == ()
    assert sorted(p.relative_to(res.out).as_posix() for p in res.out.rglob("*")) == ["a.jsonl", INDEX_NAME]


# ------------------------------------------------------------------------------------------ quarantine files
def test_quarantine_file_only_for_shards_that_lost_rows(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    (src / "ok.jsonl").write_text('{"text": "a"}\n{"text": "b"}\n')
    (src / "bad.jsonl").write_text('{"text": "a"}\n{"text": ""}\n')
    (src / "ok.csv").write_text("text\na\n")
    pa_tab = pa.table({"text": ["x", "y"]})
    import pyarrow.parquet as pq

    pq.write_table(pa_tab, src / "ok.parquet")
    _write_stream(src / "ok.arrow", pa_tab)
    res = clean([str(src)], tmp_path / "out", config_from_dict({}))
    assert {s.path: s.quarantined for s in res.shards} == {"bad.jsonl": 1, "ok.arrow": 0, "ok.csv": 0,
                                                           "ok.jsonl": 0, "ok.parquet": 0}
    assert sorted(p.name for p in (res.out / QUARANTINE_DIR).rglob("*") if p.is_file()) == ["bad.jsonl"]
    assert sorted(p.name for p in res.out.iterdir() if p.is_file()) == [
        "bad.jsonl", "index.json", "ok.arrow", "ok.csv", "ok.jsonl", "ok.parquet"]


def test_nothing_dropped_anywhere_leaves_no_quarantine_folder(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text('{"text": "x"}\n')
    res = clean([str(tmp_path / "in")], tmp_path / "out", config_from_dict({}))
    assert not (res.out / QUARANTINE_DIR).exists() and res.quarantined == 0


# ------------------------------------------------------------------------------------------ line endings
def test_crlf_jsonl_and_csv_stay_crlf(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    (src / "r.jsonl").write_bytes(b'{"text": "a", "label": 0}\r\n{"text": "", "label": 1}\r\n'
                                  b'{"text": "c", "label": 1}\r\n')
    (src / "t.csv").write_bytes(b'text,label\r\nok,0\r\n,1\r\n"two, words",1\r\n')
    (src / "lf.tsv").write_bytes(b"text\tlabel\nok\t0\n\t1\n")
    res = clean([str(src)], tmp_path / "out", config_from_dict({"labels": {"num_classes": 2}}))
    assert (res.out / "r.jsonl").read_bytes() == b'{"text": "a", "label": 0}\r\n{"text": "c", "label": 1}\r\n'
    assert (res.out / "t.csv").read_bytes() == b'text,label\r\nok,0\r\n"two, words",1\r\n'
    assert (res.out / "lf.tsv").read_bytes() == b"text\tlabel\nok\t0\n"  # LF stays LF
    q = (res.out / QUARANTINE_DIR / "t.csv").read_bytes()
    assert q.count(b"\r\n") == 2 and q.count(b"\n") == 2  # header + one row, CRLF like the input
    assert {s.path: (s.kept, s.quarantined) for s in res.shards} == {"lf.tsv": (1, 1), "r.jsonl": (2, 1),
                                                                    "t.csv": (2, 1)}


def test_cli_clean_accepts_no_progress(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text('{"text": "x"}\n')
    p = run_cli("clean", str(tmp_path / "in"), "--out", str(tmp_path / "out"), "--no-progress")
    assert p.returncode == 0, p.stderr
    assert "total: 1 in = 1 kept + 0 quarantined" in p.stdout


def test_drop_dup_shard_renumbers_a_save_to_disk_split_that_load_from_disk_opens(tmp_path):
    """A ``DatasetDict.save_to_disk`` folder whose train shard 1 of 0..2 repeats shard 0's bytes (a
    re-upload): ``--drop dup.shard`` writes the kept shards 0 and 2 as 0..1 of 2, ``state.json`` lists
    them under those names, and ``datasets.load_from_disk`` opens the copy with the kept rows, in order."""
    datasets = pytest.importorskip("datasets")
    src = tmp_path / "dd"
    train = datasets.Dataset.from_dict({"text": [f"train row {i}" for i in range(6)], "label": [0, 1, 0, 1, 1, 0]})
    test = datasets.Dataset.from_dict({"text": ["test row a", "test row b"], "label": [1, 0]})
    datasets.DatasetDict({"train": train, "test": test}).save_to_disk(str(src), num_shards={"train": 3, "test": 1})
    shard = [src / "train" / f"data-0000{k}-of-00003.arrow" for k in range(3)]
    shutil.copyfile(shard[0], shard[1])
    # reference: what the copy must hold, read from the input files (shard 1 is shard 0's bytes)
    want = _stream(shard[0]).to_pylist() + _stream(shard[2]).to_pylist()
    res = clean([str(src)], tmp_path / "out", config_from_dict({}), drop=["dup.shard"])
    out = res.out
    names = [f"data-{j:05d}-of-{2:05d}.arrow" for j in range(2)]
    assert sorted(p.name for p in (out / "train").glob("*.arrow")) == names
    assert json.loads((out / "train" / "state.json").read_text())["_data_files"] == [{"filename": n} for n in names]
    loaded = datasets.load_from_disk(str(out))
    assert loaded["train"].to_list() == want
    assert loaded["test"].to_list() == test.to_list()
    # the copy passes the gate on the shipped list and the numbering
    import datacheck

    again = datacheck.audit([str(out)], config_from_dict({}), workers=1)
    assert [f.check for f in again.dataset_findings if f.check.startswith(("index.", "dup.shard"))] == []
    assert [x.check for x in res.left_in_place if x.check.startswith("index.")] == []
