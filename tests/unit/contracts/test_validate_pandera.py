"""The fused data checks agree with Pandera validating the same contract itself
(``validate_with_pandera``, SCHEMA_AND_DATA depth) on data without NaN, row for row."""
from __future__ import annotations

import polars as pl
from conftest import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemahelp import audit, found, write

from datacheck.contracts import load_contract, validate_with_pandera

CONTRACT = """
columns:
  a:
    dtype: Int64
    nullable: true
    in_range: {min_value: -3, max_value: 5}
  b:
    dtype: Int64
    isin: [1, 2, 3]
  s:
    dtype: String
    str_length: {min_value: 1, max_value: 3}
    str_startswith: x
"""

ints = st.one_of(st.none(), st.integers(-6, 8))


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(a=st.lists(ints, min_size=1, max_size=15), data=st.data())
def test_fused_equals_pandera(tmp_path_factory, a, data):
    n = len(a)
    b = data.draw(st.lists(ints, min_size=n, max_size=n))
    s = data.draw(st.lists(st.one_of(st.none(), st.text("xyz", max_size=5)), min_size=n, max_size=n))
    tmp = tmp_path_factory.mktemp("agree")
    (tmp / "c.yaml").write_text(CONTRACT)
    df = pl.DataFrame({"a": a, "b": b, "s": s}, schema={"a": pl.Int64, "b": pl.Int64, "s": pl.String})
    report = audit(write(tmp, df), tmp / "c.yaml")
    ours: dict[tuple, set] = {}
    for f in found(report):
        ours.setdefault((f.check, f.column), set()).update(f.rows)
    ref: dict[tuple, set] = {}
    for (check, col, _name), rows in validate_with_pandera(load_contract(str(tmp / "c.yaml")), df.lazy()).items():
        ref.setdefault((check, col), set()).update(rows)
    assert ours == ref
