"""``datacheck clean`` writes a parquet shard's copy laid out as the input: the input's codec and row
groups no larger than the input's (a streaming reader holds one row group at a time), besides its
schema and metadata. Expected values come from the input's own parquet metadata and rows."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datacheck.model.config import config_from_dict
from datacheck.tools.clean import clean


@pytest.mark.parametrize("codec", ["zstd", "gzip", "none"])
def test_cleaned_parquet_keeps_codec_and_row_group_size(tmp_path, codec):
    n, group = 230, 40
    labels = [i % 3 for i in range(n)]
    for i in (5, 77, 78, 199):
        labels[i] = 9  # out of [0, 3)
    t = pa.table({"text": [f"row {i} text" for i in range(n)], "label": pa.array(labels, pa.int16())})
    (tmp_path / "in").mkdir()
    src = tmp_path / "in" / "train.parquet"
    pq.write_table(t.replace_schema_metadata({b"owner": b"team"}), src, compression=codec, row_group_size=group)
    meta = pq.ParquetFile(src).metadata
    want_codec = meta.row_group(0).column(0).compression
    kept = [i for i, v in enumerate(labels) if v < 3]

    res = clean([str(tmp_path / "in")], tmp_path / "out", config_from_dict({"labels": {"num_classes": 3}}))
    out = pq.ParquetFile(res.out / "train.parquet")
    got = out.metadata
    sizes = [got.row_group(i).num_rows for i in range(got.num_row_groups)]
    assert sizes == [group] * (len(kept) // group) + ([len(kept) % group] if len(kept) % group else [])
    assert {got.row_group(i).column(j).compression for i in range(got.num_row_groups)
            for j in range(got.num_columns)} == {want_codec}
    back = out.read()
    assert back.schema.equals(pq.read_schema(src), check_metadata=True)
    assert back.column("label").to_pylist() == [labels[i] for i in kept]
    assert back.column("text").to_pylist() == [f"row {i} text" for i in kept]
