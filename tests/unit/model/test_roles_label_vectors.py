"""A ``labels`` column of float lists that is one answer per row (Hugging Face's multi-label
classification, ``problem_type="multi_label_classification"``: one 0.0/1.0 per class, floats because
``BCEWithLogitsLoss`` takes them so; or a multi-output regression target) is the ``target`` role, not
token labels.

Every clean multi-label shard failed the gate: ``labels`` was read as token labels and its float
dtype was ``schema.dtype`` (error: "a float id cannot index an embedding. Write integers"), for the
raw rows (text + labels) and the tokenized ones (input_ids, attention_mask + labels), while a NaN or
a null in the vectors then passed unjudged ("The labels checks did not run"). Token labels written as
floats (aligned with the ids) stay ``schema.dtype``. Real material: tinyshakespeare lines and the
MiniLM BERT tokenizer (its tokenizer.json pads every row to 128); expected positions computed here."""
from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from checkhelp import findings
from conftest import REALDATA

import datacheck
from datacheck.model.config import ColumnsSection
from datacheck.model.roles import float_vector_labels, resolve_roles

SHAKES = REALDATA / "tinyshakespeare" / "input.txt"
BERT = REALDATA / "minilm_bert_tokenizer" / "tokenizer.json"
pytestmark = pytest.mark.skipif(not (SHAKES.is_file() and BERT.is_file()), reason="shared real data not present")

CLASSES = 6


def _texts(n: int) -> list[str]:
    seen: dict[str, None] = {}
    for line in SHAKES.read_text(encoding="utf-8").splitlines():
        if len(line.strip()) > 25:
            seen.setdefault(line.strip(), None)
        if len(seen) == n:
            break
    return list(seen)


def _vectors(n: int, seed: int = 0) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    v = (rng.random((n, CLASSES)) < 0.3).astype(np.float64)
    v[v.sum(axis=1) == 0, 0] = 1.0  # every row has a class
    return v.tolist()


def _tokenized(texts: list[str]) -> dict[str, list]:
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer.from_file(str(BERT))
    enc = tok.encode_batch(texts)
    return {"input_ids": [e.ids for e in enc], "token_type_ids": [e.type_ids for e in enc],
            "attention_mask": [e.attention_mask for e in enc]}


def test_role_of_a_float_vector_labels_column():
    vec = pl.List(pl.Float64)
    assert float_vector_labels({"labels": vec}) and float_vector_labels({"labels": pl.List(pl.Float32)})
    assert not float_vector_labels({"labels": pl.List(pl.Int64)}) and not float_vector_labels({"labels": pl.Float64})
    # beside text only: the target; beside token ids: token labels unless the rows say otherwise
    roles = resolve_roles(ColumnsSection(), {"text": pl.String, "labels": vec})
    assert roles.target == ("labels",) and roles.labels is None and "target" in roles.inferred
    ids = {"input_ids": pl.List(pl.Int64), "labels": vec}
    assert resolve_roles(ColumnsSection(), ids).labels == "labels"
    assert resolve_roles(ColumnsSection(), ids, label_vectors=True).target == ("labels",)
    # the config's roles win
    assert resolve_roles(ColumnsSection(labels="labels"), {"text": pl.String, "labels": vec}).labels == "labels"
    assert resolve_roles(ColumnsSection(target="score"), {"text": pl.String, "labels": vec,
                                                          "score": pl.Float64}).target == ("score",)


@pytest.mark.parametrize("form", ["text", "tokenized"])
def test_clean_multilabel_rows_pass(tmp_path, form):
    texts = _texts(200)
    cols = {"text": texts} if form == "text" else _tokenized(texts)
    df = pl.DataFrame({**cols, "labels": _vectors(len(texts))})
    df.write_parquet(tmp_path / "train.parquet")
    rep = datacheck.audit([str(tmp_path / "train.parquet")], config={"labels": {"target_kind": "binary"}})
    assert rep.findings == [] and rep.passed, [(f.check, f.message) for f in rep.findings]
    assert rep.shards[0].layout == ("regression" if form == "text" else "text_classification")
    assert rep.roles["target"] == {"columns": ["labels"], "inferred": True} and "labels" not in rep.roles


def test_defects_in_tokenized_multilabel_vectors_are_found(tmp_path):
    texts = _texts(200)
    vec = _vectors(len(texts), seed=1)
    vec[7][2] = float("nan")
    vec[11][0] = 2.0
    vec[40] = None  # type: ignore[call-overload]
    df = pl.DataFrame({**_tokenized(texts), "labels": vec})
    df.write_parquet(tmp_path / "train.parquet")
    rep = datacheck.audit([str(tmp_path / "train.parquet")], config={"labels": {"target_kind": "binary"}})
    nan_rows = [i for i, v in enumerate(vec) if v is not None and any(np.isnan(v))]
    big = [i for i, v in enumerate(vec) if v is not None and any(x > 1 for x in v if not np.isnan(x))]
    null = [i for i, v in enumerate(vec) if v is None]
    assert (nan_rows, big, null) == ([7], [11], [40])
    assert list(findings(rep, "finite.nan", "labels")[0].rows) == nan_rows
    assert 11 in findings(rep, "labels.binary_out_of_range", "labels")[0].rows
    assert list(findings(rep, "labels.null", "labels")[0].rows) == null
    assert not findings(rep, "schema.dtype")


def test_token_labels_written_as_floats_stay_schema_dtype(tmp_path):
    texts = _texts(50)
    tok = _tokenized(texts)
    # aligned with the ids, -100 on padding: token labels, written as floats by mistake
    labels = [[float(t % 5) if m else -100.0 for t, m in zip(ids, mask)]
              for ids, mask in zip(tok["input_ids"], tok["attention_mask"])]
    assert all(len(a) == len(b) for a, b in zip(labels, tok["input_ids"]))
    pl.DataFrame({**tok, "labels": labels}).write_parquet(tmp_path / "train.parquet")
    rep = datacheck.audit([str(tmp_path / "train.parquet")])
    (f,) = findings(rep, "schema.dtype")
    assert f.column == "labels" and "integers" in f.message
