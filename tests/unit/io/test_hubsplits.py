"""The Hugging Face Hub's split naming as ``[splits]`` entries (datacheck/io/hubsplits.py): which
shard paths name which split, the glob written for each split, the shards the deciding stage puts
in no split (``load_dataset`` would not read them), and the notes when no split is inferred (one
split, a shard naming several, no train split, no one glob)."""
from __future__ import annotations

import re

import pytest
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from datacheck.checks.dup.cross import assign_splits
from datacheck.io.hubsplits import SPLIT_KEYWORDS, hub_splits

# (shard paths, the [splits] a user would write for them)
INFERRED = [
    (["data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet", "data/test-00000-of-00001.parquet"],
     {"train": "data/train-*", "test": "data/test-*"}),
    (["train/a.parquet", "train/b.parquet", "validation/a.parquet"], {"train": "train/*", "validation": "validation/*"}),
    (["train.jsonl", "validation.csv", "test.parquet"], {"train": "train.*", "validation": "validation.*", "test": "test.*"}),
    (["data/train/part-0.parquet", "data/train/part-1.parquet", "data/test/part-0.parquet"],
     {"train": "data/train/*", "test": "data/test/*"}),
    # push_to_hub's shard names carry any split name
    (["data/train-00000-of-00001.parquet", "data/validation_matched-00000-of-00001.parquet"],
     {"train": "data/train-*", "validation_matched": "data/validation_matched-*"}),
    # every keyword of datasets' SPLIT_KEYWORDS, a digit as a delimiter
    (["training.csv", "dev.csv", "eval.csv"], {"train": "training.*", "validation": "dev.*", "test": "eval.*"}),
    (["sst2_train2.parquet", "sst2_val2.parquet"], {"train": "sst2_train2*", "validation": "sst2_val2*"}),
    (["my_train/x.parquet", "my_valid/x.parquet", "my_testing/x.parquet"],
     {"train": "my_train/*", "validation": "my_valid/*", "test": "my_testing/*"}),
    # two keywords of one split: the glob around the common prefix and suffix
    (["data/train-0.parquet", "data/training-1.parquet", "data/test-0.parquet"],
     {"train": "data/train*.parquet", "test": "data/test-*"}),
    # a folder keyword decides before a file-name keyword (datasets' order): test-0 in train/ is train
    (["train/test-0.parquet", "test/train-0.parquet"], {"train": "train/*", "test": "test/*"}),
    # the split folders under several parents
    (["v1/train/a.parquet", "v2/train/b.parquet", "v1/test/c.parquet"], {"train": "*/train/*", "test": "v1/test/*"}),
    (["a/train.parquet", "b/train.jsonl", "c/test.parquet", "c/test.jsonl"], {"train": "*/train.*", "test": "c/test.*"}),
    # glob characters in a name are written literally
    (["d[1]/train.csv", "d[1]/test.csv"], {"train": "d[[]1]/train.*", "test": "d[[]1]/test.*"}),
]


@pytest.mark.parametrize(("paths", "want"), INFERRED, ids=[p[0][0] for p in INFERRED])
def test_hub_layouts_give_the_splits_a_user_would_write(paths, want):
    got = hub_splits(paths)
    assert got.splits == want and got.note is None and got.unloaded == ()
    assert list(got.splits) == list(want)  # train first: dup.split_overlap compares the others with it
    # every shard lands in the split its name names, by the audit's own glob rule
    assert assign_splits(paths, got.splits) == {p: next(n for n, g in want.items() if assign_splits([p], {n: g}))
                                                for p in paths}
    assert set(assign_splits(paths, got.splits)) == set(paths)


# names that merely contain a keyword: no split, and no note (nothing names a split)
@pytest.mark.parametrize("paths", [
    ["contest.parquet", "attestation.csv"],
    ["interval.parquet", "evaluator.jsonl", "devices.csv"],
    ["pretraining-corpus.parquet", "trainer_state.json"],
    ["Train.csv", "Test.csv"],  # case-sensitive, as the Hub's globs are
    ["train", "test"],  # a file-name keyword needs a delimiter after it
    ["shards/part-00000.parquet", "shards/part-00001.parquet"],
])
def test_a_keyword_inside_a_word_names_no_split(paths):
    assert hub_splits(paths).splits == {} and hub_splits(paths).note is None


# (paths, words the note must hold): no split inferred, and the note says why
NOT_INFERRED = [
    (["data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet"], ["one split only", "'train'"]),
    # one split named; the shard naming none is said to be one the Hub's loader would not read
    (["train.parquet", "contest.parquet"], ["one split only ('train'", "1 shard(s) name no split", "contest.parquet",
                                            "would not read them"]),
    # the folder stage decides: test.parquet names no split by folder, train/ is the only split
    (["train/a.parquet", "test.parquet"], ["one split only ('train'", "name no split by a split keyword as a folder name",
                                           "test.parquet"]),
    (["train/test/x.parquet", "train/a.parquet"], ["name more than one split", "train/test/x.parquet: train, test"]),
    (["train-test.parquet", "train.parquet"], ["more than one split", "train-test.parquet"]),
    (["validation.csv", "test.csv"], ["no training split", "validation, test"]),
    (["data/my-train-00000-of-00001.parquet", "data/test-00000-of-00001.parquet"], ["'my-train'"]),
    (["a/train.parquet", "b/x_train.jsonl", "c/test.parquet"],
     ["no one glob holds exactly the shards of split 'train'", "a/train.parquet, b/x_train.jsonl"]),
]


