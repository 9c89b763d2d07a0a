"""CSV columns of floats with a non-finite value spelled as Python, numpy or R write it (``nan``,
``inf``, ``-inf``, ``Inf``, ``Infinity``, ``NAN``): polars' inference reads only ``NaN`` and ``inf``
as floats, so one ``nan`` cell (Python's ``csv`` module writes ``str(float('nan'))``) made the
whole column a string: the NaN was never ``finite.nan`` and the rows no tabular layout."""
from __future__ import annotations

import csv
import math
import random

import numpy as np
import pytest

import datacheck


def _rows(n: int, seed: int = 0) -> list[list[float]]:
    rng = random.Random(seed)
    return [[rng.uniform(-1, 1), rng.uniform(-1, 1)] for _ in range(n)]


@pytest.mark.parametrize("spelling", ["nan", "-nan", "NAN", "Inf", "-Infinity", "INF", "infinity"])
def test_a_float_column_with_a_python_or_r_non_finite_spelling_is_read_as_floats(tmp_path, spelling):
    rows = _rows(300)
    bad = {7, 150, 299}
    path = tmp_path / "d.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["f0", "f1", "label"])
        for i, (a, b) in enumerate(rows):
            w.writerow([spelling if i in bad else a, b, i % 3])
    value = float(spelling)  # what the cell means
    check = "finite.nan" if math.isnan(value) else "finite.inf"
    rep = datacheck.audit([str(path)], workers=1)
    assert rep.shards[0].layout == "tabular"
    (f,) = [f for f in rep.findings if f.check == check]
    assert (f.column, f.rows) == ("f0", tuple(sorted(bad)))


def test_python_csv_and_numpy_savetxt_nans_are_found(tmp_path):
    rows = np.array(_rows(200, seed=1))
    rows[[3, 40], 1] = np.nan
    rows[90, 0] = -np.inf
    np.savetxt(tmp_path / "np.csv", rows, delimiter=",", header="a,b", comments="")  # writes nan, -inf
    text = (tmp_path / "np.csv").read_text()
    assert "nan" in text and "-inf" in text and "NaN" not in text
    rep = datacheck.audit([str(tmp_path / "np.csv")], workers=1)
    got = {f.check: (f.column, f.rows) for f in rep.findings if f.check.startswith("finite.")}
    assert got == {"finite.nan": ("b", (3, 40)), "finite.inf": ("a", (90,))}


def test_a_text_column_holding_nan_among_words_stays_text(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("text,label\n" + "".join(f"{w},{i % 2}\n" for i, w in enumerate(["nan", "bread", "inf", "x"] * 60)))
    rep = datacheck.audit([str(path)], workers=1)
    assert rep.shards[0].layout == "text_classification"
    assert not [f for f in rep.findings if f.check.startswith("finite.")]
