"""The splits a dataset card's ``configs`` declare (``datacheck/io/cardsplits.py``), against
``datasets`` itself: the files ``DataFilesDict.from_patterns(sanitize_patterns(data_files))``
resolves under the card's folder for each split, the config ``MetadataConfigs.get_default_config_name``
picks, and the data files ``load_dataset_builder`` of a real folder reads into each split."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from datacheck.io.cardsplits import CARD, card_config, card_splits, loader_splits, pattern_matches
from datacheck.io.hubsplits import _parts_match, glob_matches

TREE = ["data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet", "data/test-00000-of-00001.parquet",
        "sft/part-0.parquet", "sft/part-1.parquet", "sft/deep/part-2.parquet", "holdout/part-0.parquet",
        "holdout/.hidden/part-9.parquet", "holdout/.part-8.parquet", "__cache__/part-7.parquet",
        "gen/en/a.jsonl", "gen/de/b.jsonl", "top.csv"]

# data_files values as cards write them (every form sanitize_patterns takes; fsspec's glob rules)
DATA_FILES = [
    "sft/*",
    ["sft/*", "holdout/*"],
    [{"split": "train", "path": "sft/**"}, {"split": "test", "path": "holdout/*"}],
    [{"split": "train", "path": ["sft/part-[0-9].parquet", "gen/*/a.jsonl"]}, {"split": "validation", "path": "gen/de/*"}],
    [{"split": "train", "path": "data/train-*"}, {"split": "test", "path": "data/test-*"}],
    [{"split": "train", "path": "**"}],
    [{"split": "train", "path": "**/*.parquet"}, {"split": "test", "path": "holdout/.*"}],
    [{"split": "train", "path": "*/part-?.parquet"}, {"split": "test", "path": "holdout/.hidden/*"}],
    [{"split": "train", "path": "__cache__/*"}, {"split": "test", "path": "*/part-7.parquet"}],
    [{"split": "train", "path": "./sft/*"}, {"split": "test", "path": ["holdout/*", "top.csv"]}],
    [{"split": "train", "path": "sft/*"}, {"split": "train_gen", "path": "sft/part-0.parquet"}],  # a file in two splits
]


def _tree(root: Path) -> None:
    for p in TREE:
        (root / p).parent.mkdir(parents=True, exist_ok=True)
        (root / p).write_bytes(b"x")


def _card(root: Path, configs: list) -> Path:
    card = root / "README.md"
    card.write_text("---\n" + yaml.safe_dump({"license": "mit", "configs": configs}) + "---\n# a dataset\n", encoding="utf-8")
    return card


def _reference(root: Path, data_files, base: str = "") -> dict[str, list[str]]:
    data_files_mod = pytest.importorskip("datasets.data_files")
    resolved = data_files_mod.DataFilesDict.from_patterns(data_files_mod.sanitize_patterns(data_files),
                                                          base_path=str(root / base) if base else str(root))
    return {str(k): sorted(Path(f).relative_to(root).as_posix() for f in v) for k, v in resolved.items()}


def _members(got, paths: list[str]) -> dict[str, list[str]]:
    return {k: sorted(p for p in paths if glob_matches(p, g)) for k, g in got.splits.items()}


@pytest.mark.parametrize("data_files", DATA_FILES, ids=range(len(DATA_FILES)))
def test_each_split_holds_the_files_datasets_resolves_for_it(tmp_path, data_files):
    _tree(tmp_path)
    card = _card(tmp_path, [{"config_name": "default", "data_files": data_files}])
    as_read = yaml.safe_load(card.read_text().split("---")[1])["configs"][0]["data_files"]  # the card's key order
    want = {k: v for k, v in _reference(tmp_path, as_read).items() if v}
    got = card_splits(card, tmp_path, TREE)
    assert got is not None and got.source == CARD and got.note is None
    assert list(got.splits) == list(want)  # the card's order
    assert _members(got, TREE) == want
    listed = {p for v in want.values() for p in v}
    assert got.unloaded == tuple(sorted(p for p in TREE if p not in listed))
    assert got.shared == {p: tuple(k for k in want if p in want[k]) for p in sorted(listed)
                          if sum(p in v for v in want.values()) > 1}


@pytest.mark.parametrize("below", ["sft", "holdout", "gen/en"])
def test_an_audit_below_the_card_takes_the_patterns_to_its_folder(tmp_path, below):
    _tree(tmp_path)
    data_files = [{"split": "train", "path": ["sft/**", "gen/*/a.jsonl"]}, {"split": "test", "path": "holdout/*"}]
    card = _card(tmp_path, [{"config_name": "default", "data_files": data_files}])
    want = _reference(tmp_path, data_files)
    paths = [p[len(below) + 1:] for p in TREE if p.startswith(below + "/")]
    got = card_splits(card, tmp_path / below, paths)
    assert got is not None and got.note is None
    expect = {k: sorted(p[len(below) + 1:] for p in v if p.startswith(below + "/")) for k, v in want.items()}
    assert _members(got, paths) == {k: v for k, v in expect.items() if v}
    # the card's globs moved to the audited folder where they hold exactly the split's shards under
    # [splits]' rule ("**" does; "*" crosses "/" there, so "holdout/*" would take in the hidden files)
    if below == "sft":
        assert got.splits == {"train": "**"}
    if below == "holdout":
        assert got.splits == {"test": ["part-0.parquet"]}


def test_data_dir_is_the_patterns_base(tmp_path):
    _tree(tmp_path)
    conf = {"config_name": "default", "data_dir": "gen", "data_files": [{"split": "train", "path": "en/*"},
                                                                         {"split": "test", "path": "de/*"}]}
    card = _card(tmp_path, [conf])
    want = _reference(tmp_path, conf["data_files"], base="gen")
    got = card_splits(card, tmp_path, TREE)
    assert want == {"train": ["gen/en/a.jsonl"], "test": ["gen/de/b.jsonl"]}
    assert got is not None and _members(got, TREE) == want


# configs lists: which one load_dataset(path) reads without a name (None: it asks for one)
CONFIGS = [
    ([{"config_name": "a"}], "a"),
    ([{"config_name": "a"}, {"config_name": "default"}], "default"),
    ([{"config_name": "a"}, {"config_name": "b", "default": True}], "b"),
    ([{"config_name": "a"}, {"config_name": "b"}], None),
    ([{"config_name": "default"}, {"config_name": "b", "default": True}], None),  # datasets: several defaults
    ([{"config_name": "a"}, {"config_name": "b", "default": "true"}], "b"),  # datasets takes any truthy value
]


@pytest.mark.parametrize("configs, name", CONFIGS)
def test_the_config_read_is_the_one_datasets_reads(configs, name):
    metadata = pytest.importorskip("datasets.utils.metadata")
    try:
        ref = metadata.MetadataConfigs({c["config_name"]: {k: v for k, v in c.items() if k != "config_name"}
                                        for c in configs}).get_default_config_name()
    except ValueError:
        ref = None
    assert ref == name
    chosen, why = card_config(configs)
    assert (chosen["config_name"] if chosen else None) == name
    assert (why is None) == (name is not None)


@pytest.mark.parametrize("configs, words", [
    ([{"config_name": "a", "data_files": "sft/*"}, {"config_name": "b", "data_files": "holdout/*"}],
     "none of its configs is the default"),
    ([{"config_name": "default"}], "names no data_files"),
    ([{"config_name": "default", "data_files": [{"split": "train"}]}], "data_files datasets does not read"),
    ([{"config_name": "default", "data_files": [{"split": "train", "path": "a"}, {"split": "train", "path": "b"}]}],
     "data_files datasets does not read"),
    ([{"config_name": "default", "data_files": "hf://datasets/x/y/*.parquet"}], "no relative path"),
    ([{"config_name": "default", "data_files": "/abs/*.parquet"}], "no relative path"),
    ([{"config_name": "default", "data_files": "sft/**.parquet"}], "'**' can only be an entire path component"),
    ([{"config_name": "default", "data_files": "nothing/*"}], "no audited shard is in a split"),
    ([{"data_files": "sft/*"}], "a config has no config_name"),
    # forms sanitize_patterns takes but a card's configs may not hold (MetadataConfigs raises)
    ([{"config_name": "default", "data_files": {"train": "sft/*", "test": "holdout/*"}}], "load_dataset raises"),
    ([{"config_name": "default", "data_files": [{"split": "train-sft", "path": "sft/*"}]}], "load_dataset raises"),
    ([{"config_name": "default", "data_files": ["sft/*", {"split": "test", "path": "holdout/*"}]}], "load_dataset raises"),
    ([{"config_name": "default", "data_files": [{"split": "train", "path": "sft/*", "x": 1}]}], "load_dataset raises"),
])
def test_a_card_whose_configs_give_no_splits_says_why(tmp_path, configs, words):
    _tree(tmp_path)
    got = card_splits(_card(tmp_path, configs), tmp_path, TREE)
    assert got is not None and got.splits == {} and words in got.note


def test_a_card_without_configs_leaves_the_file_names_rule(tmp_path):
    _tree(tmp_path)
    (tmp_path / "README.md").write_text("---\nlicense: mit\n---\n# configs: not in the front matter\n", encoding="utf-8")
    assert card_splits(tmp_path / "README.md", tmp_path, TREE) is None
    hub = loader_splits(tmp_path, TREE)
    assert hub.source == "hub_names"
    # with configs, the card's rule replaces the file names' (sft/holdout name no split by name)
    _card(tmp_path, [{"config_name": "default", "data_files": [{"split": "train", "path": "sft/*"},
                                                               {"split": "test", "path": "holdout/*"}]}])
    got = loader_splits(tmp_path, TREE)
    assert got.source == CARD and _members(got, TREE) == {
        "train": ["sft/part-0.parquet", "sft/part-1.parquet"], "test": ["holdout/part-0.parquet"]}
    flat = [p for p in TREE if p.count("/") == 1 and not p.split("/")[1].startswith(".")]
    assert loader_splits(tmp_path, flat).splits == {"train": "sft/*", "test": "holdout/*"}  # the card's own globs
    assert loader_splits(None, TREE).source == "hub_names"  # no folder (an object store): the names only


@pytest.mark.parametrize("path, pattern, want", [
    ("a/b/c.parquet", "a/**", True), ("a/c.parquet", "a/**/c.parquet", True), ("a/b/c.parquet", "a/*", False),
    ("a/.h/c.parquet", "a/*/c.parquet", False), ("a/.h/c.parquet", "a/.*/c.parquet", True),
    ("__x/c.parquet", "*/c.parquet", False), ("__x/c.parquet", "__*/c.parquet", True), ("c.parquet", "./c.parquet", True),
])
def test_pattern_matches_as_resolve_pattern(tmp_path, path, pattern, want):
    (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / path).write_bytes(b"x")
    data_files = pytest.importorskip("datasets.data_files")
    try:
        ref = bool(data_files.resolve_pattern(pattern, str(tmp_path)))
    except FileNotFoundError:
        ref = False
    assert ref == want
    assert pattern_matches(path, pattern) == want


def test_load_dataset_reads_the_files_of_each_split(tmp_path):
    """The real loader on a real folder: load_dataset_builder's data files per split are the card's
    splits' shards."""
    datasets = pytest.importorskip("datasets")
    import polars as pl

    for p in ["sft/part-0.parquet", "sft/part-1.parquet", "holdout/part-0.parquet", "extra/part-0.parquet"]:
        (tmp_path / p).parent.mkdir(parents=True, exist_ok=True)
        pl.DataFrame({"text": [p]}).write_parquet(tmp_path / p)
    _card(tmp_path, [{"config_name": "default", "data_files": [{"split": "train", "path": "sft/*"},
                                                               {"split": "test", "path": "holdout/*"}]}])
    builder = datasets.load_dataset_builder(str(tmp_path))
    want = {str(k): sorted(Path(f).relative_to(tmp_path).as_posix() for f in v)
            for k, v in builder.config.data_files.items()}
    paths = ["extra/part-0.parquet", "holdout/part-0.parquet", "sft/part-0.parquet", "sft/part-1.parquet"]
    got = loader_splits(tmp_path, paths)
    assert _members(got, paths) == want
    assert got.unloaded == ("extra/part-0.parquet",)


