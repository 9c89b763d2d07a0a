"""``datacheck inspect`` names, for each copy ``dup.exact_in_shard`` shows, the earlier row it repeats
(the first row with that content, as the engine's refinement found it). Real data: dair-ai emotion's
train split (realdata #11: ';'-separated, header text;label_name, 31 duplicate texts)."""
from __future__ import annotations

from conftest import run_cli

from datacheck.model.config import config_from_dict
from datacheck.tools.inspect import inspect_shards

CFG = {"dataset": {"format": "csv", "separator": ";"}}


def _texts(realdata) -> list[str]:
    lines = (realdata / "emotion" / "train.txt").read_text().splitlines()
    assert lines[0] == "text;label_name" and len(lines) - 1 == 16_000  # PROVENANCE #11
    return [ln.rsplit(";", 1)[0] for ln in lines[1:]]


def test_each_copy_shown_names_the_first_row_with_its_text(realdata):
    texts = _texts(realdata)
    first = {}
    for i, t in enumerate(texts):
        first.setdefault(t, i)
    copies = [i for i, t in enumerate(texts) if first[t] != i]
    assert len(copies) == 31  # PROVENANCE #11: 31 duplicate texts in train
    (ins,) = inspect_shards([str(realdata / "emotion" / "train.txt")], config_from_dict(CFG),
                            checks=["dup.exact_in_shard"], limit=len(copies))
    assert ins.failing["dup.exact_in_shard:text"] == copies
    assert [(r.row, r.repeats) for r in ins.shown] == [(i, first[texts[i]]) for i in copies]
    assert ins.shown[0].to_dict()["repeats"] == first[texts[copies[0]]]


def test_cli_text_says_which_row_each_copy_repeats(realdata, tmp_path):
    texts = _texts(realdata)
    copy = next(i for i, t in enumerate(texts) if texts.index(t) != i)
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text('[dataset]\nformat = "csv"\nseparator = ";"\n')
    out = run_cli("inspect", "--config", str(cfg), "--check", "dup.exact_in_shard",
                  str(realdata / "emotion" / "train.txt"))
    block = out.stdout.split(f"row {copy} (line {copy + 2})", 1)[1]
    assert block.splitlines()[1].strip() == f"repeats row {texts.index(texts[copy])} (the first row with this content)"
