"""``datacheck inspect`` shows a row of a streamed shard (CSV, plain text, a large or stream-format
Arrow file, a large JSONL: the readers served through :func:`datacheck.formats.stream_source.lazy_source`)
also when the row's only finding names no column (``dup.exact_in_shard``): the rows are then read with
no data column, only their index. Real data: DKHate's ``save_to_disk`` train split (realdata #6, an
Arrow IPC stream, 2,960 rows ``text, label``), its repeated (text, label) rows computed with pyarrow."""
from __future__ import annotations

import csv

import pyarrow as pa
from conftest import run_cli

from datacheck.model.config import config_from_dict
from datacheck.tools.inspect import inspect_shards


def _copies(rows: list[tuple]) -> list[tuple[int, int]]:
    first: dict[tuple, int] = {}
    for i, r in enumerate(rows):
        first.setdefault(r, i)
    return [(i, first[r]) for i, r in enumerate(rows) if first[r] != i]


def test_dup_row_of_an_arrow_stream_is_shown(realdata):
    folder = realdata / "dkhate_danish_offensive" / "dkhate_processed_hf" / "train"
    with pa.OSFile(str(folder / "data-00000-of-00001.arrow"), "rb") as f:
        t = pa.ipc.open_stream(f).read_all()
    copies = _copies(list(zip(t.column("text").to_pylist(), t.column("label").to_pylist())))
    row, first = copies[0]
    (ins,) = inspect_shards([str(folder)], config_from_dict({}), rows=[row])
    assert [(r.row, r.check, r.repeats) for r in ins.shown] == [(row, "dup.exact_in_shard", first)]
    (ins,) = inspect_shards([str(folder)], config_from_dict({}), checks=["dup.exact_in_shard"], limit=3)
    assert [(r.row, r.repeats) for r in ins.shown] == copies[:3]


def test_dup_row_of_a_csv_shard_is_shown_by_the_cli(tmp_path):
    rows = [(f"sentence number {i} of the file", str(i % 2)) for i in range(40)]
    rows[31] = rows[12]
    with open(tmp_path / "train.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        w.writerows(rows)
    (row, first), = _copies(rows)
    out = run_cli("inspect", "--rows", str(row), str(tmp_path / "train.csv"))
    # a CSV row is named with its 1-based line too: the header is line 1, row 0 is line 2
    block = out.stdout.split(f"  row {row} (line {row + 2})  dup.exact_in_shard", 1)[1]
    assert block.splitlines()[1].strip() == f"repeats row {first} (the first row with this content)"
