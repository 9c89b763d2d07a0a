"""dup.exact_across_shards over shards whose attention masks are stored as booleans in one and as
0/1 int8 in the other (numpy ``mask.astype(bool)`` in one export, ``int8`` in another): the same
samples are repeats (the row hash reads a mask's values, not its storage), and the shards'
dtypes still differ (schema.inconsistent: polars' scan_parquet of both raises SchemaError,
datasets.concatenate_datasets 'features can't be aligned')."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
from dshelp import by_check, one, run


def _rows(seed: int, n: int) -> list[tuple[list[int], list[int]]]:
    """``n`` right-padded rows of 8: (input_ids, 0/1 mask), pad id 0."""
    out = []
    for r in range(n):
        k = 2 + (seed * 31 + r * 7) % 6
        out.append(([100 + seed * 50 + r + j for j in range(k)] + [0] * (8 - k), [1] * k + [0] * (8 - k)))
    return out


def test_repeats_across_bool_and_int8_masks_are_found(tmp_path):
    a = _rows(1, 6)
    b = a[:4] + _rows(2, 3)  # four samples of a.parquet again, three new ones
    pq.write_table(pa.table({"input_ids": pa.array([r[0] for r in a], pa.list_(pa.int64())),
                             "attention_mask": pa.array([[bool(v) for v in r[1]] for r in a], pa.list_(pa.bool_()))}),
                   tmp_path / "a.parquet")
    pq.write_table(pa.table({"input_ids": pa.array([r[0] for r in b], pa.list_(pa.int64())),
                             "attention_mask": pa.array([r[1] for r in b], pa.list_(pa.int8()))}),
                   tmp_path / "b.parquet")
    seen = {(tuple(i), tuple(m)) for i, m in a}
    repeated = [k for k, (i, m) in enumerate(b) if (tuple(i), tuple(m)) in seen]
    rep = run(tmp_path)
    f = one(rep, "dup.exact_across_shards")
    assert f.count == len(repeated) == 4
    assert sorted(e.row for e in f.examples) == repeated
    assert not by_check(rep, "dup.exact_in_shard")
    # the storage differs: one finding naming the mask's two dtypes (a loader that reads the shards
    # as one table refuses them until they are cast to one dtype)
    s = one(rep, "schema.inconsistent")
    assert s.details["dtypes"] == {"attention_mask": {"expected": "List(Boolean)", "actual": "List(Int8)"}}
