"""Token tags and their declared classes: ``labels.unseen_class`` on per-token tags, and each of
CoNLL-2003's tag columns (``pos_tags``, ``chunk_tags``, ``ner_tags``, each a ``Sequence(ClassLabel)``)
bounded by its own names (``[labels] tag_classes``), beside a ``labels`` column or not.

The data is written with ``datasets`` itself (CoNLL-2003's feature declaration: its dataset script's
names); expected values are read from the files (the ``huggingface`` schema metadata, the tag lists)
with json / pyarrow, never from datacheck."""
from __future__ import annotations

import json
from pathlib import Path

import datasets as hf
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from checkhelp import findings, one, skipped_reason
from conftest import run_cli

import datacheck
from datacheck.model.config import config_from_dict
from datacheck.model.errors import ConfigError

#: CoNLL-2003's tag names as its dataset script (conll2003.py, _info) declares them
NER = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
POS = ['"', "''", "#", "$", "(", ")", ",", ".", ":", "``", "CC", "CD", "DT", "EX", "FW", "IN", "JJ", "JJR", "JJS",
       "LS", "MD", "NN", "NNP", "NNPS", "NNS", "NN|SYM", "PDT", "POS", "PRP", "PRP$", "RB", "RBR", "RBS", "RP", "SYM",
       "TO", "UH", "VB", "VBD", "VBG", "VBN", "VBP", "VBZ", "WDT", "WP", "WP$", "WRB"]
CHUNK = ["O", "B-ADJP", "I-ADJP", "B-ADVP", "I-ADVP", "B-CONJP", "I-CONJP", "B-INTJ", "I-INTJ", "B-LST", "I-LST",
         "B-NP", "I-NP", "B-PP", "I-PP", "B-PRT", "I-PRT", "B-SBAR", "I-SBAR", "B-UCP", "I-UCP", "B-VP", "I-VP"]
FEATURES = hf.Features({"id": hf.Value("string"), "tokens": hf.List(hf.Value("string")),
                        "pos_tags": hf.List(hf.ClassLabel(names=POS)),
                        "chunk_tags": hf.List(hf.ClassLabel(names=CHUNK)),
                        "ner_tags": hf.List(hf.ClassLabel(names=NER))})
#: CoNLL-2003's first training sentences with their tags (train ids 0..3)
ROWS = [
    {"id": "0", "tokens": ["EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."],
     "pos_tags": [22, 42, 16, 21, 35, 37, 16, 21, 7], "chunk_tags": [11, 21, 11, 12, 21, 22, 11, 12, 0],
     "ner_tags": [3, 0, 7, 0, 0, 0, 7, 0, 0]},
    {"id": "1", "tokens": ["Peter", "Blackburn"], "pos_tags": [22, 22], "chunk_tags": [11, 12], "ner_tags": [1, 2]},
    {"id": "2", "tokens": ["BRUSSELS", "1996-08-22"], "pos_tags": [22, 11], "chunk_tags": [11, 12],
     "ner_tags": [5, 0]},
]


def _write(path: Path, rows: list[dict], features: hf.Features = FEATURES) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {k: [r[k] for r in rows] for k in features}
    hf.Dataset.from_dict(data, features=features).to_parquet(str(path))
    return path


def _names(path: Path, col: str) -> list[str]:
    """The tag names ``col`` declares in the file's huggingface schema metadata (json here)."""
    feat = json.loads(pq.read_schema(path).metadata[b"huggingface"])["info"]["features"][col]
    assert feat["feature"]["_type"] == "ClassLabel"
    return feat["feature"]["names"]


def _tags(paths: list[Path], col: str) -> set[int]:
    return {t for p in paths for r in pq.read_table(p).column(col).to_pylist() for t in r}


def _every_class_rows(col: str, k: int) -> list[dict]:
    """One extra row whose ``col`` holds every tag id 0..k-1 (the other columns: their tag 0)."""
    row = {"id": "x", "tokens": [f"w{i}" for i in range(k)], "pos_tags": [0] * k, "chunk_tags": [0] * k,
           "ner_tags": [0] * k}
    row[col] = list(range(k))
    return [row]


