"""R's ``NA`` (``write.csv``'s default spelling of a missing value) in CSV columns: a numeric column
with an ``NA`` cell was read as text (polars' inference takes only the empty cell as missing), so an
R export with one missing feature lost its tabular layout and the column's NaNs went unchecked. A
column whose other values are all numbers now reads ``NA`` as null; a text column keeps ``NA`` as the
text it is (a country code, an answer); a column of only ``NA`` says nothing of its type."""
from __future__ import annotations

import csv
import random

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import datacheck
from datacheck.formats.csv import CSV_CHUNK_ROWS, open_csv
from datacheck.model.config import Config


def _write(path, header, rows):
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def _frame(path) -> pl.DataFrame:
    return open_csv(path, "csv", Config().dataset, 5, ()).lf.collect()


def test_an_r_export_with_missing_features_is_tabular_and_its_nan_found(tmp_path):
    rng = random.Random(1)
    rows = [[round(rng.uniform(-1, 1), 4), rng.randint(0, 9), i % 2] for i in range(200)]
    missing = {3, 77, 150}
    nan_row = 120
    for i in missing:
        rows[i][0] = "NA"
    rows[40][1] = "NA"
    rows[nan_row][0] = "NaN"
    path = _write(tmp_path / "train.csv", ["x1", "x2", "label"], rows)
    df = _frame(path)
    assert df.schema == {"x1": pl.Float64, "x2": pl.Int64, "label": pl.Int64}
    assert sorted(df.with_row_index().filter(pl.col("x1").is_null())["index"].to_list()) == sorted(missing)
    assert df["x2"].null_count() == 1 and df["x2"][40] is None
    rep = datacheck.audit([str(path)], workers=1)
    assert rep.shards[0].layout == "tabular"
    (f,) = [f for f in rep.findings if f.check == "finite.nan"]
    assert (f.column, f.rows) == ("x1", (nan_row,))


def test_na_as_text_stays_text(tmp_path):
    rows = [["NA", "North America"], ["EU", "Europe"], ["NA", "again"], ["12", "a number-like code"]]
    df = _frame(_write(tmp_path / "codes.csv", ["region", "name"], rows))
    assert df.schema["region"] == pl.String and df["region"].to_list() == ["NA", "EU", "NA", "12"]


def test_a_column_of_only_na_keeps_its_cells(tmp_path):
    df = _frame(_write(tmp_path / "d.csv", ["x", "y"], [["NA", 1], ["NA", 2]]))
    assert df["x"].to_list() == ["NA", "NA"] and df["y"].to_list() == [1, 2]


def test_na_in_a_later_chunk_only(tmp_path):
    n = CSV_CHUNK_ROWS + 10
    rows = [[i * 0.5, i % 2] for i in range(n)]
    rows[n - 3][0] = "NA"
    df = _frame(_write(tmp_path / "d.csv", ["x", "label"], rows))
    assert df.schema["x"] == pl.Float64 and df["x"].null_count() == 1 and df["x"][n - 3] is None


def _reference(cells: list[str]) -> tuple[str, list]:
    """(kind, values) a column of these non-empty cells reads as: numbers with NA as missing when every
    cell but NA is a number and one is; else the text as written."""
    rest = [c for c in cells if c != "NA"]

    def num(c: str) -> bool:
        try:
            float(c)
            return True
        except ValueError:
            return False
    if rest and all(num(c) for c in rest):
        if all(c.lstrip("-").isdigit() for c in rest):
            return "int", [None if c == "NA" else int(c) for c in cells]
        return "float", [None if c == "NA" else float(c) for c in cells]
    return "text", cells


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.just("NA"), st.integers(-50, 50).map(str), st.floats(-5, 5, allow_nan=False).map(
    lambda x: f"{x:.3f}"), st.sampled_from(["abc", "na", "N/A"])), min_size=1, max_size=30))