_PARTS = ["a", "b", "x.parquet", ".h", "__c", "a1", "ab"]
_PAT_PARTS = ["a", "b", "*", "**", "?", "a*", "*.parquet", "[ab]", ".*", "__*", "x.parquet"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PARTS), min_size=1, max_size=6), st.lists(st.sampled_from(_PAT_PARTS), min_size=1, max_size=6))
def test_component_matching_is_fsspecs_glob(path, pat):
    """The dynamic programme against fsspec's own glob_translate (the regex datasets' resolve_pattern
    globs with), hidden and __ parts apart (those are datasets' rule, tested above)."""
    glob_translate = pytest.importorskip("fsspec.utils").glob_translate
    p, q = "/".join(path), "/".join(pat)
    assert _parts_match(path, pat) == bool(re.match(glob_translate(q), p))


def test_many_double_stars_stay_linear():
    deep = ["d"] * 60 + ["x.parquet"]
    assert pattern_matches("/".join(deep), "/".join(["**", "d"] * 30) + "/x.parquet")
    assert not pattern_matches("/".join(deep), "/".join(["**", "d"] * 30) + "/**/e/x.parquet")


def test_a_card_of_too_many_patterns_is_not_resolved(tmp_path):
    _tree(tmp_path)
    many = [{"config_name": "default", "data_files": [{"split": "train", "path": [f"sft/p{i}-*" for i in range(1100)]}]}]
    got = card_splits(_card(tmp_path, many), tmp_path, TREE)
    assert got is not None and got.splits == {} and "over 1024 data_files patterns" in got.note


