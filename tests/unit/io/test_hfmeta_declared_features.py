"""io/hfmeta's readers of declared features never raise on what the data holds: malformed schema
metadata and dataset cards give None (nothing declared), never an exception or a guess."""
from __future__ import annotations

import json
import os

import pytest

from datacheck.io.hfmeta import class_label_names, features_of_schema_metadata, readme_features


@pytest.mark.parametrize("raw", [b"not json", b"[1, 2]", b'{"info": 3}', b'{"info": {"features": null}}',
                                 b"[" * 10_000 + b"]" * 10_000, b"\xff\xfe"])
def test_bad_schema_metadata_declares_nothing(raw):
    assert features_of_schema_metadata({b"huggingface": raw}) is None


def test_schema_metadata_features():
    feats = {"label": {"names": ["a", "b"], "_type": "ClassLabel"}}
    got = features_of_schema_metadata({b"huggingface": json.dumps({"info": {"features": feats}}).encode()})
    assert class_label_names(got, "label") == tuple(feats["label"]["names"])
    assert features_of_schema_metadata(None) is None and features_of_schema_metadata({}) is None


@pytest.mark.parametrize("text", [
    "no front matter\n",
    "---\ndataset_info:\n  features:\n  - name: label\n    dtype:\n      class_label:\n        names: {'0': a}\n",  # unterminated
    "---\n: : :\nclass_label: [\n---\n",  # not YAML
    "---\ndataset_info:\n  features:\n  - name: label\n    dtype:\n      class_label:\n        names:\n"
    "          '0': a\n          '2': b\n---\n",  # indices not 0..n-1
])
def test_bad_cards_declare_no_classes(tmp_path, text):
    (tmp_path / "README.md").write_text(text)
    got = readme_features(tmp_path / "README.md")
    assert not got or all(class_label_names(f, "label") is None for _, f in got)


def test_card_that_is_no_regular_file(tmp_path):
    os.mkfifo(tmp_path / "README.md")
    assert readme_features(tmp_path / "README.md") is None
    assert readme_features(tmp_path / "absent.md") is None