def test_columns_read_as_the_reference(tmp_path_factory, cells):
    path = _write(tmp_path_factory.mktemp("p") / "d.csv", ["c", "k"], [[c, 1] for c in cells])
    kind, want = _reference(cells)
    got = _frame(path)["c"]
    if kind == "text" and all(c == "NA" for c in cells):
        assert got.to_list() == cells
        return
    if kind == "text":
        assert got.dtype == pl.String and got.to_list() == cells
        return
    assert got.dtype == (pl.Int64 if kind == "int" else pl.Float64)
    assert got.to_list() == want


# ------------------------------------------------------------- integers beyond Int64 (64-bit IDs) beside NA
def _emptied(path, out):
    """``path`` with every ``NA`` cell written as the empty cell (the null polars reads)."""
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    return _write(out, rows[0], [["" if c == "NA" else c for c in r] for r in rows[1:]])


def test_big_integer_ids_beside_na_keep_every_digit(tmp_path):
    """An R-style export of 64-bit IDs (beyond Int64, as unsigned 64-bit hashes are) with one ``NA``:
    read as Float64 they lost their last digits (binary64 holds integers exactly to 2**53), so rows 1
    and 2, which differ only by ID, read as one row repeated: a false dup.exact_in_shard."""
    ids = ["12345678901234567890", "NA", "12345678901234567891", "12345678901234567892"]
    rows = [[ids[0], 0.25, 0], [ids[1], 0.5, 1], [ids[2], 0.75, 0], [ids[3], 0.75, 0]]
    assert float(ids[2]) == float(ids[3]) and int(ids[2]) != int(ids[3])  # what Float64 made of them
    assert int(ids[0]) > 2**63 - 1  # beyond Int64
    path = _write(tmp_path / "d.csv", ["id", "x", "label"], rows)
    df = _frame(path)
    assert df.schema["id"] == pl.Int128
    assert df["id"].to_list() == [None if c == "NA" else int(c) for c in ids]
    rep = datacheck.audit([str(path)], workers=1)
    assert [f.check for f in rep.findings if f.check.startswith("dup.")] == []
    # the same as the file with the NA cell empty, which polars reads alike
    plain = pl.read_csv(_emptied(path, tmp_path / "e.csv"), infer_schema_length=None)
    assert df.equals(plain)


def test_an_integer_beyond_128_bits_beside_na_is_refused_as_without_it(tmp_path):
    from datacheck.io.shardbytes import Unreadable

    big = str(2**130)
    rows = [["1", 0], ["NA", 1], [big, 0]]
    path = _write(tmp_path / "d.csv", ["id", "label"], rows)
    with pytest.raises(Unreadable) as with_na:
        _frame(path)
    with pytest.raises(Unreadable) as without:
        _frame(_emptied(path, tmp_path / "e.csv"))
    line = 2 + [r[0] for r in rows].index(big)  # 1-based, after the header
    assert str(with_na.value) == str(without.value)
    assert str(with_na.value).startswith(f"line {line}, column 'id': {big} cannot be read as a number")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.just("NA"), st.just(""), st.integers(-(2**126), 2**126).map(str),
                          st.floats(-1e6, 1e6, allow_nan=False).map(repr)), min_size=1, max_size=30))
def test_a_column_with_na_reads_as_polars_reads_it_with_the_cells_empty(tmp_path_factory, cells):
    """Reference: polars' own inference and values over the same file with the ``NA`` cells empty,
    except that a column polars leaves text although every cell is a number (an integer beyond Int64
    beside a decimal: polars' inference has no common type for i128 and f64) is Float64, each value
    as Python's ``float`` reads its text (the CSV reader's documented rule, as without ``NA``)."""
    if all(c in ("NA", "") for c in cells):
        return  # only NA and empty cells: no type said (test_a_column_of_only_na_keeps_its_cells)
    d = tmp_path_factory.mktemp("p")
    path = _write(d / "d.csv", ["c", "k"], [[c, 1] for c in cells])
    ref = pl.read_csv(_emptied(path, d / "e.csv"), infer_schema_length=None)["c"]
    want_dtype, want = ref.dtype, ref.to_list()
    if ref.dtype == pl.String:  # every cell here is a number: the Float64 rule
        want_dtype, want = pl.Float64, [None if c in ("NA", "") else float(c) for c in cells]
    got = _frame(path)["c"]
    assert got.dtype == want_dtype and got.to_list() == want
