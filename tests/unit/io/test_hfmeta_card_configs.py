"""Whether a dataset card declares ``configs`` (datacheck/io/hfmeta.py ``card_front_text`` and
``declares_configs``): then ``load_dataset`` reads their ``data_files``, not the files the Hub's
file-name rule names."""
from __future__ import annotations

import pytest

from datacheck.io.hfmeta import MAX_README_BYTES, card_front_text, declares_configs


def card_declares_configs(path) -> bool:
    return declares_configs(card_front_text(path))

PUSH_TO_HUB = "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n    path: data/train-*\n---\n"


@pytest.mark.parametrize(("text", "want"), [
    (PUSH_TO_HUB, True),
    ("---\nlicense: mit\nconfigs:\n  - config_name: a\n    data_files: a/*.csv\n---\n# card\n", True),
    ("---\nlicense: mit\n---\n# card\n", False),
    ("---\ndataset_info:\n  configs: nested, not top level\n---\n", False),  # indented: not the card's key
    ("# no front matter\nconfigs:\n", False),
    ("---\nlicense: mit\n---\nconfigs: after the front matter\n", False),
    ("", False),
])
def test_configs_at_the_top_level_of_the_front_matter(tmp_path, text, want):
    p = tmp_path / "README.md"
    p.write_text(text, encoding="utf-8")
    assert card_declares_configs(p) is want


def test_absent_card_or_a_front_matter_not_closed_within_the_bound_declares_nothing(tmp_path):
    assert card_declares_configs(tmp_path / "README.md") is False
    # a long body after a front matter closed within the bound: read (DatasetCard.load reads it too)
    p = tmp_path / "big.md"
    p.write_bytes(PUSH_TO_HUB.encode() + b"x" * MAX_README_BYTES)
    assert card_declares_configs(p) is True
    # a front matter that does not close within the bound: not read
    p.write_bytes(b"---\nconfigs:\n" + b"# x\n" * (MAX_README_BYTES // 4) + b"---\n")
    assert card_declares_configs(p) is False
    assert card_declares_configs(tmp_path) is False  # a folder


@pytest.mark.parametrize(("raw", "want"), [
    (b"\xef\xbb\xbf" + PUSH_TO_HUB.encode(), True),  # a byte order mark: DatasetCard.load reads past it
    (b"\n  " + PUSH_TO_HUB.encode(), True),  # blank space before the opening ---, as its regex allows
    (PUSH_TO_HUB.replace("\n", "\r\n").encode(), True),
    (PUSH_TO_HUB.encode().replace(b"data/", b"d\xff/"), False),  # not UTF-8: DatasetCard.load raises
    ((PUSH_TO_HUB[:-4] + "---  \n").encode(), True),  # spaces after the closing ---
    (PUSH_TO_HUB.replace("---\n", "---  \n", 1).encode(), False),  # ... but not after the opening one
])
def test_the_front_matter_is_found_as_datasetcard_load_finds_it(tmp_path, raw, want):
    repocard = pytest.importorskip("huggingface_hub.repocard")
    p = tmp_path / "README.md"
    p.write_bytes(raw)
    try:
        ref = "configs" in (repocard.DatasetCard.load(p).data.to_dict() or {})
    except UnicodeDecodeError:
        ref = False
    assert ref is want
    assert card_declares_configs(p) is want