def test_a_card_whose_configs_give_none_leaves_the_file_names_rule(tmp_path):
    """Several configs and no default (a multi-config repository, each config laid out by the Hub's
    file names): load_dataset needs a name, so the splits are the file names', as before; where the
    names give none either, the note says both why."""
    paths = ["cola/train-00000-of-00001.parquet", "cola/test-00000-of-00001.parquet",
             "sst2/train-00000-of-00001.parquet", "sst2/test-00000-of-00001.parquet"]
    for p in paths:
        (tmp_path / p).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / p).write_bytes(b"x")
    _card(tmp_path, [{"config_name": "cola", "data_files": [{"split": "train", "path": "cola/train-*"}]},
                     {"config_name": "sst2", "data_files": [{"split": "train", "path": "sst2/train-*"}]}])
    got = loader_splits(tmp_path, paths)
    assert got.source == "hub_names" and set(got.splits) == {"train", "test"}
    only = ["cola/train-00000-of-00001.parquet", "sst2/train-00000-of-00001.parquet"]
    none = loader_splits(tmp_path, only)
    assert none.splits == {} and none.source == CARD
    assert none.note.startswith("the dataset card: none of its configs is the default (cola, sst2)")
    assert "one split only" in none.note


@pytest.mark.parametrize("data_files", [
    {"train": "sft/*", "test": "holdout/*"},
    [{"split": "train-sft", "path": "sft/*"}],
    ["sft/*", {"split": "test", "path": "holdout/*"}],
], ids=["mapping", "dash", "mixed"])
def test_data_files_the_loader_refuses_give_no_splits(tmp_path, data_files):
    """The reference: load_dataset_builder of the folder raises on these cards."""
    datasets = pytest.importorskip("datasets")
    _tree(tmp_path)
    card = _card(tmp_path, [{"config_name": "default", "data_files": data_files}])
    with pytest.raises(ValueError):
        datasets.load_dataset_builder(str(tmp_path))
    got = card_splits(card, tmp_path, TREE)
    assert got is not None and got.splits == {}


