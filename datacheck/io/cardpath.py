"""Where the dataset card of an audited folder lies (standard library only: the whole-audit memo,
:mod:`datacheck.cli.rerun`, asks it before polars or pydantic are imported).

A Hugging Face Hub dataset repository holds one card, ``README.md`` at the repository's root (its
YAML front matter may declare ``dataset_info: features:``, which ``load_dataset`` casts the files
to), and its shards in folders under it: ``data/`` (``data/train-00000-of-00001.parquet``, what
``push_to_hub`` writes), one folder per config (``{config}/train-*.parquet``), or per config and
split (``{config}/{split}/...``, ``data/{config}/...``); datasets' ``data_files`` patterns
(``datasets/data_files.py``) reach them from the root. A user audits the shards' folder as often as
the repository's root, so the card is looked for from the audited folder upwards:

- the first ``README.md`` met (a regular file) is the card, whether or not it declares anything
  (the nearest card is the repository's own; a card further up belongs to another project);
- a repository root marker (:data:`REPO_MARKERS`: ``.git``, the Hub's repositories are git
  repositories; ``.hg``, ``.svn``) ends the search at that folder, after its own ``README.md``;
- at most :data:`MAX_CARD_LEVELS` folders above the audited one are looked in (the deepest Hub
  layout above, ``data/{config}/{split}/``), never above the user's home folder: a download of
  ``huggingface_hub.snapshot_download`` carries no marker, and its card is at the snapshot's root.
"""
from __future__ import annotations

import os
import stat

__all__ = ["CARD_NAME", "REPO_MARKERS", "MAX_CARD_LEVELS", "card_path"]

#: the file name of a Hugging Face Hub dataset repository's card
CARD_NAME = "README.md"
#: entries that mark a repository's root folder: the card search does not go above it
REPO_MARKERS = (".git", ".hg", ".svn")
#: the most folders above the audited folder that the card is looked for in (the Hub's deepest shard
#: layout under the card, ``data/{config}/{split}/``, is three folders deep)
MAX_CARD_LEVELS = 3


def _regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _exists(path: str) -> bool:
    try:
        os.lstat(path)
        return True
    except (OSError, ValueError):
        return False


def card_path(root: str | os.PathLike[str]) -> str | None:
    """The dataset card (an absolute path to a ``README.md``) of the shards under the audited folder
    ``root``, by the module docstring's rule, or None when there is none.

    Args:
        root: the audited folder (:attr:`datacheck.io.discover.Discovery.root`: the common folder of
            the PATH arguments).
    """
    here = os.path.abspath(os.fspath(root))
    home = os.path.abspath(os.path.expanduser("~"))
    for _level in range(MAX_CARD_LEVELS + 1):
        card = os.path.join(here, CARD_NAME)
        if _regular(card):
            return card
        parent = os.path.dirname(here)
        if parent == here or here == home or any(_exists(os.path.join(here, m)) for m in REPO_MARKERS):
            return None
        here = parent
    return None
