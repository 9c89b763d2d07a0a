"""``datacheck clean`` of a Hugging Face ``DatasetDict`` folder takes the splits its
``dataset_dict.json`` declares, as ``audit`` does: ``--drop dup.split_overlap`` needs no ``[splits]``
and drops the test rows found in train; without it the summary names the leak (not a cross-shard
repeat) and says the copy still fails the gate, as an audit of the copy does."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
from conftest import run_cli
from dshelp import hf_split

TRAIN = ["train one", "shared a", "train two", "shared b", "train three"]
TEST = ["test one", "shared a", "test two", "shared b"]


def _dataset_dict(root: Path) -> Path:
    hf_split(root, "train", ["data-00000-of-00001.arrow"], len(TRAIN), ["data-00000-of-00001.arrow"],
             rows={"text": TRAIN, "label": [0, 1, 0, 1, 0]})
    hf_split(root, "test", ["data-00000-of-00001.arrow"], len(TEST), ["data-00000-of-00001.arrow"],
             rows={"text": TEST, "label": [1, 1, 0, 0]})
    (root / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "test"]}))
    return root


def _texts(path: Path) -> list[str]:
    with pa.ipc.open_stream(pa.memory_map(str(path))) as r:
        return r.read_all().column("text").to_pylist()


def test_drop_split_overlap_of_a_dataset_dict_needs_no_splits(tmp_path):
    root = _dataset_dict(tmp_path / "dd")
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    r = run_cli("clean", str(root), "--out", str(tmp_path / "out"), "--drop", "dup.split_overlap")
    assert r.returncode == 0, r.stderr
    leaked = [t for t in TEST if t in TRAIN]
    assert _texts(tmp_path / "out/test/data-00000-of-00001.arrow") == [t for t in TEST if t not in TRAIN]
    assert _texts(tmp_path / "out/train/data-00000-of-00001.arrow") == TRAIN
    assert _texts(tmp_path / "out/.quarantine/test/data-00000-of-00001.arrow") == leaked
    assert "FAILS" not in r.stdout
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before   # the input untouched
    audit = run_cli("audit", str(tmp_path / "out"), "--no-cache", "--report-dir", str(tmp_path / "reports"))
    assert audit.returncode == 0, audit.stdout


def test_summary_names_the_leak_left_in_place(tmp_path):
    root = _dataset_dict(tmp_path / "dd")
    r = run_cli("clean", str(root), "--out", str(tmp_path / "out"), "--drop", "empty.text")
    assert r.returncode == 0, r.stderr
    n = sum(t in TRAIN for t in TEST)
    assert f"dup.split_overlap [error]: {n} row(s) of split 'test' also occur in split 'train'" in r.stdout
    assert "dup.exact_across_shards" not in r.stdout
    assert "the cleaned copy still FAILS the gate (--fail-on error) on: dup.split_overlap" in r.stdout
    audit = run_cli("audit", str(tmp_path / "out"), "--no-cache", "--report-dir", str(tmp_path / "reports"))
    assert audit.returncode == 1 and "dup.split_overlap" in audit.stdout
