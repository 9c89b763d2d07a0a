"""``--export FILE.jsonl`` (``inspect``, ``plan``, ``trace``: :func:`datacheck.io.outputs.write_frame_atomic`)
writes values datacheck's JSONL reader reads back as they were: a NaN or infinite float as ``NaN`` /
``Infinity`` / ``-Infinity`` (polars writes null, which an audit of the export reports as another
finding), in a column, a list or a struct; a column of bytes, which JSON cannot hold, is refused
(exit 2) instead of a crash. A Rust panic that escapes a verb is an internal error (exit 3), never
the policy's exit 1."""
from __future__ import annotations

import json
import math

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import run_cli

import datacheck
import datacheck.cli.commands.inspect as cmd
from datacheck.io.outputs import write_frame_atomic
from datacheck.model.errors import UsageError


def test_non_finite_floats_are_written_as_json_tokens(tmp_path):
    nan, inf = float("nan"), float("inf")
    df = pl.DataFrame({"x": [1.5, nan, -inf, None], "v": [[1.0, inf], [2.0], [nan], []],
                       "s": [{"a": 1.0, "t": "x"}, {"a": -inf, "t": "y"}, {"a": 2.0, "t": "z"}, {"a": None, "t": "w"}],
                       "n": [1, 2, 3, 4]})
    write_frame_atomic(df, tmp_path / "e.jsonl")
    back = [json.loads(line) for line in (tmp_path / "e.jsonl").read_text().splitlines()]  # Python reads NaN too

    def same(a, b):
        if isinstance(b, float) and math.isnan(b):
            return isinstance(a, float) and math.isnan(a)
        if isinstance(b, list):
            return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
        if isinstance(b, dict):
            return a.keys() == b.keys() and all(same(a[k], b[k]) for k in b)
        return a == b

    for got, want in zip(back, df.to_dicts()):
        assert same(got, want), (got, want)


def test_exported_nan_row_replays_its_finding(tmp_path):
    xs = [1.0, float("nan"), 2.0, float("inf"), 3.0]
    (tmp_path / "in").mkdir()
    pq.write_table(pa.table({"x": xs, "y": [0.5, 0.1, 0.2, 0.3, 0.4]}), tmp_path / "in" / "reg.parquet")
    cfg = tmp_path / "dc.toml"
    cfg.write_text('[columns]\ntarget = ["y"]\nfeatures = ["x"]\n')
    out = run_cli("inspect", str(tmp_path / "in"), "--config", str(cfg), "--export", str(tmp_path / "e.jsonl"))
    assert out.returncode == 1, out.stderr
    report = datacheck.audit([str(tmp_path / "e.jsonl")], config=str(cfg), workers=1)
    counts = {f.check: f.count for f in report.findings if f.check.startswith("finite.")}
    assert counts == {"finite.nan": sum(math.isnan(v) for v in xs), "finite.inf": sum(math.isinf(v) for v in xs)}


def test_bytes_column_is_refused_for_jsonl(tmp_path):
    df = pl.DataFrame({"img": [b"\x00\xff"], "nested": [[b"ab"]]})
    with pytest.raises(UsageError, match="'img', 'nested' hold bytes"):
        write_frame_atomic(df, tmp_path / "e.jsonl")
    assert not (tmp_path / "e.jsonl").exists()
    write_frame_atomic(df, tmp_path / "e.parquet")  # parquet holds them
    assert pl.read_parquet(tmp_path / "e.parquet")["img"].to_list() == [b"\x00\xff"]


def test_cli_bytes_export_is_a_usage_error(tmp_path):
    (tmp_path / "in").mkdir()
    pq.write_table(pa.table({"text": ["a b", "c d"], "label": [0, 5], "img": pa.array([b"\x00", b"\x01"])}),
                   tmp_path / "in" / "train.parquet")
    cfg = tmp_path / "dc.toml"
    cfg.write_text("[labels]\nnum_classes = 2\n")
    out = run_cli("inspect", str(tmp_path / "in"), "--config", str(cfg), "--export", str(tmp_path / "e.jsonl"))
    assert out.returncode == 2 and "'img' hold bytes" in out.stderr
    assert not (tmp_path / "e.jsonl").exists()


def test_a_rust_panic_is_an_internal_error(tmp_path, monkeypatch):
    def panic(*_a, **_k):
        raise pl.exceptions.PanicException("not yet implemented: something")

    monkeypatch.setattr(cmd, "inspect_shards", panic)
    (tmp_path / "in").mkdir()
    pq.write_table(pa.table({"text": ["a"]}), tmp_path / "in" / "t.parquet")
    out = run_cli("inspect", str(tmp_path / "in"))
    assert out.returncode == 3 and "internal error" in out.stderr
