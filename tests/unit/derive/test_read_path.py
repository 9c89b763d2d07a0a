"""The one read path (``datacheck.derive.read.open_for_checks``): casts, roles, inline frames, and that no
other module opens a shard by itself."""
from __future__ import annotations

import ast
from pathlib import Path

import polars as pl
import pytest

import datacheck
from datacheck.derive.read import CheckInput, open_for_checks
from datacheck.engine.shard import audit_shard
from datacheck.io.discover import DiscoveredShard
from datacheck.io.hashing import hash_file
from datacheck.io.shardbytes import Unreadable
from datacheck.model.config import config_from_dict
from datacheck.model.findings import EXAMPLE_LENGTH, EXAMPLE_POSITION, EXAMPLE_TEXT, Example

PKG = Path(datacheck.__file__).resolve().parent


def _calls_of(name: str) -> list[str]:
    """``module:line`` of every call of ``name`` (as ``name(...)`` or ``x.name(...)``) in the package."""
    out = []
    for py in sorted(PKG.rglob("*.py")):
        tree = ast.parse(py.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                if called == name:
                    out.append(f"{py.relative_to(PKG).as_posix()}:{node.lineno}")
    return out


@pytest.mark.slow
def test_only_the_read_path_opens_a_shard():
    # every verb reads through open_for_checks; open_shard is called only there (and defined in readers)
    assert [c.split(":")[0] for c in _calls_of("open_shard")] == ["derive/read.py"]
    users = {c.split(":")[0] for c in _calls_of("open_for_checks")}
    assert users >= {"engine/shard.py", "execute/audit.py", "derive/read.py", "tools/infer.py", "tools/inspect.py"}


def _shard(tmp_path: Path, name: str, text: str) -> DiscoveredShard:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    fmt = "jsonl" if name.endswith(".jsonl") else "csv"
    return DiscoveredShard(path=p, rel=name, format=fmt)


def test_csv_text_column_from_config_is_string(tmp_path):
    ds = _shard(tmp_path, "d.csv", "review,label\n123,0\n456,1\n")
    got = open_for_checks(ds, config_from_dict({"columns": {"text": "review"}}))
    assert got.schema == {"review": pl.String, "label": pl.Int64}
    assert got.roles.text == ("review",) and got.roles.label == "label"
    assert got.lf.collect()["review"].to_list() == ["123", "456"]
    assert got.line_format and got.lines_of([0, 1]) == [2, 3]
    # without the role the reader infers numbers, as polars does
    plain = open_for_checks(ds, config_from_dict({}))
    assert plain.schema["review"] == pl.Int64


def test_null_role_columns_are_cast(tmp_path):
    ds = _shard(tmp_path, "d.jsonl", '{"text": "a", "label": null}\n{"text": "b", "label": null}\n')
    got = open_for_checks(ds, config_from_dict({"columns": {"label": "label"}}))
    assert got.casts == {"label": pl.Int64}
    assert got.schema["label"] == pl.Int64
    assert got.lf.collect()["label"].dtype == pl.Int64


def test_inline_frame_is_read_like_a_shard():
    df = pl.DataFrame({"input_ids": pl.Series([[1, 2], [3, 4]], dtype=pl.Array(pl.Int32, 2)),
                       "labels": [None, None]})
    got = open_for_checks(df, config_from_dict({"columns": {"input_ids": "input_ids", "labels": "labels"}}))
    assert isinstance(got, CheckInput)
    assert got.schema["input_ids"] == pl.List(pl.Int32)  # fixed-size lists read as lists
    assert got.schema["labels"] == pl.List(pl.Int64)  # all-null token column cast to its role's dtype
    assert got.decode_findings == [] and got.lines_of([0]) == []
    with pytest.raises(TypeError, match="DiscoveredShard or a polars"):
        open_for_checks([1, 2], config_from_dict({}))  # type: ignore[arg-type]


def test_unreadable_shard_raises_unreadable(tmp_path):
    p = tmp_path / "bad.parquet"
    p.write_bytes(b"not parquet at all")
    with pytest.raises(Unreadable, match="bad magic bytes"):
        open_for_checks(DiscoveredShard(path=p, rel="bad.parquet", format="parquet"), config_from_dict({}))


def test_engine_fills_example_position_and_length_but_not_the_report(tmp_path):
    p = tmp_path / "t.parquet"
    pl.DataFrame({"input_ids": [[1, 2, 3], [1, 99, 3, 4], [120, 1]]}).write_parquet(p)
    chash, size = hash_file(p)
    cfg = config_from_dict({"tokens": {"vocab_size": 50}})
    res = audit_shard(DiscoveredShard(path=p, rel="t.parquet", format="parquet"), cfg, chash, size)
    f = next(f for f in res.findings if f.check == "tokens.out_of_vocab")
    assert [(e.row, e.position, e.length) for e in f.examples] == [(1, 1, 4), (2, 0, 2)]
    assert [e.value for e in f.examples] == ["'first at position 1 of 4: 99'", "'first at position 0 of 2: 120'"]
    assert f.examples[0].to_dict() == {"row": 1, "value": "'first at position 1 of 4: 99'"}
    assert Example.from_dict(f.examples[0].to_dict()) == f.examples[0]  # equality ignores the extra fields


def test_example_of_struct_and_plain_values():
    e = Example.of(3, {EXAMPLE_TEXT: "first at position 2 of 5: 7", EXAMPLE_POSITION: 2, EXAMPLE_LENGTH: 5}, 4)
    assert (e.row, e.value, e.line, e.position, e.length) == (3, "'first at position 2 of 5: 7'", 4, 2, 5)
    assert Example.of(0, {EXAMPLE_TEXT: None, EXAMPLE_POSITION: None, EXAMPLE_LENGTH: 3}).value == "None"
    plain = Example.of(1, -1)
    assert (plain.value, plain.position, plain.length) == ("-1", None, None)