# (paths, the splits, the shards in no split): the deciding stage names the splits; the shards it
# matches no split for are left out of every split, as datasets' loader leaves them out
UNLOADED = [
    (["data/train-00000-of-00001.parquet", "data/test-00000-of-00001.parquet", "data/extra-00000.parquet"],
     {"train": "data/train-*", "test": "data/test-*"}, ("data/extra-00000.parquet",)),
    (["train.parquet", "test.parquet", "extra.parquet", "contest.parquet"],
     {"train": "train.*", "test": "test.*"}, ("contest.parquet", "extra.parquet")),
    # the push_to_hub stage decides: train.parquet beside data/train-NNNNN-of-NNNNN is not read
    (["data/train-00000-of-00001.parquet", "data/test-00000-of-00001.parquet", "train.parquet"],
     {"train": "data/train-*", "test": "data/test-*"}, ("train.parquet",)),
    (["train/a.parquet", "test/b.parquet", "notes/c.parquet"], {"train": "train/*", "test": "test/*"},
     ("notes/c.parquet",)),
]


@pytest.mark.parametrize(("paths", "want", "unloaded"), UNLOADED, ids=[p[2][0] for p in UNLOADED])
def test_a_shard_in_no_split_leaves_the_splits_the_others_name(paths, want, unloaded):
    got = hub_splits(paths)
    assert (got.splits, got.unloaded, got.note) == (want, unloaded, None)
    # no split's glob takes the shard in no split; every other shard is in the split its name names
    assigned = assign_splits(paths, got.splits)
    assert set(assigned) == set(paths) - set(unloaded)
    assert list(got.splits) == list(want)


@pytest.mark.parametrize(("paths", "words"), NOT_INFERRED, ids=[p[0][0] for p in NOT_INFERRED])
def test_an_unclear_layout_gives_no_split_and_says_why(paths, words):
    got = hub_splits(paths)
    assert got.splits == {}
    assert got.note is not None and all(w in got.note for w in words), got.note


# --------------------------------------------------------------------------- property: a reference

_SEPS = "-._ 0123456789"
_KEYWORD_SPLIT = {k: name for name, ks in SPLIT_KEYWORDS.items() for k in ks}


def _words(name: str) -> list[str]:
    return re.split(f"[{re.escape(_SEPS)}]", name)


def _reference(paths: list[str]) -> dict[str, set[str]] | None:
    """{path: splits its name names} by the stage that decides (folders, then file names), from the
    words between delimiters; None when no path names a split."""
    def in_dirs(p: str) -> set[str]:
        return {_KEYWORD_SPLIT[w] for part in p.split("/")[:-1] for w in _words(part) if w in _KEYWORD_SPLIT}

    def in_file(p: str) -> set[str]:
        words = _words(p.rpartition("/")[2])
        return {_KEYWORD_SPLIT[w] for w in words[:-1] if w in _KEYWORD_SPLIT}  # a delimiter must follow

    for stage in (in_dirs, in_file):
        got = {p: stage(p) for p in paths}
        if any(got.values()):
            return got
    return None


_word = st.sampled_from(["train", "test", "val", "dev", "contest", "x", "data", "training", "eval", "interval"])
_name = st.builds(lambda ws, seps: "".join(w + s for w, s in zip(ws, seps)).rstrip(_SEPS) or "x",
                  st.lists(_word, min_size=1, max_size=3), st.lists(st.sampled_from(list("-._1")), min_size=3, max_size=3))
_path = st.builds(lambda dirs, base, ext: "/".join([*dirs, base + ext]),
                  st.lists(_name, max_size=2), _name, st.sampled_from([".parquet", ".jsonl", ".csv"]))


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(_path, min_size=1, max_size=6, unique=True))
def test_inferred_splits_put_each_shard_where_its_name_says(paths):
    """Splits are inferred only when every shard names exactly one split at the deciding stage, two
    or more splits with train among them; then the globs put each shard in that split."""
    ref = _reference(paths)
    got = hub_splits(paths)
    if ref is None:
        assert got.splits == {} and got.note is None
        return
    clear = all(len(s) <= 1 for s in ref.values())  # a shard naming no split is left out, as datasets does
    names = {n for s in ref.values() for n in s}
    if not (clear and len(names) >= 2 and "train" in names):
        assert got.splits == {} and got.note is not None and got.unloaded == ()
        return
    if got.splits:
        assert assign_splits(paths, got.splits) == {p: next(iter(s)) for p, s in ref.items() if s}
        assert got.unloaded == tuple(sorted(p for p, s in ref.items() if not s))
    else:  # only when no one glob holds a split's shards
        assert got.note is not None and "no one glob" in got.note
