"""Cross-shard duplicates and train/eval leaks of tabular rows whose numbers were written two ways:
a CSV shard whose column holds only integers is inferred Int64, the same column with a float
formatting (``1.0``, as pandas writes a float column) Float64. Row identity is by value
(datacheck-row-v5): the same table row is found in both. Real data: the MosaicML Streaming
``joining_sample_dataset`` (x: 3 float64 features, y: a 0/1 class, joined on ``_id``)."""
from __future__ import annotations

from pathlib import Path

import pytest
from dshelp import by_check, one, write

import datacheck
from datacheck.derive.read import open_for_checks
from datacheck.io.discover import DiscoveredShard
from datacheck.model.config import config_from_dict


@pytest.fixture
def table(realdata) -> list[tuple[tuple[float, ...], int]]:
    """(features, y) per ``_id`` in ``_id`` order: 100 rows (PROVENANCE.md)."""
    root = realdata / "mds_fixtures" / "joining_sample_dataset"

    def frame(sub: str):
        p = root / sub / "shard.00000.mds"
        return open_for_checks(DiscoveredShard(path=p, rel=p.name, format="mds"), config_from_dict({})).lf.collect()

    x, y = frame("x"), frame("y")
    ys = dict(zip(y["_id"].to_list(), y["y"].to_list()))
    rows = [(tuple(v), ys[i]) for i, v in zip(x["_id"].to_list(), x["x"].to_list())]
    assert len(rows) == 100 and sorted(ys) == list(range(100)) and set(ys.values()) == {0, 1}
    return rows


def _csv(path: Path, rows: list, float_y: bool) -> None:
    """``rows`` as CSV with ``repr`` of each feature (exact), y as ``0``/``1`` or ``0.0``/``1.0``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fmt = (lambda v: repr(float(v))) if float_y else str
    path.write_text("x0,x1,x2,y\n" + "".join(",".join(map(repr, f)) + "," + fmt(y) + "\n" for f, y in rows))


#: y as a binary target (BCE): part of the row content of every dup.* check
BINARY = {"dataset": {"layout": "regression"}, "columns": {"target": "y"}, "labels": {"target_kind": "binary"}}


def test_the_real_table_in_csv_shards_has_no_finding(tmp_path, table):
    """Clean data: the table in 3 CSV shards and a parquet shard (class label y) and as a train/eval split audits with no
    finding at all (--fail-on warn passes)."""
    for k in range(3):
        _csv(tmp_path / "d" / f"part-{k}.csv", table[25 * k:25 * k + 25], float_y=False)
    rest = table[75:]  # the last quarter as a parquet shard of the same table
    write(tmp_path / "d", "part-3.parquet", {f"x{i}": [f[i] for f, _ in rest] for i in range(3)} | {"y": [y for _, y in rest]})
    rep = datacheck.audit(str(tmp_path / "d"), config={"columns": {"label": "y"}, "labels": {"num_classes": 2}},
                          fail_on="warn")
    assert rep.findings == [] and rep.passed
    _csv(tmp_path / "s" / "train" / "t.csv", table[:80], float_y=False)
    _csv(tmp_path / "s" / "test" / "e.csv", table[80:], float_y=False)
    rep = datacheck.audit(str(tmp_path / "s"), config=BINARY, fail_on="warn")
    assert rep.findings == [] and rep.passed


def test_rows_written_with_float_targets_are_the_same_rows(tmp_path, table):
    """Train shards write y as 0/1 (Int64), the eval shard as 0.0/1.0 (Float64): the 10 eval rows
    taken from train are a leak, and within one dataset the 10 shared rows are cross-shard copies."""
    _csv(tmp_path / "train" / "a.csv", table[:40], float_y=False)
    _csv(tmp_path / "train" / "b.csv", table[40:80], float_y=False)
    eval_rows = table[70:]
    _csv(tmp_path / "eval" / "e.csv", eval_rows, float_y=True)
    train = set(table[:80])
    leaked = [k for k, r in enumerate(eval_rows) if r in train]
    rep = datacheck.audit(str(tmp_path / "eval"), config=BINARY, against=str(tmp_path / "train"), fail_on="never")
    s = one(rep, "dup.split_overlap")
    assert s.count == len(leaked) == 10 and [e.row for e in s.examples][:len(leaked)] == leaked
    # one dataset of the three shards: the eval shard's 10 rows repeat rows of b.csv
    _csv(tmp_path / "all" / "a.csv", table[:40], float_y=False)
    _csv(tmp_path / "all" / "b.csv", table[40:80], float_y=False)
    _csv(tmp_path / "all" / "e.csv", eval_rows, float_y=True)
    rep = datacheck.audit(str(tmp_path / "all"), config=BINARY, fail_on="never")
    f = one(rep, "dup.exact_across_shards")
    assert f.count == len(leaked)
    assert not by_check(rep, "dup.exact_in_shard")
