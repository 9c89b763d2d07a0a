"""A folder laid out as on the Hugging Face Hub (``data/train-00000-of-00002.parquet``,
``data/test-00000-of-00001.parquet``, ``train/`` ``validation/`` folders, ``train.jsonl`` +
``validation.csv`` + ``test.parquet``), audited whole with no ``[splits]`` and no ``--against``:
its file names are the splits (``datacheck/io/hubsplits.py``, the rule of ``datasets``).

- test rows found in train are ``dup.split_overlap`` (train/eval leakage), never
  ``dup.exact_across_shards`` ("seen more than once per epoch": test rows are not trained on);
- the report is the report of the same ``[splits]`` written by hand, byte for byte apart from
  ``config_path`` and ``created_at`` (text: apart from the config line, which says the defaults
  were changed by the splits the Hub's file names give);
- a clean layout gives no finding that its splits audited one by one do not give;
- ``[splits]``, ``--against`` and ``[dataset] infer_splits = false`` win; a folder the rule cannot
  split (one split only) is audited as one dataset and ``dup.split_overlap``'s skipped entry says why;
- a shard the deciding stage names no split for (``data/extra-00000.parquet``, ``contest.parquet``)
  leaves the splits the others name (``datasets`` reads only those): the leak stays
  ``dup.split_overlap`` (error; adding a file never turns the gate's error into a warning), the shard
  is ``index.extra_shard`` (``load_dataset`` would not read it), and its rows are compared with every
  split for ``dup.exact_across_shards`` (also with a hand-written ``[splits]`` that leaves it out);
  ``datacheck diff`` names a change of the inferred splits;
- real data: dair-ai emotion (``train.txt``/``val.txt``/``test.txt``: its PROVENANCE lists 5 val and
  11 test texts also in train, 31 repeated texts in train) and dkhate's raw train/test parquet.

Every expected count is computed here with polars from the files written or read."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from conftest import REALDATA, run_cli


def _frame(lo: int, hi: int) -> pl.DataFrame:
    return pl.DataFrame({"text": [f"sample number {i} about things" for i in range(lo, hi)],
                         "label": [i % 3 for i in range(lo, hi)]})


def _write(path: Path, df: pl.DataFrame) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".parquet":
        df.write_parquet(path)
    elif path.suffix == ".csv":
        df.write_csv(path)
    else:
        df.write_ndjson(path)


def _audit(root: Path, tmp_path: Path, *args: str, fmt: str = "json", config: str | None = None):
    cfg = tmp_path / f"cfg-{hashlib.sha256((config or '').encode()).hexdigest()[:12]}" / "datacheck.toml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(config or "", encoding="utf-8")
    return run_cli("audit", str(root), *args, "--config", str(cfg), "--no-cache", "--no-progress",
                   "--report-dir", str(tmp_path / "reports"), "--format", fmt)


def _audit_bare(root: Path, tmp_path: Path, *args: str, fmt: str = "json"):
    """The audit with no config at all (the reproduction's command line), from a folder that holds none."""
    return run_cli("audit", str(root), *args, "--no-cache", "--no-progress", "--report-dir",
                   str(tmp_path / "reports"), "--format", fmt, cwd=tmp_path)


def _checks(doc: dict) -> list[str]:
    return [f["check"] for f in doc["findings"]] + [f["check"] for s in doc["shards"] for f in s["findings"]]


def _skip(doc: dict, check: str) -> list[str]:
    return [s["reason"] for s in doc["skipped"] if s["check"] == check]


@pytest.fixture
def leak(tmp_path):
    """The reproduction: train holds 50 rows, test is train's first 10 rows."""
    root = tmp_path / "hfs"
    _write(root / "data" / "train-00000-of-00001.parquet", _frame(0, 50))
    _write(root / "data" / "test-00000-of-00001.parquet", _frame(0, 10))
    return root


def test_test_rows_found_in_train_are_split_overlap(leak, tmp_path):
    train = pl.read_parquet(leak / "data" / "train-00000-of-00001.parquet").with_row_index("train_row")
    test = pl.read_parquet(leak / "data" / "test-00000-of-00001.parquet").with_row_index("row")
    # content is the text (label excluded); each test row's first occurrence in train
    hits = test.join(train.group_by("text").agg(pl.col("train_row").min()), on="text").sort("row")
    r = _audit_bare(leak, tmp_path)
    doc = json.loads(r.stdout)
    assert r.returncode == 1, r.stderr  # dup.split_overlap is an error
    (f,) = [f for f in doc["findings"] if f["check"] == "dup.split_overlap"]
    assert f["count"] == hits.height == 10
    assert f["details"]["split"] == "test" and f["details"]["train_split"] == "train"
    assert f["details"]["per_shard"] == {"data/test-00000-of-00001.parquet": hits.height}
    assert f["shards"] == ["data/test-00000-of-00001.parquet"]
    assert [(e["shard"], e["row"], e["train_shard"], e["train_row"]) for e in f["details"]["examples"]] == [
        ("data/test-00000-of-00001.parquet", row, "data/train-00000-of-00001.parquet", tr)
        for row, tr in hits.select("row", "train_row").iter_rows()]
    assert f["rows"] == hits["row"].to_list()
    assert "dup.exact_across_shards" not in _checks(doc)  # test rows are not trained on
    assert _skip(doc, "dup.split_overlap") == []
    text = _audit_bare(leak, tmp_path, fmt="text").stdout.splitlines()
    assert text[1] == "config: none (the defaults changed by the splits the Hub's file names give)"


# (layout name, {relative path: rows}) -- each layout a leak-free Hub layout of two or three splits
CLEAN = {
    "sharded": {"data/train-00000-of-00002.parquet": (0, 150), "data/train-00001-of-00002.parquet": (150, 300),
                "data/test-00000-of-00001.parquet": (300, 360)},
    "folders": {"train/part-a.parquet": (0, 150), "train/part-b.parquet": (150, 300),
                "validation/part-c.parquet": (300, 360)},
    "mixed": {"train.jsonl": (0, 300), "validation.csv": (300, 340), "test.parquet": (340, 400)},
}
#: the [splits] a user would write for each layout
BY_HAND = {
    "sharded": 'train = "data/train-*"\ntest = "data/test-*"\n',
    "folders": 'train = "train/*"\nvalidation = "validation/*"\n',
    "mixed": 'train = "train.*"\nvalidation = "validation.*"\ntest = "test.*"\n',
}


def _layout(root: Path, name: str, leak_rows: int = 0) -> Path:
    files = CLEAN[name]
    for rel, (lo, hi) in files.items():
        _write(root / rel, _frame(lo, hi))
    if leak_rows:  # the last split's file gets train's first rows in place of its own first ones
        last = list(files)[-1]
        lo, hi = files[last]
        _write(root / last, pl.concat([_frame(0, leak_rows), _frame(lo + leak_rows, hi)]))
    return root


def _without_run(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k not in ("created_at", "config_path")}


@pytest.mark.parametrize("leak_rows", [0, 7])
@pytest.mark.parametrize("name", list(CLEAN))
def test_inferred_splits_give_the_report_of_the_same_splits_by_hand(tmp_path, name, leak_rows):
    root = _layout(tmp_path / name, name, leak_rows)
    inferred = _audit_bare(root, tmp_path)
    by_hand = _audit(root, tmp_path, config="[splits]\n" + BY_HAND[name])
    assert inferred.returncode == by_hand.returncode == (1 if leak_rows else 0), (inferred.stdout, by_hand.stdout)
    a, b = json.loads(inferred.stdout), json.loads(by_hand.stdout)
    assert a["config_hash"] == b["config_hash"]
    assert _without_run(a) == _without_run(b)
    overlap = [f for f in a["findings"] if f["check"] == "dup.split_overlap"]
    assert sum(f["count"] for f in overlap) == leak_rows
    # the text output: the same but for the line that says where the config came from
    ta = _audit_bare(root, tmp_path, fmt="text").stdout.splitlines()
    tb = _audit(root, tmp_path, config="[splits]\n" + BY_HAND[name], fmt="text").stdout.splitlines()
    assert ta[1] == "config: none (the defaults changed by the splits the Hub's file names give)"
    assert tb[1].startswith("config: ") and tb[1].endswith("datacheck.toml")
    assert ta[:1] + ta[2:] == tb[:1] + tb[2:]


def _keys(doc: dict) -> set[tuple[str, tuple[str, ...]]]:
    """(check, names of the shards it names) of every finding (names alone: a split audited alone
    has another root)."""
    out = {(f["check"], tuple(sorted(Path(s).name for s in f.get("shards") or ()))) for f in doc["findings"]}
    return out | {(f["check"], (Path(s["path"]).name,)) for s in doc["shards"] for f in s["findings"]}


@pytest.mark.parametrize("name", list(CLEAN))
def test_a_clean_hub_layout_finds_only_what_its_splits_alone_find(tmp_path, name):
    root = _layout(tmp_path / name, name)
    whole = json.loads(_audit(root, tmp_path).stdout)
    alone: set[tuple[str, tuple[str, ...]]] = set()
    splits: dict[str, list[str]] = {}
    for rel in CLEAN[name]:
        splits.setdefault(rel.split("/")[0] if name == "folders" else Path(rel).name.split("-")[0].split(".")[0],
                          []).append(rel)
    assert len(splits) == len(BY_HAND[name].splitlines())
    for rels in splits.values():
        r = run_cli("audit", *[str(root / rel) for rel in rels], "--no-cache", "--no-progress", "--format", "json",
                    "--report-dir", str(tmp_path / "reports"), cwd=tmp_path)
        alone |= _keys(json.loads(r.stdout))
    assert _keys(whole) <= alone
    assert not {c for c in _checks(whole) if c.startswith("dup.")}
    assert whole["summary"]["rows"] == sum(hi - lo for lo, hi in CLEAN[name].values())


@pytest.mark.parametrize("extra", [False, True])
def test_parts_merge_to_the_single_job_with_the_inferred_splits(tmp_path, extra):
    """Each part infers the splits from every discovered shard, so the merge is the single job (with a
    shard in no split too: its index.extra_shard and the leak's error alike)."""
    root = _layout(tmp_path / "sharded", "sharded", leak_rows=7)
    if extra:
        _write(root / "data" / "extra-00000.parquet", _frame(1000, 1010))
    common = ("--no-cache", "--no-progress", "--format", "json", "--report-dir", str(tmp_path / "r"))
    single = run_cli("audit", str(root), *common, "-o", str(tmp_path / "single.json"), cwd=tmp_path)
    parts = []
    for k in range(2):
        out = tmp_path / "parts" / f"part-{k}.json"
        r = run_cli("audit", str(root), "--num-parts", "2", "--part", str(k), "-o", str(out), *common, cwd=tmp_path)
        assert r.returncode in (0, 1), r.stderr
        parts.append(str(out))
    m = run_cli("merge", *parts, "-o", str(tmp_path / "merged.json"), "--report-dir", str(tmp_path / "r"), cwd=tmp_path)
    assert (single.returncode, m.returncode) == (1, 1), m.stderr
    merged, one = (json.loads((tmp_path / n).read_text()) for n in ("merged.json", "single.json"))
    assert _without_run(merged) == _without_run(one)
    assert [(f["check"], f["count"]) for f in merged["findings"] if f["check"].startswith("dup.")] == [
        ("dup.split_overlap", 7)]
    assert [f["shards"] for f in merged["findings"] if f["check"] == "index.extra_shard"] == (
        [["data/extra-00000.parquet"]] if extra else [])


def test_config_splits_win(leak, tmp_path):
    doc = json.loads(_audit(leak, tmp_path, config='[splits]\ntrain = "data/train-*"\nheldout = "data/test-*"\n').stdout)
    (f,) = [f for f in doc["findings"] if f["check"] == "dup.split_overlap"]
    assert f["details"]["split"] == "heldout" and f["count"] == 10


def test_against_wins(leak, tmp_path):
    """With --against the audited folder is one side: its file names make no splits."""
    other = tmp_path / "other"
    _write(other / "train.parquet", _frame(100, 120))
    doc = json.loads(_audit(leak, tmp_path, "--against", str(other)).stdout)
    assert [f["details"].get("split") for f in doc["findings"] if f["check"] == "dup.split_overlap"] == []
    (f,) = [f for f in doc["findings"] if f["check"] == "dup.exact_across_shards"]
    assert f["count"] == 10  # the test file's rows repeat train's: one dataset here


def test_infer_splits_false_audits_the_files_as_one_dataset(leak, tmp_path):
    doc = json.loads(_audit(leak, tmp_path, config="[dataset]\ninfer_splits = false\n").stdout)
    assert [f["count"] for f in doc["findings"] if f["check"] == "dup.exact_across_shards"] == [10]
    assert "dup.split_overlap" not in _checks(doc)
    assert _skip(doc, "dup.split_overlap") == [
        "no [splits] in the config and no --against dataset ([dataset] infer_splits = false: the splits the file names "
        "give (train, test) were not used)"]


def test_one_split_is_one_dataset_and_says_so(tmp_path):
    root = tmp_path / "one"
    _write(root / "data" / "train-00000-of-00002.parquet", _frame(0, 50))
    _write(root / "data" / "train-00001-of-00002.parquet", _frame(0, 10))
    doc = json.loads(_audit(root, tmp_path).stdout)
    assert [f["count"] for f in doc["findings"] if f["check"] == "dup.exact_across_shards"] == [10]
    (why,) = _skip(doc, "dup.split_overlap")
    assert "the file names name one split only ('train'" in why


def _extra_shard(df_train: pl.DataFrame) -> pl.DataFrame:
    """An extra shard: train's rows 20..24 and 20 rows of its own."""
    return pl.concat([df_train.slice(20, 5), _frame(100, 120)])


def _across_expected(first: pl.DataFrame, later: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``later`` (with a ``row`` index) whose text and label occur in ``first``: the
    copies dup.exact_across_shards counts when ``first`` is the earlier shard in path order."""
    return later.join(first.select("text", "label").unique(), on=["text", "label"]).sort("row")


@pytest.mark.parametrize("config", [None, '[splits]\ntrain = "data/train-*"\ntest = "data/test-*"\n'])
def test_a_shard_in_no_split_keeps_the_leak_an_error_and_is_reported(leak, tmp_path, config):
    """The new user's case: data/extra-00000.parquet names no split by the push_to_hub rule, so
    load_dataset reads train and test only; the test-train leak must stay a gate error."""
    train_path, test_path = leak / "data" / "train-00000-of-00001.parquet", leak / "data" / "test-00000-of-00001.parquet"
    extra_path = leak / "data" / "extra-00000.parquet"
    before = json.loads(_audit(leak, tmp_path, config=config).stdout)
    train = pl.read_parquet(train_path)
    _write(extra_path, _extra_shard(train))
    test = pl.read_parquet(test_path).with_row_index("row")
    hits = test.filter(pl.col("text").is_in(train["text"].implode()))
    r = _audit(leak, tmp_path, config=config)
    doc = json.loads(r.stdout)
    assert r.returncode == 1, r.stdout  # the leak is still an error
    (f,) = [f for f in doc["findings"] if f["check"] == "dup.split_overlap"]
    assert (f["count"], f["details"]["split"], f["shards"]) == (hits.height, "test", [test_path.relative_to(leak).as_posix()])
    assert f["rows"] == hits["row"].to_list() and hits.height == 10
    # the same splits as without the extra shard: the config hash does not move
    assert doc["config_hash"] == before["config_hash"]
    # the extra shard is named: load_dataset would not read it
    (x,) = [f for f in doc["findings"] if f["check"] == "index.extra_shard"]
    assert (x["count"], x["shards"], x["severity"]) == (1, ["data/extra-00000.parquet"], "warn")
    assert x["details"] == {"splits": {"train": "data/train-*", "test": "data/test-*"},
                            "extra": ["data/extra-00000.parquet"]}
    assert "datasets.load_dataset of this folder would not read them" in x["message"]
    # its rows repeating train's are dup.exact_across_shards, its own rows the copies (though data/extra
    # sorts before data/train: train's rows are the ones load_dataset reads, clean keeps them); test's
    # rows are not compared with train there
    extra = pl.read_parquet(extra_path).with_row_index("row")
    copies = _across_expected(train, extra)
    (a,) = [f for f in doc["findings"] if f["check"] == "dup.exact_across_shards"]
    assert a["count"] == copies.height == 5
    assert a["details"]["per_shard"] == {"data/extra-00000.parquet": copies.height}
    assert a["rows"] == copies["row"].to_list()
    assert a["shards"] == ["data/extra-00000.parquet", "data/train-00000-of-00001.parquet"]
    assert _skip(doc, "dup.split_overlap") == []


# push_to_hub's card: its configs name each split's data_files (then load_dataset reads those)
CARD_WITH_CONFIGS = """---
configs:
- config_name: default
  data_files:
  - split: train
    path: data/train-*
  - split: test
    path: data/test-*
---
# a dataset
"""


@pytest.mark.parametrize("card", [CARD_WITH_CONFIGS, "---\nlicense: mit\n---\n# a dataset\n", None])
def test_a_shard_no_pattern_of_load_dataset_matches_is_named(leak, tmp_path, card):
    """With configs in the card, load_dataset reads their data_files (datacheck/io/cardsplits.py):
    data/extra-00000.parquet is in neither data/train-* nor data/test-*, so it is index.extra_shard
    by the card's patterns, as by the file names' without configs; the leak is an error either way."""
    _write(leak / "data" / "extra-00000.parquet", _frame(100, 120))
    if card is not None:
        (leak / "README.md").write_text(card, encoding="utf-8")
    r = _audit(leak, tmp_path)
    doc = json.loads(r.stdout)
    assert r.returncode == 1
    assert [f["count"] for f in doc["findings"] if f["check"] == "dup.split_overlap"] == [10]
    (x,) = [f for f in doc["findings"] if f["check"] == "index.extra_shard"]
    assert x["shards"] == ["data/extra-00000.parquet"]
    given = "the dataset card's configs" if card == CARD_WITH_CONFIGS else "the Hub's file names"
    assert f"its split patterns, from {given}, give only train = 'data/train-*', test = 'data/test-*'" in x["message"]


# a card whose configs name folders whose names name no split (the file names' rule finds none)
CARD_SFT = """---
configs:
- config_name: default
  data_files:
  - split: train
    path: sft/*.parquet
  - split: test
    path: holdout/*.parquet
---
"""


def test_the_card_configs_are_the_splits_load_dataset_reads(tmp_path):
    """sft/ and holdout/ name no split by the Hub's file names: without the card the folder is one
    dataset (the held-out rows repeating training rows are dup.exact_across_shards, a warning); with
    it they are the train and test splits, and the leak is dup.split_overlap (an error), as
    load_dataset reads them. The expected rows are computed here with polars."""
    root = tmp_path / "repo"
    train = _frame(0, 60)
    held = pl.concat([_frame(100, 110), train.slice(5, 7)])  # 7 held-out rows repeat training rows
    _write(root / "sft" / "part-0.parquet", train)
    _write(root / "holdout" / "part-0.parquet", held)
    before = json.loads(_audit(root, tmp_path).stdout)
    assert "dup.split_overlap" not in _checks(before)
    (root / "README.md").write_text(CARD_SFT, encoding="utf-8")
    r = _audit(root, tmp_path)
    doc = json.loads(r.stdout)
    assert r.returncode == 1
    (leak_f,) = [f for f in doc["findings"] if f["check"] == "dup.split_overlap"]
    hits = held.with_row_index("row").join(train, on=["text", "label"], how="semi")
    assert (leak_f["count"], leak_f["severity"], leak_f["rows"]) == (7, "error", hits["row"].to_list())
    assert leak_f["shards"] == ["holdout/part-0.parquet"]
    assert "dup.exact_across_shards" not in _checks(doc)
    # the same report as the same [splits] written by hand
    hand = json.loads(_audit(root, tmp_path, config='[splits]\ntrain = "sft/*.parquet"\ntest = "holdout/*.parquet"\n').stdout)
    assert doc["config_hash"] == hand["config_hash"]
    assert [f["check"] for f in doc["findings"]] == [f["check"] for f in hand["findings"]]
    # holdout/ audited alone (below the card): the test split only, no training split to compare it with
    sub = json.loads(_audit(root / "holdout", tmp_path).stdout)
    assert "dup.split_overlap" not in _checks(sub)  # one split only among the audited shards: nothing to compare


def test_a_file_naming_no_split_is_left_out_and_said(tmp_path):
    root = tmp_path / "mixed"
    _write(root / "train.parquet", _frame(0, 50))
    _write(root / "test.parquet", _frame(0, 10))
    _write(root / "contest.parquet", _frame(200, 210))  # "test" inside a word names no split
    r = _audit(root, tmp_path)
    doc = json.loads(r.stdout)
    assert r.returncode == 1
    assert [(f["count"], f["details"]["split"]) for f in doc["findings"] if f["check"] == "dup.split_overlap"] == [
        (10, "test")]
    assert [f["shards"] for f in doc["findings"] if f["check"] == "index.extra_shard"] == [["contest.parquet"]]
    assert "dup.exact_across_shards" not in _checks(doc)  # contest's rows repeat nothing


def test_diff_names_the_inferred_splits_that_changed(leak, tmp_path):
    """Adding a shard in no split keeps the inferred splits (no config change); adding a validation
    shard changes them, and diff says so rather than 'the config changed'."""
    def report(name: str) -> str:
        out = tmp_path / f"{name}.json"
        run_cli("audit", str(leak), "--no-cache", "--no-progress", "--format", "json", "-o", str(out),
                "--report-dir", str(tmp_path / "reports"), cwd=tmp_path)
        return str(out)

    base = report("base")
    _write(leak / "data" / "extra-00000.parquet", _frame(100, 120))
    extra = report("extra")
    _write(leak / "data" / "validation-00000-of-00001.parquet", _frame(300, 320))
    val = report("val")
    first = run_cli("diff", base, extra, cwd=tmp_path).stdout.splitlines()[0]
    assert "config" not in first and "splits" not in first
    line = run_cli("diff", extra, val, cwd=tmp_path).stdout.splitlines()[0]
    assert line.endswith("(the splits inferred from the Hub's file names changed: train = 'data/train-*', "
                         "test = 'data/test-*' -> train = 'data/train-*', validation = 'data/validation-*', "
                         "test = 'data/test-*')")
    md = run_cli("diff", extra, val, "--format", "markdown", cwd=tmp_path).stdout
    assert "validation = 'data/validation-*'" in md and "(config changed)" not in md


def test_plan_takes_the_train_split_of_a_hub_layout(leak, tmp_path):
    """The batch plan iterates the train split only (test rows are not trained on)."""
    cfg = tmp_path / "plan.toml"
    cfg.write_text("[batch]\nbatch_size = 8\n", encoding="utf-8")
    r = run_cli("plan", str(leak), "--config", str(cfg), "--format", "json", "--no-progress", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)["result"]["plan"]
    rows = pl.read_parquet(leak / "data" / "train-00000-of-00001.parquet").height
    assert (plan["split"], plan["rows"], plan["shards"], plan["other_splits"]) == ("train", rows, 1, {"test": 1})
    assert plan["steps_per_epoch"] == -(-rows // 8)


# ------------------------------------------------------------------------------------ real data

EMOTION = REALDATA / "emotion"
SST2 = REALDATA / "sst2_vi_glue_parquet"
DKHATE = REALDATA / "dkhate_danish_offensive" / "raw_parquet"


def _in_train(train: pl.DataFrame, other: pl.DataFrame) -> int:
    return other.filter(pl.col("text").is_in(train["text"].implode())).height


@pytest.mark.realdata
def test_emotion_folder_audited_whole_finds_its_known_leaks(tmp_path):
    if not EMOTION.is_dir():
        pytest.skip("../shared/realdata is not present")
    read = {n: pl.read_csv(EMOTION / f"{n}.txt", separator=";") for n in ("train", "val", "test")}
    assert {n: df.height for n, df in read.items()} == {"train": 16_000, "val": 2_000, "test": 2_000}  # PROVENANCE
    leaks = {n: _in_train(read["train"], read[n]) for n in ("val", "test")}
    assert leaks == {"val": 5, "test": 11}  # PROVENANCE: "5 val and 11 test texts also in train"
    assert read["train"].height - read["train"]["text"].n_unique() == 31  # PROVENANCE: "31 duplicate texts in train"
    # label_name is the class label (a class name): a copy repeats text and label; a text under two labels is noise
    repeats = {n: df.height - df.select("text", "label_name").n_unique() for n, df in read.items()}
    everything = pl.concat(list(read.values()))
    relabelled = everything.group_by("text").agg(pl.col("label_name").n_unique()).filter(pl.col("label_name") > 1).height
    r = _audit(EMOTION, tmp_path, config='[dataset]\nformat = "csv"\nseparator = ";"\n')
    doc = json.loads(r.stdout)
    got = {f["details"]["split"]: (f["count"], f["shards"]) for f in doc["findings"] if f["check"] == "dup.split_overlap"}
    assert got == {"validation": (leaks["val"], ["val.txt"]), "test": (leaks["test"], ["test.txt"])}
    in_shard = {s["path"]: f["count"] for s in doc["shards"] for f in s["findings"] if f["check"] == "dup.exact_in_shard"}
    assert doc["roles"] == {"text": {"columns": ["text"], "inferred": True},
                            "label": {"columns": "label_name", "inferred": True}}
    assert in_shard == {f"{n}.txt": k for n, k in repeats.items() if k}
    (noise,) = [f for f in doc["findings"] if f["check"] == "dup.conflicting_labels"]
    assert noise["message"].startswith(f"{relabelled} distinct content(s)")
    assert sorted(set(_checks(doc))) == ["dup.conflicting_labels", "dup.exact_in_shard", "dup.split_overlap"]
    assert "dup.exact_across_shards" not in _checks(doc)


@pytest.mark.realdata
def test_dkhate_raw_folder_audited_whole(tmp_path):
    if not DKHATE.is_dir():
        pytest.skip("../shared/realdata is not present")
    train = pl.read_parquet(DKHATE / "train-00000-of-00001.parquet")
    test = pl.read_parquet(DKHATE / "test-00000-of-00001.parquet")
    # PROVENANCE: train 2,960 (NOT 2,576 / OFF 384), test 329 (288/41)
    assert (train.height, test.height) == (2960, 329)
    assert dict(train["label"].value_counts().iter_rows()) == {"NOT": 2576, "OFF": 384}
    assert dict(test["label"].value_counts().iter_rows()) == {"NOT": 288, "OFF": 41}
    doc = json.loads(_audit(DKHATE, tmp_path).stdout)
    (f,) = [f for f in doc["findings"] if f["check"] == "dup.split_overlap"]
    assert f["count"] == _in_train(train, test) and f["details"]["split"] == "test"
    # apart from the leak, what each file gives alone
    alone: set[tuple[str, tuple[str, ...]]] = set()
    for name in ("train", "test"):
        one = tmp_path / name
        one.mkdir()
        shutil.copy(DKHATE / f"{name}-00000-of-00001.parquet", one)
        alone |= _keys(json.loads(_audit(one, tmp_path).stdout))
    both = ("test-00000-of-00001.parquet", "train-00000-of-00001.parquet")
    assert _keys(doc) - alone == {("dup.split_overlap", both[:1]), ("dup.conflicting_labels", both)}
    # a text labeled NOT in one place and OFF in another, across the two files: label noise
    multi = (pl.concat([train, test]).group_by("text").agg(pl.col("label").n_unique().alias("k"), pl.len().alias("n"))
             .filter(pl.col("k") > 1))
    (c,) = [f for f in doc["findings"] if f["check"] == "dup.conflicting_labels"]
    assert (c["count"], c["details"]["rows"]) == (multi.height, multi["n"].sum())
    in_shard = {s["path"]: f["count"] for s in doc["shards"] for f in s["findings"] if f["check"] == "dup.exact_in_shard"}
    # rows repeating an earlier row of their file (text and label)
    assert in_shard == {"train-00000-of-00001.parquet": train.height - train.unique().height,
                        "test-00000-of-00001.parquet": test.height - test.unique().height}


@pytest.mark.realdata
def test_sst2_hub_folder_with_an_extra_shard_keeps_its_leaks_errors(tmp_path):
    """GLUE SST-2 as on the Hub (train/validation/test-00000-of-00001.parquet at the root) plus an
    extra-00000.parquet holding train's first 100 rows: the splits stay train/validation/test, the
    test sentences found in train (3 in this copy, counted here) stay dup.split_overlap errors."""
    if not SST2.is_dir():
        pytest.skip("../shared/realdata is not present")
    root = tmp_path / "sst2"
    root.mkdir()
    read = {}
    for name in ("train", "validation", "test"):
        shutil.copy(SST2 / f"{name}-00000-of-00001.parquet", root)
        read[name] = pl.read_parquet(root / f"{name}-00000-of-00001.parquet")
    # PROVENANCE: train 67,349, validation 872, test 1,821 (all label -1)
    assert {n: df.height for n, df in read.items()} == {"train": 67_349, "validation": 872, "test": 1_821}
    assert read["test"]["label"].unique().to_list() == [-1]
    extra = read["train"].head(100)
    extra.write_parquet(root / "extra-00000.parquet")
    cfg = '[columns]\ntext = "sentence"\nlabel = "label"\n'
    doc = json.loads(_audit(root, tmp_path, config=cfg).stdout)
    leaks = {n: read[n].filter(pl.col("sentence").is_in(read["train"]["sentence"].implode())).height
             for n in ("validation", "test")}
    got = {f["details"]["split"]: f["count"] for f in doc["findings"] if f["check"] == "dup.split_overlap"}
    assert got == {n: k for n, k in leaks.items() if k} and leaks["test"] > 0  # a real leak: the gate fails
    assert doc["summary"]["status"] == "fail"
    (x,) = [f for f in doc["findings"] if f["check"] == "index.extra_shard"]
    assert x["shards"] == ["extra-00000.parquet"]
    assert x["details"]["splits"] == {"train": "train-*", "validation": "validation-*", "test": "test-*"}
    # extra's rows are all train's: each is a copy (the split's row is the first, though extra sorts first)
    (a,) = [f for f in doc["findings"] if f["check"] == "dup.exact_across_shards"]
    assert a["details"]["per_shard"] == {"extra-00000.parquet": extra.height}
    assert a["rows"] == list(range(len(a["rows"])))


# --------------------------------------------------------------------------- a shard naming several splits


@pytest.mark.parametrize("shared_rows", [(100, 107), (0, 7)], ids=["own-rows", "train-rows"])
def test_a_shard_naming_train_and_test_is_in_both_and_the_leak_stays_an_error(tmp_path, shared_rows):
    """train.parquet + test.parquet + train_test.parquet: datasets' patterns for train
    (``**/train[-._ 0-9]*``) and for test (``**/*[-._ 0-9]test[-._ 0-9]*``) both match train_test.parquet,
    so load_dataset reads it into train and into test: every row of it is a test row that is in train
    (a leak), and test.parquet's rows found in train.parquet stay a gate error (exit 1)."""
    root = tmp_path / "several"
    _write(root / "train.parquet", _frame(0, 50))
    _write(root / "test.parquet", _frame(0, 10))
    _write(root / "train_test.parquet", _frame(*shared_rows))
    r = _audit(root, tmp_path)
    doc = json.loads(r.stdout)
    assert r.returncode == 1, r.stdout
    train = pl.concat([pl.read_parquet(root / "train.parquet"), pl.read_parquet(root / "train_test.parquet")])
    test = pl.read_parquet(root / "test.parquet").with_row_index("row")
    leaked = test.filter(pl.col("text").is_in(train["text"].implode()))
    both = pl.read_parquet(root / "train_test.parquet")
    (f,) = [f for f in doc["findings"] if f["check"] == "dup.split_overlap"]
    assert f["severity"] == "error" and f["details"]["split"] == "test"
    assert f["count"] == leaked.height + both.height == 10 + shared_rows[1] - shared_rows[0]
    assert f["details"]["per_shard"] == {"test.parquet": leaked.height, "train_test.parquet": both.height}
    assert f["details"]["in_both_splits"] == ["train_test.parquet"]
    assert "datasets.load_dataset loads such a file into each (train_test.parquet)" in f["message"]
    # within train, train_test.parquet's rows repeating train.parquet's are seen twice per epoch
    again = both.join(pl.read_parquet(root / "train.parquet").unique(), on=["text", "label"]).height
    assert [f["count"] for f in doc["findings"] if f["check"] == "dup.exact_across_shards"] == ([again] if again else [])
    assert again == (7 if shared_rows == (0, 7) else 0)
    assert _skip(doc, "dup.split_overlap") == []
    assert "index.extra_shard" not in _checks(doc)


def test_a_shard_naming_train_and_test_beside_train_only_makes_test_its_rows(tmp_path):
    """train.parquet + train_test.parquet: the test split is train_test.parquet alone (datasets reads
    it into both), so all its rows leak: an error, never 'one split only' or a skipped entry."""
    root = tmp_path / "two"
    _write(root / "train.parquet", _frame(0, 50))
    _write(root / "train_test.parquet", _frame(100, 104))
    r = _audit(root, tmp_path)
    doc = json.loads(r.stdout)
    assert r.returncode == 1, r.stdout
    assert [(f["count"], f["details"]["split"]) for f in doc["findings"] if f["check"] == "dup.split_overlap"] == [
        (pl.read_parquet(root / "train_test.parquet").height, "test")]
    # plan --split test plans the shard datasets reads into test
    cfg = tmp_path / "plan.toml"
    cfg.write_text("[batch]\nbatch_size = 2\n", encoding="utf-8")
    for split, files in (("test", ["train_test.parquet"]), ("train", ["train.parquet", "train_test.parquet"])):
        p = run_cli("plan", str(root), "--split", split, "--config", str(cfg), "--format", "json", "--no-progress",
                    cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        plan = json.loads(p.stdout)["result"]["plan"]
        rows = sum(pl.read_parquet(root / f).height for f in files)
        assert (plan["split"], plan["rows"], plan["shards"]) == (split, rows, len(files))
        # the other split holds the shard in both splits too
        assert plan["other_splits"] == ({"train": 2} if split == "test" else {"test": 1})


def test_no_one_glob_keeps_the_splits_as_lists_of_paths(tmp_path):
    """a/train.parquet and b/x_train.jsonl have no one glob that leaves c/test.parquet out: the split
    is the list of their paths, and the leak is still found (an error), not a warning."""
    root = tmp_path / "scattered"
    _write(root / "a" / "train.parquet", _frame(0, 30))
    _write(root / "b" / "x_train.jsonl", _frame(30, 50))
    _write(root / "c" / "test.parquet", _frame(25, 35))
    r = _audit(root, tmp_path)
    doc = json.loads(r.stdout)
    assert r.returncode == 1, r.stdout
    train = pl.concat([_frame(0, 30), _frame(30, 50)])
    test = pl.read_parquet(root / "c" / "test.parquet").with_row_index("row")
    leaked = test.filter(pl.col("text").is_in(train["text"].implode()))
    (f,) = [f for f in doc["findings"] if f["check"] == "dup.split_overlap"]
    assert (f["count"], f["rows"]) == (leaked.height, leaked["row"].to_list()) and leaked.height == 10
    # the same report as the lists written by hand
    by_hand = _audit(root, tmp_path, config='[splits]\ntrain = ["a/train.parquet", "b/x_train.jsonl"]\n'
                                             'test = "c/test.*"\n')
    assert [(x["check"], x["count"]) for x in json.loads(by_hand.stdout)["findings"]] == [
        (x["check"], x["count"]) for x in doc["findings"]]


def test_a_config_that_leaves_a_shard_out_of_every_split_says_so(leak, tmp_path):
    """A hand-written [splits] whose globs match no extra shard: its rows are compared with no split
    for leakage; a skipped entry names it (no silent pass), the leak between the splits stays an error."""
    _write(leak / "extras" / "more.parquet", _frame(0, 5))
    cfg = '[splits]\ntrain = "data/train-*.parquet"\ntest = "data/test-*.parquet"\n'
    r = _audit(leak, tmp_path, config=cfg)
    doc = json.loads(r.stdout)
    assert r.returncode == 1
    assert [f["count"] for f in doc["findings"] if f["check"] == "dup.split_overlap"] == [10]
    (why,) = _skip(doc, "dup.split_overlap")
    assert "1 shard(s) are in no [splits] entry" in why and "extras/more.parquet" in why
    # every shard in a split: no such entry
    r2 = _audit(leak, tmp_path, config=cfg.replace('"data/test-*.parquet"', '["data/test-*.parquet", "extras/*"]'))
    assert _skip(json.loads(r2.stdout), "dup.split_overlap") == []


def test_clean_drops_the_test_rows_and_says_the_shard_in_both_splits_still_leaks(tmp_path):
    """clean --drop dup.split_overlap drops test.parquet's leaked rows (training data is kept); the
    rows of train_test.parquet are training rows too, so they stay and the copy still leaks: said as
    left in place (never a clean copy that silently still fails), without a '--drop' hint."""
    root = tmp_path / "several"
    _write(root / "train.parquet", _frame(0, 50))
    _write(root / "test.parquet", _frame(0, 10))
    _write(root / "train_test.parquet", _frame(100, 107))
    r = run_cli("clean", str(root), "--out", str(tmp_path / "out"), "--drop", "dup.split_overlap", "--no-progress",
                "--format", "json", cwd=tmp_path)
    res = json.loads(r.stdout)["result"]
    train = pl.concat([pl.read_parquet(root / "train.parquet"), pl.read_parquet(root / "train_test.parquet")])
    test = pl.read_parquet(root / "test.parquet")
    leaked = test.filter(pl.col("text").is_in(train["text"].implode())).height
    both = pl.read_parquet(root / "train_test.parquet").height
    total = 50 + test.height + both
    assert (res["input_rows"], res["kept"]) == (total, total - leaked)
    assert pl.read_parquet(tmp_path / "out" / "train_test.parquet").height == both
    (left,) = [x for x in res["left_in_place"] if x["check"] == "dup.split_overlap"]
    assert (left["count"], left["left"]) == (leaked + both, both)
    text = run_cli("clean", str(root), "--out", str(tmp_path / "out2"), "--drop", "dup.split_overlap", "--no-progress",
                   cwd=tmp_path)
    (line,) = [ln for ln in text.stdout.splitlines() if ln.strip().startswith("dup.split_overlap [")]
    assert f"({both} left in the copy)" in line and "--drop" not in line


def test_a_card_naming_only_the_training_split_says_there_is_nothing_to_compare(tmp_path):
    """The most common card (configs: train = data/train-*): the training split alone, a clean
    audit with no finding, and dup.split_overlap's skipped entry says why it compared nothing."""
    root = tmp_path / "repo"
    _write(root / "data" / "train-00000-of-00001.parquet", _frame(0, 50))
    (root / "README.md").write_text(CARD_WITH_CONFIGS.replace("  - split: test\n    path: data/test-*\n", ""),
                                    encoding="utf-8")
    r = _audit_bare(root, tmp_path, fmt="text")
    assert r.returncode == 0, r.stdout
    assert r.stdout.splitlines()[1] == "config: none (the defaults changed by the splits the dataset card's configs declare)"
    doc = json.loads(_audit(root, tmp_path).stdout)
    assert _checks(doc) == []
    assert _skip(doc, "dup.split_overlap") == [
        "the only split holding shards is 'train' (the dataset card's configs name no other split that holds an "
        "audited shard): no other split to compare it with"]


def _card_of(splits: dict[str, object], **config: object) -> str:
    """A card whose default config names these splits' data_files (and ``config``'s other keys)."""
    import yaml

    conf = {"config_name": "default", "data_files": [{"split": k, "path": v} for k, v in splits.items()], **config}
    return "---\n" + yaml.safe_dump({"configs": [conf]}) + "---\n"


def test_a_card_pattern_naming_a_hidden_folder_says_how_to_read_it(tmp_path):
    """datasets reads data/.extra/* when the card names it; discovery does not look into hidden
    folders: the skipped entry names the glob and says to name the folder as a PATH, and with it
    named the leak it holds is found."""
    root = tmp_path / "repo"
    train, test = _frame(0, 30), _frame(100, 110)
    _write(root / "data" / "train-0.parquet", train)
    _write(root / "data" / "test-0.parquet", test)
    _write(root / "data" / ".extra" / "train-2.parquet", test.slice(0, 3))
    (root / "README.md").write_text(_card_of({"train": ["data/train-*", "data/.extra/*"], "test": "data/test-*"}),
                                    encoding="utf-8")
    doc = json.loads(_audit(root, tmp_path).stdout)
    (why,) = _skip(doc, "dup.split_overlap")
    assert why.startswith("[splits] train: the glob 'data/.extra/*' matches no shard")
    assert "it names hidden files or folders (.extra)" in why and "name them as PATHs too" in why
    r = _audit(root, tmp_path, str(root / "data" / ".extra"))
    doc = json.loads(r.stdout)
    assert r.returncode == 1
    (leak_f,) = [f for f in doc["findings"] if f["check"] == "dup.split_overlap"]
    assert (leak_f["count"], leak_f["rows"]) == (3, [0, 1, 2])


def test_shards_of_another_config_are_named_as_such(tmp_path):
    """Configs en (default) and fr: load_dataset of the folder reads en only, so fr's files are
    index.extra_shard, and the message names the config read and the others."""
    import yaml

    root = tmp_path / "repo"
    for lang in ("en", "fr"):
        _write(root / lang / "train.parquet", _frame(0, 20) if lang == "en" else _frame(50, 70))
        _write(root / lang / "test.parquet", _frame(30, 35) if lang == "en" else _frame(80, 85))
    confs = [{"config_name": lang, "data_files": [{"split": "train", "path": f"{lang}/train.parquet"},
                                                  {"split": "test", "path": f"{lang}/test.parquet"}],
              **({"default": True} if lang == "en" else {})} for lang in ("fr", "en")]
    (root / "README.md").write_text("---\n" + yaml.safe_dump({"configs": confs}) + "---\n", encoding="utf-8")
    doc = json.loads(_audit(root, tmp_path).stdout)
    (x,) = [f for f in doc["findings"] if f["check"] == "index.extra_shard"]
    assert x["shards"] == ["fr/test.parquet", "fr/train.parquet"]
    assert "reads the default config 'en' only; if they are the files of another config of the card ('fr')" in x["message"]


def test_a_shard_two_card_patterns_match_is_in_both_and_the_card_is_named(tmp_path):
    root = tmp_path / "repo"
    _write(root / "data" / "en" / "train.parquet", _frame(0, 20))
    _write(root / "data" / "en" / "test.parquet", _frame(40, 45))
    (root / "README.md").write_text(_card_of({"train": "**/*.parquet", "test": "data/en/test.parquet"}),
                                    encoding="utf-8")
    r = _audit(root, tmp_path)
    doc = json.loads(r.stdout)
    assert r.returncode == 1
    (leak_f,) = [f for f in doc["findings"] if f["check"] == "dup.split_overlap"]
    assert leak_f["count"] == 5 and leak_f["details"]["in_both_splits"] == ["data/en/test.parquet"]
    assert "as the dataset card's data_files patterns of both splits match them" in leak_f["message"]
    assert "fix the card's patterns so each file is in one split" in leak_f["message"]


def test_a_card_whose_configs_cannot_be_used_says_so(leak, tmp_path):
    """A card declaring configs whose YAML datacheck does not read (an alias): the splits are the
    file names' (as before), and index.extra_shard says the card's configs were not used and why,
    not to declare them."""
    _write(leak / "data" / "extra-00000.parquet", _frame(100, 120))
    (leak / "README.md").write_text(
        "---\nbase: &b data/train-*\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n"
        "    path: *b\n  - split: test\n    path: data/test-*\n---\n", encoding="utf-8")
    doc = json.loads(_audit(leak, tmp_path).stdout)
    (x,) = [f for f in doc["findings"] if f["check"] == "index.extra_shard"]
    assert "from the Hub's file names" in x["message"]
    assert ("The dataset card's configs were not used (the dataset card's YAML front matter does not parse (or uses "
            "YAML aliases, which datacheck does not expand)): fix the card") in x["message"]


@pytest.mark.parametrize(("encoding", "named"), [
    ("utf-16", "is UTF-16LE text (byte order mark ff fe), not UTF-8"),  # Python's utf-16 writes a little-endian BOM
    ("utf-16-be", None),  # no byte order mark: named by its first byte that is not UTF-8
    ("latin-1", None),  # the front matter ASCII, the body's "æ" not UTF-8
])
def test_a_card_load_dataset_cannot_read_is_said_not_passed_silently(tmp_path, encoding, named):
    """A new user's trial: the card of test_the_card_configs_are_the_splits_load_dataset_reads saved as
    UTF-16 (or with one Latin-1 byte in its body) was set aside without a word, the leak it declares a
    warning. load_dataset raises on such a card (asserted here with datasets itself), so its configs
    give no splits: dup.split_overlap is skipped, and the reason names the card, its first bad byte
    (the offset datasets reports) and the fix."""
    datasets = pytest.importorskip("datasets")
    root = tmp_path / "repo"
    train = _frame(0, 60)
    _write(root / "sft" / "part-0.parquet", train)
    _write(root / "holdout" / "part-0.parquet", pl.concat([_frame(100, 110), train.slice(5, 7)]))
    raw = (CARD_SFT + "\n# Dansk sætninger\n").encode(encoding)
    if encoding == "utf-16-be":
        raw = raw.decode("utf-16-be").encode("utf-16-be")  # no BOM: "---" starts with a NUL byte
    (root / "README.md").write_bytes(raw)
    with pytest.raises(UnicodeDecodeError) as exc:
        datasets.load_dataset(str(root))
    r = _audit(root, tmp_path)
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["summary"]["status"] == "warn"  # the leak is dup.exact_across_shards only
    (reason,) = _skip(doc, "dup.split_overlap")
    assert "README.md" in reason and "load_dataset of its folder raises UnicodeDecodeError" in reason
    if named:
        assert named in reason and "iconv -f UTF-16LE -t UTF-8 README.md" in reason
    else:
        assert f"byte 0x{raw[exc.value.start]:02x} at offset {exc.value.start}" in reason
    # the same card beside Hub-named shards: the file names give the splits (the leak an error), and
    # the config line says the card was set aside, and why
    hub = tmp_path / "hub"
    _write(hub / "data" / "train-00000-of-00001.parquet", train)
    _write(hub / "data" / "test-00000-of-00001.parquet", train.slice(0, 5))
    (hub / "README.md").write_bytes(raw)
    text = _audit_bare(hub, tmp_path, fmt="text").stdout
    assert text.splitlines()[1].startswith("config: none (the defaults changed by the splits the Hub's file names "
                                           "give (the dataset card set aside: the dataset card README.md ")
    doc = json.loads(_audit_bare(hub, tmp_path).stdout)
    assert [f["count"] for f in doc["findings"] if f["check"] == "dup.split_overlap"] == [5]
