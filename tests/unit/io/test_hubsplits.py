"""The Hugging Face Hub's split naming as ``[splits]`` entries (datacheck/io/hubsplits.py): which
shard paths name which split, the glob written for each split, the shards the deciding stage puts
in no split (``load_dataset`` would not read them), a shard naming several splits in each of them
(``datasets`` loads it into each), a list of literal paths where no one glob holds a split's shards,
and the notes when no split is inferred (one split, no train split, a split name that is no word)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from datacheck.checks.dup.cross import assign_splits
from datacheck.io.hubsplits import SPLIT_KEYWORDS, glob_matches, hub_splits, ordered_entry, split_order
from datacheck.model.config import Config

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
    (["validation.csv", "test.csv"], ["no training split", "validation, test"]),
    (["data/my-train-00000-of-00001.parquet", "data/test-00000-of-00001.parquet"], ["'my-train'"]),
]


# (paths, {path: the splits its name names} for the shards naming several): datasets' patterns
# ``**/{kw}[-._ 0-9]*`` and ``**/*[-._ 0-9]{kw}[-._ 0-9]*`` (folders: ``**/{kw}/**`` ...) match such a
# shard for each keyword, so load_dataset reads it into each of those splits
SHARED = [
    (["train.parquet", "test.parquet", "train_test.parquet"], {"train_test.parquet": ("train", "test")}),
    (["train-test.parquet", "train.parquet"], {"train-test.parquet": ("train", "test")}),
    (["train/test/x.parquet", "train/a.parquet"], {"train/test/x.parquet": ("train", "test")}),
    (["train.csv", "dev.csv", "test.csv", "dev_test.csv", "train.val.csv"],
     {"dev_test.csv": ("validation", "test"), "train.val.csv": ("train", "validation")}),
]


@pytest.mark.parametrize(("paths", "shared"), SHARED, ids=[p[0][-1] for p in SHARED])
def test_a_shard_naming_several_splits_is_in_each(paths, shared):
    got = hub_splits(paths)
    assert got.note is None and got.shared == shared
    for p in paths:  # a shard is in every split whose entry (a glob or a list of globs) matches it
        want = shared.get(p) or tuple(n for n, ks in SPLIT_KEYWORDS.items()
                                      if any(re.search(rf"(^|[-._ 0-9/]){k}[-._ 0-9/]", p) for k in ks))
        assert tuple(n for n, pat in got.splits.items() if glob_matches(p, pat)) == want, p
    # the first entry whose glob matches (a hand-written config's rule) is the first split it names
    assert all(assign_splits(paths, got.splits)[p] == ns[0] for p, ns in shared.items())


def test_no_one_glob_gives_the_literal_paths_of_the_split():
    paths = ["a/train.parquet", "b/x_train.jsonl", "c/test.parquet"]
    got = hub_splits(paths)
    # train's two shards share no prefix/suffix glob that leaves c/test.parquet out: a list of both paths
    assert got.note is None and got.splits == {"train": ["a/train.parquet", "b/x_train.jsonl"], "test": "c/test.*"}
    assert assign_splits(paths, got.splits) == {"a/train.parquet": "train", "b/x_train.jsonl": "train",
                                                "c/test.parquet": "test"}
    # a path holding glob characters is written literally: its glob matches it and nothing else
    odd = ["a/train.[1].parquet", "b/x_train.*.jsonl", "c/test.parquet", "b/x_train.XX.jsonl", "b/x_test.*.jsonl"]
    got = hub_splits(odd)
    assert isinstance(got.splits["train"], list) and len(got.splits["train"]) == 3
    assert {p: [n for n, pat in got.splits.items() if glob_matches(p, pat)] for p in odd} == {
        "a/train.[1].parquet": ["train"], "b/x_train.*.jsonl": ["train"], "b/x_train.XX.jsonl": ["train"],
        "c/test.parquet": ["test"], "b/x_test.*.jsonl": ["test"]}
    # the config model accepts what is inferred
    assert Config.model_validate({"splits": got.splits}).splits == got.splits


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
    """Splits are inferred when the shards name two or more splits at the deciding stage, train among
    them; then each shard is in exactly the splits its name names (none, one or several)."""
    ref = _reference(paths)
    got = hub_splits(paths)
    if ref is None:
        assert got.splits == {} and got.note is None
        return
    names = {n for s in ref.values() for n in s}
    if not (len(names) >= 2 and "train" in names):
        assert got.splits == {} and got.note is not None and got.unloaded == ()
        return
    # a shard naming no split is left out, as datasets does; one naming several is in each of them
    assert got.note is None and set(got.splits) == names
    assert {p: {n for n, pat in got.splits.items() if glob_matches(p, pat)} for p in paths} == ref
    assert got.unloaded == tuple(sorted(p for p, s in ref.items() if not s))
    assert got.shared == {p: tuple(n for n in SPLIT_KEYWORDS if n in s) for p, s in ref.items() if len(s) > 1}


@pytest.mark.parametrize("paths", [p for p, _ in SHARED] + [["a/train.parquet", "b/x_train.jsonl", "c/test.parquet"]],
                         ids=[p[-1] for p, _ in SHARED] + ["no-one-glob"])
def test_each_split_holds_the_files_datasets_resolves_for_it(tmp_path, paths):
    """The reference is datasets itself: get_data_patterns + DataFilesDict.from_patterns over empty
    files at these paths (what load_dataset of the folder reads into each split)."""
    data_files = pytest.importorskip("datasets.data_files")
    for p in paths:
        (tmp_path / p).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / p).touch()
    resolved = data_files.DataFilesDict.from_patterns(data_files.get_data_patterns(str(tmp_path)), base_path=str(tmp_path))
    want = {str(k): sorted(Path(f).relative_to(tmp_path).as_posix() for f in v) for k, v in resolved.items()}
    got = hub_splits(paths).splits
    assert {k: sorted(p for p in paths if glob_matches(p, g)) for k, g in got.items()} == want


def test_a_glob_loses_only_its_leading_dot_slash():
    # "./" is dropped (as a user writes it), repeated too; a hidden folder's or a parent's dots are kept
    assert glob_matches("data/train-0.parquet", "./data/train-*")
    assert glob_matches("data/train-0.parquet", "././data/train-*")
    assert glob_matches(".cache/a.parquet", ".cache/*")
    assert not glob_matches("cache/a.parquet", ".cache/*")
    assert not glob_matches("x/a.parquet", "../x/*")
    assert assign_splits(["cache/a.parquet", ".cache/b.parquet"], {"train": ".cache/*"}) == {".cache/b.parquet": "train"}


@pytest.mark.parametrize("entry, want", [
    ("data/*", ["data/a/0.parquet", "data/a/1.parquet", "data/z/0.parquet"]),  # one glob: sorted
    (["data/z/*", "data/a/*"], ["data/z/0.parquet", "data/a/0.parquet", "data/a/1.parquet"]),  # glob by glob
    (["data/z/*", "data/*"], ["data/z/0.parquet", "data/a/0.parquet", "data/a/1.parquet"]),  # each shard once
    (["data/a/1.parquet", "data/a/0.parquet"], ["data/a/1.parquet", "data/a/0.parquet"]),  # literal paths as listed
])
def test_split_order_is_glob_by_glob_each_sorted(entry, want):
    paths = ["data/a/1.parquet", "data/z/0.parquet", "data/a/0.parquet"]
    assert split_order(paths, entry) == want


def test_ordered_entry_keeps_a_glob_that_orders_as_load_dataset_else_lists_the_paths():
    paths = ["b/1.parquet", "a/0.parquet", "b/0.parquet"]
    assert ordered_entry(["b/*", "a/*"], ["b/0.parquet", "b/1.parquet", "a/0.parquet"], paths) == ["b/*", "a/*"]
    assert ordered_entry("*", ["b/0.parquet", "a/0.parquet", "b/1.parquet"], paths) == [
        "b/0.parquet", "a/0.parquet", "b/1.parquet"]
