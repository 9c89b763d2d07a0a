"""``datacheck inspect`` names, for each copy ``dup.exact_in_shard`` shows, the earlier row it repeats
(the first row with that content, as the engine's refinement found it). Real data: DKHate's raw
parquet train split (realdata #6: ``text:string, label:string`` NOT/OFF, 2,960 rows), whose repeated
(text, label) rows are computed here with pyarrow."""
from __future__ import annotations

import pyarrow.parquet as pq
from conftest import run_cli

from datacheck.model.config import config_from_dict
from datacheck.tools.inspect import inspect_shards


def _train(realdata):
    path = realdata / "dkhate_danish_offensive" / "raw_parquet" / "train-00000-of-00001.parquet"
    t = pq.read_table(path)
    rows = list(zip(t.column("text").to_pylist(), t.column("label").to_pylist()))
    assert len(rows) == 2960  # PROVENANCE #6
    first: dict[tuple, int] = {}
    for i, r in enumerate(rows):
        first.setdefault(r, i)
    copies = [(i, first[r]) for i, r in enumerate(rows) if first[r] != i]
    return path, copies


def test_each_copy_shown_names_the_first_row_with_its_content(realdata):
    path, copies = _train(realdata)
    assert len(copies) > 20  # more copies than the default 20 shown per check
    (ins,) = inspect_shards([str(path)], config_from_dict({}), checks=["dup.exact_in_shard"], limit=len(copies))
    assert ins.failing["dup.exact_in_shard"] == [i for i, _ in copies]
    assert [(r.row, r.repeats) for r in ins.shown] == copies
    assert ins.shown[-1].to_dict()["repeats"] == copies[-1][1]


def test_cli_text_says_which_row_each_copy_repeats(realdata):
    path, copies = _train(realdata)
    out = run_cli("inspect", "--check", "dup.exact_in_shard", str(path))
    row, first = copies[0]
    block = out.stdout.split(f"  row {row}  dup.exact_in_shard", 1)[1]
    assert block.splitlines()[1].strip() == f"repeats row {first} (the first row with this content)"
