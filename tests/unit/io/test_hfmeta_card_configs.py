"""Whether a dataset card declares ``configs`` (datacheck/io/hfmeta.py ``card_declares_configs``):
then ``load_dataset`` reads their ``data_files``, not the files the Hub's file-name rule names."""
from __future__ import annotations

import pytest

from datacheck.io.hfmeta import MAX_README_BYTES, card_declares_configs

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


def test_absent_or_oversized_card_declares_nothing(tmp_path):
    assert card_declares_configs(tmp_path / "README.md") is False
    p = tmp_path / "big.md"
    p.write_bytes(PUSH_TO_HUB.encode() + b"x" * MAX_README_BYTES)
    assert card_declares_configs(p) is False
    assert card_declares_configs(tmp_path) is False  # a folder
