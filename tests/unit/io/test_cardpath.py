"""Where the dataset card of an audited folder lies (datacheck/io/cardpath.py): the Hub keeps the card
at the repository's root and the shards in folders under it, so the first README.md met from the
audited folder upwards is the card; the search stops at a repository root marker and after
MAX_CARD_LEVELS folders."""
from __future__ import annotations

from pathlib import Path

import pytest

from datacheck.io.cardpath import MAX_CARD_LEVELS, REPO_MARKERS, card_path


def _card(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / "README.md"
    p.write_text("---\nlicense: mit\n---\n")
    return p


@pytest.mark.parametrize("below", ["", "data", "sst2", "data/sst2/train"])  # the Hub's shard folders under the card
def test_the_card_at_the_repository_root_is_found_from_its_shard_folders(tmp_path, below):
    card = _card(tmp_path / "repo")
    root = tmp_path / "repo" / below
    root.mkdir(parents=True, exist_ok=True)
    assert card_path(root) == str(card)


def test_the_nearest_card_wins(tmp_path):
    _card(tmp_path / "outer")
    inner = _card(tmp_path / "outer" / "repo")
    (tmp_path / "outer" / "repo" / "data").mkdir()
    assert card_path(tmp_path / "outer" / "repo" / "data") == str(inner)


@pytest.mark.parametrize("marker", REPO_MARKERS)
def test_a_repository_root_marker_ends_the_search(tmp_path, marker):
    _card(tmp_path / "project")  # another project's README, above the dataset's repository
    repo = tmp_path / "project" / "dataset"
    (repo / "data").mkdir(parents=True)
    (repo / marker).mkdir()
    assert card_path(repo / "data") is None
    card = _card(repo)  # the repository's own card, beside its marker
    assert card_path(repo / "data") == str(card)


def test_no_deeper_than_the_hubs_layouts(tmp_path):
    _card(tmp_path / "top")
    deep = tmp_path / "top" / Path(*[f"d{i}" for i in range(MAX_CARD_LEVELS + 1)])
    deep.mkdir(parents=True)
    assert card_path(deep) is None
    assert card_path(deep.parent) == str(tmp_path / "top" / "README.md")


def test_a_folder_named_readme_is_no_card(tmp_path):
    (tmp_path / "repo" / "README.md").mkdir(parents=True)
    (tmp_path / "repo" / ".git").mkdir()
    assert card_path(tmp_path / "repo") is None