def test_unseen_ner_tag_classes_named_from_the_declared_names(tmp_path):
    """labels.unseen_class runs on token tags: the NER classes no tag of the data carries, by name."""
    path = _write(tmp_path / "train.parquet", ROWS)
    names = _names(path, "ner_tags")
    seen = _tags([path], "ner_tags")
    expected = [n for i, n in enumerate(names) if i not in seen]
    assert expected == ["I-ORG", "I-LOC", "I-MISC"]
    f = one(datacheck.audit(str(path)), "labels.unseen_class", "ner_tags")
    assert f.details["unseen"] == expected and f.count == len(expected)
    assert "'ner_tags'" in f.message and f"of the {len(names)} tag class(es)" in f.message


def test_every_class_seen_across_shards_is_no_finding(tmp_path):
    """No false alarm: each column's last classes occur only in a second shard; merged, every class
    of every tag column is seen, so labels.unseen_class is silent (and nothing else fires)."""
    a = _write(tmp_path / "d" / "train-00000-of-00002.parquet", ROWS)
    extra = _every_class_rows("ner_tags", len(NER)) + _every_class_rows("pos_tags", len(POS)) \
        + _every_class_rows("chunk_tags", len(CHUNK))
    b = _write(tmp_path / "d" / "train-00001-of-00002.parquet", extra)
    for col in ("ner_tags", "pos_tags", "chunk_tags"):
        assert _tags([a, b], col) == set(range(len(_names(a, col))))
        assert _tags([a], col) != set(range(len(_names(a, col))))
    rep = datacheck.audit(str(tmp_path / "d"))
    assert rep.findings == []
    assert skipped_reason(rep, "labels.unseen_class") is None


def test_ignore_index_in_subword_labels_is_never_a_class(tmp_path):
    """tokenize_and_align_labels' -100 (special and continuation tokens) in 'labels' beside ner_tags:
    not a class, not unseen, not out of range; the NER classes the labels never carry are unseen there
    (bounded by ner_tags' names, the one tag column it was aligned from)."""
    feats = hf.Features({"tokens": FEATURES["tokens"], "ner_tags": FEATURES["ner_tags"],
                         "labels": hf.List(hf.Value("int64"))})
    rows = [dict(r) for r in ROWS]
    for r in rows:  # one -100 before and after each sentence's word labels ([CLS] ... [SEP])
        r["labels"] = [-100, *r["ner_tags"], -100]
    feats_rows = [{k: r[k] for k in feats} for r in rows]
    path = _write(tmp_path / "train.parquet", feats_rows, hf.Features(feats))
    names = _names(path, "ner_tags")
    labels = _tags([path], "labels")
    assert -100 in labels
    expected = [n for i, n in enumerate(names) if i not in labels]
    rep = datacheck.audit(str(path))
    f = one(rep, "labels.unseen_class", "labels")
    assert f.details["unseen"] == expected and -100 not in f.details["unseen"]
    assert findings(rep, "labels.out_of_range") == [] and findings(rep, "labels.unexpected_sentinel") == []


@pytest.mark.parametrize("with_labels", [False, True])
def test_each_conll_tag_column_bound_by_its_own_names(tmp_path, with_labels):
    """CoNLL-2003's three tag columns (with or without a 'labels' column beside them): a chunk tag
    len(CHUNK) (valid as a POS id, 23 < 47) is labels.out_of_range on 'chunk_tags' only, a POS tag
    len(POS) on 'pos_tags' only; each message names its column and its count."""
    feats = hf.Features({**FEATURES, "labels": hf.List(hf.Value("int64"))}) if with_labels else FEATURES
    rows = [{**r, "labels": list(r["ner_tags"])} for r in ROWS]
    extra = _every_class_rows("ner_tags", len(NER)) + _every_class_rows("pos_tags", len(POS)) \
        + _every_class_rows("chunk_tags", len(CHUNK))
    extra = [{**r, "labels": list(r["ner_tags"])} for r in extra]
    all_rows = [{k: r[k] for k in feats} for r in rows + extra]
    clean = _write(tmp_path / "clean" / "train.parquet", all_rows, feats)
    k_pos, k_chunk = len(_names(clean, "pos_tags")), len(_names(clean, "chunk_tags"))
    assert k_chunk < k_pos
    rep = datacheck.audit(str(clean))
    assert rep.findings == []
    t = pq.read_table(clean)
    cols = {c: t.column(c).to_pylist() for c in ("pos_tags", "chunk_tags")}
    cols["chunk_tags"][1][0] = k_chunk  # row 1
    cols["pos_tags"][2][1] = k_pos  # row 2
    for c, v in cols.items():
        i = t.schema.get_field_index(c)
        t = t.set_column(i, t.schema.field(i), pa.array(v, t.schema.field(i).type))
    (tmp_path / "bad").mkdir()
    pq.write_table(t, tmp_path / "bad" / "train.parquet")
    rep = datacheck.audit(str(tmp_path / "bad" / "train.parquet"))
    chunk = one(rep, "labels.out_of_range", "chunk_tags")
    pos = one(rep, "labels.out_of_range", "pos_tags")
    assert chunk.rows == (1,) and pos.rows == (2,)
    assert f"'chunk_tags' hold tags >= the number of classes {k_chunk}" in chunk.message
    assert f"'pos_tags' hold tags >= the number of classes {k_pos}" in pos.message
    assert sorted(f.column for f in findings(rep, "labels.out_of_range")) == ["chunk_tags", "pos_tags"]


