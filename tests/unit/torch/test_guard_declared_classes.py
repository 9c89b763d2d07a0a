"""BatchGuard takes the classes the audit takes: ``[labels] classes`` (names: a ClassLabel's indices,
bounded by their count; values: one of them), and with ``facts=datacheck.data_config(path)`` the ``ClassLabel`` /
``Sequence(ClassLabel)`` names the data's Hugging Face features declare, each token tag column
(``[labels] tag_classes``) bounded by its own names. The data is ``datasets``' own parquet output;
expected bounds are read from its metadata with json."""
from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
hf = pytest.importorskip("datasets")
import pyarrow.parquet as pq  # noqa: E402

import datacheck  # noqa: E402
from datacheck.torch import BatchGuard, BatchValidationError  # noqa: E402

NER = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
POS = [f"P{i}" for i in range(47)]


def _features(path) -> dict:
    return json.loads(pq.read_schema(path).metadata[b"huggingface"])["info"]["features"]


def _failures(guard: BatchGuard, batch: list[dict]) -> dict[str, list[int]]:
    try:
        guard(batch)
    except BatchValidationError as exc:
        return dict(exc.failures)
    return {}


def test_class_names_bound_scalar_labels_by_their_count():
    """classes = 3 names and no num_classes: label 3 is out of range (it went unchecked), 2 is not."""
    names = ["neg", "neu", "pos"]
    g = BatchGuard(facts={"labels": {"classes": names}})
    assert _failures(g, [{"label": torch.tensor(2)}, {"label": torch.tensor(0)}]) == {}
    g = BatchGuard(facts={"labels": {"classes": names}, "columns": {"label": "label"}})
    assert _failures(g, [{"label": torch.tensor(0)}, {"label": torch.tensor(len(names))}]) == {"labels.out_of_range": [1]}


def test_class_values_must_be_one_of_them():
    """classes = [1, 5, 7] (values, not names): label 2 is outside them, 7 is not; -100 is ignored."""
    g = BatchGuard(facts={"labels": {"classes": [1, 5, 7]}})
    got = _failures(g, [{"labels": torch.tensor(7)}, {"labels": torch.tensor(2)}, {"labels": torch.tensor(-100)}])
    assert got == {"labels.out_of_range": [1]}


def test_data_class_label_names_bound_the_labels(tmp_path):
    """data_config of a parquet declaring label as ClassLabel(3 names): the guard bounds labels by 3 as the
    audit does; without them nothing bounds them."""
    path = tmp_path / "train.parquet"
    hf.Dataset.from_dict({"text": ["a", "b"], "label": [0, 2]},
                         features=hf.Features({"text": hf.Value("string"),
                                               "label": hf.ClassLabel(names=["neg", "neu", "pos"])})
                         ).to_parquet(str(path))
    k = len(_features(path)["label"]["names"])
    batch = [{"labels": torch.tensor(k - 1)}, {"labels": torch.tensor(k)}]
    assert _failures(BatchGuard(), batch) == {}
    assert _failures(BatchGuard(facts=datacheck.data_config(path)), batch) == {"labels.out_of_range": [1]}


def _conll(tmp_path, name, columns: dict) -> object:
    path = tmp_path / name / "train.parquet"
    path.parent.mkdir()
    feats = {"tokens": hf.List(hf.Value("string")), "ner_tags": hf.List(hf.ClassLabel(names=NER))}
    data = {"tokens": [["a", "b"]], "ner_tags": [[1, 2]]}
    for col, (feat, values) in columns.items():
        feats[col], data[col] = feat, values
    hf.Dataset.from_dict(data, features=hf.Features(feats)).to_parquet(str(path))
    return path


def test_data_token_tags_bound_the_aligned_labels(tmp_path):
    """data_config of a split of ner_tags and the 'labels' tokenize_and_align_labels made from them: with no
    layout in the facts, 2-D labels are NER tag ids, bounded by the NER names (-100 ignored)."""
    path = _conll(tmp_path, "ner", {"labels": (hf.List(hf.Value("int64")), [[1, 2]])})
    k = len(_features(path)["ner_tags"]["feature"]["names"])
    g = BatchGuard(facts=datacheck.data_config(str(path.parent)))
    assert g.layout == "token_classification"
    batch = [{"labels": torch.tensor([-100, 0, k - 1])}, {"labels": torch.tensor([0, 1, -100])}]
    assert _failures(g, batch) == {}
    batch[1]["labels"] = torch.tensor([0, k, -100])
    assert _failures(g, batch) == {"labels.out_of_range": [1]}
    assert _failures(BatchGuard(), batch) == {}  # without the data's facts nothing bounds them (no vocab_size either)


def test_data_each_tag_column_bounded_by_its_own_names(tmp_path):
    """data= CoNLL-style ner_tags and pos_tags: a batch carrying both tensors has each bounded by its
    own names; a POS id >= len(NER) is fine in pos_tags, out of range in ner_tags."""
    path = _conll(tmp_path, "conll", {"pos_tags": (hf.List(hf.ClassLabel(names=POS)), [[22, 40]])})
    meta = _features(path)
    k_ner, k_pos = len(meta["ner_tags"]["feature"]["names"]), len(meta["pos_tags"]["feature"]["names"])
    assert k_ner < k_pos
    g = BatchGuard(facts=datacheck.data_config(path))

    def row(ner, pos):
        return {"ner_tags": torch.tensor(ner), "pos_tags": torch.tensor(pos)}

    assert _failures(g, [row([0, k_ner - 1], [k_ner, k_pos - 1]), row([1, 2], [0, 1])]) == {}
    assert _failures(g, [row([0, 1], [0, 1]), row([0, k_ner], [0, 1])]) == {"labels.out_of_range": [1]}
    assert _failures(g, [row([0, 1], [0, k_pos]), row([0, 1], [0, 1])]) == {"labels.out_of_range": [0]}
