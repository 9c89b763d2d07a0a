"""A dataset card in an object store (``s3://`` against the moto server of conftest.py): the splits
its ``configs`` declare (``datacheck/io/cardsplits.py``) are read from ``README.md`` at the audited
prefix, as from the local folder, so the audit of the uploaded repository finds the same leak
(``dup.split_overlap``) and the same shard in no split (``index.extra_shard``). Expected rows are
computed here with polars from the frames written."""
from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from s3help import upload

import datacheck
from datacheck.io.cardsplits import CARD, store_card_splits

CARD_TEXT = ("---\nconfigs:\n- config_name: default\n  data_files:\n"
             + "".join(f"  - split: {s}\n    path: {d}/*.parquet\n" for s, d in (("train", "sft"), ("test", "holdout")))
             + "---\n# a dataset\n")


def _frame(lo: int, hi: int) -> pl.DataFrame:
    return pl.DataFrame({"text": [f"sample number {i} about things" for i in range(lo, hi)],
                         "label": [i % 3 for i in range(lo, hi)]})


@pytest.fixture
def repo(tmp_path: Path, s3_server: dict[str, str], s3_endpoint: str) -> tuple[Path, str, pl.DataFrame, pl.DataFrame]:
    root = tmp_path / "repo"
    train, held = _frame(0, 40), pl.concat([_frame(100, 108), _frame(0, 40).slice(3, 6)])
    for rel, df in (("sft/part-0.parquet", train), ("holdout/part-0.parquet", held), ("extra/part-0.parquet", _frame(200, 205))):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        df.write_parquet(root / rel)
    (root / "README.md").write_text(CARD_TEXT, encoding="utf-8")
    upload(s3_server, "cards", root, "repo")
    return root, "s3://cards/repo", train, held


def test_s3_card_splits_equal_local(repo):
    root, url, train, held = repo
    local, remote = datacheck.audit(str(root)), datacheck.audit(url)
    for rep in (local, remote):
        (leak,) = [f for f in rep.findings if f.check == "dup.split_overlap"]
        want = held.with_row_index("row").join(train, on=["text", "label"], how="semi")["row"].to_list()
        assert (leak.count, list(leak.rows), leak.severity) == (6, want, "error")
        (extra,) = [f for f in rep.findings if f.check == "index.extra_shard"]
        assert list(extra.shards) == ["extra/part-0.parquet"]
        assert "from the dataset card's configs" in extra.message
    assert sorted((f.check, f.count, tuple(f.rows)) for f in remote.findings) == sorted(
        (f.check, f.count, tuple(f.rows)) for f in local.findings)


def test_a_store_without_a_card_or_an_unreadable_one_gives_none(repo, s3_server):
    _root, url, _t, _h = repo
    got = store_card_splits(url, ["sft/part-0.parquet", "holdout/part-0.parquet"])
    assert got is not None and got.source == CARD and got.splits == {"train": "sft/*.parquet", "test": "holdout/*.parquet"}
    assert store_card_splits("s3://cards/nothing-here", ["a.parquet"]) is None
    assert store_card_splits("s3://no-such-bucket/x", ["a.parquet"]) is None


def test_s3_card_class_label_equals_local(tmp_path, s3_server, s3_endpoint):
    """The card's dataset_info features (a class_label) are read from the store's README.md as from
    the local one: the same [labels] classes, and the class the rows never use named unseen."""
    root = tmp_path / "cls"
    (root / "data").mkdir(parents=True)
    pl.DataFrame({"text": ["a b", "c d", "e f"], "label": [0, 2, 0]}).write_parquet(root / "data" / "train.parquet")
    (root / "README.md").write_text(
        "---\ndataset_info:\n  features:\n  - name: text\n    dtype: string\n  - name: label\n    dtype:\n"
        "      class_label:\n        names:\n          '0': neg\n          '1': neu\n          '2': pos\n---\n",
        encoding="utf-8")
    upload(s3_server, "cardcls", root, "cls")
    local, remote = datacheck.audit(str(root)), datacheck.audit("s3://cardcls/cls")
    assert local.label_facts["names"] == ["neg", "neu", "pos"]
    assert remote.label_facts == local.label_facts
    (f,) = [f for f in remote.findings if f.check == "labels.unseen_class"]
    assert f.details["unseen"] == ["neu"]


def test_a_utf16_card_in_a_store_is_said_as_a_local_one(tmp_path, s3_server, s3_endpoint):
    """The repository above with its card saved as UTF-16 (load_dataset raises on it): no splits from
    it, locally or at the store's prefix, and dup.split_overlap's skipped entry says why, the same words."""
    root = tmp_path / "u16"
    train, held = _frame(0, 40), pl.concat([_frame(100, 108), _frame(0, 40).slice(3, 6)])
    for rel, df in (("sft/part-0.parquet", train), ("holdout/part-0.parquet", held)):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        df.write_parquet(root / rel)
    (root / "README.md").write_bytes(CARD_TEXT.encode("utf-16"))
    upload(s3_server, "cards16", root, "u16")
    reasons = []
    for rep in (datacheck.audit(str(root)), datacheck.audit("s3://cards16/u16")):
        assert "dup.split_overlap" not in [f.check for f in rep.findings]
        reasons.append([s["reason"] for s in rep.skipped if s["check"] == "dup.split_overlap"])
    assert reasons[0] == reasons[1] and len(reasons[0]) == 1
    assert "README.md is UTF-16LE text (byte order mark ff fe), not UTF-8" in reasons[0][0]