def test_tag_columns_declared_differently_are_left_unbounded(tmp_path):
    """Two shards declaring pos_tags with different names: no names are taken for it (a note says
    so), no false alarm on either shard's ids; the agreeing ner_tags is still bound."""
    small = hf.Features({**FEATURES, "pos_tags": hf.List(hf.ClassLabel(names=POS[:30]))})
    rows = [{**r, "pos_tags": [min(t, 29) for t in r["pos_tags"]]} for r in ROWS]
    _write(tmp_path / "d" / "a.parquet", ROWS)
    _write(tmp_path / "d" / "b.parquet", rows, small)
    rep = datacheck.audit(str(tmp_path / "d"))
    assert "pos_tags" not in rep.label_facts["tag_classes"]
    assert any("'pos_tags' as Sequence(ClassLabel) with different names" in n for n in rep.label_facts["tag_notes"])
    assert findings(rep, "labels.out_of_range") == []
    assert all(f.column != "pos_tags" for f in rep.findings)


def test_config_tag_classes_win_and_are_validated(tmp_path):
    """[labels] tag_classes given in the config bounds the column (the data's declaration is kept as
    a note when its count differs); a repeated name is a ConfigError."""
    path = _write(tmp_path / "train.parquet", ROWS)
    k = max(_tags([path], "pos_tags"))  # the largest POS id of the data
    rep = datacheck.audit(str(path), config={"labels": {"tag_classes": {"pos_tags": [f"P{i}" for i in range(k)]}}})
    f = one(rep, "labels.out_of_range", "pos_tags")
    assert f"the number of classes {k}" in f.message
    assert any(f"declares {len(POS)}" in n for n in rep.label_facts["tag_notes"])
    with pytest.raises(ConfigError):
        config_from_dict({"labels": {"tag_classes": {"pos_tags": ["NN", "NN"]}}})


@pytest.mark.slow
def test_parts_merge_to_the_single_audits_unseen_tags(tmp_path):
    """Two parts each see one shard: the merge sums their tag counts (stats.tag_labels) and names the
    same unseen classes as one audit of both shards (never a class one part alone lacks)."""
    a = _write(tmp_path / "d" / "train-00000-of-00002.parquet", ROWS[:2])
    b = _write(tmp_path / "d" / "train-00001-of-00002.parquet", ROWS[2:])
    expected = {c: [n for i, n in enumerate(_names(a, c)) if i not in _tags([a, b], c)]
                for c in ("ner_tags", "pos_tags", "chunk_tags")}
    outs = []
    for k in range(2):
        out = tmp_path / f"part{k}.json"
        r = run_cli("audit", str(tmp_path / "d"), "--no-cache", "--report-dir", str(tmp_path / "rep"),
                    "--num-parts", "2", "--part", str(k), "-o", str(out))
        assert r.returncode in (0, 1), r.stderr
        outs.append(str(out))
    r = run_cli("merge", *outs, "--report-dir", str(tmp_path / "rep"), "--format", "json")
    assert r.returncode in (0, 1), r.stderr
    merged = {f["column"]: f["details"]["unseen"] for f in json.loads(r.stdout)["findings"]
              if f["check"] == "labels.unseen_class"}
    assert merged == expected