def test_data_dir_alone_takes_the_file_names_under_it(tmp_path):
    """A config with data_dir and no data_files: datasets infers the splits from the file names under
    data_dir (v1/ is not read); the reference is load_dataset_builder of the folder."""
    datasets = pytest.importorskip("datasets")
    import polars as pl

    paths = ["v1/test.parquet", "v1/train.parquet", "v2/test.parquet", "v2/train.parquet"]
    for p in paths:
        (tmp_path / p).parent.mkdir(parents=True, exist_ok=True)
        pl.DataFrame({"text": [p]}).write_parquet(tmp_path / p)
    _card(tmp_path, [{"config_name": "default", "data_dir": "v2"}])
    builder = datasets.load_dataset_builder(str(tmp_path))
    want = {str(k): sorted(Path(f).relative_to(tmp_path).as_posix() for f in v)
            for k, v in builder.config.data_files.items()}
    assert want == {"train": ["v2/train.parquet"], "test": ["v2/test.parquet"]}
    got = loader_splits(tmp_path, paths)
    assert got.source == CARD and _members(got, paths) == want
    assert got.unloaded == ("v1/test.parquet", "v1/train.parquet")
    # audited from v2/ itself: the same splits, moved there
    sub = loader_splits(tmp_path / "v2", ["test.parquet", "train.parquet"])
    assert _members(sub, ["test.parquet", "train.parquet"]) == {"train": ["train.parquet"], "test": ["test.parquet"]}
