"""Real data (../shared/realdata, see its PROVENANCE.md): the figures read by hand there (rows, findings, shards)."""
from __future__ import annotations

import pytest

import datacheck

pytestmark = pytest.mark.realdata

SST2 = {"columns": {"text": "sentence", "label": "label"}, "labels": {"num_classes": 2}}
MBERT = {"tokens": {"vocab_size": 119547, "pad_token_id": 0}}


@pytest.fixture(scope="module")
def sst2(realdata_dir):
    return datacheck.audit(str(realdata_dir / "sst2_vi_glue_parquet"), config=SST2)


@pytest.fixture(scope="module")
def realdata_dir():
    from conftest import REALDATA

    if not REALDATA.is_dir():
        pytest.skip("../shared/realdata is not present")
    return REALDATA


def _shard(rep, prefix):
    (s,) = [s for s in rep.shards if s.path.startswith(prefix)]
    return s


def test_sst2_train_duplicates(sst2):
    s = _shard(sst2, "train-")
    assert s.rows == 67349
    (f,) = [f for f in s.findings if f.check == "dup.exact_in_shard"]
    assert (f.count, f.severity) == (3622, "warn")
    assert "(content: sentence, label)" in f.message  # idx has no role and does not make rows distinct


def test_sst2_test_unlabelled_sentinel(sst2):
    s = _shard(sst2, "test-")
    (f,) = [f for f in s.findings if f.check == "labels.unexpected_sentinel"]
    assert (f.count, f.column, f.severity, s.rows) == (1821, "label", "error", 1821)
    assert "-1 x1821" in f.message
    assert not [f for f in s.findings if f.check == "labels.out_of_range"]


def test_sst2_validation_is_clean(sst2):
    s = _shard(sst2, "validation-")
    assert s.rows == 872
    assert [f for f in s.findings if f.severity in ("error", "warn")] == []
    assert s.status == "pass"


def test_sst2_report_shape(sst2):
    assert sst2.summary["rows"] == 67349 + 872 + 1821
    assert sst2.roles["text"] == {"columns": ["sentence"], "inferred": False}
    assert not sst2.passed


@pytest.mark.parametrize("vocab, train_oov, test_oov", [(119547, 0, 0), (30522, 2773, 303)])
def test_dkhate_mbert(realdata_dir, vocab, train_oov, test_oov):
    rep = datacheck.audit(str(realdata_dir / "dkhate_danish_offensive" / "dkhate_mbert"),
                          config={"tokens": {**MBERT["tokens"], "vocab_size": vocab}})
    assert [(s.path, s.rows) for s in rep.shards] == [("test/data-00000-of-00001.arrow", 329),
                                                       ("train/data-00000-of-00001.arrow", 2960)]
    fam = ("tokens.", "mask.", "padding.")
    for s, oov in ((_shard(rep, "train/"), train_oov), (_shard(rep, "test/"), test_oov)):
        got = [(f.check, f.count) for f in s.findings if f.check.startswith(fam)]
        assert got == ([("tokens.out_of_vocab", oov)] if oov else []), s.path
    skipped = {x["check"] for x in rep.skipped}
    for cid in ("tokens.out_of_vocab", "mask.non_binary", "mask.not_contiguous", "padding.token_not_pad"):
        assert cid not in skipped  # these ran: their facts and columns are all there
    assert rep.roles["input_ids"]["inferred"] and rep.roles["attention_mask"]["inferred"]
    lengths = _shard(rep, "train/").stats["lengths"]
    # every row is padded to 128 (PROVENANCE); lengths count attended tokens (attention_mask sum)
    assert sum(c for _, c in lengths["histogram"]) == 2960
    assert (lengths["min"], lengths["max"]) == (3, 128)
    assert sum(c for n, c in lengths["histogram"] if n > 64) == 279
