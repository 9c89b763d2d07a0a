"""The global row order of a split (``plan``'s and ``trace``'s step -> rows join) is the order
``datasets.load_dataset`` of the folder concatenates the split's files in: pattern by pattern of a
dataset card's ``data_files`` (a literal list as listed, globs in their order, each glob's files sorted,
a file two patterns match twice), and for the file names' rule datasets' default patterns keyword by
keyword. Each folder is built here; the expected rows come from ``load_dataset`` itself (each row's
text names its file and row), never from datacheck."""
from __future__ import annotations

import json
import math
import shutil

import polars as pl
import pytest
from conftest import run_cli

datasets = pytest.importorskip("datasets")

from datacheck.execute.plan import row_space  # noqa: E402
from datacheck.model.config import Config  # noqa: E402

ROWS = 3  # rows per file


def _card(train: str, test: str = "data/heldout.parquet", extra: str = "") -> str:
    return ("---\nconfigs:\n- config_name: default\n" + extra + "  data_files:\n  - split: train\n"
            f"    path: {train}\n  - split: test\n    path: {test}\n---\n# a card\n")


#: name -> (files, dataset card or None: the file names' rule)
CASES = {
    "card_literal_list_reversed": (["data/part_a.parquet", "data/part_b.parquet", "data/heldout.parquet"],
                                   _card("[data/part_b.parquet, data/part_a.parquet]")),
    "card_globs_not_sorted": (["data/z/0.parquet", "data/z/1.parquet", "data/a/0.parquet", "data/a/1.parquet",
                               "data/heldout.parquet"], _card("['data/z/*', 'data/a/*']")),
    "card_file_in_two_globs": (["data/z/0.parquet", "data/z/1.parquet", "data/a/0.parquet", "data/heldout.parquet"],
                               _card("['data/z/*', 'data/a/*', 'data/z/0.parquet']")),
    "card_data_dir_file_names": (["d/train/z.parquet", "d/data/train-v2/a.parquet", "d/test/t.parquet",
                                  "data/heldout.parquet"],
                                 "---\nconfigs:\n- config_name: default\n  data_dir: d\n---\n"),
    "names_split_folders": (["train/z.parquet", "train/sub/a.parquet", "data/train-v2/a.parquet", "x-train/m.parquet",
                             "training/b.parquet", "test/t.parquet"], None),
    "names_split_files": (["zz_train.parquet", "train_a.parquet", "training.parquet", "a/train-0.parquet",
                           "test.parquet"], None),
    "names_push_to_hub": (["data/train-00001-of-00002.parquet", "data/train-00000-of-00002.parquet",
                           "data/test-00000-of-00001.parquet"], None),
}


def _build(root, files, card):
    for f in files:
        p = root / f
        p.parent.mkdir(parents=True, exist_ok=True)
        pl.DataFrame({"text": [f"{f}#{i}" for i in range(ROWS)],
                      "x": [float("nan") if (f, i) == (files[0], 1) else float(i) for i in range(ROWS)]}
                     ).write_parquet(p)
    if card is not None:
        (root / "README.md").write_text(card)
    return root


def _loaded(root, cache) -> list[tuple[str, int]]:
    """(file, row) of each row of load_dataset(root)["train"], in its order."""
    ds = datasets.load_dataset(str(root), cache_dir=str(cache))["train"]
    return [(t.rsplit("#", 1)[0], int(t.rsplit("#", 1)[1])) for t in ds["text"]]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    datasets.disable_progress_bars()
    out = {}
    for name, (files, card) in CASES.items():
        root = _build(tmp_path_factory.mktemp(name), files, card)
        out[name] = (root, _loaded(root, tmp_path_factory.mktemp("cache")))
    return out


@pytest.mark.parametrize("case", list(CASES))
def test_the_plans_row_order_is_load_datasets(folders, case):
    root, want = folders[case]
    assert len(want) > ROWS  # several files in train
    space, _ = row_space([str(root)], Config())
    assert space.split == "train"
    got = [(s.path, r) for s in space.shards for r in range(s.rows)]
    assert got == want


@pytest.mark.parametrize("case", ["card_literal_list_reversed", "card_globs_not_sorted", "names_split_folders"])
def test_plan_step_names_the_rows_load_dataset_gives(folders, case, tmp_path):
    root, want = folders[case]
    cfg = tmp_path / "dc.toml"
    cfg.write_text("[batch]\nbatch_size = 2\nshuffle = false\n")
    for step in range(math.ceil(len(want) / 2)):
        r = run_cli("plan", str(root), "--config", str(cfg), "--step", str(step), "--format", "json")
        assert r.returncode == 0, r.stderr
        rows = json.loads(r.stdout)["result"]["step"]["rows"]
        assert [(x["shard"], x["row"]) for x in rows] == want[2 * step:2 * step + 2]
        assert [x["global_index"] for x in rows] == list(range(2 * step, 2 * step + len(rows)))


@pytest.mark.parametrize("case", ["card_literal_list_reversed", "names_split_files"])
def test_trace_joins_the_nan_step_to_the_row_load_dataset_gives(folders, case, tmp_path):
    """A NaN in row 1 of the first file named: the log goes NaN at the step that loads it (shuffle off,
    batch 2: step g // 2 of the row's place g in load_dataset's train split); trace names that row."""
    root, want = folders[case]
    files = CASES[case][0]
    g = want.index((files[0], 1))
    bad = g // 2
    cfg = tmp_path / "dc.toml"
    cfg.write_text('[columns]\nfeatures = ["x"]\n[batch]\nbatch_size = 2\nshuffle = false\n')
    log = tmp_path / "metrics.jsonl"
    log.write_text("".join(json.dumps({"step": s, "loss": float("nan") if s >= bad else 1.0 / (s + 1)}) + "\n"
                           for s in range(math.ceil(len(want) / 2))))
    r = run_cli("trace", str(log), "--data", str(root), "--config", str(cfg), "--first-step", "0", "--format", "json")
    res = json.loads(r.stdout)["result"]
    rows = res["data"]["rows"]
    assert res["first_bad"]["step"] == bad, r.stderr
    assert rows["steps"][str(bad)] == {"0": list(range(2 * bad, min(2 * bad + 2, len(want))))}
    assert [(f["row"], f["shard"], f["shard_row"]) for f in rows["failing_rows"]] == [(g, files[0], 1)]


def test_splits_globs_written_by_hand_order_as_load_dataset_data_files(folders, tmp_path):
    """``[splits] train = ["data/z/*", "data/a/*"]`` plans glob by glob, each glob's shards sorted: the
    order of ``load_dataset("parquet", data_files={"train": [the same globs]})``."""
    root, _ = folders["card_globs_not_sorted"]
    shutil.copytree(root / "data", tmp_path / "d" / "data")  # the same files, without the card
    globs = ["data/z/*", "data/a/*"]
    ds = datasets.load_dataset("parquet", data_dir=str(tmp_path / "d"), data_files={"train": globs},
                               cache_dir=str(tmp_path / "cache"))["train"]
    want = [(t.rsplit("#", 1)[0], int(t.rsplit("#", 1)[1])) for t in ds["text"]]
    cfg = Config.model_validate({"splits": {"train": globs, "test": "data/heldout.parquet"}})
    space, _ = row_space([str(tmp_path / "d")], cfg)
    assert [(s.path, r) for s in space.shards for r in range(s.rows)] == want
    assert want[0][0] == "data/z/0.parquet"  # not the sorted order
